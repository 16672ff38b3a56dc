"""``predict MODEL --calibration GPU-CAL``: the step replayed as a graph (bound, critical path,
serial sum), attention named as the GPU backend, and ``hf:`` decode (issue 40, item 7)."""

from __future__ import annotations

import pytest
import torch

from infer_opt.profilers import meta_record as mr
from infer_opt.profilers import predict as pr
from infer_opt.trace import calibrate as tc
from tests.profilers.test_meta_record import SHAPE, real_calls, same_ops
from tests.trace.gpu_traces import BF16, training_ops, write_trace

HF_GPT2 = {"n_layer": 1, "n_embd": 64, "n_head": 2, "vocab_size": 256, "n_positions": 128}


def _sdpa(bh: int, t: int, d: int, us: float):
    return ("aten::_scaled_dot_product_flash_attention", [[1, bh, t, d]] * 3, [BF16] * 3, us)


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    pytest.importorskip("transformers")
    ops = [*training_ops(), _sdpa(8, 128, 64, 20.0), _sdpa(8, 512, 64, 60.0)]
    path = write_trace(tmp_path_factory.mktemp("cal") / "a.json", ops)
    return tc.read_and_calibrate([path])


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_the_predicted_step_is_replayed(calibration, mode):
    r = pr.predict("hf:gpt2", calibration, mode=mode, batch=2, seq_len=16, context=24,
                   dtype=torch.bfloat16, hf_overrides=HF_GPT2)  # fmt: skip
    assert r.bound in ("host", "device")
    assert r.host_critical_s + r.device_critical_s == pytest.approx(r.step_time_s)
    # the replay lies between the larger side and the serial sum it replaces
    assert max(r.op_time_s, r.host_s) <= r.step_time_s * (1 + 1e-9)
    assert r.step_time_s <= r.serial_step_s * (1 + 1e-9)
    assert r.serial_step_s > r.step_time_s  # host and device overlap somewhere
    assert not any(o.name.endswith("_for_cpu") for o in r.ops)
    assert any(o.name == "aten::_scaled_dot_product_flash_attention" for o in r.ops)
    assert f"{r.bound}-bound (replayed" in r._repr_markdown_()  # the view shows it
    if mode == "decode":
        assert r.context == 24 and r.tokens_per_step == 2


def test_hf_decode_records_the_ops_a_real_run_makes():
    pytest.importorskip("transformers")
    step = mr.StepSpec("hf:gpt2", mode="decode", dtype=torch.float32, hf_overrides=HF_GPT2, **SHAPE)
    recorded = mr.record_step(step)
    assert recorded.how == mr.HOW_FAKE
    calls, signatures = real_calls("hf:gpt2", "decode", HF_GPT2)
    same_ops(recorded, calls, signatures)
    # one new token per sequence: the attention reads the cache of `context` tokens plus it
    attention = [c for c in recorded.calls if "attention" in c.name]
    assert attention and all(
        c.shapes[0][-2] == 1 and c.shapes[1][-2] == SHAPE["context"] + 1 for c in attention
    )
