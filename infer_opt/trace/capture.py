"""A CUDA/HIP-graph capture linked to its replays: per-op figures inside graphs, no engine patch.

vLLM and SGLang run their decode steps (and vLLM's piecewise prefill pieces) as captured graphs.
A replay's kernels are launched by one ``cudaGraphLaunch``/``hipGraphLaunch`` and carry no op and
no shapes. A trace of the *capture* (vLLM's ``capture_traces/graph_capture_rank_N...``, SGLang's
``capture_traces/bs_N_rank0``) has what they lack: between ``cudaStreamBeginCapture`` and
``cudaStreamEndCapture`` each kernel launch (``cudaLaunchKernel``, ``hipModuleLaunchKernel``,
``hipExtModuleLaunchKernel`` ...) is recorded on the host with the kernel's name in its
``args.kernel`` and the ``cpu_op`` that issued it, with its recorded shapes; the kernels
themselves do not run during capture, so the capture trace has launches and almost no kernels.

**Graphs.** Each BeginCapture … EndCapture span on one thread is one captured graph; its nodes
are the kernel launches (by kernel name) and the memcpy/memset calls of that thread in that span,
in order, each with the innermost ``cpu_op`` enclosing it. The ``user_annotation`` around the span
(vLLM's ``capture_32_FULL``, SGLang's ``capture_32_DECODE``) is its label.

**Matching.** The GPU events one graph launch of the replay trace ran are matched to a captured
graph whose nodes have the same names, as many of each (the k-th replayed kernel called X is the
k-th captured node called X, so branches that ran in another order still match; memcpys and
memsets match by kind). Of several graphs with the same nodes, a launch takes one of the label
the previous launch matched (the same graph replayed again), the next in capture order (a
piecewise model's identical layers); graphs of different labels (sizes) with the same kernels
cannot be told apart by a replay that records no grid or shapes: the first is taken, with a
Notice. A launch no captured graph matches keeps its kernel names only. CUDA's launch events
record no kernel name (ROCm's do): a graph with an unnamed launch is matched by the kinds alone —
as many kernels, memcpys and memsets — and the k-th replayed kernel is the k-th launch, with a
Notice (right for a single-stream graph, such as a decode step).

**Linking.** Each matched launch gets its own copy of the captured op chains (the op that issued
each node and the ops enclosing it, parents kept), appended to the replay's ops; its GPU events
point at them. Everything downstream (op groups, FLOPs and bytes, coverage, what-ifs) then reads
the replay as if the ops had run there, one op instance per replay, with the replay's own kernel
times. Copied ops have ``event_index`` -1 (they are in no event of the replay's file).

Pure: numpy and the standard library.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results.trace import CaptureLink
from infer_opt.trace.events import KERNEL, MEMCPY, MEMSET, SYNC, CpuOps, TraceEvents
from infer_opt.trace.ops import GRAPH_LAUNCH

BEGIN = re.compile(r"^(cuda|hip)StreamBeginCapture|^cuStreamBeginCapture", re.IGNORECASE)
END = re.compile(r"^(cuda|hip)StreamEndCapture|^cuStreamEndCapture", re.IGNORECASE)
#: the host calls that add a node to a graph under capture, and the node kind they add
_MEMCPY_CALL = re.compile(r"memcpy", re.IGNORECASE)
_MEMSET_CALL = re.compile(r"memset", re.IGNORECASE)
#: where vLLM and SGLang write their capture traces, next to the replay trace
CAPTURE_FOLDER = "capture_traces"
#: node names that stand for a memcpy / memset (a replay names them "Memcpy DtoD (...)")
_NODE_MEMCPY, _NODE_MEMSET = "<memcpy>", "<memset>"
#: a kernel launch whose event records no kernel name (CUDA's cudaLaunchKernel, cuLaunchKernel)
_NODE_KERNEL = "<kernel>"
_LAUNCH_CALL = re.compile(r"launch\w*kernel|launchcooperative", re.IGNORECASE)


@dataclass(frozen=True)
class CapturedGraph:
    """One BeginCapture … EndCapture span: its nodes in launch order."""

    label: str  # the enclosing user_annotation (capture_32_FULL, ...), '' when none
    nodes: tuple[str, ...]  # kernel names, or "<memcpy>" / "<memset>"
    ops: tuple[int, ...]  # per node, the innermost cpu_op (index into the capture's ops), -1 none

    @property
    def named(self) -> bool:
        """Every kernel node has its name (ROCm launches record it, CUDA's do not)."""
        return _NODE_KERNEL not in self.nodes

    def keys(self) -> tuple[str, ...]:
        """What a replay's events are matched against: the names, or the kinds alone."""
        return self.nodes if self.named else _kinds(self.nodes)


def _kinds(nodes: Sequence[str]) -> tuple[str, ...]:
    return tuple(n if n in (_NODE_MEMCPY, _NODE_MEMSET) else _NODE_KERNEL for n in nodes)


@dataclass(frozen=True)
class Capture:
    """A capture trace's columns and the graphs it captured."""

    events: TraceEvents
    graphs: tuple[CapturedGraph, ...]


def _from_file(path: str, event_index: np.ndarray) -> tuple[dict[int, str], list[tuple[float, float, str]]]:
    """``args.kernel`` of the launches at ``event_index`` in the file, and the file's
    ``user_annotation`` spans (start, end, name): the reader keeps neither, only a capture needs
    them."""
    from infer_opt.trace.reader import _load_document

    doc, _ = _load_document(Path(path))
    raw = doc["traceEvents"] if isinstance(doc, dict) else doc
    kernels = {}
    for i in event_index.tolist():
        args = raw[i].get("args") if 0 <= i < len(raw) and isinstance(raw[i], dict) else None
        if isinstance(args, dict):
            kernel = args.get("kernel")
            if isinstance(kernel, str) and kernel:
                kernels[i] = kernel
    notes = []
    for e in raw:
        if isinstance(e, dict) and e.get("cat") == "user_annotation":
            try:
                ts, dur = float(e["ts"]), float(e.get("dur", 0))
            except (KeyError, TypeError, ValueError):
                continue
            notes.append((ts, ts + dur, str(e.get("name", ""))))
    return kernels, notes


def _spans(events: TraceEvents) -> list[tuple[int, float, float]]:
    """(thread, begin, end) of each capture span, in time order."""
    la = events.launches
    if not len(la):
        return []
    begin = np.array([bool(BEGIN.search(n)) for n in events.names], dtype=bool)
    end = np.array([bool(END.search(n)) for n in events.names], dtype=bool)
    marks = np.flatnonzero(begin[la.name] | end[la.name])
    out, open_at = [], {}
    for i in marks[np.argsort(la.ts_us[marks], kind="stable")].tolist():
        tid, ts = int(la.tid[i]), float(la.ts_us[i])
        if begin[la.name[i]]:
            open_at[tid] = ts
        elif tid in open_at:
            out.append((tid, open_at.pop(tid), ts))
    return out


def is_capture(events: TraceEvents) -> bool:
    """A trace that captured a graph (a BeginCapture … EndCapture span with launches in it)."""
    return any(_spans_launch(events, span) for span in _spans(events))


def _spans_launch(events: TraceEvents, span: tuple[int, float, float]) -> bool:
    la = events.launches
    tid, begin, end = span
    return bool(np.any((la.tid == tid) & (la.ts_us > begin) & (la.ts_us < end)))


def _label(notes: Sequence[tuple[float, float, str]], begin: float, end: float) -> str:
    """The innermost annotation around a span (vLLM's ``capture_32_FULL``), '' when none."""
    around = [(stop - start, name) for start, stop, name in notes if start <= begin and stop >= end]
    return min(around)[1] if around else ""


def read_capture(events: TraceEvents) -> Capture:
    """The graphs ``events`` (a capture trace, read by the reader) captured."""
    la = events.launches
    spans = _spans(events)
    inside = np.zeros(len(la), dtype=bool)
    for tid, begin, end in spans:
        inside |= (la.tid == tid) & (la.ts_us > begin) & (la.ts_us < end)
    kernels, notes = _from_file(events.path, la.event_index[inside]) if inside.any() else ({}, [])
    graphs = []
    for tid, begin, end in spans:
        idx = np.flatnonzero((la.tid == tid) & (la.ts_us > begin) & (la.ts_us < end))
        idx = idx[np.argsort(la.ts_us[idx], kind="stable")]
        nodes, ops = [], []
        for i in idx.tolist():
            node = _node(events.name_of(la.name[i]), kernels.get(int(la.event_index[i])))
            if node is not None:
                nodes.append(node)
                ops.append(int(la.op[i]))
        graphs.append(CapturedGraph(_label(notes, begin, end), tuple(nodes), tuple(ops)))
    return Capture(events, tuple(g for g in graphs if g.nodes))


def _node(call: str, kernel: str | None) -> str | None:
    if kernel is not None:
        return kernel
    if _LAUNCH_CALL.search(call) and not GRAPH_LAUNCH.search(call):
        return _NODE_KERNEL
    if _MEMCPY_CALL.search(call):
        return _NODE_MEMCPY
    if _MEMSET_CALL.search(call):
        return _NODE_MEMSET
    return None


def replays(events: TraceEvents) -> list[np.ndarray]:
    """Per graph launch of ``events``, its GPU events (not syncs) in time order."""
    gpu = events.gpu
    if not len(events.launches) or not len(gpu):
        return []
    graph = np.array([bool(GRAPH_LAUNCH.search(n)) for n in events.names], dtype=bool)
    launch = gpu.launch
    linked = np.flatnonzero((launch >= 0) & (gpu.kind != SYNC))
    by_launch = linked[graph[events.launches.name[launch[linked]]]]
    out = []
    for key in np.unique(launch[by_launch]).tolist():
        idx = by_launch[launch[by_launch] == key]
        out.append(idx[np.lexsort((idx, gpu.ts_us[idx]))])
    out.sort(key=lambda idx: float(gpu.ts_us[idx[0]]))
    return out


def _replay_nodes(events: TraceEvents, idx: np.ndarray) -> list[str]:
    gpu = events.gpu
    kinds = {MEMCPY: _NODE_MEMCPY, MEMSET: _NODE_MEMSET}
    return [
        events.name_of(gpu.name[e]) if gpu.kind[e] == KERNEL else kinds.get(int(gpu.kind[e]), "")
        for e in idx.tolist()
    ]


def _overlap(a: Counter, b: Counter) -> int:
    return sum(min(n, b[k]) for k, n in a.items())


@dataclass
class _Copier:
    """Appends copies of capture op chains to the replay's op columns."""

    capture: TraceEvents
    names: list[str]
    name_ids: dict[str, int]
    rows: list[tuple[float, float, int, int, int, dict]]  # ts, dur, name, tid, parent, args
    base: int  # the replay's own op count

    def chain(self, op: int, copied: dict[int, int], ts: float, dur: float, tid: int) -> int:
        """The new index of capture op ``op`` (copying it and its parents once per replay)."""
        if op < 0:
            return -1
        if op in copied:
            return copied[op]
        ops = self.capture.ops
        parent = self.chain(int(ops.parent[op]), copied, ts, dur, tid)
        name = self.capture.name_of(ops.name[op])
        if name not in self.name_ids:
            self.name_ids[name] = len(self.names)
            self.names.append(name)
        copied[op] = self.base + len(self.rows)
        self.rows.append((ts, dur, self.name_ids[name], tid, parent, ops.args[op]))
        return copied[op]


def link(replay: TraceEvents, capture: Capture) -> tuple[TraceEvents, CaptureLink]:
    """``replay`` with its matched graph launches' GPU events pointing at copies of the captured
    ops (see the module docstring), and what matched."""
    launches = replays(replay)
    names = list(replay.names)
    copier = _Copier(capture.events, names, {n: i for i, n in enumerate(names)}, [], len(replay.ops))
    new_op = replay.gpu.op.copy()
    graphs = capture.graphs
    keys = [g.keys() for g in graphs]
    counts = [Counter(k) for k in keys]
    every = sum((Counter(g.nodes) for g in graphs if g.named), Counter())
    linked_launches = linked_events = named = 0
    last, labels, ambiguous, by_order = -1, [], set(), False
    for idx in launches:
        nodes = _replay_nodes(replay, idx)
        kinds = _kinds(nodes)
        want = {True: Counter(nodes), False: Counter(kinds)}
        named += _overlap(want[True], every)
        same = [i for i, c in enumerate(counts) if c == want[graphs[i].named]]
        if not same:
            continue
        g = _choose(graphs, same, last)
        if len({graphs[i].label for i in same}) > 1:
            ambiguous.update(graphs[i].label for i in same)
        last = g
        labels.append(graphs[g].label)
        by_order |= not graphs[g].named
        _assign(replay, keys[g], graphs[g].ops, idx, nodes if graphs[g].named else kinds, copier, new_op)
        linked_launches += 1
        linked_events += len(idx)
    events = _with_ops(replay, copier, new_op) if linked_launches else replay
    total = int(sum(len(i) for i in launches))
    found = CaptureLink(
        path=capture.events.path,
        graphs=len(capture.graphs),
        replays=len(launches),
        replays_linked=linked_launches,
        kernels=total,
        kernels_linked=linked_events,
        kernels_matching=named,
        labels=tuple(dict.fromkeys(labels)),
        ambiguous_labels=tuple(sorted(ambiguous)),
        by_order=by_order,
        unnamed_graphs=sum(not g.named for g in graphs),
    )
    return events, found


def _choose(graphs: Sequence[CapturedGraph], same: Sequence[int], last: int) -> int:
    """Of the graphs ``same`` with a launch's kernels, the one it is linked to: of the label the
    previous launch matched (a replayed graph is replayed again), the next in capture order (a
    piecewise model's identical layers), else the first."""
    label = graphs[last].label if last >= 0 else None
    prefer = [i for i in same if graphs[i].label == label] or list(same)
    return next((i for i in prefer if i > last), prefer[0])


def _assign(
    replay: TraceEvents,
    keys: Sequence[str],
    ops: Sequence[int],
    idx: np.ndarray,
    nodes: Sequence[str],
    copier: _Copier,
    new_op: np.ndarray,
) -> None:
    """Point the replay's events ``idx`` (matched as ``nodes``) at copies of the captured node
    ops (``keys``, ``ops``): the k-th of a key to the k-th of that key."""
    queues: dict[str, list[int]] = {}
    for key, op in zip(keys, ops, strict=True):
        queues.setdefault(key, []).append(op)
    taken = Counter()
    first = int(idx[0])
    launch = int(replay.gpu.launch[first])
    ts, dur = float(replay.launches.ts_us[launch]), float(replay.launches.dur_us[launch])
    tid = int(replay.launches.tid[launch])
    copied: dict[int, int] = {}
    for e, node in zip(idx.tolist(), nodes, strict=True):
        op = queues[node][taken[node]]
        taken[node] += 1
        new_op[e] = copier.chain(op, copied, ts, dur, tid)


def _with_ops(replay: TraceEvents, copier: _Copier, new_op: np.ndarray) -> TraceEvents:
    ops, rows = replay.ops, copier.rows
    n = len(rows)

    def column(values: list, old: np.ndarray) -> np.ndarray:
        return np.concatenate([old, np.asarray(values, dtype=old.dtype)]) if n else old

    merged = CpuOps(
        ts_us=column([r[0] for r in rows], ops.ts_us),
        dur_us=column([r[1] for r in rows], ops.dur_us),
        name=column([r[2] for r in rows], ops.name),
        tid=column([r[3] for r in rows], ops.tid),
        parent=column([r[4] for r in rows], ops.parent),
        external_id=column([-1] * n, ops.external_id),
        event_index=column([-1] * n, ops.event_index),
        args=ops.args + tuple(r[5] for r in rows),
    )
    return replace(replay, names=tuple(copier.names), ops=merged, gpu=replace(replay.gpu, op=new_op))


def split_captures(traces: Sequence[TraceEvents]) -> tuple[list[TraceEvents], list[TraceEvents]]:
    """(the traces to analyze, the capture traces) of ``traces``: a trace that only captured
    is not analyzed; one that captured and replayed (a whole run profiled) is both."""
    captures = [ev for ev in traces if is_capture(ev)]
    only = [ev for ev in captures if not replays(ev)]
    return [ev for ev in traces if not any(ev is c for c in only)], captures


def capture_folders(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The ``capture_traces`` folders next to the inputs (inside a folder given, or next to a
    file given), as vLLM and SGLang write them."""
    out = []
    for raw in paths:
        p = Path(raw)
        where = p / CAPTURE_FOLDER if p.is_dir() else p.parent / CAPTURE_FOLDER
        if where.is_dir() and where not in out:
            out.append(where)
    return out


def link_all(
    traces: Sequence[TraceEvents], captures: Sequence[TraceEvents], *, given: bool
) -> tuple[list[TraceEvents], tuple[CaptureLink, ...], list[Notice]]:
    """Each replay trace linked to the capture of its rank (else the first capture). ``given``:
    the captures came from ``--capture`` (a capture that links nothing is then an error)."""
    parsed = [read_capture(c) for c in captures]
    out, links, notices = [], [], []
    for ev in traces:
        if not replays(ev):
            out.append(ev)
            continue
        chosen = next((c for c in parsed if c.events.rank == ev.rank), parsed[0]) if parsed else None
        if chosen is None:
            out.append(ev)
            continue
        linked, found = link(ev, chosen)
        if given and found.replays_linked == 0:
            raise InvalidInput("--capture", chosen.events.path, _no_match(found))
        out.append(linked)
        links.append(found)
        if found.replays_linked < found.replays:
            notices.append(Notice("trace_capture_partial", _values(found)))
        if found.by_order:
            notices.append(Notice("trace_capture_by_order", {"capture": os.path.basename(found.path)}))
        if found.ambiguous_labels:
            notices.append(
                Notice("trace_capture_ambiguous", {"labels": found.ambiguous_labels, "chosen": found.labels})
            )
    return out, tuple(links), notices


def pair(
    traces: Sequence[TraceEvents],
    paths: Sequence[str | os.PathLike[str]],
    capture: Sequence[str | os.PathLike[str]] | None,
    *,
    workers: int | None = None,
) -> tuple[list[TraceEvents], tuple[CaptureLink, ...], list[Notice]]:
    """The traces to analyze, each graph replay linked to its capture: the ``--capture`` files
    when given, else capture traces among ``traces`` or in a ``capture_traces`` folder next to
    ``paths``. A Notice where replays stay unlinked."""
    from infer_opt.trace.reader import read_traces

    rest, captures = list(traces), []
    if capture is not None:
        captures = list(read_traces(capture, workers=workers))
        for c in captures:
            if not is_capture(c):
                raise InvalidInput("--capture", c.path, _NOT_CAPTURE)
        rest = split_captures(traces)[0] or rest  # a capture among the traces is no rank either
    else:
        rest, captures = split_captures(traces)
        if not rest:  # only capture traces given: analyze them as they are
            rest, captures = list(traces), []
        folders = capture_folders(paths) if not captures else []
        if folders:
            captures = [c for c in read_traces(folders, workers=workers) if is_capture(c)]
    launches = sum(len(replays(ev)) for ev in rest)
    if not launches:
        return rest, (), []
    if not captures:
        return rest, (), [Notice("trace_capture_absent", {"replays": launches})]
    return link_all(rest, captures, given=capture is not None)


_NOT_CAPTURE = (
    "a graph-capture trace (a cudaStreamBeginCapture/hipStreamBeginCapture … EndCapture span with "
    "kernel launches in it, as vLLM's capture_traces/graph_capture_rank_N and SGLang's bs_N_rankN "
    "hold); this file has none"
)


#: a linked replay with more of its GPU time than this in ops without a formula gets a Notice
NO_FORMULA_NOTICE = 0.2


def formula_gaps(links: Sequence[CaptureLink], groups: Sequence, coverage: Sequence) -> list[Notice]:
    """Where a linked replay's GPU time still has no formula: the ops it is in (a Notice when
    it is more than :data:`NO_FORMULA_NOTICE` of the GPU time)."""
    if not any(c.replays_linked for c in links):
        return []
    total = sum(c.time_s for c in coverage)
    share = sum(c.fraction for c in coverage if c.reason == "no_formula")
    if total <= 0 or share <= NO_FORMULA_NOTICE:
        return []
    missing = [g for g in groups if g.bound == "unknown" and g.flops == 0 and g.bytes == 0]
    ops = tuple((g.name, g.time_s / total) for g in missing[:3])
    return [Notice("trace_capture_no_formula", {"share": share, "ops": ops})]


def _values(found: CaptureLink) -> dict:
    return {
        "capture": os.path.basename(found.path),
        "linked": found.replays_linked,
        "replays": found.replays,
        "kernels_linked": found.kernels_linked,
        "kernels": found.kernels,
    }


def _no_match(found: CaptureLink) -> str:
    return (
        f"a capture of the replayed graphs: none of its {found.graphs} captured graph(s) has the "
        f"kernels of any of the {found.replays} graph launch(es); {found.kernels_matching} of the "
        f"{found.kernels} replayed kernels matched a captured kernel by name"
        + (
            f" ({found.unnamed_graphs} graph(s) record no kernel names and were matched by count and order)"
            if found.unnamed_graphs
            else ""
        )
        + " (another model, batch size or engine version?)"
    )


__all__ = [
    "CAPTURE_FOLDER",
    "Capture",
    "CapturedGraph",
    "capture_folders",
    "formula_gaps",
    "is_capture",
    "link",
    "link_all",
    "pair",
    "read_capture",
    "replays",
    "split_captures",
]
