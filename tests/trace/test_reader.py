"""The trace reader on hand-made fixtures (one per pitfall) and on the shared real traces."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from infer_opt.errors import InvalidInput
from infer_opt.trace.events import KERNEL, LAUNCH_BEFORE_WINDOW, MEMCPY, MEMSET, SYNC
from infer_opt.trace.reader import STRING_ID_BASE, read_trace, read_traces

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"


def names(t, col):
    return [t.names[i] for i in col]


def test_fractional_microseconds_and_base_time_are_kept_exactly():
    t = read_trace(FIXTURES / "fractional.json")
    assert t.base_time_ns == 1700000000000000000
    assert t.gpu.ts_us.tolist() == [20.125, 20.75]
    assert t.gpu.dur_us.tolist() == [0.375, 0.5]
    assert t.gpu.launch.tolist() == [0, 1]
    assert names(t, t.ops.name[t.gpu.op]) == ["aten::add", "aten::add"]
    assert t.device_properties[0]["numSms"] == 132


def test_pitfalls_hip_names_string_stream_sync_memcpy_and_pre_window_kernel():
    t = read_trace(FIXTURES / "pitfalls.json")
    g = t.gpu
    assert names(t, g.name) == [
        "early_kernel", "Memcpy HtoD (Pageable -> Device)", "elementwise", "Memset (Device)",
        "Event Sync", "Cijk_gemm", "orphan",
    ]  # fmt: skip
    assert g.kind.tolist() == [KERNEL, MEMCPY, KERNEL, MEMSET, SYNC, KERNEL, KERNEL]
    import zlib

    assert set(g.stream.tolist()) == {STRING_ID_BASE + zlib.crc32(b"stream 3")}
    # correlation 40 is below the first launch's (51): queued before the window; 999 has no launch
    assert g.launch.tolist()[0] == LAUNCH_BEFORE_WINDOW
    assert g.launch.tolist()[-1] == -1
    assert names(t, t.launches.name[g.launch[[1, 2, 5]]]) == [
        "hipMemcpyAsync",
        "hipLaunchKernel",
        "hipExtModuleLaunchKernel",
    ]
    # hipMemcpyAsync at 101 is inside aten::copy_ [100, 110]; the others are outside any cpu_op
    assert g.op.tolist() == [-1, 0, -1, -1, -1, -1, -1]
    assert t.ops.external_id.tolist() == [7]


def test_nested_ops_steps_bad_durations_and_duplicates():
    t = read_trace(FIXTURES / "steps.json")
    assert names(t, t.ops.name) == ["aten::linear", "aten::addmm", "aten::relu"]
    assert t.ops.parent.tolist() == [-1, 0, -1]
    assert [(s.number, s.cpu_start_us, s.cpu_end_us, s.gpu_start_us, s.gpu_end_us) for s in t.steps] == [
        (1, 0.0, 50.0, 0.0, 60.0),
        (2, 50.0, 100.0, 60.0, 110.0),
    ]
    assert names(t, t.gpu.name) == ["sm90_gemm", "relu_kernel"]
    assert names(t, t.ops.name[t.gpu.op]) == ["aten::addmm", "aten::relu"]  # the innermost op
    assert t.gpu.step.tolist() == [0, 1]
    codes = {n.code: dict(n.values) for n in t.warnings}
    assert codes["trace_bad_durations"]["events"] == 2
    assert codes["trace_duplicates"]["events"] == 1


def test_a_folder_of_ranks_is_read_in_parallel_and_sorted_by_rank():
    ranks = read_traces([FIXTURES / "two_ranks"])
    assert [(t.rank, t.world_size) for t in ranks] == [(0, 2), (1, 2)]
    assert ranks[1].gpu.ts_us.tolist() == [10.0, 16.0]
    assert ranks[0].gpu.args[1]["Collective name"] == "allreduce"


@pytest.mark.parametrize("name", ["truncated.json", "truncated.json.gz"])
def test_a_truncated_file_is_repaired_at_its_last_complete_event(name):
    t = read_trace(FIXTURES / name)
    (notice,) = [n for n in t.warnings if n.code == "trace_truncated"]
    if name.endswith(".json"):
        assert notice["events_kept"] == 3
        assert names(t, t.gpu.name) == ["g"]


def write(tmp_path, name, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("a.json", b"", "empty"),
        ("a.json", b"hello", "not JSON"),
        ("a.json", b"{}", "without a traceEvents"),
        ("a.json", b"[1, 2]", "JSON list"),
        ("a.json", b'{"schema": "infer-opt/profile", "result": {}}', "infer-opt report"),
        ("a.json", b'{"traceEvents": [{"ph": "X", "ts": 1, "dur"', "no complete event"),
        ("a.json.gz", b"\x1f\x8b\x08\x00garbage-garbage", "corrupt gzip"),
        ("a.json.gz", gzip.compress(b""), "empty gzip"),
    ],
)
def test_bad_input_is_one_line_naming_the_file(tmp_path, name, data, words):
    p = write(tmp_path, name, data)
    with pytest.raises(InvalidInput) as err:
        read_trace(p)
    assert words in str(err.value) and str(p) in str(err.value) and "\n" not in str(err.value)


def test_a_missing_file_a_fifo_and_an_empty_folder_are_refused(tmp_path):
    with pytest.raises(InvalidInput, match="no such file"):
        read_trace(tmp_path / "none.json")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match="not a regular file"):
        read_trace(fifo)
    with pytest.raises(InvalidInput, match=r"no \.json"):
        read_traces([tmp_path])


def test_a_cpu_only_trace_reads_with_no_gpu_events(tmp_path):
    doc = {
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5}
        ]
    }
    t = read_trace(write(tmp_path, "cpu.json", json.dumps(doc).encode()))
    assert len(t.gpu) == 0 and len(t.ops) == 1


SHARED_FILES = sorted(SHARED.glob("*.json.gz")) if SHARED.is_dir() else []


@pytest.mark.skipif(not SHARED_FILES, reason="../shared/traces is absent")
@pytest.mark.parametrize("path", SHARED_FILES, ids=lambda p: p.name[:60])
def test_every_shared_trace_reads(path):
    t = read_trace(path)
    g = t.gpu
    assert np.all(g.dur_us >= 0) and np.all(np.diff(g.ts_us) >= 0)
    linked = g.launch >= 0
    # a linked GPU event has its launch's correlation id
    assert np.array_equal(t.launches.correlation[g.launch[linked]], g.correlation[linked])
    assert np.all(g.op < len(t.ops)) and np.all(g.step < len(t.steps))


def test_a_large_file_read_in_chunks_gives_the_same_columns(tmp_path, monkeypatch):
    import infer_opt.trace.reader as reader

    doc = json.loads((FIXTURES / "steps.json").read_text())
    doc["traceEvents"] = doc["traceEvents"][:11] * 1  # no duplicates, no bad durations
    base = doc["traceEvents"]
    doc["traceEvents"] = [dict(e, ts=e["ts"] + 1000 * k) for k in range(300) for e in base]
    doc["traceName"] = "after the events"
    p = tmp_path / "big.json"
    p.write_text(json.dumps(doc, indent=1))
    whole = read_trace(p)
    monkeypatch.setattr(reader, "CHUNKED_ABOVE", 4096)
    monkeypatch.setattr(reader, "CHUNK", 2048)
    chunked = read_trace(p)
    for col in ("ts_us", "dur_us", "launch", "op", "step", "event_index"):
        assert np.array_equal(getattr(whole.gpu, col), getattr(chunked.gpu, col)), col
    assert np.array_equal(whole.ops.parent, chunked.ops.parent)
    assert chunked.metadata["traceName"] == "after the events" and len(chunked.gpu) == 600
