"""The ``trace`` result kind: what ``infer-opt trace`` found in real GPU traces.

Every figure carries where it comes from: *measured* (read from the trace: kernel times,
spans), *datasheet* (a device's published peak), *fitted* (a roofline fitted on the trace's
own ops) or *predicted* (a what-if). Times are seconds, rates per second, sizes bytes. The
analyses in :mod:`infer_opt.trace` build these rows; :mod:`infer_opt.reports.trace` reads them.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from infer_opt.notices import Notice
from infer_opt.results import FieldError, Result, number_problems
from infer_opt.results.cross_rank import CrossRank

#: an op's input shapes, one dimension list per tensor (a TensorList's members in order), as
#: ``profile``'s are; ``()`` for a 0-dim tensor
Shapes = tuple[tuple[int, ...], ...]


def as_shapes(value: Any) -> Shapes:
    """``value`` as :data:`Shapes`: lists (JSON) as tuples; the display text older saved
    results hold (``(1, 141, 512), (512), [(2, 3), (2, 3)]``) parsed, so they still load."""
    if isinstance(value, str):
        return tuple(
            tuple(int(d) for d in re.findall(r"\d+", inner)) for inner in re.findall(r"\(([^()]*)\)", value)
        )
    try:
        return tuple(tuple(_dimension(d) for d in shape) for shape in value)
    except (TypeError, ValueError):
        allowed = "must be lists of whole dimensions >= 0 (one list per input)"
        raise FieldError("shapes", value, allowed) from None


def _dimension(d: Any) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, float)) or d != int(d) or d < 0:
        raise ValueError(d)
    return int(d)


def shapes_text(shapes: Shapes, sep: str = ", ") -> str:
    """``((16, 5185, 64), (16, 64, 5185), ())`` → ``16×5185×64, 16×64×5185, ()``."""
    return sep.join("×".join(str(d) for d in shape) if shape else "()" for shape in shapes)


@dataclass(frozen=True)
class StepTimeline:
    """One window (a ProfilerStep, or the whole trace) on the union of GPU intervals:
    busy = |U ∩ W|, idle = |W| − busy; compute/comm/memcpy/sync are unions of their own
    events (they overlap: their sum may pass the span); ``overlap_fraction`` = |compute ∩ comm| /
    |comm| (0 without comm). ``exclusive`` splits the span with each instant counted once, by
    priority compute > comm > memcpy, the rest idle: it sums to ``span_s``. With two or more GPUs
    in the rank's file every figure is the mean over its devices (each on the union of its own
    streams), listed one by one in ``devices``."""

    step: int | None  # ProfilerStep number, None for a trace analyzed as one window
    start_s: float  # window start, trace time
    span_s: float
    busy_s: float
    idle_s: float
    compute_s: float
    comm_s: float
    memcpy_s: float  # memcpy and memset
    sync_s: float
    overlap_fraction: float
    kernels: int = 0
    kernel_time_s: float = 0.0  # summed kernel durations (not the union)
    # the replay of the dependency graph (trace/replay.py, trace/critical.py); 0 / '' / {} where
    # not replayed (--hta-compat, no GPU events)
    replayed_span_s: float = 0.0  # the unedited replay of this window (the replay error: vs span_s)
    bound: str = ""  # host / device: the side holding most of the critical path
    bound_share: float = 0.0  # that side's share of the critical path
    # seconds by cause on the critical path (host, launch, kernel, memcpy, sync_wait, comm):
    # they sum to replayed_span_s; critical_kernels splits 'kernel' by category
    critical_path: dict[str, float] = field(default_factory=dict)
    critical_kernels: dict[str, float] = field(default_factory=dict)
    exclusive: dict[str, float] = field(default_factory=dict)  # compute, comm, memcpy, idle (s)
    devices: tuple[DeviceTimeline, ...] = ()  # per GPU, where the file has two or more


@dataclass(frozen=True)
class DeviceTimeline:
    """One GPU of a rank's file in one window, on the union of its own streams."""

    device: int
    busy_s: float
    idle_s: float
    compute_s: float
    comm_s: float
    kernels: int = 0


@dataclass(frozen=True)
class StreamTimeline:
    """Busy time of one GPU stream over the analyzed window."""

    device: int
    stream: int
    events: int
    busy_s: float
    fraction: float  # busy_s / the window's span


@dataclass(frozen=True)
class LaunchQueue:
    """Delay from a kernel's launch to its start, and how many launched kernels waited."""

    kernels: int
    median_delay_s: float
    p90_delay_s: float
    max_depth: int  # most kernels launched and not yet started at once
    backlogged: bool  # a deep queue: 'launch delay' is queueing, not launch overhead


@dataclass(frozen=True)
class RankTrace:
    """One rank: its windows and the figures over its analyzed window, as HTA reports them."""

    rank: int
    path: str
    steps: tuple[StepTimeline, ...]
    idle_fraction: float
    compute_fraction: float
    non_compute_fraction: float
    overlap_fraction: float
    comm_fraction: float = 0.0  # comm not under compute (compute > comm > memcpy), of the span
    step_time_median_s: float = 0.0
    step_time_spread_s: float | None = 0.0  # max − min over steps; None with one (unknown)
    streams: tuple[StreamTimeline, ...] = ()
    launch_queue: LaunchQueue | None = None
    warnings: tuple[Notice, ...] = ()  # no steps, launch backlog, ... (for this rank)
    # the dependency graph (trace/graph.py): the share of events it placed, and the events it
    # could not place by why (a launch before the trace window, none found, clock skew, ...)
    replay_placed: float = 1.0
    replay_unplaced: dict[str, int] = field(default_factory=dict)
    comm_overlapped_fraction: float = 0.0  # |compute ∩ comm| of the span: comm hidden under compute


@dataclass(frozen=True)
class OpGroup:
    """The calls of one (op, input shapes, dtypes) group: GPU kernel time is the sum of the
    kernels the calls launched; flops and bytes are totals over the calls (from the recorded
    shapes, the formulas ``profile`` uses; 0 where no formula applies). A host↔device copy's
    group (``family == "transfer"``) counts the bytes that crossed the host link (the tensor
    once, :func:`infer_opt.trace.ops.link_bytes`)."""

    name: str
    shapes: Shapes | str  # a dimension list per tensor input (JSON: lists of lists); text read as one
    dtype: str
    calls: int
    time_s: float
    flops: float
    bytes: float
    achieved_flops_per_s: float | None  # None without a formula (unknown, never 0)
    achieved_bytes_per_s: float | None
    bound: str  # compute / bandwidth / launch / unknown
    peak_fraction: float | None  # achieved over the peak of the bound resource; None when unknown
    precision: str  # the peak the op runs against: bf16, fp16, tf32, fp32, fp8, int8, ...
    family: str = ""  # matmul, attention, norm, softmax, elementwise, reduction, ...
    kernels: int = 0
    time_spread_s: float | None = 0.0  # max − min of its per-step time; None under two steps (unknown)
    kernel_names: tuple[str, ...] = ()  # the distinct kernels (first few)
    share: float = 0.0  # of the result's summed op kernel time (set by TraceResult)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shapes", as_shapes(self.shapes))


@dataclass(frozen=True)
class CoverageRow:
    """A share of GPU time and why it has (or has no) FLOP/byte formula."""

    reason: str  # modelled, no_shapes, unlinked, communication, memcpy, no_formula, sync
    time_s: float
    fraction: float


@dataclass(frozen=True)
class WhatIf:
    """A predicted saving (Amdahl over the union timeline)."""

    scenario: str  # e.g. category_at_bound, matmul_at_peak_fraction, cuda_graphs, fusion, overlap
    description: str
    saved_s: float  # per step (median step)
    step_s: float  # the measured median step it is taken from
    speedup: float  # step_s / (step_s − saved_s)
    assumption: str = ""
    # 'Amdahl (no dependencies; an upper bound)' = speedup; 'replayed (dependencies kept)': the
    # edited dependency graph replayed (trace/whatif_replay.py); 0 where not replayed
    amdahl_speedup: float = 0.0
    replayed_speedup: float = 0.0
    replayed_step_s: float = 0.0


@dataclass(frozen=True)
class IdleCause:
    """Device idle time of the analyzed windows charged to what the next GPU work waited for
    (trace/critical.py): per step (mean over the slowest rank's steps) and share of idle."""

    cause: str  # late launch, host sync: <call> in <op>, host work after sync: ..., cross-stream wait, ...
    time_s: float
    fraction: float


@dataclass(frozen=True)
class HostSync:
    """A host call that waits for the device (breaks CUDA-graph capture), where it occurs."""

    name: str
    calls: int
    time_s: float
    under_op: str  # the enclosing cpu_op, '' at the top level


@dataclass(frozen=True)
class CollectiveRow:
    """One collective kind and message size, over its calls (nccl-tests' algbw/busbw). What
    the trace does not say is ``None`` (JSON ``null``), never 0: the size without the message
    fields, the ranks without ``Group size`` or ``distributedInfo``'s world size, the
    bandwidths that need them, the wait and transfer with one rank."""

    collective: str
    bytes: int | None
    dtype: str
    group_size: int | None
    calls: int
    time_s: float  # median kernel time (includes waiting for peers)
    algbw_bytes_per_s: float | None
    busbw_bytes_per_s: float | None
    wait_s: float | None = None  # median wait of the early ranks (several ranks), else unknown
    transfer_s: float | None = None  # time_s − wait_s (several ranks), else unknown


@dataclass(frozen=True)
class AlphaBetaRow:
    """``t ≈ α + S/β`` fitted on one collective kind's sizes in the trace (fitted; the times
    include waiting for peers, so α is an upper and β a lower bound)."""

    collective: str
    alpha_s: float
    beta_bytes_per_s: float
    sizes: int
    median_abs_rel_error: float


@dataclass(frozen=True)
class CpuOpRow:
    """A CPU op's calls and time (measured on the host; a CPU-only trace's analysis)."""

    name: str
    calls: int
    time_s: float  # summed inclusive duration
    self_s: float  # less the time of the ops nested in it


@dataclass(frozen=True)
class Peaks:
    """The roofline the ops are held against."""

    flops_per_s: dict[str, float]  # by precision
    bytes_per_s: float
    source: str  # datasheet:<device>, --peak-flops/--peak-bandwidth, --roofline FILE, trace-fit
    launch_s: float = 0.0  # launch floor (fitted from the trace where it can be)
    notes: tuple[str, ...] = ()
    host_link_bytes_per_s: float = 0.0  # one direction of the host link (PCIe): what transfers are held to


@dataclass(frozen=True)
class KernelRow:
    """One kernel name over the analyzed windows: its calls, time and family. ``family_source``
    says where the family came from: ``op`` (the op group it belongs to has a formula, whose
    family it is), ``name`` (:func:`infer_opt.trace.kernel_names.kernel_family`), or ``None``
    with ``family`` ``None`` (no op formula and a name no rule knows)."""

    name: str
    calls: int
    time_s: float
    fraction: float  # of the GPU time (kernels, memcpy, memset) of the analyzed windows
    family: str | None = None
    family_source: str | None = None  # "op" / "name"; None when family is None

    def loaded_problems(self) -> list[tuple[str, object, str]]:
        out = number_problems(self, non_negative=("calls", "time_s", "fraction"))
        if self.family_source not in (None, "op", "name"):
            out.append(("family_source", self.family_source, 'one of "op", "name" or null'))
        elif (self.family is None) != (self.family_source is None):
            out.append(("family_source", self.family_source, "null exactly when family is null"))
        return out


@dataclass(frozen=True)
class CaptureLink:
    """A replay trace's graph launches linked to a capture trace (``--capture``, or found
    beside it): how many launches and GPU events matched a captured graph."""

    path: str  # the capture trace
    graphs: int  # graphs captured in it
    replays: int  # graph launches in the replay trace
    replays_linked: int
    kernels: int  # GPU events those launches ran
    kernels_linked: int
    kernels_matching: int = 0  # events with a captured node of the same name (any graph)
    labels: tuple[str, ...] = ()  # the annotations of the graphs matched (capture_32_FULL, ...)
    #: labels of graphs with the same kernels as a launch (which size ran cannot be told)
    ambiguous_labels: tuple[str, ...] = ()
    #: some launches matched by count and order alone (the capture's launches record no kernel
    #: names, as CUDA's cudaLaunchKernel events do not)
    by_order: bool = False
    unnamed_graphs: int = 0  # captured graphs whose launches record no kernel names


@dataclass(frozen=True)
class BoundSteps:
    """The slowest rank's analyzed steps that one side bounds (the critical path of their
    replay): how many of the steps with a bound, and the median of that side's share."""

    bound: str  # host / device
    steps: int
    of_steps: int
    median_share: float


@dataclass(frozen=True)
class TraceResult(Result):
    """The analysis of one or more trace files (one per rank)."""

    KIND = "trace"

    files: tuple[str, ...]
    device_name: str
    device_source: str  # deviceProperties, inferred, --device
    peaks: Peaks
    ranks: tuple[RankTrace, ...]
    ops: tuple[OpGroup, ...]
    coverage: tuple[CoverageRow, ...]
    what_if: tuple[WhatIf, ...] = ()
    collectives: tuple[CollectiveRow, ...] = ()
    host_syncs: tuple[HostSync, ...] = ()
    hta_compat: bool = False
    causal_flops: str = "half"  # full / half: the SDPA causal convention
    steps_selected: str = "all"  # 'all', or the --steps range
    slowest_rank: int | None = None
    step_skew: float = 1.0  # max / median of the ranks' median step time
    trace_fit: Peaks | None = None  # bandwidth and launch floor fitted on the trace's own ops
    alpha_beta: tuple[AlphaBetaRow, ...] = ()
    cpu_ops: tuple[CpuOpRow, ...] = ()  # a CPU-only trace: self time per CPU op
    idle_causes: tuple[IdleCause, ...] = ()  # the slowest rank's idle time by cause
    warnings: tuple[Notice, ...] = field(default=())
    kernels: tuple[KernelRow, ...] = ()  # one row per kernel name, most time first
    #: GPU time by where its family came from: reasons "op", "name", "none" (fractions sum to 1)
    family_coverage: tuple[CoverageRow, ...] = ()
    captures: tuple[CaptureLink, ...] = ()  # per replay trace linked to a capture
    cross_rank: CrossRank | None = None  # two or more ranks of one job (trace/cross_rank.py)
    #: the totals over the rows above, derived when the result is built (so ``--json`` carries
    #: what the view shows, and a file saved before they were carried gets them on load):
    step_time_median_s: float = field(default=0.0, init=False)  # median over ranks of their median
    step_time_spread_s: float = field(default=0.0, init=False)  # the largest rank's max − min
    kernel_time_s: float = field(default=0.0, init=False)  # summed over the op groups
    gpu_time_s: float = field(default=0.0, init=False)  # kernel, memcpy and memset, summed (coverage)
    modelled_fraction: float = field(default=0.0, init=False)  # of the GPU time with a formula
    family_fraction: float = field(default=0.0, init=False)  # of the GPU time with a family
    bounds: tuple[BoundSteps, ...] = field(default=(), init=False)

    def __post_init__(self) -> None:
        kernel_s = sum(g.time_s for g in self.ops)
        shares = [g.time_s / (kernel_s or 1.0) for g in self.ops]
        rank = next(
            (x for x in self.ranks if x.rank == self.slowest_rank), self.ranks[0] if self.ranks else None
        )
        bounded = [s for s in rank.steps if s.bound] if rank is not None else []
        medians = [r.step_time_median_s for r in self.ranks]
        derived = {
            "ops": tuple(
                g if g.share == x else replace(g, share=x) for g, x in zip(self.ops, shares, strict=True)
            ),
            "step_time_median_s": statistics.median(medians) if medians else 0.0,
            "step_time_spread_s": max((r.step_time_spread_s or 0.0 for r in self.ranks), default=0.0),
            "kernel_time_s": kernel_s,
            "gpu_time_s": sum(c.time_s for c in self.coverage),
            "modelled_fraction": sum(c.fraction for c in self.coverage if c.reason == "modelled"),
            "family_fraction": sum(c.fraction for c in self.family_coverage if c.reason != "none"),
            "bounds": tuple(
                BoundSteps(b, len(v), len(bounded), statistics.median(s.bound_share for s in v))
                for b in ("host", "device")
                if (v := [s for s in bounded if s.bound == b])
            ),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)
