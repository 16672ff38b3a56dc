"""Two or more ranks replayed jointly: a collective's kernel cannot finish before the last peer's
matching kernel has started (pure; numpy only).

**Matching.** Each rank's collective kernels in its analyzed windows, in start order, keyed as
:func:`.cross_rank.match` keys them: (process group, collective, position among the rank's
calls of that group and collective). A key found on two or more ranks is one collective.

**Not one collective.** A match whose measured kernel on some rank *ended* before the last
peer's started (by more than ``TOLERANCE_US``) cannot be one collective — the kernels met other
peers (a ``send_recv`` of a pipeline to a third rank, a rank of the job not in the folder) or the
ranks' clocks disagree: it is left out of the joint constraint and counted in ``inconsistent``
(each rank keeps its own measured wait in that kernel), never silently.

**Transfer.** From the durations given (the measured ones unless edited): a member's transfer
is its duration less its measured wait for the last peer (``last peer start − own start``,
clipped at 0), clipped at 0 — the time it spent after every peer had arrived.

**The joint replay.** Each rank's graph (:mod:`.graph`) is replayed (:mod:`.replay`) with every
collective kernel's duration set to ``wait + transfer``, the wait starting at 0; then each
member's wait becomes ``max(0, last peer's replayed start − its own replayed start)``, and the
ranks are replayed again, until no wait moves by more than ``TOLERANCE_US`` (a fixed point:
every collective ends at ``max(own start, last peer's start) + transfer``) or ``MAX_ITERATIONS``
passes (``converged`` False: said, never hidden). Unedited, the fixed point is the trace: each
kernel's measured end. Rank clocks are taken as comparable (as :mod:`.cross_rank` does).

**What a rank brings** (:class:`RankInput`, built in the map): its graph, its collective
kernels' keys and its analyzed windows (number, GPU events, GPU and CPU bounds) — arrays, not
the events. :func:`replay_ranks` replays them all here; :func:`fixed_point` takes the rounds'
replays as a function, so that :mod:`.straggler_replay` can run each rank's where its input is
(a Dask worker): matching needs only each rank's :class:`CollectiveSummary`, a round only each
member's duration out and replayed start back.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from infer_opt.trace import collectives as tc
from infer_opt.trace import timeline as tt
from infer_opt.trace.events import TraceEvents
from infer_opt.trace.graph import RankGraph, build_graph
from infer_opt.trace.replay import Replayed, replay

MAX_ITERATIONS = 50
TOLERANCE_US = 1e-6
#: a member may end this much before the last peer's start (clock rounding) and still match
MATCH_SLACK_US = 1.0


@dataclass(frozen=True)
class Member:
    """One rank's kernel of a matched collective."""

    rank: int
    gpu: int  # index into that rank's ``TraceEvents.gpu``
    transfer_us: float


@dataclass(frozen=True)
class Collective:
    group: str
    name: str
    index: int  # position among each rank's calls of (group, name)
    members: tuple[Member, ...]


@dataclass(frozen=True, eq=False)
class RankInput:
    """What the joint replay needs of one rank (module docstring)."""

    graph: RankGraph
    collectives: list[tuple[tuple[str, str, int], int]]  # collective_events()
    windows: list[tuple[int | None, np.ndarray, float, float, float, float]]  # number, GPU events,
    # GPU lo/hi, CPU lo/hi (the ProfilerStep's CPU range; ±inf for a trace without steps)

    def gpu_obs_us(self) -> tuple[np.ndarray, np.ndarray]:
        """The GPU events' observed starts and ends, trace time."""
        g, h = self.graph, self.graph.n_host
        start = g.start[h:] + g.t0_us
        return start, start + g.dur[h:]


def rank_input(ev: TraceEvents, graph: RankGraph | None = None, mask: np.ndarray | None = None) -> RankInput:
    """One rank's :class:`RankInput`; ``mask``: the collectives' GPU events (every one by default)."""
    windows = []
    cpu = {s.number: (s.cpu_start_us, s.cpu_end_us) for s in ev.steps}
    for number, m, lo, hi in tt._windows(ev, None)[0]:
        c_lo, c_hi = cpu.get(number, (-np.inf, np.inf))
        windows.append((number, np.flatnonzero(m).astype(np.int32), lo, hi, c_lo, c_hi))
    return RankInput(graph if graph is not None else build_graph(ev), collective_events(ev, mask), windows)


@dataclass(frozen=True, eq=False)
class JointReplay:
    """Each rank's replay at the fixed point, and each member's wait for its last peer (µs)."""

    replays: dict[int, Replayed]
    collectives: tuple[Collective, ...]
    waits_us: dict[tuple[int, int], float]  # (rank, gpu index) -> replayed wait
    iterations: int
    converged: bool
    inconsistent: int = 0  # matches left out: a member ended before the last peer started

    def gpu_times_us(self, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """``rank``'s GPU events' replayed starts and ends, trace time."""
        rep = self.replays[rank]
        return rep.gpu_start_us(), rep.gpu_end_us()


def collective_events(
    ev: TraceEvents, mask: np.ndarray | None = None
) -> list[tuple[tuple[str, str, int], int]]:
    """The rank's collective kernels in start order: ((group, collective, position), gpu index)."""
    g = ev.gpu
    mask = np.ones(len(g), dtype=bool) if mask is None else mask
    comm = np.flatnonzero(mask & (tt.classify(ev) == tt.COMM))
    seen: dict[tuple[str, str], int] = defaultdict(int)
    out = []
    for j in comm[np.argsort(g.ts_us[comm], kind="stable")].tolist():
        call = tc.collective_call(ev.name_of(g.name[j]), g.args[j], 0, float(g.ts_us[j]), float(g.dur_us[j]))
        if call is None:
            continue
        group = str(g.args[j].get("Process Group Name", ""))
        key = (group, call.collective)
        out.append(((*key, seen[key]), j))
        seen[key] += 1
    return out


@dataclass(frozen=True)
class CollectiveSummary:
    """What matching needs of one rank's collective kernels (small: it crosses the cluster):
    their keys and, per kernel (GPU event index), its measured start and end and its duration
    to replay with (µs)."""

    keys: list[tuple[tuple[str, str, int], int]]
    start_us: dict[int, float]
    end_us: dict[int, float]
    dur_us: dict[int, float]


def collective_summary(inp: RankInput, dur: np.ndarray | None = None) -> CollectiveSummary:
    """``inp``'s :class:`CollectiveSummary`, its durations ``dur`` (the graph's by default)."""
    s_obs, e_obs = inp.gpu_obs_us()
    dur = inp.graph.dur if dur is None else dur
    h = inp.graph.n_host
    js = [j for _, j in inp.collectives]
    return CollectiveSummary(
        list(inp.collectives), {j: float(s_obs[j]) for j in js}, {j: float(e_obs[j]) for j in js},
        {j: float(dur[h + j]) for j in js},
    )  # fmt: skip


def match_summaries(summaries: Mapping[int, CollectiveSummary]) -> tuple[tuple[Collective, ...], int]:
    """The collectives on two or more ranks, each member with its transfer, and how many matches
    were left out as not one collective (module docstring)."""
    found: dict[tuple[str, str, int], list[tuple[int, int]]] = defaultdict(list)
    for rank in sorted(summaries):
        for key, j in summaries[rank].keys:
            found[key].append((rank, j))
    out = []
    inconsistent = 0
    for (group, name, index), calls in found.items():
        if len(calls) < 2:
            continue
        starts = [summaries[r].start_us[j] for r, j in calls]
        last = max(starts)
        if min(summaries[r].end_us[j] for r, j in calls) < last - MATCH_SLACK_US:
            inconsistent += 1
            continue
        members = []
        for (r, j), s in zip(calls, starts, strict=True):
            members.append(Member(r, j, max(summaries[r].dur_us[j] - (last - s), 0.0)))
        out.append(Collective(group, name, index, tuple(members)))
    return tuple(out), inconsistent


def match_collectives(
    inputs: Mapping[int, RankInput], durs: Mapping[int, np.ndarray]
) -> tuple[tuple[Collective, ...], int]:
    """:func:`match_summaries` of the ranks' inputs, with their durations ``durs``."""
    return match_summaries({r: collective_summary(inputs[r], durs[r]) for r in inputs})


#: per rank, its matched collective kernels (GPU event index) -> the duration to replay them with
Assign = dict[int, dict[int, float]]


def fixed_point(
    colls: tuple[Collective, ...],
    starts: Callable[[Assign], Mapping[int, Mapping[int, float]]],
    max_iterations: int = MAX_ITERATIONS,
) -> tuple[Assign, dict[tuple[int, int], float], int, bool]:
    """The collectives' waits iterated to their fixed point (module docstring): ``starts``
    replays the ranks with each member's duration ``wait + transfer`` and gives back each
    member's replayed start (wherever the ranks are: here, or on a cluster's workers). Returns
    the durations of the last replay, the waits, the iterations and whether they converged."""
    waits = {(m.rank, m.gpu): 0.0 for c in colls for m in c.members}
    own: dict[int, list[Member]] = defaultdict(list)
    for c in colls:
        for m in c.members:
            own[m.rank].append(m)
    assign: Assign = {}
    converged = False
    iterations = 0
    while iterations < max_iterations:
        iterations += 1
        assign = {r: {m.gpu: waits[(r, m.gpu)] + m.transfer_us for m in ms} for r, ms in own.items()}
        got = starts(assign)
        moved = 0.0
        for c in colls:
            times = [float(got[m.rank][m.gpu]) for m in c.members]
            last = max(times)
            for m, t in zip(c.members, times, strict=True):
                new = max(0.0, last - t)
                moved = max(moved, abs(new - waits[(m.rank, m.gpu)]))
                waits[(m.rank, m.gpu)] = new
        if moved <= TOLERANCE_US:
            converged = True
            break
    return assign, waits, iterations, converged


def replay_assigned(
    graph: RankGraph, dur: np.ndarray, assign: Mapping[int, float], l2: np.ndarray | None = None
) -> Replayed:
    """``graph`` replayed with durations ``dur``, its collective kernels' set to ``assign``."""
    dur = dur.copy()
    for j, d in assign.items():
        dur[graph.n_host + j] = d
    return replay(graph, dur=dur, l2=l2)


def starts_of(rep: Replayed, gpus: Mapping[int, float]) -> dict[int, float]:
    """The replayed starts (µs) of the GPU events ``gpus`` names."""
    idx = list(gpus)
    return dict(zip(idx, rep.gpu_start_us()[idx].tolist(), strict=True))


def replay_ranks(
    events: Mapping[int, TraceEvents | RankInput],
    *,
    durs: Mapping[int, np.ndarray] | None = None,
    l2s: Mapping[int, np.ndarray] | None = None,
    graphs: Mapping[int, RankGraph] | None = None,
    masks: Mapping[int, np.ndarray] | None = None,
    max_iterations: int = MAX_ITERATIONS,
) -> JointReplay:
    """The ranks (their events, or :class:`RankInput` s) replayed jointly to a fixed point of
    their collectives' waits (module docstring), here; ``durs``, ``l2s``: each rank's (edited)
    node durations and end-referenced lags (host work between calls), its graph's by default."""
    inputs = {
        r: e if isinstance(e, RankInput)
        else rank_input(e, (graphs or {}).get(r), None if masks is None else masks.get(r))
        for r, e in events.items()
    }  # fmt: skip
    graphs = {r: inp.graph for r, inp in inputs.items()}
    base = {r: (durs[r] if durs is not None and r in durs else graphs[r].dur).copy() for r in inputs}
    colls, inconsistent = match_collectives(inputs, base)
    replays: dict[int, Replayed] = {}

    def starts(assign: Assign) -> dict[int, dict[int, float]]:
        for r, g in graphs.items():
            replays[r] = replay_assigned(g, base[r], assign.get(r, {}), None if l2s is None else l2s.get(r))
        return {r: starts_of(replays[r], a) for r, a in assign.items()}

    _, waits, iterations, converged = fixed_point(colls, starts, max_iterations)
    return JointReplay(replays, colls, waits, iterations, converged, inconsistent)


__all__ = ["MAX_ITERATIONS", "Assign", "Collective", "CollectiveSummary", "JointReplay", "Member",
           "RankInput", "collective_events", "collective_summary", "fixed_point", "match_collectives",
           "match_summaries", "rank_input", "replay_assigned", "replay_ranks", "starts_of"]  # fmt: skip
