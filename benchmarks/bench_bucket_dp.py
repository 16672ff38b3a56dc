"""Speed of the exact bucket-design DP (``infer-opt buckets --optimize K``).

Generates 10⁶ lengths with about 4,000 distinct values (seeded log-normal, clipped to
1..4096), then times, as the median of ``--runs`` runs each:

* the core function ``bucketing.optimize`` on the raw lengths (aggregation to distinct
  values with counts, the DP for K = 16, the ladder comparison and the padding report);
* the DP alone (``optimal_waste_table``);
* the CLI end to end in a subprocess: ``infer-opt buckets FILE --optimize 16 --json``
  (start-up, reading and parsing the 10⁶-line file, the above, the JSON envelope).

    python benchmarks/bench_bucket_dp.py [--runs 5] [--k 16]

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

from infer_opt.cost_models import bucketing

N_LENGTHS = 1_000_000
SEED = 20240601


def make_lengths(n: int = N_LENGTHS, seed: int = SEED) -> np.ndarray:
    """Log-normal prompt lengths (median ≈ 900 tokens), clipped to 1..4096."""
    rng = np.random.default_rng(seed)
    return np.clip(np.rint(rng.lognormal(mean=6.8, sigma=0.8, size=n)), 1, 4096).astype(np.int64)


def median_time(fn: Callable[[], object], runs: int) -> tuple[float, float, float]:
    """(median, min, max) wall seconds over ``runs`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cli(args: list[str]) -> list[str]:
    script = shutil.which("infer-opt")
    return [script, *args] if script else [sys.executable, "-m", "infer_opt", *args]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--k", type=int, default=16)
    opts = parser.parse_args()

    lengths = make_lengths()
    sample = bucketing.sample_from_lengths(lengths)
    print(
        f"sample: {sample.total:,} lengths, {sample.distinct:,} distinct, "
        f"{int(sample.values[0])}..{sample.max_length}, K = {opts.k}, median of {opts.runs} runs"
    )
    rows = []
    for cost in ("linear", "quadratic"):
        core = median_time(
            lambda c=cost: bucketing.optimize(bucketing.sample_from_lengths(lengths), opts.k, cost=c),
            opts.runs,
        )
        dp = median_time(lambda c=cost: bucketing.optimal_waste_table(sample, opts.k, c), opts.runs)
        rows.append((f"`bucketing.optimize(1e6 lengths, K={opts.k}, cost={cost})`", core))
        rows.append((f"`optimal_waste_table(K={opts.k}, cost={cost})` (DP only)", dp))

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lengths.txt"
        path.write_text("\n".join(map(str, lengths.tolist())) + "\n")
        for cost in ("linear", "quadratic"):
            cmd = _cli(["buckets", str(path), "--optimize", str(opts.k), "--cost", cost, "--json"])
            cli = median_time(
                lambda cmd=cmd: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL), opts.runs
            )
            rows.append((f"`infer-opt buckets lengths.txt --optimize {opts.k} --cost {cost} --json`", cli))
        startup = median_time(
            lambda: subprocess.run(_cli(["--version"]), check=True, stdout=subprocess.DEVNULL), opts.runs
        )
        rows.append(("`infer-opt --version` (start-up only, for reference)", startup))

    print()
    print(f"- date: {dt.date.today().isoformat()}")
    print(f"- machine: {cpu_model()}, {os.cpu_count()} cores visible, {platform.platform()}")
    print(f"- python {platform.python_version()}, numpy {np.__version__}")
    print()
    print("| what | median (s) | min (s) | max (s) |\n|---|---:|---:|---:|")
    for name, (med, lo, hi) in rows:
        print(f"| {name} | {med:.3f} | {lo:.3f} | {hi:.3f} |")


if __name__ == "__main__":
    main()
