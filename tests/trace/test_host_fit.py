"""The host's time between launching ops as launch + module + Python-call costs, fitted robustly
(infer_opt/trace/host_fit.py): worked numbers, recovery on noiseless gaps, the light scan."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.trace import host_costs, host_fit
from infer_opt.trace.host_costs import HostIssueSamples


def _counts(modules, python, a, b, c=0.0, ops=None, d=0.0):
    m, p = np.asarray(modules), np.asarray(python)
    o = np.zeros_like(m) if ops is None else np.asarray(ops)
    return host_fit.GapCounts(a + b * m + c * p + d * o, m, p, o)


def test_worked_gaps_a_per_op_plus_b_per_module():
    # 20 µs per op, 7 µs per module: gaps 20, 27, 34, 41, 20 µs over modules 0, 1, 2, 3, 0
    t = _counts([0, 1, 2, 3, 0], [0, 0, 0, 0, 0], 20e-6, 7e-6)
    np.testing.assert_allclose(t.issue_s * 1e6, [20, 27, 34, 41, 20])
    f = host_fit.fit([t], ("launch", "module"))
    assert f.launch_s == pytest.approx(20e-6, rel=1e-6) and f.module_s == pytest.approx(7e-6, rel=1e-6)
    assert f.python_s == 0.0 and f.op_s == 0.0 and f.samples == 5 and f.traces == 1
    assert f.host_s([0, 3]).tolist() == pytest.approx([20e-6, 41e-6])


def test_an_outlier_gap_does_not_move_the_fit():
    # a 5 ms wait the trace does not name, among gaps of exactly 10 µs + 2 µs per Python call
    t = _counts([0] * 9, [0, 1, 2, 3, 4, 5, 6, 7, 8], 10e-6, 0.0, 2e-6)
    t = host_fit.GapCounts(np.append(t.issue_s, 5e-3), np.append(t.modules, 0), np.append(t.python, 1))
    f = host_fit.fit([t], ("launch", "python"))
    assert f.launch_s == pytest.approx(10e-6, rel=0.05) and f.python_s == pytest.approx(2e-6, rel=0.05)


def test_worked_gaps_with_python_calls_and_aten_ops():
    # 11 µs + 1 µs per Python call + 3 µs per aten op: (p, o) = (0, 1), (4, 1), (2, 5), (10, 3)
    t = _counts([0, 0, 0, 0], [0, 4, 2, 10], 11e-6, 0.0, 1e-6, [1, 1, 5, 3], 3e-6)
    np.testing.assert_allclose(t.issue_s * 1e6, [14, 18, 28, 30])
    f = host_fit.fit([t], ("launch", "python", "ops"))
    assert (f.launch_s, f.python_s, f.op_s) == pytest.approx((11e-6, 1e-6, 3e-6), rel=1e-6)
    assert f.host_s(0, 4, 1) == pytest.approx(18e-6)


def test_counts_per_interval_on_its_thread():
    s = HostIssueSamples(("a", "b"), np.array([1e-6, 2e-6]), np.array([1, 1]), np.zeros(0),
                         np.array([7, 7]), np.array([0.0, 10.0]), np.array([10.0, 30.0]))  # fmt: skip
    # thread 7: calls at 5 (module), 10 (module: counted in the first interval, (0, 10]), 12, 30
    # thread 8: a call at 15 (another thread: not counted)
    calls = host_fit.PythonCalls(np.array([7, 7, 7, 7, 8]), np.array([5.0, 10.0, 12.0, 30.0, 15.0]),
                                 np.array([True, True, False, False, True]))  # fmt: skip
    g = host_fit.gap_counts(s, calls)
    assert g.modules.tolist() == [2, 0] and g.python.tolist() == [2, 2] and g.ops is None


def test_python_calls_light_scan(tmp_path):
    events = [
        {
            "ph": "X",
            "cat": "python_function",
            "name": "nn.Module: Linear_0",
            "ts": 5,
            "dur": 3,
            "pid": 1,
            "tid": 7,
        },
        {
            "ph": "X",
            "cat": "python_function",
            "name": "<built-in method t>",
            "ts": 2,
            "dur": 1,
            "pid": 1,
            "tid": 7,
        },
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 6, "dur": 1, "pid": 1, "tid": 7},
    ]
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    calls = host_fit.python_calls(path)
    assert calls.ts_us.tolist() == [2.0, 5.0] and calls.module.tolist() == [False, True]
    assert calls.tid.tolist() == [7, 7]


def test_python_calls_of_odd_fields_are_read_by_the_loader(tmp_path):
    # a string timestamp and thread: the typed pass gives up, the document loader reads them alike
    event = {"ph": "X", "cat": "python_function", "name": "nn.Module: A", "ts": "3", "dur": 1, "tid": "9"}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [event]}))
    assert host_fit._typed_rows(path) is None
    calls = host_fit.python_calls(path)
    assert calls.ts_us.tolist() == [3.0] and calls.tid.tolist() == [9] and calls.module.tolist() == [True]


def test_bad_columns_and_no_samples():
    with pytest.raises(ValueError, match="launch"):
        host_fit.fit([], ("module",))
    with pytest.raises(ValueError, match="aten op counts"):
        host_fit.fit([host_fit.GapCounts(np.ones(2), np.ones(2), np.ones(2))], ("launch", "ops"))
    assert host_fit.fit([host_fit.GapCounts(np.zeros(0), np.zeros(0), np.zeros(0))]) is None


@settings(max_examples=40, deadline=None)
@given(
    a=st.floats(1.0, 100.0),
    b=st.floats(0.0, 50.0),
    c=st.floats(0.0, 5.0),
    d=st.floats(0.0, 10.0),
    seed=st.integers(0, 2**16),
)
def test_fit_recovers_noiseless_coefficients(a, b, c, d, seed):
    rng = np.random.default_rng(seed)
    traces = [_counts(rng.integers(0, 4, n), rng.integers(0, 30, n), a * 1e-6, b * 1e-6, c * 1e-6,
                      rng.integers(1, 12, n), d * 1e-6) for n in (40, 200)]  # fmt: skip
    f = host_fit.fit(traces)
    assert f.launch_s == pytest.approx(a * 1e-6, rel=1e-4, abs=1e-10)
    assert f.module_s == pytest.approx(b * 1e-6, rel=1e-4, abs=1e-10)
    assert f.python_s == pytest.approx(c * 1e-6, rel=1e-4, abs=1e-10)
    assert f.op_s == pytest.approx(d * 1e-6, rel=1e-4, abs=1e-10)


def test_aten_ops_counted_from_the_trace():
    from tests.trace.test_host_costs import _step

    events = _step()
    s = host_costs.issue_samples(events)
    g = host_fit.gap_counts(
        s, host_fit.PythonCalls(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, bool)), events
    )
    # intervals (0, 50] and (50, 200]: the view at 30 and the add at 50; .item() at 95 and mm at 200
    assert g.ops.tolist() == [2, 2] and g.python.tolist() == [0, 0]


BERT_H100 = (
    Path(__file__).resolve().parents[2]
    / ".."
    / "shared"
    / "traces"
    / "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz"
)


@pytest.mark.skipif(not BERT_H100.exists(), reason="../shared/traces is absent")
def test_counts_on_a_real_trace_recorded_with_stacks():
    from infer_opt.trace.reader import read_trace

    events = read_trace(BERT_H100)
    calls = host_fit.python_calls(BERT_H100)
    # the file holds 84 `nn.Module: ...` events (counted in its JSON)
    assert int(calls.module.sum()) == 84 and calls.ts_us.size > 1000
    s = host_costs.issue_samples(events)
    g = host_fit.gap_counts(s, calls, events)
    # every count is of events inside the intervals: no more than the file holds
    assert 0 < g.modules.sum() <= 84 and 0 < g.python.sum() <= calls.ts_us.size
    assert 0 < g.ops.sum() <= events.ops.ts_us.size
    f = host_fit.fit([g])
    assert (
        f is not None
        and f.samples == s.issue_s.size
        and all(v >= 0 for v in (f.launch_s, f.module_s, f.python_s, f.op_s))
    )


def _cpu_op(name, ts, dur):
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 7}


def test_op_children_worked_example(tmp_path):
    from infer_opt.trace.reader import read_trace

    # linear [0, 10] holds t [1, 4] (transpose, as_strided below it) and addmm [5, 9] (an empty);
    # a second t [20, 23] holds a transpose alone
    events = [_cpu_op("aten::linear", 0, 10), _cpu_op("aten::t", 1, 3), _cpu_op("aten::transpose", 1.5, 1),
              _cpu_op("aten::as_strided", 1.8, 0.4), _cpu_op("aten::addmm", 5, 4),
              _cpu_op("aten::empty", 5.5, 0.5), _cpu_op("aten::t", 20, 3),
              _cpu_op("aten::transpose", 21, 1)]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    children = dict(host_fit.op_children([read_trace(path)]))
    # linear: 5 below it; t: (2 + 1) / 2; transpose: (1 + 0) / 2; addmm: 1; the leaves: not listed
    assert children == pytest.approx(
        {"aten::linear": 5.0, "aten::t": 1.5, "aten::transpose": 0.5, "aten::addmm": 1.0}
    )


def test_fit_traces_without_python_stacks_is_launch_and_aten_ops(tmp_path):
    from infer_opt.trace.reader import read_trace
    from tests.trace.gpu_traces import training_ops, write_trace

    events = read_trace(write_trace(tmp_path / "a.json", training_ops()))
    samples = host_costs.issue_samples(events)
    f = host_fit.fit_traces([events], [samples])
    assert f is not None and f.columns == ("launch", "ops") and f.python_s == 0.0
