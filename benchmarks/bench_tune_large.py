"""Time and peak memory of the whole ``infer-opt tune capture-sizes`` command on many distinct
batch sizes (issue 42: 30,000 sizes ran past 100 s at 3.9 GB, 10,000 took 17 s).

Writes a seeded batch-size CSV with D distinct sizes (1..D, log-normal counts) and a cost CSV
(powers of two up to 2·D; ``--bumpy`` makes it non-monotone, +20% on every other point), then runs
the command in a subprocess and reads its peak RSS (``ru_maxrss`` of the child).

    python benchmarks/bench_tune_large.py [--sizes 10000 30000] [--bumpy]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SEED = 20261204


def write_inputs(folder: Path, d: int, bumpy: bool) -> tuple[Path, Path]:
    rng = np.random.default_rng(SEED)
    sizes = np.arange(1, d + 1)
    counts = np.round(rng.lognormal(0.0, 1.0, d) * 100) + 1
    batches = folder / f"batches_{d}.csv"
    batches.write_text(
        "batch_size,count\n" + "".join(f"{s},{c:.0f}\n" for s, c in zip(sizes, counts, strict=True))
    )
    grid = 2 ** np.arange(int(np.log2(2 * d)) + 1)
    ms = 2.0 + 1e-3 * grid + 2e-6 * grid**2
    if bumpy:
        ms = ms * (1 + 0.2 * (np.arange(grid.size) % 2))
    cost = folder / f"cost_{d}.csv"
    cost.write_text(
        "batch_size,time_ms\n" + "".join(f"{g},{float(t)!r}\n" for g, t in zip(grid, ms, strict=True))
    )
    return batches, cost


def run(batches: Path, cost: Path) -> tuple[float, float, int]:
    cmd = [sys.executable, "-m", "infer_opt", "tune", "capture-sizes", "--batches", str(batches)]
    cmd += ["--cost-file", str(cost), "--eager-overhead", "1ms", "--json"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    wall = time.perf_counter() - start
    # the largest child so far: the sizes run in increasing order, so this one's peak
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, peak_kib / 1024, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000])
    parser.add_argument("--bumpy", action="store_true")
    args = parser.parse_args()
    print("| distinct batch sizes | cost curve | wall | peak RSS | exit |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for d in sorted(args.sizes):
            batches, cost = write_inputs(Path(tmp), d, args.bumpy)
            wall, peak_mib, rc = run(batches, cost)
            kind = "non-monotone" if args.bumpy else "increasing"
            print(f"| {d} | {kind} | {wall:.1f} s | {peak_mib:.0f} MiB | {rc} |")


if __name__ == "__main__":
    main()
