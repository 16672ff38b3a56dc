"""What does torch.profiler's record of argument values cost the operators it times?

With ``record_shapes=True`` torch also records the values of scalar and list arguments (its
"concrete inputs"; the switch torch offers drops the lists: sizes, strides). ``profile``,
``calibrate`` and ``validate`` need the shapes (the match of profiler events to recorded calls
uses them) but not those values, and they turn the lists off
(:func:`infer_opt.profilers.op_recorder.lean_profiler_records`).
This script times the same steps both ways, alternating (on, off, on, off, ... ``--rounds``
pairs), each way through :func:`op_recorder.time_ops` exactly as ``profile`` times operators:

* minor page faults per profiled step (``getrusage`` between repetitions, inside the profiler
  session: not the trace's post-processing), and per step run plainly,
* the sum of the matched operators' times per step (what the category table adds up),
* the median over calls of (time with values recorded) / (time without), per call's median.

    python docs/notebook/scripts/bench_profiler_records.py [--rounds 3] [--reps 10] [--threads 1]

Prints a markdown table; the plain step time (no profiler, median of 10) is the reference the
operators' sum should stay under.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import os
import platform
import resource
import statistics
import time

import torch

from infer_opt.profilers import model_profile as mp
from infer_opt.profilers import models
from infer_opt.profilers import op_recorder as rec

#: (model, mode, batch, seq_len, context): a prefill with mid-size ops, a tiny prefill, a decode
POINTS = (
    ("llama-tiny", "prefill", 3, 200, 0),
    ("tiny", "prefill", 2, 128, 0),
    ("gpt2-small", "decode", 1, 1, 256),
)


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def profiled(step_fn, calls, reps: int, values: bool) -> tuple[list[float], float, float]:
    """Per-call medians, median faults per profiled step and the matched sum per step, recording
    argument values (``values``) or not."""
    original = rec.lean_profiler_records
    if values:
        rec.lean_profiler_records = contextlib.nullcontext  # the profiler as torch sets it up
    try:
        seen: list[int] = []  # faults after each repetition, read inside the profiler session
        timings = rec.time_ops(
            step_fn, calls, reps=reps, progress=lambda done, total: seen.append(minor_faults())
        )
        faults = statistics.median(b - a for a, b in itertools.pairwise(seen))
    finally:
        rec.lean_profiler_records = original
    medians = timings.median_per_call_s()
    return medians, faults, sum(medians)


def plain(step_fn, reps: int = 10) -> tuple[float, float]:
    with torch.no_grad():
        step_fn()
        before = minor_faults()
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            step_fn()
            times.append(time.perf_counter() - start)
    return statistics.median(times), (minor_faults() - before) / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"{dt.date.today()} · {platform.processor() or platform.machine()} · {os.cpu_count()} cores · "
        f"torch {torch.__version__} · {args.threads} thread(s) · {args.rounds} rounds × {args.reps} reps\n"
    )
    print(
        "| step | plain step | faults/step plain | faults/step, values on / off "
        "| ops' sum on / off | per-call ratio on/off (median, p10–p90) |"
    )
    print("|---|---:|---:|---:|---:|---|")
    for model, mode, batch, seq_len, context in POINTS:
        loaded = models.load_model(
            model, batch_size=batch, seq_len=seq_len, device="cpu", dtype=torch.float32
        )
        step = mp.build_step(loaded, mode, context=context or 128, new_tokens=8, device="cpu")
        calls = rec.record_ops(step.fn)
        plain_s, plain_faults = plain(step.fn)
        on_medians, off_medians, on_faults, off_faults, on_sums, off_sums = [], [], [], [], [], []
        for _ in range(args.rounds):
            for values in (True, False):
                medians, faults, total = profiled(step.fn, calls, args.reps, values)
                (on_medians if values else off_medians).append(medians)
                (on_faults if values else off_faults).append(faults)
                (on_sums if values else off_sums).append(total)
        on_call = [statistics.median(m[i] for m in on_medians) for i in range(len(calls))]
        off_call = [statistics.median(m[i] for m in off_medians) for i in range(len(calls))]
        ratios = sorted(a / b for a, b in zip(on_call, off_call, strict=True) if a > 0 and b > 0)
        deciles = statistics.quantiles(ratios, n=10)
        label = f"{model} {mode} {batch}×{seq_len}" + (f" ctx {context}" if context else "")
        print(
            f"| {label} | {plain_s * 1e3:.2f} ms | {plain_faults:.0f} "
            f"| {statistics.median(on_faults):.0f} / {statistics.median(off_faults):.0f} "
            f"| {statistics.median(on_sums) * 1e3:.2f} / {statistics.median(off_sums) * 1e3:.2f} ms "
            f"| {statistics.median(ratios):.2f} ({deciles[0]:.2f}–{deciles[-1]:.2f}) |",
            flush=True,
        )


if __name__ == "__main__":
    main()
