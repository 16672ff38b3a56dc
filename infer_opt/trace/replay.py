"""Replay a rank's dependency graph (:mod:`.graph`) with (possibly edited) durations and lags.

One pass over ``RankGraph.points`` (observed time order, which is a topological order of the
graph): a node starts at the latest of its terms — its anchor, its start-referenced predecessor's
start plus ``l1``, its end-referenced predecessor's end plus ``l2`` — and ends ``dur`` later;
a sync ends at ``max(start + base, waited end + wake)``. Unedited, every event gets its own
timestamps back (the graph's lags make the observed edge bind). Max-plus is monotone and
1-Lipschitz: a kernel made faster never makes anything later, and a saving of Δ in durations
never shortens a step by more than Δ.

A step's replayed span is its measured span (the ``ProfilerStep``'s GPU window, as
:mod:`.timeline` defines it) plus the change in the extent of its GPU events (first start to
last end), so the unedited replay gives each step's span back and an edit moves it by what it
moves the step's events; the window never starts before the previous step's replayed end (less
their measured overlap). Pure: numpy and the standard library.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from infer_opt.trace import timeline as tt
from infer_opt.trace.events import TraceEvents
from infer_opt.trace.graph import RankGraph


@dataclass(frozen=True, eq=False)
class Replayed:
    """Every node's replayed start and end (µs, relative to ``graph.t0_us``)."""

    graph: RankGraph
    start: np.ndarray
    end: np.ndarray
    dur: np.ndarray  # the durations replayed (edited or observed)

    def gpu_start_us(self) -> np.ndarray:
        """The GPU events' replayed starts in the trace's own time."""
        return self.start[self.graph.n_host :] + self.graph.t0_us

    def gpu_end_us(self) -> np.ndarray:
        return self.end[self.graph.n_host :] + self.graph.t0_us


@dataclass(frozen=True)
class StepReplay:
    """One analyzed window: its measured and replayed span (s)."""

    step: int | None
    measured_s: float
    replayed_s: float
    lo_us: float  # replayed window (trace time)
    hi_us: float

    @property
    def error(self) -> float:
        return abs(self.replayed_s - self.measured_s) / self.measured_s if self.measured_s > 0 else 0.0


def replay(
    graph: RankGraph,
    *,
    dur: np.ndarray | None = None,
    l1: np.ndarray | None = None,
    l2: np.ndarray | None = None,
    base: np.ndarray | None = None,
    waits: dict[int, tuple[tuple[int, float], ...]] | None = None,
    since: Replayed | None = None,
) -> Replayed:
    """Start and end of every node from the graph and the given (edited) durations and lags;
    ``since``: the unedited replay, whose times stand for every point before the first one an
    edit touches (nothing before it can move)."""
    du = graph.dur if dur is None else dur
    ins = [x if x is not None else d for x, d in ((l1, graph.l1), (l2, graph.l2), (base, graph.base))]
    first = 0 if since is None else _first_changed(graph, du, *ins, waits)
    st, en = _pass(
        graph,
        du.tolist(),
        *(x.tolist() for x in ins),
        graph.waits if waits is None else waits,
        first,
        since,
    )
    start, end = np.array(st), np.array(en)
    _mirrors(graph, start, end)
    return Replayed(graph, start, end, du)


#: each graph's columns as lists and its points' positions (the pass reads them every replay)
_LISTS: weakref.WeakKeyDictionary[RankGraph, tuple] = weakref.WeakKeyDictionary()


def _lists(graph: RankGraph) -> tuple:
    found = _LISTS.get(graph)
    if found is None:
        points = np.array(graph.points, dtype=np.int64)
        pos = np.full(graph.n, len(graph.points), dtype=np.int64)
        starts = np.flatnonzero(points >= 0)
        pos[points[starts]] = starts
        found = _LISTS[graph] = (
            graph.anchor.tolist(),
            graph.a1.tolist(),
            graph.a2.tolist(),
            graph.is_sync.tolist(),
            pos,
        )
    return found


def _first_changed(
    graph: RankGraph, dur: np.ndarray, l1: np.ndarray, l2: np.ndarray, base: np.ndarray, waits: dict | None
) -> int:
    """The first point (position in ``graph.points``) whose node an edit touches."""
    changed = (dur != graph.dur) | (l1 != graph.l1) | (l2 != graph.l2) | (base != graph.base)
    nodes = np.flatnonzero(changed).tolist()
    if waits is not None:
        nodes += [k for k, v in waits.items() if graph.waits.get(k) != v]
    pos = _lists(graph)[4]
    return int(pos[nodes].min()) if nodes else len(graph.points)


def _pass(
    graph: RankGraph, du: list, l1: list, l2: list, base: list, waits: dict, first: int = 0, since=None
) -> tuple[list[float], list[float]]:
    n = graph.n
    anchor, a1, a2, sync, _ = _lists(graph)
    if since is not None and first > 0:
        st, en = since.start.tolist(), since.end.tolist()
    else:
        st, en, first = [0.0] * n, [-math.inf] * n, 0
    for p in graph.points[first:] if first else graph.points:
        if p >= 0:
            t = anchor[p]
            a = a1[p]
            if a >= 0:
                v = st[a] + l1[p]
                if v > t:
                    t = v
            a = a2[p]
            if a >= 0:
                v = en[a] + l2[p]
                if v > t:
                    t = v
            st[p] = t
            if not sync[p]:
                en[p] = t + du[p]
        else:
            p = ~p
            t = st[p] + base[p]
            for w, lag in waits[p]:
                v = en[w] + lag
                if v > t:
                    t = v
            en[p] = t
    return st, en


def _mirrors(graph: RankGraph, start: np.ndarray, end: np.ndarray) -> None:
    """Host-side sync records follow their call: the same offsets from its start and end."""
    h_n = graph.n_host
    m = np.flatnonzero(graph.mirror >= 0)
    if m.size:
        h, nodes = graph.mirror[m], m + h_n
        s_obs, e_obs = graph.start[nodes], graph.start[nodes] + graph.dur[nodes]
        start[nodes] = start[h] + (s_obs - graph.start[h])
        end[nodes] = end[h] - (graph.start[h] + graph.dur[h] - e_obs)


def step_replays(
    events: TraceEvents, graph: RankGraph, rep: Replayed, steps: tuple[int, int] | None = None
) -> list[StepReplay]:
    """Each analyzed window's measured and replayed span (module docstring). A step's replayed
    window starts no earlier than the previous step's replayed end (less their measured overlap,
    if any): an edit that lets a step's first event run early, while the device still works on
    the previous step, does not make that step longer."""
    windows, _ = tt._windows(events, None)
    return window_replays(windows, events.gpu.ts_us, events.gpu.ts_us + events.gpu.dur_us, rep, steps)


def window_replays(
    windows: list, s_obs: np.ndarray, e_obs: np.ndarray, rep: Replayed, steps: tuple[int, int] | None = None
) -> list[StepReplay]:
    """:func:`step_replays` from the windows (``timeline._windows``: number, its GPU events, lo,
    hi) and the GPU events' observed starts and ends, without the events."""
    s_rep, e_rep = rep.gpu_start_us(), rep.gpu_end_us()
    out = []
    prev: tuple[float, float] | None = None  # the previous window's (measured, replayed) last end
    for number, mask, lo, hi in windows:
        first, last = float(s_obs[mask].min()), float(e_obs[mask].max())
        r_lo, r_hi = float(s_rep[mask].min()), float(e_rep[mask].max())
        if prev is not None:  # never past the step's own replayed end
            r_lo = min(max(r_lo, prev[1] + min(0.0, first - prev[0])), r_hi)
        prev = (last, r_hi)
        if steps is not None and not (number is not None and steps[0] <= number <= steps[1]):
            continue
        span = (hi - lo) + ((r_hi - r_lo) - (last - first))
        w_lo = r_lo - (first - lo)
        out.append(StepReplay(number, (hi - lo) * 1e-6, span * 1e-6, w_lo, w_lo + span))
    return out


@dataclass(frozen=True, eq=False)
class RankReplay:
    """One rank's graph, its unedited replay and each analyzed window's bound."""

    graph: RankGraph
    replayed: Replayed
    bounds: list  # critical.StepBound per analyzed window


def replay_rank(
    events: TraceEvents, *, steps: tuple[int, int] | None = None, causal: str = "half"
) -> RankReplay:
    """Build, replay unedited, and find what bounds each window (:mod:`.critical`)."""
    from infer_opt.trace.critical import step_bounds
    from infer_opt.trace.graph import build_graph

    graph = build_graph(events)
    rep = replay(graph)
    return RankReplay(graph, rep, step_bounds(events, rep, steps=steps, causal=causal))


__all__ = ["RankReplay", "Replayed", "StepReplay", "replay", "replay_rank", "step_replays", "window_replays"]
