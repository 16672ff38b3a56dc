"""Where does a small model's step time go beyond its operators? (docs/benchmarks.md, "Two speeds")

For a built-in model's decode step (default tiny, batch 1 over 700 cached tokens), round after
round: the dispatch probe (ten hot (1×128)·(128×128) matmuls, run once and timed the second
time), the step as ``profile`` runs it (median of 100 calls), a flat replay of the step's aten
calls on the same tensors with no Python model code between them (median of 100), and the sum
over its calls of each call's time hot (run twice, the second timed; median of 30 sums) — then
the probe again. The step against the replay is what the model's own Python costs; the replay
against the hot sum is what running the calls in sequence costs (each one's code and data
displaced by the others); the probes say at which of the machine's speeds the round ran.

    python docs/notebook/scripts/bench_step_replay.py [--model tiny] [--context 700] [--rounds 8]
        [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch
from bench_machine_drift import median_ns, probe_ns
from torch.utils._python_dispatch import TorchDispatchMode

from infer_opt.profilers import model_profile, models


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.calls.append((func, args, kwargs or {}))
        return func(*args, **(kwargs or {}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--context", type=int, default=700)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    loaded = models.load_model(args.model, batch_size=1, seq_len=8)
    step = model_profile.build_step(loaded, "decode", context=args.context, new_tokens=1, device="cpu").fn
    recorder = _Recorder()
    x, w = torch.randn(1, 128), torch.randn(128, 128)

    def probe() -> float:
        return probe_ns(x, w) / 1e3

    with torch.no_grad():
        for _ in range(20):
            step()
        with recorder:
            step()
        calls = recorder.calls

        def replay() -> None:
            for func, a, k in calls:
                func(*a, **k)

        def hot_sum() -> float:
            total = 0
            for func, a, k in calls:
                func(*a, **k)
                begin = time.perf_counter_ns()
                func(*a, **k)
                total += time.perf_counter_ns() - begin
            return total / 1e3

        print(f"# {args.model} decode 1 × {args.context}: {len(calls)} aten calls; µs")
        for _ in range(args.rounds):
            before = probe()
            s, r = median_ns(step, 100) / 1e3, median_ns(replay, 100) / 1e3
            h = statistics.median(hot_sum() for _ in range(30))
            print(
                f"probe {before:6.1f}  step {s:8.1f}  replay {r:8.1f}  Σ hot {h:8.1f}  "
                f"step/replay {s / r:5.2f}  replay/Σ hot {r / h:5.2f}  probe {probe():6.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
