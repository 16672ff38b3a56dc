"""Peaks (datasheet, overrides, a roofline fit), the fit from a trace's own ops, rate checks;
and the per-op figures on the shared H100 traces (skipped where those are absent)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from infer_opt.results.roofline import RooflineFit
from infer_opt.results.trace import OpGroup, Peaks
from infer_opt.trace.devices import by_name
from infer_opt.trace.roofline import ANY_PRECISION, fit_from_trace, peak_flops, peaks_for, rate_checks

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"


def group(name="op", family="elementwise", time_s=1e-3, flops=0.0, nbytes=1e9, calls=10, precision="bf16"):
    return OpGroup(
        name, "(8)", "bf16", calls, time_s, flops, nbytes, flops / time_s, nbytes / time_s, "bandwidth",
        0.0, precision, family=family, kernels=calls,
    )  # fmt: skip


def test_datasheet_peaks_and_their_source():
    h100 = by_name("H100 SXM")
    peaks = peaks_for(h100)
    assert peaks.flops_per_s["bf16"] == h100.peak_flops_per_s["bf16"]
    assert peaks.bytes_per_s == h100.bytes_per_s
    assert peaks.source.startswith("datasheet:H100 SXM")
    assert peaks.launch_s > 0 and any("assumed" in n for n in peaks.notes)


def test_overrides_win_and_say_so():
    peaks = peaks_for(by_name("H100 SXM"), peak_flops=5e14, peak_bandwidth=2e12)
    assert peak_flops(peaks, "bf16") == 5e14 and peak_flops(peaks, "fp8") == 5e14
    assert peaks.bytes_per_s == 2e12
    assert "--peak-flops" in peaks.source and "--peak-bandwidth" in peaks.source
    only = peaks_for(None, peak_flops=1e14, peak_bandwidth=1e12)
    assert only.flops_per_s == {ANY_PRECISION: 1e14} and peak_flops(only, "tf32") == 1e14


def test_nothing_known_gives_none_for_the_facade_to_refuse():
    assert peaks_for(None) is None
    assert peaks_for(None, peak_flops=1e14) is None  # no bandwidth
    assert peaks_for(None, peak_bandwidth=1e12) is None  # no compute figure


def test_a_roofline_fit_replaces_its_precision_bandwidth_and_launch_floor():
    fit = RooflineFit(
        compute_rate_flops=6e14, bandwidth_bytes_per_s=3e12, launch_overhead_s=4e-6,
        median_abs_rel_error=0.05, dtype="bfloat16", source="h100.json",
    )  # fmt: skip
    h100 = by_name("H100 SXM")
    peaks = peaks_for(h100, roofline_fit=fit)
    assert peaks.flops_per_s["bf16"] == 6e14 and peaks.flops_per_s["fp32"] == h100.peak_flops_per_s["fp32"]
    assert (peaks.bytes_per_s, peaks.launch_s) == (3e12, 4e-6)
    assert "--roofline h100.json" in peaks.source


def test_precision_fallback():
    peaks = Peaks({"fp32": 1.0, "fp16": 2.0}, 1.0, "t")
    assert peak_flops(peaks, "bf16") == 2.0  # bf16 -> fp16
    assert peak_flops(peaks, "tf32") == 1.0  # tf32 -> fp32


def test_fit_from_trace_bandwidth_percentile_launch_floor_and_workload_matmul_rate():
    groups = [group(nbytes=b * 1e-3) for b in (1e12, 2e12, 3e12)]  # 1, 2, 3 TB/s
    groups.append(group(nbytes=1e3, time_s=1e-6, calls=1))  # launch-bound: not used
    groups.append(group(name="mm", family="matmul", flops=5e11, nbytes=1e6))  # 500 TFLOP/s
    fit = fit_from_trace(groups, kernel_s=[1e-6, 2e-6, 3e-6] * 10)
    assert fit.source == "trace-fit" and fit.flops_per_s == {}
    assert fit.bytes_per_s == pytest.approx(2.8e12)  # p90 of 1, 2, 3 TB/s (linear interpolation)
    assert fit.launch_s == pytest.approx(1e-6)
    assert any("500.0 TFLOP/s" in n and "workload" in n for n in fit.notes)
    assert fit_from_trace([group(time_s=1e-6, calls=1)]) is None


def test_rate_above_peak_is_warned_naming_the_op():
    peaks = Peaks({"bf16": 1e15}, 1e12, "t")
    fine, hot = group(name="fine", nbytes=1.05e9), group(name="l2", nbytes=1.2e9)
    (notice,) = rate_checks([fine, hot], peaks)
    assert notice.code == "rate_above_peak" and notice["op"] == "l2" and notice["resource"] == "bytes"


# --------------------------------------------------------------------- shared H100 traces

H100 = sorted(TRACES.glob("tracelens__h100__*.json.gz")) if TRACES.is_dir() else []


def _dims(shapes: tuple[tuple[int, ...], ...]) -> list[tuple[int, ...]]:
    return [tuple(s) for s in shapes]  # a dimension list per input (no text to parse)


def _matmul_flops(name: str, dims: list[tuple[int, ...]]) -> float:
    if name == "aten::linear":
        x, w, *bias = dims
        rows = math.prod(x[:-1])
        return 2 * rows * w[0] * x[-1] + (rows * w[0] if bias else 0)
    if name == "aten::addmm":
        _, (m, k), (_, n) = dims
        return 2 * m * n * k + m * n
    if name == "aten::mm":
        (m, k), (_, n) = dims
        return 2 * m * n * k
    (b, m, k), (_, _, n) = dims  # bmm
    return 2 * b * m * n * k


@pytest.mark.skipif(not H100, reason="../shared/traces is absent")
@pytest.mark.parametrize("path", H100, ids=lambda p: p.name[:40])
def test_shared_h100_traces_matmul_flops_and_kernel_time(path):
    from infer_opt.trace.ops import op_groups
    from infer_opt.trace.reader import read_trace

    events = read_trace(path)
    h100 = by_name("H100 SXM")
    groups = op_groups(events, peaks=peaks_for(h100), device=h100)
    matmuls = [g for g in groups if g.name in ("aten::mm", "aten::addmm", "aten::bmm", "aten::linear")]
    assert matmuls
    for g in matmuls:
        assert g.flops == g.calls * _matmul_flops(g.name, _dims(g.shapes)), (g.name, g.shapes)
        assert g.family == "matmul"
    gpu = events.gpu
    linked = [d for d, k, o in zip(gpu.dur_us, gpu.kind, gpu.op, strict=True) if o >= 0 and k != 3]
    assert math.fsum(g.time_s for g in groups) == pytest.approx(math.fsum(linked) / 1e6, rel=1e-12)
    assert sum(g.kernels for g in groups) == len(linked)
