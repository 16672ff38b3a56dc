"""Does ``infer_opt.profilers.timing.measure`` agree with established timers?

Times a few kernels (matmul 256/512/1024, add over 4M floats, softmax 2048×1024) with
``measure`` and with ``torch.utils.benchmark.Timer`` (``blocked_autorange`` and
``adaptive_autorange``, medians), plus, when CUDA and triton are present,
``triton.testing.do_bench`` and ``do_bench_cudagraph`` — all in one process, interleaved
kernel by kernel and round by round (the order of the timers alternates between rounds) so
drift and other load hit every timer alike. Each timer spends about 0.3 s per kernel. Prints
a markdown table of medians over rounds and the ratios ours/theirs (median of the per-round
ratios); target: within 5%.

    python benchmarks/bench_timer_agreement.py [--device auto] [--rounds 5] [--threads N]

Like is compared with like (:data:`KIND`, :data:`COMPARISONS`):

* **block** — the time of a block of back-to-back calls divided by its calls: ``Timer``
  (both modes; it synchronises around each block) against ``measure`` batching calls into
  samples of about 1 ms (``min_sample_time_s``).
* **per call, flushed** (CUDA) — an event pair around every call, the L2 flushed before
  each: ``do_bench`` against ``measure(flush_cache=True)``.
* **graph** (CUDA) — calls replayed from a CUDA graph, caches warm: ``do_bench_cudagraph``
  against ``measure(cuda_graph=True)`` with 10 calls per graph.

Expected differences between the kinds, which are not timer bugs: per-call event timing adds
two ``cudaEventRecord`` per call, so a host-bound kernel (under ~10 µs, launched faster than
the host can enqueue it) reads a few µs higher per call than a block average; a flushed call
reads slower than a warm one by the time to refetch its inputs from HBM; a graph replay drops
the launch gaps a block still has. The table's informational column "per call / block" shows
the first of these; on the CPU (one clock read per call) it is within noise for these kernels.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
from collections.abc import Callable
from typing import Any

import torch

from infer_opt.profilers.device import device_name, resolve_device
from infer_opt.profilers.timing import measure

TOLERANCE = 0.05
#: ours' samples batch calls until a sample lasts about this long (block timing)
BLOCK_SAMPLE_S = 1e-3
#: calls per CUDA graph for the graph comparison
GRAPH_CALLS = 10

#: what each column times: only columns of one kind are compared
KIND = {
    "ours (block)": "block",
    "Timer.blocked": "block",
    "Timer.adaptive": "block",
    "ours (per call)": "per-call",
    "ours (per call, flushed)": "per-call-flushed",
    "do_bench": "per-call-flushed",
    "ours (graph)": "graph",
    "do_bench_cudagraph": "graph",
}
#: (ours, theirs) pairs judged against TOLERANCE, and the CUDA-only ones
COMPARISONS = [("ours (block)", "Timer.blocked"), ("ours (block)", "Timer.adaptive")]
CUDA_COMPARISONS = [("ours (per call, flushed)", "do_bench"), ("ours (graph)", "do_bench_cudagraph")]
#: shown, not judged: how much per-call timing adds over a block average
INFORMATIONAL = [("ours (per call)", "ours (block)")]


def columns(cuda: bool) -> list[str]:
    cols = ["ours (block)", "Timer.blocked", "Timer.adaptive", "ours (per call)"]
    cuda_cols = ["ours (per call, flushed)", "do_bench", "ours (graph)", "do_bench_cudagraph"]
    return [*cols, *cuda_cols] if cuda else cols


def comparisons(cuda: bool) -> list[tuple[str, str]]:
    return COMPARISONS + (CUDA_COMPARISONS if cuda else [])


def ours_settings(column: str) -> dict[str, Any]:
    """``measure`` options of each of our columns (the rest as in :func:`ours`)."""
    return {
        "ours (block)": {"min_sample_time_s": BLOCK_SAMPLE_S},
        "ours (per call)": {},
        "ours (per call, flushed)": {"flush_cache": True},
        "ours (graph)": {"cuda_graph": True, "calls_per_sample": GRAPH_CALLS},
    }[column]


def kernels(dev: torch.device) -> dict[str, Callable[[], object]]:
    g = torch.Generator(device=dev).manual_seed(0)
    out: dict[str, Callable[[], object]] = {}
    for n in (256, 512, 1024):
        a = torch.randn(n, n, device=dev, generator=g)
        b = torch.randn(n, n, device=dev, generator=g)
        c = torch.empty(n, n, device=dev)
        out[f"matmul {n}"] = lambda a=a, b=b, c=c: torch.mm(a, b, out=c)
    n = 4 * 2**20
    x = torch.randn(n, device=dev, generator=g)
    y = torch.randn(n, device=dev, generator=g)
    z = torch.empty(n, device=dev)
    out["add 4M"] = lambda: torch.add(x, y, out=z)
    s = torch.randn(2048, 1024, device=dev, generator=g)
    out["softmax 2048×1024"] = lambda: torch.softmax(s, dim=-1)
    return out


def ours(fn: Callable[[], object], dev: torch.device, column: str) -> float:
    # about as long as blocked_autorange(min_run_time=0.3): a tight target keeps it going
    # until the 0.3 s cap
    m = measure(
        fn,
        device=dev,
        warmup=10,
        reps=None,
        target_rel_iqr=0.002,
        min_reps=20,
        max_reps=20_000,
        max_time_s=0.3,
        **ours_settings(column),
    )
    return m.summary.median_s


def timer(fn: Callable[[], object], adaptive: bool) -> float:
    from torch.utils.benchmark import Timer

    t = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    if adaptive:
        return t.adaptive_autorange(threshold=0.1, min_run_time=0.05, max_run_time=2.0).median
    return t.blocked_autorange(min_run_time=0.3).median


def triton_bench(fn: Callable[[], object], graph: bool) -> float | None:
    try:
        from triton.testing import do_bench, do_bench_cudagraph
    except ImportError:
        return None
    if graph:
        # do_bench_cudagraph refuses to capture on the default stream
        with torch.cuda.stream(torch.cuda.Stream()):
            try:
                ms = do_bench_cudagraph(fn, rep=100, return_mode="median")
            except TypeError:  # older triton: no return_mode (a mean)
                ms = do_bench_cudagraph(fn, rep=100)
        return float(ms) * 1e-3
    try:
        ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
    except TypeError:  # older triton: no return_mode
        ms = do_bench(fn, warmup=25, rep=100, quantiles=[0.5])
    return float(ms) * 1e-3


def _runners(fn: Callable[[], object], dev: torch.device, cuda: bool) -> list[tuple[str, Callable[[], Any]]]:
    out: list[tuple[str, Callable[[], Any]]] = []
    for column in columns(cuda):
        if column.startswith("ours"):
            out.append((column, lambda c=column: ours(fn, dev, c)))
        elif column.startswith("Timer"):
            out.append((column, lambda a=column.endswith("adaptive"): timer(fn, adaptive=a)))
        else:
            out.append((column, lambda g=column.endswith("cudagraph"): triton_bench(fn, graph=g)))
    return out


def _ratio(row: dict[str, list[float]], a: str, b: str) -> float | None:
    if not row[a] or not row[b]:
        return None
    return statistics.median(x / y for x, y in zip(row[a], row[b], strict=False))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="auto")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = resolve_device(args.device)
    cuda = dev.type == "cuda"
    cases = kernels(dev)
    cols = columns(cuda)
    times: dict[str, dict[str, list[float]]] = {k: {c: [] for c in cols} for k in cases}
    for round_ in range(args.rounds):
        for name, fn in cases.items():
            steps = _runners(fn, dev, cuda)
            # alternate the order every round so slow drift favours no timer
            for column, run in steps if round_ % 2 == 0 else steps[::-1]:
                value = run()
                if value is not None:
                    times[name][column].append(value)

    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    print(f"command: python {' '.join(sys.argv)}")
    print(
        f"machine: {device_name(dev)} ({platform.machine()}, {os.cpu_count()} CPUs), "
        f"torch {torch.__version__}, torch threads {torch.get_num_threads()}, load average {load[0]}"
    )
    print(
        f"date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; "
        f"rounds: {args.rounds} (medians over rounds)\n"
    )
    pairs = comparisons(cuda)
    shown = pairs + INFORMATIONAL
    header = "| kernel | " + " | ".join(f"{c} (µs)" for c in cols) + " | "
    header += (
        " | ".join(f"{a} / {b}" + (" (info)" if (a, b) in INFORMATIONAL else "") for a, b in shown) + " |"
    )
    print(header)
    print("|---" * (1 + len(cols) + len(shown)) + "|")
    worst = 0.0
    for name, row in times.items():
        cells = [f"{statistics.median(row[c]) * 1e6:.1f}" if row[c] else "—" for c in cols]
        ratios = []
        for a, b in shown:
            ratio = _ratio(row, a, b)
            if ratio is not None and (a, b) in pairs:
                worst = max(worst, abs(ratio - 1))
            ratios.append("—" if ratio is None else f"{ratio:.3f}")
        print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    verdict = "within" if worst <= TOLERANCE else "OUTSIDE"
    print(
        f"\nlargest like-with-like disagreement {100 * worst:.1f}% "
        f"({verdict} the {100 * TOLERANCE:.0f}% target)"
    )
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    raise SystemExit(main())
