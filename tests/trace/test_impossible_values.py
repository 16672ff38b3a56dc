"""Impossible numbers in a trace (issue 42, class 1): a NaN, ±∞, a negative or an absurd value in
any numeric field the analyses read is never a number in a figure, nor a file "cut short": the
reader drops the event (``ts``/``dur``) or ignores the size (``In msg nelems``, ``Input Dims``,
...) and says so in a notice naming the event or the key and the value; the analysis then runs
(or refuses with one InvalidInput line) — never a traceback."""

from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infer_opt.errors import InvalidInput
from infer_opt.messages import text
from infer_opt.trace.analyze import analyze
from infer_opt.trace.reader import read_trace
from tests.trace.test_reader import FIXTURES

MODEL = json.loads((FIXTURES / "model_step.json").read_text())
IMPOSSIBLE = [math.nan, math.inf, -math.inf, -1, -5.5, 1e308, 1e300]
TIME_FIELDS = ["ts", "dur"]
SIZE_FIELDS = ["In msg nelems", "Out msg nelems", "Group size", "Input Dims"]


def _write(tmp_path, doc) -> str:
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))  # Python's json writes bare NaN / Infinity, as some tools do
    return str(p)


def _codes(trace) -> dict[str, dict]:
    return {n.code: dict(n.values) for n in trace.warnings}


@pytest.mark.parametrize("value", IMPOSSIBLE)
@pytest.mark.parametrize("field", TIME_FIELDS)
def test_an_impossible_time_drops_its_event_and_names_it_not_a_cut_file(tmp_path, field, value):
    doc = copy.deepcopy(MODEL)
    index = 6  # the first matmul kernel
    doc["traceEvents"][index][field] = value
    t = read_trace(_write(tmp_path, doc))
    codes = _codes(t)
    assert "trace_truncated" not in codes
    bad = codes["trace_bad_durations"]
    assert (bad["events"], bad["index"], bad["field"]) == (1, index, field)
    assert bad["name"].startswith("sm90_xmma_gemm")
    words = text(next(n for n in t.warnings if n.code == "trace_bad_durations"))
    assert f"event #{index}" in words and f"{field} = " in words and "allowed" in words
    assert (
        len(t.gpu)
        == sum(1 for e in MODEL["traceEvents"] if e["cat"] in ("kernel", "gpu_memset", "gpu_memcpy")) - 1
    )


@pytest.mark.parametrize("value", [-1, -262144, 1.5, math.nan, math.inf, 1e300])
@pytest.mark.parametrize("key", SIZE_FIELDS)
def test_an_impossible_size_is_ignored_and_named(tmp_path, key, value):
    doc = copy.deepcopy(MODEL)
    for e in doc["traceEvents"]:
        if key in e.get("args", {}):
            e["args"][key] = [[value, 4]] if key == "Input Dims" else value
            break
    else:  # the fixture's all-reduce has no Group size: give it one
        doc["traceEvents"][23]["args"][key] = value
    t = read_trace(_write(tmp_path, doc))
    bad = _codes(t)["trace_bad_sizes"]
    assert bad["key"] == key and bad["args"] >= 1
    assert all(key not in a or a[key] != value for a in (*t.gpu.args, *t.ops.args))


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(MODEL["traceEvents"]) - 1),
            st.sampled_from(TIME_FIELDS + SIZE_FIELDS),
            st.sampled_from(IMPOSSIBLE),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_every_numeric_field_impossible_is_refused_or_named_never_a_traceback(tmp_path, mutations):
    """Any numeric field of any event NaN, ±∞, negative or 1e308: a labelled notice (and the
    analysis runs) or one InvalidInput; never a traceback, never a figure that is not finite."""
    doc = copy.deepcopy(MODEL)
    read = 0  # mutations of a field the analyses read (a step annotation's args are not)
    for index, key, value in mutations:
        event = doc["traceEvents"][index]
        if key in TIME_FIELDS:
            event[key] = value
            read += 1
        else:
            event.setdefault("args", {})[key] = [[value]] if key == "Input Dims" else value
            read += event["cat"] == ("cpu_op" if key == "Input Dims" else "kernel")
    path = _write(tmp_path, doc)
    t = read_trace(path)
    assert not read or {"trace_bad_durations", "trace_bad_sizes"} & set(_codes(t))
    assert "trace_truncated" not in _codes(t)
    try:
        result = analyze([path], device="h100").result
    except InvalidInput:
        return
    for rank in result.ranks:
        for step in rank.steps:
            assert math.isfinite(step.span_s) and 0 <= step.busy_s <= step.span_s * (1 + 1e-9)
    for group in result.ops:
        assert math.isfinite(group.time_s) and group.time_s >= 0


def test_repeated_step_numbers_are_said_not_silently_dropped(tmp_path):
    """Issue 42: three steps all named ``ProfilerStep#1`` (two sessions in one file) silently
    dropped the later ones' ops; now a notice names the number."""
    doc = copy.deepcopy(MODEL)
    later = [dict(e, ts=e["ts"] + 5000) for e in doc["traceEvents"]]
    for e in later:
        if isinstance(e.get("name"), str) and e["name"].startswith("ProfilerStep#"):
            e["name"] = "ProfilerStep#1"
    doc["traceEvents"] += later
    t = read_trace(_write(tmp_path, doc))
    repeated = _codes(t)["trace_repeated_steps"]
    assert repeated["steps"] == (1,) and repeated["count"] == 1
    words = text(next(n for n in t.warnings if n.code == "trace_repeated_steps"))
    assert "ProfilerStep#1" in words and "more than once" in words
    assert "trace_repeated_steps" not in _codes(read_trace(FIXTURES / "model_step.json"))


def test_the_same_file_given_twice_is_refused(tmp_path):
    from infer_opt.trace.reader import trace_files

    path = FIXTURES / "model_step.json"
    link = tmp_path / "again.json"
    link.symlink_to(path)
    for pair in ([path, path], [path, link]):
        with pytest.raises(InvalidInput, match="given twice"):
            trace_files(pair)
    with pytest.raises(InvalidInput, match="given twice"):
        analyze([path, link])


def test_ranks_of_different_gpus_are_refused_with_or_without_device(tmp_path):
    """Issue 42: an H100 rank and an A100 rank merged into one op table judged on H100 peaks.
    ``--device`` would judge the A100's ops on the H100's peaks: refused too (compare them)."""
    for name in ("rank0.json", "rank1.json"):
        doc = json.loads((FIXTURES / "two_ranks" / name).read_text())
        if name == "rank1.json":
            doc["deviceProperties"][0]["name"] = "NVIDIA A100-SXM4-80GB"
        (tmp_path / name).write_text(json.dumps(doc))
    for device in (None, "h100"):
        with pytest.raises(InvalidInput, match="ranks of one job, on one GPU model") as caught:
            analyze([tmp_path], device=device)
        assert "H100" in str(caught.value) and "A100" in str(caught.value)
