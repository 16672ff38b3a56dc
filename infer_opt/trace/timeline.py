"""Where a rank's GPU time went: the union of GPU intervals per window (pure functions).

On the union U of a window's GPU intervals (every stream): busy = |U ∩ W|, idle = |W| − busy;
compute, communication, memcpy/memset and sync are the unions of their own events, and
overlap = |compute ∩ comm| / |comm|. Kernels [0, 10) and [5, 20) on two streams in a window
[0, 25) are busy 20 and idle 5 (summed durations would say 25 and 0).

Windows. Each complete ``ProfilerStep#N`` is one window; its GPU events are those launched in
the step (``GpuEvents.step``). A step's window is its GPU side: the ``gpu_user_annotation`` span
where the trace has one, else the extent of the step's GPU events (first start to last end), so
the host's time before the first kernel is not counted as idle GPU. A step is complete when it
has GPU events. A trace without steps is one window, first GPU event to last. Exact by default
(float µs as the file has them); ``hta_compat`` follows HolisticTraceAnalysis 0.5's
``get_temporal_breakdown`` and ``get_comm_comp_overlap`` instead (see :func:`hta_figures`).

Rules that keep each figure inside its definition (issue 42):

- **Per GPU.** A file with events on two or more GPUs (one process driving several) has each
  GPU's figures on the union of that GPU's own streams (``StepTimeline.devices``); the step's
  busy, idle, compute, comm, memcpy and sync are their **mean** over the GPUs, so busy ≤ span and
  idle is the share of the GPUs' time idle (GPU 0 then GPU 1, each busy half the step: idle 50%,
  not the 0% of one union over both).
- **Each instant once.** The shares of a step (``StepTimeline.exclusive``, the rank's
  ``compute_fraction``/``comm_fraction``/``idle_fraction``) count overlapping time once, by
  priority compute > comm > memcpy (HTA's temporal breakdown): they sum to the span; comm under
  compute is its own figure (``comm_overlapped_fraction``), never added again.
- **Skewed clocks.** A GPU event that starts more than :data:`SKEW_TOLERANCE_US` before its
  launch call (the host's and the device's clocks disagree) is counted per rank and said
  (``trace_clock_skew``: how many, the largest lead); steps keep the GPU events they launched
  and each step's window is widened to hold them, so no step is idle beside its own kernels.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Sequence

import numpy as np

from infer_opt.notices import Notice
from infer_opt.results.trace import DeviceTimeline, LaunchQueue, RankTrace, StepTimeline, StreamTimeline
from infer_opt.trace.events import KERNEL, MEMCPY, MEMSET, SYNC, TraceEvents

#: ``classify`` values
COMPUTE, COMM, MEMORY, WAIT = 0, 1, 2, 3
_COMM_NAME = re.compile(r"^(nccl|rccl|ncclDevKernel|ncclKernel|ccl_)", re.IGNORECASE)
_COMM_ARGS = ("Collective name", "collective_name")
US = 1e-6
#: a launch queue this deep (kernels launched and not started) makes 'launch delay' queueing
BACKLOG_DEPTH = 32
#: a GPU event starting more than this (µs) before its launch call is clock skew, not rounding
SKEW_TOLERANCE_US = 1.0


#: each trace's categories, computed once (the timeline, the op groups and the collectives all
#: ask; like ``ops.attribute``'s, it lives as long as the trace)
_CLASSIFIED: weakref.WeakKeyDictionary[TraceEvents, np.ndarray] = weakref.WeakKeyDictionary()


def classify(events: TraceEvents) -> np.ndarray:
    """Each GPU event's category: COMM (NCCL/RCCL kernels, or kernels with collective args),
    MEMORY (memcpy/memset), WAIT (cuda_sync), COMPUTE (every other kernel). Read-only."""
    found = _CLASSIFIED.get(events)
    if found is None:
        found = _CLASSIFIED[events] = _classify(events)
        found.setflags(write=False)
    return found


def _classify(events: TraceEvents) -> np.ndarray:
    g = events.gpu
    out = np.full(len(g), COMPUTE, dtype=np.int8)
    comm_names = np.array([bool(_COMM_NAME.match(n)) for n in events.names], dtype=bool)
    is_kernel = g.kind == KERNEL
    comm = is_kernel & (comm_names[g.name] if len(events.names) else False)
    for i in np.nonzero(is_kernel & ~comm)[0].tolist():
        if any(k in g.args[i] for k in _COMM_ARGS):
            comm[i] = True
    out[comm] = COMM
    out[(g.kind == MEMCPY) | (g.kind == MEMSET)] = MEMORY
    out[g.kind == SYNC] = WAIT
    return out


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals as sorted disjoint intervals."""
    if starts.size == 0:
        return starts.astype(float), ends.astype(float)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order].astype(float), ends[order].astype(float)
    reach = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    idx = np.nonzero(new)[0]
    last = np.append(idx[1:] - 1, s.size - 1)
    return s[idx], reach[last]


def union_length(starts: np.ndarray, ends: np.ndarray, lo: float = -np.inf, hi: float = np.inf) -> float:
    """|∪ [start, end) ∩ [lo, hi)|."""
    s, e = merge(np.clip(starts, lo, hi), np.clip(ends, lo, hi))
    return float(np.sum(e - s))


def intersection_length(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """|A ∩ B| for two sets of disjoint sorted intervals."""
    (sa, ea), (sb, eb) = a, b
    if sa.size == 0 or sb.size == 0:
        return 0.0
    # every boundary, and whether a point just after it is in A and in B
    points = np.unique(np.concatenate([sa, ea, sb, eb]))
    mid = points[:-1]
    in_a = np.searchsorted(sa, mid, side="right") > np.searchsorted(ea, mid, side="right")
    in_b = np.searchsorted(sb, mid, side="right") > np.searchsorted(eb, mid, side="right")
    return float(np.sum(np.diff(points)[in_a & in_b]))


def exclusive_breakdown(
    ts: np.ndarray, end: np.ndarray, cat: np.ndarray, lo: float, hi: float
) -> dict[str, float]:
    """The window [lo, hi) split with each instant counted once, by priority compute > comm >
    memcpy (HTA's temporal breakdown), the rest idle (sync waits included): four lengths ≥ 0
    summing to hi − lo, in the units given."""
    ts, end = np.clip(ts, lo, hi), np.clip(end, lo, hi)
    out, above = {}, (np.zeros(0), np.zeros(0))
    for key, kind in (("compute", COMPUTE), ("comm", COMM), ("memcpy", MEMORY)):
        sel = cat == kind
        mine = merge(ts[sel], end[sel])
        out[key] = float(np.sum(mine[1] - mine[0])) - intersection_length(mine, above)
        above = merge(np.concatenate([above[0], mine[0]]), np.concatenate([above[1], mine[1]]))
    out["idle"] = max((hi - lo) - float(np.sum(above[1] - above[0])), 0.0)
    return out


def _device_figures(ts: np.ndarray, end: np.ndarray, cat: np.ndarray, lo: float, hi: float) -> dict:
    """One device's figures in one window, µs: busy (sync waits not busy), the unions by
    category, |compute ∩ comm| and the exclusive breakdown."""
    ts, end = np.clip(ts, lo, hi), np.clip(end, lo, hi)
    work = cat != WAIT
    busy = merge(ts[work], end[work])
    comp = merge(ts[cat == COMPUTE], end[cat == COMPUTE])
    comm = merge(ts[cat == COMM], end[cat == COMM])
    return {
        "busy": float(np.sum(busy[1] - busy[0])),
        "compute": float(np.sum(comp[1] - comp[0])),
        "comm": float(np.sum(comm[1] - comm[0])),
        "memcpy": union_length(ts[cat == MEMORY], end[cat == MEMORY]),
        "sync": union_length(ts[cat == WAIT], end[cat == WAIT]),
        "both": intersection_length(comp, comm),
        "exclusive": exclusive_breakdown(ts, end, cat, lo, hi),
        "kernels": int(np.sum(work)),
    }


def _window_figures(
    number: int | None,
    ts: np.ndarray,
    end: np.ndarray,
    cat: np.ndarray,
    device: np.ndarray,
    devices: Sequence[int],
    lo: float,
    hi: float,
) -> tuple[StepTimeline, float]:
    """One window's figures (in µs → s) and its |compute ∩ comm| in µs: each device's on the
    union of its own streams, the window's their mean (module docstring)."""
    per = [_device_figures(ts[device == d], end[device == d], cat[device == d], lo, hi) for d in devices]
    n, span = len(per), hi - lo

    def mean(key: str) -> float:
        return sum(f[key] for f in per) / n

    busy_us, comm_us, both = mean("busy"), mean("comm"), mean("both")
    kernels = cat != WAIT
    row = StepTimeline(
        step=number,
        start_s=lo * US,
        span_s=span * US,
        busy_s=busy_us * US,
        idle_s=(span - busy_us) * US,
        compute_s=mean("compute") * US,
        comm_s=comm_us * US,
        memcpy_s=mean("memcpy") * US,
        sync_s=mean("sync") * US,
        overlap_fraction=both / comm_us if comm_us > 0 else 0.0,
        kernels=int(np.sum(kernels)),
        kernel_time_s=float(np.sum((end - ts)[kernels])) * US,
        exclusive={k: sum(f["exclusive"][k] for f in per) / n * US for k in per[0]["exclusive"]},
        devices=tuple(
            DeviceTimeline(d, f["busy"] * US, (span - f["busy"]) * US, f["compute"] * US, f["comm"] * US,
                           f["kernels"])
            for d, f in zip(devices, per, strict=True)
        ) if n > 1 else (),
    )  # fmt: skip
    return row, both


def clock_skew(events: TraceEvents) -> tuple[int, float]:
    """(GPU events that start more than :data:`SKEW_TOLERANCE_US` before their launch call
    starts, the largest such lead in µs): the host's and the device's clocks disagree."""
    g = events.gpu
    linked = g.launch >= 0
    lead = events.launches.ts_us[g.launch[linked]] - g.ts_us[linked]
    early = lead > SKEW_TOLERANCE_US
    return int(early.sum()), float(lead[early].max()) if early.any() else 0.0


def _windows(events: TraceEvents, steps: tuple[int, int] | None) -> tuple[list, list[Notice]]:
    """(step number, mask of its GPU events, lo, hi) per analyzed window, and notices. A step's
    window is widened to hold its own GPU events (clock skew, :func:`clock_skew`; a GPU-side span
    that misses a few of them: the reader drops one that misses many)."""
    g = events.gpu
    notices: list[Notice] = []
    end = g.ts_us + g.dur_us
    skewed, lead = clock_skew(events) if len(events.steps) else (0, 0.0)
    if skewed:
        notices.append(
            Notice("trace_clock_skew", {"file": events.path, "events": skewed, "lead_s": lead * US})
        )
    out = []
    for i, s in enumerate(events.steps):
        if steps is not None and not steps[0] <= s.number <= steps[1]:
            continue
        mask = g.step == i
        if not mask.any():
            continue
        first, last = float(g.ts_us[mask].min()), float(end[mask].max())
        lo, hi = (s.gpu_start_us, s.gpu_end_us) if s.gpu_start_us is not None else (first, last)
        lo, hi = min(lo, first), max(hi, last)  # skewed clocks, or a GPU span that misses a few
        out.append((s.number, mask, lo, hi))
    if not out and len(g) and steps is None:
        notices.append(Notice("trace_no_steps", {"file": events.path}))
        out.append((None, np.ones(len(g), dtype=bool), float(g.ts_us.min()), float(end.max())))
    return out, notices


def analyzed_mask(events: TraceEvents, steps: tuple[int, int] | None = None) -> np.ndarray:
    """The GPU events in the analyzed windows (every complete step, or ``steps``; the whole
    trace when it has no step)."""
    mask = np.zeros(len(events.gpu), dtype=bool)
    for _, m, _, _ in _windows(events, steps)[0]:
        mask |= m
    return mask


def _streams(events: TraceEvents, mask: np.ndarray, span_us: float) -> tuple[StreamTimeline, ...]:
    g = events.gpu
    rows = []
    pairs = sorted({(int(d), int(s)) for d, s in zip(g.device[mask], g.stream[mask], strict=True)})
    for device, stream in pairs:
        sel = mask & (g.device == device) & (g.stream == stream) & (g.kind != SYNC)
        if not sel.any():
            continue
        busy = union_length(g.ts_us[sel], g.ts_us[sel] + g.dur_us[sel])
        rows.append(
            StreamTimeline(device, stream, int(sel.sum()), busy * US, busy / span_us if span_us else 0.0)
        )
    return tuple(rows)


def launch_queue(events: TraceEvents, mask: np.ndarray) -> LaunchQueue | None:
    """Delay from launch to start of the linked GPU events in ``mask``, and the deepest queue
    (kernels launched and not yet started at one moment)."""
    g = events.gpu
    sel = mask & (g.launch >= 0) & (g.kind != SYNC)
    if not sel.any():
        return None
    launched = events.launches.ts_us[g.launch[sel]]
    started = g.ts_us[sel]
    delay = np.maximum(started - launched, 0.0)
    # depth at each launch: launched at or before it, minus started before it
    la, st = np.sort(launched), np.sort(started)
    depth = np.arange(1, la.size + 1) - np.searchsorted(st, la, side="right")
    max_depth = int(max(depth.max(), 0))
    return LaunchQueue(
        kernels=int(sel.sum()),
        median_delay_s=float(np.median(delay)) * US,
        p90_delay_s=float(np.percentile(delay, 90)) * US,
        max_depth=max_depth,
        backlogged=max_depth >= BACKLOG_DEPTH,
    )


def rank_timeline(
    events: TraceEvents, *, steps: tuple[int, int] | None = None, hta_compat: bool = False
) -> RankTrace:
    """One rank's timeline per window and over its analyzed window (see the module's words);
    ``steps`` = (first, last) ProfilerStep numbers to keep."""
    if hta_compat:
        return hta_rank_timeline(events)
    g = events.gpu
    cat = classify(events)
    windows, notices = _windows(events, steps)
    if not len(g):
        notices.append(Notice("trace_no_gpu_events", {"file": events.path}))
    all_mask = np.zeros(len(g), dtype=bool)
    for _, mask, _, _ in windows:
        all_mask |= mask
    devices = np.unique(g.device[all_mask & (cat != WAIT)]).tolist() or [0]
    rows, both_us = [], 0.0
    for number, mask, lo, hi in windows:
        row, both = _window_figures(
            number, g.ts_us[mask], (g.ts_us + g.dur_us)[mask], cat[mask], g.device[mask], devices, lo, hi
        )
        rows.append(row)
        both_us += both
    return _rank(events, tuple(rows), both_us * US, all_mask, notices)


def _rank(
    events: TraceEvents,
    rows: tuple[StepTimeline, ...],
    both_s: float,
    mask: np.ndarray,
    notices: list[Notice],
) -> RankTrace:
    span = sum(r.span_s for r in rows)
    idle = sum(r.idle_s for r in rows)
    compute = sum(r.compute_s for r in rows)
    comm = sum(r.comm_s for r in rows)
    exposed = sum(r.exclusive.get("comm", 0.0) for r in rows)
    times = np.array([r.span_s for r in rows]) if rows else np.zeros(1)
    queue = launch_queue(events, mask)
    if queue is not None and queue.backlogged:
        notices.append(Notice("launch_backlog", {"max_depth": queue.max_depth}))
    return RankTrace(
        rank=events.rank if events.rank is not None else 0,
        path=events.path,
        steps=rows,
        idle_fraction=idle / span if span else 0.0,
        compute_fraction=compute / span if span else 0.0,
        non_compute_fraction=(span - idle - compute) / span if span else 0.0,
        overlap_fraction=both_s / comm if comm else 0.0,
        comm_fraction=exposed / span if span else 0.0,
        step_time_median_s=float(np.median(times)),
        step_time_spread_s=float(times.max() - times.min()) if len(times) > 1 else None,
        streams=_streams(events, mask, span / US),
        launch_queue=queue,
        warnings=tuple(notices),
        comm_overlapped_fraction=both_s / span if span else 0.0,
    )


def rank_skew(ranks: Sequence[RankTrace]) -> tuple[int | None, float]:
    """(the rank with the longest median step, max / median of the ranks' median step)."""
    if not ranks:
        return None, 1.0
    medians = np.array([r.step_time_median_s for r in ranks])
    slowest = ranks[int(np.argmax(medians))].rank
    mid = float(np.median(medians))
    return slowest, float(medians.max() / mid) if mid > 0 else 1.0


# ---------------------------------------------------------------- HTA 0.5 conventions

_HTA_COMM = re.compile(r"^nccl.*Kernel")
_HTA_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_HTA_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
_HTA_SYNC_NAMES = ("Event Sync", "Context Sync")


def _hta_type(name: str) -> int:
    if _HTA_COMM.match(name):
        return COMM
    if _HTA_MEMORY.match(name):
        return MEMORY
    return WAIT if _HTA_NOT_COMPUTE.match(name) else COMPUTE  # WAIT stands for HTA's OTHER


def _hta_stream(args: dict) -> int:
    try:
        value = int(args.get("stream", -1))
    except (TypeError, ValueError, OverflowError):
        return -1
    return value if -(1 << 62) < value < (1 << 62) else -1


def _hta_kept(events: TraceEvents, ts: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """HTA's filter of 'irrelevant' GPU events: with two or more ProfilerSteps, a GPU event is
    kept when a CPU event with its correlation starts before the last step's start."""
    g = events.gpu
    starts = [np.ceil(v) for s in events.steps for v in (s.cpu_start_us, s.gpu_start_us) if v is not None]
    if len(events.steps) < 2:
        return stream != -1
    last = max(starts)
    gpu_like = ((stream >= 0) & (g.correlation >= 0)) | np.isin(
        g.name, [i for i, n in enumerate(events.names) if n in _HTA_SYNC_NAMES]
    )
    cpu_corr = events.launches.correlation[np.ceil(events.launches.ts_us) < last]
    other = ~gpu_like & (ts < last)
    kept_corr = np.concatenate([cpu_corr, g.correlation[other], [-1]])
    return (stream != -1) & ((gpu_like & np.isin(g.correlation, kept_corr)) | other)


def _hta_cpu_rows_on_streams(events: TraceEvents) -> np.ndarray:
    """cpu_ops carrying an integer ``stream`` arg (HTA reads them as stream events), among the
    CPU events its filter keeps (started before the last ProfilerStep, with two or more)."""
    o = events.ops
    on_stream = np.array([_hta_stream(a) != -1 for a in o.args], dtype=bool)
    if len(events.steps) >= 2 and on_stream.any():
        last = max(
            np.ceil(v) for s in events.steps for v in (s.cpu_start_us, s.gpu_start_us) if v is not None
        )
        on_stream &= np.ceil(o.ts_us) < last
    return on_stream


def _hta_merge(ts: np.ndarray, end: np.ndarray) -> tuple[float, float]:
    """HTA's merge_kernel_intervals: (first group start to last group end, Σ group lengths)."""
    if ts.size == 0:
        return 0.0, 0.0
    order = np.argsort(ts, kind="stable")
    t, e = ts[order], end[order]
    reach = np.maximum.accumulate(e)
    group = np.concatenate([[0], np.cumsum(t[1:] > reach[:-1])])
    g_start = np.minimum.reduceat(t, np.nonzero(np.diff(np.concatenate([[-1], group])))[0])
    g_end = np.maximum.reduceat(e, np.nonzero(np.diff(np.concatenate([[-1], group])))[0])
    return float(g_end[-1] - g_start[0]), float(np.sum(g_end - g_start))


def hta_rank_timeline(events: TraceEvents) -> RankTrace:
    """The rank's figures as HolisticTraceAnalysis 0.5 computes them: ``ts`` rounded up and the
    end rounded down to whole µs; with two or more ProfilerSteps, only GPU events launched before
    the last step's start; the window from the first kept GPU event to the last; every event on a
    stream counted busy (sync included); COMM ``^nccl.*Kernel``, MEMORY ``^Memcpy|^Memset|^dma``,
    COMPUTATION every other name but ``.*Sync`` (and ``.*Memcpy``); one window, no steps."""
    g = events.gpu
    notices: list[Notice] = []
    ts = np.ceil(g.ts_us)
    end = np.floor(g.ts_us + g.dur_us)
    stream = np.array([_hta_stream(a) for a in g.args], dtype=np.int64)
    kept = _hta_kept(events, ts, stream)
    if not kept.any():
        notices.append(Notice("trace_no_gpu_events", {"file": events.path}))
        return RankTrace(events.rank or 0, events.path, (), 0.0, 0.0, 0.0, 0.0, warnings=tuple(notices))
    name_types = np.array([_hta_type(n) for n in events.names], dtype=np.int8)
    types = name_types[g.name][kept]
    ts, end = ts[kept], end[kept]
    extra = _hta_cpu_rows_on_streams(events)
    if extra.any():  # cpu_ops with a 'stream' arg count as stream events in HTA's breakdown
        o = events.ops
        ts = np.concatenate([ts, np.ceil(o.ts_us[extra])])
        end = np.concatenate([end, np.floor(o.ts_us[extra] + o.dur_us[extra])])
        types = np.concatenate([types, name_types[o.name[extra]]])
    span, run = _hta_merge(ts, end)
    _, compute = _hta_merge(ts[types == COMPUTE], end[types == COMPUTE])
    idle = span - run
    comp = merge(ts[types == COMPUTE], end[types == COMPUTE])
    comm = merge(ts[types == COMM], end[types == COMM])
    comm_us = float(np.sum(comm[1] - comm[0]))
    both = intersection_length(comp, comm)
    row = StepTimeline(
        step=None, start_s=float(ts.min()) * US, span_s=span * US, busy_s=run * US, idle_s=idle * US,
        compute_s=compute * US, comm_s=comm_us * US,
        memcpy_s=union_length(ts[types == MEMORY], end[types == MEMORY]) * US, sync_s=0.0,
        overlap_fraction=both / comm_us if comm_us else 0.0, kernels=int(kept.sum()),
        kernel_time_s=float(np.sum(end - ts)) * US,
    )  # fmt: skip
    return RankTrace(
        rank=events.rank if events.rank is not None else 0,
        path=events.path,
        steps=(row,),
        idle_fraction=idle / span if span else 0.0,
        compute_fraction=compute / span if span else 0.0,
        non_compute_fraction=(span - compute - idle) / span if span else 0.0,
        overlap_fraction=row.overlap_fraction,
        comm_fraction=(comm_us - both) / span if span else 0.0,
        step_time_median_s=span * US,
        warnings=tuple(notices),
        comm_overlapped_fraction=both / span if span else 0.0,
    )


__all__ = [
    "classify",
    "hta_rank_timeline",
    "intersection_length",
    "launch_queue",
    "merge",
    "rank_skew",
    "rank_timeline",
    "union_length",
]
