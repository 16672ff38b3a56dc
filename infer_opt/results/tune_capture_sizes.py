"""The ``tune-capture-sizes`` result kind: the CUDA-graph capture list that minimises the
expected decode step time over a batch-size distribution (``infer-opt tune capture-sizes``)."""

from __future__ import annotations

from dataclasses import dataclass

from infer_opt.notices import Notice
from infer_opt.results import Result


@dataclass(frozen=True)
class ListCost:
    """One capture list and its expected step time ``Σ p(b)·cost(b)``."""

    capture_sizes: tuple[int, ...]
    expected_step_s: float
    #: (low, high) with histogram input (None: exact counts): for a list evaluated as given, its
    #: expected step with the mass at the lower and at the upper bucket edges; for the proposed
    #: list, low = the optimum with the mass at the lower edges (what finer data could reach)
    expected_step_range_s: tuple[float, float] | None = None
    memory_bytes: float | None = None
    #: share of steps above the largest capture (run uncaptured)
    uncaptured_share: float = 0.0


@dataclass(frozen=True)
class Uncaptured:
    """Batch sizes above the largest capture of a list, with their share of steps."""

    capture_sizes_of: str
    batch_sizes: tuple[int, ...]
    share: float


@dataclass(frozen=True)
class CaptureBucket:
    """A captured size: batches ``lower..bound`` pad to ``bound``."""

    list_name: str
    bound: int
    lower: int
    share: float
    #: Σ p(b)·(t(bound) - t(b)) over the bucket, seconds per step
    padding_waste_s: float


@dataclass(frozen=True)
class MarginalCapture:
    """The optimal list with ``captures`` sizes against the one with one fewer."""

    captures: int
    expected_step_s: float
    saving_per_step_s: float
    memory_bytes: float | None
    #: capture time / saving per step (None: no capture time given, or no saving)
    break_even_steps: float | None


@dataclass(frozen=True)
class CostPoint:
    """The cost curve at an observed batch size (interpolated log-log between measured sizes)."""

    batch_size: int
    share: float
    time_s: float
    measured: bool
    extrapolated: bool


@dataclass(frozen=True)
class TuneCaptureSizesResult(Result):
    KIND = "tune-capture-sizes"

    engine: str
    capture_sizes: tuple[int, ...]
    expected_step_s: float
    current: ListCost
    proposed: ListCost
    #: current / proposed expected step (> 1: the proposed list is faster)
    gain: float
    memory_bytes: float | None
    uncaptured: tuple[Uncaptured, ...]
    buckets: tuple[CaptureBucket, ...]
    marginal: tuple[MarginalCapture, ...]
    curve: tuple[CostPoint, ...]
    #: {"vllm": "--compilation-config '...'", "sglang": "--cuda-graph-bs ..."}; empty when the
    #: recommendation is to keep the current list
    flags: dict[str, str]
    distribution_source: str
    cost_source: str
    #: how histogram mass inside a bucket is placed ("exact" for per-size counts)
    spread: str
    max_captures: int | None
    memory_budget_bytes: float | None
    #: "measured" / "estimated (...)" per input
    inputs: dict[str, str]
    current_source: str
    eager: str
    warnings: tuple[Notice, ...] = ()
    #: ``proposed`` (the list found is faster: its flags), or ``keep_current`` (it is no faster
    #: than the current list, the engine's default or the one given: keep it, no flags)
    recommendation: str = "proposed"
