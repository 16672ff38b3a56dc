"""The operator calibration built from GPU traces (infer_opt/trace/calibrate.py) and its
validation against a held-out trace (infer_opt/trace/validate.py)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.cost_models import op_model
from infer_opt.errors import InvalidInput
from infer_opt.results.calibration import CalibrationResult, FamilyCalibration, GridPoint
from infer_opt.trace import calibrate as tc
from infer_opt.trace import validate as tv
from infer_opt.trace.devices import by_name
from infer_opt.trace.reader import read_trace
from tests.trace.gpu_traces import (
    BF16,
    D2H,
    H2D,
    MI300X,
    add,
    held_out_ops,
    mm,
    to,
    training_ops,
    write_trace,
)

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
H100_TRACES = sorted(SHARED.glob("tracelens__h100__*.json.gz")) if SHARED.is_dir() else []
MI300_TRACES = sorted(SHARED.glob("tracelens__mi300__*.json.gz")) if SHARED.is_dir() else []


def _events(tmp_path: Path, name: str, ops, **kwargs):
    return read_trace(write_trace(tmp_path / name, ops, **kwargs))


# ---------------------------------------------------------------------------- op instances


def test_an_instance_is_its_kernels_summed(tmp_path):
    ev = _events(tmp_path, "t.json", [mm(64, 32, 16, [10.0, 2.0]), add(1024, 3.0)])
    first, second = tc.op_instances(ev)
    assert (first.name, first.family, first.kernels) == ("aten::mm", "gemm.nn", 2)
    assert first.time_s == pytest.approx(12e-6)
    assert first.features == (64.0, 32.0, 16.0)
    assert first.flops == 2 * 64 * 32 * 16
    assert (second.family, second.dtype, second.time_s) == ("add.t", "bf16", pytest.approx(3e-6))


def _matmul_4d(copy_us: float, bmm_us: float):
    """``aten::matmul`` of (64, 12, 8, 8) by (64, 12, 8, 64), as torch runs it on permuted
    operands: a ``reshape`` whose ``clone`` copies one operand, then the ``bmm``."""
    a, b = [64, 12, 8, 8], [64, 12, 8, 64]
    copy = ("aten::copy_", [b, b, []], [BF16, BF16, "Scalar"], copy_us)
    clone = ("aten::clone", [b, []], [BF16, ""], [copy])
    reshape = ("aten::reshape", [b, [2]], [BF16, ""], [clone])
    bmm = ("aten::bmm", [[768, 8, 8], [768, 8, 64]], [BF16, BF16], bmm_us)
    return ("aten::matmul", [a, b], [BF16, BF16], [reshape, bmm])


def test_a_layout_copy_inside_an_op_is_its_own_instance(tmp_path):
    """The class: ``matmul``'s ``clone`` of a permuted operand counted as the matmul's own time
    made the bmm family learn a copy's (a 4-D timesformer matmul: 3× its GEMM)."""
    n = 1 << 20
    inner = ("aten::copy_", [[n], [n], []], [BF16, BF16, "Scalar"], 30.0)
    cast = ("aten::to", [[n], [], [], [], [], []], [BF16, "ScalarType", "", "", "Scalar", "Scalar"],
            [("aten::_to_copy", [[n], [], []], [BF16, "ScalarType", ""], [inner])])  # fmt: skip
    ev = _events(tmp_path, "t.json", [_matmul_4d(50.0, 40.0), cast])
    clone, matmul, cast = tc.op_instances(ev)
    assert (clone.name, clone.family, clone.time_s) == ("aten::clone", "clone.c", pytest.approx(50e-6))
    assert clone.features == (64.0 * 12 * 8 * 64,)
    assert (matmul.name, matmul.family, matmul.kernels) == ("aten::matmul", "bmm.nn", 1)
    assert matmul.time_s == pytest.approx(40e-6)
    assert matmul.features == (768.0, 8.0, 64.0, 8.0)
    # a copy's own inner copy_ stays with it: aten::to is one instance
    assert (cast.name, cast.family, cast.kernels) == ("aten::to", "to_copy.c", 1)


def _sdpa(backend: tuple) -> tuple:
    """``aten::scaled_dot_product_attention`` of (2, 12, 128, 64) q/k/v, dispatching to
    ``backend``, the child op that launched the kernels."""
    q = [2, 12, 128, 64]
    return ("aten::scaled_dot_product_attention", [q, q, q], [BF16] * 3, [backend])


def test_fused_attention_is_named_by_the_backend_it_dispatched_to(tmp_path):
    """The class: the generic SDPA entry point's formula cannot tell which kernel ran, so its
    instances were all ``attention_math`` and the flash kernels of a BERT trace calibrated the
    math family (and ``predict``, which picks flash first, found none)."""
    q = [2, 12, 128, 64]
    flash = ("aten::_scaled_dot_product_flash_attention", [q, q, q], [BF16] * 3, 20.0)
    efficient = ("aten::_scaled_dot_product_efficient_attention", [q, q, q, []], [BF16] * 3 + [""], 25.0)
    bmm = ("aten::bmm", [[24, 128, 64], [24, 64, 128]], [BF16, BF16], 5.0)
    math_path = ("aten::_scaled_dot_product_attention_math", [q, q, q], [BF16] * 3, [bmm, bmm])
    ev = _events(tmp_path, "t.json", [_sdpa(flash), _sdpa(efficient), _sdpa(math_path)])
    flash_i, efficient_i, math_i = tc.op_instances(ev)
    assert flash_i.name == "aten::scaled_dot_product_attention"
    assert flash_i.family.split(".")[0] == "attention_flash"
    assert flash_i.time_s == pytest.approx(20e-6)
    assert efficient_i.family.split(".")[0] == "attention_efficient"
    # the math path's own ops (bmm, softmax) name no attention kernel: it stays math
    assert math_i.family.split(".")[0] == "attention_math"
    assert (math_i.kernels, math_i.time_s) == (2, pytest.approx(10e-6))
    # all three are one attention's work: the same features
    assert flash_i.features == efficient_i.features == math_i.features


def test_a_mixed_dtype_pointwise_op_is_its_own_family(tmp_path):
    """An fp32 operand makes ATen's casting loop run (``.mixed``): its time does not teach the
    bf16 family, and a bf16 add between two bf16 shapes is interpolated between them alone."""
    n = 1 << 14
    mixed = ("aten::add_", [[n], [n], []], [BF16, "float", "Scalar"], 9.0)
    ops = [add(1 << 12, 2.0), add(1 << 16, 3.0), add(1 << 18, 5.0), mixed]
    cal = tc.calibrate_from_traces([_events(tmp_path, "t.json", ops)])
    families = cal.family_map()
    assert [p.features for p in families["add.t.mixed@hot"].points] == [(float(n),)]
    assert {p.features for p in families["add.t@hot"].points} == {(4096.0,), (65536.0,), (262144.0,)}
    model = tc.TraceOpModel(cal)
    plain = model.estimate(op_model.OpQuery("aten::add", "add.t", (float(n),), float(n), 6.0 * n))
    assert plain.used == "add.t@hot" and plain.time_s < 3e-6  # not pulled toward the 9 µs one


def test_family_keys():
    assert tc.family_key("gemm.nt", None, "bf16", "bf16") == "gemm.nt"
    assert tc.family_key("attention_flash", True, "bf16", "bf16") == "attention_flash.causal"
    assert tc.family_key("attention_flash", False, "bf16", "bf16") == "attention_flash"
    assert tc.family_key("eq.s", None, "int64", "bf16") == "eq.s:int64"
    assert tc.family_dtype("eq.s:int64", "bfloat16") == "int64"
    assert tc.family_dtype("gemm.nt", "bfloat16") == "bf16"


def test_a_shape_point_is_the_median_of_its_instances(tmp_path):
    ev = _events(tmp_path, "t.json", [mm(64, 64, 64, 10.0), mm(64, 64, 64, 30.0), mm(64, 64, 64, 12.0)])
    points = tc._points(tc.op_instances(ev), "bf16")
    (point,) = points["gemm.nn"]
    assert point.time_s == pytest.approx(12e-6)
    # IQR of (10, 12, 30) = 21 - 11 = 10, over the median 12
    assert point.rel_spread == pytest.approx(10 / 12)


def test_launch_floor_and_gap(tmp_path):
    # kernels of 10, 2, 3, 12, 5 µs, 2 µs apart on one stream
    ops = [mm(64, 64, 64, [10.0, 2.0]), add(1024, 3.0), mm(64, 64, 64, 12.0), add(4096, 5.0)]
    floor, gap = tc.kernel_floor_and_gap(_events(tmp_path, "t.json", ops))
    assert floor == pytest.approx(float(np.percentile([10, 2, 3, 12, 5], 5)) * 1e-6)
    assert gap == pytest.approx(2e-6)


def test_main_dtype_is_the_one_of_most_time(tmp_path):
    ev = _events(
        tmp_path, "t.json", [mm(64, 64, 64, 10.0), add(1024, 3.0, "long int"), add(1024, 4.0, "long int")]
    )
    assert tc.main_dtype(tc.op_instances(ev)) == "bf16"


# ---------------------------------------------------------------------------- calibration


def test_calibration_from_two_traces(tmp_path):
    a = write_trace(tmp_path / "a.json", training_ops())
    b = write_trace(tmp_path / "b.json", training_ops(1.1))
    cal = tc.read_and_calibrate([a, b])
    assert cal.source == "from 2 traces of H100 SXM"
    assert cal.traces == ("a.json", "b.json")
    assert (cal.device, cal.device_name, cal.dtype, cal.grid) == ("cuda", "H100 SXM", "bfloat16", "trace")
    assert cal.device_key == "cuda-h100-sxm-bfloat16-op-profiler"
    families = cal.family_map()
    assert len(families["gemm.nn@hot"].points) == 4  # four M values, each the median of 4 instances
    point = families["gemm.nn@hot"].points[0]
    assert point.features == (64.0, 1024.0, 1024.0)
    assert point.time_s == pytest.approx(float(np.median([8, 9, 8.8, 9.9])) * 1e-6)
    assert len(families["add.t@hot"].points) == 3
    assert cal.warnings == ()  # every family has at least MIN_SHAPES shapes


def test_families_of_few_shapes_are_named(tmp_path):
    cal = tc.read_and_calibrate(
        [write_trace(tmp_path / "a.json", [*training_ops(), add(64, 2.0, "long int")])]
    )
    (notice,) = cal.warnings
    assert notice.code == "trace_calibration_few_shapes"
    assert notice.values == {"families": ("add.t:int64",), "min": tc.MIN_SHAPES}


def test_families_of_few_shapes_take_the_device_roofline_as_base(tmp_path):
    cal = tc.read_and_calibrate([write_trace(tmp_path / "a.json", training_ops())])
    roof = cal.roofline
    family = cal.family_map()["add.t@hot"]
    assert len(family.points) < tc.MIN_FIT_SHAPES
    assert family.rate_flops == roof.compute_rate_flops
    assert family.bandwidth_bytes_per_s == roof.bandwidth_bytes_per_s
    assert family.launch_s == cal.launch_floor_s


def test_device_roofline_takes_the_90th_percentile_of_achieved_rates():
    def point(flops, nbytes, t):
        return GridPoint((1.0,), t, 0.0, flops, nbytes)

    gemm = FamilyCalibration(
        "gemm.nt", "hot", ("n",), tuple(point(1e9 * k, 1e6, 1e-4) for k in (1, 2, 3)), 0, 1, 1
    )
    adds = FamilyCalibration("add.t", "hot", ("n",), (point(1e3, 1e8, 1e-4), point(1e3, 5e6, 1e-6)), 0, 1, 1)
    roof = tc.device_roofline([gemm, adds], 2e-6, by_name("h100"), "bf16")
    # FLOP/s 1e13, 2e13, 3e13 -> 90th percentile 2.8e13; bytes/s of the one point >= 10 µs: 1e12
    assert roof.compute_rate_flops == pytest.approx(2.8e13)
    assert roof.bandwidth_bytes_per_s == pytest.approx(1e12)
    assert roof.launch_overhead_s == 2e-6


def test_device_roofline_without_points_is_the_datasheet():
    spec = by_name("h100")
    roof = tc.device_roofline([], 3e-6, spec, "bf16")
    assert roof.compute_rate_flops == spec.peak("bf16")
    assert roof.bandwidth_bytes_per_s == spec.bytes_per_s


def test_two_devices_are_refused_naming_both(tmp_path):
    a = write_trace(tmp_path / "a.json", training_ops())
    b = write_trace(tmp_path / "b.json", training_ops(), device=MI300X)
    with pytest.raises(InvalidInput, match=r"ran on MI300X.*a.json on H100 SXM"):
        tc.read_and_calibrate([a, b])


def test_two_dtypes_are_refused_naming_both(tmp_path):
    a = write_trace(tmp_path / "a.json", training_ops())
    fp32 = [("aten::mm", [[64, 64], [64, 64]], ["float", "float"], 10.0)]
    b = write_trace(tmp_path / "b.json", fp32)
    with pytest.raises(InvalidInput, match=r"fp32 trace, a.json a bf16 one"):
        tc.read_and_calibrate([a, b])


def test_a_trace_without_shapes_has_nothing_to_calibrate_from(tmp_path):
    path = write_trace(tmp_path / "a.json", [("aten::mm", [], [], 10.0)])
    ev = read_trace(path)
    ev = replace(ev, ops=replace(ev.ops, args=tuple({} for _ in ev.ops.args)))
    with pytest.raises(InvalidInput, match=r"nothing to calibrate from: none of its 1 GPU kernels"):
        tc.calibrate_from_traces([ev])


def test_an_unknown_gpu_is_refused(tmp_path):
    path = write_trace(tmp_path / "a.json", training_ops(), device="Mystery Accelerator 9000")
    ev = read_trace(path)
    ev = replace(ev, device_properties=({"name": "Mystery Accelerator 9000"},))
    with pytest.raises(InvalidInput, match=r"GPU is not identified"):
        tc.calibrate_from_traces([ev])


def test_an_ambiguous_gpu_is_refused_with_a_device_it_fits_as_the_example(tmp_path):
    import json

    path = write_trace(tmp_path / "a.json", training_ops())
    doc = json.loads(path.read_text())
    doc["deviceProperties"] = [{"id": 0}]  # no name: only the kernels' names say sm80 (an A100)
    for e in doc["traceEvents"]:
        if e["cat"] == "kernel":
            e["name"] = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x32_cutlass"
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidInput) as info:
        tc.calibrate_from_traces([read_trace(path)])
    assert "it fits A100 40GB and A100 80GB SXM" in str(info.value)
    assert "(e.g. 'A100 40GB')" in str(info.value) and "mi250" not in str(info.value)


# ---------------------------------------------------------------------------- interpolation


def _family(features, residuals, *, rate=1e12, bandwidth=1e11):
    points = tuple(GridPoint((f,), 1e-6, 0.0, 0.0, f * 1e5) for f in features)
    fam = FamilyCalibration("add.t", "hot", ("n",), points, 0.0, rate, bandwidth)
    # times so that each point's residual over the base is exactly its r
    points = tuple(
        replace(p, time_s=fam.base_time(p.flops, p.bytes) * math.exp(r))
        for p, r in zip(points, residuals, strict=True)
    )
    return replace(fam, points=points)


def test_outside_the_shapes_the_residual_is_the_nearest_shapes():
    fam = _family([1024.0, 4096.0, 65536.0], [0.2, 0.6, -0.3])
    interp = tc.TraceInterpolator(fam)
    assert interp.residual_at((16384.0 * 64,)) == (pytest.approx(-0.3), True)  # beyond 65536
    assert interp.residual_at((256.0,)) == (pytest.approx(0.2), True)  # below 1024
    # inside: linear in log2 n between 1024 (0.2) and 4096 (0.6)
    assert interp.residual_at((2048.0,)) == (pytest.approx(0.4), False)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-2, 2), min_size=2, max_size=6), st.floats(10, 25))
def test_the_interpolator_is_exact_at_every_point_and_bounded_beyond(residuals, exponent):
    features = [float(2 ** (10 + 2 * i)) for i in range(len(residuals))]
    interp = tc.TraceInterpolator(_family(features, residuals))
    for f, r in zip(features, residuals, strict=True):
        assert interp.residual_at((f,))[0] == pytest.approx(r, abs=1e-9)
    rho, _ = interp.residual_at((2.0**exponent,))
    assert min(residuals) - 1e-9 <= rho <= max(residuals) + 1e-9


def _slow_bmm_family(t0=2e-6):
    """A batched-matmul family at a device roofline (R 1e15, b 1e12), its two shapes far above
    the launch floor and at 1% of the roofline (residual log 100)."""
    pts = []
    for batch in (4096.0, 8192.0):
        flops, nbytes = batch * 2 * 8 * 8 * 64, batch * 2 * (8 * 64 * 2 + 64)
        pts.append(GridPoint((batch, 8.0, 8.0, 64.0), 0.0, 0.0, flops, nbytes))
    fam = FamilyCalibration("bmm.nn", "hot", ("B", "M", "N", "K"), tuple(pts), t0, 1e15, 1e12)
    return replace(
        fam, points=tuple(replace(p, time_s=t0 + 100 * (fam.base_time(p.flops, p.bytes) - t0)) for p in pts)
    )


def test_an_extrapolated_efficiency_applies_to_the_work_not_the_launch_floor():
    fam = _slow_bmm_family()
    interp = tc.TraceInterpolator(fam)
    # 12 batches of 5x5 by 5x64: its work 16 ns, at 1% 1.6 µs over the floor, not 100x the floor
    flops, nbytes = 12 * 2 * 5 * 5 * 64, 12 * 2 * (5 * 64 * 2 + 25)
    t, extrapolated = interp.time((12.0, 5.0, 5.0, 64.0), flops, nbytes)
    work = fam.base_time(flops, nbytes) - fam.launch_s
    assert extrapolated and t == pytest.approx(fam.launch_s + 100 * work)
    assert t < 2 * fam.launch_s
    # what scaling the whole base by the nearest residual gave
    assert fam.base_time(flops, nbytes) * math.exp(interp.residual_at((12.0, 5.0, 5.0, 64.0))[0]) > 40 * t


@settings(max_examples=40, deadline=None)
@given(st.floats(0.01, 100), st.floats(-6, 6))
def test_the_work_term_extrapolation_is_continuous_at_the_nearest_shape(slowdown, log_scale):
    fam = _slow_bmm_family()
    fam = replace(fam, points=tuple(
        replace(p, time_s=fam.launch_s + slowdown * (fam.base_time(p.flops, p.bytes) - fam.launch_s))
        for p in fam.points
    ))  # fmt: skip
    interp = tc.TraceInterpolator(fam)
    near = fam.points[-1]
    # off the grid (other M, N) with the nearest shape's own work: exactly its time
    t, extrapolated = interp.time((8192.0, 16.0, 4.0, 64.0), near.flops, near.bytes)
    assert extrapolated
    if fam.base_time(near.flops, near.bytes) - fam.launch_s > fam.launch_s:
        assert t == pytest.approx(near.time_s, rel=1e-9)
    # more work, more time; never below the launch floor
    scale = 2.0**log_scale
    t2, _ = interp.time((8192.0, 16.0, 4.0, 64.0), near.flops * scale, near.bytes * scale)
    t3, _ = interp.time((8192.0, 16.0, 4.0, 64.0), near.flops * scale * 2, near.bytes * scale * 2)
    assert fam.launch_s <= t2 <= t3


# ---------------------------------------------------------------------------- host↔device copies


def test_a_copy_across_the_host_link_is_a_transfer_not_a_cast(tmp_path):
    ev = _events(tmp_path, "t.json", [to(1 << 20, 300.0, copy=H2D), to(1 << 20, 4.0), to(8, 3.0, copy=D2H)])
    h2d, cast, d2h = tc.op_instances(ev)
    assert (h2d.family, h2d.features, h2d.bytes) == ("transfer.h2d", (2.0**21,), 2.0**21)  # 2^20 bf16
    assert (cast.family, cast.bytes) == ("to_copy.c", 2.0**22)  # read and write on the device
    assert d2h.family == "transfer.d2h"
    # a copy's family has no dtype suffix: its time is its bytes'
    assert tc.family_key("transfer.h2d", None, "int64", "bf16") == "transfer.h2d"


def test_a_cast_is_not_predicted_at_the_host_links_speed(tmp_path):
    """The class: host copies (ms) and on-device casts (µs) in one family made a large cast
    (an RMSNorm's upcast) a hundred times too slow."""
    ops = [*training_ops(), to(1 << 22, 400.0, copy=H2D), to(1 << 20, 80.0, copy=H2D), to(1 << 10, 2.5)]
    cal = tc.read_and_calibrate([write_trace(tmp_path / "a.json", ops)])
    fams = cal.family_map()
    assert {p.features for p in fams["transfer.h2d@hot"].points} == {(2.0**23,), (2.0**21,)}
    assert [p.features for p in fams["to_copy.c@hot"].points] == [(1024.0,)]
    # few shapes: its base is the launch floor and the H100's PCIe 5 link, not the HBM
    assert fams["transfer.h2d@hot"].bandwidth_bytes_per_s == tc.host_link_bytes_per_s(by_name("h100")) == 63e9
    model = tc.TraceOpModel(cal)
    n = 1 << 24
    cast = model.estimate(op_model.OpQuery("aten::to", "to_copy.c", (float(n),), 0.0, 4.0 * n))
    copy = model.estimate(op_model.OpQuery("aten::to", "transfer.h2d", (2.0 * n,), 0.0, 2.0 * n))
    assert copy.time_s > 2.0 * n / 63e9  # at most the link's rate
    # the cast at the device's bandwidth (the adds' 315 GB/s here): its 4n bytes in a few times
    # less than the copy's 2n across the link
    assert cast.time_s < 0.4 * copy.time_s
    assert cast.time_s == pytest.approx(cal.roofline.time(0.0, 4.0 * n), rel=0.5)


def test_a_transfer_the_traces_never_ran_takes_the_host_link(tmp_path, calibration):
    model = tc.TraceOpModel(calibration)
    est = model.estimate(op_model.OpQuery("aten::to", "transfer.d2h", (1e8,), 0.0, 1e8))
    assert est.source == "roofline"
    assert est.time_s == pytest.approx(calibration.launch_floor_s + 1e8 / 63e9)
    # other families keep the device roofline
    other = model.estimate(op_model.OpQuery("aten::sigmoid", "sigmoid.s", (1e8,), 0.0, 4e8))
    assert other.time_s == pytest.approx(calibration.roofline.time(0.0, 4e8))


def test_transfers_are_left_out_of_the_device_bandwidth(tmp_path):
    ops = [*training_ops(), to(1 << 22, 400.0, copy=H2D)]
    with_copy = tc.read_and_calibrate([write_trace(tmp_path / "a.json", ops)])
    without = tc.read_and_calibrate([write_trace(tmp_path / "b.json", training_ops())])
    assert with_copy.roofline.bandwidth_bytes_per_s == without.roofline.bandwidth_bytes_per_s


def test_scaling_moves_a_transfer_by_the_host_links():
    assert tc.host_link_bytes_per_s(by_name("a100")) == 31.5e9
    assert tc.host_link_bytes_per_s(by_name("v100-sxm2-16gb")) == 15.75e9
    points = (GridPoint((1e6,), 30e-6, 0.0, 0.0, 1e6),)
    fam = FamilyCalibration("transfer.h2d", "hot", ("bytes",), points, 2e-6, 1e15, 63e9)
    cal = CalibrationResult(
        device="cuda", device_name="H100 SXM", device_key="", dtype="bfloat16", threads=1,
        warm_reuse_bytes=0, cold_reuse_bytes=0, families=(fam,), roofline=None, complete=True,
        grid=tc.TRACE_GRID,
    )  # fmt: skip
    assert tc.scale_to_device(cal, "mi300x").families[0].bandwidth_bytes_per_s == 63e9  # PCIe 5 both
    assert tc.scale_to_device(cal, "a100").families[0].bandwidth_bytes_per_s == 31.5e9


# ---------------------------------------------------------------------------- scaling


def test_scaling_moves_the_rates_by_the_datasheet_ratios_and_keeps_residuals(tmp_path):
    cal = tc.read_and_calibrate([write_trace(tmp_path / "a.json", training_ops())])
    h100, mi300 = by_name("h100"), by_name("mi300x")
    moved = tc.scale_to_device(cal, mi300)
    assert moved.device_name == "MI300X" and "scaled to MI300X by datasheet peaks" in moved.source
    for old, new in zip(cal.families, moved.families, strict=True):
        if math.isfinite(old.rate_flops):
            assert new.rate_flops == pytest.approx(old.rate_flops * mi300.peak("bf16") / h100.peak("bf16"))
        if math.isfinite(old.bandwidth_bytes_per_s):
            ratio = mi300.bytes_per_s / h100.bytes_per_s
            assert new.bandwidth_bytes_per_s == pytest.approx(old.bandwidth_bytes_per_s * ratio)
        for p, q in zip(old.points, new.points, strict=True):
            before = math.log(p.time_s / old.base_time(p.flops, p.bytes))
            after = math.log(q.time_s / new.base_time(q.flops, q.bytes))
            assert after == pytest.approx(before, abs=1e-9)


def test_scaling_there_and_back_is_the_identity(tmp_path):
    cal = tc.read_and_calibrate([write_trace(tmp_path / "a.json", training_ops())])
    back = tc.scale_to_device(tc.scale_to_device(cal, "mi300x"), "h100")
    for old, new in zip(cal.families, back.families, strict=True):
        for p, q in zip(old.points, new.points, strict=True):
            assert q.time_s == pytest.approx(p.time_s, rel=1e-9)


# ---------------------------------------------------------------------------- validation


@pytest.fixture
def calibration(tmp_path):
    a = write_trace(tmp_path / "a.json", training_ops())
    b = write_trace(tmp_path / "b.json", training_ops(1.1))
    return tc.read_and_calibrate([a, b])


def test_validation_compares_each_op_with_its_prediction(tmp_path, calibration):
    held = _events(tmp_path, "held.json", held_out_ops())
    r = tv.validate_against(held, calibration, calibration_source="cal.json")
    assert r.tier == "target-calibrated"
    model = tc.TraceOpModel(calibration)
    by = {(o.name, o.shapes): o for o in r.ops}
    gemm = by[("aten::mm", "(192, 1024), (1024, 1024)")]
    assert gemm.calls == 2 and gemm.measured_s == pytest.approx(15.5e-6)  # median of 15 and 16
    inst = next(i for i in tc.op_instances(held) if i.name == "aten::mm")
    expected = model.estimate(
        op_model.OpQuery("aten::mm", "gemm.nn", inst.features, inst.flops, inst.bytes)
    ).time_s
    assert gemm.predicted_s == pytest.approx(expected)
    large = [o for o in r.ops if o.measured_s >= 10e-6]
    assert r.op_count == len(large) == 2
    assert r.op_mape == pytest.approx(np.mean([abs(o.predicted_s / o.measured_s - 1) for o in large]))
    assert r.small_op_count == 1
    (step,) = r.points
    assert step.measured_s == pytest.approx((15 + 16 + 12 + 4) * 1e-6)
    predicted = sum(o.predicted_s * o.calls for o in r.ops)
    assert step.predicted_s == pytest.approx(predicted)
    assert r.step_mape == pytest.approx(abs(predicted / step.measured_s - 1))
    assert r.modelled_share == pytest.approx(1.0)


def test_between_measured_shapes_the_gemm_is_interpolated(tmp_path, calibration):
    r = tv.validate_against(
        _events(tmp_path, "held.json", held_out_ops()), calibration, calibration_source="c"
    )
    gemm = next(o for o in r.ops if o.name == "aten::mm")
    assert gemm.source == "grid" and not gemm.extrapolated
    # M = 192 lies between the medians at M = 128 (~12.55 µs) and 256 (~20.1 µs)
    assert 12e-6 < gemm.predicted_s < 20.5e-6


def test_another_device_is_refused_naming_both(tmp_path, calibration):
    held = _events(tmp_path, "held.json", held_out_ops(), device=MI300X)
    with pytest.raises(InvalidInput, match=r"ran on MI300X and the calibration .* is of H100 SXM"):
        tv.validate_against(held, calibration, calibration_source="cal.json")


def test_unseen_device_scales_the_calibration(tmp_path, calibration):
    held = _events(tmp_path, "held.json", held_out_ops(), device=MI300X)
    r = tv.validate_against(held, calibration, calibration_source="cal.json", unseen_device=True)
    assert r.tier == "unseen-device"
    assert r.device_name == "MI300X" and r.calibration.device_name == "MI300X"


def test_another_dtype_is_refused_naming_both(tmp_path, calibration):
    fp32 = [("aten::mm", [[64, 64], [64, 64]], ["float", "float"], 10.0)]
    with pytest.raises(InvalidInput, match=r"float32 trace and the calibration .* is for bfloat16"):
        tv.validate_against(_events(tmp_path, "held.json", fp32), calibration, calibration_source="c")


def test_a_cpu_calibration_is_refused(tmp_path, calibration):
    cpu = replace(calibration, device="cpu", device_name="AMD EPYC", grid="standard")
    with pytest.raises(InvalidInput, match=r"is a calibration of AMD EPYC .cpu.*ran on H100 SXM"):
        tv.validate_against(_events(tmp_path, "held.json", held_out_ops()), cpu, calibration_source="c")


def test_an_op_in_another_dtype_borrows_the_plain_family(tmp_path, calibration):
    ops = [*held_out_ops(), add(1 << 16, 6.0, "long int")]
    r = tv.validate_against(_events(tmp_path, "held.json", ops), calibration, calibration_source="c")
    other = next(o for o in r.ops if o.dtype == "int64")
    assert other.used == "add.t@hot"


def test_an_op_no_family_covers_gets_the_device_roofline(tmp_path, calibration):
    ops = [*held_out_ops(), ("aten::sigmoid", [[1 << 16]], [BF16], 5.0)]
    r = tv.validate_against(_events(tmp_path, "held.json", ops), calibration, calibration_source="c")
    sig = next(o for o in r.ops if o.name == "aten::sigmoid")
    assert sig.source == "roofline"
    roof = calibration.roofline
    inst = next(i for i in tc.op_instances(_events(tmp_path, "h2.json", ops)) if i.name == "aten::sigmoid")
    assert sig.predicted_s == pytest.approx(roof.time(inst.flops, inst.bytes))


def test_saved_calibration_round_trips_and_loads_without_torch(tmp_path, calibration):
    from infer_opt.results import save_result

    path = save_result(tmp_path / "cal.json", calibration)
    back = tc.load(path)
    assert back.source == calibration.source and back.kernel_gap_s == calibration.kernel_gap_s
    assert back.family_map().keys() == calibration.family_map().keys()


def test_loading_something_else_is_refused(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(InvalidInput, match=r"--calibration"):
        tc.load(empty)
    with pytest.raises(InvalidInput, match=r"does not exist"):
        tc.load(tmp_path / "missing.json")


# ---------------------------------------------------------------------------- shared traces


@pytest.mark.skipif(len(H100_TRACES) < 4, reason="../shared/traces is absent")
def test_leave_one_out_on_the_shared_h100_traces():
    events = [read_trace(p) for p in H100_TRACES]
    cal = tc.calibrate_from_traces(events[:3])
    assert cal.source == "from 3 traces of H100 SXM"
    r = tv.validate_against(events[3], cal, calibration_source="three")
    assert r.op_count > 0 and r.op_mape is not None and r.step_mape is not None
    assert r.modelled_share > 0.99
    # the held-out trace's steps hold all of its GPU time
    assert sum(s.measured_s for s in r.points) == pytest.approx(
        float(events[3].gpu.dur_us[events[3].gpu.kind != 3].sum()) / 1e6
    )


@pytest.mark.skipif(not (H100_TRACES and MI300_TRACES), reason="../shared/traces is absent")
def test_shared_traces_of_two_gpus_are_refused():
    with pytest.raises(InvalidInput, match=r"ran on MI300X.*on H100 SXM"):
        tc.read_and_calibrate([H100_TRACES[0], MI300_TRACES[0]])


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([64, 128, 256, 512, 1024]), st.floats(3.0, 400.0)),
        min_size=1,
        max_size=8,
        unique_by=lambda t: t[0],
    ),
    st.lists(st.tuples(st.sampled_from([1 << 12, 1 << 14, 1 << 16, 1 << 20]), st.floats(2.0, 80.0)),
             max_size=4, unique_by=lambda t: t[0]),
)  # fmt: skip
def test_validating_against_a_training_trace_has_no_error(tmp_path_factory, gemms, adds):
    """Every shape of the trace is a calibration point: each op is predicted at its own median."""
    ops = [mm(m, 512, 512, us) for m, us in gemms] + [add(n, us) for n, us in adds]
    path = write_trace(tmp_path_factory.mktemp("t") / "t.json", ops)
    ev = read_trace(path)
    r = tv.validate_against(ev, tc.calibrate_from_traces([ev]), calibration_source="itself")
    for o in r.ops:
        assert o.predicted_s == pytest.approx(o.measured_s, rel=1e-9)
    assert r.step_mape == pytest.approx(0.0, abs=1e-9)
    assert r.op_count + r.small_op_count == len(ops)


def test_traces_mostly_without_shaped_ops_are_said_so(tmp_path):
    # 20 µs of shaped ops, 80 µs of a kernel whose op recorded no shapes
    ops = [*training_ops(), ("aten::custom_kernel", [], [], 800.0)]
    path = write_trace(tmp_path / "a.json", ops)
    ev = read_trace(path)
    shaped = sum(i.time_s for i in tc.op_instances(ev))
    cal = tc.calibrate_from_traces([ev])
    (notice,) = [n for n in cal.warnings if n.code == "trace_calibration_coverage"]
    assert notice.values["share"] == pytest.approx(shaped / (shaped + 800e-6))
    assert tc.modelled_share([ev], tc.op_instances(ev)) == pytest.approx(shaped / (shaped + 800e-6))


def test_traces_of_shaped_ops_only_say_nothing_of_coverage(tmp_path):
    cal = tc.calibrate_from_traces([read_trace(write_trace(tmp_path / "a.json", training_ops()))])
    assert not [n for n in cal.warnings if n.code == "trace_calibration_coverage"]
