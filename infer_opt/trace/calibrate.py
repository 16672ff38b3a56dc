"""The operator model calibrated from GPU traces (``infer-opt calibrate --from-trace``, docs/gpu_model.md).

A torch.profiler trace recorded with ``record_shapes=True`` holds, for every GPU kernel, the
aten op that launched it, that op's input shapes and dtypes, and the kernel's CUPTI / roctracer
duration. That is what ``calibrate`` measures on a grid of shapes, only on a user's own
workload: this module turns one device's traces into the same
:class:`~infer_opt.results.calibration.CalibrationResult` ``calibrate`` writes, so ``validate``
(and the operator model, :class:`~infer_opt.cost_models.op_model.OpModel`) read it unchanged.

* **Op instances** (:func:`op_instances`): each GPU event (kernel, memcpy, memset; not a sync
  wait, not a collective) belongs to the outermost op of its launch chain that has a FLOP/byte
  formula (:func:`infer_opt.trace.ops.attribute`, the rule ``infer-opt trace`` groups by) —
  except a layout copy inside another op (the ``clone`` of a ``reshape`` inside ``matmul``),
  which is its own instance (:func:`_split_copies`); an instance's time is the sum of its
  events' durations (a ``linear``'s GEMM, split-K reduction and memset are one instance), its
  family and features the formula's (:func:`infer_opt.trace.op_costs.op_cost`).
* **Families** (:func:`family_key`): the formula's family (``gemm.nt``, ``bmm.nn``,
  ``softmax``, ``layer_norm``, ``add.t``, ``conv2d`` ...); GPU attention by its entry point
  (``attention_flash`` / ``_efficient`` / ``_cudnn`` / ``_math``: the op the kernel ran under)
  with ``.causal`` for a causal mask; an op in a dtype other than the calibration's gets the
  dtype appended (``eq.s:int64``) and borrows the plain family when its own has no points.
* **Points**: per family, one :class:`~infer_opt.results.calibration.GridPoint` per distinct
  shape (features, FLOPs, bytes): the **median** instance time over every instance of that
  shape in every trace, its IQR/median as the spread. Each family is then fitted as
  ``calibrate``'s are (:func:`~infer_opt.cost_models.op_model.fit_family`: base roofline
  ``t0 + max(F/R, Q/b)``, residual interpolated over the log₂ features, cross-validated error),
  in the ``hot`` state only (a trace does not say where an op's operands were).
* **Device roofline**: fitted over every point of every family (robust, log space), what an op
  of a family the traces never ran is predicted with; the **launch floor** is the
  :data:`LAUNCH_PERCENTILE` th percentile of kernel durations, the **kernel gap** the median
  idle time between consecutive kernels on one stream inside a step.

It refuses traces of two devices or two dtypes (naming both), a trace whose device it cannot
identify, and a trace with no kernel linked to a shaped op (nothing to calibrate from). The
result says where it came from (``source``: "from N traces of <device>") and, in its
warnings, which families rest on fewer than :data:`MIN_SHAPES` shapes.

:func:`scale_to_device` moves a calibration to another GPU by the two datasheets' peak ratios
(the *unseen-device* tier). Pure: numpy and the standard library (scipy inside the fits).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from infer_opt.cost_models import op_model
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results.calibration import (
    TRACE_GRID,
    CalibrationResult,
    DeviceRoofline,
    FamilyCalibration,
    GridPoint,
)
from infer_opt.run_key import RunKey
from infer_opt.trace import host_costs, host_fit
from infer_opt.trace.devices import (
    DTYPE_BYTES,
    DeviceSpec,
    by_name,
    host_link_bytes_per_s,
    identify,
    precision_of,
    ran_on,
)
from infer_opt.trace.events import KERNEL, MEMCPY, SYNC, TraceEvents, fingerprint

#: the ``grid`` of a calibration built from traces
TRACE_GRID = TRACE_GRID
#: the option bad input names
OPTION = "--from-trace"
#: a family with fewer distinct shapes than this is flagged (its residual rests on few points)
MIN_SHAPES = 3
#: a family with fewer shapes than this takes the device roofline as its base (a three-parameter
#: fit on fewer points follows their noise, not the family's rates)
MIN_FIT_SHAPES = 8
#: the percentile of kernel durations taken as the launch floor
LAUNCH_PERCENTILE = 5.0
#: torch's dtype names for the short ones the trace reader uses
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64", "fp8": "float8"}
SHORT_DTYPES = {v: k for k, v in TORCH_DTYPES.items()}
#: feature names by family head (op_costs' feature tuples)
FEATURE_NAMES = {
    "gemm": ("M", "N", "K"),
    "bmm": ("B", "M", "N", "K"),
    "attention": ("BH", "Tq", "Tk", "d"),
    # a convolution's implicit GEMM per group (op_costs.conv_gemm)
    **dict.fromkeys(("conv1d", "conv2d", "conv3d"), ("M", "N", "K", "groups")),
    "layer_norm": ("rows", "hidden"),
    "rms_norm": ("rows", "hidden"),
    "group_norm": ("rows", "hidden"),
    "batch_norm": ("rows", "hidden"),
    "softmax": ("rows", "cols"),
    "embedding": ("rows", "dim"),
    "transfer": ("bytes",),
    # the engines' ops (engine_op_costs)
    "activation": ("rows", "d"),
    "rotary": ("tokens", "heads", "rot_dim"),
    "kv_cache": ("tokens", "row"),
}


@dataclass(frozen=True)
class OpInstance:
    """One op call that ran GPU work: what its formula says and its summed event time."""

    name: str
    shapes: str
    dtype: str
    family: str
    features: tuple[float, ...]
    flops: float
    bytes: float
    time_s: float
    kernels: int
    #: index into the trace's steps (of its first event), -1 outside any step
    step: int
    causal: bool | None = None


def family_key(family: str, causal: bool | None, dtype: str, main_dtype: str) -> str:
    """The operator model's family of an op (module docstring): ``attention_flash.causal``,
    ``eq.s:int64`` for an op in another dtype than the calibration's ``main_dtype``."""
    key = f"{family}.causal" if causal and family.startswith("attention") else family
    # a copy's time is its bytes', whatever they hold
    return key if not dtype or dtype == main_dtype or is_transfer(family) else f"{key}:{dtype}"


def feature_names(family: str, n: int) -> tuple[str, ...]:
    """Names of a family's ``n`` features (``M, N, K`` for a GEMM, ``n`` for an elementwise op)."""
    head = family.split(":")[0].split(".")[0]
    head = "attention" if head.startswith("attention") else head
    names = FEATURE_NAMES.get(head)
    if names is not None and len(names) == n:
        return names
    return ("n",) if n == 1 else tuple(f"x{i}" for i in range(n))


def _comm_mask(events: TraceEvents) -> np.ndarray:
    from infer_opt.trace.timeline import COMM, classify

    return classify(events) == COMM


def op_instances(events: TraceEvents, *, causal: str = "half") -> list[OpInstance]:
    """Every op instance of the trace that ran GPU work and has a formula (module docstring),
    in launch order."""
    from infer_opt.trace.ops import (
        TRANSFER,
        TRANSFER_SHARE,
        TRANSFER_WAYS,
        _works,
        attribute,
        link_bytes,
        transfer_directions,
    )

    att = attribute(events, None, causal)
    gpu = events.gpu
    keep = (gpu.kind != SYNC) & (att.owner >= 0) & ~_comm_mask(events)
    direction = transfer_directions(events)
    owners = _split_copies(events, att.owner, att.costs)
    time_us: dict[int, float] = {}
    moved_us: dict[tuple[int, str], float] = {}
    count: dict[int, int] = {}
    first: dict[int, int] = {}
    for e in np.flatnonzero(keep).tolist():
        op = int(owners[e])
        if not _works(att.costs.get(op)):
            continue
        time_us[op] = time_us.get(op, 0.0) + float(gpu.dur_us[e])
        count[op] = count.get(op, 0) + 1
        first.setdefault(op, e)
        way = direction.get(int(gpu.name[e])) if gpu.kind[e] == MEMCPY else None
        if way is not None:
            moved_us[op, way] = moved_us.get((op, way), 0.0) + float(gpu.dur_us[e])
    out = []
    for op in sorted(time_us, key=lambda o: first[o]):
        c = att.costs[op]
        if time_us[op] <= 0:
            continue
        family, features, nbytes = c.family, tuple(float(v) for v in c.features), float(c.bytes)
        way = max(TRANSFER_WAYS, key=lambda w: moved_us.get((op, w), 0.0))
        if moved_us.get((op, way), 0.0) >= TRANSFER_SHARE * time_us[op]:
            # a copy across the host link: its bytes (one side of the copy) over that link
            family, nbytes = f"{TRANSFER}.{way}", link_bytes(nbytes)
            features = (nbytes,)
        out.append(
            OpInstance(
                name=events.name_of(events.ops.name[op]),
                shapes=c.shapes,
                dtype=c.dtype,
                family=family,
                features=features,
                flops=float(c.flops),
                bytes=nbytes,
                time_s=time_us[op] / 1e6,
                kernels=count[op],
                step=int(gpu.step[first[op]]),
                causal=c.causal,
            )
        )
    return out


def _split_copies(events: TraceEvents, owner: np.ndarray, costs: dict[int, Any]) -> np.ndarray:
    """``owner`` with each event run by a copy *inside* another op (the ``clone`` of a
    ``reshape`` inside ``matmul``, a ``contiguous`` inside ``layer_norm``) given to that copy: the
    outermost op of copy category (:func:`infer_opt.trace.ops.category`) with a formula between
    the event's op and its owner, unless the owner is a copy itself. The owner's formula counts
    its own work, not a layout copy of its operands, and ``predict`` records the two as separate
    calls (a dispatch below ``matmul`` sees ``clone`` and ``bmm``)."""
    from infer_opt.trace.ops import _works, category

    parents = events.ops.parent.tolist()
    op_of = events.gpu.op
    copy = {i: _works(c) and category(c.family) == "copy" for i, c in costs.items()}
    memo: dict[tuple[int, int], int] = {}
    out = owner.copy()
    for e in np.flatnonzero(owner >= 0).tolist():
        top, leaf = int(owner[e]), int(op_of[e])
        if leaf == top or copy.get(top, False):
            continue
        key = (leaf, top)
        if key not in memo:
            found, i = top, leaf
            while i >= 0 and i != top:
                if copy.get(i, False):
                    found = i
                i = parents[i]
            memo[key] = found
        out[e] = memo[key]
    return out


def is_transfer(family: str) -> bool:
    """Whether a family key is a host↔device copy's (``transfer.h2d``: its rates are the host
    link's, not HBM's; :data:`infer_opt.trace.ops.TRANSFER_WAYS`)."""
    from infer_opt.trace.ops import TRANSFER

    return family.split(":")[0].split(".")[0] == TRANSFER


def main_dtype(instances: Sequence[OpInstance]) -> str:
    """The dtype of most of the instances' time (``bf16`` for a bf16 model whose masks are
    int64); ``""`` without instances."""
    by: dict[str, float] = {}
    for i in instances:
        if i.dtype in DTYPE_BYTES:  # (an `Input type` no dtype names is none of the calibration's)
            by[i.dtype] = by.get(i.dtype, 0.0) + i.time_s
    return max(by, key=lambda d: (by[d], d)) if by else ""


def kernel_floor_and_gap(events: TraceEvents) -> tuple[float, float]:
    """``(launch floor, median gap)`` in seconds: the :data:`LAUNCH_PERCENTILE` th percentile of
    the kernels' durations, and the median idle time between consecutive kernels on one stream
    inside one step (overlaps and gaps across steps left out); 0.0 each without kernels."""
    gpu = events.gpu
    kernels = np.flatnonzero(gpu.kind == KERNEL)
    if not len(kernels):
        return 0.0, 0.0
    floor = float(np.percentile(gpu.dur_us[kernels], LAUNCH_PERCENTILE)) / 1e6
    gaps: list[np.ndarray] = []
    for stream in np.unique(gpu.stream[kernels]):
        ks = kernels[gpu.stream[kernels] == stream]
        ks = ks[np.argsort(gpu.ts_us[ks], kind="stable")]
        start, end, step = gpu.ts_us[ks], gpu.ts_us[ks] + gpu.dur_us[ks], gpu.step[ks]
        gap = start[1:] - end[:-1]
        same = (step[1:] == step[:-1]) & (gap >= 0)
        gaps.append(gap[same])
    every = np.concatenate(gaps) if gaps else np.zeros(0)
    return floor, (float(np.median(every)) / 1e6 if len(every) else 0.0)


@dataclass(frozen=True)
class TraceDevice:
    """A trace's device and dtype as a calibration sees them."""

    path: str
    spec: DeviceSpec
    dtype: str
    instances: tuple[OpInstance, ...]


def trace_device(
    events: TraceEvents,
    *,
    causal: str = "half",
    option: str = OPTION,
    purpose: str = "calibrate from",
    device: DeviceSpec | None = None,
) -> TraceDevice:
    """The trace's device (identified from its ``deviceProperties`` and kernel names), its main
    dtype and op instances; a trace of an unknown device or with no kernel linked to a shaped op
    is bad input naming the file. ``device`` (``--device``) names the GPU of a trace that does not
    identify one (ROCm's "AMD Radeon Graphics" fits an MI210 and an MI250 GCD alike); a trace
    that names another GPU is refused, naming both."""
    path = events.path
    instances = op_instances(events, causal=causal)
    if not instances:
        kernels = int((events.gpu.kind == KERNEL).sum())
        why = (
            "it has no GPU kernels (a CPU-only trace?)"
            if kernels == 0
            else f"none of its {kernels} GPU kernels is linked to an aten op with recorded shapes "
            "(record the trace with record_shapes=True; torch.compile regions and CUDA-graph "
            "replays carry none)"
        )
        raise InvalidInput(option, path, f"nothing to {purpose}: {why}")
    names = [events.name_of(n) for n in np.unique(events.gpu.name[events.gpu.kind == KERNEL])]
    table = ran_on(events.device_properties, events.gpu.device[events.gpu.kind == KERNEL].tolist())
    spec, _, notices = identify(table, names)
    if spec is not None and device is not None and spec.name != device.name:
        raise InvalidInput("--device", device.name, f"{Path(path).name} ran on {spec.name}")
    if spec is None and device is None:
        values = notices[0].values if notices else {}
        seen = ", ".join(values.get("seen", ())) or "nothing"
        fits = values.get("candidates", ())
        fit = f" (it fits {' and '.join(fits)})" if 1 < len(fits) <= 3 else ""
        example = f"'{fits[0]}'" if fits else "h100"  # one it fits, not another vendor's
        raise InvalidInput(
            option, path, f"its GPU is not identified from {seen}{fit}: give --device NAME (e.g. {example})"
        )
    return TraceDevice(path, spec or device, main_dtype(instances), tuple(instances))


def check_same(devices: Sequence[TraceDevice], option: str = OPTION) -> None:
    """Refuse traces of two devices or two dtypes, naming both."""
    first = devices[0]
    for d in devices[1:]:
        if d.spec.name != first.spec.name:
            raise InvalidInput(
                option,
                d.path,
                f"ran on {d.spec.name}, {Path(first.path).name} on {first.spec.name}: "
                "calibrate one device at a time",
            )
        if d.dtype != first.dtype:
            raise InvalidInput(
                option,
                d.path,
                f"is a {d.dtype} trace, {Path(first.path).name} a {first.dtype} one: "
                "calibrate one dtype at a time",
            )


def _points(instances: Sequence[OpInstance], dtype: str) -> dict[str, list[GridPoint]]:
    """Per family key, one point per distinct (features, FLOPs, bytes): the median time."""
    times: dict[tuple[str, tuple[float, ...], float, float], list[float]] = {}
    for i in instances:
        key = (family_key(i.family, i.causal, i.dtype, dtype), i.features, i.flops, i.bytes)
        times.setdefault(key, []).append(i.time_s)
    out: dict[str, list[GridPoint]] = {}
    for (family, features, flops, nbytes), ts in sorted(times.items(), key=lambda kv: kv[0]):
        median = float(np.median(ts))
        q1, q3 = np.percentile(ts, [25, 75]) if len(ts) > 1 else (median, median)
        point = GridPoint(features, median, float((q3 - q1) / median), flops, nbytes)
        out.setdefault(family, []).append(point)
    return out


#: families whose points give the device's compute rate (the rest its bandwidth)
COMPUTE_FAMILIES = ("gemm", "bmm", "attention", "conv")
#: points shorter than this do not set a device rate (the launch floor rules them)
RATE_MIN_S = 10e-6
#: the percentile of the achieved rates taken as the device's
RATE_PERCENTILE = 90.0


def device_roofline(
    families: Sequence[FamilyCalibration], launch_s: float, spec: DeviceSpec, precision: str
) -> DeviceRoofline:
    """The device roofline ``t0 + max(F/R, Q/b)`` of the traces: ``R`` the
    :data:`RATE_PERCENTILE` th percentile of the FLOP/s the matmul, attention and conv points
    of at least :data:`RATE_MIN_S` reached, ``b`` that of the bytes/s the other points of at
    least that long reached, ``t0`` the launch floor; the datasheet's peak where no such point
    was traced. ``median_abs_rel_error``: its median error over every point."""
    compute, memory = [], []
    for f in families:
        if is_transfer(f.family):
            continue
        heavy = f.family.split(".")[0].startswith(COMPUTE_FAMILIES)
        for p in f.points:
            if p.time_s >= RATE_MIN_S:
                if heavy and p.flops > 0:
                    compute.append(p.flops / p.time_s)
                elif not heavy and p.bytes > 0:
                    memory.append(p.bytes / p.time_s)
    rate = float(np.percentile(compute, RATE_PERCENTILE)) if compute else spec.peak(precision)
    bandwidth = float(np.percentile(memory, RATE_PERCENTILE)) if memory else spec.bytes_per_s
    draft = DeviceRoofline(rate, bandwidth, launch_s)
    errors = [
        abs(draft.time(p.flops, p.bytes) - p.time_s) / p.time_s
        for f in families
        if not is_transfer(f.family)
        for p in f.points
    ]
    return replace(draft, median_abs_rel_error=float(np.median(errors)) if errors else 0.0)


def fit_families(
    points: dict[str, list[GridPoint]], floor_s: float, spec: DeviceSpec, precision: str
) -> tuple[list[FamilyCalibration], DeviceRoofline]:
    """Each family fitted on its points (:func:`~infer_opt.cost_models.op_model.fit_family`),
    and the device roofline over all of them; a family of fewer than :data:`MIN_FIT_SHAPES` shapes
    takes the device roofline as its base (``t0`` the launch floor), so its residual says how far
    its few shapes were from the device's rates and a shape far from them gets those rates; a
    host↔device copy's family the datasheet's host link (:func:`host_link_bytes_per_s`) for ``b``."""
    families = [
        op_model.fit_family(name, "hot", feature_names(name, len(ps[0].features)), ps)
        for name, ps in points.items()
    ]
    roofline = device_roofline(families, floor_s, spec, precision)
    out = []
    for f in families:
        if len(f.points) < MIN_FIT_SHAPES and any(p.flops > 0 or p.bytes > 0 for p in f.points):
            link = is_transfer(f.family)
            f = replace(
                f,
                launch_s=floor_s,
                rate_flops=roofline.compute_rate_flops,
                bandwidth_bytes_per_s=host_link_bytes_per_s(spec) if link else roofline.bandwidth_bytes_per_s,
            )
        out.append(replace(f, cv_rel_error=cross_validated_error(f)))
    return out, roofline


class TraceInterpolator(op_model.FamilyInterpolator):
    """A family's interpolator on GPU points: inside the measured shapes' hull the residual is
    interpolated as ``calibrate``'s are; outside it, it is the residual of the **nearest**
    measured shape (log₂ features; features that never varied count in the distance), not shrunk
    toward the family's roofline — on a GPU a kernel's efficiency at the nearest shape it was
    traced at (a slow softmax over long rows, a patch-embedding conv at a few % of the peak) says
    more about a new shape than a roofline fitted across kernels. (Inverse-distance means of the
    2, 4 or 8 nearest did no better on the shared traces' leave-one-out: docs/gpu_model.md.)"""

    def _nearest_index(self, point: np.ndarray) -> int:
        if self._nearest is None:  # no feature varies: the point of the median residual
            return int(np.argsort(self.residual)[len(self.residual) // 2])
        _, index = self._nearest.query(point, k=1)
        return int(np.atleast_1d(index)[0])

    def _extrapolated(self, point: np.ndarray, q: np.ndarray) -> float:
        return float(self.residual[self._nearest_index(point)])

    def time(self, features: Sequence[float], flops: float, nbytes: float) -> tuple[float, bool]:
        """``(t̂, extrapolated)``. Outside the hull, when the nearest shape's time was mostly work
        (its ``max(F/R, Q/b)`` above the launch term ``t0``), its efficiency applies to the work
        term alone: ``t̂ = t0 + w · (t_n − t0) / w_n`` — a slow kernel's efficiency says nothing of
        the launch floor of a shape a thousand times smaller (batched 5×5 matmuls after batched
        8×8 ones at 1% of the peak). A nearest shape at the launch floor scales the whole base,
        as inside."""
        f = self.family
        rho, extrapolated = self.residual_at(features)
        base = f.base_time(flops, nbytes)
        if not extrapolated:
            return base * math.exp(rho), False
        q = np.log2(np.maximum(np.asarray(features, dtype=float), 1e-300))
        near = f.points[self._nearest_index(q[self.varying])]
        work_near = f.base_time(near.flops, near.bytes) - f.launch_s
        if work_near > f.launch_s and near.time_s > f.launch_s:
            return f.launch_s + (base - f.launch_s) * (near.time_s - f.launch_s) / work_near, True
        return base * math.exp(rho), True


class TraceOpModel(op_model.OpModel):
    """The operator model over a calibration built from traces (:class:`TraceInterpolator`); a
    host↔device copy of a direction the traces never ran is the launch floor plus its bytes over
    the datasheet's host link, not the HBM roofline."""

    def _interpolator(self, family: FamilyCalibration) -> op_model.FamilyInterpolator:
        if family.key not in self._interpolators:
            self._interpolators[family.key] = TraceInterpolator(family)
        return self._interpolators[family.key]

    def _estimate(self, query: op_model.OpQuery) -> op_model.OpEstimate:
        estimate = super()._estimate(query)
        if estimate.source != op_model.SOURCE_ROOFLINE or not is_transfer(query.family):
            return estimate
        try:
            link = host_link_bytes_per_s(by_name(self.calibration.device_name))
        except InvalidInput:
            return estimate
        roof = self.calibration.roofline
        floor = self.calibration.launch_floor_s or (roof.launch_overhead_s if roof is not None else 0.0)
        return replace(estimate, time_s=floor + query.work_bytes / link, bound="bandwidth")


def cross_validated_error(family: FamilyCalibration, *, seed: int = 0) -> float | None:
    """:func:`~infer_opt.cost_models.op_model.cross_validated_error` with the
    :class:`TraceInterpolator`: the median ``|t̂ − t|/t`` of up to a quarter of the points, each
    predicted from the others (None with fewer than 4 points)."""
    n = len(family.points)
    if n < 4:
        return None
    rng = np.random.default_rng(seed)
    held = {int(i) for i in rng.choice(n, size=max(1, min(op_model.CV_POINTS, n // 4)), replace=False)}
    rest = replace(family, points=tuple(p for j, p in enumerate(family.points) if j not in held))
    interpolator = TraceInterpolator(rest)
    errors = []
    for i in sorted(held):
        p = family.points[i]
        predicted, _ = interpolator.time(p.features, p.flops, p.bytes)
        errors.append(abs(predicted - p.time_s) / p.time_s)
    return float(np.median(errors))


def device_key(result: CalibrationResult) -> str:
    """``cuda-h100-sxm-bfloat16-op-profiler``: the run key's slug (no CPU thread count)."""
    return replace(RunKey.of(result), threads=None).slug()


#: a calibration whose traces hold less of their GPU time in shaped ops than this says so
MIN_MODELLED_SHARE = 0.5


def modelled_share(traces: Sequence[TraceEvents], instances: Sequence[OpInstance]) -> float:
    """The share of the traces' GPU time (kernels, memcpy, memset; not sync waits) in the op
    instances calibrated from (1.0 without GPU time)."""
    total = sum(float(t.gpu.dur_us[t.gpu.kind != SYNC].sum()) for t in traces) / 1e6
    return sum(i.time_s for i in instances) / total if total > 0 else 1.0


def label(n_traces: int, device: str) -> str:
    """``from 3 traces of H100 SXM``."""
    return f"from {n_traces} trace{'s' if n_traces != 1 else ''} of {device}"


def calibrate_from_traces(
    traces: Sequence[TraceEvents],
    *,
    causal: str = "half",
    option: str = OPTION,
    device: DeviceSpec | None = None,
) -> CalibrationResult:
    """The operator calibration of one device and dtype from its traces (module docstring);
    ``device`` names the GPU of traces that do not (:func:`trace_device`)."""
    started = time.perf_counter()
    if not traces:
        raise InvalidInput(option, "", "give at least one trace file")
    devices = [trace_device(t, causal=causal, option=option, device=device) for t in traces]
    check_same(devices, option)
    spec, dtype = devices[0].spec, devices[0].dtype
    instances = [i for d in devices for i in d.instances]
    floors = [kernel_floor_and_gap(t) for t in traces]
    floor = float(np.median([f for f, _ in floors]))
    gap = float(np.median([g for _, g in floors]))
    samples = [host_costs.issue_samples(t, causal=causal) for t in traces]
    issue, issue_s, queued_gap = host_costs.summarize(samples)
    host = host_fit.fit_traces(traces, samples)
    families, roofline = fit_families(_points(instances, dtype), floor, spec, precision_of(dtype, (), spec))
    few = sorted(f.family for f in families if len(f.points) < MIN_SHAPES)
    warnings = (
        (Notice("trace_calibration_few_shapes", {"families": tuple(few), "min": MIN_SHAPES}),) if few else ()
    )
    share = modelled_share(traces, instances)
    if share < MIN_MODELLED_SHARE:
        warnings += (Notice("trace_calibration_coverage", {"share": share}),)
    torch_dtype = TORCH_DTYPES.get(dtype, dtype)
    draft = CalibrationResult(
        device="cuda",
        device_name=spec.name,
        device_key="",
        dtype=torch_dtype,
        threads=1,
        warm_reuse_bytes=0,
        cold_reuse_bytes=0,
        families=tuple(families),
        roofline=roofline,
        complete=True,
        op_timer="GPU kernel time per op (CUPTI / roctracer, from torch.profiler traces)",
        grid=TRACE_GRID,
        warnings=warnings,
        source=label(len(traces), spec.name),
        traces=tuple(Path(t.path).name for t in traces),
        trace_ids=_trace_ids(traces, option),
        launch_floor_s=floor,
        kernel_gap_s=gap,
        host_issue=issue,
        host_issue_s=issue_s,
        queued_gap_s=queued_gap,
        host_launch_s=host.launch_s if host is not None else 0.0,
        host_python_s=host.python_s if host is not None else 0.0,
        host_op_s=host.op_s if host is not None else 0.0,
        host_op_children=host_fit.op_children(traces) if host is not None else (),
    )
    return replace(draft, device_key=device_key(draft), wall_s=time.perf_counter() - started)


def _trace_ids(traces: Sequence[TraceEvents], option: str) -> tuple[str, ...]:
    """Each trace's fingerprint; one given twice (by any name or compression) is refused, its
    points would count twice."""
    seen: dict[str, str] = {}
    for t in traces:
        key = fingerprint(t)
        if key in seen:
            raise InvalidInput(
                option, t.path, f"the same trace as {seen[key]} (the same events): give each once"
            )
        seen[key] = t.path
    return tuple(seen)


def read_and_calibrate(
    paths: Sequence[str | os.PathLike[str]],
    *,
    causal: str = "half",
    option: str = OPTION,
    device: DeviceSpec | None = None,
) -> CalibrationResult:
    """:func:`calibrate_from_traces` over trace files (read one after the other: a bad one is
    named as ``option``)."""
    from infer_opt.trace.reader import read_trace

    if not paths:
        raise InvalidInput(option, "", "give at least one trace file")
    traces = []
    for path in paths:
        try:
            traces.append(read_trace(path))
        except InvalidInput as exc:
            raise InvalidInput(option, str(path), exc.expected) from None
    return calibrate_from_traces(traces, causal=causal, option=option, device=device)


def family_dtype(family: str, dtype: str) -> str:
    """The short dtype a family key runs in (its ``:dtype`` suffix, else the calibration's)."""
    _, _, suffix = family.partition(":")
    return suffix or SHORT_DTYPES.get(dtype, dtype)


def _ratio(new: float, old: float) -> float:
    return new / old if old > 0 and new > 0 else 1.0


def scale_to_device(calibration: CalibrationResult, target: DeviceSpec | str) -> CalibrationResult:
    """The calibration moved to another GPU by the datasheets' ratios: every family's compute
    rate by the two devices' peaks for the family's precision, its bandwidth by their HBM
    bandwidths (a host↔device copy's by their host links), its points' times so that each
    keeps its residual over the moved base roofline (``t' = b'(F, Q) · t / b(F, Q)``); launch
    floors and gaps as measured (a datasheet does not give them). The source says so."""
    spec = by_name(target) if isinstance(target, str) else target
    source = by_name(calibration.device_name)
    families = []
    for f in calibration.families:
        precision = precision_of(family_dtype(f.family, calibration.dtype), (), source)
        compute = _ratio(spec.peak(precision), source.peak(precision))
        if is_transfer(f.family):
            bandwidth = _ratio(host_link_bytes_per_s(spec), host_link_bytes_per_s(source))
        else:
            bandwidth = _ratio(spec.bytes_per_s, source.bytes_per_s)
        moved = replace(
            f, rate_flops=f.rate_flops * compute, bandwidth_bytes_per_s=f.bandwidth_bytes_per_s * bandwidth
        )
        points = tuple(
            replace(p, time_s=p.time_s * moved.base_time(p.flops, p.bytes) / f.base_time(p.flops, p.bytes))
            for p in f.points
        )
        families.append(replace(moved, points=points))
    precision = precision_of(SHORT_DTYPES.get(calibration.dtype, calibration.dtype), (), source)
    roof = calibration.roofline
    if roof is not None:
        roof = replace(
            roof,
            compute_rate_flops=roof.compute_rate_flops * _ratio(spec.peak(precision), source.peak(precision)),
            bandwidth_bytes_per_s=roof.bandwidth_bytes_per_s * _ratio(spec.bytes_per_s, source.bytes_per_s),
        )
    words = (
        f"{calibration.source or calibration.device_name}, scaled to {spec.name} by datasheet peaks "
        f"({precision} ×{_ratio(spec.peak(precision), source.peak(precision)):.2f}, "
        f"bandwidth ×{_ratio(spec.bytes_per_s, source.bytes_per_s):.2f})"
    )
    draft = replace(calibration, device_name=spec.name, families=tuple(families), roofline=roof, source=words)
    return replace(draft, device_key=device_key(draft))


def load(path: str | os.PathLike[str], *, option: str = "--calibration") -> CalibrationResult:
    """A calibration file without torch: missing, unreadable or another kind is bad input
    naming ``option``."""
    from infer_opt.results import load_result

    kind = CalibrationResult.KIND
    result = load_result(path, expect=(kind,), option=option, what="a calibration").result
    assert isinstance(result, CalibrationResult)
    if not result.families:
        raise InvalidInput(option, str(path), "the calibration has no families")
    return result


__all__ = [
    "OpInstance",
    "calibrate_from_traces",
    "family_key",
    "kernel_floor_and_gap",
    "load",
    "op_instances",
    "read_and_calibrate",
    "scale_to_device",
]
