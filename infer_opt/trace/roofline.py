"""The roofline a trace's ops are held against: datasheet peaks, overrides, a fit.

:func:`peaks_for` picks the figures, in this order of precedence: ``--peak-flops`` /
``--peak-bandwidth`` (one compute figure for every precision), then a fit made by
``infer-opt roofline`` on that device (its ``R`` for the fit's precision, its ``b`` and ``t0``),
then the device's datasheet (:class:`infer_opt.trace.devices.DeviceSpec`). With neither a
device, nor a fit, nor both overrides it returns ``None``: the caller (the facade) refuses with
``InvalidInput("--device", ...)``, since a roofline without a compute and a bandwidth figure
labels nothing.

:func:`fit_from_trace` fits the bandwidth and the launch floor on the trace's own ops (a matmul
rate from a trace is what that workload reached, not the device's peak: it goes in the notes,
labelled so). :func:`rate_checks` warns where a measured rate exceeds the assumed peak.

Pure: numpy only; scipy is used through :func:`infer_opt.cost_models.roofline.fit_roofline`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# a measured rate more than RATE_SLACK × its peak is warned about: the one rule of every command
from infer_opt.cost_models.roofline import RATE_SLACK as RATE_SLACK
from infer_opt.cost_models.roofline import above_peak
from infer_opt.notices import Notice
from infer_opt.results.trace import OpGroup, Peaks, shapes_text
from infer_opt.trace.devices import DEFAULT_PCIE_GEN, PCIE_X16_BYTES_PER_S, host_link_bytes_per_s

#: the launch floor assumed when nothing measured it (a CUPTI-timed empty kernel on a recent GPU)
DEFAULT_LAUNCH_S = 2e-6
#: a rate this many times its peak is beyond any cache: the formula (or the device) is wrong
FORMULA_SUSPECT = 4.0
#: a precision a peak table lacks is held against the next one it has
FALLBACK = {"tf32": "fp32", "fp8": "fp16", "int8": "fp16", "bf16": "fp16", "fp16": "fp32", "fp64": "fp32"}
#: the key of a compute figure that applies to every precision (``--peak-flops``)
ANY_PRECISION = "*"
#: ops shorter than this per call are not used to fit the bandwidth (launch-dominated)
FIT_MIN_CALL_S = 10e-6
#: families whose achieved bytes/s say something about the memory system
STREAMING_FAMILIES = ("elementwise", "norm", "softmax", "reduction", "copy", "embedding", "memory")
#: the percentile of achieved bytes/s taken as the fitted bandwidth, and of kernel times as the floor
BANDWIDTH_PERCENTILE = 90.0
LAUNCH_PERCENTILE = 5.0

_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "tf32": "tf32"}


def peak_flops(peaks: Peaks, precision: str) -> float:
    """The compute peak for ``precision`` (its fallback chain, then the any-precision figure;
    0.0 when none)."""
    seen = precision
    while True:
        if seen in peaks.flops_per_s:
            return float(peaks.flops_per_s[seen])
        if seen not in FALLBACK:
            break
        seen = FALLBACK[seen]
    if ANY_PRECISION in peaks.flops_per_s:
        return float(peaks.flops_per_s[ANY_PRECISION])
    return float(peaks.flops_per_s.get("fp32", 0.0))


def _fit_precision(fit: Any) -> str:
    dtype = str(getattr(fit, "dtype", "") or "")
    if dtype == "float32" and getattr(fit, "matmul_precision", "") == "tf32":
        return "tf32"
    return _SHORT.get(dtype, dtype or ANY_PRECISION)


def peaks_for(
    device: Any | None,
    *,
    peak_flops: float | None = None,
    peak_bandwidth: float | None = None,
    roofline_fit: Any | None = None,
) -> Peaks | None:
    """The peaks (see the module docstring for the precedence); ``None`` when no compute and
    bandwidth figure can be formed."""
    flops: dict[str, float] = {}
    bandwidth = 0.0
    launch = DEFAULT_LAUNCH_S
    sources: list[str] = []
    notes: list[str] = []
    if device is not None:
        flops.update(device.peak_flops_per_s)
        bandwidth = float(device.bytes_per_s)
        sources.append(f"datasheet:{device.name}" + (f" ({device.source})" if device.source else ""))
        notes.append(f"launch floor assumed {DEFAULT_LAUNCH_S * 1e6:g} us (not measured)")
    if roofline_fit is not None:
        precision = _fit_precision(roofline_fit)
        flops[precision] = float(roofline_fit.compute_rate_flops)
        bandwidth = float(roofline_fit.bandwidth_bytes_per_s)
        launch = float(roofline_fit.launch_overhead_s)
        sources.append(f"--roofline {roofline_fit.source or 'fit'} (R for {precision}, b, t0)")
        notes = [n for n in notes if not n.startswith("launch floor assumed")]
    if peak_flops is not None:
        flops = {p: float(peak_flops) for p in flops} | {ANY_PRECISION: float(peak_flops)}
        sources.append("--peak-flops (every precision)")
    if peak_bandwidth is not None:
        bandwidth = float(peak_bandwidth)
        sources.append("--peak-bandwidth")
    if not flops or bandwidth <= 0:
        return None
    link = host_link_bytes_per_s(device) if device is not None else PCIE_X16_BYTES_PER_S[DEFAULT_PCIE_GEN]
    if device is None:
        notes.append(f"host link assumed PCIe {DEFAULT_PCIE_GEN} x16 ({link / 1e9:g} GB/s one way)")
    return Peaks(
        flops, bandwidth, "; ".join(sources), launch_s=launch, notes=tuple(notes), host_link_bytes_per_s=link
    )


class _Counted:
    """Sorted distinct values and their counts, as the sample they stand for."""

    def __init__(self, values: np.ndarray, counts: np.ndarray) -> None:
        self.values, self.counts = values, counts

    def __len__(self) -> int:
        return int(self.counts.sum())


def weighted_percentile(values: np.ndarray, counts: np.ndarray, p: float) -> float:
    """``np.percentile(np.repeat(values, counts), p)`` (linear) without the repeat: ``values``
    sorted and distinct, ``counts`` positive; the same float operations as numpy's."""
    n = int(counts.sum())
    q = np.true_divide(p, 100)
    virtual = (n - 1) * q
    if virtual >= n - 1:
        return float(values[-1])
    below = int(np.floor(virtual))
    ends = np.cumsum(counts)  # value i covers sorted positions [ends[i-1], ends[i])
    a = values[int(np.searchsorted(ends, below, side="right"))]
    b = values[int(np.searchsorted(ends, below + 1, side="right"))]
    gamma = np.float64(virtual - np.floor(virtual))
    diff = b - a
    return float(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma)


def _percentile(times: Sequence[float] | _Counted, p: float) -> float:
    if isinstance(times, _Counted):
        return weighted_percentile(times.values, times.counts, p)
    return float(np.percentile(times, p))


def fit_from_trace(
    groups: Sequence[OpGroup],
    *,
    kernel_s: Sequence[float] = (),
    kernel_times: tuple[np.ndarray, np.ndarray] | None = None,
) -> Peaks | None:
    """Bandwidth and launch floor from the trace's own ops (source ``trace-fit``).

    Bandwidth: the :data:`BANDWIDTH_PERCENTILE` th percentile of achieved bytes/s over the
    streaming-family groups whose calls last at least :data:`FIT_MIN_CALL_S` (long enough not to
    be launch-bound). Launch floor: the :data:`LAUNCH_PERCENTILE` th percentile of the kernel
    durations ``kernel_s`` (else of the groups' mean kernel times). The best matmul rate is put
    in the notes as a workload figure. ``None`` when no group qualifies for the bandwidth.

    Not :func:`infer_opt.cost_models.roofline.fit_roofline`: fitted on a trace's op groups
    (per-call F, Q, t) it explains a workload, not a device — on the shared H100 traces it gave
    R = 742 and 1937 TFLOP/s (above the bf16 datasheet's 989) and b = 1.2-1.5 TB/s (the typical
    op, not the ceiling), median errors 0.22-0.32, t0 at its search edge."""
    streaming = [
        g.achieved_bytes_per_s
        for g in groups
        if g.family in STREAMING_FAMILIES
        and g.bytes > 0
        and g.achieved_bytes_per_s
        and g.calls
        and g.time_s / g.calls >= FIT_MIN_CALL_S
    ]
    if not streaming:
        return None
    bandwidth = float(np.percentile(streaming, BANDWIDTH_PERCENTILE))
    by_group = [g.time_s / g.kernels for g in groups if g.kernels and g.time_s > 0]
    times: Sequence[float] | _Counted = [t for t in kernel_s if t > 0] or by_group
    if kernel_times is not None:  # (distinct durations, counts): the ranks' union without the events
        keep = kernel_times[0] > 0
        counted = _Counted(kernel_times[0][keep], kernel_times[1][keep])
        times = counted if len(counted) else by_group
    launch = float(_percentile(times, LAUNCH_PERCENTILE)) if len(times) else DEFAULT_LAUNCH_S
    notes = [
        f"bandwidth: p{BANDWIDTH_PERCENTILE:g} of achieved bytes/s over {len(streaming)} streaming op groups",
        f"launch floor: p{LAUNCH_PERCENTILE:g} of {len(times)} kernel times",
    ]
    matmul = {g.precision: 0.0 for g in groups if g.family == "matmul"}
    for g in groups:
        if g.family == "matmul" and g.flops > 0 and g.achieved_flops_per_s:
            matmul[g.precision] = max(matmul[g.precision], g.achieved_flops_per_s)
    notes += [
        f"best matmul rate {rate / 1e12:.1f} TFLOP/s ({p}): a workload figure, not the device's peak"
        for p, rate in matmul.items()
        if rate > 0
    ]
    return Peaks({}, bandwidth, "trace-fit", launch_s=launch, notes=tuple(notes))


def rate_checks(groups: Sequence[OpGroup], peaks: Peaks) -> tuple[Notice, ...]:
    """``rate_above_peak`` for each group whose achieved FLOP/s or bytes/s is above its peak by
    more than :data:`RATE_SLACK` (:func:`above_peak`, the rule every command uses), naming the
    op and the likely cause (:func:`likely_cause`). A host↔device copy is held against the host
    link, as its row is."""
    from infer_opt.trace.ops import group_peaks

    found = []
    for g in groups:
        own = group_peaks(g.family, peaks)
        checks = (
            ("flops", g.achieved_flops_per_s, peak_flops(own, g.precision)),
            ("bytes", g.achieved_bytes_per_s, own.bytes_per_s),
        )
        for resource, rate, peak in checks:
            if rate is not None and above_peak(rate, peak):
                values = {
                    "op": g.name,
                    "shapes": shapes_text(g.shapes),
                    "resource": resource,
                    "rate": rate,
                    "peak": peak,
                    "precision": g.precision,
                    "cause": likely_cause(g, resource, rate / peak),
                }
                found.append(Notice("rate_above_peak", values, subject=g.name))
    return tuple(found)


def likely_cause(g: OpGroup, resource: str, ratio: float) -> str:
    """Why a group ran above its peak, most likely first: ``link`` (a host↔device copy faster
    than the assumed link: NVLink-C2C, pinned peer copies), ``formula`` (above
    :data:`FORMULA_SUSPECT` × the peak: beyond any cache, the op's formula overcounts — shapes,
    ``dim`` — or the device is wrong), ``precision`` (compute: a faster precision's kernel ran,
    TF32/FP8, or the wrong device), ``cache`` (bytes: its data stayed in L2, or the wrong device)."""
    from infer_opt.trace.ops import TRANSFER

    if g.family == TRANSFER:
        return "link"
    if ratio > FORMULA_SUSPECT:
        return "formula"
    return "precision" if resource == "flops" else "cache"
