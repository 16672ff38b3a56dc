"""Read torch.profiler / Kineto Chrome-trace files into typed columns (:mod:`.events`).

One pass over the parsed events builds numpy columns (no object per event). Schema drift
between versions is absorbed here: ``kernel``/``Kernel``, ``gpu_memcpy``/``Memcpy``,
``cuda_runtime``/``Runtime``/``cuda_driver`` (HIP launches are recorded under the same
categories), ``External id``/``external id``, a ``stream`` given as a string, integer or
fractional ``ts``. GPU events are linked to their launch by ``args.correlation`` only (flow
events are incomplete in real traces), a launch to the innermost ``cpu_op`` on its thread whose
``[ts, ts + dur]`` contains the launch's ``ts``.
"""

from __future__ import annotations

import gc
import math
import os
import re
import stat
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.trace.events import (
    KERNEL,
    LAUNCH_BEFORE_WINDOW,
    MEMCPY,
    MEMSET,
    SYNC,
    CpuOps,
    GpuEvents,
    Launches,
    Step,
    TraceEvents,
)

#: the largest trace read (uncompressed bytes)
MAX_BYTES = 8 << 30
PARAM = "TRACE"

_LAUNCH, _CPU_OP, _ANNOT, _GPU_ANNOT = 10, 11, 12, 13
_CATEGORY = {
    "kernel": KERNEL,
    "Kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "Memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "Memset": MEMSET,
    "cuda_sync": SYNC,
    "cuda_runtime": _LAUNCH,
    "Runtime": _LAUNCH,
    "cuda_driver": _LAUNCH,
    "hip_runtime": _LAUNCH,
    "cpu_op": _CPU_OP,
    "Operator": _CPU_OP,
    "user_annotation": _ANNOT,
    "gpu_user_annotation": _GPU_ANNOT,
}
_STEP = re.compile(r"ProfilerStep#(\d+)$")
#: a string id (stream, thread) becomes this plus its crc32: stable across runs and files
STRING_ID_BASE = 1 << 40


_ID_LIMIT = 1 << 62


def _as_id(value: Any) -> int:
    """An id (stream, device, correlation, thread) as an int64; a string names one by its hash,
    a number beyond int64 (or not finite) too, so no column overflows."""
    if isinstance(value, bool) or value is None:
        return -1
    if isinstance(value, float):
        value = int(value) if math.isfinite(value) else str(value)
    if isinstance(value, int):
        return value if -_ID_LIMIT < value < _ID_LIMIT else STRING_ID_BASE + zlib.crc32(str(value).encode())
    text = str(value).strip()
    if text.lstrip("-").isdigit() and len(text) < 19:
        return int(text)
    return STRING_ID_BASE + zlib.crc32(text.encode())


# ---------------------------------------------------------------- bytes and JSON


def _read_bytes(path: Path) -> bytes:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InvalidInput(PARAM, str(path), "no such file") from None
    except OSError as err:
        raise InvalidInput(PARAM, str(path), f"cannot be read ({err.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInput(PARAM, str(path), "not a regular file (a trace is a .json or .json.gz file)")
    if info.st_size > MAX_BYTES:
        raise InvalidInput(PARAM, str(path), f"larger than {MAX_BYTES >> 30} GiB: too large to read")
    with open(path, "rb") as handle:
        data = handle.read()
    if not data.strip():
        raise InvalidInput(PARAM, str(path), "an empty file, not a trace")
    return data


def _gunzip(data: bytes, path: Path) -> tuple[bytes, bool]:
    """The decompressed bytes (every gzip member, in one go) and whether the stream was cut."""
    out, rest = [], data
    total = 0
    while rest:
        unz = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = unz.decompress(rest, MAX_BYTES + 1 - total)
        except zlib.error as err:
            if out or total:
                break
            raise InvalidInput(PARAM, str(path), f"a corrupt gzip file ({err})") from None
        total += len(chunk)
        out.append(chunk)
        if total > MAX_BYTES:
            raise InvalidInput(PARAM, str(path), f"over {MAX_BYTES >> 30} GiB uncompressed: too large")
        if not unz.eof:
            if total == 0:
                raise InvalidInput(PARAM, str(path), "a truncated gzip file with nothing readable")
            return b"".join(out), True
        rest = unz.unused_data.lstrip(b"\0")
    return b"".join(out), False


_EVENT_END = re.compile(rb"\}\s*(?:,|\])")


def _repair(data: bytes, path: Path) -> tuple[dict, int]:
    """A document cut mid-way, closed at its last complete event of ``traceEvents``."""
    start = data.find(b'"traceEvents"')
    bracket = data.find(b"[", start) if start >= 0 else -1
    if bracket < 0:
        raise InvalidInput(PARAM, str(path), "not valid JSON (and no traceEvents to recover)")
    ends = [m.start() for m in _EVENT_END.finditer(data, bracket, len(data))]
    for end in reversed(ends[-200:]):
        for suffix in (b"]}", b"}"):
            try:
                doc = orjson.loads(data[: end + 1] + suffix)
            except orjson.JSONDecodeError:
                continue
            if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
                return doc, len(doc["traceEvents"])
    raise InvalidInput(PARAM, str(path), "truncated JSON with no complete event to recover")


def _load_document(path: Path) -> tuple[dict, list[Notice]]:
    data = _read_bytes(path)
    notices: list[Notice] = []
    cut = False
    if data[:2] == b"\x1f\x8b":
        data, cut = _gunzip(data, path)
        if not data.strip():
            raise InvalidInput(PARAM, str(path), "an empty gzip file, not a trace")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        head = data.lstrip()[:1]
        if head not in (b"{", b"["):
            raise InvalidInput(PARAM, str(path), "not JSON: not a trace file") from None
        doc, kept = _repair(data, path)
        cut = True
        notices.append(Notice("trace_truncated", {"file": str(path), "events_kept": kept}))
    else:
        if cut:
            notices.append(Notice("trace_truncated", {"file": str(path), "events_kept": -1}))
    _check_document(doc, path)
    return doc, notices


def _check_document(doc: Any, path: Path) -> None:
    if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("infer-opt/"):
        raise InvalidInput(
            PARAM,
            str(path),
            f"an infer-opt result ({doc['schema']}), not a trace: read it with infer-opt report",
        )
    if isinstance(doc, list):
        raise InvalidInput(PARAM, str(path), "a JSON list, not a Chrome trace (no traceEvents)")
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise InvalidInput(PARAM, str(path), "JSON without a traceEvents list: not a torch.profiler trace")


# ---------------------------------------------------------------- one pass over the events


class _Columns:
    """Lists filled by the one pass, per category."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.gpu: list[tuple] = []
        self.gpu_args: list[dict] = []
        self.launch: list[tuple] = []
        self.ops: list[tuple] = []
        self.op_args: list[dict] = []
        self.steps: dict[int, list[float]] = {}
        self.gpu_steps: dict[int, list[float]] = {}
        self.bad_dur = 0

    def name_id(self, name: Any) -> int:
        name = "" if name is None else str(name)
        found = self.names.get(name)
        if found is None:
            found = self.names[name] = len(self.names)
        return found


def _scan(events: Sequence[Any], cols: _Columns | None = None, offset: int = 0) -> _Columns:
    cols = cols or _Columns()
    category = _CATEGORY
    for index, e in enumerate(events, start=offset):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = e.get("cat")
        kind = category.get(cat) if isinstance(cat, str) else None
        if kind is None:
            continue
        dur, ts = e.get("dur"), e.get("ts")
        try:
            ts = float(ts)
            dur = float(dur)
        except (TypeError, ValueError):
            cols.bad_dur += 1
            continue
        if not dur >= 0 or ts != ts:
            cols.bad_dur += 1
            continue
        args = e.get("args") or {}
        if not isinstance(args, dict):
            args = {}
        _add(cols, kind, e, ts, dur, args, index)
    return cols


def _add(cols: _Columns, kind: int, e: dict, ts: float, dur: float, args: dict, index: int) -> None:
    name = e.get("name")
    if kind <= SYNC:
        stream = args.get("stream", e.get("tid"))
        device = args.get("device", e.get("pid"))
        corr = args.get("correlation", -1)
        cols.gpu.append(
            (ts, dur, kind, cols.name_id(name), _as_id(stream), _as_id(device), _as_id(corr), index)
        )
        cols.gpu_args.append(args)
    elif kind == _LAUNCH:
        cols.launch.append(
            (
                ts,
                dur,
                cols.name_id(name),
                _as_id(e.get("pid")),
                _as_id(e.get("tid")),
                _as_id(args.get("correlation", -1)),
                index,
            )
        )
    else:
        step = _STEP.match(str(name)) if name is not None and "ProfilerStep#" in str(name) else None
        if step is not None and kind != _GPU_ANNOT:
            cols.steps.setdefault(int(step.group(1)), [ts, ts + dur])
        elif step is not None:
            cols.gpu_steps.setdefault(int(step.group(1)), [ts, ts + dur])
        elif kind == _CPU_OP:
            ext = args.get("External id", args.get("external id", -1))
            cols.ops.append(
                (ts, dur, cols.name_id(name), _as_id(e.get("pid")), _as_id(e.get("tid")), _as_id(ext), index)
            )
            cols.op_args.append(args)


#: files above this are parsed a chunk of events at a time (memory ~ the file plus one chunk)
CHUNKED_ABOVE = 64 << 20
CHUNK = 16 << 20
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def _read_chunked(path: Path) -> tuple[dict, _Columns] | None:
    """A large, well-formed trace parsed chunk by chunk; None (read it whole) for anything else:
    small, compressed-and-cut, truncated or odd files go through the full path and its checks."""
    try:
        info = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size < CHUNKED_ABOVE // 4:
        return None
    data = _read_bytes(path)
    if data[:2] == b"\x1f\x8b":
        data, cut = _gunzip(data, path)
        if cut:
            return None
    if len(data) < CHUNKED_ABOVE:
        return None
    key = data.find(b'"traceEvents"')
    bracket = data.find(b"[", key) if key >= 0 else -1
    if bracket < 0:
        return None
    cols, pos, count = _Columns(), bracket + 1, 0
    while True:
        m = _BOUNDARY.search(data, pos + CHUNK)
        if m is None:
            break
        try:
            events = orjson.loads(b"[" + data[pos : m.start() + 1] + b"]")
        except orjson.JSONDecodeError:
            return None
        _scan(events, cols, count)
        count += len(events)
        pos = m.end() - 1
    tail = data[pos:]
    end = tail.rfind(b"]")
    for _ in range(64):
        if end < 0:
            return None
        try:
            events = orjson.loads(b"[" + tail[: end + 1])
            meta = orjson.loads(data[:bracket] + b"[]" + tail[end + 1 :])
            break
        except orjson.JSONDecodeError:
            end = tail.rfind(b"]", 0, end)
    else:
        return None
    _scan(events, cols, count)
    _check_document(meta, path)
    meta.pop("traceEvents")
    return meta, cols


# ---------------------------------------------------------------- arrays, duplicates, links


def _table(rows: list[tuple], dtypes: Sequence[Any]) -> list[np.ndarray]:
    if not rows:
        return [np.zeros(0, dtype=d) for d in dtypes]
    cols = list(zip(*rows, strict=True))
    return [np.asarray(c, dtype=d) for c, d in zip(cols, dtypes, strict=True)]


def _dedup_order(keys: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """Indices sorted by time (keys[0]) with exact duplicates (every key equal) dropped."""
    n = keys[0].shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0
    order = np.lexsort(tuple(reversed(keys)))
    same = np.ones(n - 1, dtype=bool) if n > 1 else np.zeros(0, dtype=bool)
    for k in keys:
        s = k[order]
        same &= s[1:] == s[:-1]
    keep = np.concatenate(([True], ~same))
    return order[keep], int(same.sum())


def _thread_keys(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    pairs = np.stack([pid, tid], axis=1) if pid.size else np.zeros((0, 2), dtype=np.int64)
    return np.unique(pairs, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _parents(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The enclosing op of each op on its thread (ops sorted by ts, longer first at equal ts)."""
    parent = np.full(ts.shape[0], -1, dtype=np.int64)
    order = np.lexsort((-(end - ts), ts, thread))
    stacks: dict[int, list[int]] = {}
    thread_l, ts_l, end_l = thread.tolist(), ts.tolist(), end.tolist()
    for i in order.tolist():
        stack = stacks.setdefault(thread_l[i], [])
        t = ts_l[i]
        while stack and end_l[stack[-1]] < t:
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    return parent


def _enclosing(
    op_thread: np.ndarray,
    op_ts: np.ndarray,
    op_end: np.ndarray,
    parent: np.ndarray,
    thread: np.ndarray,
    t: np.ndarray,
) -> np.ndarray:
    """The innermost op on ``thread`` whose [ts, end] contains ``t`` (vectorised walk up)."""
    out = np.full(t.shape[0], -1, dtype=np.int64)
    if op_ts.size == 0 or t.size == 0:
        return out
    order = np.lexsort((-(op_end - op_ts), op_ts, op_thread))
    s_thread, s_ts = op_thread[order], op_ts[order]
    # position of the last op (in that order) on the same thread starting at or before t
    lo = np.searchsorted(s_thread, thread, side="left")
    hi = np.searchsorted(s_thread, thread, side="right")
    pos = np.empty(t.shape[0], dtype=np.int64)
    for th in np.unique(thread).tolist():
        sel = thread == th
        a, b = int(lo[sel][0]), int(hi[sel][0])
        pos[sel] = a + np.searchsorted(s_ts[a:b], t[sel], side="right") - 1
        pos[sel] = np.where(pos[sel] < a, -1, pos[sel])
    cand = np.where(pos >= 0, order[np.maximum(pos, 0)], -1)
    while True:
        live = cand >= 0
        bad = live & (op_end[np.maximum(cand, 0)] < t)
        if not bad.any():
            break
        cand[bad] = parent[cand[bad]]
    return cand


def _link_gpu(gpu_corr: np.ndarray, launch_corr: np.ndarray, launch_ts: np.ndarray) -> np.ndarray:
    out = np.full(gpu_corr.shape[0], -1, dtype=np.int64)
    valid = launch_corr >= 0
    if not valid.any() or gpu_corr.size == 0:
        return out
    idx = np.nonzero(valid)[0]
    order = idx[np.lexsort((launch_ts[idx], launch_corr[idx]))]
    sorted_corr = launch_corr[order]
    pos = np.searchsorted(sorted_corr, gpu_corr, side="left")
    pos_c = np.minimum(pos, sorted_corr.size - 1)
    hit = (gpu_corr >= 0) & (sorted_corr[pos_c] == gpu_corr)
    out[hit] = order[pos_c[hit]]
    first = launch_corr[valid][np.argmin(launch_ts[valid])]
    before = (~hit) & (gpu_corr >= 0) & (gpu_corr < min(first, sorted_corr[0]))
    out[before] = LAUNCH_BEFORE_WINDOW
    return out


def _steps(cols: _Columns) -> tuple[Step, ...]:
    numbers = sorted(set(cols.steps) | set(cols.gpu_steps))
    out = []
    for n in numbers:
        cpu = cols.steps.get(n)
        gpu = cols.gpu_steps.get(n)
        if cpu is None:  # a GPU-side annotation only: its span stands for both
            cpu = gpu
        out.append(Step(n, cpu[0], cpu[1], gpu[0] if gpu else None, gpu[1] if gpu else None))
    return tuple(out)


def _step_of(steps: tuple[Step, ...], t: np.ndarray, gpu: bool = False) -> np.ndarray:
    out = np.full(t.shape[0], -1, dtype=np.int32)
    for i, s in enumerate(steps):
        a, b = (s.gpu_start_us, s.gpu_end_us) if gpu else (s.cpu_start_us, s.cpu_end_us)
        if a is None:
            continue
        out[(out < 0) & (t >= a) & (t <= b)] = i
    return out


def _build(cols: _Columns, path: str) -> tuple[GpuEvents, Launches, CpuOps, tuple[Step, ...], list[Notice]]:
    notices: list[Notice] = []
    f8, i8, i4 = np.float64, np.int64, np.int32
    g = _table(cols.gpu, (f8, f8, np.int8, i4, i8, i8, i8, i8))
    la = _table(cols.launch, (f8, f8, i4, i8, i8, i8, i8))
    op = _table(cols.ops, (f8, f8, i4, i8, i8, i8, i8))
    g_keep, g_dup = _dedup_order([g[0], g[1], g[2], g[3], g[4], g[5], g[6]])
    l_keep, l_dup = _dedup_order([la[0], la[1], la[2], la[3], la[4], la[5]])
    o_keep, o_dup = _dedup_order([op[0], op[1], op[2], op[3], op[4], op[5]])
    if g_dup + l_dup + o_dup:
        notices.append(Notice("trace_duplicates", {"file": path, "events": g_dup + l_dup + o_dup}))
    g = [c[g_keep] for c in g]
    la = [c[l_keep] for c in la]
    op = [c[o_keep] for c in op]
    op_thread_all = _thread_keys(np.concatenate([op[3], la[3]]), np.concatenate([op[4], la[4]]))
    op_thread, l_thread = op_thread_all[: op[0].size], op_thread_all[op[0].size :]
    op_end = op[0] + op[1]
    parent = _parents(op_thread, op[0], op_end)
    l_op = _enclosing(op_thread, op[0], op_end, parent, l_thread, la[0])
    g_launch = _link_gpu(g[6], la[5], la[0])
    linked = g_launch >= 0
    g_op = np.full(g[0].size, -1, dtype=i8)
    g_op[linked] = l_op[g_launch[linked]]
    steps = _steps(cols)
    g_step = np.full(g[0].size, -1, dtype=i4)
    g_step[linked] = _step_of(steps, la[0][g_launch[linked]])
    g_step[~linked] = _step_of(steps, g[0][~linked], gpu=True)
    gpu = GpuEvents(
        g[0],
        g[1],
        g[2],
        g[3],
        g[4],
        g[5],
        g[6],
        g_launch,
        g_op,
        g_step,
        g[7],
        tuple(cols.gpu_args[i] for i in g_keep.tolist()),
    )
    launches = Launches(la[0], la[1], la[2], la[4], la[5], l_op, la[6])
    ops = CpuOps(
        op[0], op[1], op[2], op[4], parent, op[5], op[6], tuple(cols.op_args[i] for i in o_keep.tolist())
    )
    if cols.bad_dur:
        notices.append(Notice("trace_bad_durations", {"file": path, "events": cols.bad_dur}))
    return gpu, launches, ops, steps, notices


# ---------------------------------------------------------------- public


def read_trace(path: str | os.PathLike[str]) -> TraceEvents:
    """One trace file (``.json`` or ``.json.gz``) as columns; bad input raises
    :class:`~infer_opt.errors.InvalidInput` naming the file and what is wrong."""
    p = Path(path)
    enabled = gc.isenabled()
    gc.disable()  # millions of fresh dicts, none cyclic: the collector's passes would dominate
    try:
        chunked = _read_chunked(p)
        if chunked is not None:
            doc, cols = chunked
            notices = []
        else:
            doc, notices = _load_document(p)
            events = doc.pop("traceEvents")
            cols = _scan(events)
            del events
    finally:
        if enabled:
            gc.enable()
    gpu, launches, ops, steps, more = _build(cols, str(p))
    info = doc.pop("distributedInfo", None) or {}
    props = doc.pop("deviceProperties", None) or ()
    base = doc.pop("baseTimeNanoseconds", None)
    return TraceEvents(
        path=str(p),
        names=tuple(cols.names),
        gpu=gpu,
        launches=launches,
        ops=ops,
        steps=steps,
        rank=_maybe_int(info.get("rank")) if isinstance(info, dict) else None,
        world_size=_maybe_int(info.get("world_size")) if isinstance(info, dict) else None,
        base_time_ns=_maybe_int(base),
        device_properties=tuple(d for d in props if isinstance(d, dict)) if isinstance(props, list) else (),
        metadata=doc,
        warnings=tuple(notices + more),
    )


def _maybe_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def trace_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files named: a folder stands for its ``*.json``/``*.json.gz`` files (one per rank)."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith((".json", ".json.gz")))
            if not found:
                raise InvalidInput(PARAM, str(p), "a folder with no .json or .json.gz trace files")
            out += found
        else:
            out.append(p)
    return out


def read_traces(
    paths: Iterable[str | os.PathLike[str]], *, workers: int | None = None
) -> tuple[TraceEvents, ...]:
    """Every trace of ``paths`` (files, or folders of one file per rank), read in parallel
    across the cores, sorted by rank (``distributedInfo``; files without one keep their order)."""
    files = trace_files(paths)
    if len(files) == 1:
        traces = [read_trace(files[0])]
    else:
        with ProcessPoolExecutor(max_workers=min(len(files), workers or os.cpu_count() or 1)) as pool:
            traces = list(pool.map(read_trace, files))
    order = sorted(
        range(len(traces)), key=lambda i: (traces[i].rank if traces[i].rank is not None else 1 << 30, i)
    )
    return tuple(traces[i] for i in order)


__all__ = ["MAX_BYTES", "read_trace", "read_traces", "trace_files"]
