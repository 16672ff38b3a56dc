"""A model step predicted from a calibration built from GPU traces (infer_opt/trace/gpu_predict.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt import messages
from infer_opt.cost_models import op_model
from infer_opt.results.calibration import HostIssue
from infer_opt.trace import calibrate as tc
from infer_opt.trace import gpu_predict as gp
from tests.trace.gpu_traces import BF16, add, conv2d, training_ops, write_trace


def _sdpa(bh: int, t: int, d: int, us: float):
    shape = [1, bh, t, d]
    return ("aten::_scaled_dot_product_flash_attention", [shape] * 3, [BF16] * 3, us)


@pytest.fixture
def calibration(tmp_path):
    ops = [*training_ops(), _sdpa(8, 128, 64, 20.0), _sdpa(8, 512, 64, 60.0)]
    return tc.read_and_calibrate([write_trace(tmp_path / "a.json", ops)])


def test_fused_attention_features_as_the_gpu_families_hold_them():
    assert gp._attention("sdpa.causal", (96, 197, 64)) == (True, (96.0, 197.0, 197.0, 64.0))
    assert gp._attention("sdpa.full.tail", (8, 100, 64)) == (False, (8.0, 100.0, 100.0, 64.0))
    assert gp._attention("sdpa.decode", (32, 700, 64)) == (False, (32.0, 1.0, 700.0, 64.0))
    assert gp._attention("sdpa.decode.gqa", (32, 700, 64, 4)) == (False, (32.0, 1.0, 700.0, 64.0))
    assert gp._attention("sdpa.masked", (8, 10, 20, 64)) == (False, (8.0, 10.0, 20.0, 64.0))
    assert gp._attention("gemm.nt", (1, 2, 3)) is None


def test_a_recorded_cpu_attention_is_predicted_by_the_traced_gpu_family(calibration):
    model = gp.model_for(calibration)
    assert isinstance(model, gp.GpuStepModel)
    # the traces ran non-causal flash attention: a causal call takes it too (the only one)
    assert model.attention_family(True) == "attention_flash"
    traced = calibration.family_map()["attention_flash@hot"].points
    at_128 = next(p for p in traced if p.features == (8.0, 128.0, 128.0, 64.0))
    name = "aten::_scaled_dot_product_flash_attention_for_cpu"
    e = model.estimate(op_model.OpQuery(name, "sdpa.full", (8, 128, 64), at_128.flops, at_128.bytes))
    # the CPU's (B·H, T, d) is the GPU family's (B·H, Tq, Tk, d): the traced point's own time
    assert e.used == "attention_flash@hot"
    assert e.time_s == pytest.approx(at_128.time_s)


def test_views_launch_no_kernel_and_the_gap_is_per_launching_call(calibration):
    model = gp.model_for(calibration)
    view = op_model.OpQuery("aten::view", "view.view", (), 0.0, 0.0)
    assert model.estimate(view).time_s == 0.0
    assert model.estimate(view).source == gp.NO_KERNEL_SOURCE
    gemm = op_model.OpQuery("aten::addmm", "gemm.nn", (128.0, 1024.0, 1024.0), 2.0 * 128 * 1024 * 1024, 1e6)
    assert model.host_time([view, gemm, gemm], 3) == pytest.approx(2 * calibration.kernel_gap_s)
    (notice,) = model.notices()
    assert notice.code == "gpu_trace_replay" and notice.values["attention"] == "attention_flash"
    # a calibration made before the issue costs: the serial gap term, said so
    old = gp.model_for(replace(calibration, host_issue=(), host_issue_s=0.0, queued_gap_s=0.0,
                               host_launch_s=0.0, host_python_s=0.0, host_op_s=0.0))  # fmt: skip
    assert [n.code for n in old.notices()] == ["gpu_trace_prediction"]
    assert old.replay_inputs([view, gemm], [old.estimate(view), old.estimate(gemm)]) is None


def test_a_recorded_gemm_on_a_traced_shape_gets_its_time(calibration):
    model = gp.model_for(calibration)
    family = calibration.family_map()["gemm.nn@hot"]
    p = family.points[1]
    q = op_model.OpQuery(
        "aten::mm", "gemm.nn", p.features, p.flops, p.bytes, reuse_bytes=1e9, context_bytes=1e9
    )
    assert model.estimate(q).time_s == pytest.approx(p.time_s)


def test_a_cpu_calibration_keeps_the_cpu_model():
    from tests.profilers.synthetic_calibration import synthetic_calibration

    model = gp.model_for(synthetic_calibration(families=True))
    assert type(model) is op_model.OpModel


def test_an_op_in_another_dtype_takes_its_traced_family(tmp_path):
    cal = tc.read_and_calibrate(
        [write_trace(tmp_path / "a.json", [*training_ops(), add(1 << 12, 2.0, "long int")])]
    )
    model = gp.model_for(cal)
    q = op_model.OpQuery("aten::add", "add.t", (4096.0,), 4096.0, 4096 * 24.0)
    assert model.mapped(q, "int64").family == "add.t:int64"
    assert model.mapped(q, "bfloat16").family == "add.t"


def test_a_recorded_conv_takes_the_traced_conv_nearest_by_its_gemm(tmp_path):
    """The class: convolutions were keyed by batch, channels and image size one at a time, so
    timesformer's patch embedding (128 images) took the efficiency of a ViT's of 4 images (a GEMM
    32× shorter, +59% on the H100) and ``predict`` keyed a convolution as no family at all."""
    torch = pytest.importorskip("torch")
    from infer_opt.profilers import op_families

    # a ViT's 4 images at 224², patch 16 (M = 784) slow; owlv2's one 1008² image, patch 14
    # (M = 5184, N = 1024, K = 588) at 23 TFLOP/s
    ops = [*training_ops(), conv2d(4, 3, 224, 768, 16, 129.6), conv2d(1, 3, 1008, 1024, 14, 270.4)]
    cal = tc.read_and_calibrate([write_trace(tmp_path / "a.json", ops)])
    fam = cal.family_map()["conv2d@hot"]
    assert {p.features for p in fam.points} == {(784.0, 768.0, 768.0, 1.0), (5184.0, 1024.0, 588.0, 1.0)}
    owlv2 = next(p for p in fam.points if p.features[0] == 5184.0)
    x, w = torch.empty(128, 3, 224, 224, device="meta"), torch.empty(768, 3, 16, 16, device="meta")
    aten = torch.ops.aten
    call = (x, w, None, [16, 16], [0, 0], [1, 1], False, [0, 0], 1)
    family, features, _ = op_families.family_of(
        aten.convolution.default, call, {}, aten.convolution.default(*call)
    )
    assert (family, features) == ("conv2d", (25088, 768, 768, 1))
    flops = 2.0 * 25088 * 768 * 768
    e = gp.model_for(cal).estimate(op_model.OpQuery("aten::convolution", family, features, flops, 1e8))
    assert (e.used, e.source) == ("conv2d@hot", op_model.SOURCE_NEAREST)
    # owlv2's rate (the nearest GEMM), not the 4-image ViT's third of it: within its launch term
    rate = owlv2.flops / owlv2.time_s
    assert e.time_s == pytest.approx(flops / rate, rel=0.02)


def _replay_calibration(calibration):
    issue = (HostIssue("gemm.nn", 10e-6, kernels=2.0, samples=5),)
    return replace(calibration, host_issue=issue, host_issue_s=4e-6, queued_gap_s=1e-6)


def test_the_replay_inputs_per_call(calibration):
    model = gp.model_for(_replay_calibration(calibration))
    view = op_model.OpQuery("aten::view", "view.view", (), 0.0, 0.0)
    item = op_model.OpQuery("aten::_local_scalar_dense", "other._local_scalar_dense", (), 0.0, 0.0)
    gemm = op_model.OpQuery("aten::mm", "gemm.nn", (128.0, 1024.0, 1024.0), 2.0 * 128 * 1024 * 1024, 1e6)
    add = op_model.OpQuery("aten::add", "add.t", (4096.0,), 4096.0, 3 * 8192.0)
    qs = [view, gemm, item, add]
    est = [model.estimate(q) for q in qs]
    host, device, sync = model.replay_inputs(qs, est)
    # a view: nothing of its own; the gemm: its family's issue cost, its time + 2 queued gaps;
    # .item(): the host waits; an add the traces' families lack: the median issue cost, 1 gap
    assert host == pytest.approx([0.0, 10e-6, 0.0, 4e-6])
    assert device == pytest.approx([0.0, est[1].time_s + 2e-6, 0.0, est[3].time_s + 1e-6])
    assert sync == [False, False, True, False]
    step = op_model.predict_step(model, qs, 1)
    assert step.replay is not None and step.step_time_s == pytest.approx(step.replay.step_s)
    assert step.host_s == pytest.approx(14e-6)
    # the host waits after .item(): the add's launch arrives at max(10 µs, the gemm's end) + 4 µs
    gemm_end = 10e-6 + device[1]
    assert step.step_time_s == pytest.approx(max(10e-6, gemm_end) + 4e-6 + device[3])
    assert step.serial_s == pytest.approx(step.op_time_s + 14e-6)


def test_a_recorded_cpu_attention_is_named_as_the_gpu_backend(calibration):
    model = gp.model_for(calibration)
    q = op_model.OpQuery(
        "aten::_scaled_dot_product_flash_attention_for_cpu", "sdpa.causal", (8, 128, 64), 1.0, 1.0
    )
    assert model.op_name(q) == "aten::_scaled_dot_product_flash_attention"
    assert model.op_name(op_model.OpQuery("aten::mm", "gemm.nn", (1.0, 2.0, 3.0), 1.0, 1.0)) == "aten::mm"


NEW_FIELDS = ("host_launch_s", "host_python_s", "host_op_s", "host_op_children")


def _fitted(calibration):
    return replace(_replay_calibration(calibration), host_launch_s=10e-6, host_python_s=1e-6, host_op_s=4e-6,
                   host_op_children=(("aten::mm", 1.0),))  # fmt: skip


def _counted(host_counts):
    view = op_model.OpQuery("aten::view", "view.view", (), 0.0, 0.0)
    gemm = op_model.OpQuery("aten::mm", "gemm.nn", (128.0, 1024.0, 1024.0), 2.0 * 128 * 1024 * 1024, 1e6)
    add_ = op_model.OpQuery("aten::add", "add.t", (4096.0,), 4096.0, 3 * 8192.0)
    qs = [view, gemm, add_, view, gemm]
    return [replace(q, host_counts=c) for q, c in zip(qs, host_counts, strict=True)]


def test_issue_cost_worked_numbers(calibration):
    # 10 µs + 1 µs per Python call + 4 µs per aten op: 5 calls and 3 ops, 27 µs
    assert gp.issue_cost(_fitted(calibration), 5, 3) == pytest.approx(27e-6)


def test_the_fitted_host_per_call(calibration):
    model = gp.model_for(_fitted(calibration))
    qs = _counted([(5, 2), (3, 1), (2, 1), (1, 1), (0, 1)])
    host, _, _ = model.replay_inputs(qs, [model.estimate(q) for q in qs])
    # the view: 0; the first gemm starts the step's span: c_launch alone, 10; the add: its own
    # 2 calls and 1 op, 10 + 2 + 4 = 16; the second gemm: the view's 1 call and 1 op, its own 1
    # op and the aten::empty its kernel records (host_op_children), 10 + 1 + 4·3 = 23 µs
    assert host == pytest.approx([0.0, 10e-6, 16e-6, 0.0, 23e-6])
    (notice,) = model.notices()  # says which host it issues with
    assert notice.code == "gpu_trace_replay" and notice.values["python_s"] == 1e-6
    assert "per Python call" in messages.text(notice)
    # without counts (a call recorded without the counter): the per-family medians as before
    plain = _counted([None] * 5)
    assert model.replay_inputs(plain, [model.estimate(q) for q in plain])[0] == pytest.approx(
        [0.0, 10e-6, 4e-6, 0.0, 10e-6]
    )


finite = st.floats(-1e-4, 1e-4, allow_nan=False)
counts = st.integers(0, 10_000)


@settings(max_examples=200, deadline=None)
@given(finite, finite, finite, counts, counts, counts, counts)
def test_issue_cost_is_non_negative_and_monotone_in_the_counts(launch, python, op, p, o, dp, do):
    c = op_model.CalibrationResult("cuda", "H100", "", "bfloat16", 1, 0, 0, host_launch_s=launch,
                                   host_python_s=python, host_op_s=op)  # fmt: skip
    cost = gp.issue_cost(c, p, o)
    assert cost >= 0.0
    assert gp.issue_cost(c, p + dp, o + do) >= cost
    assert gp.issue_cost(c, p, o) >= gp.issue_cost(c, 0, 0) == max(launch, 0.0)


def test_a_calibration_saved_before_the_fit_loads_and_predicts_as_before(calibration):
    saved = _replay_calibration(calibration).to_dict()
    for name in NEW_FIELDS:
        saved.pop(name, None)
    loaded = op_model.CalibrationResult.from_dict(saved)
    assert (loaded.host_launch_s, loaded.host_python_s, loaded.host_op_s, loaded.host_op_children) == (
        0.0, 0.0, 0.0, ())  # fmt: skip
    model = gp.model_for(loaded)
    assert not model.counts_host
    qs = _counted([(5, 2), (3, 1), (2, 1), (1, 1), (0, 1)])
    est = [model.estimate(q) for q in qs]
    # counts or not, the per-family issue costs of the calibration as it was
    assert model.replay_inputs(qs, est) == model.replay_inputs(_counted([None] * 5), est)
    assert model.replay_inputs(qs, est)[0] == pytest.approx([0.0, 10e-6, 4e-6, 0.0, 10e-6])


def test_a_fitted_calibration_round_trips(calibration):
    fitted = _fitted(calibration)
    back = op_model.CalibrationResult.from_dict(fitted.to_dict())
    assert [getattr(back, n) for n in NEW_FIELDS] == [getattr(fitted, n) for n in NEW_FIELDS]
