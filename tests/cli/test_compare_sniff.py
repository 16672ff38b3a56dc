"""``compare`` tells a trace from a saved result by its top-level keys, however long the
metadata before ``traceEvents`` (issue 42: a trace whose metadata ran past the first 4 KB was
refused as "not an infer-opt result")."""

from __future__ import annotations

import gzip
import json

import pytest

from infer_opt.inputs.sides import is_trace_file as _is_trace_file
from tests.helpers import invoke
from tests.trace import timeline_traces as tt


def _trace_with_metadata(path, size: int, **more):
    doc = tt.overlapped()
    events = doc.pop("traceEvents")
    doc = {"metadata": {"notes": "x" * size, "nested": [{"traceEvents": 1}], **more}, **doc}
    doc["traceEvents"] = events  # last: every other key read first
    path.write_text(json.dumps(doc, indent=2))
    return path


@pytest.mark.parametrize("size", [0, 5000, 3 << 20])
def test_a_trace_is_a_trace_however_long_its_metadata(tmp_path, size):
    path = _trace_with_metadata(tmp_path / "t.json", size, tool="infer-opt/trace 0.3", schema="infer-opt/x")
    assert _is_trace_file(path)  # 'infer-opt/' inside the metadata decides nothing


def test_saved_results_and_other_files(tmp_path):
    result = tmp_path / "r.json"
    result.write_text(json.dumps({"schema": "infer-opt/trace", "version": 1, "result": {"traceEvents": []}}))
    assert not _is_trace_file(result)
    late = tmp_path / "late.json"  # the schema after a long key
    late.write_text(json.dumps({"created": "y" * 100_000, "schema": "infer-opt/profile", "version": 1}))
    assert not _is_trace_file(late)
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps([{"ph": "X"}]))
    assert _is_trace_file(bare)
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(b"{}"))
    assert _is_trace_file(gz)
    for text in ("{}", "", "not json", '{"a": 1'):
        other = tmp_path / "other.json"
        other.write_text(text)
        assert not _is_trace_file(other)


def test_compare_takes_a_trace_with_long_metadata(tmp_path):
    a = _trace_with_metadata(tmp_path / "a.json", 5000)
    b = _trace_with_metadata(tmp_path / "b.json", 6000)
    run = invoke("compare", str(a), str(b))
    assert run.exit_code == 0, run.stderr
    assert "Trace comparison" in run.stdout
