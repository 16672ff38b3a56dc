"""One rank's dependency graph: what each event of a trace waited for (pure; numpy only).

Nodes are the host's runtime/driver calls (``TraceEvents.launches``, nodes ``0 .. H-1``) and the
GPU events (``H + j`` for ``TraceEvents.gpu[j]``). Every node's start is the latest of its
incoming terms (max-plus), so a replay (:mod:`.replay`) recomputes start and end from edited
durations in one pass over the nodes in observed time order:

- **thread order**: a host call starts after the previous top-level call on its thread ended,
  plus the measured time between them (``host`` work: the framework, Python). A call nested in
  another (a driver call inside a runtime call) keeps its offset from its parent's start.
- **launch**: a GPU event starts after its launch call started, plus the launch-to-start
  latency; a graph launch (``cudaGraphLaunch``/``hipGraphLaunch``) releases all of its kernels.
- **stream order**: after the previous event on its (device, stream) ended, plus a gap.
- **syncs** (their end, not their start, waits): ``cudaStreamSynchronize`` for the work on its
  stream launched before it (the stream of the ``cuda_sync`` record, else of the thread's last
  launch), ``cudaDeviceSynchronize`` for every stream's, ``cudaEventSynchronize`` for the work
  on ``wait_on_stream`` launched before the ``cudaEventRecord`` that
  ``wait_on_cuda_event_record_corr_id`` names (every stream's when the record is not known), a
  blocking ``cudaMemcpy``/``hipMemcpy``/``hipMemcpyWithStream`` — or a ``cudaMemcpyAsync`` whose
  copy is to or from pageable memory (the call stages the data and returns with it) — for its own
  copy. A sync ends at ``max(start + base, waited end + wake)``. A ``Stream Wait Event`` record
  (``cudaStreamWaitEvent``) is a device node of its stream that ends the same way, waiting on
  the other stream's work before the named record.

Exactness: every term is the observed gap for the one edge that bound the event (the latest
under typical lags) and ``min(typical, observed)`` for the others, so the unedited replay gives
each event its own timestamps back. Typical lags are medians of this rank's own clean samples
(a launch into an idle stream, a queued kernel's stream gap, a waiting sync's wake, a sync
that did not wait). Events the graph cannot place are counted in ``unplaced`` by why (a launch
before the trace window, none found, a start before its launch); they follow their stream, or
keep their offset from the last host call before them (their measured start before any), but
never vanish. Host ``cuda_sync`` records of a sync call mirror it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from infer_opt.trace.events import LAUNCH_BEFORE_WINDOW, SYNC, TraceEvents

#: host calls that block until the device's work they name is done
STREAM_SYNC = re.compile(r"^(cuda|hip)StreamSynchronize$|^cuStreamSynchronize$")
DEVICE_SYNC = re.compile(r"^(cuda|hip)DeviceSynchronize$|^cuCtxSynchronize$")
EVENT_SYNC = re.compile(r"^(cuda|hip)EventSynchronize$|^cuEventSynchronize$")
BLOCKING_COPY = re.compile(
    r"^(cuda|hip)Memcpy$|^hipMemcpyWithStream$|^(cuda|hip)MemcpyDtoH$|^cuMemcpyDtoH(_v2)?$"
)
#: an async copy call that blocks the host anyway when its copy is to or from pageable memory
#: (``Memcpy HtoD (Pageable -> Device)``): the call stages the data, so it ends with its copy
ASYNC_COPY = re.compile(r"^(cuda|hip)MemcpyAsync$|^cuMemcpy\w*Async(_v2)?$")
PAGEABLE = "pageable"
#: the device-side cross-stream wait's ``cuda_sync`` record
STREAM_WAIT = "Stream Wait Event"

#: ``RankGraph.via`` reasons: why an edge was dropped or an event could not be placed
BEFORE_WINDOW = "launched before the trace window"
NO_LAUNCH = "no launch found for its correlation id"
SKEW = "starts before its launch (clock skew)"
LATE_WAIT = "waited work started after the sync returned"
UNKNOWN_RECORD = "event sync without its recorded event: waits for every stream"
UNKNOWN_STREAM = "stream sync without its stream: waits for every stream"


@dataclass(frozen=True, eq=False)
class RankGraph:
    """The graph of one rank (times in µs relative to ``t0_us``; see the module docstring)."""

    n_host: int
    t0_us: float
    start: np.ndarray  # observed start of every node
    dur: np.ndarray  # observed duration
    a1: np.ndarray  # start-referenced predecessor (launch, parent call), -1 none
    l1: np.ndarray
    a2: np.ndarray  # end-referenced predecessor (stream, thread), -1 none
    l2: np.ndarray
    anchor: np.ndarray  # fixed start for a node with no predecessor, -inf otherwise
    is_sync: np.ndarray  # bool: the end waits (host sync calls, stream waits)
    base: np.ndarray  # a sync's own cost
    waits: dict[int, tuple[tuple[int, float], ...]]  # sync node -> (waited node, wake lag)
    mirror: np.ndarray  # GPU node -> host call it mirrors (host-side cuda_sync records), -1 none
    points: list[int]  # processing order: node for its start, ~node for a sync's end
    preferred: np.ndarray  # int8: the term that set the start under observed lags: 0 anchor, 1 a1, 2 a2
    host_gap: np.ndarray  # bool: l2 is measured host work (thread order)
    typical: dict[str, float]  # typical lags (µs): launch, stream, wake, base
    unplaced: dict[str, int] = field(default_factory=dict)  # reason -> events
    unplaced_examples: dict[str, str] = field(default_factory=dict)  # reason -> one event's name

    @property
    def n(self) -> int:
        return int(self.start.shape[0])

    def placed_share(self) -> float:
        """The share of nodes that have a predecessor or a sync's wait (the rest are anchored)."""
        if self.n == 0:
            return 1.0
        return float(1.0 - np.count_nonzero(np.isfinite(self.anchor)) / self.n)


def _median(values: np.ndarray, default: float = 0.0) -> float:
    v = values[np.isfinite(values)]
    return float(np.median(v)) if v.size else default


def _thread_order(ts: np.ndarray, dur: np.ndarray, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each host call: (previous top-level call on its thread or -1, parent call or -1)."""
    prev = np.full(ts.size, -1, dtype=np.int64)
    parent = np.full(ts.size, -1, dtype=np.int64)
    last_top: dict[int, int] = {}
    end = ts + dur
    ts_l, end_l, tid_l = ts.tolist(), end.tolist(), tid.tolist()
    for i in np.lexsort((-dur, ts, tid)).tolist():
        top = last_top.get(tid_l[i], -1)
        if top >= 0 and ts_l[i] < end_l[top]:
            parent[i] = top
            continue
        prev[i] = top
        last_top[tid_l[i]] = i
    return prev, parent


def _stream_order(
    events: TraceEvents, work: np.ndarray
) -> tuple[np.ndarray, dict[tuple[int, int], np.ndarray]]:
    """Each work event's predecessor on its (device, stream) (-1 first), and each stream's
    events in start order (GPU indices)."""
    g = events.gpu
    prev = np.full(len(g), -1, dtype=np.int64)
    chains: dict[tuple[int, int], np.ndarray] = {}
    idx = np.flatnonzero(work)
    if not idx.size:
        return prev, chains
    order = idx[np.lexsort((idx, g.ts_us[idx], g.stream[idx], g.device[idx]))]
    dev, st = g.device[order], g.stream[order]
    new = np.ones(order.size, dtype=bool)
    new[1:] = (dev[1:] != dev[:-1]) | (st[1:] != st[:-1])
    prev[order[1:]] = np.where(new[1:], -1, order[:-1])
    bounds = np.append(np.flatnonzero(new), order.size)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        chains[(int(dev[a]), int(st[a]))] = order[a:b]
    return prev, chains


class _LastBefore:
    """The last event of a stream (in stream order) among those launched before a host time."""

    def __init__(self, events: TraceEvents, chain: np.ndarray) -> None:
        la = events.launches
        launch = events.gpu.launch[chain]
        t = np.where(launch >= 0, la.ts_us[np.maximum(launch, 0)] if len(la) else -np.inf, -np.inf)
        by_launch = np.argsort(t, kind="stable")
        self.times = t[by_launch]
        self.best = np.maximum.accumulate(by_launch)  # the furthest in stream order so far
        self.chain = chain

    def at(self, t: float) -> int:
        k = int(np.searchsorted(self.times, t, side="left"))
        return -1 if k == 0 else int(self.chain[self.best[k - 1]])


class _Builder:
    def __init__(self, events: TraceEvents) -> None:
        self.events = events
        self.unplaced: dict[str, int] = {}
        self.examples: dict[str, str] = {}
        self._last: dict[tuple[int, int], _LastBefore] = {}
        self._records: tuple[np.ndarray, np.ndarray] | None = None

    def last_before(self, chains: dict, key: tuple[int, int]) -> _LastBefore:
        """The stream's :class:`_LastBefore`, built once."""
        if key not in self._last:
            self._last[key] = _LastBefore(self.events, chains[key])
        return self._last[key]

    def record_time(self, args: dict) -> float | None:
        """The host time of the ``cudaEventRecord`` a sync record names (by correlation)."""
        corr = args.get("wait_on_cuda_event_record_corr_id")
        if not isinstance(corr, int) or corr < 0:
            return None
        if self._records is None:
            la = self.events.launches
            order = np.argsort(la.correlation, kind="stable")
            self._records = (la.correlation[order], la.ts_us[order])
        corrs, times = self._records
        k = int(np.searchsorted(corrs, corr))
        return float(times[k]) if k < corrs.size and corrs[k] == corr else None

    def count(self, reason: str, name: str, n: int = 1) -> None:
        if n:
            self.unplaced[reason] = self.unplaced.get(reason, 0) + n
            self.examples.setdefault(reason, name)


def _sync_kind(name: str) -> str:
    for kind, pattern in (("stream", STREAM_SYNC), ("device", DEVICE_SYNC), ("event", EVENT_SYNC)):
        if pattern.match(name):
            return kind
    return "copy" if BLOCKING_COPY.match(name) else ""


def _pageable_copy(names: list[str], call: int, own: list[int] | None, gpu_name: np.ndarray) -> str:
    """``copy`` for an async copy call whose copy moves pageable memory (it blocks the host)."""
    if (
        own
        and ASYNC_COPY.match(names[call])
        and any(PAGEABLE in names[int(gpu_name[j])].lower() for j in own)
    ):
        return "copy"
    return ""


def _host_waits(b: _Builder, chains: dict, mirrors: dict[int, int], work: np.ndarray) -> dict[int, list[int]]:
    """Each blocking host call (launch index) -> the GPU events (indices) whose end it waits for."""
    ev = b.events
    la, g = ev.launches, ev.gpu
    names = [ev.name_of(n) for n in range(len(ev.names))]
    kinds = {i: _sync_kind(n) for i, n in enumerate(names)}
    linked = np.flatnonzero(work & (g.launch >= 0))
    own: dict[int, list[int]] = {}
    for j in linked.tolist():
        own.setdefault(int(g.launch[j]), []).append(j)
    # the stream of each thread's last launch that put work on the device
    by_launch = {h: int(g.stream[js[-1]]) for h, js in own.items()}
    last_stream: dict[int, int] = {}
    out: dict[int, list[int]] = {}
    for h in range(len(la)):
        kind = kinds[int(la.name[h])] or _pageable_copy(names, int(la.name[h]), own.get(h), g.name)
        tid, t = int(la.tid[h]), float(la.ts_us[h])
        if h in by_launch and kind != "copy":
            last_stream[tid] = by_launch[h]
        if not kind:
            continue
        mirror = mirrors.get(h, -1)
        args = g.args[mirror] if mirror >= 0 else {}
        streams: list[tuple[int, int]] | None = None
        if kind == "copy" and h in own:
            out[h] = own[h]
            continue
        if kind in ("stream", "copy"):
            s = int(g.stream[mirror]) if mirror >= 0 and "stream" in args else last_stream.get(tid)
            streams = [k for k in chains if k[1] == s] if s is not None else None
            if streams is None:
                b.count(UNKNOWN_STREAM, names[int(la.name[h])])
        elif kind == "event":
            rec = b.record_time(args)
            s = args.get("wait_on_stream")
            if rec is not None and isinstance(s, int):
                t, streams = rec, [k for k in chains if k[1] == s]
            else:
                b.count(UNKNOWN_RECORD, names[int(la.name[h])])
        if streams is None:
            streams = list(chains)
        found = [b.last_before(chains, k).at(t) for k in streams]
        out[h] = [j for j in found if j >= 0]
    return out


def build_graph(events: TraceEvents) -> RankGraph:
    """The dependency graph of one rank (module docstring)."""
    b = _Builder(events)
    la, g = events.launches, events.gpu
    h_n, g_n = len(la), len(g)
    n = h_n + g_n
    firsts = [float(a.min()) for a in (la.ts_us, g.ts_us) if a.size]
    t0 = min(firsts) if firsts else 0.0
    start = np.concatenate([la.ts_us, g.ts_us]) - t0
    dur = np.concatenate([la.dur_us, g.dur_us])
    end = start + dur
    names = events.names
    is_wait_name = np.array([n == STREAM_WAIT for n in names], dtype=bool)
    sync_ev = g.kind == SYNC
    device_wait = sync_ev & (is_wait_name[g.name] if len(names) else False)
    mirror_ev = sync_ev & ~device_wait
    mirror = np.where(mirror_ev, g.launch, -1)
    mirrors = {int(h): int(j) for j, h in enumerate(mirror.tolist()) if h >= 0}
    work = ~mirror_ev
    a1 = np.full(n, -1, dtype=np.int64)
    a2 = np.full(n, -1, dtype=np.int64)
    l1, l2 = np.zeros(n), np.zeros(n)
    anchor = np.full(n, -np.inf)
    preferred = np.zeros(n, dtype=np.int8)
    # host: thread order (top-level calls) and nesting
    prev, parent = _thread_order(la.ts_us, la.dur_us, la.tid)
    nested = parent >= 0
    a1[:h_n][nested] = parent[nested]
    l1[:h_n][nested] = start[:h_n][nested] - start[parent[nested]]
    chained = prev >= 0
    a2[:h_n][chained] = prev[chained]
    l2[:h_n][chained] = start[:h_n][chained] - end[prev[chained]]
    preferred[:h_n] = np.where(nested, 1, np.where(chained, 2, 0))
    host_gap = np.zeros(n, dtype=bool)
    host_gap[:h_n] = chained
    # GPU: launch and stream order
    sprev, chains = _stream_order(events, work)
    typical = _gpu_edges(b, start, end, h_n, sprev, work, a1, l1, a2, l2, preferred)
    _follow_the_host(start, h_n, work, a1, l1, a2, preferred)
    first = (a1 < 0) & (a2 < 0)
    first[h_n:] &= work
    anchor[first] = start[first]
    preferred[first] = 0
    # syncs
    waits_by_call = _host_waits(b, chains, mirrors, work)
    is_sync = np.zeros(n, dtype=bool)
    base = dur.copy()
    waits: dict[int, tuple[tuple[int, float], ...]] = {}
    pairs = [(h, [h_n + j for j in js]) for h, js in waits_by_call.items()]
    pairs += _device_waits(b, chains, device_wait, h_n)
    typical.update(_sync_lags(start, end, pairs))
    for node, waited in pairs:
        _sync_node(b, node, waited, start, end, base, waits, preferred, typical, names_of=events)
        is_sync[node] = node in waits
    # mirrors: anchored to their host call (replayed after the pass), or to their own time
    lone = mirror_ev & (g.launch < 0)
    anchor[h_n:][lone] = start[h_n:][lone]
    points = _points(start, dur, is_sync, mirror_ev, h_n, a2)
    return RankGraph(
        h_n, t0, start, dur, a1, l1, a2, l2, anchor, is_sync, base, waits, mirror, points,
        preferred, host_gap, typical, b.unplaced, b.examples,
    )  # fmt: skip


def _gpu_edges(
    b: _Builder,
    start: np.ndarray,
    end: np.ndarray,
    h_n: int,
    sprev: np.ndarray,
    work: np.ndarray,
    a1: np.ndarray,
    l1: np.ndarray,
    a2: np.ndarray,
    l2: np.ndarray,
    preferred: np.ndarray,
) -> dict[str, float]:
    """Launch and stream edges of the GPU nodes, their lags chosen so the observed one binds."""
    ev = b.events
    g = ev.gpu
    s, e = start[h_n:], end[h_n:]
    launch = g.launch.copy()
    for code, reason in ((LAUNCH_BEFORE_WINDOW, BEFORE_WINDOW), (-1, NO_LAUNCH)):
        miss = np.flatnonzero(work & (launch == code))
        if miss.size:
            b.count(reason, ev.name_of(g.name[miss[0]]), miss.size)
    has_l = work & (launch >= 0)
    ls = np.where(has_l, start[np.maximum(launch, 0)], np.nan)
    skew = has_l & (ls > s)
    if skew.any():
        b.count(SKEW, ev.name_of(g.name[np.flatnonzero(skew)[0]]), int(skew.sum()))
        has_l &= ~skew
    has_p = sprev >= 0
    pe = np.where(has_p, e[np.maximum(sprev, 0)], np.nan)
    lat_obs, gap_obs = s - ls, s - pe
    idle_launch = has_l & (~has_p | (pe <= ls))
    queued = has_p & (~has_l | (ls < pe)) & (gap_obs >= 0)
    typ_lat = max(0.0, _median(lat_obs[idle_launch]))
    typ_gap = max(0.0, _median(gap_obs[queued]))
    by_launch = has_l & (~has_p | (ls + typ_lat >= pe + typ_gap))
    nodes = np.arange(h_n, h_n + len(g))
    a1[nodes[has_l]] = launch[has_l]
    l1[h_n:] = np.where(has_l, np.where(by_launch, lat_obs, np.minimum(typ_lat, lat_obs)), 0.0)
    a2[nodes[has_p]] = sprev[has_p] + h_n
    l2[h_n:] = np.where(has_p, np.where(by_launch, np.minimum(typ_gap, gap_obs), gap_obs), 0.0)
    preferred[h_n:] = np.where(by_launch, 1, np.where(has_p, 2, 0))
    return {"launch": typ_lat, "stream": typ_gap}


def _follow_the_host(
    start: np.ndarray,
    h_n: int,
    work: np.ndarray,
    a1: np.ndarray,
    l1: np.ndarray,
    a2: np.ndarray,
    preferred: np.ndarray,
) -> None:
    """A GPU event with neither a launch nor a stream predecessor (unlinked, clock skew) keeps
    its offset from the last host call that started before it, so it moves with the host
    instead of staying at its absolute time; one before every host call stays anchored."""
    lone = np.flatnonzero(work & (a1[h_n:] < 0) & (a2[h_n:] < 0)) + h_n
    if not lone.size or not h_n:
        return
    order = np.argsort(start[:h_n], kind="stable")
    pos = np.searchsorted(start[:h_n][order], start[lone], side="right") - 1
    ok = pos >= 0
    a1[lone[ok]] = order[pos[ok]]
    l1[lone[ok]] = start[lone[ok]] - start[order[pos[ok]]]
    preferred[lone[ok]] = 1


def _device_waits(
    b: _Builder, chains: dict, device_wait: np.ndarray, h_n: int
) -> list[tuple[int, list[int]]]:
    """``Stream Wait Event`` records: the waiting node and the other stream's last work before
    the named record."""
    ev = b.events
    out = []
    for j in np.flatnonzero(device_wait).tolist():
        args = ev.gpu.args[j]
        rec, s = b.record_time(args), args.get("wait_on_stream")
        keys = [k for k in chains if k[1] == s] if isinstance(s, int) else []
        if rec is None or not keys:
            b.count(UNKNOWN_RECORD, STREAM_WAIT)
            continue
        found = [b.last_before(chains, k).at(rec) for k in keys]
        out.append((h_n + j, [h_n + w for w in found if w >= 0]))
    return out


def _sync_lags(start: np.ndarray, end: np.ndarray, pairs: list) -> dict[str, float]:
    woke, own = [], []
    for node, waited in pairs:
        if not waited:
            continue
        last = max(end[w] for w in waited)
        if last > start[node] and end[node] >= last:
            woke.append(end[node] - last)
        elif last <= start[node]:
            own.append(end[node] - start[node])
    return {"wake": max(0.0, _median(np.array(woke))), "base": max(0.0, _median(np.array(own)))}


def _sync_node(
    b: _Builder,
    node: int,
    waited: list[int],
    start: np.ndarray,
    end: np.ndarray,
    base: np.ndarray,
    waits: dict,
    preferred: np.ndarray,
    typical: dict[str, float],
    names_of: TraceEvents,
) -> None:
    """A sync's base and wake lags: the observed one where it waited, capped otherwise."""
    ok = [w for w in waited if start[w] < end[node]]
    if len(ok) < len(waited):
        h_n = names_of.launches.__len__()
        j = next(w for w in waited if start[w] >= end[node]) - h_n
        b.count(LATE_WAIT, names_of.name_of(names_of.gpu.name[j]), len(waited) - len(ok))
    if not ok:
        return
    last = max(ok, key=lambda w: end[w])
    dur = end[node] - start[node]
    waited_now = end[last] > start[node]
    base[node] = min(typical["base"], dur) if waited_now else dur
    lags = []
    for w in ok:
        obs = end[node] - end[w]
        lags.append((int(w), obs if (waited_now and w == last) else min(typical["wake"], obs)))
    waits[node] = tuple(lags)


def _points(
    start: np.ndarray, dur: np.ndarray, is_sync: np.ndarray, mirror_ev: np.ndarray, h_n: int, a2: np.ndarray
) -> list[int]:
    """Processing order: every (non-mirror) node's start, and each sync's end, by observed time
    (a sync's end no later than its successors' starts: rounding may put it a hair after); at
    equal times an end before a start, a host call before a GPU event, then by node."""
    live = np.ones(start.size, dtype=bool)
    live[h_n:] = ~mirror_ev
    nodes = np.flatnonzero(live)
    syncs = np.flatnonzero(is_sync)
    end_key = start + dur
    has = a2 >= 0
    np.minimum.at(end_key, a2[has], start[has])
    times = np.concatenate([start[nodes], end_key[syncs]])
    phase = np.concatenate([np.ones(nodes.size), np.zeros(syncs.size)])
    ids = np.concatenate([nodes, ~syncs])
    key_node = np.concatenate([nodes, syncs])
    is_gpu = key_node >= h_n
    longer = np.where(is_gpu, 0.0, -dur[key_node])  # a parent call before its children
    order = np.lexsort((key_node, longer, is_gpu, phase, times))
    return ids[order].tolist()


__all__ = ["RankGraph", "build_graph"]
