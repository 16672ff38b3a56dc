"""``--augment``: write a trace back with the analysis in each kernel's and op's ``args``, so it
opens in Perfetto or chrome://tracing with ``flops``, ``bytes``, ``achieved_flops_per_s``,
``achieved_bytes_per_s``, ``peak_fraction`` and ``bound`` on every event that has them.

An op instance gets its own FLOPs and bytes (from its recorded shapes), its kernel time (the sum
of its kernels) and the rates over that time; its bound and peak fraction are its (op, shapes,
dtype) group's. A kernel gets its op's FLOPs and bytes apportioned by duration (so a kernel's
rate is its op's), labelled ``infer_opt_share``. Everything else is left as the file has it.
"""

from __future__ import annotations

import gc
import os
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from infer_opt.files import write_bytes
from infer_opt.trace import reader
from infer_opt.trace.analyze import Analysis
from infer_opt.trace.events import TraceEvents
from infer_opt.trace.ops import TRANSFER, _works, attribute, link_bytes

#: the keys added to an event's ``args``
KEYS = ("flops", "bytes", "achieved_flops_per_s", "achieved_bytes_per_s", "peak_fraction", "bound")


def _targets(out: Path, n: int) -> list[Path]:
    if n == 1:
        return [out]
    name = out.name
    stem, suffix = (
        (name[: -len(".json.gz")], ".json.gz")
        if name.endswith(".json.gz")
        else (out.stem, out.suffix or ".json")
    )
    return [out.with_name(f"{stem}.rank{i}{suffix}") for i in range(n)]


def annotations(
    events: TraceEvents, mask: np.ndarray, groups: dict[tuple[str, tuple, str], Any], causal: str
) -> dict[int, dict]:
    """File position → the args to add, for the ops and kernels of the analyzed windows."""
    att = attribute(events, None, causal)
    gpu, ops = events.gpu, events.ops
    kernels = np.flatnonzero(mask & (att.owner >= 0))
    # the kernels grouped by their op, once (one scan of every kernel per op was quadratic)
    owners, inverse = np.unique(att.owner[kernels], return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(owners.size + 1))
    times = np.bincount(inverse, weights=gpu.dur_us[kernels], minlength=owners.size)
    added: dict[int, dict] = {}
    keys: dict[tuple[int, int], tuple[str, str, str]] = {}  # (name, args): one per distinct op
    for i, op in enumerate(owners.tolist()):
        cost = att.costs.get(op)
        if not _works(cost):
            continue
        time_us = float(times[i])
        args = ops.args[op]  # (interned by the reader: equal args are one dict)
        key = keys.get((int(ops.name[op]), id(args)))
        if key is None:
            c_dtype = cost.dtype or att.dtypes(args)  # the group's key (ops._key)
            key = (events.name_of(ops.name[op]), att.shapes_of(args), c_dtype)
            keys[(int(ops.name[op]), id(args))] = key
        group = groups.get(key)
        time_s = time_us / 1e6
        # a host↔device copy: the tensor once over the link, as its row says (ops.link_bytes)
        nbytes = link_bytes(cost.bytes) if group is not None and group.family == TRANSFER else cost.bytes
        figures = {
            "flops": float(cost.flops),
            "bytes": float(nbytes),
            "achieved_flops_per_s": cost.flops / time_s if time_s > 0 else None,
            "achieved_bytes_per_s": nbytes / time_s if time_s > 0 else None,
            "peak_fraction": group.peak_fraction if group is not None else None,
            "bound": group.bound if group is not None else "unknown",
        }
        added[int(ops.event_index[op])] = {**figures, "infer_opt_kernel_time_us": time_us}
        for e in kernels[order[bounds[i] : bounds[i + 1]]].tolist():
            share = float(gpu.dur_us[e]) / time_us if time_us > 0 else 0.0
            added[int(gpu.event_index[e])] = {
                **figures,
                "flops": figures["flops"] * share,
                "bytes": figures["bytes"] * share,
                "infer_opt_share": share,
            }
    return added


#: the process id of the replayed timeline added by ``--augment-what-if``
REPLAY_PID = 1_000_000


def replayed_events(found: Analysis, rank: int, what_if: str, trace_events: list) -> list[dict]:
    """A second process in the trace: every GPU event of rank ``rank`` where the replay of the
    ``--what-if`` edit ``what_if`` puts it (``"none"``: the unedited replay), its measured start
    and duration in ``args``, so a person sees in Perfetto which kernels moved."""
    from infer_opt.trace.replay import replay
    from infer_opt.trace.user_edits import edit_of

    rr = found.replays[rank] if found.replays else None
    if rr is None:
        return []
    events = found.traces[rank]
    rep = rr.replayed
    if what_if != "none":
        e = edit_of(events, rr, what_if, found.masks[rank], found.result.causal_flops)
        rep = replay(rr.graph, dur=e.dur, l1=e.l1, l2=e.l2, base=e.base, waits=e.waits, since=rr.replayed)
    starts, ends = rep.gpu_start_us(), rep.gpu_end_us()
    out: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": REPLAY_PID, "args": {"name": f"replayed: {what_if}"}}
    ]
    g = events.gpu
    for j, position in enumerate(g.event_index.tolist()):
        original = trace_events[position] if 0 <= position < len(trace_events) else None
        if not isinstance(original, dict):
            continue
        args = original.get("args") if isinstance(original.get("args"), dict) else {}
        out.append(
            {
                **original,
                "pid": REPLAY_PID,
                "tid": int(g.stream[j]),
                "ts": float(starts[j]),
                "dur": float(ends[j] - starts[j]),
                "args": {
                    **args,
                    "infer_opt_measured_ts": float(g.ts_us[j]),
                    "infer_opt_measured_dur": float(g.dur_us[j]),
                },
            }
        )
    return out


def write_augmented(found: Analysis, out: str | os.PathLike[str], what_if: str | None = None) -> list[Path]:
    """Write each rank's trace with the annotations to ``out`` (several ranks: ``out`` with
    ``.rank<i>`` before the suffix); gzip when the name ends in ``.gz``. The trace is rewritten
    a chunk of events at a time (memory ~ the file and one chunk's events, as the reader).
    ``what_if``: add the replayed timeline of that ``--what-if`` edit (``"none"``: unedited) as a
    second process (that copy is made whole: each replayed event copies its own fields)."""
    result = found.result
    groups = {(g.name, g.shapes, g.dtype): g for g in result.ops}
    extra = {"device": result.device_name, "peaks": result.peaks.source}
    written = []
    for rank, (events, mask, target) in enumerate(
        zip(found.traces, found.masks, _targets(Path(out), len(found.traces)), strict=True)
    ):
        added = annotations(events, mask, groups, result.causal_flops)
        if what_if is not None:
            pieces = iter([_with_replay(found, rank, what_if, added, extra)])
        else:
            pieces = _pieces(Path(events.path), added, extra)
        if target.name.endswith(".gz"):
            pieces = _gzipped(pieces)
        enabled = gc.isenabled()
        gc.disable()  # millions of fresh dicts, none cyclic: the collector's passes would dominate
        try:
            written.append(write_bytes(target, pieces))
        finally:
            if enabled:
                gc.enable()
    return written


def _annotated(events: list, added: dict[int, dict], offset: int) -> bytes:
    """``events`` (the file's from position ``offset``) with their annotations, as JSON items
    without the list's brackets."""
    for position in range(offset, offset + len(events)):
        extra = added.get(position)
        event = events[position - offset]
        if extra is not None and isinstance(event, dict):
            args = event.get("args")
            event["args"] = {**(args if isinstance(args, dict) else {}), **extra}
    return orjson.dumps(events, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]


def _pieces(path: Path, added: dict[int, dict], extra: dict) -> Iterator[bytes]:
    """The annotated trace's bytes, in pieces: the metadata as the file has it (``infer_opt``
    added first), the events a chunk at a time, what follows them (a cut file closed)."""
    data = reader._read_bytes(path)
    if data[:2] == b"\x1f\x8b":
        data, _ = reader._gunzip(data, path)
    data = reader._quote_non_finite(data)
    key = data.find(b'"traceEvents"')
    bracket = data.find(b"[", max(key, 0))  # (a bare list of events: its own bracket)
    head = data[: bracket + 1]
    if key >= 0 and b'"infer_opt"' not in head:  # (a trace augmented before keeps its own)
        brace = head.find(b"{") + 1
        head = head[:brace] + b'"infer_opt": ' + orjson.dumps(extra) + b", " + head[brace:]
    yield head
    pos, count, sep = bracket + 1, 0, b""
    while (m := reader._BOUNDARY.search(data, pos + reader.CHUNK)) is not None:
        events = orjson.loads(b"[" + data[pos : m.start() + 1] + b"]")
        yield sep + _annotated(events, added, count)
        count, sep, pos = count + len(events), b",", m.end() - 1
    closed = reader._closed_tail(data[:bracket], data[pos:])
    if closed is None:  # (the reader read it: not reached)
        raise ValueError(f"{path}: the trace's last events do not read")
    events, _, _, rest = closed
    body = _annotated(events, added, count)
    yield (sep if body else b"") + body + b"]" + rest


def _gzipped(pieces: Iterable[bytes]) -> Iterator[bytes]:
    squeeze = zlib.compressobj(1, zlib.DEFLATED, 31)  # (level 6: 3x the time for ~15% smaller)
    for piece in pieces:
        yield squeeze.compress(piece)
    yield squeeze.flush()


def _with_replay(found: Analysis, rank: int, what_if: str, added: dict[int, dict], extra: dict) -> bytes:
    """The whole annotated trace of rank ``rank`` with the replayed timeline appended."""
    doc, _ = reader._load_document(Path(found.traces[rank].path))
    if isinstance(doc, list):  # a bare list of events
        doc = {"traceEvents": doc}
    trace_events = doc["traceEvents"]
    replayed = replayed_events(found, rank, what_if, trace_events)
    for position, more in added.items():
        if 0 <= position < len(trace_events) and isinstance(trace_events[position], dict):
            event = trace_events[position]
            args = event.get("args")
            event["args"] = {**(args if isinstance(args, dict) else {}), **more}
    trace_events.extend(replayed)
    doc.setdefault("infer_opt", extra)
    return orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)


__all__ = ["KEYS", "REPLAY_PID", "annotations", "replayed_events", "write_augmented"]
