"""How much slower is a small operator right after a large matmul than in a tight loop?

The calibrated predictor times small operators (elementwise, reductions, views) hot: each
case twice in a row, the second kept. In a model step the same operator runs after matmuls
that stream megabytes of weights, and ``validate`` finds the small operators and the host time
of the larger models under-predicted (docs/benchmarks.md). This script isolates that effect:
three small ops (``mul`` and ``silu`` of 2,048 floats, ``mean`` over 768) are timed under
``torch.profiler`` as ``profile`` times operators (self CPU time per call, mean over 50
rounds, ``--rounds`` repeats with the median reported) after each of these "scrubs":

* nothing (the hot loop the calibration measures),
* a plain read (``sum``) of 4 and 32 MiB — what the calibration's warm state does,
* ``F.linear`` of one row over a 4 MiB and a 6 MiB weight, and two 4 MiB ones — a decode step.

    python docs/notebook/scripts/bench_dispatch_context.py [--rounds 5] [--threads 1]

Prints a markdown table (µs per call and the ratio to the hot loop).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

OPS = ("aten::mul", "aten::silu", "aten::mean")


def scrubs() -> dict[str, Callable[[], object]]:
    row, x768 = torch.randn(1, 1024), torch.randn(1, 768)
    w4, w4b, w6 = torch.randn(1024, 1024), torch.randn(1024, 1024), torch.randn(2048, 768)
    sum4, sum32 = torch.ones(2**20), torch.ones(2**23)
    return {
        "nothing (hot loop)": lambda: None,
        "sum over 4 MiB": sum4.sum,
        "sum over 32 MiB": sum32.sum,
        "linear, 4 MiB weight": lambda: F.linear(row, w4),
        "linear, 6 MiB weight": lambda: F.linear(x768, w6),
        "two linears, 8 MiB": lambda: (F.linear(row, w4), F.linear(row, w4b)),
    }


def one_round(scrub: Callable[[], object]) -> dict[str, float]:
    a, b, c = torch.randn(1, 1, 2048), torch.randn(1, 1, 2048), torch.randn(1, 1, 768)

    def run() -> None:
        for _ in range(50):
            scrub()
            torch.mul(a, b)
            F.silu(a)
            c.mean(-1, keepdim=True)

    run()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    events = {e.key: e for e in prof.key_averages()}
    return {op: events[op].self_cpu_time_total / events[op].count for op in OPS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; {platform.machine()}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; torch {torch.__version__}"
    )
    print(
        "- command: python docs/notebook/scripts/bench_dispatch_context.py "
        f"--rounds {args.rounds} --threads {args.threads}\n"
    )
    cases = scrubs()
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, scrub in cases.items():  # interleaved: drift hits every scrub alike
            samples[name].append(one_round(scrub))
    medians = {
        name: {op: statistics.median(r[op] for r in rounds) for op in OPS} for name, rounds in samples.items()
    }
    hot = medians["nothing (hot loop)"]
    print(
        "| before each small op | "
        + " | ".join(f"{op[6:]} (µs)" for op in OPS)
        + " | × hot (mean of the three) |"
    )
    print("|---|" + "---:|" * (len(OPS) + 1))
    for name, m in medians.items():
        ratio = statistics.fmean(m[op] / hot[op] for op in OPS)
        print(f"| {name} | " + " | ".join(f"{m[op]:.2f}" for op in OPS) + f" | {ratio:.2f} |")


if __name__ == "__main__":
    main()
