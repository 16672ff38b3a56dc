"""Whole-step prediction on real GPU traces, leave-one-out (issue 40, item 7).

For each HF model of ``../shared/traces`` that ``predict`` can build from its config (Qwen1.5-0.5B
as ``hf:qwen2:base`` at its config — the traces ran the model without its LM head —, bert-small as
``hf:bert``, its MLM head included as in its traces, Falconsai's ViT-base as ``hf:vit:base`` at
4 images: ``ViTModel`` with its pooler, as traced — a 768×768 ``linear`` and a ``tanh`` on the class
tokens, no classifier), on the H100 and the MI300X: a calibration from the OTHER HF traces
of the same GPU (``calibrate --from-trace``), then ``predict`` of the model's step at the trace's
input shapes, held against the trace's step span (first GPU event's start to the last's end):

* **before**: the serial sum of the predicted kernel time and the gap term (the traces' median
  kernel gap per launching call: a calibration without issue costs, as ``predict`` did);
* **median**: the replayed step, the host issuing each op after its family's median issue cost in
  the calibrating traces (kernels queued);
* **after**: the replayed step, each op issued after the fitted host cost of the Python calls and
  aten ops the recorder counted before it (``c_launch + c_python·p + c_op·o``,
  :mod:`infer_opt.trace.host_fit`).

    python benchmarks/bench_predict_step.py [--traces ../shared/traces] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu_model import DEFAULT, GPUS

from infer_opt.trace import calibrate as tc
from infer_opt.trace.events import SYNC
from infer_opt.trace.reader import read_trace

#: Qwen/Qwen1.5-0.5B-Chat's config.json values (no hub access here)
QWEN = ("hidden_size=1024", "num_hidden_layers=24", "num_attention_heads=16", "num_key_value_heads=16",
        "intermediate_size=2816", "vocab_size=151936", "max_position_embeddings=32768",
        "tie_word_embeddings=true", "rms_norm_eps=1e-6")  # fmt: skip
BERT = ("hidden_size=512", "num_hidden_layers=4", "num_attention_heads=8", "intermediate_size=2048")
VIT_CONFIG = ("hidden_size=768", "num_hidden_layers=12", "num_attention_heads=12", "intermediate_size=3072",
              "image_size=224", "patch_size=16")  # fmt: skip
#: the HF traces (as ``bench_host_fit``): the MI300X's resnet training trace is not one
HF = ("Falconsai", "Qwen", "timesformer", "bert-small", "owlv2")
#: (trace name part, MODEL, --hf-config, batch, seq_len, label): the traces' own input shapes
MODELS = (
    ("Qwen_Qwen1.5-0.5B", "hf:qwen2:base", QWEN, 16, 559, "Qwen1.5-0.5B"),
    ("gaunernst_bert-small", "hf:bert", BERT, 1, 141, "bert-small"),
    ("Falconsai_nsfw", "hf:vit:base", VIT_CONFIG, 4, 197, "ViT-base (Falconsai)"),
)


def step_span_s(path: Path) -> float:
    """The trace's first step from its first GPU event's start to its last one's end."""
    ev = read_trace(path)
    g = ev.gpu
    mine = (g.step == 0) & (g.kind != SYNC)
    return float((g.ts_us[mine] + g.dur_us[mine]).max() - g.ts_us[mine].min()) / 1e6


def _predict(spec: str, cal: Any, config: tuple[str, ...], batch: int, seq_len: int) -> Any:
    import torch

    from infer_opt.profilers import models
    from infer_opt.profilers import predict as pr

    return pr.predict(spec, cal, calibration_source=cal.source, batch=batch, seq_len=seq_len,
                      dtype=torch.bfloat16, hf_overrides=models.parse_hf_overrides(list(config)))  # fmt: skip


def rows(traces: Path) -> list[dict[str, Any]]:
    out = []
    for gpu, pattern in GPUS.items():
        paths = [p for p in sorted(traces.glob(pattern)) if any(m in p.name for m in HF)]
        for name, spec, config, batch, seq_len, label in MODELS:
            held = next((p for p in paths if name in p.name), None)
            if held is None:
                continue
            cal = tc.read_and_calibrate([p for p in paths if p != held])
            after = _predict(spec, cal, config, batch, seq_len)
            median = _predict(spec, replace(cal, host_launch_s=0.0, host_python_s=0.0, host_op_s=0.0),
                              config, batch, seq_len)  # fmt: skip
            old = replace(cal, host_issue=(), host_issue_s=0.0, queued_gap_s=0.0, host_launch_s=0.0,
                          host_python_s=0.0, host_op_s=0.0)  # fmt: skip
            before = _predict(spec, old, config, batch, seq_len)
            real = step_span_s(held)
            out.append({
                "gpu": gpu, "model": label, "real_s": real, "before_s": before.step_time_s,
                "median_s": median.step_time_s, "median_error": median.step_time_s / real - 1,
                "after_s": after.step_time_s, "bound": after.bound, "kernel_s": after.op_time_s,
                "host_s": after.host_s, "serial_s": after.serial_step_s,
                "before_error": before.step_time_s / real - 1, "after_error": after.step_time_s / real - 1,
            })  # fmt: skip
    return out


def table(found: list[dict[str, Any]]) -> str:
    lines = ["| GPU | model | real step | before (serial) | per-family median (replayed) "
             "| after (fitted host, replayed) | bound | kernels | host Σh |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in found:
        lines.append(
            f"| {r['gpu']} | {r['model']} | {r['real_s'] * 1e3:.2f} ms | {r['before_s'] * 1e3:.2f} ms "
            f"({100 * r['before_error']:+.0f}%) | {r['median_s'] * 1e3:.2f} ms "
            f"({100 * r['median_error']:+.0f}%) "
            f"| {r['after_s'] * 1e3:.2f} ms "
            f"({100 * r['after_error']:+.1f}%) "
            f"| {r['bound']} | {r['kernel_s'] * 1e3:.2f} ms | {r['host_s'] * 1e3:.2f} ms |"
        )
    for key in ("median", "after"):
        errors = [abs(r[f"{key}_error"]) for r in found]
        if errors:
            within = sum(e <= 0.1 for e in errors)
            lines.append(f"\n{key}: median |error| {100 * float(np.median(errors)):.1f}%, "
                         f"worst {100 * max(errors):.1f}%, within 10%: {within}/{len(errors)}")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    found = rows(args.traces)
    if not found:
        print(f"no HF traces under {args.traces}", file=sys.stderr)
        return 2
    print(table(found))
    if args.json is not None:
        args.json.write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
