"""Every path through a large trace in bounded memory (issue 42, class 4): a large trace cut
short (a profiler killed mid-write) or a cut gzip is closed at its last complete event chunk by
chunk, as a whole large trace is read, never parsed whole (7.8 GB for a 707 MB file before);
the same columns as the small-file repair. Sizes are shrunk here (``CHUNKED_ABOVE``, ``CHUNK``);
time and memory on real sizes are measured by ``benchmarks/bench_large_paths.py``."""

from __future__ import annotations

import copy
import gzip
import json
import tracemalloc

import pytest

import infer_opt.trace.reader as reader
from infer_opt.errors import InvalidInput
from infer_opt.trace.reader import read_trace
from tests.trace.test_reader_paths import MODEL, _assert_same, _columns


def _big(tmp_path, copies: int = 40) -> bytes:
    doc = copy.deepcopy(MODEL)
    base = doc["traceEvents"]
    doc["traceEvents"] = [dict(e, ts=e["ts"] + 10_000 * k) for k in range(copies) for e in base]
    return json.dumps(doc, indent=1).encode()


def _small_path_columns(path, monkeypatch) -> dict:
    with monkeypatch.context() as m:
        m.setattr(reader, "CHUNKED_ABOVE", 1 << 40)
        return _columns(read_trace(path))


@pytest.mark.parametrize("fraction", [0.3, 0.61, 0.9, 0.999])
@pytest.mark.parametrize("gz", [False, True])
def test_a_large_cut_trace_is_closed_chunk_by_chunk_as_the_small_path_closes_it(
    tmp_path, monkeypatch, fraction, gz
):
    data = _big(tmp_path)
    cut = data[: int(len(data) * fraction)]
    path = tmp_path / ("cut.json.gz" if gz else "cut.json")
    path.write_bytes(gzip.compress(data)[: int(len(gzip.compress(data)) * fraction)] if gz else cut)
    expected = _small_path_columns(path, monkeypatch)
    with monkeypatch.context() as m:
        m.setattr(reader, "CHUNKED_ABOVE", 4096)
        m.setattr(reader, "CHUNK", 4096)
        m.setattr(reader, "scan_workers", lambda spans: 1)
        m.setattr(reader, "_load_document", None)  # never parsed whole
        m.setattr(reader, "_load_typed", None)
        got = _columns(read_trace(path))
    notices = {n.code: dict(n.values) for n in got["warnings"]}
    assert "trace_truncated" in notices
    small = {n.code: dict(n.values) for n in expected["warnings"]}["trace_truncated"]
    if small["events_kept"] >= 0 and notices["trace_truncated"]["events_kept"] >= 0:
        assert notices["trace_truncated"]["events_kept"] == small["events_kept"]
    for key in ("gpu.ts_us", "gpu.dur_us", "ops.ts_us", "launches.ts_us", "steps", "names"):
        if key in got:
            assert got[key] == expected[key], key


def test_a_whole_large_trace_reads_as_before_and_says_nothing_of_a_cut(tmp_path, monkeypatch):
    path = tmp_path / "whole.json"
    path.write_bytes(_big(tmp_path))
    expected = _small_path_columns(path, monkeypatch)
    monkeypatch.setattr(reader, "CHUNKED_ABOVE", 4096)
    monkeypatch.setattr(reader, "CHUNK", 4096)
    monkeypatch.setattr(reader, "scan_workers", lambda spans: 1)
    got = _columns(read_trace(path))
    assert not [n for n in got["warnings"] if n.code == "trace_truncated"]
    _assert_same(got, expected)


def test_a_large_cut_trace_holds_about_the_file_and_a_chunk(tmp_path, monkeypatch):
    """Python-side allocations while closing a cut trace: a few times the file (its bytes, one
    chunk, the columns), never the whole document's objects (tens of times the file)."""
    data = _big(tmp_path, copies=200)
    path = tmp_path / "cut.json"
    path.write_bytes(data[: int(len(data) * 0.8)])
    monkeypatch.setattr(reader, "CHUNKED_ABOVE", 64 << 10)
    monkeypatch.setattr(reader, "CHUNK", 64 << 10)
    monkeypatch.setattr(reader, "scan_workers", lambda spans: 1)
    tracemalloc.start()
    try:
        read_trace(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * path.stat().st_size, (peak, path.stat().st_size)


def _augmented(path, out, monkeypatch, chunk: int | None) -> dict:
    from infer_opt.trace.analyze import analyze
    from infer_opt.trace.augment import write_augmented

    with monkeypatch.context() as m:
        if chunk is not None:
            m.setattr(reader, "CHUNK", chunk)
        (written,) = write_augmented(analyze([path]), out)
    return json.loads(
        gzip.decompress(written.read_bytes()) if out.name.endswith(".gz") else written.read_text()
    )


@pytest.mark.parametrize("name", ["a.json", "a.json.gz"])
def test_augment_a_chunk_at_a_time_writes_what_the_whole_document_gives(tmp_path, monkeypatch, name):
    """``--augment`` on a large trace rewrites it a chunk of events at a time (it parsed and held
    the whole document: 9.4 GB for 1 GB): the same document as one chunk gives."""
    path = tmp_path / "big.json"
    path.write_bytes(_big(tmp_path, copies=12))
    whole = _augmented(path, tmp_path / f"whole.{name}", monkeypatch, None)
    chunked = _augmented(path, tmp_path / name, monkeypatch, 2048)
    assert chunked == whole
    assert chunked["infer_opt"]["device"]
    assert any("flops" in e.get("args", {}) for e in chunked["traceEvents"])
    assert len(chunked["traceEvents"]) == 12 * len(MODEL["traceEvents"])


def test_augment_of_a_cut_trace_writes_it_closed(tmp_path, monkeypatch):
    data = _big(tmp_path, copies=12)
    path = tmp_path / "cut.json"
    path.write_bytes(data[: int(len(data) * 0.7)])
    kept = len(read_trace(path).gpu)
    doc = _augmented(path, tmp_path / "out.json", monkeypatch, 2048)
    assert len(read_trace(tmp_path / "out.json").gpu) == kept
    assert not [n for n in read_trace(tmp_path / "out.json").warnings if n.code == "trace_truncated"]
    assert any("flops" in e.get("args", {}) for e in doc["traceEvents"])


@pytest.mark.parametrize("where", ["middle", "end"])
def test_a_large_corrupt_trace_is_refused_not_parsed_whole(tmp_path, monkeypatch, where):
    """A trace too large to parse whole (its objects take ~10x the file) that cannot be read a
    chunk at a time is refused in one line (it was parsed whole: 6.4 GB for 700 MB)."""
    data = bytearray(_big(tmp_path))
    at = data.find(b'"dur":', len(data) // 2) + 5 if where == "middle" else len(data) - 3
    data[at : at + 1] = b"@"
    path = tmp_path / "bad.json"
    path.write_bytes(bytes(data))
    monkeypatch.setattr(reader, "CHUNKED_ABOVE", 4096)
    monkeypatch.setattr(reader, "CHUNK", 4096)
    monkeypatch.setattr(reader, "WHOLE_MAX", 8192)
    monkeypatch.setattr(reader, "scan_workers", lambda spans: 1)
    with pytest.raises(InvalidInput, match="a chunk of events at a time"):
        read_trace(path)
