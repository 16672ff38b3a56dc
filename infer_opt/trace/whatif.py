"""What an optimization would buy, per (median) step: Amdahl over the trace's timeline.

Every figure is a prediction (a :class:`~infer_opt.results.trace.WhatIf` with its assumption).
Savings found over the analyzed window are divided by its number of steps and held against the
median step ``T`` (``StepTimeline.span_s``); a part of time ``t`` per step sped up ``s`` times
saves ``T·(1 − 1/S)`` with ``S`` :func:`infer_opt.cost_models.amdahl.amdahl_speedup` of
``f = t/T`` (capped at 1). Kernel times are summed, so where streams overlap a category's
fraction is an upper bound.

- ``category_at_bound``: each family's ops at their roofline bound ``max(F/R, Q/b)`` at peak
  (never slower than now); ops without a formula unchanged.
- ``matmul_at_peak_fraction``: matmuls at ``η`` of peak: ``max(F/(η·R), Q/b)``.
- ``cuda_graphs``: the idle gaps on the busiest stream where the GPU waited for the host — the
  next event's launch came after the previous event ended — within a step, except gaps in which
  a host sync ended (those stay: a graph cannot capture a sync); a graph replay launches the
  rest at once, so those gaps go.
- ``fusion``: adjacent elementwise ops on the busiest stream whose first inputs have the same
  shape and dtype (the trace does not record outputs: the chain is inferred); the intermediate
  would not be written and read back: ``2 × its bytes / b`` per link.
- ``overlap``: communication not already overlapped with compute, ``comm_s·(1 − overlap)``.

Pure: numpy and the standard library.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from infer_opt.cost_models.amdahl import amdahl_speedup
from infer_opt.cost_models.profile_amdahl import capped_bound
from infer_opt.results.trace import OpGroup, Peaks, StepTimeline, WhatIf
from infer_opt.trace.events import SYNC, TraceEvents
from infer_opt.trace.ops import SYNC_CALLS, TRANSFER, Attribution, attribute, category, group_peaks
from infer_opt.trace.roofline import peak_flops

ELEMENTWISE = "elementwise"


def _whatif(scenario: str, description: str, saved_s: float, step_s: float, assumption: str) -> WhatIf:
    saved = min(max(0.0, saved_s), step_s)
    speedup = step_s / (step_s - saved) if step_s > saved else math.inf
    return WhatIf(scenario, description, saved, step_s, speedup, assumption)


def _amdahl_saving(time_s: float, target_s: float, step_s: float) -> float:
    """Per-step saving of a part of ``time_s`` per step brought to ``target_s``."""
    if step_s <= 0 or time_s <= 0:
        return 0.0
    f = min(1.0, time_s / step_s)
    s = math.inf if target_s <= 0 else max(1.0, time_s / target_s)
    return step_s * (1.0 - 1.0 / amdahl_speedup(f, s))


def _bound_s(g: OpGroup, peaks: Peaks, efficiency: float = 1.0) -> float:
    peaks = group_peaks(g.family, peaks)
    rate = peak_flops(peaks, g.precision) * efficiency
    compute = g.flops / rate if rate > 0 and g.flops > 0 else 0.0
    memory = g.bytes / peaks.bytes_per_s if peaks.bytes_per_s > 0 else 0.0
    return capped_bound(g.time_s, max(compute, memory))


def category_at_bound(groups: Sequence[OpGroup], peaks: Peaks, step_s: float, n_steps: int) -> list[WhatIf]:
    """One what-if per family with a formula."""
    found = []
    for family in sorted({g.family for g in groups if g.family and (g.flops > 0 or g.bytes > 0)}):
        members = [g for g in groups if g.family == family and (g.flops > 0 or g.bytes > 0)]
        time_s = math.fsum(g.time_s for g in members) / n_steps
        bound = math.fsum(_bound_s(g, peaks) for g in members) / n_steps
        found.append(
            _whatif(
                "category_at_bound",
                "host↔device copies at the link rate"
                if family == TRANSFER
                else f"{family} ops at their roofline bound",
                _amdahl_saving(time_s, bound, step_s),
                step_s,
                _at_bound_assumes(family, peaks),
            )
        )
    return found


def _at_bound_assumes(family: str, peaks: Peaks) -> str:
    if family == TRANSFER:
        return (
            f"each host↔device copy at the host link's {peaks.host_link_bytes_per_s / 1e9:g} GB/s "
            "(pageable host memory reaches it only when pinned), never longer than now"
        )
    return f"each {family} op takes max(F/R, Q/b) at the peaks ({peaks.source}), never longer than now"


def matmul_at_fraction(
    groups: Sequence[OpGroup], peaks: Peaks, step_s: float, n_steps: int, fraction: float
) -> WhatIf:
    members = [g for g in groups if g.family == "matmul" and g.flops > 0]
    time_s = math.fsum(g.time_s for g in members) / n_steps
    target = math.fsum(_bound_s(g, peaks, fraction) for g in members) / n_steps
    return _whatif(
        "matmul_at_peak_fraction",
        f"matmuls at {fraction:.0%} of peak",
        _amdahl_saving(time_s, target, step_s),
        step_s,
        f"each matmul takes max(F/({fraction:g}·R), Q/b), never longer than now",
    )


def busiest_stream(events: TraceEvents, keep: np.ndarray) -> tuple[int, np.ndarray]:
    """The stream with the most summed GPU time among ``keep``, and its events in start order."""
    gpu = events.gpu
    keep = keep & (gpu.kind != SYNC)
    if not keep.any():
        return -1, np.zeros(0, dtype=np.int64)
    streams = np.unique(gpu.stream[keep])
    totals = [math.fsum(gpu.dur_us[keep & (gpu.stream == s)]) for s in streams]
    stream = int(streams[int(np.argmax(totals))])
    idx = np.flatnonzero(keep & (gpu.stream == stream))
    return stream, idx[np.argsort(gpu.ts_us[idx], kind="stable")]


def _sync_ends(events: TraceEvents) -> np.ndarray:
    """Sorted end times (µs) of the host calls that wait for the device (:data:`ops.SYNC_CALLS`)."""
    launches = events.launches
    if not len(launches):
        return np.zeros(0)
    is_sync = np.array([bool(SYNC_CALLS.search(n)) for n in events.names], dtype=bool)[launches.name]
    return np.sort((launches.ts_us + launches.dur_us)[is_sync])


def launch_gaps_us(events: TraceEvents, order: np.ndarray) -> float:
    """Summed idle gaps (µs) between consecutive events of ``order`` (one stream, start order)
    where the next event's launch came at or after the previous one's end, within a step, and
    no host sync ended inside the gap (a host that waited on the device and then did other work
    leaves a gap that a graph does not remove: graphs cannot capture a sync)."""
    gpu, launches = events.gpu, events.launches
    sync_ends = _sync_ends(events)
    total = []
    end = -math.inf
    prev_step = None
    for e in order:
        start, step, launch = float(gpu.ts_us[e]), int(gpu.step[e]), int(gpu.launch[e])
        same_step = prev_step is not None and step == prev_step
        if same_step and start > end and launch >= 0 and float(launches.ts_us[launch]) >= end:
            lo, hi = np.searchsorted(sync_ends, [end, start])
            if hi == lo:
                total.append(start - end)
        end = max(end, start + float(gpu.dur_us[e]))
        prev_step = step
    return math.fsum(total)


def _element_bytes(args: dict) -> float:
    from infer_opt.trace.devices import DTYPE_BYTES, normalize_dtype
    from infer_opt.trace.op_costs import _is_shape

    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list) or not dims or not types:
        return 0.0
    if not _is_shape(dims[0]):
        return 0.0
    return float(math.prod(dims[0])) * DTYPE_BYTES.get(normalize_dtype(str(types[0])), 0)


def _first(value: object) -> str:
    return str(value[0]) if isinstance(value, list) and value else ""


def fusion_links(events: TraceEvents, att: Attribution, order: Iterable[int]) -> Iterator[tuple[int, float]]:
    """``(op, bytes)`` for each link of a fusable chain: adjacent elementwise ops (distinct
    instances) with the same first-input shape and dtype; the second would not move ``2 ×
    intermediate`` bytes (written by the first, read back by it) once fused."""
    prev_op, prev_key = -1, None
    for e in order:
        op = int(att.owner[e])
        if op == prev_op:
            continue
        c = att.costs.get(op) if op >= 0 else None
        args = events.ops.args[op] if op >= 0 else {}
        is_elementwise = c is not None and category(c.family) == ELEMENTWISE
        key = (_first(args.get("Input Dims")), _first(args.get("Input type")))
        if is_elementwise and prev_key == key:
            yield op, 2.0 * _element_bytes(args)
        prev_op, prev_key = op, key if is_elementwise else None


def fusion_bytes(events: TraceEvents, att: Attribution, order: np.ndarray) -> float:
    """Bytes that a fused elementwise chain would not move (:func:`fusion_links`, summed)."""
    return math.fsum(b for _, b in fusion_links(events, att, order))


def overlap_saving(steps: Sequence[StepTimeline]) -> float:
    """Median over steps of the communication not overlapped with compute."""
    values = [s.comm_s * (1.0 - s.overlap_fraction) for s in steps]
    return statistics.median(values) if values else 0.0


def what_ifs(
    events: TraceEvents,
    groups: Sequence[OpGroup],
    peaks: Peaks,
    steps: Sequence[StepTimeline],
    *,
    kernel_mask: np.ndarray | None = None,
    matmul_peak_fraction: float = 0.7,
    causal: str = "half",
    cost: Any = None,
) -> tuple[WhatIf, ...]:
    """Every what-if for one rank's analyzed window, largest saving first (``steps``: the
    rank's analyzed windows; empty: nothing to hold savings against, no what-ifs)."""
    if not steps:
        return ()
    step_s = statistics.median(s.span_s for s in steps)
    if step_s <= 0:
        return ()
    n = len(steps)
    keep = (
        np.ones(len(events.gpu), dtype=bool) if kernel_mask is None else np.asarray(kernel_mask, dtype=bool)
    )
    found = category_at_bound(groups, peaks, step_s, n)
    found.append(matmul_at_fraction(groups, peaks, step_s, n, matmul_peak_fraction))
    stream, order = busiest_stream(events, keep)
    # the gaps are idle time: never more than the median step's (the window's gaps per step can
    # pass it where steps differ, or under --hta-compat's window)
    gaps = min(launch_gaps_us(events, order) / 1e6 / n, statistics.median(s.idle_s for s in steps))
    found.append(
        _whatif(
            "cuda_graphs",
            f"CUDA graphs: the launch gaps on stream {stream} removed",
            gaps,
            step_s,
            "a graph replay removes every idle gap where the GPU waited for the host's next launch",
        )
    )
    moved = fusion_bytes(events, attribute(events, cost, causal), order) / n
    fused_s = moved / peaks.bytes_per_s if peaks.bytes_per_s > 0 else 0.0
    found.append(
        _whatif(
            "fusion",
            f"fusing adjacent elementwise ops ({moved / 1e6:.3g} MB of intermediates per step)",
            fused_s,
            step_s,
            "each intermediate of an adjacent same-shape elementwise pair is neither written nor read"
            " (at peak bandwidth)",
        )
    )
    found.append(
        _whatif(
            "overlap",
            "communication fully overlapped with compute",
            overlap_saving(steps),
            step_s,
            "the communication not overlapped now hides entirely behind compute",
        )
    )
    found.sort(key=lambda w: (-w.saved_s, w.scenario, w.description))
    return tuple(found)
