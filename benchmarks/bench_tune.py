"""Speed of ``tune capture-sizes``: the exact capture-list DP over a distribution of batch sizes
1..4096 (every size observed, seeded log-normal counts) with a budget of 64 captures, and
``tune speculative`` over the same 4096 sizes with K = 8.

Times, as the median of ``--runs`` runs each:

* the DP alone (``capture_sizes.optimal_lists``, K = 64, monotone cost: divide and conquer);
* the whole core (``capture_tuning.tune``: DP, current vLLM list, buckets, audit, break-even);
* the same DP on a non-monotone cost (the O(K·D²) numpy fallback);
* ``speculative_tuning.tune`` (4096 sizes, k = 0..8).

    python benchmarks/bench_tune.py [--runs 5]

Prints a markdown table plus the machine details for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np

from infer_opt.cost_models import capture_sizes as cs
from infer_opt.cost_models import capture_tuning as ct
from infer_opt.cost_models import speculative_tuning as st

SEED = 20261202


def inputs() -> tuple[cs.Distribution, cs.CostCurve, cs.CostCurve]:
    rng = np.random.default_rng(SEED)
    sizes = np.arange(1, 4097)
    counts = rng.lognormal(0.0, 1.0, sizes.size) * np.exp(-sizes / 800.0) * 1000 + 1
    dist = cs.distribution(sizes, np.round(counts))
    grid = 2 ** np.arange(13)
    curve = cs.cost_curve(grid, 2e-3 + 1e-6 * grid + 2e-9 * grid**2)
    bumpy = cs.cost_curve(grid, (2e-3 + 1e-6 * grid) * (1 + 0.2 * (np.arange(13) % 2)))
    return dist, curve, bumpy


def median_s(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    dist, curve, bumpy = inputs()
    prob = cs.problem(dist, curve, eager_overhead_s=1e-3, eager=None)
    prob_bumpy = cs.problem(dist, bumpy, eager_overhead_s=1e-3, eager=None)
    current, label = cs.engine_default("vllm", 512)
    inp = ct.Inputs(
        dist=dist, curve=curve, current=current, current_source=label, max_captures=64, eager_overhead_s=1e-3
    )
    alphas = [0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5, 0.45]
    rows = [
        (
            "capture DP, D = 4096, K = 64 (monotone cost: divide and conquer)",
            median_s(lambda: cs.optimal_lists(prob, 64), runs),
        ),
        ("tune capture-sizes core, K = 64", median_s(lambda: ct.tune(inp), runs)),
        (
            "capture DP, non-monotone cost (dense)",
            median_s(lambda: cs.optimal_lists(prob_bumpy, 64), max(1, runs // 2)),
        ),
        (
            "tune speculative core, 4096 sizes, K = 8",
            median_s(lambda: st.tune(alphas, curve, curve, dist), runs),
        ),
    ]
    print(
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, median of {runs} runs\n"
    )
    print("| what | median |\n|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds * 1e3:.0f} ms |")


if __name__ == "__main__":
    main()
