"""The facade: trace files in, one :class:`~infer_opt.kinds.trace.TraceResult` out.

``analyze(paths, ...)`` is the whole ``infer-opt trace`` pipeline, one call per stage:

    read_traces → per rank: rank_timeline, op_groups, coverage, host_syncs, collective calls
                → device (identify / --device) → peaks (datasheet / overrides / --roofline)
                → merged ops, coverage, syncs over the ranks → collectives (+ α-β)
                → what-ifs on the slowest rank → trace-fit roofline, rate checks → TraceResult

Ops, coverage and host syncs are taken over the *analyzed windows* (the complete ProfilerSteps,
or ``steps``; the whole trace when it has none) and summed over the ranks; the what-ifs are
held against the slowest rank's median step (it sets the job's step time). ``hta_compat``
changes the timeline's conventions only (HTA 0.5 has no op analysis to agree with).
A CPU-only trace gets the CPU-op analysis alone (self time per op), and says so.

Pure: numpy and the standard library; nothing here imports torch or pandas.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infer_opt.errors import InvalidInput
from infer_opt.kinds.trace import (
    AlphaBetaRow,
    CoverageRow,
    CpuOpRow,
    HostSync,
    OpGroup,
    Peaks,
    RankTrace,
    TraceResult,
)
from infer_opt.notices import Notice
from infer_opt.trace import collectives as tc
from infer_opt.trace import critical as trc
from infer_opt.trace import devices as td
from infer_opt.trace import ops as to
from infer_opt.trace import replay as trp
from infer_opt.trace import roofline as tr
from infer_opt.trace import timeline as tt
from infer_opt.trace import whatif_replay as twr
from infer_opt.trace.events import KERNEL, TraceEvents
from infer_opt.trace.op_costs import CAUSAL_CONVENTIONS
from infer_opt.trace.reader import read_traces
from infer_opt.trace.whatif import what_ifs

#: what-ifs that need a roofline (the others are the timeline's own)
_NEED_PEAKS = ("category_at_bound", "matmul_at_peak_fraction", "fusion")
CPU_OPS_KEPT = 50


@dataclass(frozen=True)
class Analysis:
    """A result and the columns it came from (for ``--augment`` and the DataFrames)."""

    result: TraceResult
    traces: tuple[TraceEvents, ...]
    masks: tuple[np.ndarray, ...]  # per rank, the GPU events in the analyzed windows
    replays: tuple[Any, ...] = ()  # per rank, its replay.RankReplay (None: not replayed)


def parse_steps(text: str | None) -> tuple[int, int] | None:
    """``"N-M"`` or ``"N"`` → (N, M); None → None (every complete step)."""
    if text is None:
        return None
    first, dash, last = text.strip().partition("-")
    try:
        a = int(first)
        b = int(last) if dash else a
    except ValueError:
        raise InvalidInput("--steps", text, "expected N-M or N (ProfilerStep numbers), e.g. 3-7") from None
    if a < 0 or b < a:
        raise InvalidInput("--steps", text, "expected N-M with 0 <= N <= M")
    return a, b


def _device(
    traces: Sequence[TraceEvents], device_name: str | None
) -> tuple[td.DeviceSpec | None, str, list[Notice]]:
    if device_name is not None:
        return td.by_name(device_name), "--device", []
    found: dict[str, tuple[td.DeviceSpec | None, str, tuple[Notice, ...]]] = {}
    for ev in traces:
        if not len(ev.gpu):
            continue
        kernels = {ev.name_of(n) for n in np.unique(ev.gpu.name[ev.gpu.kind == KERNEL])}
        found[ev.path] = td.identify(ev.device_properties, sorted(kernels))
    if not found:
        return None, "none", []
    names = {d.name if d is not None else None for d, _, _ in found.values()}
    first = next(iter(found.values()))
    notices = list(first[2])
    if len(names) > 1:
        seen = tuple(f"{os.path.basename(p)}: {d.name if d else 'unknown'}" for p, (d, _, _) in found.items())
        notices.append(Notice("trace_devices_differ", {"seen": seen}))
    return first[0], first[1], notices


def _select(ev: TraceEvents, steps: tuple[int, int] | None) -> np.ndarray:
    mask = tt.analyzed_mask(ev, steps)
    if steps is not None and len(ev.gpu) and not mask.any():
        have = [s.number for s in ev.steps]
        allowed = f"its steps are {have[0]}-{have[-1]}" if have else "it has no ProfilerStep"
        raise InvalidInput(
            "--steps", f"{steps[0]}-{steps[1]}", f"no step of {ev.path} in this range ({allowed})"
        )
    return mask


def _merge_coverage(per_rank: Iterable[Sequence[CoverageRow]]) -> tuple[CoverageRow, ...]:
    times: dict[str, float] = {}
    for rows in per_rank:
        for r in rows:
            times[r.reason] = times.get(r.reason, 0.0) + r.time_s
    total = math.fsum(times.values())
    if total <= 0:
        return ()
    rows = [CoverageRow(k, t, t / total) for k, t in times.items() if t > 0]
    return tuple(sorted(rows, key=lambda r: (-r.time_s, r.reason)))


def _merge_syncs(per_rank: Iterable[Sequence[HostSync]]) -> tuple[HostSync, ...]:
    found: dict[tuple[str, str], tuple[int, float]] = {}
    for rows in per_rank:
        for r in rows:
            calls, time_s = found.get((r.name, r.under_op), (0, 0.0))
            found[(r.name, r.under_op)] = (calls + r.calls, time_s + r.time_s)
    out = [HostSync(name, c, t, under) for (name, under), (c, t) in found.items()]
    return tuple(sorted(out, key=lambda r: (-r.time_s, r.name, r.under_op)))


def _collective_calls(ev: TraceEvents, mask: np.ndarray, rank: int) -> list[tc.CollectiveCall]:
    cat = tt.classify(ev)
    g = ev.gpu
    calls = []
    for i in np.flatnonzero(mask & (cat == tt.COMM)).tolist():
        call = tc.collective_call(
            ev.name_of(g.name[i]), g.args[i], rank, float(g.ts_us[i]), float(g.dur_us[i])
        )
        if call is not None:
            calls.append(call)
    return calls


def cpu_ops(traces: Sequence[TraceEvents], most: int = CPU_OPS_KEPT) -> tuple[CpuOpRow, ...]:
    """Self time per CPU op name (its duration less its children's), over every rank, most first."""
    found: dict[str, tuple[int, float, float]] = {}
    for ev in traces:
        ops = ev.ops
        if not len(ops):
            continue
        child = np.zeros(len(ops))
        has = ops.parent >= 0
        np.add.at(child, ops.parent[has], ops.dur_us[has])
        self_us = np.maximum(ops.dur_us - child, 0.0)
        for i in range(len(ops)):
            name = ev.name_of(ops.name[i])
            calls, total, own = found.get(name, (0, 0.0, 0.0))
            found[name] = (calls + 1, total + float(ops.dur_us[i]), own + float(self_us[i]))
    rows = [CpuOpRow(n, c, t / 1e6, s / 1e6) for n, (c, t, s) in found.items()]
    rows.sort(key=lambda r: (-r.self_s, r.name))
    return tuple(rows[:most])


@dataclass
class _Ranks:
    """What the per-rank analyses found, rank by rank."""

    timelines: list[RankTrace]
    masks: list[np.ndarray]
    groups: list[tuple[OpGroup, ...]]
    coverages: list[tuple[CoverageRow, ...]]
    syncs: list[tuple[HostSync, ...]]
    calls: list[list[tc.CollectiveCall]]
    kernel_s: list[float]
    replays: list[Any] = field(default_factory=list)  # per rank: replay.RankReplay, None not replayed


def _per_rank(
    traces: Sequence[TraceEvents],
    steps: tuple[int, int] | None,
    hta_compat: bool,
    peaks: Peaks,
    spec: td.DeviceSpec | None,
    causal: str,
) -> _Ranks:
    found = _Ranks([], [], [], [], [], [], [])
    for position, ev in enumerate(traces):
        mask = _select(ev, steps)
        rank = ev.rank if ev.rank is not None else position
        timeline = tt.rank_timeline(ev, steps=steps, hta_compat=hta_compat)
        if ev.rank is None and timeline.rank != rank:
            timeline = _renumber(timeline, rank)
        replayed = None if hta_compat or not len(ev.gpu) else trp.replay_rank(ev, steps=steps, causal=causal)
        if replayed is not None:
            timeline = trc.with_bounds(timeline, replayed.bounds, replayed.graph)
        found.replays.append(replayed)
        found.timelines.append(timeline)
        found.masks.append(mask)
        found.groups.append(to.op_groups(ev, peaks=peaks, device=spec, kernel_mask=mask, causal=causal))
        found.coverages.append(to.coverage(ev, kernel_mask=mask, causal=causal))
        found.syncs.append(to.host_syncs(ev))
        found.calls.append(_collective_calls(ev, mask, rank))
        found.kernel_s += (ev.gpu.dur_us[mask & (ev.gpu.kind == KERNEL)] / 1e6).tolist()
    return found


def _peaks(
    spec: td.DeviceSpec | None, source: str, has_gpu: bool, **overrides: Any
) -> tuple[Peaks, bool, list[Notice]]:
    peaks = tr.peaks_for(spec, **overrides)
    if peaks is not None:
        return peaks, True, []
    none = Peaks({}, 0.0, "none", notes=("no roofline: bounds and peak fractions are not computed",))
    return none, False, [Notice("trace_no_peaks", {"device_source": source})] if has_gpu else []


def analyze(
    paths: Iterable[str | os.PathLike[str]],
    *,
    steps: tuple[int, int] | None = None,
    hta_compat: bool = False,
    device: str | None = None,
    peak_flops: float | None = None,
    peak_bandwidth: float | None = None,
    roofline_fit: Any | None = None,
    causal: str = "half",
    matmul_peak_fraction: float = 0.7,
    workers: int | None = None,
    what_if_edits: Sequence[str] = (),
    kernels_from: str | os.PathLike[str] | None = None,
) -> Analysis:
    """The whole analysis of ``paths`` (files, or folders of one file per rank); ``what_if_edits``
    (:mod:`.user_edits`) and ``kernels_from`` (:mod:`.kernels_from`): what-ifs asked for."""
    if causal not in CAUSAL_CONVENTIONS:
        raise InvalidInput("--causal-flops", causal, f"expected one of {', '.join(CAUSAL_CONVENTIONS)}")
    if hta_compat and steps is not None:
        fixed = "not with --hta-compat (HTA's window is fixed: every step but the last)"
        raise InvalidInput("--steps", f"{steps[0]}-{steps[1]}", fixed)
    traces = read_traces(paths, workers=workers)
    warnings: list[Notice] = [w for ev in traces for w in ev.warnings]
    spec, source, notices = _device(traces, device)
    has_gpu = any(len(ev.gpu) for ev in traces)
    peaks, known, more = _peaks(
        spec, source, has_gpu, peak_flops=peak_flops, peak_bandwidth=peak_bandwidth, roofline_fit=roofline_fit
    )
    warnings += notices + more
    ranks = _per_rank(traces, steps, hta_compat, peaks, spec, causal)
    groups = to.merge_groups(ranks.groups, peaks=peaks) if len(ranks.groups) > 1 else ranks.groups[0]
    slowest, skew = tt.rank_skew(ranks.timelines)
    found_what_if: tuple = ()
    idle: tuple = ()
    if has_gpu:
        at = next(i for i, r in enumerate(ranks.timelines) if r.rank == slowest)
        found_what_if = what_ifs(
            traces[at], ranks.groups[at], peaks, ranks.timelines[at].steps, kernel_mask=ranks.masks[at],
            matmul_peak_fraction=matmul_peak_fraction, causal=causal,
        )  # fmt: skip
        if not known:
            found_what_if = tuple(w for w in found_what_if if w.scenario not in _NEED_PEAKS)
        found_what_if, idle = _replayed(
            traces[at], ranks, at, found_what_if, peaks, steps, causal, matmul_peak_fraction
        )
        found_what_if += _asked(traces[at], ranks, at, what_if_edits, kernels_from, steps, causal)
    rows = tc.collective_rows(ranks.calls)
    fits, fit_notices = tc.alpha_beta(rows)
    warnings += fit_notices
    warnings += tr.rate_checks(groups, peaks) if known else ()
    warnings += [] if has_gpu else [Notice("trace_cpu_only", {"files": len(traces)})]
    warnings += [w for r in ranks.timelines for w in r.warnings]
    result = TraceResult(
        files=tuple(ev.path for ev in traces),
        device_name=spec.name if spec is not None else "",
        device_source=source,
        peaks=peaks,
        ranks=tuple(ranks.timelines),
        ops=groups,
        coverage=_merge_coverage(ranks.coverages),
        what_if=found_what_if,
        collectives=rows,
        host_syncs=_merge_syncs(ranks.syncs),
        hta_compat=hta_compat,
        causal_flops=causal,
        steps_selected="all" if steps is None else f"{steps[0]}-{steps[1]}",
        slowest_rank=slowest if len(ranks.timelines) > 1 else None,
        step_skew=skew,
        trace_fit=tr.fit_from_trace(groups, kernel_s=ranks.kernel_s) if has_gpu else None,
        alpha_beta=tuple(
            AlphaBetaRow(kind, f.alpha_s, f.beta_bytes_per_s, f.n_points, f.median_abs_rel_error)
            for kind, f in fits.items()
            if f is not None
        ),
        cpu_ops=() if has_gpu else cpu_ops(traces),
        idle_causes=idle,
        warnings=_unique(warnings),
    )
    return Analysis(result, traces, tuple(ranks.masks), tuple(ranks.replays))


def _replayed(
    ev: TraceEvents,
    ranks: _Ranks,
    at: int,
    found: tuple,
    peaks: Peaks,
    steps: tuple[int, int] | None,
    causal: str,
    matmul_peak_fraction: float,
) -> tuple[tuple, tuple]:
    """The what-ifs with their replayed figures, and the idle causes, of rank ``at``."""
    rr = ranks.replays[at]
    if rr is None:
        return found, ()
    found = twr.replayed_what_ifs(
        ev, rr, found, ranks.groups[at], peaks, ranks.timelines[at].steps, ranks.masks[at],
        steps=steps, causal=causal, matmul_peak_fraction=matmul_peak_fraction,
    )  # fmt: skip
    return found, trc.idle_causes(rr.bounds)


def _asked(
    ev: TraceEvents,
    ranks: _Ranks,
    at: int,
    edits: Sequence[str],
    other: Any,
    steps: tuple[int, int] | None,
    causal: str,
) -> tuple:
    """The what-ifs the user asked for: ``--what-if`` edits, then ``--kernels-from``."""
    return _user_what_ifs(ev, ranks, at, edits, steps, causal) + _kernels_from(
        ev, ranks, at, other, steps, causal
    )


def _user_what_ifs(
    ev: TraceEvents, ranks: _Ranks, at: int, edits: Sequence[str], steps: tuple[int, int] | None, causal: str
) -> tuple:
    if not edits:
        return ()
    from infer_opt.trace.user_edits import user_what_if

    rr = ranks.replays[at]
    if rr is None or not ranks.timelines[at].steps:
        raise InvalidInput("--what-if", edits[0], "needs the replay of GPU events (not with --hta-compat)")
    timelines, mask = ranks.timelines[at].steps, ranks.masks[at]
    return tuple(user_what_if(ev, rr, e, timelines, mask, steps=steps, causal=causal) for e in edits)


def _kernels_from(
    ev: TraceEvents, ranks: _Ranks, at: int, other: Any, steps: tuple[int, int] | None, causal: str
) -> tuple:
    if other is None:
        return ()
    from infer_opt.trace.kernels_from import kernels_from_what_if
    from infer_opt.trace.reader import read_trace

    rr = ranks.replays[at]
    if rr is None or not ranks.timelines[at].steps:
        raise InvalidInput(
            "--kernels-from", str(other), "needs the replay of GPU events (not with --hta-compat)"
        )
    theirs = read_trace(other)
    w = kernels_from_what_if(
        ev, rr, theirs, tt.analyzed_mask(theirs), ranks.timelines[at].steps, ranks.masks[at],
        steps=steps, causal=causal,
    )  # fmt: skip
    return (w,)


def _renumber(r: RankTrace, rank: int) -> RankTrace:
    from dataclasses import replace

    return replace(r, rank=rank)


def _unique(notices: Sequence[Notice]) -> tuple[Notice, ...]:
    seen, out = set(), []
    for n in notices:
        key = (n.code, repr(sorted(n.values.items(), key=lambda kv: kv[0])))
        if key not in seen:
            seen.add(key)
            out.append(n)
    return tuple(out)


__all__ = ["Analysis", "analyze", "cpu_ops", "parse_steps"]
