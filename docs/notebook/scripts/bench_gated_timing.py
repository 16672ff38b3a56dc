"""Would timing only at the machine's fast level make a step's measurement repeatable? (a
feasibility test for level-gated timing; docs/benchmarks.md, "Two speeds")

On a VM whose speed switches between two levels, a step timed as ``profile`` times it (the
median of ``--reps`` back-to-back repetitions) lands on one level or the other. Gated: each
repetition is kept only when the dispatch probe (ten (1×128)·(128×128) matmuls, run once and
timed the second time) just before it reads within ``FAST`` × the fast level (the probe's 5th
percentile over a first second), until ``--reps`` are kept. For ``--seconds``, a measurement of
each kind in turn, with a pause between: prints, per step and kind, the spread of the
measurements (p90 / p10, max / min) and what a gated one costs in wall time.

    python docs/notebook/scripts/bench_gated_timing.py [--seconds 60] [--reps 10] [--threads 1] [--out FILE]
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
from bench_machine_drift import median_ns, probe_ns, start, steps_of

FAST = 1.2
STEPS = (("tiny", "decode", 1), ("llama-tiny", "prefill", 1))


def _gated(fn: Callable[[], object], reps: int, probe: Callable[[], int], limit: float) -> tuple[float, int]:
    """(median of ``reps`` kept repetitions, repetitions run)."""
    kept: list[int] = []
    tried = 0
    while len(kept) < reps and tried < 50 * reps:
        fast = probe() <= limit
        fn()
        begin = time.perf_counter_ns()
        fn()
        elapsed = time.perf_counter_ns() - begin
        tried += 1
        if fast:
            kept.append(elapsed)
    return (statistics.median(kept) if kept else float("nan")), tried


def main() -> None:
    args = start(__doc__, 60.0, reps=10)
    x, w = torch.randn(1, 128), torch.randn(128, 128)

    def probe() -> int:
        return probe_ns(x, w)

    warm = [probe() for _ in range(2000)]
    limit = FAST * float(np.percentile(warm, 5))
    steps = steps_of(STEPS, seq_len=64, context=300)
    rows: dict[str, dict[str, list[float]]] = {k: {"plain": [], "gated": [], "gated_wall": []} for k in steps}
    with torch.no_grad():
        for fn in steps.values():
            for _ in range(20):
                fn()
        end = time.perf_counter() + args.seconds
        while time.perf_counter() < end:
            for key, fn in steps.items():
                rows[key]["plain"].append(median_ns(fn, args.reps))
                time.sleep(0.3)
                begin = time.perf_counter()
                median, _ = _gated(fn, args.reps, probe, limit)
                rows[key]["gated"].append(median)
                rows[key]["gated_wall"].append(time.perf_counter() - begin)
                time.sleep(0.3)
    out = {}
    for key, r in rows.items():
        out[key] = {}
        for kind in ("plain", "gated"):
            v = np.array([t for t in r[kind] if t == t])
            out[key][kind] = {
                "n": len(v),
                "median_us": float(np.median(v) / 1e3),
                "p90_over_p10": float(np.percentile(v, 90) / np.percentile(v, 10)),
                "max_over_min": float(v.max() / v.min()),
            }
            print(
                f"{key:22s} {kind:6s} n={len(v):3d}  median {np.median(v) / 1e3:9.1f} µs  "
                f"p90/p10 {out[key][kind]['p90_over_p10']:.2f}  max/min {out[key][kind]['max_over_min']:.2f}"
            )
        out[key]["gated_wall_s"] = statistics.median(r["gated_wall"])
        print(f"{key:22s} a gated measurement took {out[key]['gated_wall_s']:.3f} s (median)")
    if args.out:
        args.out.write_text(json.dumps({"limit_ns": limit, "steps": out}, indent=1))


if __name__ == "__main__":
    main()
