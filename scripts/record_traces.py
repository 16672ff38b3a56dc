"""Record torch.profiler traces of built-in model steps, for ``calibrate --from-trace`` and
``validate --against`` on a lent GPU (``scripts/gpu_check.sh``, issue 31; docs/gpu_model.md).

For each (model, mode, batch, length) of the plan, the step ``profile`` times
(:func:`infer_opt.profilers.model_profile.build_step`, KV cache included for decode) runs eagerly
under ``torch.profiler`` with ``record_shapes=True`` — one untimed warm-up, then ``--steps``
ProfilerSteps — and the trace is written gzipped as ``<out>/<model>-<mode>-b<B>-<s|c><N>.json.gz``.
The ``calibration`` set is the grid the calibration learns from; ``held_out`` are shapes between
its points (validate against them). ``--dry-run`` prints the plan and writes nothing.

    python scripts/record_traces.py --out DIR [--device cuda] [--dtype bfloat16] [--steps 3]
        [--only calibration|held_out] [--dry-run]
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import time
from pathlib import Path

#: (model, mode, batch, seq_len or context) the calibration is built from
CALIBRATION = [
    *[("gpt2-small", "prefill", b, s) for b in (1, 8) for s in (64, 512)],
    *[("gpt2-small", "decode", b, c) for b in (1, 16) for c in (128, 1023)],
    *[("llama-small", "prefill", b, s) for b in (1, 8) for s in (64, 256)],
]
#: shapes between the calibration's (never recorded for it)
HELD_OUT = [
    ("gpt2-small", "prefill", 4, 200),
    ("gpt2-small", "decode", 4, 700),
    ("llama-small", "prefill", 4, 128),
]


def name(model: str, mode: str, batch: int, length: int) -> str:
    return f"{model}-{mode}-b{batch}-{'s' if mode == 'prefill' else 'c'}{length}.json.gz"


def record(
    model: str, mode: str, batch: int, length: int, *, device: str, dtype: str, steps: int, out: Path
) -> Path:
    """One trace (module docstring)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from infer_opt.profilers import models
    from infer_opt.profilers.device import parse_dtype, resolve_device
    from infer_opt.profilers.model_profile import build_step

    dev = resolve_device(device)
    torch_dtype = parse_dtype(dtype, dev)
    seq_len = length if mode == "prefill" else 1
    loaded = models.load_model(model, batch_size=batch, seq_len=seq_len, device=dev, dtype=torch_dtype)
    step = build_step(loaded, mode, context=length, new_tokens=1, device=dev)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    target = out / name(model, mode, batch, length)
    plain = target.with_suffix("")  # .json
    plan = schedule(wait=0, warmup=1, active=steps, repeat=1)
    with torch.no_grad():
        step.fn()  # warm-up: allocator, cuBLAS handles, kernels loaded
        sync()
        with profile(
            activities=activities,
            record_shapes=True,
            schedule=plan,
            on_trace_ready=lambda p: p.export_chrome_trace(str(plain)),
        ) as prof:
            for _ in range(1 + steps):
                step.fn()
                sync()
                prof.step()
    with plain.open("rb") as src, gzip.open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
    plain.unlink()
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--only", choices=("calibration", "held_out"), default=None)
    parser.add_argument("--models", default=None, help="comma-separated: only these models")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    plan = [] if args.only == "held_out" else list(CALIBRATION)
    plan += [] if args.only == "calibration" else list(HELD_OUT)
    if args.models:
        keep = set(args.models.split(","))
        plan = [p for p in plan if p[0] in keep]
    for item in plan:
        print(("would record " if args.dry_run else "recording ") + name(*item), flush=True)
        if not args.dry_run:
            args.out.mkdir(parents=True, exist_ok=True)
            start = time.perf_counter()
            path = record(*item, device=args.device, dtype=args.dtype, steps=args.steps, out=args.out)
            print(f"  {path} ({path.stat().st_size / 2**10:.0f} KiB, {time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
