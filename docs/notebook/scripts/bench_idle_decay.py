"""Do the caches forget with time? (docs/benchmarks.md, "Caches that forget with time")

Each op is run (three times), then one of several preludes, then timed, the preludes interleaved
over ``--reps`` rounds: nothing (hot), a read of 4 or 64 MiB (what the calibration's warm
and far states do), or a busy wait of 1–30 ms — the core spinning in Python, touching next to
nothing. On a quiet machine waiting costs nothing; on a shared one other tenants evict the
core's caches while it waits, and an op left alone long enough is cold whatever this process
touched in between. Then, for tiny's prefill, each ``nn.Linear`` timed inside the step (forward
hooks) against the same call hot, interleaved: how much the step's own time between two
uses of a weight costs it. Medians, µs, and ratios to hot.

    python docs/notebook/scripts/bench_idle_decay.py [--reps 25] [--threads 1] [--out FILE]
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from bench_machine_drift import start

from infer_opt.profilers import models

WAITS_S = (1e-3, 3e-3, 10e-3, 30e-3)
READS = (4 << 20, 64 << 20)
#: calls of the op before each prelude (one left a 200×128 · 128×1024 linear at twice its
#: steady time after a 30 ms wait)
PRIME = 3


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _ops() -> dict[str, Callable[[], object]]:
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(1, 128, generator=g), torch.randn(128, 128, generator=g)
    h, head, bias = torch.randn(40, 128, generator=g), torch.randn(1024, 128, generator=g), torch.randn(1024)
    v = torch.randn(4096, generator=g)
    h200, wide, h40w, h200w = (
        torch.randn(*s, generator=g) for s in ((200, 128), (2304, 768), (40, 768), (200, 768))
    )
    return {
        "matmul 1×128 · 128×128": lambda: x @ w,
        "linear 40×128 · 128×1024": lambda: F.linear(h, head, bias),
        "linear 200×128 · 128×1024": lambda: F.linear(h200, head, bias),
        "linear 40×768 · 768×2304": lambda: F.linear(h40w, wide),
        "linear 200×768 · 768×2304": lambda: F.linear(h200w, wide),
        "layer norm 40×128": lambda: F.layer_norm(h, (128,)),
        "add, 4,096 values": lambda: v + 1.0,
    }


def _preludes() -> dict[str, Callable[[], object]]:
    pool = torch.randn(max(READS) // 4)
    out: dict[str, Callable[[], object]] = {"hot": lambda: None}
    for nbytes in READS:
        out[f"read {nbytes >> 20} MiB"] = lambda n=nbytes: pool[: n // 4].sum()
    for wait in WAITS_S:
        out[f"wait {wait * 1e3:g} ms"] = lambda s=wait: _spin(s)
    return out


def after_preludes(reps: int) -> dict[str, dict[str, float]]:
    """Per op, per prelude: the op's median time (µs) right after the prelude."""
    ops, preludes = _ops(), _preludes()
    times: dict[str, dict[str, list[float]]] = {op: {p: [] for p in preludes} for op in ops}
    for fn in ops.values():
        for _ in range(10):
            fn()
    for _ in range(reps):
        for op, fn in ops.items():
            for name, prelude in preludes.items():
                for _ in range(PRIME):  # the op just ran: between its calls lies the prelude alone
                    fn()
                prelude()
                begin = time.perf_counter()
                fn()
                times[op][name].append(time.perf_counter() - begin)
    return {op: {p: 1e6 * statistics.median(v) for p, v in by.items()} for op, by in times.items()}


def linears_in_step(reps: int) -> dict[str, dict[str, float]]:
    """tiny's prefill (1 × 40 tokens): each Linear's median time inside the step (forward hooks)
    and hot (the same call on the same input, ten in a row, the last eight), per round; µs."""
    loaded = models.load_model("tiny", batch_size=1, seq_len=40, device="cpu", dtype=torch.float32)
    linears = {n: m for n, m in loaded.model.named_modules() if isinstance(m, torch.nn.Linear)}
    inside: dict[str, list[float]] = {n: [] for n in linears}
    inputs: dict[str, torch.Tensor] = {}

    def timer(name: str) -> tuple[Callable[..., None], Callable[..., None]]:
        begin = [0.0]

        def before(module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> None:
            inputs[name] = args[0]
            begin[0] = time.perf_counter()

        def after(module: torch.nn.Module, args: object, out: object) -> None:
            inside[name].append(time.perf_counter() - begin[0])

        return before, after

    for name, module in linears.items():
        before, after = timer(name)
        module.register_forward_pre_hook(before)
        module.register_forward_hook(after)
    hot: dict[str, list[float]] = {n: [] for n in linears}
    with torch.inference_mode():
        for _ in range(10):
            loaded.model(*loaded.args)
        for _ in range(reps):
            loaded.model(*loaded.args)
            for name, module in linears.items():
                calls = []
                for _ in range(10):
                    begin = time.perf_counter()
                    F.linear(inputs[name], module.weight, module.bias)
                    calls.append(time.perf_counter() - begin)
                hot[name].append(statistics.median(calls[2:]))
    return {
        n: {"in step": 1e6 * statistics.median(inside[n][10:]), "hot": 1e6 * statistics.median(hot[n])}
        for n in linears
    }


def main() -> None:
    args = start(__doc__, None, reps=25)
    decay = after_preludes(args.reps)
    names = list(next(iter(decay.values())))
    print(f"{'op (µs; × hot)':28s}" + "".join(f"{p:>16s}" for p in names))
    for op, by in decay.items():
        print(f"{op:28s}" + "".join(f"{by[p]:8.1f} ({by[p] / by['hot']:4.1f}×)" for p in names))
    step = linears_in_step(args.reps)
    print("\ntiny prefill 1 × 40: each Linear in the step against the same call hot")
    for name, t in step.items():
        ratio = t["in step"] / t["hot"]
        print(f"  {name:24s} in step {t['in step']:7.1f} µs  hot {t['hot']:7.1f} µs  ({ratio:.2f}×)")
    if args.out:
        args.out.write_text(json.dumps({"after": decay, "linears_in_step": step}, indent=1))


if __name__ == "__main__":
    main()
