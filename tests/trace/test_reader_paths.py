"""The reader's fast paths give exactly what the plain one gives: msgspec's typed decoding
(with orjson for what it refuses) against orjson alone, whole files and chunked ones; and only
the ``args`` keys the analyses read are kept, equal ones shared."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import infer_opt.trace.reader as reader
from infer_opt.errors import InvalidInput
from infer_opt.trace.events import GPU_ARG_KEYS, OP_ARG_KEYS, TraceEvents
from infer_opt.trace.reader import read_trace

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
SHARED = HERE.parents[1] / ".." / "shared" / "traces"
SHARED_FILES = sorted(SHARED.glob("*.json.gz")) if SHARED.is_dir() else []
PACKAGE = HERE.parents[1] / "infer_opt" / "trace"
MODEL = json.loads((FIXTURES / "model_step.json").read_text())

needs_msgspec = pytest.mark.skipif(reader.msgspec is None, reason="msgspec is not installed")


def _columns(t: TraceEvents) -> dict:
    out: dict = {"names": t.names, "steps": t.steps, "metadata": t.metadata, "warnings": t.warnings}
    out |= {"rank": t.rank, "world": t.world_size, "base": t.base_time_ns, "props": t.device_properties}
    for part in ("gpu", "launches", "ops"):
        table = getattr(t, part)
        for name, value in vars(table).items():
            key = f"{part}.{name}"
            out[key] = (value.dtype.str, value.tobytes()) if isinstance(value, np.ndarray) else value
    return out


def _plain(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    with monkeypatch.context() as m:
        m.setattr(reader, "msgspec", None)
        return _columns(read_trace(path))


def _assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == b[key], key


@needs_msgspec
@pytest.mark.parametrize(
    "path",
    [p for p in sorted(FIXTURES.glob("*.json*")) if "truncated" not in p.name] + SHARED_FILES,
    ids=lambda p: p.name[:60],
)
def test_typed_decoding_gives_the_same_trace_as_orjson_alone(path, monkeypatch):
    _assert_same(_columns(read_trace(path)), _plain(path, monkeypatch))


def _odd_doc() -> dict:
    doc = copy.deepcopy(MODEL)
    ev = doc["traceEvents"]
    ev[0]["ts"] = "12.5"  # a string time
    ev[1]["args"] = {"External id": 1 << 70, "Input Dims": [[1 << 70]], "stream": "7"}
    ev[2]["dur"] = -(1 << 65)  # beyond int64: orjson makes it a float, msgspec an int
    ev[3]["name"] = 1 << 66
    ev[4]["tid"] = 1.5
    ev += [5, "x", None, {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": []}]
    return doc


@needs_msgspec
def test_events_msgspec_refuses_go_through_orjson_with_the_same_result(tmp_path, monkeypatch):
    doc = _odd_doc()
    p = tmp_path / "odd.json"
    p.write_text(json.dumps(doc))
    assert reader._load_typed(p) is None  # a number among the events: the plain path reads it
    del doc["traceEvents"][-4:]  # typed now, with the odd values kept
    p.write_text(json.dumps(doc))
    assert reader._load_typed(p) is not None
    _assert_same(_columns(read_trace(p)), _plain(p, monkeypatch))


@needs_msgspec
def test_chunks_typed_and_refused_mixed_give_the_plain_columns(tmp_path, monkeypatch):
    doc = copy.deepcopy(MODEL)
    base = doc["traceEvents"]
    doc["traceEvents"] = [dict(e, ts=e["ts"] + 10_000 * k) for k in range(40) for e in base]
    doc["traceEvents"][len(base) * 20]["args"] = 0  # one chunk msgspec refuses
    p = tmp_path / "big.json"
    p.write_text(json.dumps(doc, indent=1))
    plain = _plain(p, monkeypatch)
    monkeypatch.setattr(reader, "CHUNKED_ABOVE", 4096)
    monkeypatch.setattr(reader, "CHUNK", 4096)
    monkeypatch.setattr(reader, "scan_workers", lambda spans: 1)  # every chunk scanned here
    calls = {"typed": 0, "plain": 0}
    typed_scan, plain_scan = reader._scan_typed, reader._scan

    def count(kind, fn):
        def wrapped(*a, **k):
            calls[kind] += 1
            return fn(*a, **k)

        return wrapped

    monkeypatch.setattr(reader, "_scan_typed", count("typed", typed_scan))
    monkeypatch.setattr(reader, "_scan", count("plain", plain_scan))
    chunked = _columns(read_trace(p))
    assert calls["typed"] > 1 and calls["plain"] >= 2  # the refused chunk and the tail
    # the plain path reads a trace in one piece; the chunked one its metadata apart
    _assert_same(chunked, plain)


ODD = [0, -1, 1.5, "7", "x", None, [], {}, 1e308, True, [1, 2], [[2, 3]], 1 << 70, -(1 << 70), "1" * 30]
FIELDS = ["ts", "dur", "name", "cat", "ph", "pid", "tid", "args"]
ARG_FIELDS = [*GPU_ARG_KEYS, *OP_ARG_KEYS, "correlation", "device", "External id", "external id"]


@needs_msgspec
@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(MODEL["traceEvents"]) - 1),
            st.sampled_from(FIELDS + ARG_FIELDS),
            st.sampled_from(ODD),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_any_value_in_any_field_reads_the_same_both_ways(tmp_path, monkeypatch, mutations):
    doc = copy.deepcopy(MODEL)
    for index, key, value in mutations:
        event = doc["traceEvents"][index]
        if key in FIELDS:
            event[key] = value
        elif isinstance(event.get("args"), dict):
            event["args"][key] = value
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    try:
        plain = _plain(p, monkeypatch)
    except InvalidInput as err:
        with pytest.raises(InvalidInput) as again:
            read_trace(p)
        assert str(again.value) == str(err)
        return
    _assert_same(_columns(read_trace(p)), plain)


def test_only_the_args_the_analyses_read_are_kept_and_equal_ones_are_shared(tmp_path):
    dims = {"Input Dims": [[8, 16], [16, 4]], "Input type": ["float", "float"], "Record function id": 0}
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 5.0,
         "args": dict(dims, **{"External id": i, "Ev Idx": i})}
        for i in range(3)
    ] + [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0 * i + 1, "dur": 2.0,
         "args": {"stream": 7, "correlation": i, "grid": [i, 1, 1],
                  "Collective name": "allreduce" if i else None}}
        for i in range(3)
    ]  # fmt: skip
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    for plain in (False, True):
        t = _read(p, plain)
        assert t.ops.args[0] == {"Input Dims": [[8, 16], [16, 4]], "Input type": ["float", "float"]}
        assert t.ops.args[0] is t.ops.args[1] is t.ops.args[2]
        assert t.gpu.args[0] == {"stream": 7, "Collective name": None}
        assert (
            t.gpu.args[1] == {"stream": 7, "Collective name": "allreduce"} and t.gpu.args[1] is t.gpu.args[2]
        )
        assert list(t.ops.external_id) == [0, 1, 2] and list(t.gpu.correlation) == [0, 1, 2]


def _read(p: Path, plain: bool) -> TraceEvents:
    if not plain:
        return read_trace(p)
    saved = reader.msgspec
    reader.msgspec = None
    try:
        return read_trace(p)
    finally:
        reader.msgspec = saved


_READS = re.compile(r"""args(?:\[\d+\]|\[i\])?\s*(?:\.get\(|\[)\s*"([^"]+)\"""")
_TUPLES = re.compile(r"_(?:COST|COMM)_ARGS\s*=\s*\(([^)]*)\)")


def test_every_args_key_an_analysis_reads_is_kept():
    """The reader drops every other key: an analysis reading a new one must add it to
    GPU_ARG_KEYS / OP_ARG_KEYS (events.py), or it would silently see nothing."""
    read: set[str] = set()
    for source in PACKAGE.glob("*.py"):
        if source.name in ("reader.py", "augment.py", "capture.py"):  # own columns; the file re-read
            continue
        text = source.read_text()
        read |= set(_READS.findall(text))
        for group in _TUPLES.findall(text):
            read |= set(re.findall(r'"([^"]+)"', group))
    assert {"Input Dims", "Collective name", "stream", "In msg nelems"} <= read  # the scan sees them
    assert read <= set(GPU_ARG_KEYS) | set(OP_ARG_KEYS), read - set(GPU_ARG_KEYS) - set(OP_ARG_KEYS)


@pytest.mark.parametrize("workers", [2, 3])
def test_chunks_scanned_by_worker_processes_give_the_columns_of_one_pass(tmp_path, monkeypatch, workers):
    doc = copy.deepcopy(MODEL)
    base = doc["traceEvents"]
    doc["traceEvents"] = [dict(e, ts=e["ts"] + 10_000 * k) for k in range(60) for e in base]
    for k in (7, 31, 50):  # steps, names and odd values first seen in a later worker's part
        doc["traceEvents"][len(base) * k]["name"] = f"ProfilerStep#{k}"
        doc["traceEvents"][len(base) * k + 1]["name"] = f"seen from chunk {k}"
    doc["traceEvents"][len(base) * 40]["args"] = 0  # a chunk msgspec refuses, in a worker
    p = tmp_path / "big.json"
    p.write_text(json.dumps(doc, indent=1))
    plain = _plain(p, monkeypatch)
    monkeypatch.setattr(reader, "CHUNKED_ABOVE", 4096)
    monkeypatch.setattr(reader, "CHUNK", 4096)
    monkeypatch.setattr(reader, "scan_workers", lambda spans: workers)
    used = []
    spans = reader._scan_spans
    monkeypatch.setattr(reader, "_scan_spans", lambda data, s: used.append(len(s)) or spans(data, s))
    _assert_same(_columns(read_trace(p)), plain)
    assert used and used[0] >= 2 * workers


_IDS = st.integers(-(1 << 62), (1 << 62) - 1) | st.integers(-3, 3)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.lists(st.tuples(_IDS, _IDS), max_size=40))
def test_thread_keys_number_pairs_as_numpy_unique_rows_does(pairs):
    pid = np.array([p for p, _ in pairs], dtype=np.int64)
    tid = np.array([t for _, t in pairs], dtype=np.int64)
    rows = np.stack([pid, tid], axis=1) if pairs else np.zeros((0, 2), dtype=np.int64)
    expected = np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)
    assert reader._thread_keys(pid, tid).tolist() == expected.tolist()
