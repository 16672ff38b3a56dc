"""The operator model on real GPU traces: leave-one-trace-out (issue 31 goals).

Over the four H100 and the four MI300X HF-model bf16 traces in ``../shared/traces``
(``tracelens__h100__*``, ``tracelens__mi300__*``):

1. **target-calibrated**: for each trace, a calibration from the other three traces of the same
   GPU (``calibrate --from-trace``), then ``validate --against`` the held-out one: per-op MAPE and
   p90 over ops of at least 10 µs, the time-weighted error Σ|t̂ − t| / Σ t over them, the
   sub-10 µs MAPE, and the summed kernel time of its step (predicted vs measured);
2. **unseen-device**: a calibration from the four traces of one GPU, scaled to the other by the
   datasheets' peaks (``--unseen-device``), against each of the other GPU's traces (the same
   four models: their shapes are in the calibration, only the device is new);
3. the time to calibrate from all four traces of each GPU (median of ``--reps``), reading
   included, and to validate against the largest trace;
4. ``predict hf:bert`` at bert-small's config (batch 1 × 141 tokens, the trace's input) and of a
   ViT-base at Falconsai's (4 images, :func:`make_vit`) from the other three traces of each GPU,
   against that model's trace's summed kernel time (``--no-predict`` skips them: they need torch
   and transformers).

    python benchmarks/bench_gpu_model.py [--traces ../shared/traces] [--reps 3] [--json out.json]

Goals (docs/benchmarks.md): MAPE <= 10% and step within 5% target-calibrated, <= 25%
unseen-device; calibration under 30 s, validate of a 3 MB trace under 10 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from infer_opt.trace import calibrate as tc
from infer_opt.trace import validate as tv
from infer_opt.trace.reader import read_trace

DEFAULT = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"
GPUS = {"h100": "tracelens__h100__*.json.gz", "mi300": "tracelens__mi300__*.json.gz"}


def _model(path: Path) -> str:
    return path.name.split("__")[2][:24]


def _row(gpu: str, tier: str, path: Path, r: Any) -> dict[str, Any]:
    step = r.points[0] if r.points else None
    return {
        "gpu": gpu,
        "tier": tier,
        "trace": path.name,
        "model": _model(path),
        "op_mape": r.op_mape,
        "op_p90": r.op_p90_abs_rel_error,
        "op_weighted": r.op_weighted_error,
        "ops": r.op_count,
        "small_op_mape": r.small_op_mape,
        "step_error": step.rel_error if step else None,
        "step_measured_s": step.measured_s if step else None,
        "modelled_share": r.modelled_share,
    }


def leave_one_out(files: dict[str, list[Path]]) -> list[dict[str, Any]]:
    rows = []
    for gpu, paths in files.items():
        events = {p: read_trace(p) for p in paths}
        for held in paths:
            cal = tc.calibrate_from_traces([events[p] for p in paths if p != held])
            r = tv.validate_against(events[held], cal, calibration_source=cal.source)
            rows.append(_row(gpu, r.tier, held, r))
    return rows


def unseen(files: dict[str, list[Path]]) -> list[dict[str, Any]]:
    rows = []
    for source, target in (("h100", "mi300"), ("mi300", "h100")):
        cal = tc.read_and_calibrate(files[source])
        for held in files[target]:
            r = tv.validate_against(read_trace(held), cal, calibration_source=cal.source, unseen_device=True)
            rows.append(_row(f"{source}->{target}", r.tier, held, r))
    return rows


def timings(files: dict[str, list[Path]], reps: int) -> dict[str, float]:
    out = {}
    for gpu, paths in files.items():
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            tc.read_and_calibrate(paths)
            times.append(time.perf_counter() - start)
        out[f"calibrate_{gpu}_s"] = statistics.median(times)
        largest = max(paths, key=lambda p: p.stat().st_size)
        cal = tc.read_and_calibrate([p for p in paths if p != largest])
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            tv.validate_against(read_trace(largest), cal, calibration_source="bench")
            times.append(time.perf_counter() - start)
        out[f"validate_{gpu}_s"] = statistics.median(times)
        out[f"validate_{gpu}_mib"] = largest.stat().st_size / 2**20
    return out


#: held-out traces whose model ``predict`` can build: (trace name, MODEL, --hf-config, batch,
#: seq_len, label): ``hf:bert`` at bert-small's config, and a ViT-base of Falconsai's config
#: (:func:`make_vit`: 12 layers of 768, patch 16 at 224², 4 images as in its trace)
PREDICTED = (
    ("gaunernst_bert-small", "hf:bert", ("hidden_size=512", "num_hidden_layers=4",
     "num_attention_heads=8", "intermediate_size=2048"), 1, 141, "hf:bert (bert-small)"),
    ("Falconsai_nsfw", f"{Path(__file__).resolve()}:make_vit", (), 4, 197, "ViT-base (Falconsai)"),
)  # fmt: skip


def make_vit(batch_size: int = 4, dtype: Any = None) -> Any:
    """``transformers``' ViT image classifier at Falconsai/nsfw_image_detection's config (random
    weights: no model hub here), on ``batch_size`` 224² images; ``predict``'s factory contract."""
    import torch
    from transformers import ViTConfig, ViTForImageClassification

    dtype = dtype or torch.bfloat16
    config = ViTConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                       image_size=224, patch_size=16, num_labels=2, attn_implementation="sdpa")  # fmt: skip
    model = ViTForImageClassification(config).to(dtype)
    return model, {"pixel_values": torch.randn(batch_size, 3, 224, 224, dtype=dtype)}


def predicted_step(files: dict[str, list[Path]]) -> list[dict[str, Any]]:
    """Each of :data:`PREDICTED` predicted (``predict MODEL --calibration``) from a calibration
    of the other three traces of each GPU, against its own trace's summed kernel time (torch and
    transformers needed: the step is recorded on fake tensors)."""
    import torch

    from infer_opt.profilers import models
    from infer_opt.profilers import predict as pr

    rows = []
    for name, spec, config, batch, seq_len, label in PREDICTED:
        for gpu, paths in files.items():
            held = next(p for p in paths if name in p.name)
            cal = tc.read_and_calibrate([p for p in paths if p != held])
            r = pr.predict(
                spec, cal, calibration_source=cal.source, batch=batch, seq_len=seq_len, dtype=torch.bfloat16,
                hf_overrides=models.parse_hf_overrides(list(config)),
            )  # fmt: skip
            ev = read_trace(held)
            measured = float(ev.gpu.dur_us[ev.gpu.kind != 3].sum()) / 1e6
            rows.append({"model": label, "gpu": gpu, "measured_s": measured,
                         "predicted_kernel_s": r.op_time_s, "gap_s": r.host_s})  # fmt: skip
    return rows


def _pct(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "—"
    return f"{100 * v:+.1f}%" if signed else f"{100 * v:.1f}%"


def table(rows: list[dict[str, Any]]) -> str:
    head = "| GPU | tier | held-out model | ops ≥10 µs | MAPE | p90 | time-weighted | <10 µs MAPE | step |"
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        lines.append(
            f"| {r['gpu']} | {r['tier']} | {r['model']} | {r['ops']} | {_pct(r['op_mape'])} | "
            f"{_pct(r['op_p90'])} | {_pct(r['op_weighted'])} | {_pct(r['small_op_mape'])} | "
            f"{_pct(r['step_error'], True)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--no-predict", action="store_true", help="skip the predicted steps (need torch)")
    args = parser.parse_args(argv)
    files = {gpu: sorted(args.traces.glob(pattern)) for gpu, pattern in GPUS.items()}
    if any(len(v) < 2 for v in files.values()):
        print(f"need the H100 and MI300X traces under {args.traces}", file=sys.stderr)
        return 2
    rows = leave_one_out(files) + unseen(files)
    times = timings(files, args.reps)
    print(table(rows))
    print()
    for key, value in times.items():
        print(f"{key}: {value:.2f}")
    predicted = [] if args.no_predict else predicted_step(files)
    for p in predicted:
        error = p["predicted_kernel_s"] / p["measured_s"] - 1
        print(
            f"predict {p['model']} on {p['gpu']}: kernel time {p['predicted_kernel_s'] * 1e6:.1f} us "
            f"predicted, {p['measured_s'] * 1e6:.1f} us in its trace ({100 * error:+.1f}%); gap term "
            f"{p['gap_s'] * 1e6:.1f} us"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "timings": times, "predict": predicted}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
