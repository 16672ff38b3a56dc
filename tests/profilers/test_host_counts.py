"""What a real run's host does before each recorded call, counted as the profiler counts it
(op_recorder.HostCounter), and the step replayed with the fitted host cost (issue 40, item 7)."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from infer_opt.profilers import op_recorder
from infer_opt.profilers import predict as pr
from tests.profilers.test_predict_replay import HF_GPT2, calibration  # noqa: F401 (a fixture)


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


def test_the_counts_of_a_hand_countable_model():
    with FakeTensorMode():
        model, x = Tiny(), torch.empty(2, 4)
        recorder = op_recorder.OpRecorder()
        calls = op_recorder.record_ops(lambda: model(x), model, recorder=recorder, count_host=True)
    assert [c.name for c in calls] == ["aten::t", "prim::device", "aten::addmm", "aten::relu"]
    # before aten::t, Python: Tiny's module call (3: nn.Module, _call_impl, _get_tracing_state) and
    # its forward, `self.fc` (__getattr__), fc's module call (3) and forward, `self.weight` and
    # `self.bias` (__getattr__ each), F.linear (a builtin): 12 — the recorder's hooks and the fake
    # tensors' frames not among them; aten ops: aten::linear around it and its own (the fake
    # kernel's empty_strided/transpose/as_strided inside not); then addmm's own, torch.relu (a
    # builtin) and aten::relu
    assert recorder.host_counts == [(12, 2), (0, 0), (0, 1), (1, 1)]


def test_without_counting_no_counts():
    with FakeTensorMode():
        model, x = Tiny(), torch.empty(2, 4)
        recorder = op_recorder.OpRecorder()
        op_recorder.record_ops(lambda: model(x), model, recorder=recorder)
    assert recorder.host_counts == []


def test_a_fitted_calibration_issues_each_op_after_its_counted_host_cost(calibration):  # noqa: F811
    from dataclasses import replace

    fitted = replace(calibration, host_launch_s=10e-6, host_python_s=1e-6, host_op_s=4e-6)
    none = replace(fitted, host_launch_s=0.0, host_python_s=0.0, host_op_s=0.0)
    kwargs = dict(batch=2, seq_len=16, dtype=torch.bfloat16, hf_overrides=HF_GPT2)
    r = pr.predict("hf:gpt2", fitted, **kwargs)
    old = pr.predict("hf:gpt2", none, **kwargs)
    assert r.op_time_s == pytest.approx(old.op_time_s)
    assert r.host_s != pytest.approx(old.host_s)  # the counts, not the per-family medians
    # every launching op costs at least c_launch; the counts add to it
    launching = sum(o.calls for o in r.ops if o.source != "no kernel")
    assert r.host_s > launching * 10e-6
    assert max(r.op_time_s, r.host_s) <= r.step_time_s * (1 + 1e-9) <= r.serial_step_s * (1 + 1e-9)
