"""The map over ranks: each trace file read and analysed alone into a small, picklable
:class:`RankSummary`; only summaries travel back to the driver, which reduces them
(:func:`infer_opt.trace.analyze.analyze`). The driver's memory grows with the number of ranks,
not with their event counts.

Where the map runs: one file in this process; several on a local process pool
(``workers``, default the cores); with ``scheduler`` on a Dask distributed cluster the user
already has (``dask.distributed.Client(address)``; the workers read the files from a path they
share; Dask is imported only then). A rank whose file cannot be read is a :class:`RankFailure`
(named, with its error) and the job goes on with the rest, unless ``strict``; a worker that dies
fails only the ranks it held. Progress is a callback (``progress(done, total)``): nothing here
prints.

What a summary holds (what the reduce uses from each rank): its timeline per step, its op
groups, coverage and host syncs, its collective calls (for the collectives table) and its
collective records (for the cross-rank matching: group, name, order, step, start, duration,
size), its kernel durations as distinct values and counts (the trace-fit's launch floor: an
exact percentile of the union without the events), its CPU-op self times (a CPU-only trace)
and **its what-ifs**. The what-ifs are held against the slowest rank, known only after the
reduce; each rank's are computed in the map (a few per cent of a rank's reading cost, measured)
and the reduce keeps the slowest's, rather than reading that rank a second time.

The device: each rank identifies its own (or takes ``--device``); the reduce picks the first
rank's as the job's (as before), and a rank that identified another is analysed again with the
job's (rare: a folder mixing devices). Pure: numpy and the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results.trace import CoverageRow, HostSync, IdleCause, OpGroup, Peaks, RankTrace, WhatIf
from infer_opt.trace import collectives as tc
from infer_opt.trace import critical as trc
from infer_opt.trace import devices as td
from infer_opt.trace import ops as to
from infer_opt.trace import replay as trp
from infer_opt.trace import roofline as tr
from infer_opt.trace import timeline as tt
from infer_opt.trace import whatif_replay as twr
from infer_opt.trace.events import KERNEL, TraceEvents

#: the environment variable naming a Dask scheduler (``--scheduler``)
SCHEDULER_ENV = "INFER_OPT_SCHEDULER"
#: seconds to wait for a Dask scheduler before saying it did not answer
CONNECT_TIMEOUT_S = 5.0

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class RankOptions:
    """What every rank's analysis is asked (the same for all ranks of a job)."""

    steps: tuple[int, int] | None = None
    hta_compat: bool = False
    device: str | None = None
    spec: td.DeviceSpec | None = None  # the job's device, when ``forced`` (a rank analysed again)
    forced: bool = False
    peak_flops: float | None = None
    peak_bandwidth: float | None = None
    roofline_fit: Any | None = None
    causal: str = "half"
    matmul_peak_fraction: float = 0.7
    keep_events: bool = False  # send the events back too (--augment, the kernels DataFrame)
    what_if_edits: tuple[str, ...] = ()  # --what-if edits (trace/user_edits.py), replayed per rank
    kernels_from: str | None = None  # --kernels-from: another GPU's trace of the same model
    joint_replay: bool | None = False  # send its graph back for the joint replay (None: analyze decides)


@dataclass(frozen=True)
class RankSummary:
    """One rank, analysed: everything the reduce needs and nothing that grows with its events
    (but the collectives, one record per NCCL kernel)."""

    path: str
    rank: int | None  # distributedInfo.rank
    world_size: int | None
    device_name: str  # deviceProperties' name as the file has it ('' none)
    identified: tuple[td.DeviceSpec | None, str, tuple[Notice, ...]] | None  # None: no GPU events
    spec: td.DeviceSpec | None  # the device this summary was analysed with
    source: str
    peaks: Peaks
    known: bool  # the peaks are a roofline
    has_gpu: bool
    warnings: tuple[Notice, ...]  # the reader's
    timeline: RankTrace
    groups: tuple[OpGroup, ...]
    coverage: tuple[CoverageRow, ...]
    syncs: tuple[HostSync, ...]
    calls: tuple[tc.CollectiveCall, ...]
    records: tuple[Any, ...]  # cross_rank.CollectiveRecord
    kernel_values: np.ndarray  # distinct kernel durations (s) in the analyzed windows
    kernel_counts: np.ndarray
    cpu_ops: dict[str, tuple[int, float, float]]  # a CPU-only trace: name → (calls, total, self) µs
    what_if: tuple[WhatIf, ...]
    #: (kernel name, family, family source) → (calls, summed µs): the kernel table's share
    kernel_totals: dict[tuple[str, str, str], tuple[int, float]] = field(default_factory=dict)
    is_capture: bool = False  # a graph-capture trace (trace/capture.py), not a step's ranks
    graph_launches: int = 0  # graph replays launched in it (to be linked to their capture)
    idle_causes: tuple[IdleCause, ...] = ()  # the device's idle time by cause (trace/critical.py)
    events: TraceEvents | None = None  # keep_events only
    replay: Any = None  # keep_events only: its replay.RankReplay (None: not replayed)
    mask: np.ndarray | None = None  # keep_events only
    joint: Any = None  # joint_replay only: its replay_ranks.RankInput (its graph: grows with its events),
    # or on a Dask cluster a future of it, left on the worker that made it


@dataclass(frozen=True)
class RankFailure:
    """A rank that could not be read (or whose worker died), and why."""

    path: str
    error: str
    exception: BaseException | None = None  # raised again when the job cannot go on without it


def identify(ev: TraceEvents) -> tuple[td.DeviceSpec | None, str, tuple[Notice, ...]] | None:
    """The device this rank's own trace names (``None`` when it has no GPU events)."""
    if not len(ev.gpu):
        return None
    kernels = {ev.name_of(n) for n in np.unique(ev.gpu.name[ev.gpu.kind == KERNEL])}
    # a device table of every GPU of the host (older traces): the one the kernels ran on
    table = td.ran_on(ev.device_properties, ev.gpu.device[ev.gpu.kind == KERNEL].tolist())
    spec, source, notices = td.identify(table, sorted(kernels))
    return spec, source, tuple(notices)


def peaks_for(spec: td.DeviceSpec | None, options: RankOptions) -> tuple[Peaks, bool]:
    """The roofline the ops are held against (``Peaks`` with source ``none`` when there is none)."""
    peaks = tr.peaks_for(
        spec,
        peak_flops=options.peak_flops,
        peak_bandwidth=options.peak_bandwidth,
        roofline_fit=options.roofline_fit,
    )
    if peaks is not None:
        return peaks, True
    return Peaks({}, 0.0, "none", notes=("no roofline: bounds and peak fractions are not computed",)), False


def _device_of(ev: TraceEvents, options: RankOptions) -> tuple[td.DeviceSpec | None, str, Any]:
    found = identify(ev)
    if options.forced:
        return options.spec, "", found
    if options.device is not None:
        return td.by_name(options.device), "--device", found
    if found is None:
        return None, "none", None
    return found[0], found[1], found


def selected(ev: TraceEvents, steps: tuple[int, int] | None) -> np.ndarray:
    """The GPU events in the analyzed windows; ``--steps`` naming none of this rank's: refused."""
    mask = tt.analyzed_mask(ev, steps)
    if steps is not None and len(ev.gpu) and not mask.any():
        have = [s.number for s in ev.steps]
        allowed = f"its steps are {have[0]}-{have[-1]}" if have else "it has no ProfilerStep"
        raise InvalidInput(
            "--steps", f"{steps[0]}-{steps[1]}", f"no step of {ev.path} in this range ({allowed})"
        )
    return mask


def cpu_op_times(ev: TraceEvents) -> dict[str, tuple[int, float, float]]:
    """Per CPU op name: (calls, summed duration µs, summed self time µs)."""
    found: dict[str, tuple[int, float, float]] = {}
    ops = ev.ops
    if not len(ops):
        return found
    child = np.zeros(len(ops))
    has = ops.parent >= 0
    np.add.at(child, ops.parent[has], ops.dur_us[has])
    self_us = np.maximum(ops.dur_us - child, 0.0)
    for i in range(len(ops)):
        name = ev.name_of(ops.name[i])
        calls, total, own = found.get(name, (0, 0.0, 0.0))
        found[name] = (calls + 1, total + float(ops.dur_us[i]), own + float(self_us[i]))
    return found


def summarize_events(ev: TraceEvents, options: RankOptions) -> RankSummary:
    """One rank's analysis (the map's body, on events already read)."""
    from infer_opt.trace import capture as tcap
    from infer_opt.trace import cross_rank
    from infer_opt.trace.analyze import _collective_calls
    from infer_opt.trace.kernel_table import kernel_totals
    from infer_opt.trace.replay_ranks import rank_input
    from infer_opt.trace.whatif import what_ifs

    spec, source, found = _device_of(ev, options)
    peaks, known = peaks_for(spec, options)
    mask = selected(ev, options.steps)
    position_rank = ev.rank if ev.rank is not None else 0
    timeline = tt.rank_timeline(ev, steps=options.steps, hta_compat=options.hta_compat)
    replayed = (
        None
        if options.hta_compat or not len(ev.gpu)
        else trp.replay_rank(ev, steps=options.steps, causal=options.causal)
    )
    if replayed is not None:
        timeline = trc.with_bounds(timeline, replayed.bounds, replayed.graph)
    groups = tuple(to.op_groups(ev, peaks=peaks, device=spec, kernel_mask=mask, causal=options.causal))
    has_gpu = bool(len(ev.gpu))
    values, counts = np.unique(ev.gpu.dur_us[mask & (ev.gpu.kind == KERNEL)] / 1e6, return_counts=True)
    whatif: tuple[WhatIf, ...] = ()
    idle: tuple[IdleCause, ...] = ()
    if has_gpu:
        whatif = tuple(
            what_ifs(ev, groups, peaks, timeline.steps, kernel_mask=mask,
                     matmul_peak_fraction=options.matmul_peak_fraction, causal=options.causal)
        )  # fmt: skip
        whatif, idle = _replayed_what_ifs(ev, replayed, whatif, groups, peaks, known, timeline, mask, options)
    return RankSummary(
        path=ev.path,
        rank=ev.rank,
        world_size=ev.world_size,
        device_name=str(ev.device_properties[0].get("name", "")) if ev.device_properties else "",
        identified=found,
        spec=spec,
        source=source,
        peaks=peaks,
        known=known,
        has_gpu=has_gpu,
        warnings=tuple(ev.warnings),
        timeline=timeline,
        groups=groups,
        coverage=tuple(to.coverage(ev, kernel_mask=mask, causal=options.causal)),
        syncs=tuple(to.host_syncs(ev)),
        calls=tuple(_collective_calls(ev, mask, position_rank)),
        records=cross_rank.collective_records(ev, mask),
        kernel_values=values,
        kernel_counts=counts,
        cpu_ops={} if has_gpu else cpu_op_times(ev),
        what_if=whatif,
        kernel_totals=kernel_totals(ev, mask, options.causal),
        is_capture=tcap.is_capture(ev),
        graph_launches=len(tcap.replays(ev)),
        idle_causes=idle,
        events=ev if options.keep_events else None,
        replay=replayed if options.keep_events else None,
        mask=mask if options.keep_events else None,
        joint=rank_input(ev, replayed.graph, mask) if options.joint_replay and replayed is not None else None,
    )


def _replayed_what_ifs(
    ev: TraceEvents,
    rr: Any,
    found: tuple[WhatIf, ...],
    groups: tuple[OpGroup, ...],
    peaks: Peaks,
    known: bool,
    timeline: RankTrace,
    mask: np.ndarray,
    options: RankOptions,
) -> tuple[tuple[WhatIf, ...], tuple[IdleCause, ...]]:
    """The rank's what-ifs with their replayed figures (:mod:`.whatif_replay`), then the ones
    asked for (``--what-if`` edits, ``--kernels-from``), and its idle time by cause."""
    from infer_opt.trace.analyze import _NEED_PEAKS

    edits, other = options.what_if_edits, options.kernels_from
    if rr is None or not timeline.steps:
        if edits or other is not None:
            option, value = ("--what-if", edits[0]) if edits else ("--kernels-from", str(other))
            raise InvalidInput(option, value, "needs the replay of GPU events (not with --hta-compat)")
        return found, ()
    found = found if known else tuple(w for w in found if w.scenario not in _NEED_PEAKS)
    found = twr.replayed_what_ifs(
        ev, rr, found, groups, peaks, timeline.steps, mask,
        steps=options.steps, causal=options.causal, matmul_peak_fraction=options.matmul_peak_fraction,
    )  # fmt: skip
    return found + _asked(ev, rr, timeline, mask, options), trc.idle_causes(rr.bounds)


def _asked(ev: TraceEvents, rr: Any, timeline: RankTrace, mask: np.ndarray, options: RankOptions) -> tuple:
    """The what-ifs the user asked for: ``--what-if`` edits, then ``--kernels-from``."""
    from infer_opt.trace.kernels_from import kernels_from_what_if
    from infer_opt.trace.reader import read_trace
    from infer_opt.trace.user_edits import user_what_if

    steps, causal = options.steps, options.causal
    out = tuple(
        user_what_if(ev, rr, e, timeline.steps, mask, steps=steps, causal=causal)
        for e in options.what_if_edits
    )
    if options.kernels_from is not None:
        theirs = read_trace(options.kernels_from)
        out += (
            kernels_from_what_if(
                ev, rr, theirs, tt.analyzed_mask(theirs), timeline.steps, mask, steps=steps, causal=causal
            ),
        )
    return out


def summarize(path: str, options: RankOptions) -> RankSummary | RankFailure:
    """Read one rank and analyse it; a file that cannot be read is a :class:`RankFailure`
    (bad options, e.g. ``--steps`` outside the rank's steps, still raise)."""
    from infer_opt.trace.reader import read_trace

    try:
        ev = read_trace(path)
    except (InvalidInput, OSError, ValueError, MemoryError) as exc:
        return RankFailure(str(path), str(exc) or type(exc).__name__, exc)
    return summarize_events(ev, options)


def _done(progress: Progress | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total)


def _local(
    files: Sequence[str],
    options: RankOptions,
    workers: int | None,
    progress: Progress | None,
    task: Any,
    consume: Callable[[Any], Any],
) -> list[RankSummary | RankFailure]:
    if len(files) == 1 or workers == 1:
        out = []
        for i, f in enumerate(files):
            out.append(consume(task(f, options)))
            _done(progress, i + 1, len(files))
        return out
    found: list[RankSummary | RankFailure | None] = [None] * len(files)
    with ProcessPoolExecutor(max_workers=min(len(files), workers or os.cpu_count() or 1)) as pool:
        futures = {pool.submit(task, f, options): i for i, f in enumerate(files)}
        for done, future in enumerate(as_completed(futures), 1):
            i = futures[future]
            try:
                found[i] = consume(future.result())
            except BrokenProcessPool:
                found[i] = RankFailure(files[i], "its worker process died")
            _done(progress, done, len(files))
    return [f for f in found if f is not None]


def connect(address: str) -> Any:
    """A Dask client on ``address``; one line (``--scheduler``) when none answers in time."""
    try:
        from distributed import Client
    except ImportError:
        raise InvalidInput("--scheduler", address, "needs Dask: pip install 'infer-opt[dask]'") from None
    try:
        return Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidInput(
            "--scheduler", address, f"no Dask scheduler answered within {CONNECT_TIMEOUT_S:g} s ({why})"
        ) from None


def _dask(
    files: Sequence[str],
    options: RankOptions,
    scheduler: Any,
    progress: Progress | None,
    task: Any,
    consume: Callable[[Any], Any],
) -> list[RankSummary | RankFailure]:
    """The map on a Dask cluster. Ranks lost with a worker that died are tried again one at a
    time (a worker holds several ranks at once): the one that fails again is named, the rest kept."""
    from distributed import as_completed as dask_completed

    client = connect(scheduler) if isinstance(scheduler, str) else scheduler
    try:
        futures = client.map(task, list(files), options=options, pure=False)
        joints: list[Any] = []
        if options.joint_replay and not isinstance(scheduler, str):
            # each rank's graph stays on the worker that made it, for the joint replay's rounds
            # (straggler_replay.Ranks): the driver gets the summary without it
            joints = client.map(_joint_part, futures, pure=False)
            futures = client.map(_without_joint, futures, pure=False)
        where = {f.key: i for i, f in enumerate(futures)}
        arriving = dask_completed(futures)
        del futures  # a result stays in its worker's memory while a future holds it
        found: list[RankSummary | RankFailure | None] = [None] * len(files)
        lost = []
        for done, future in enumerate(arriving, 1):
            i = where[future.key]
            outcome = _outcome(future, files[i])
            if joints and isinstance(outcome, RankSummary) and outcome.joint == REMOTE:
                outcome = replace(outcome, joint=joints[i])
            found[i] = consume(outcome)
            future.release()
            if isinstance(found[i], _Lost):
                lost.append(i)
            else:
                _done(progress, done - len(lost), len(files))
        for i in sorted(lost):
            found[i] = consume(_outcome(client.submit(task, files[i], options=options, pure=False), files[i]))
            _done(progress, len(files) - len(lost) + sorted(lost).index(i) + 1, len(files))
    finally:
        if isinstance(scheduler, str):
            client.close()
    return [f for f in found if f is not None]


def _joint_part(found: RankSummary | RankFailure) -> Any:
    """On the worker: a summary's graph for the joint replay (None for a failure)."""
    return found.joint if isinstance(found, RankSummary) else None


#: a summary's ``joint`` while its graph is on the worker that made it
REMOTE = "on its worker"


def _without_joint(found: RankSummary | RankFailure) -> RankSummary | RankFailure:
    """On the worker: the summary without its graph, which stays there (:data:`REMOTE`)."""
    if isinstance(found, RankSummary) and found.joint is not None:
        return replace(found, joint=REMOTE)
    return found


class _Lost(RankFailure):
    """A rank whose task raised on the cluster (its worker died), not one that could not be read."""


def _outcome(future: Any, path: str) -> RankSummary | RankFailure:
    try:
        return future.result()
    except InvalidInput:
        raise
    except Exception as exc:  # a worker that died (KilledWorker) or was lost: this rank only
        return _Lost(path, f"on the cluster: {type(exc).__name__}: {exc}")


def map_ranks(
    files: Sequence[str | os.PathLike[str]],
    options: RankOptions,
    *,
    scheduler: Any | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    task: Callable[[str, RankOptions], RankSummary | RankFailure] = summarize,
    consume: Callable[[Any], Any] | None = None,
) -> list[RankSummary | RankFailure]:
    """Every file summarized, in the order given. ``scheduler``: a Dask address or Client;
    ``task``: the map's body (:func:`summarize`; another only in tests); ``consume``: each
    outcome as it arrives (the running reduce, :meth:`.fold.RankFold.take`), what it returns kept."""
    consume = consume or (lambda found: found)
    paths = (
        [os.path.abspath(os.fspath(f)) for f in files]
        if scheduler is not None
        else [os.fspath(f) for f in files]
    )
    if scheduler is not None:
        return _dask(paths, options, scheduler, progress, task, consume)
    return _local(paths, options, workers, progress, task, consume)


def reanalysed(
    summaries: Sequence[RankSummary], options: RankOptions, spec: td.DeviceSpec | None, **how: Any
) -> list[RankSummary]:
    """The ranks analysed with another device than ``spec``, analysed again with it."""
    redo = [i for i, s in enumerate(summaries) if s.has_gpu and _name(s.spec) != _name(spec)]
    if not redo:
        return list(summaries)
    again = map_ranks([summaries[i].path for i in redo], replace(options, spec=spec, forced=True), **how)
    out = list(summaries)
    for i, s in zip(redo, again, strict=True):
        if isinstance(s, RankSummary):
            out[i] = replace(s, source=summaries[i].source, identified=summaries[i].identified)
    return out


def _name(spec: td.DeviceSpec | None) -> str | None:
    return spec.name if spec is not None else None


def scheduler_address(given: str | None) -> str | None:
    """``--scheduler``, else ``$INFER_OPT_SCHEDULER``, else None (the local pool)."""
    return given or os.environ.get(SCHEDULER_ENV) or None


def failed_notices(failures: Sequence[RankFailure]) -> list[Notice]:
    return [
        Notice("trace_rank_failed", {"file": os.path.basename(f.path), "error": f.error}) for f in failures
    ]


__all__ = [
    "SCHEDULER_ENV",
    "RankFailure",
    "RankOptions",
    "RankSummary",
    "connect",
    "identify",
    "map_ranks",
    "scheduler_address",
    "summarize",
]
