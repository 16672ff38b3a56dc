"""Read torch.profiler / Kineto Chrome-trace files into typed columns (:mod:`.events`).

One pass over the parsed events builds numpy columns (no object per event). Schema drift
between versions is absorbed here: ``kernel``/``Kernel``, ``gpu_memcpy``/``Memcpy``,
``cuda_runtime``/``Runtime``/``cuda_driver`` (HIP launches are recorded under the same
categories), ``cpu_op``/``Operator``, ``External id``/``external id``, a ``stream`` given as a
string, integer or fractional ``ts``, and the Trace Event Format's two top-level forms: the
object (``{"traceEvents": [...], ...}``, with or without metadata) and a bare JSON array of events
(older exports and other tools write it). A ``computeProperties`` table stands for
``deviceProperties``. GPU events are linked to their launch by ``args.correlation`` only (flow
events are incomplete in real traces), a launch to the innermost ``cpu_op`` on its thread whose
``[ts, ts + dur]`` contains the launch's ``ts``.
"""

from __future__ import annotations

import gc
import math
import multiprocessing
import os
import re
import stat
import threading
import zlib
from array import array
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np
import orjson

try:  # typed decoding: several times faster on large traces (see _scan_typed)
    import msgspec
except ImportError:  # pragma: no cover - orjson alone reads every trace, only slower
    msgspec = None

from infer_opt.errors import InvalidInput
from infer_opt.files import same_file_key
from infer_opt.notices import Notice
from infer_opt.trace.events import (
    GPU_ARG_KEYS,
    KERNEL,
    LAUNCH_BEFORE_WINDOW,
    MEMCPY,
    MEMSET,
    OP_ARG_KEYS,
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

#: a ``ts`` beyond this (µs) is no time: past 2**53 a float no longer holds a microsecond (Kineto's
#: times since the epoch are ~1.8e15)
TS_MAX = float(1 << 53)
#: a ``dur`` beyond this (µs, one day) is no event a profiler session records
DUR_MAX = 86_400e6


def _add_step(cols: Any, table: dict[int, list[list[float]]], number: int, span: list[float]) -> None:
    """Step ``number``'s span; another at another time is kept too and recorded as a repeated
    number (a file of two profiler sessions, each counting from 1): :func:`_steps`."""
    found = table.setdefault(number, [])
    if span not in found:
        found.append(span)
        if len(found) > 1:
            cols.repeated_steps.setdefault(number, None)


def _bad_time(cols: Any, index: int, name: Any, ts: Any, dur: Any) -> None:
    """Count an event dropped for its ``ts``/``dur`` (missing, not a number, non-finite, negative
    or past :data:`TS_MAX`/:data:`DUR_MAX`); the first one is kept to be named in the notice."""
    cols.bad_dur += 1
    if cols.bad_first is None:
        ok_ts = isinstance(ts, float) and 0 <= ts <= TS_MAX
        field, value = ("dur", dur) if ok_ts else ("ts", ts)
        cols.bad_first = (index, str(name)[:80], field, value if isinstance(value, (int, float)) else None)


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
    if not data or data.isspace():  # (strip() would copy a whole large file)
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
_BEFORE_VALUE, _AFTER_VALUE = frozenset(b":,["), frozenset(b",}]")


def _quote_non_finite(data: bytes) -> bytes:
    """``data`` with each bare ``NaN``/``Infinity``/``-Infinity`` value (which Python's json
    writes, and no JSON parser reads: the whole file would look cut short) quoted as a string:
    the scan reads it back as the float and drops its event, naming it (:func:`_bad_time`)."""
    if b"NaN" not in data and b"Infinity" not in data:  # (a fast search: the usual case)
        return data
    cuts: list[int] = []
    for token in (b"NaN", b"Infinity"):
        pos = data.find(token)
        while pos >= 0:
            a = pos - 1 if pos and data[pos - 1] == 0x2D else pos  # a leading minus sign
            b = pos + len(token)
            before = data[max(0, a - 64) : a].rstrip()
            after = data[b : b + 64].lstrip()
            if before and after and before[-1] in _BEFORE_VALUE and after[0] in _AFTER_VALUE:
                cuts += (a, b)
            pos = data.find(token, b)
    if not cuts:
        return data
    cuts.sort()
    parts, last = [], 0
    for i in range(0, len(cuts), 2):
        a, b = cuts[i], cuts[i + 1]
        parts += (data[last:a], b'"', data[a:b], b'"')
        last = b
    parts.append(data[last:])
    return b"".join(parts)


def _repair(data: bytes, path: Path) -> tuple[dict, int]:
    """A document cut mid-way, closed at its last complete event of ``traceEvents`` (or of a
    bare array of events)."""
    if data.lstrip()[:1] == b"[":
        return _repair_array(data, path)
    start = data.find(b'"traceEvents"')
    bracket = data.find(b"[", start) if start >= 0 else -1
    if bracket < 0:
        raise InvalidInput(PARAM, str(path), "not valid JSON (and no traceEvents to recover)")
    ends = [m.start() for m in _EVENT_END.finditer(data, bracket, len(data))]
    if data.rstrip().endswith(b"}"):  # cut right after an event (or inside one: then it fails)
        ends.append(len(data.rstrip()) - 1)
    for end in reversed(ends[-200:]):
        for suffix in (b"]}", b"}"):
            try:
                doc = orjson.loads(data[: end + 1] + suffix)
            except orjson.JSONDecodeError:
                continue
            if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
                return doc, len(doc["traceEvents"])
    raise InvalidInput(PARAM, str(path), "truncated JSON with no complete event to recover")


def _repair_array(data: bytes, path: Path) -> tuple[dict, int]:
    """A bare array of events cut mid-way, closed at its last complete event."""
    ends = [m.start() for m in _EVENT_END.finditer(data)]
    for end in reversed(ends[-200:]):
        try:
            events = orjson.loads(data[: end + 1] + b"]")
        except orjson.JSONDecodeError:
            continue
        if isinstance(events, list):
            return {"traceEvents": events}, len(events)
    raise InvalidInput(PARAM, str(path), "truncated JSON with no complete event to recover")


def _as_document(doc: Any) -> Any:
    """The Trace Event Format's array form (a bare list of events) as its object form."""
    if isinstance(doc, list) and all(isinstance(e, dict) for e in doc[:16]):
        return {"traceEvents": doc}
    return doc


def _load_document(path: Path) -> tuple[dict, list[Notice]]:
    data = _read_bytes(path)
    notices: list[Notice] = []
    cut = False
    if data[:2] == b"\x1f\x8b":
        data, cut = _gunzip(data, path)
        if not data or data.isspace():
            raise InvalidInput(PARAM, str(path), "an empty gzip file, not a trace")
    data = _quote_non_finite(data)
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
    doc = _as_document(doc)
    _check_document(doc, path)
    return doc, notices


def _load_typed(path: Path) -> tuple[dict, list] | None:
    """A whole well-formed trace: its metadata (orjson) and its events decoded typed (msgspec);
    None for anything else (cut, not JSON, odd events): :func:`_load_document` reads it."""
    if msgspec is None:
        return None
    data = _read_bytes(path)
    if data[:2] == b"\x1f\x8b":
        data, cut = _gunzip(data, path)
        if cut or not data or data.isspace():
            return None
    data = _quote_non_finite(data)
    try:
        top = _TOP.decode(data)
    except _TYPED_ERRORS:
        return None
    raw = top.pop("traceEvents", None)
    events = _decode_typed(raw) if raw is not None else None
    if events is None:
        return None
    del raw, data
    try:
        meta = {k: orjson.loads(bytes(v)) for k, v in top.items()}
    except orjson.JSONDecodeError:
        return None
    _check_document({**meta, "traceEvents": []}, path)
    return meta, events


def _check_document(doc: Any, path: Path) -> None:
    if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("infer-opt/"):
        raise InvalidInput(
            PARAM,
            str(path),
            f"an infer-opt result ({doc['schema']}), not a trace: read it with infer-opt report",
        )
    if isinstance(doc, list):
        raise InvalidInput(PARAM, str(path), "a JSON list whose items are not trace events (objects)")
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise InvalidInput(PARAM, str(path), "JSON without a traceEvents list: not a torch.profiler trace")


# ---------------------------------------------------------------- one pass over the events


class _Columns:
    """Typed columns filled by the one pass, per category (``array`` buffers: 8 bytes a value,
    no Python object per event), and each event's kept ``args``, interned."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        # GPU events: ts, dur, kind, name, stream, device, correlation, file position
        self.gpu = tuple(array(t) for t in "ddbiqqqq")
        self.gpu_args: list[dict] = []
        # launches: ts, dur, name, pid, tid, correlation, file position
        self.launch = tuple(array(t) for t in "ddiqqqq")
        # cpu_ops: ts, dur, name, pid, tid, external id, file position
        self.ops = tuple(array(t) for t in "ddiqqqq")
        self.op_args: list[dict] = []
        self.steps: dict[int, list[list[float]]] = {}
        self.gpu_steps: dict[int, list[list[float]]] = {}
        self.bad_dur = 0
        #: the first event dropped for its times: (position, name, field, value or None)
        self.bad_first: tuple | None = None
        #: step numbers seen again at another time (only the first is that step), in order
        self.repeated_steps: dict[int, None] = {}
        #: distinct kept args with an impossible size, and the first: (key, value as JSON)
        self.bad_args = 0
        self.bad_args_first: tuple[str, str] | None = None
        # kept args by their JSON bytes: the same op with the same shapes shares one dict
        self.interned: dict[bytes, dict] = {}
        self.typed_interned: dict[str, dict[tuple, dict]] = {}

    def name_id(self, name: Any) -> int:
        name = "" if name is None else str(name)
        found = self.names.get(name)
        if found is None:
            found = self.names[name] = len(self.names)
        return found

    def kept(self, args: dict, keys: tuple[str, ...]) -> dict:
        """The ``keys`` of ``args`` the analyses read, one shared (read-only) dict per content."""
        sub = {k: args[k] for k in keys if k in args}
        if not sub:
            return _NO_ARGS
        try:
            key = orjson.dumps(sub)
        except (TypeError, orjson.JSONEncodeError):
            return sub
        found = self.interned.get(key)
        if found is None:
            found = self.interned[key] = _checked_sizes(self, sub)
        return found


#: the args of an event without any kept key (shared: never modified)
_NO_ARGS: dict = {}
#: kept args holding sizes: each number in them a whole number in [0, 2**53] (a negative or
#: non-finite size is dropped with its key, named in a notice: the analyses see no size)
_SIZE_ARGS = ("In msg nelems", "Out msg nelems", "Group size", "Input Dims", "Input Strides")


_NON_FINITE_WORDS = frozenset(("NaN", "Infinity", "-Infinity"))


def _bad_size(value: Any) -> bool:
    if isinstance(value, list):
        return any(_bad_size(v) for v in value)
    if isinstance(value, str):  # a word (a dtype's): not a size; a bare NaN/Infinity quoted
        return value in _NON_FINITE_WORDS
    if value is None:
        return False
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True
    return not (0 <= value <= TS_MAX and float(value).is_integer())


def _checked_sizes(cols: Any, found: dict) -> dict:
    """``found`` (a fresh kept args dict) without its impossible sizes, the first one recorded."""
    bad = [k for k in _SIZE_ARGS if k in found and _bad_size(found[k])]
    if not bad:
        return found
    cols.bad_args += 1
    if cols.bad_args_first is None:
        value = found[bad[0]]
        cols.bad_args_first = (bad[0], orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()[:60])
    return {k: v for k, v in found.items() if k not in bad} or _NO_ARGS


def _scan(events: Sequence[Any], cols: _Columns | None = None, offset: int = 0) -> _Columns:
    cols = cols or _Columns()
    category, names, lim = _CATEGORY, cols.names, _ID_LIMIT
    g_ts, g_dur, g_kind, g_name, g_stream, g_device, g_corr, g_index = (c.append for c in cols.gpu)
    l_ts, l_dur, l_name, l_pid, l_tid, l_corr, l_index = (c.append for c in cols.launch)
    o_ts, o_dur, o_name, o_pid, o_tid, o_ext, o_index = (c.append for c in cols.ops)
    g_args, o_args, kept = cols.gpu_args.append, cols.op_args.append, cols.kept
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
            _bad_time(cols, index, e.get("name"), ts if isinstance(ts, float) else None, None)
            continue
        if not (0 <= ts <= TS_MAX and 0 <= dur <= DUR_MAX):
            _bad_time(cols, index, e.get("name"), ts, dur)
            continue
        args = e.get("args") or _NO_ARGS
        if not isinstance(args, dict):
            args = _NO_ARGS
        name = e.get("name")
        if kind == _LAUNCH:
            nid = names.get(name) if type(name) is str else None
            l_ts(ts)
            l_dur(dur)
            l_name(cols.name_id(name) if nid is None else nid)
            pid, tid, corr = e.get("pid"), e.get("tid"), args.get("correlation", -1)
            l_pid(pid if type(pid) is int and -lim < pid < lim else _as_id(pid))
            l_tid(tid if type(tid) is int and -lim < tid < lim else _as_id(tid))
            l_corr(corr if type(corr) is int and -lim < corr < lim else _as_id(corr))
            l_index(index)
        elif kind <= SYNC:
            nid = names.get(name) if type(name) is str else None
            stream = args.get("stream", e.get("tid"))
            device = args.get("device", e.get("pid"))
            corr = args.get("correlation", -1)
            g_ts(ts)
            g_dur(dur)
            g_kind(kind)
            g_name(cols.name_id(name) if nid is None else nid)
            g_stream(stream if type(stream) is int and -lim < stream < lim else _as_id(stream))
            g_device(device if type(device) is int and -lim < device < lim else _as_id(device))
            g_corr(corr if type(corr) is int and -lim < corr < lim else _as_id(corr))
            g_index(index)
            g_args(kept(args, GPU_ARG_KEYS) if args else _NO_ARGS)
        else:
            step = _STEP.match(str(name)) if name is not None and "ProfilerStep#" in str(name) else None
            if step is not None and kind != _GPU_ANNOT:
                _add_step(cols, cols.steps, int(step.group(1)), [ts, ts + dur])
            elif step is not None:
                _add_step(cols, cols.gpu_steps, int(step.group(1)), [ts, ts + dur])
            elif kind == _CPU_OP:
                nid = names.get(name) if type(name) is str else None
                ext = args.get("External id", args.get("external id", -1))
                pid, tid = e.get("pid"), e.get("tid")
                o_ts(ts)
                o_dur(dur)
                o_name(cols.name_id(name) if nid is None else nid)
                o_pid(pid if type(pid) is int and -lim < pid < lim else _as_id(pid))
                o_tid(tid if type(tid) is int and -lim < tid < lim else _as_id(tid))
                o_ext(ext if type(ext) is int and -lim < ext < lim else _as_id(ext))
                o_index(index)
                o_args(kept(args, OP_ARG_KEYS) if args else _NO_ARGS)
    return cols


# ---------------------------------------------------------------- typed decoding (msgspec)
#
# msgspec decodes each event straight into a slotted struct of the fields read here: the keys
# nobody reads (a kernel's grid, registers, ...) are skipped without building an object, and
# the kept args are taken as raw JSON bytes, parsed (by orjson, as the plain path does) once
# per distinct content. A chunk msgspec refuses (an event that is not an object, args that are
# not one, a number out of range) goes through orjson and :func:`_scan` instead: both give the
# same columns (a test checks it).

if msgspec is not None:
    _U: Any = msgspec.UNSET

    class _Args(msgspec.Struct, gc=False):
        correlation: Any = _U
        device: Any = _U
        external_id: Any = msgspec.field(name="External id", default=_U)
        external_id_lc: Any = msgspec.field(name="external id", default=_U)
        # GPU_ARG_KEYS, in that order
        stream: msgspec.Raw | msgspec.UnsetType = _U
        collective: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="Collective name", default=_U)
        collective_lc: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="collective_name", default=_U)
        in_nelems: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="In msg nelems", default=_U)
        out_nelems: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="Out msg nelems", default=_U)
        group_size: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="Group size", default=_U)
        dtype: msgspec.Raw | msgspec.UnsetType = _U
        # OP_ARG_KEYS but stream, in that order
        dims: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="Input Dims", default=_U)
        types: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="Input type", default=_U)
        strides: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="Input Strides", default=_U)
        concrete: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="Concrete Inputs", default=_U)
        # GPU_ARG_KEYS' last (appended: the positions above stay)
        group: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="Process Group Name", default=_U)
        # then a cuda_sync record's wait (GPU_ARG_KEYS' last two)
        wait_stream: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="wait_on_stream", default=_U)
        wait_record: msgspec.Raw | msgspec.UnsetType = msgspec.field(
            name="wait_on_cuda_event_record_corr_id", default=_U
        )

    class _Event(msgspec.Struct, gc=False):
        ph: Any = _U
        cat: Any = _U
        name: Any = _U
        pid: Any = _U
        tid: Any = _U
        ts: Any = _U
        dur: Any = _U
        args: _Args | None = None

    _EVENTS = msgspec.json.Decoder(list[_Event])
    _TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
    _TYPED_ERRORS: tuple[type[Exception], ...] = (msgspec.DecodeError, msgspec.ValidationError)
else:  # pragma: no cover - orjson alone reads every trace, only slower
    _U = object()
    _TYPED_ERRORS = ()

#: a typed args' collective, group and wait fields when it has none (astuple positions 5 to 10, 15 to 17)
_NO_COLLECTIVE = (_U,) * 9 if msgspec is not None else ()
#: ints orjson keeps as ints (beyond, it parses them as floats; msgspec keeps them)
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1


def _as_orjson(value: Any) -> Any:
    """A value msgspec decoded, as orjson would have it (None for a missing key)."""
    if value is _U:
        return None
    if type(value) is int and not _INT_MIN <= value <= _INT_MAX:
        return float(value)
    return value


def _decode_typed(data: bytes) -> list | None:
    if msgspec is None:
        return None
    try:
        return _EVENTS.decode(data)
    except _TYPED_ERRORS:
        return None


def _typed_kept(raws: tuple, keys: tuple[str, ...], interned: dict[tuple, dict], cols: Any) -> dict:
    """The kept args of a typed event (its raw fields, in ``keys`` order): one dict per distinct
    raw content, parsed by orjson as the plain path parses it."""
    key = tuple([None if r is _U else bytes(r) for r in raws])
    found = interned.get(key)
    if found is None:
        found = {k: orjson.loads(r) for k, r in zip(keys, key, strict=True) if r is not None}
        found = interned[key] = _checked_sizes(cols, found) if found else _NO_ARGS
    return found


def _typed_times(ts: Any, dur: Any) -> tuple[Any, Any]:
    """A typed event's ts and dur as floats (None where one is not a number)."""
    out = []
    for value in (ts, dur):
        try:
            out.append(float(_as_orjson(value)))
        except (TypeError, ValueError):
            out.append(None)
    return out[0], out[1]


def _typed_gpu_args(f: tuple, pid: Any, interned: dict, streams: dict, cols: Any) -> tuple[dict, Any, Any]:
    """A GPU event's kept args, device and correlation from its typed args' fields."""
    corr = -1 if f[0] is _U else f[0]
    device = pid if f[1] is _U else f[1]
    if f[5:11] + f[15:18] != _NO_COLLECTIVE:
        return _typed_kept(f[4:11] + f[15:18], GPU_ARG_KEYS, interned, cols), device, corr
    if f[4] is _U:
        return _NO_ARGS, device, corr
    raw = bytes(f[4])  # the common case: a kernel with its stream only
    kept = streams.get(raw)
    if kept is None:
        kept = streams[raw] = {"stream": orjson.loads(raw)}
    return kept, device, corr


def _typed_op_args(f: tuple, interned: dict, cols: Any) -> tuple[dict, Any]:
    """A cpu_op's kept args and external id from its typed args' fields."""
    ext = f[2]
    if ext is _U:
        ext = -1 if f[3] is _U else f[3]
    return _typed_kept((*f[11:15], f[4]), OP_ARG_KEYS, interned, cols), ext


def _typed_step(cols: _Columns, kind: int, name: Any, ts: float, dur: float) -> None:
    step = _STEP.match(str(name)) if name is not None and "ProfilerStep#" in str(name) else None
    if step is not None and kind != _GPU_ANNOT:
        _add_step(cols, cols.steps, int(step.group(1)), [ts, ts + dur])
    elif step is not None:
        _add_step(cols, cols.gpu_steps, int(step.group(1)), [ts, ts + dur])


def _scan_typed(events: list, cols: _Columns, offset: int = 0) -> _Columns:
    """:func:`_scan` over msgspec-decoded events (module comment above)."""
    category, names, lim, unset = _CATEGORY, cols.names, _ID_LIMIT, _U
    g_ts, g_dur, g_kind, g_name, g_stream, g_device, g_corr, g_index = (c.append for c in cols.gpu)
    l_ts, l_dur, l_name, l_pid, l_tid, l_corr, l_index = (c.append for c in cols.launch)
    o_ts, o_dur, o_name, o_pid, o_tid, o_ext, o_index = (c.append for c in cols.ops)
    g_args, o_args = cols.gpu_args.append, cols.op_args.append
    g_interned: dict[tuple, dict] = cols.typed_interned.setdefault("gpu", {})
    o_interned: dict[tuple, dict] = cols.typed_interned.setdefault("op", {})
    g_streams: dict[bytes, dict] = cols.typed_interned.setdefault("stream", {})  # type: ignore[assignment]
    astuple = msgspec.structs.astuple
    for index, e in enumerate(events, start=offset):
        if e.ph != "X":
            continue
        cat = e.cat
        kind = category.get(cat) if type(cat) is str else None
        if kind is None:
            continue
        ts, dur = e.ts, e.dur
        if type(ts) is not float or type(dur) is not float:
            ts, dur = _typed_times(ts, dur)
            if ts is None or dur is None:
                _bad_time(cols, index, _as_orjson(e.name), ts, dur)
                continue
        if not (0 <= ts <= TS_MAX and 0 <= dur <= DUR_MAX):
            _bad_time(cols, index, _as_orjson(e.name), ts, dur)
            continue
        a, name = e.args, e.name
        nid = names.get(name) if type(name) is str else None
        if kind == _LAUNCH:
            if nid is None:
                nid = cols.name_id(_as_orjson(name))
            pid, tid = e.pid, e.tid
            corr = -1 if a is None or a.correlation is unset else a.correlation
            l_ts(ts)
            l_dur(dur)
            l_name(nid)
            l_pid(pid if type(pid) is int and -lim < pid < lim else _as_id(_as_orjson(pid)))
            l_tid(tid if type(tid) is int and -lim < tid < lim else _as_id(_as_orjson(tid)))
            l_corr(corr if type(corr) is int and -lim < corr < lim else _as_id(_as_orjson(corr)))
            l_index(index)
        elif kind <= SYNC:
            if nid is None:
                nid = cols.name_id(_as_orjson(name))
            if a is None:
                kept, device, corr = _NO_ARGS, e.pid, -1
            else:
                kept, device, corr = _typed_gpu_args(astuple(a), e.pid, g_interned, g_streams, cols)
            stream = kept["stream"] if "stream" in kept else _as_orjson(e.tid)
            g_ts(ts)
            g_dur(dur)
            g_kind(kind)
            g_name(nid)
            g_stream(stream if type(stream) is int and -lim < stream < lim else _as_id(stream))
            g_device(device if type(device) is int and -lim < device < lim else _as_id(_as_orjson(device)))
            g_corr(corr if type(corr) is int and -lim < corr < lim else _as_id(_as_orjson(corr)))
            g_index(index)
            g_args(kept)
        elif kind == _CPU_OP and not (type(name) is str and "ProfilerStep#" in name and _STEP.match(name)):
            kept, ext = (_NO_ARGS, -1) if a is None else _typed_op_args(astuple(a), o_interned, cols)
            if nid is None:
                nid = cols.name_id(_as_orjson(name))
            pid, tid = e.pid, e.tid
            o_ts(ts)
            o_dur(dur)
            o_name(nid)
            o_pid(pid if type(pid) is int and -lim < pid < lim else _as_id(_as_orjson(pid)))
            o_tid(tid if type(tid) is int and -lim < tid < lim else _as_id(_as_orjson(tid)))
            o_ext(ext if type(ext) is int and -lim < ext < lim else _as_id(_as_orjson(ext)))
            o_index(index)
            o_args(kept)
        else:
            _typed_step(cols, kind, _as_orjson(name), ts, dur)
    return cols


#: files above this are parsed a chunk of events at a time (memory ~ the file plus one chunk)
CHUNKED_ABOVE = 64 << 20
CHUNK = 16 << 20
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def _scan_chunks(data: bytes, spans: Sequence[tuple[int, int]]) -> tuple[_Columns, int] | None:
    """The columns of the events in ``data[a:b]`` for each ``(a, b)`` of ``spans`` in turn (event
    positions counted from the first span) and the number of events; None when one is not JSON."""
    cols, count = _Columns(), 0
    buf, whole = bytearray(), memoryview(data)
    for a, b in spans:
        n = b - a
        if len(buf) < n + 2:  # one buffer for every chunk: no fresh pages to fault in each time
            buf = bytearray(n + 2 + (n >> 3))
        buf[0] = 0x5B  # [
        buf[1 : n + 1] = whole[a:b]
        buf[n + 1] = 0x5D  # ]
        chunk = memoryview(buf)[: n + 2]
        events = _decode_typed(chunk)
        if events is not None:
            _scan_typed(events, cols, count)
        else:
            try:
                events = orjson.loads(chunk)
            except orjson.JSONDecodeError:
                return None
            _scan(events, cols, count)
        count += len(events)
        del events, chunk
    return cols, count


#: the document a scan worker reads (inherited through fork, never pickled)
_SHARED: bytes = b""


def _scan_worker(spans: Sequence[tuple[int, int]]) -> tuple[_Columns, int] | None:
    gc.disable()
    found = _scan_chunks(_SHARED, spans)
    if found is not None:
        found[0].interned.clear()  # the parent interns its own
        found[0].typed_interned.clear()
    return found


def scan_workers(spans: int) -> int:
    """Processes a large trace's chunks are scanned by: the cores this process may use (at most
    4), 1 for a few chunks, inside a worker already (a folder of ranks), without fork, or with
    other threads running (a notebook's: forking them is unsafe)."""
    if spans < 4 or multiprocessing.parent_process() is not None or threading.active_count() > 1:
        return 1
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, 4, spans // 2))


def _merge(into: _Columns, part: _Columns, offset: int) -> None:
    """``part`` (the next spans' columns) appended to ``into``: names renumbered, positions
    shifted by ``offset``, steps kept where first seen (as one pass over the file does)."""
    remap = np.array([into.name_id(n) for n in part.names], dtype=np.int32)
    for mine, theirs, name_col, index_col in ((into.gpu, part.gpu, 3, 7), (into.launch, part.launch, 2, 6),
                                              (into.ops, part.ops, 2, 6)):  # fmt: skip
        for j, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            if j == name_col and len(b):
                a.frombytes(remap[np.frombuffer(b, dtype=np.int32)].tobytes())
            elif j == index_col and len(b):
                a.frombytes((np.frombuffer(b, dtype=np.int64) + offset).tobytes())
            else:
                a.extend(b)
    into.gpu_args += part.gpu_args
    into.op_args += part.op_args
    for table, theirs in ((into.steps, part.steps), (into.gpu_steps, part.gpu_steps)):
        for number, spans in theirs.items():
            for span in spans:
                _add_step(into, table, number, span)
    for number in part.repeated_steps:
        into.repeated_steps.setdefault(number, None)
    into.bad_dur += part.bad_dur
    into.bad_args += part.bad_args
    into.bad_args_first = into.bad_args_first or part.bad_args_first
    if into.bad_first is None and part.bad_first is not None:
        into.bad_first = (part.bad_first[0] + offset, *part.bad_first[1:])


def _scan_spans(data: bytes, spans: list[tuple[int, int]]) -> tuple[_Columns, int] | None:
    """:func:`_scan_chunks` over every span, the later ones in worker processes (forked: they
    share ``data``), merged in file order: the same columns as one pass (a test checks it)."""
    workers = scan_workers(len(spans))
    if workers <= 1:
        return _scan_chunks(data, spans)
    global _SHARED
    step = -(-len(spans) // workers)
    groups = [spans[i : i + step] for i in range(0, len(spans), step)]
    _SHARED = data
    try:
        with ProcessPoolExecutor(len(groups) - 1, mp_context=multiprocessing.get_context("fork")) as pool:
            later = [pool.submit(_scan_worker, g) for g in groups[1:]]
            found = _scan_chunks(data, groups[0])
            parts = [f.result() for f in later]
    except (OSError, BrokenProcessPool):  # no worker could start or one died: one pass here
        return _scan_chunks(data, spans)
    finally:
        _SHARED = b""
    if found is None or any(p is None for p in parts):
        return None
    cols, count = found
    for part in parts:
        assert part is not None
        _merge(cols, part[0], count)
        count += part[1]
    return cols, count


def _read_chunked(path: Path) -> tuple[dict, _Columns, list[Notice]] | None:
    """A large trace parsed chunk by chunk (memory ~ the file plus one chunk), a cut one (a
    profiler killed mid-write, a cut gzip) closed at its last complete event; None (read it
    whole) for anything else: small or odd files go through the full path and its checks."""
    try:
        info = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size < CHUNKED_ABOVE // 4:
        return None
    data = _read_bytes(path)
    cut = False
    if data[:2] == b"\x1f\x8b":
        data, cut = _gunzip(data, path)
    if len(data) < CHUNKED_ABOVE:
        return None
    data = _quote_non_finite(data)
    key = data.find(b'"traceEvents"')
    bracket = data.find(b"[", key) if key >= 0 else -1
    if bracket < 0:
        return None
    spans, pos = [], bracket + 1
    while True:
        m = _BOUNDARY.search(data, pos + CHUNK)
        if m is None:
            break
        spans.append((pos, m.start() + 1))
        pos = m.end() - 1
    found = _scan_spans(data, spans)
    if found is None:
        return _too_large_whole(path, data, "an event is not JSON (a corrupt file?)")
    cols, count = found
    tail = data[pos:]
    closed = _closed_tail(data[:bracket], tail)
    if closed is None:
        return _too_large_whole(path, data, "its end is neither a whole document nor one cut after an event")
    events, meta, repaired, _ = closed
    _scan(events, cols, count)
    _check_document(meta, path)
    meta.pop("traceEvents")
    notices = []
    if cut or repaired:
        kept = count + len(events) if repaired else -1
        notices.append(Notice("trace_truncated", {"file": str(path), "events_kept": kept}))
    return meta, cols, notices


#: a large trace the chunked reading refuses is read whole up to this size (its objects take ~10x)
WHOLE_MAX = 256 << 20


def _too_large_whole(path: Path, data: bytes, why: str) -> None:
    """None (read ``data`` whole) when it is small enough to; refused saying why otherwise."""
    if len(data) <= WHOLE_MAX:
        return None
    raise InvalidInput(
        PARAM,
        str(path),
        f"not readable a chunk of events at a time ({why}): a trace over {WHOLE_MAX >> 20} MB "
        "is read only so (whole, its events would not fit in memory)",
    )


def _closed_tail(head: bytes, tail: bytes) -> tuple[list, dict, bool, bytes] | None:
    """The events of ``tail`` (a large trace's last events and what follows them), the
    document's metadata (``head``: everything before the events' ``[``), whether the tail was
    cut short (then closed at its last complete event) and the bytes after the events' ``]``
    (``}`` for a cut one). None when neither reads."""
    whole = tail.rstrip().endswith(b"}")  # (a document closes its top object; a cut one seldom)
    end = tail.rfind(b"]") if whole else -1
    for _ in range(64):  # the events' closing bracket: the last "]" that parses
        if end < 0:
            break
        try:
            events = orjson.loads(b"[" + tail[: end + 1])
            return events, orjson.loads(head + b"[]" + tail[end + 1 :]), False, tail[end + 1 :]
        except orjson.JSONDecodeError:
            end = tail.rfind(b"]", 0, end)
    try:  # cut short: what came after the events is lost
        meta = orjson.loads(head + b"[]}")
    except orjson.JSONDecodeError:
        return None
    ends = [m.start() for m in _EVENT_END.finditer(tail)]
    if tail.rstrip().endswith(b"}"):
        ends.append(len(tail.rstrip()) - 1)
    for end in reversed(ends[-200:]):
        try:
            events = orjson.loads(b"[" + tail[: end + 1] + b"]")
        except orjson.JSONDecodeError:
            continue
        return events, meta, True, b"}"
    return None


# ---------------------------------------------------------------- arrays, duplicates, links


def _table(columns: Sequence[array], dtypes: Sequence[Any]) -> list[np.ndarray]:
    return [
        np.frombuffer(c, dtype=d) if len(c) else np.zeros(0, dtype=d)
        for c, d in zip(columns, dtypes, strict=True)
    ]


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
    """Each (pid, tid) pair's rank among the distinct pairs, in (pid, tid) order (as
    ``np.unique(pairs, axis=0)`` numbers them, without its slow sort of rows)."""
    if pid.size == 0:
        return np.zeros(0, dtype=np.int64)
    p = np.unique(pid, return_inverse=True)[1].reshape(-1).astype(np.int64)
    t_rank = np.unique(tid, return_inverse=True)[1].reshape(-1).astype(np.int64)
    pair = p * (int(t_rank.max()) + 1) + t_rank
    return np.unique(pair, return_inverse=True)[1].reshape(-1).astype(np.int64)


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
    """Each ``ProfilerStep#N`` (CPU span and GPU-side span). A number recorded at several times
    (several profiler sessions in one file) keeps each apart: the steps are then numbered in
    time order from the least number, said in a notice (``trace_repeated_steps``)."""
    found = []
    for n in sorted(set(cols.steps) | set(cols.gpu_steps)):
        cpus, gpus = sorted(cols.steps.get(n, [])), sorted(cols.gpu_steps.get(n, []))
        if len(gpus) != len(cpus) and cpus:  # which GPU span goes with which CPU one is unknown
            gpus = []
        for k, cpu in enumerate(cpus or gpus):  # a GPU-side annotation only: its span stands for both
            gpu = gpus[k] if gpus else None
            found.append((n, cpu, gpu))
    if cols.repeated_steps:
        first = found[0][0]
        found = [(first + i, cpu, gpu) for i, (_, cpu, gpu) in enumerate(sorted(found, key=lambda f: f[1]))]
    return tuple(
        Step(n, cpu[0], cpu[1], gpu[0] if gpu else None, gpu[1] if gpu else None) for n, cpu, gpu in found
    )


#: the share of a step's launched GPU events its GPU-side span must hold (Kineto's span is
#: their extent, so a true one holds them all; a few may be skewed or spill by rounding)
GPU_SPAN_HOLDS = 0.9


def _trusted_gpu_spans(
    steps: tuple[Step, ...], g_step: np.ndarray, g_start: np.ndarray, g_end: np.ndarray
) -> tuple[tuple[Step, ...], dict[str, Any]]:
    """``steps`` without the GPU-side spans that do not hold their own step: a GPU-side
    ``ProfilerStep`` annotation that holds (start to end, within 1 µs) fewer than
    :data:`GPU_SPAN_HOLDS` of the GPU events its step launched is no window of that step (a ROCm
    trace's annotation can be a few µs long and sit anywhere in its step, or end halfway); the
    step is then measured from its events. With what was dropped (how many steps; the first
    one's number, span and events held) for a notice, empty when nothing was."""
    if not steps or not any(s.gpu_start_us is not None for s in steps):
        return steps, {}
    lo = np.array([s.gpu_start_us if s.gpu_start_us is not None else np.nan for s in steps])
    hi = np.array([s.gpu_end_us if s.gpu_end_us is not None else np.nan for s in steps])
    mine = g_step >= 0
    which = g_step[mine]
    inside = (g_start[mine] >= lo[which] - 1.0) & (g_end[mine] <= hi[which] + 1.0)
    events = np.bincount(which, minlength=len(steps))
    held = np.bincount(which, weights=inside, minlength=len(steps)).astype(np.int64)
    out, first, count = [], None, 0
    for i, s in enumerate(steps):
        spanned = s.gpu_start_us is not None and s.gpu_end_us is not None
        if not spanned or not events[i] or held[i] >= GPU_SPAN_HOLDS * events[i]:
            out.append(s)
            continue
        count += 1
        if first is None:
            first = {"step": s.number, "span_s": (s.gpu_end_us - s.gpu_start_us) * 1e-6, "held": int(held[i]),
                     "events": int(events[i])}  # fmt: skip
        out.append(Step(s.number, s.cpu_start_us, s.cpu_end_us))
    return tuple(out), ({"steps": count, **first} if first is not None else {})


def _step_of(steps: tuple[Step, ...], t: np.ndarray, gpu: bool = False) -> np.ndarray:
    out = np.full(t.shape[0], -1, dtype=np.int32)
    for i, s in enumerate(steps):
        a, b = (s.gpu_start_us, s.gpu_end_us) if gpu else (s.cpu_start_us, s.cpu_end_us)
        if a is None:
            continue
        out[(out < 0) & (t >= a) & (t <= b)] = i
    return out


def _pick(items: list[dict], keep: np.ndarray) -> tuple[dict, ...]:
    if keep.size == items.__len__() and (keep.size == 0 or bool(np.all(keep == np.arange(keep.size)))):
        return tuple(items)
    return tuple(items[i] for i in keep.tolist())


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
    steps, dropped = _trusted_gpu_spans(steps, g_step, g[0], g[0] + g[1])
    if dropped:
        notices.append(Notice("trace_gpu_step_spans_ignored", {"file": path, **dropped}))
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
        _pick(cols.gpu_args, g_keep),
    )
    launches = Launches(la[0], la[1], la[2], la[4], la[5], l_op, la[6])
    ops = CpuOps(op[0], op[1], op[2], op[4], parent, op[5], op[6], _pick(cols.op_args, o_keep))
    if cols.bad_dur:
        values: dict[str, Any] = {"file": path, "events": cols.bad_dur}
        if cols.bad_first is not None:
            index, name, field, value = cols.bad_first
            values.update(index=index, name=name, field=field, value=_json_number(value))
        notices.append(Notice("trace_bad_durations", values))
    if cols.repeated_steps:
        numbers = sorted(cols.repeated_steps)
        notices.append(Notice("trace_repeated_steps", {"file": path, "steps": tuple(numbers[:5]),
                                                       "count": len(numbers), "first": steps[0].number,
                                                       "last": steps[-1].number}))  # fmt: skip
    if cols.bad_args_first is not None:
        key, value = cols.bad_args_first
        values = {"file": path, "args": cols.bad_args, "key": key, "value": value}
        notices.append(Notice("trace_bad_sizes", values))
    return gpu, launches, ops, steps, notices


# ---------------------------------------------------------------- public


def read_trace(path: str | os.PathLike[str]) -> TraceEvents:
    """One trace file (``.json`` or ``.json.gz``) as columns; bad input raises
    :class:`~infer_opt.errors.InvalidInput` naming the file and what is wrong."""
    p = Path(path)
    enabled = gc.isenabled()
    gc.disable()  # millions of fresh dicts, none cyclic: the collector's passes would dominate
    # (what stays is columns and a few interned args dicts, so enabling it again costs nothing)
    try:
        chunked = _read_chunked(p)
        if chunked is not None:
            doc, cols, notices = chunked
        elif (typed := _load_typed(p)) is not None:
            doc, events = typed
            notices = []
            cols = _scan_typed(events, _Columns())
            del events, typed
        else:
            doc, notices = _load_document(p)
            events = doc.pop("traceEvents")
            cols = _scan(events)
            del events
        gpu, launches, ops, steps, more = _build(cols, str(p))
    finally:
        if enabled:
            gc.enable()
    info = doc.pop("distributedInfo", None) or {}
    props = doc.pop("deviceProperties", None) or doc.pop("computeProperties", None) or ()
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


def _json_number(value: Any) -> Any:
    """A value for a notice (saved as JSON): a non-finite float as its word, None kept."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


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
    seen: dict[str, Path] = {}
    for p in out:  # the same file twice (or a copy) would count each of its ranks' ops twice
        keys = (same_file_key(p), file_identity(p)) if p.is_file() else (str(p),)
        twin = next((seen[k] for k in keys if k in seen), None)
        if twin is not None:
            same = "" if same_file_key(twin) == keys[0] else ", the same bytes"
            raise InvalidInput(PARAM, str(p), f"given twice (as {twin} too{same}): give each trace once")
        seen.update(dict.fromkeys(keys, p))
    return out


#: bytes read from each end of a file for :func:`file_identity`
IDENTITY_BYTES = 1 << 16


def file_identity(path: str | os.PathLike[str]) -> str:
    """A file's content identity, cheap on any size: its size and a hash of its first and last
    :data:`IDENTITY_BYTES` (a copy of a trace has the same; two ranks' files differ in both)."""
    import hashlib

    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        digest = hashlib.blake2b(handle.read(IDENTITY_BYTES), digest_size=16)
        if size > IDENTITY_BYTES:
            handle.seek(max(size - IDENTITY_BYTES, IDENTITY_BYTES))
            digest.update(handle.read(IDENTITY_BYTES))
    return f"{size}:{digest.hexdigest()}"


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


__all__ = ["MAX_BYTES", "file_identity", "read_trace", "read_traces", "trace_files"]
