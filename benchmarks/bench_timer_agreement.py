"""Does ``infer_opt.profilers.timing.measure`` agree with established timers?

Times a few kernels (matmul 256/512/1024, add over 4M floats, softmax 2048×1024) with
``measure`` and with ``torch.utils.benchmark.Timer`` (``blocked_autorange`` and
``adaptive_autorange``, medians), plus ``triton.testing.do_bench`` (median) when CUDA and
triton are present — all in one process, interleaved kernel by kernel and round by round (the order of the
timers alternates between rounds) so drift and other load hit every timer alike. Each
timer spends about 0.3 s per kernel. Prints a markdown table of medians over rounds and
the ratios ours/theirs (median of the per-round ratios); target: within 5%.

    python benchmarks/bench_timer_agreement.py [--device auto] [--rounds 5] [--threads N]

do_bench clears the L2 before every call, so it is compared with ``measure(...,
flush_cache=True)``; Timer does not, so it is compared with ``measure`` without a flush.
Timer pins torch to one thread unless told otherwise: it is given the same thread count.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
from collections.abc import Callable

import torch

from infer_opt.profilers.device import device_name, resolve_device
from infer_opt.profilers.timing import measure

TOLERANCE = 0.05


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


def ours(fn: Callable[[], object], dev: torch.device, flush: bool = False) -> float:
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
        flush_cache=flush,
    )
    return m.summary.median_s


def timer(fn: Callable[[], object], adaptive: bool) -> float:
    from torch.utils.benchmark import Timer

    t = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    if adaptive:
        return t.adaptive_autorange(threshold=0.1, min_run_time=0.05, max_run_time=2.0).median
    return t.blocked_autorange(min_run_time=0.3).median


def do_bench(fn: Callable[[], object]) -> float | None:
    try:
        from triton.testing import do_bench as bench
    except ImportError:
        return None
    try:
        ms = bench(fn, warmup=25, rep=100, return_mode="median")
    except TypeError:  # older triton: no return_mode
        ms = bench(fn, warmup=25, rep=100, quantiles=[0.5])
    return float(ms) * 1e-3


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
    columns = ["ours", "Timer.blocked", "Timer.adaptive"]
    if cuda:
        columns += ["ours (L2 flush)", "do_bench"]
    times: dict[str, dict[str, list[float]]] = {k: {c: [] for c in columns} for k in cases}
    for round_ in range(args.rounds):
        for name, fn in cases.items():
            row = times[name]
            steps: list[tuple[str, Callable[[], float | None]]] = [
                ("ours", lambda fn=fn: ours(fn, dev)),
                ("Timer.blocked", lambda fn=fn: timer(fn, adaptive=False)),
                ("Timer.adaptive", lambda fn=fn: timer(fn, adaptive=True)),
            ]
            if cuda:
                steps += [
                    ("ours (L2 flush)", lambda fn=fn: ours(fn, dev, flush=True)),
                    ("do_bench", lambda fn=fn: do_bench(fn)),
                ]
            # alternate the order every round so slow drift favours no timer
            for column, run in steps if round_ % 2 == 0 else steps[::-1]:
                value = run()
                if value is not None:
                    row[column].append(value)

    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    print(f"command: python {' '.join(sys.argv)}")
    print(
        f"machine: {device_name(dev)} ({platform.machine()}, {os.cpu_count()} CPUs), "
        f"torch {torch.__version__}, "
        f"torch threads {torch.get_num_threads()}, load average {load[0]}"
    )
    print(
        f"date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; "
        f"rounds: {args.rounds} (medians over rounds)\n"
    )
    pairs = [("ours", "Timer.blocked"), ("ours", "Timer.adaptive")]
    if cuda:
        pairs.append(("ours (L2 flush)", "do_bench"))
    header = "| kernel | " + " | ".join(f"{c} (µs)" for c in columns) + " | "
    header += " | ".join(f"{a} / {b}" for a, b in pairs) + " |"
    print(header)
    print("|---" * (1 + len(columns) + len(pairs)) + "|")
    worst = 0.0
    for name, row in times.items():
        cells = [f"{statistics.median(row[c]) * 1e6:.1f}" if row[c] else "—" for c in columns]
        ratios = []
        for a, b in pairs:
            if not row[b]:
                ratios.append("—")
                continue
            ratio = statistics.median(x / y for x, y in zip(row[a], row[b], strict=False))
            worst = max(worst, abs(ratio - 1))
            ratios.append(f"{ratio:.3f}")
        print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    verdict = "within" if worst <= TOLERANCE else "OUTSIDE"
    print(f"\nlargest disagreement {100 * worst:.1f}% ({verdict} the {100 * TOLERANCE:.0f}% target)")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    raise SystemExit(main())
