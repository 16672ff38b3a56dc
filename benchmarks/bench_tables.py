"""Speed of tabular input: a 10⁶-row bucket CSV through ``infer-opt amortize --buckets``.

Writes a seeded CSV of 10⁶ buckets (``bucket,compile_s,calls,eager_ms,compiled_ms``; bare
numbers, and a second file with the units in every cell: ``3s``, ``2ms``, ``1500us``), then
times, as the median of ``--runs`` runs each (after one warm-up run):

* the reader alone (``amortization.read_bucket_csv``: pandas' C parser, numpy checks);
* reading and deciding (``read_bucket_csv`` + ``amortize_buckets``, vectorised);
* the CLI end to end in a subprocess, console output (at most 200 rows shown), ``--csv`` and
  ``--json`` (every row written).

The first measurement is repeated at the end (A/A) to show how much the machine moved.

    python benchmarks/bench_tables.py [--runs 3] [--rows 1000000]

Prints a markdown table plus the machine details for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from infer_opt.cost_models import amortization

SEED = 20261130


def write_buckets(path: Path, rows: int, units: bool) -> None:
    """``rows`` buckets: compile 1–60 s, calls 0–10⁶, eager 0.1–20 ms, compiled 50–110% of it."""
    rng = np.random.default_rng(SEED)
    compile_s = np.round(rng.uniform(1, 60, rows), 2)
    calls = rng.integers(0, 1_000_000, rows)
    eager_ms = np.round(rng.uniform(0.1, 20, rows), 3)
    compiled_ms = np.round(eager_ms * rng.uniform(0.5, 1.1, rows), 3)
    with path.open("w") as out:
        out.write("bucket,compile_s,calls,eager_ms,compiled_ms\n")
        if units:
            for i in range(rows):
                out.write(f"b{i},{compile_s[i]}s,{calls[i]},{eager_ms[i]}ms,{compiled_ms[i] * 1000:.0f}us\n")
        else:
            for i in range(rows):
                out.write(f"b{i},{compile_s[i]},{calls[i]},{eager_ms[i]},{compiled_ms[i]}\n")


def median_time(fn: Callable[[], object], runs: int) -> tuple[float, float, float]:
    """(median, min, max) wall seconds over ``runs`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times)


def _cli(args: list[str]) -> list[str]:
    script = shutil.which("infer-opt")
    return [script, *args] if script else [sys.executable, "-m", "infer_opt", *args]


def _run(args: list[str]) -> Callable[[], object]:
    return lambda: subprocess.run(
        _cli(args), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1_000_000)
    opts = parser.parse_args()
    rows: list[tuple[str, tuple[float, float, float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        plain, with_units = Path(tmp) / "buckets.csv", Path(tmp) / "buckets-units.csv"
        write_buckets(plain, opts.rows, units=False)
        write_buckets(with_units, opts.rows, units=True)
        text = plain.read_text()
        units_text = with_units.read_text()

        def read(t: str = text) -> object:
            return amortization.read_bucket_csv(t, source="buckets.csv")

        first = ("`read_bucket_csv` (bare numbers)", median_time(read, opts.runs))
        rows.append(first)
        rows.append(
            ("`read_bucket_csv` (units in every cell)", median_time(lambda: read(units_text), opts.runs))
        )
        rows.append(
            (
                "`read_bucket_csv` + `amortize_buckets`",
                median_time(lambda: amortization.amortize_buckets(read(), source="b"), opts.runs),
            )
        )
        out = Path(tmp) / "out"
        for label, extra in (
            ("console", []),
            ("--csv FILE", ["--csv", str(out) + ".csv"]),
            ("--json", ["--json"]),
        ):
            rows.append(
                (f"`infer-opt amortize --buckets buckets.csv {' '.join(extra[:1])}` ({label})",
                 median_time(_run(["amortize", "--buckets", str(plain), *extra]), opts.runs))
            )  # fmt: skip
        rows.append((first[0] + " — A/A repeat", median_time(read, opts.runs)))
        rows.append(("`infer-opt --version` (start-up only)", median_time(_run(["--version"]), opts.runs)))

    now = dt.datetime.now(dt.timezone.utc)
    print(f"- date: {now:%Y-%m-%d %H:%M} UTC; rows: {opts.rows:,}; runs: {opts.runs}")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"- machine: {platform.machine()}, {os.cpu_count()} cores, load average {load}")
    import pandas as pd

    print(f"- python {platform.python_version()}, pandas {pd.__version__}, numpy {np.__version__}")
    print()
    print("| what | median (s) | min (s) | max (s) |\n|---|---:|---:|---:|")
    for name, (med, lo, hi) in rows:
        print(f"| {name} | {med:.2f} | {lo:.2f} | {hi:.2f} |")


if __name__ == "__main__":
    main()
