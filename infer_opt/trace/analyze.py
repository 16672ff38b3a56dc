"""The facade: trace files in, one :class:`~infer_opt.results.trace.TraceResult` out.

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

The ranks are a map (:mod:`infer_opt.trace.ranks`: a local pool of ``workers``, or the Dask
``scheduler``) reduced here; a rank that cannot be read is left out with a warning (``strict``:
refused). ``keep_events`` keeps every rank's events (and replay) in the :class:`Analysis`
(``--augment``, the kernels DataFrame); without it the driver holds the summaries only. Graph
replays are linked to ``capture`` (or to capture traces found among or beside ``paths``:
:mod:`infer_opt.trace.capture`). Each rank's dependency graph is replayed in the map
(:mod:`infer_opt.trace.replay`, :mod:`infer_opt.trace.critical`); the what-ifs asked for are
``what_if_edits`` (:mod:`infer_opt.trace.user_edits`) and ``kernels_from``
(:mod:`infer_opt.trace.kernels_from`). ``joint_replay`` (default: for 2 to ``JOINT_AUTO_RANKS``
ranks) keeps each rank's graph for the ranks' joint replay and the straggler's replayed cost
(:mod:`infer_opt.trace.straggler_replay`): on a Dask cluster on the worker that made it (each
round of the replay sends a rank its collectives' durations and gets their starts back), in a
local run on the driver, which then holds every rank's graph. A ``scheduler`` address is
connected to once for the whole analysis.

Pure: numpy and the standard library; nothing here imports torch or pandas.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from infer_opt.errors import InvalidInput, RunFailure
from infer_opt.notices import Notice
from infer_opt.requests import TraceRequest
from infer_opt.results.cross_rank import CrossRank
from infer_opt.results.trace import (
    AlphaBetaRow,
    CoverageRow,
    CpuOpRow,
    HostSync,
    Peaks,
    RankTrace,
    TraceResult,
)
from infer_opt.trace import capture as tcap
from infer_opt.trace import collectives as tc
from infer_opt.trace import devices as td
from infer_opt.trace import ranks as rk
from infer_opt.trace import roofline as tr
from infer_opt.trace import timeline as tt
from infer_opt.trace.events import TraceEvents
from infer_opt.trace.fold import RankFold
from infer_opt.trace.kernel_table import kernel_rows
from infer_opt.trace.op_costs import CAUSAL_CONVENTIONS
from infer_opt.trace.reader import trace_files

#: what-ifs that need a roofline (the others are the timeline's own)
_NEED_PEAKS = ("category_at_bound", "matmul_at_peak_fraction", "fusion")
CPU_OPS_KEPT = 50
#: the joint replay of the ranks (the straggler's replayed cost) by default up to this many ranks:
#: a local run holds every rank's graph on the driver (docs/benchmarks.md: its memory per rank)
JOINT_AUTO_RANKS = 8


@dataclass(frozen=True)
class Analysis:
    """A result and the columns it came from (for ``--augment`` and the DataFrames)."""

    result: TraceResult
    traces: tuple[TraceEvents, ...]
    masks: tuple[np.ndarray, ...]  # per rank, the GPU events in the analyzed windows
    steps: tuple[int, int] | None = None  # the --steps analysed (to read the events again)
    #: per rank, its replay.RankReplay (None: not replayed), kept with the events
    replays: tuple[Any, ...] = ()


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
            ev.name_of(g.name[i]), g.args[i], rank, float(g.ts_us[i]), float(g.dur_us[i]), ev.world_size
        )
        if call is not None:
            calls.append(call)
    return calls


def cpu_ops(traces: Sequence[TraceEvents], most: int = CPU_OPS_KEPT) -> tuple[CpuOpRow, ...]:
    """Self time per CPU op name (its duration less its children's), over every rank, most first."""
    return _merged_cpu_ops((rk.cpu_op_times(ev) for ev in traces), most)


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
    scheduler: Any | None = None,
    strict: bool = False,
    progress: Callable[[int, int], None] | None = None,
    keep_events: bool = True,
    capture: Sequence[str | os.PathLike[str]] | None = None,
    what_if_edits: Sequence[str] = (),
    kernels_from: str | os.PathLike[str] | None = None,
    joint_replay: bool | None = None,
) -> Analysis:
    """The whole analysis of ``paths`` (files, or folders of ranks); the options: the module's doc."""
    if isinstance(scheduler, str):  # one client for the map, the device's second map and the joint replay
        return _connected(
            paths, scheduler, {k: v for k, v in locals().items() if k not in ("paths", "scheduler")}
        )
    _check_options(causal, hta_compat, steps)
    options = rk.RankOptions(
        steps=steps, hta_compat=hta_compat, device=device, peak_flops=peak_flops,
        peak_bandwidth=peak_bandwidth, roofline_fit=roofline_fit, causal=causal,
        matmul_peak_fraction=matmul_peak_fraction, keep_events=keep_events, joint_replay=joint_replay,
        what_if_edits=tuple(what_if_edits), kernels_from=kernels_from and os.fspath(kernels_from),
    )  # fmt: skip
    how = {"scheduler": scheduler, "workers": workers, "progress": progress}
    summaries, fold, links, spec, source, warnings = _gathered(list(paths), options, strict, how, capture)
    has_gpu = any(s.has_gpu for s in summaries)
    peaks, known, more = _peaks(
        spec, source, has_gpu, peak_flops=peak_flops, peak_bandwidth=peak_bandwidth, roofline_fit=roofline_fit
    )
    warnings = [w for s in summaries for w in s.warnings] + warnings + more
    timelines = [_renumbered(s, position) for position, s in enumerate(summaries)]
    merged = fold.groups(spec, peaks)  # to.merge_groups of the ranks' groups, folded as they came
    slowest, skew = tt.rank_skew(timelines)
    found_what_if, idle = _slowest_what_if(fold, known) if has_gpu else ((), ())
    rows = tc.collective_rows([_calls(s, r.rank) for s, r in zip(summaries, timelines, strict=True)])
    fits, fit_notices = tc.alpha_beta(rows)
    warnings += fit_notices
    warnings += tr.rate_checks(merged, peaks) if known else ()
    warnings += [] if has_gpu else [Notice("trace_cpu_only", {"files": len(summaries)})]
    warnings += [w for r in timelines for w in r.warnings]
    crossed, job_notices = _cross_rank(summaries, timelines)
    kernels, families, coverage, gaps = _coverages(summaries, fold.kernel_totals(spec), links, merged)
    warnings += gaps
    result = TraceResult(
        files=tuple(s.path for s in summaries),
        device_name=spec.name if spec is not None else "",
        device_source=source,
        peaks=peaks,
        ranks=tuple(timelines),
        ops=merged,
        coverage=coverage,
        what_if=found_what_if,
        collectives=rows,
        host_syncs=_merge_syncs(s.syncs for s in summaries),
        hta_compat=hta_compat,
        causal_flops=causal,
        steps_selected="all" if steps is None else f"{steps[0]}-{steps[1]}",
        slowest_rank=slowest if len(timelines) > 1 else None,
        step_skew=skew,
        trace_fit=tr.fit_from_trace(merged, kernel_times=fold.kernel_times(spec)) if has_gpu else None,
        alpha_beta=_alpha_beta_rows(fits),
        cpu_ops=() if has_gpu else _merged_cpu_ops(s.cpu_ops for s in summaries),
        warnings=_unique(warnings + job_notices),
        cross_rank=crossed,
        idle_causes=idle,
        kernels=kernels,
        family_coverage=families,
        captures=links,
    )
    return _analysis(result, summaries, steps)


def _analysis(
    result: TraceResult, summaries: Sequence[rk.RankSummary], steps: tuple[int, int] | None
) -> Analysis:
    """The result with every rank's events, masks and replays where the map kept them all."""
    kept = tuple(s.events for s in summaries if s.events is not None)
    masks = tuple(s.mask for s in summaries if s.mask is not None)
    whole = len(kept) == len(summaries)
    replays = tuple(s.replay for s in summaries) if whole else ()
    return Analysis(result, kept if whole else (), masks if kept else (), steps, replays)


def _connected(paths: Iterable[str | os.PathLike[str]], address: str, given: dict[str, Any]) -> Analysis:
    """:func:`analyze` on the Dask scheduler at ``address``, one client for the whole analysis
    (the map, the device's second map, the joint replay's rounds), closed after it."""
    with contextlib.closing(rk.connect(address)) as client:
        return analyze(paths, scheduler=client, **given)


def run(
    request: TraceRequest,
    *,
    progress: Callable[[int, int], None] | None = None,
    keep_events: bool | None = None,
) -> Analysis:
    """``infer-opt trace`` and ``load_trace``: the analysis ``request`` asks for. The events are
    kept (``--augment``, the frames) where ``keep_events`` says, by default unless the ranks are
    read on a Dask cluster (``--scheduler``, else ``$INFER_OPT_SCHEDULER``)."""
    from infer_opt.results import load_result

    r = request
    if not r.paths:
        raise InvalidInput("--paths", "[]", "give at least one trace file or folder")
    fit = None
    if r.roofline is not None:
        fit = load_result(r.roofline, expect=("roofline",), option="--roofline", what="a roofline fit").result
    scheduler = rk.scheduler_address(r.scheduler)  # a distributed.Client as it is
    return analyze(
        r.paths, steps=r.steps, hta_compat=r.hta_compat, device=r.device, peak_flops=r.peak_flops,
        peak_bandwidth=r.peak_bandwidth, roofline_fit=fit, causal=r.causal_flops,
        matmul_peak_fraction=r.matmul_fraction, workers=r.workers, scheduler=scheduler, strict=r.strict,
        progress=progress, keep_events=scheduler is None if keep_events is None else keep_events,
        capture=r.capture, what_if_edits=r.what_if, kernels_from=r.kernels_from,
        joint_replay=r.joint_replay or None,
    )  # fmt: skip


def _coverages(summaries: Sequence[rk.RankSummary], totals: dict, links: tuple, merged: tuple) -> tuple:
    """(kernel rows, family coverage, formula coverage, the notices of linked replays' gaps)."""
    kernels, families = kernel_rows([totals])
    coverage = _merge_coverage(s.coverage for s in summaries)
    return kernels, families, coverage, tcap.formula_gaps(links, merged, coverage)


def _check_options(causal: str, hta_compat: bool, steps: tuple[int, int] | None) -> None:
    if causal not in CAUSAL_CONVENTIONS:
        raise InvalidInput("--causal-flops", causal, f"expected one of {', '.join(CAUSAL_CONVENTIONS)}")
    if hta_compat and steps is not None:
        fixed = "not with --hta-compat (HTA's window is fixed: every step but the last)"
        raise InvalidInput("--steps", f"{steps[0]}-{steps[1]}", fixed)


def _gathered(
    paths: list[str | os.PathLike[str]],
    options: rk.RankOptions,
    strict: bool,
    how: dict[str, Any],
    capture: Sequence[str | os.PathLike[str]] | None,
) -> tuple[list[rk.RankSummary], RankFold, tuple, td.DeviceSpec | None, str, list[Notice]]:
    """The map's summaries (graph replays linked to their capture, every rank analysed with the
    job's device) and their running reduce (:mod:`.fold`: each summary's groups folded as it
    arrives), the capture links, the device, its source and what was said on the way."""
    files = trace_files(paths)
    if options.joint_replay is None:  # a local run holds every rank's graph: by default for a few ranks
        options = replace(options, joint_replay=1 < len(files) <= JOINT_AUTO_RANKS)
    fold = RankFold(files)
    summaries, warnings = _summaries(files, options, strict, {**how, "consume": fold.take})
    summaries, links, link_notices = _linked(summaries, paths, capture, options, how["workers"])
    summaries = [fold.add(s) if s.is_capture or s.graph_launches else s for s in summaries]
    spec, source, notices = _job_device(summaries, options.device)
    if options.device is None:
        summaries = rk.reanalysed(summaries, options, spec, **how, consume=fold.add)
        # a rank not read again (its file gone since): left out, its first analysis is no rank of this device
        lost = [s for s in summaries if s.has_gpu and rk._name(s.spec) != rk._name(spec)]
        notices += rk.failed_notices(
            [rk.RankFailure(s.path, "not read again with the job's device") for s in lost]
        )
        summaries = [s for s in summaries if all(s is not x for x in lost)]
    return summaries, fold, links, spec, source, warnings + link_notices + notices


def _linked(
    summaries: list[rk.RankSummary],
    paths: Sequence[str | os.PathLike[str]],
    capture: Sequence[str | os.PathLike[str]] | None,
    options: rk.RankOptions,
    workers: int | None,
) -> tuple[list[rk.RankSummary], tuple, list[Notice]]:
    """The summaries with each graph replay linked to its capture (:func:`capture.pair`, on the
    driver: a server's replay and capture traces, not a job's ranks); capture traces given
    among the inputs are no ranks. Without graph replays or captures, nothing is read again."""
    from infer_opt.trace.reader import read_traces

    involved = [i for i, s in enumerate(summaries) if s.is_capture or s.graph_launches]
    captures_given = capture is not None or any(summaries[i].is_capture for i in involved)
    if not captures_given and (not involved or not tcap.capture_folders(paths)):
        launches = sum(s.graph_launches for s in summaries)
        return summaries, (), [Notice("trace_capture_absent", {"replays": launches})] if launches else []
    # (none involved: a --capture with no replay to link is still read, and checked, by pair)
    traces = list(read_traces([summaries[i].path for i in involved], workers=workers)) if involved else []
    rest, links, notices = tcap.pair(traces, paths, capture, workers=workers)
    again = {ev.path: rk.summarize_events(ev, options) for ev in rest}
    out = [s for i, s in enumerate(summaries) if i not in set(involved) or s.path in again]
    return [again.get(s.path, s) for s in out], links, notices


def _slowest_what_if(fold: RankFold, known: bool) -> tuple[tuple, tuple]:
    """The what-ifs and idle causes of the slowest rank (each rank's were computed in the map;
    the fold kept the running slowest's)."""
    what_if, idle = fold.slowest()
    found = what_if if known else tuple(w for w in what_if if w.scenario not in _NEED_PEAKS)
    return found, idle


def _alpha_beta_rows(fits: dict[str, Any]) -> tuple[AlphaBetaRow, ...]:
    return tuple(
        AlphaBetaRow(kind, f.alpha_s, f.beta_bytes_per_s, f.n_points, f.median_abs_rel_error)
        for kind, f in fits.items()
        if f is not None
    )


def _summaries(
    files: Sequence[os.PathLike[str] | str], options: rk.RankOptions, strict: bool, how: dict[str, Any]
) -> tuple[list[rk.RankSummary], list[Notice]]:
    """Every rank summarized, sorted by rank (``distributedInfo``; files without one keep their
    order); the failed ones named in warnings (``strict``, or none left: the first one raised)."""
    found = rk.map_ranks(files, options, **how)
    failures = [f for f in found if isinstance(f, rk.RankFailure)]
    summaries = [s for s in found if isinstance(s, rk.RankSummary)]
    if failures and (strict or not summaries):
        first = failures[0]
        if first.exception is not None:  # its own one line (a bad file: exit 2)
            raise first.exception
        lost = ", ".join(f"{os.path.basename(f.path)} ({f.error})" for f in failures)
        raise RunFailure(f"{len(failures)} of {len(found)} rank(s) could not be analysed: {lost}")
    summaries.sort(key=lambda s: s.rank if s.rank is not None else 1 << 30)  # stable: file order
    return summaries, rk.failed_notices(failures)


def _job_device(
    summaries: Sequence[rk.RankSummary], device_name: str | None
) -> tuple[td.DeviceSpec | None, str, list[Notice]]:
    """The job's device: ``--device``, else the first rank's (a notice when a rank's is unknown;
    ranks that name two GPU models are refused, ``--device`` or not)."""
    if device_name is not None:
        if len(summaries) > 1:
            _job_device(summaries, None)
        return td.by_name(device_name), "--device", []
    found = {s.path: s.identified for s in summaries if s.identified is not None}
    if not found:
        return None, "none", []
    names = {d.name if d is not None else None for d, _, _ in found.values()}
    first = next(iter(found.values()))
    notices = list(first[2])
    if len(names) > 1:
        seen = tuple(f"{os.path.basename(p)}: {d.name if d else 'unknown'}" for p, (d, _, _) in found.items())
        if len(names - {None}) > 1:  # two GPU models are no one job's ranks
            devices = " and ".join(sorted(n for n in names if n is not None))
            raise InvalidInput(
                "TRACE",
                "; ".join(seen),
                f"the ranks of one job, on one GPU model (these ran on {devices}: compare two devices' "
                "traces with `infer-opt compare A B`)",
            )
        notices.append(Notice("trace_devices_differ", {"seen": seen}))
    return first[0], first[1], notices


def _renumbered(s: rk.RankSummary, position: int) -> RankTrace:
    rank = s.rank if s.rank is not None else position
    return _renumber(s.timeline, rank) if s.rank is None and s.timeline.rank != rank else s.timeline


def _calls(s: rk.RankSummary, rank: int) -> list[tc.CollectiveCall]:
    from dataclasses import replace

    return [c if c.rank == rank else replace(c, rank=rank) for c in s.calls]


def _merged_cpu_ops(
    per_rank: Iterable[dict[str, tuple[int, float, float]]], most: int = CPU_OPS_KEPT
) -> tuple[CpuOpRow, ...]:
    found: dict[str, tuple[int, float, float]] = {}
    for ops in per_rank:
        for name, (c, t, s) in ops.items():
            calls, total, own = found.get(name, (0, 0.0, 0.0))
            found[name] = (calls + c, total + t, own + s)
    rows = [CpuOpRow(n, c, t / 1e6, s / 1e6) for n, (c, t, s) in found.items()]
    rows.sort(key=lambda r: (-r.self_s, r.name))
    return tuple(rows[:most])


def _cross_rank(
    summaries: Sequence[rk.RankSummary], timelines: Sequence[RankTrace]
) -> tuple[CrossRank | None, list[Notice]]:
    """Two or more ranks of one job: the cross-rank analysis, and what is wrong with the set;
    the straggler's cost replayed (:mod:`.straggler_replay`) where every rank brought its graph."""
    from infer_opt.trace import cross_rank as xr
    from infer_opt.trace import straggler_replay as tsr

    notices = job_notices(summaries)
    gpu = [i for i, s in enumerate(summaries) if s.has_gpu]
    ids = [timelines[i].rank for i in gpu]
    if len(gpu) < 2 or len(set(ids)) < len(ids):
        return None, notices
    records = {timelines[i].rank: summaries[i].records for i in gpu}
    ranks = [timelines[i] for i in gpu]
    crossed = xr.analyze_ranks(ranks, records)
    if any(summaries[i].joint is None for i in gpu):
        why = f"by default up to {JOINT_AUTO_RANKS} ranks: a local run holds each rank's graph"
        note = f"not replayed jointly ({why}; --joint-replay to ask; never with --hta-compat)"
        return replace(crossed, joint_replay_note=note), notices
    found, check = tsr.on_time({timelines[i].rank: summaries[i].joint for i in gpu}, ranks, crossed.straggler)
    return replace(crossed, straggler=found, joint_replay=check), notices


def job_notices(summaries: Sequence[rk.RankSummary]) -> list[Notice]:
    """Ranks of two jobs (world size or device differ): refused naming both; rank ids missing
    or given twice: said, naming the files."""
    named = [s for s in summaries if s.rank is not None]
    for a in named:
        for b in named:
            for what, x, y in (
                ("world size", a.world_size, b.world_size),
                ("device", a.device_name, b.device_name),
            ):
                if x and y and x != y:
                    raise InvalidInput(
                        "TRACE", f"{a.path} and {b.path}",
                        f"ranks of two jobs ({what} {x} in {os.path.basename(a.path)}, {y} in "
                        f"{os.path.basename(b.path)}); give the ranks of one job",
                    )  # fmt: skip
    if len(summaries) < 2:
        return []
    out = []
    unnamed = [os.path.basename(s.path) for s in summaries if s.rank is None]
    if named and unnamed:
        out.append(Notice("trace_rank_id_missing", {"files": tuple(unnamed)}))
    by_rank: dict[int, list[str]] = {}
    for s in named:
        by_rank.setdefault(int(s.rank), []).append(os.path.basename(s.path))  # type: ignore[arg-type]
    for rank, files in sorted(by_rank.items()):
        if len(files) > 1:
            out.append(Notice("trace_rank_duplicate", {"rank": rank, "files": tuple(files)}))
    sizes = {s.world_size for s in named if s.world_size}
    if len(sizes) == 1 and not unnamed:
        size = sizes.pop()
        absent = [r for r in range(size) if r not in by_rank]
        if absent:
            shown = {"absent": tuple(absent[:8]), "more": max(len(absent) - 8, 0)}
            out.append(Notice("trace_ranks_absent", {"world_size": size, "present": len(by_rank), **shown}))
    return out


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


__all__ = ["Analysis", "analyze", "cpu_ops", "parse_steps", "run"]
