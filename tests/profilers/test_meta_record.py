"""Recording a step on fake tensors gives the op list a real run gives, without weights."""

from __future__ import annotations

import resource
import textwrap

import pytest
import torch

from infer_opt.errors import InvalidInput, RunFailure
from infer_opt.profilers import meta_record as mr
from infer_opt.profilers import models, op_recorder
from infer_opt.profilers.model_profile import build_step
from infer_opt.profilers.op_families import FamilyRecorder

SHAPE = {"batch": 2, "seq_len": 12, "context": 20, "new_tokens": 3}


def real_calls(spec: str, mode: str, hf_overrides=None):
    loaded = models.load_model(
        spec, batch_size=SHAPE["batch"], seq_len=SHAPE["seq_len"], hf_overrides=hf_overrides
    )
    step = build_step(loaded, mode, context=SHAPE["context"], new_tokens=SHAPE["new_tokens"], device="cpu")
    recorder = FamilyRecorder()
    calls = op_recorder.record_ops(step.fn, loaded.model, recorder=recorder)
    return calls, recorder.signatures


def same_ops(recorded: mr.RecordedStep, calls, signatures) -> None:
    assert [(c.name, c.shapes) for c in recorded.calls] == [(c.name, c.shapes) for c in calls]
    assert [(c.flops, c.bytes, c.category, c.module) for c in recorded.calls] == [
        (c.flops, c.bytes, c.category, c.module) for c in calls
    ]
    assert [(s.family, s.features) for s in recorded.signatures] == [
        (s.family, s.features) for s in signatures
    ]


@pytest.mark.parametrize("spec", ["tiny", "llama-tiny"])
@pytest.mark.parametrize("mode", ["prefill", "decode", "generate"])
def test_builtins_record_the_ops_a_real_run_makes(spec, mode):
    recorded = mr.record_step(mr.StepSpec(spec, mode=mode, dtype=torch.float32, **SHAPE))
    assert recorded.how == mr.HOW_FAKE
    same_ops(recorded, *real_calls(spec, mode))


def test_generate_is_split_by_token():
    recorded = mr.record_step(mr.StepSpec("tiny", mode="generate", dtype=torch.float32, **SHAPE))
    assert len(recorded.segments) == SHAPE["new_tokens"]
    assert recorded.segments[0][0] == 0 and recorded.segments[-1][1] == len(recorded.calls)
    assert all(a[1] == b[0] for a, b in zip(recorded.segments, recorded.segments[1:], strict=False))
    assert sum(m for _, _, m in recorded.segments) == recorded.module_calls
    assert recorded.tokens == SHAPE["batch"] * SHAPE["new_tokens"]


def test_the_example_factory_records_on_fake_tensors():
    spec = "examples/my_model.py:make_model"
    recorded = mr.record_step(mr.StepSpec(spec, mode="prefill", dtype=torch.float32, **SHAPE))
    assert recorded.how == mr.HOW_FAKE
    same_ops(recorded, *real_calls(spec, "prefill"))


def test_hf_models_record_the_real_mask_path():
    pytest.importorskip("transformers")
    overrides = {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 500}
    step = mr.StepSpec("hf:gpt2", mode="prefill", dtype=torch.float32, hf_overrides=overrides, **SHAPE)
    recorded = mr.record_step(step)
    same_ops(recorded, *real_calls("hf:gpt2", "prefill", overrides))


def test_a_7b_llama_records_in_seconds_without_its_weights():
    pytest.importorskip("transformers")
    config = {
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
    }
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    recorded = mr.record_step(
        mr.StepSpec(
            "hf:llama",
            mode="prefill",
            batch=1,
            seq_len=512,
            context=0,
            new_tokens=1,
            dtype=torch.float32,
            hf_overrides=config,
        )
    )
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert recorded.n_params > 6.5e9
    assert grown_kib < 2 * 2**20  # far below the 27 GB of float32 weights
    flops = sum(c.flops for c in recorded.calls)
    assert flops == pytest.approx(recorded.flops_analytic, rel=0.03)


def test_a_factory_with_real_tensors_falls_back_to_a_real_run(tmp_path):
    path = tmp_path / "real_factory.py"
    path.write_text(
        textwrap.dedent(
            """
            import torch

            class Model(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.scale = torch.ones(8, device="cpu")  # a plain attribute: not moved, not fake

                def forward(self, x):
                    return x * self.scale

            def make(device=None):
                return Model(), torch.randn(2, 8, device="cpu")
            """
        )
    )
    spec = f"{path}:make"
    recorded = mr.record_step(mr.StepSpec(spec, mode="prefill", dtype=torch.float32, **SHAPE))
    assert recorded.how == mr.HOW_REAL
    assert [n.code for n in recorded.notices] == ["recorded_by_real_run"]
    assert [c.name for c in recorded.calls] == ["aten::mul"]
    with pytest.raises(RunFailure, match="cannot be recorded on the meta device"):
        mr.record_step(mr.StepSpec(spec, mode="prefill", dtype=torch.float32, **SHAPE), fallback=False)


def test_bad_shapes_are_errors_not_fallbacks():
    with pytest.raises(InvalidInput, match="positions"):
        mr.record_step(
            mr.StepSpec("tiny", "prefill", 1, seq_len=5000, context=0, new_tokens=1, dtype=torch.float32)
        )
