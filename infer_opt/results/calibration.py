"""The ``calibration`` kind: an operator-level calibration of one device, dtype and thread count."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from infer_opt.notices import Notice
from infer_opt.results import Result, number_problems

#: the timing of an operator calibration (:class:`~infer_opt.run_key.RunKey`)
OP_TIMING = "op-profiler"

#: cache states a family is measured in: its main operand (a matmul's weight, attention's keys
#: and values, an embedding's table) just touched (hot), after a read of about two L2s (warm),
#: after a read of twice the last-level cache (cold); see :func:`reuse_distances`. An op without
#: a main operand (elementwise, norms, copies, views) is measured hot and in **context**: right
#: after a read of several L2s, which pushes the dispatcher's code and data for it out of the
#: caches as a step's matmuls do (:func:`context_distances`) — and the smallest of them **far**:
#: after a flush of the last-level cache (at most 64 MiB), as after a layer's weights streamed by
STATES = ("hot", "warm", "cold", "context", "far")
#: the ``grid`` of a calibration built from GPU traces (:mod:`infer_opt.trace.calibrate`)
TRACE_GRID = "trace"
#: the states in the order an op cools: where its main operand is (hot → warm → cold), how far
#: its code and the dispatcher's data are (hot → context → far); a colder state is never faster
#: on a machine whose speed holds still (:func:`state_order`)
STATE_CHAINS = (("hot", "warm", "cold"), ("hot", "context", "far"))
#: a colder state "came out faster" when its time is below the hotter one's by more than this
ORDER_TOLERANCE = 0.10


def _div(work: float, rate: float) -> float:
    return 0.0 if work == 0 else work / rate


@dataclass(frozen=True)
class GridPoint:
    """One measured shape of a family: features (e.g. M, N, K), the median per-call time, its
    spread, and the work the base roofline sees."""

    features: tuple[float, ...]
    time_s: float
    #: IQR / median of the per-call times
    rel_spread: float
    flops: float
    #: bytes the base roofline uses (an embedding counts the rows it gathers, not the table)
    bytes: float

    def loaded_problems(self) -> list[tuple[str, Any, str]]:
        """What a saved point may not hold (a file read back: :meth:`Result.from_dict`)."""
        out = number_problems(self, finite_positive=("time_s",), non_negative=("flops", "bytes"))
        if not all(isinstance(f, (int, float)) and math.isfinite(f) and f >= 0 for f in self.features):
            out.append(("features", list(self.features), "must be sizes: finite numbers >= 0"))
        return out


@dataclass(frozen=True)
class FamilyCalibration:
    """The measured grid of one op family in one cache state, and its fitted base roofline
    ``t0 + max(F/R, Q/b)`` (R or b infinite when the family does no FLOPs / moves no bytes)."""

    family: str
    state: str
    feature_names: tuple[str, ...]
    points: tuple[GridPoint, ...]
    launch_s: float
    rate_flops: float
    bandwidth_bytes_per_s: float
    #: median |t̂ − t|/t over held-out grid points (None: too few points to tell)
    cv_rel_error: float | None = None
    #: shapes not timed, with the reason (a failed correctness check, out of memory)
    skipped: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.family}@{self.state}"

    def loaded_problems(self) -> list[tuple[str, Any, str]]:
        """What a saved family may not hold: no points, a point with another number of features
        than ``feature_names``, an unknown state, a rate or bandwidth <= 0, a negative launch."""
        out = number_problems(
            self, positive=("rate_flops", "bandwidth_bytes_per_s"), non_negative=("launch_s",)
        )
        if self.state not in STATES:
            out.append(("state", self.state, f"must be one of {', '.join(STATES)}"))
        if not self.points:
            out.append(("points", [], "must hold at least one measured shape"))
        n, names = len(self.feature_names), ", ".join(self.feature_names)
        out += [
            (f"points[{i}].features", list(p.features), f"must hold {n} values ({names})")
            for i, p in enumerate(self.points)
            if len(p.features) != n
        ]
        return out

    def base_time(self, flops: float, nbytes: float) -> float:
        """``t0 + max(F/R, Q/b)``."""
        return self.launch_s + max(_div(flops, self.rate_flops), _div(nbytes, self.bandwidth_bytes_per_s))


@dataclass(frozen=True)
class HostCalibration:
    """Host cost outside the operators in a hot loop, ``per_op_s · n_ops + per_module_call_s ·
    n_modules``, from two op chains timed with and without the profiler: the same ops called raw
    and through ``nn.Module`` calls (a step scales it by its calls' context:
    :meth:`OpModel.host_time`)."""

    per_op_s: float
    per_module_call_s: float
    #: the evidence: ops and module calls of the two chains, their wall and per-op times
    chain_ops: int = 0
    chain_module_calls: int = 0
    raw_wall_s: float = 0.0
    raw_op_time_s: float = 0.0
    module_wall_s: float = 0.0
    module_op_time_s: float = 0.0
    #: relative spread (IQR/median) of the chain timings
    rel_spread: float = 0.0

    def loaded_problems(self) -> list[tuple[str, Any, str]]:
        """Host costs are finite and >= 0 (a file read back)."""
        return number_problems(self, non_negative=("per_op_s", "per_module_call_s"))


@dataclass(frozen=True)
class HostIssue:
    """What the host spent to issue one family's ops in the traces of a GPU calibration (the
    median time from the previous launching op's start to this one's, syncs' waits left out:
    :mod:`infer_opt.trace.host_costs`), and the GPU events one such op launched on average."""

    family: str
    issue_s: float
    kernels: float = 1.0
    samples: int = 0

    def loaded_problems(self) -> list[tuple[str, Any, str]]:
        """Issue cost finite and >= 0, kernels per op > 0 (a file read back)."""
        return number_problems(self, positive=("kernels",), non_negative=("issue_s",))


@dataclass(frozen=True)
class DeviceRoofline:
    """The device roofline ``t0 + max(F/R, Q/b)`` fitted on the calibration's matmul and
    elementwise grids (what uncovered ops are predicted with)."""

    compute_rate_flops: float
    bandwidth_bytes_per_s: float
    launch_overhead_s: float
    median_abs_rel_error: float = 0.0

    def loaded_problems(self) -> list[tuple[str, Any, str]]:
        """R and b > 0, t0 finite and >= 0 (a file read back)."""
        rates = ("compute_rate_flops", "bandwidth_bytes_per_s")
        return number_problems(self, positive=rates, non_negative=("launch_overhead_s",))

    @property
    def ridge_point(self) -> float:
        """R / b in FLOP/byte."""
        return self.compute_rate_flops / self.bandwidth_bytes_per_s

    def time(self, flops: float, nbytes: float) -> float:
        return self.launch_overhead_s + max(
            _div(flops, self.compute_rate_flops), _div(nbytes, self.bandwidth_bytes_per_s)
        )


@dataclass(frozen=True)
class CalibrationResult(Result):
    """An operator-level calibration of one device, dtype and thread count."""

    KIND = "calibration"
    #: how its times were taken, in a :class:`~infer_opt.run_key.RunKey`: per
    #: operator under torch.profiler, as ``profile`` times operators
    timing: ClassVar[str] = OP_TIMING

    device: str
    device_name: str
    #: cache key (device model, threads, dtype): see profilers.device.device_key
    device_key: str
    dtype: str
    threads: int
    #: bytes read between a warm (cold) case's last use of its main operand and its timed call:
    #: where those states sit on the reuse-distance axis (:meth:`OpModel.estimate`)
    warm_reuse_bytes: int
    cold_reuse_bytes: int
    families: tuple[FamilyCalibration, ...] = ()
    #: bytes read before a small op's call in the context state (0: not measured — a GPU, or a
    #: calibration made before the state existed)
    context_reuse_bytes: int = 0
    #: where a small op's dispatch context starts to cost: the L1 caches (data and instruction)
    #: of one core — an op's own code leaves them as soon as other ops run between two of its
    #: calls (0: the L2, as calibrations made before this field predicted; :meth:`OpModel.near_bytes`)
    context_near_bytes: int = 0
    #: bytes read before a small op's call in the far state (0: not measured — a GPU, or a
    #: calibration made before the state existed)
    far_reuse_bytes: int = 0
    host: HostCalibration | None = None
    roofline: DeviceRoofline | None = None
    #: families (by calibration group name) finished, in order: what calibrate --continue skips
    groups_done: tuple[str, ...] = ()
    complete: bool = False
    wall_s: float = 0.0
    torch_version: str = ""
    #: how op times were taken (the same instrument profile uses)
    op_timer: str = ""
    #: what float32 matmuls computed in (``ieee``, ``tf32``, ``bf16``; ``""`` for other dtypes)
    matmul_precision: str = ""
    grid: str = ""
    #: the matmul speed probe's time before each group (:mod:`infer_opt.profilers.speed_probe`; empty
    #: in a calibration made before it existed)
    probe_s: tuple[float, ...] = ()
    #: the dispatch probe's time before each group (empty in a calibration made before it existed)
    dispatch_probe_s: tuple[float, ...] = ()
    warnings: tuple[Notice, ...] = ()
    #: where its points came from: "" for a calibration measured by ``calibrate`` on this
    #: machine, "from N traces of <device>" for one built from GPU traces
    #: (:mod:`infer_opt.trace.calibrate`), with "scaled to <device> ..." when moved to another GPU
    source: str = ""
    #: the trace files it was built from (names only)
    traces: tuple[str, ...] = ()
    #: each of those traces' identity (:func:`infer_opt.trace.events.fingerprint`: its events'
    #: times, whatever its name or compression); empty in a calibration made before it existed
    trace_ids: tuple[str, ...] = ()
    #: the traces' launch floor (a low percentile of kernel durations) and median gap between
    #: consecutive kernels on a stream inside a step (0: not measured — a calibrate run)
    launch_floor_s: float = 0.0
    kernel_gap_s: float = 0.0
    #: per family, the host's issue cost of one op in the traces (empty: not measured — a
    #: calibrate run, or a trace calibration made before it existed: ``predict`` then adds the
    #: kernel-gap term serially), the median over every family's ops, and the device's median
    #: gap between queued kernels (:mod:`infer_opt.trace.host_costs`)
    host_issue: tuple[HostIssue, ...] = ()
    host_issue_s: float = 0.0
    queued_gap_s: float = 0.0
    #: the host's time between two launching ops as ``host_launch_s + host_python_s·p +
    #: host_op_s·o`` (``p`` Python calls, ``o`` aten ops at the profiler's level in between:
    #: :mod:`infer_opt.trace.host_fit`), fitted on the traces (all 0: not fitted — a calibration
    #: made before it, ``predict`` then takes the per-family issue costs above), and per aten op
    #: the mean ops its GPU kernel records below it (:func:`infer_opt.trace.host_fit.op_children`)
    host_launch_s: float = 0.0
    host_python_s: float = 0.0
    host_op_s: float = 0.0
    host_op_children: tuple[tuple[str, float], ...] = ()
    #: derived from the fields above when the result is built (so ``--json`` carries what the view
    #: shows; a file saved before they were carried gets them on load): the probes' medians over
    #: the groups (None: not measured); its families' cache states checked against each other
    #: (:func:`state_order`) and the share of their shapes where the colder state came out faster
    #: (None: no family measured in two states); how well its shapes repeat, the median of their
    #: repetitions' IQR/median (None: no shape with a usable spread)
    probe_median_s: float | None = field(default=None, init=False)
    dispatch_probe_median_s: float | None = field(default=None, init=False)
    state_order: tuple[StateOrder, ...] = field(default=(), init=False)
    shapes_in_two_states: int = field(default=0, init=False)
    out_of_order_share: float | None = field(default=None, init=False)
    shape_count: int = field(default=0, init=False)  # shapes over its families
    point_spread: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        orders = state_order(self.families)
        in_two = sum(o.shapes for o in orders)
        spreads = [p.rel_spread for f in self.families for p in f.points if math.isfinite(p.rel_spread)]
        derived = {
            "probe_median_s": _median(_usable(self.probe_s)),
            "dispatch_probe_median_s": _median(_usable(self.dispatch_probe_s)),
            "state_order": orders,
            "shapes_in_two_states": in_two,
            "out_of_order_share": sum(o.faster for o in orders) / in_two if in_two else None,
            "shape_count": sum(len(f.points) for f in self.families),
            "point_spread": _median(spreads),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    def family_map(self) -> dict[str, FamilyCalibration]:
        return {f.key: f for f in self.families}

    @property
    def from_traces(self) -> bool:
        """Built from GPU traces (``calibrate --from-trace``), not measured on this machine: no
        thread count applies, and ``validate --against TRACE`` is how its error is measured."""
        return self.grid == TRACE_GRID

    @property
    def usable_probe_s(self) -> tuple[float, ...]:
        """The matmul probe's times that are finite and positive (a hand-edited file may hold
        others)."""
        return _usable(self.probe_s)

    @property
    def usable_dispatch_probe_s(self) -> tuple[float, ...]:
        """The dispatch probe's times that are finite and positive."""
        return _usable(self.dispatch_probe_s)


def _median(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if values else None


@dataclass(frozen=True)
class StateOrder:
    """One family's two neighbouring cache states (:data:`STATE_CHAINS`) at the shapes measured
    in both: how many there are and at how many the colder state came out faster than the
    hotter one by more than :data:`ORDER_TOLERANCE`."""

    family: str
    hotter: str
    colder: str
    shapes: int
    faster: int


def state_order(
    families: Sequence[FamilyCalibration], tolerance: float = ORDER_TOLERANCE
) -> tuple[StateOrder, ...]:
    """Per family and pair of neighbouring states it was measured in (a state it lacks is
    skipped: hot → cold where warm is missing), the shapes where the colder state came out
    faster (:class:`StateOrder`). A colder operand or colder code never makes an op faster,
    so these count how much the machine's speed moved between the states' measurements (a
    few seconds apart, per chunk of shapes) — the calibration's own noise, which its
    predictions inherit. Times that are not finite and positive are left out."""
    by_name: dict[str, dict[str, dict[tuple[float, ...], float]]] = {}
    for family in families:
        times = {p.features: p.time_s for p in family.points if math.isfinite(p.time_s) and p.time_s > 0}
        by_name.setdefault(family.family, {})[family.state] = times
    out = []
    for name, states in sorted(by_name.items()):
        pairs = {}
        for chain in STATE_CHAINS:
            present = [s for s in chain if s in states]
            pairs.update(dict.fromkeys(itertools.pairwise(present)))
        for hotter, colder in pairs:
            shared = [f for f in states[colder] if f in states[hotter]]
            if shared:
                faster = sum(states[colder][f] < states[hotter][f] * (1 - tolerance) for f in shared)
                out.append(StateOrder(name, hotter, colder, len(shared), faster))
    return tuple(out)


def _usable(times: Sequence[float]) -> tuple[float, ...]:
    return tuple(t for t in times if math.isfinite(t) and t > 0)
