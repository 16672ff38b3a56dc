"""What bounds each step: its critical path and the causes of its idle time (pure; numpy only).

**Critical path.** From the step's last-ending GPU event, walk back along the term that set each
start (the max-plus argmax of the replay, :mod:`.replay`) down to the step's start, adding each
piece of time to its cause:

- ``host``: measured host work between two calls on a thread (framework, Python), a call's
  offset in its parent, and the time before the walk's first anchored event;
- ``launch``: a launch call to its GPU event's start (the call and the launch latency), and the
  device-side gap between two events of one stream;
- ``kernel``: a compute kernel's time (``kernels`` splits it by category: ``matmul``,
  ``attention``, ... from the op's family where :mod:`.ops` has one, else ``other``);
- ``memcpy`` (memcpy and memset), ``comm`` (collective kernels);
- ``sync_wait``: a sync's own cost or its wake after the work it waited for, and a stream's
  wait on another (``Stream Wait Event``).

The pieces telescope: they sum to the step's replayed span exactly. A step is ``host``-bound
when the host's causes (``host``, ``launch``, ``sync_wait``) hold most of the path, else
``device``-bound; ``bound_share`` says by how much.

**Idle time.** Each interval in which no GPU event of the step runs (from the window's start to
the first event, and between events) is charged to what the next GPU event waited for: its
launch (``late launch``), a host sync the launching thread sat in just before (``host sync:
cudaStreamSynchronize in aten::item`` — the cpu_op it sat in, past scalar-read plumbing), a
stream waiting on another (``cross-stream wait``), its stream (``stream gap``) or nothing the
trace links (``unlinked``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace

import numpy as np

from infer_opt.notices import Notice
from infer_opt.results.trace import IdleCause, RankTrace
from infer_opt.trace import timeline as tt
from infer_opt.trace.events import TraceEvents
from infer_opt.trace.graph import RankGraph
from infer_opt.trace.ops import _meaningful_parent, attribute, category
from infer_opt.trace.replay import Replayed

CAUSES = ("host", "launch", "kernel", "memcpy", "sync_wait", "comm")
HOST_SIDE = ("host", "launch", "sync_wait")


@dataclass(frozen=True)
class StepBound:
    """One step's critical path (seconds by cause, summing to ``span_s``) and idle causes."""

    step: int | None
    span_s: float  # the replayed span the causes sum to
    causes: dict[str, float]  # CAUSES -> s
    kernels: dict[str, float]  # kernel time on the path by category
    bound: str  # host / device
    bound_share: float  # the bounding side's share of the path
    idle: dict[str, float] = field(default_factory=dict)  # idle cause -> s


class _Labels:
    """Each node's cause when the path runs through it."""

    def __init__(self, events: TraceEvents, graph: RankGraph, causal: str = "half") -> None:
        self.events, self.graph = events, graph
        cls = tt.classify(events)
        att = attribute(events, None, causal)
        fam: list[str] = []
        for op in att.owner.tolist():
            c = att.costs.get(op) if op >= 0 else None
            f = category(getattr(c, "family", "")) if c is not None else ""
            fam.append(f or "other")
        self.family = fam
        self.cls = cls.tolist()
        self.h_n = graph.n_host

    def node(self, i: int) -> tuple[str, str]:
        """(cause, kernel category or '') of a node's own time."""
        if i < self.h_n:
            return ("sync_wait", "") if self.graph.is_sync[i] else ("launch", "")
        j = i - self.h_n
        c = self.cls[j]
        if c == tt.COMM:
            return "comm", ""
        if c == tt.MEMORY:
            return "memcpy", ""
        if c == tt.WAIT:
            return "sync_wait", ""
        return "kernel", self.family[j]


class _Walk:
    """A replay as plain lists, and which term set each node's start (``via``: 0 its anchor,
    1 its start-referenced predecessor, 2 its end-referenced one; at a tie the one the trace
    itself showed binding), for walks back along the path."""

    def __init__(self, rep: Replayed, l1: np.ndarray, l2: np.ndarray) -> None:
        g = rep.graph
        self.graph, self.n_host = g, g.n_host
        t = rep.start
        with np.errstate(invalid="ignore"):
            v1 = np.where(g.a1 >= 0, rep.start[np.maximum(g.a1, 0)] + l1, -np.inf)
            v2 = np.where(g.a2 >= 0, rep.end[np.maximum(g.a2, 0)] + l2, -np.inf)
        hits = np.stack([np.isfinite(g.anchor) & (g.anchor >= t), v1 >= t, v2 >= t])
        first = np.where(hits.any(axis=0), np.argmax(hits, axis=0), 0)
        pref_hit = hits[g.preferred.astype(np.int64), np.arange(t.size)]
        self.via = np.where(pref_hit, g.preferred, first).tolist()
        self.start, self.end = rep.start.tolist(), rep.end.tolist()
        self.a1, self.a2 = g.a1.tolist(), g.a2.tolist()
        self.is_sync = g.is_sync.tolist()

    def waited(self, i: int) -> int:
        """The waited node that set sync ``i``'s end (-1: its own cost did, or not a sync)."""
        if not self.is_sync[i]:
            return -1
        end = self.end[i]
        if self.start[i] + self.graph.base[i] >= end:
            return -1
        for w, lag in self.graph.waits[i]:
            if self.end[w] + lag >= end:
                return w
        return -1


def critical_path(
    labels: _Labels, walk: _Walk, last: int, w_lo: float, w_hi: float
) -> tuple[dict[str, float], dict[str, float]]:
    """Seconds by cause on the path from node ``last`` back to ``w_lo`` (µs, relative), and the
    kernel seconds by category; they sum to ``w_hi − w_lo``."""
    causes = dict.fromkeys(CAUSES, 0.0)
    kernels: dict[str, float] = {}
    t = w_hi
    start, end, h_n = walk.start, walk.end, walk.n_host

    def add(cause: str, to: float, kind: str = "") -> bool:
        nonlocal t
        stop = to <= w_lo
        to = max(to, w_lo)
        causes[cause] += t - to
        if kind:
            kernels[kind] = kernels.get(kind, 0.0) + (t - to)
        t = to
        return stop

    add("host", end[last])  # a window that ends after its last event
    i, seen = last, 0
    while seen <= walk.graph.n:
        seen += 1
        cause, kind = labels.node(i)
        waited = walk.waited(i)
        if waited >= 0:  # a sync that woke after the work it waited for
            if add("sync_wait", end[waited]):
                break
            i = waited
            continue
        if add(cause, start[i], kind):
            break
        via = walk.via[i]
        if via == 0:
            add("host", w_lo)
            break
        if via == 1:
            p = walk.a1[i]
            if add("launch" if i >= h_n else "host", start[p]):
                break
            i = _at_start(walk, p, add)
            if i < 0:
                break
            continue
        p = walk.a2[i]
        if add("host" if i < h_n else "launch", end[p]):
            break
        i = p
    return {k: v * 1e-6 for k, v in causes.items()}, {k: v * 1e-6 for k, v in kernels.items()}


def _at_start(walk: _Walk, p: int, add) -> int:
    """The path reached host call ``p``'s start: follow what set it to the end of a node (the
    next node to walk through), or -1 when the walk is done."""
    while True:
        via = walk.via[p]
        if via == 0:
            add("host", -math.inf)
            return -1
        if via == 1:
            q = walk.a1[p]
            if add("host", walk.start[q]):
                return -1
            p = q
            continue
        q = walk.a2[p]
        if add("host", walk.end[q]):
            return -1
        return q


def _bound(causes: dict[str, float]) -> tuple[str, float]:
    total = math.fsum(causes.values())
    host = math.fsum(causes[k] for k in HOST_SIDE)
    if total <= 0:
        return "device", 0.0
    share = min(1.0, max(host, total - host) / total)  # rounding: never above 1
    return ("host", share) if host > total - host else ("device", share)


def _idle_cause(labels: _Labels, walk: _Walk, j: int, since: float) -> str:
    """What GPU event ``j`` (a node), starting after an idle interval from ``since``, waited for."""
    graph, ev = labels.graph, labels.events
    via = walk.via[j]
    if via == 2:
        p = walk.a2[j]
        return "cross-stream wait" if labels.node(p)[0] == "sync_wait" else "stream gap"
    if via == 0:
        launch = int(ev.gpu.launch[j - graph.n_host])
        return "launched before the trace window" if launch == -2 else "unlinked"
    h, steps = walk.a1[j], 0
    tol = graph.typical.get("wake", 0.0) + 1.0
    start, end = walk.start, walk.end
    while 0 <= h < walk.n_host and end[h] > since - tol and steps < 10_000:
        steps += 1
        if walk.is_sync[h]:
            op = _meaningful_parent(ev, int(ev.launches.op[h]))
            name = ev.name_of(ev.launches.name[h]) + (f" in {op}" if op else "")
            inside = min(end[h], start[j]) - max(start[h], since)
            sat = 2 * inside > start[j] - since
            return f"host sync: {name}" if sat else f"host work after sync: {name}"
        h = walk.a2[h] if walk.a2[h] >= 0 else walk.a1[h]
    return "late launch"


def _idle(labels: _Labels, walk: _Walk, rep: Replayed, nodes: np.ndarray, w_lo: float) -> dict[str, float]:
    """Idle seconds of one window by cause (the gaps before each GPU event that starts one)."""
    order = nodes[np.lexsort((nodes, rep.start[nodes]))]
    s, e = rep.start[order], rep.end[order]
    reach = np.maximum.accumulate(np.concatenate([[w_lo], e]))[:-1]
    gap = s - reach
    out: dict[str, float] = {}
    for k in np.flatnonzero(gap > 0).tolist():
        cause = _idle_cause(labels, walk, int(order[k]), float(reach[k]))
        out[cause] = out.get(cause, 0.0) + float(gap[k]) * 1e-6
    return out


def step_bounds(
    events: TraceEvents,
    rep: Replayed,
    *,
    steps: tuple[int, int] | None = None,
    causal: str = "half",
    labels: _Labels | None = None,
    l1: np.ndarray | None = None,
    l2: np.ndarray | None = None,
) -> list[StepBound]:
    """Each analyzed window's critical path, bound and idle causes (module docstring)."""
    from infer_opt.trace.replay import step_replays

    graph = rep.graph
    labels = labels or _Labels(events, graph, causal)
    walk = _Walk(rep, graph.l1 if l1 is None else l1, graph.l2 if l2 is None else l2)
    work = tt.classify(events) != tt.WAIT
    out = []
    windows, _ = tt._windows(events, steps)
    for (number, mask, _, _), sr in zip(windows, step_replays(events, graph, rep, steps), strict=True):
        nodes = np.flatnonzero(mask & work) + graph.n_host
        if not nodes.size:
            continue
        w_lo, w_hi = sr.lo_us - graph.t0_us, sr.hi_us - graph.t0_us
        last = int(nodes[np.argmax(rep.end[nodes])])
        causes, kernels = critical_path(labels, walk, last, w_lo, w_hi)
        bound, share = _bound(causes)
        idle = _idle(labels, walk, rep, nodes, w_lo)
        out.append(StepBound(number, sr.replayed_s, causes, kernels, bound, share, idle))
    return out


def with_bounds(timeline: RankTrace, bounds: list[StepBound], graph: RankGraph) -> RankTrace:
    """The rank's timeline with each step's replayed span, bound and critical path (matched by
    step number, in order)."""
    by_step = {b.step: b for b in bounds}
    steps = []
    for row in timeline.steps:
        b = by_step.get(row.step)
        if b is None:
            steps.append(row)
            continue
        steps.append(
            replace(
                row,
                replayed_span_s=b.span_s,
                bound=b.bound,
                bound_share=b.bound_share,
                critical_path=dict(b.causes),
                critical_kernels=dict(sorted(b.kernels.items(), key=lambda kv: -kv[1])),
            )
        )
    return replace(
        timeline,
        steps=tuple(steps),
        replay_placed=graph.placed_share(),
        replay_unplaced=dict(graph.unplaced),
        warnings=timeline.warnings + _corrupt(timeline.path, graph),
    )


def _corrupt(path: str, graph: RankGraph) -> tuple[Notice, ...]:
    """A notice when timestamps contradict the graph: a GPU event that starts before its launch."""
    from infer_opt.trace.graph import SKEW

    found = {k: graph.unplaced[k] for k in (SKEW,) if graph.unplaced.get(k)}
    if not found:
        return ()
    reasons = "; ".join(f"{n} {k}" for k, n in found.items())
    example = graph.unplaced_examples[next(iter(found))]
    return (
        Notice(
            "trace_replay_unplaced",
            {
                "file": os.path.basename(path),
                "events": sum(found.values()),
                "reasons": reasons,
                "example": example,
            },
        ),
    )


def idle_causes(bounds: list[StepBound]) -> tuple[IdleCause, ...]:
    """Idle time by cause, per step (mean over ``bounds``), most first."""
    if not bounds:
        return ()
    total: dict[str, float] = {}
    for b in bounds:
        for k, v in b.idle.items():
            total[k] = total.get(k, 0.0) + v
    idle = math.fsum(total.values())
    rows = [IdleCause(k, v / len(bounds), v / idle if idle > 0 else 0.0) for k, v in total.items()]
    return tuple(sorted(rows, key=lambda r: (-r.time_s, r.cause)))


__all__ = ["CAUSES", "StepBound", "critical_path", "idle_causes", "step_bounds", "with_bounds"]
