"""The ``trace-compare`` result kind: two trace analyses side by side (``infer-opt compare`` on
two trace results or trace files): ops matched by (name, shapes, dtype), their kernel time per
step and its ratio against the spread between steps, and the categories' shares."""

from __future__ import annotations

from dataclasses import dataclass, field

from infer_opt.notices import Notice
from infer_opt.results import Result
from infer_opt.results.trace import IdleCause, Shapes, as_shapes


@dataclass(frozen=True)
class TraceSide:
    """One side: where it came from and its step (measured)."""

    name: str
    device_name: str
    ranks: int
    steps: int  # analyzed windows over all ranks
    step_median_s: float  # median over the ranks' median step
    step_spread_s: float | None  # largest max − min of a rank's steps; None under two (unknown)
    kernel_time_per_step_s: float
    #: the GPU's idle share of the analyzed steps (median over ranks); None when unknown
    idle_fraction: float | None = None
    # from the replay of each step (trace/critical.py), per step: the mean over every replayed
    # step of every rank; '' / 0 / {} where the trace result has no replay (--hta-compat, older)
    bound: str = ""  # host / device: the side holding most of the mean critical path
    bound_share: float = 0.0  # that side's share of it
    replayed_step_s: float = 0.0  # mean replayed span (what the causes sum to)
    critical_path: dict[str, float] = field(default_factory=dict)  # cause -> s per step
    critical_kernels: dict[str, float] = field(default_factory=dict)  # kernel category -> s per step
    idle_causes: tuple[IdleCause, ...] = ()  # the trace result's (its slowest rank's) idle causes

    @property
    def host_on_path_s(self) -> float:
        """Host-side time on the critical path per step (host work, launches, sync waits)."""
        return sum(self.critical_path.get(k, 0.0) for k in ("host", "launch", "sync_wait"))


@dataclass(frozen=True)
class OpChange:
    """One (op, shapes, dtype) group on both sides (``None`` where a side lacks it)."""

    name: str
    shapes: Shapes | str  # as OpGroup's: a dimension list per tensor input
    dtype: str
    base_per_step_s: float | None
    new_per_step_s: float | None
    ratio: float | None  # new / base
    spread_s: float | None  # the larger side's max − min over its steps (None: one step, unknown)
    verdict: str  # slower, faster, same, within_spread, only_base, only_new
    base_calls: int = 0
    new_calls: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "shapes", as_shapes(self.shapes))


@dataclass(frozen=True)
class CategoryShare:
    category: str
    base_share: float
    new_share: float
    base_per_step_s: float
    new_per_step_s: float


@dataclass(frozen=True)
class CauseChange:
    """One cause of the critical path on both sides, per step (``kernel: <category>`` rows split
    the ``kernel`` cause); shares are of each side's replayed step."""

    cause: str
    base_per_step_s: float
    new_per_step_s: float
    base_share: float
    new_share: float


@dataclass(frozen=True)
class TraceCompareResult(Result):
    KIND = "trace-compare"

    base: TraceSide
    new: TraceSide
    step_ratio: float  # new / base median step
    threshold: float
    ops: tuple[OpChange, ...]
    categories: tuple[CategoryShare, ...]
    headline: str
    warnings: tuple[Notice, ...] = field(default=())
    #: the share of each side's kernel time in ops both sides ran (the smaller of the two)
    matched_fraction: float | None = None
    #: what the headline compares: ``step`` (the median step), ``kernel_time`` (both steps
    #: host-bound: the step measures the host, so the GPU's kernel time per step instead)
    compared: str = "step"
    #: the critical path by cause side by side (empty where either side has no replay)
    critical_path: tuple[CauseChange, ...] = ()
