"""Is the fitted roofline consistent with the kernels it was fitted to?

Runs the quick kernel suite (as ``infer-opt roofline`` does with no file), fits
``t ≈ t0 + max(F/R, Q/b)`` and compares, in the same run:

* fitted R against the best matmul rate (target: within 25%),
* fitted b against the best copy rate (target: within 25%),
* the fit's median |predicted − measured| / measured (target: under 30%),

and reports the quick suite's wall time. ``--repeats N`` runs it N times and prints
every run plus the median of each figure (the machine may be shared and noisy).

    python benchmarks/bench_roofline_sanity.py [--device auto] [--dtype float32] [--repeats 3] [--threads N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys

import torch

from infer_opt.cost_models.roofline import default_fit_families, fit_roofline
from infer_opt.profilers import kernels as K
from infer_opt.profilers.device import device_name, parse_dtype, resolve_device
from infer_opt.results.kernels import SuiteSettings


def one_run(dev: torch.device, dtype: torch.dtype, flush: bool) -> dict[str, float]:
    kind = "cuda" if dev.type == "cuda" else "cpu"
    cases = K.all_cases(kind, "quick")
    result = K.run_suite(cases, dev, dtype, SuiteSettings(flush_cache=flush), all_known=cases)
    points = K.kernel_points(result)
    fit = fit_roofline(points, bootstrap=200, fit_families=default_fit_families(points))
    best_mm = max(r.achieved_flops_per_s for r in result.rows if r.name == "matmul" and r.time_s)
    best_copy = max(r.achieved_bytes_per_s for r in result.rows if r.name == "copy" and r.time_s)
    return {
        "wall_s": result.wall_s,
        "R": fit.compute_rate_flops,
        "best_matmul": best_mm,
        "R/best": fit.compute_rate_flops / best_mm,
        "b": fit.bandwidth_bytes_per_s,
        "best_copy": best_copy,
        "b/best": fit.bandwidth_bytes_per_s / best_copy,
        "t0": fit.launch_overhead_s,
        "mare": fit.median_abs_rel_error,
        "mare_all": fit.median_abs_rel_error_all,
        "skipped": float(sum(r.time_s is None for r in result.rows)),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--l2-flush", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = resolve_device(args.device)
    dtype = parse_dtype(args.dtype, dev)
    runs = [one_run(dev, dtype, args.l2_flush) for _ in range(args.repeats)]
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    print(f"command: python {' '.join(sys.argv)}")
    print(
        f"machine: {device_name(dev)} ({platform.machine()}, {os.cpu_count()} CPUs), "
        f"torch {torch.__version__}, "
        f"torch threads {torch.get_num_threads()}, dtype {args.dtype}, load average {load[0]}"
    )
    print(f"date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC\n")
    print(
        "| run | quick suite wall | fitted R | best matmul | R / best | fitted b | best copy | b / best "
        "| t0 | median abs rel error (fitted) | (all kernels) |"
    )
    print("|---" * 11 + "|")

    def line(label: str, r: dict[str, float]) -> str:
        return (
            f"| {label} | {r['wall_s']:.1f} s | {r['R'] / 1e9:.1f} GFLOP/s "
            f"| {r['best_matmul'] / 1e9:.1f} GFLOP/s | {r['R/best']:.3f} | {r['b'] / 1e9:.1f} GB/s "
            f"| {r['best_copy'] / 1e9:.1f} GB/s | {r['b/best']:.3f} "
            f"| {r['t0'] * 1e6:.2f} µs | {100 * r['mare']:.1f}% | {100 * r['mare_all']:.1f}% |"
        )

    for i, r in enumerate(runs, 1):
        print(line(str(i), r))
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(line("median", med))
    ok = abs(med["R/best"] - 1) <= 0.25 and abs(med["b/best"] - 1) <= 0.25 and med["mare"] < 0.30
    print(
        f"\ntargets (median over runs): |R/best matmul - 1| <= 25%, |b/best copy - 1| <= 25%, "
        f"median error < 30% -> {'met' if ok else 'NOT met'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
