"""The timeline on hand-made fixtures (exact numbers) and its invariants (hypothesis)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.trace import timeline as tl
from infer_opt.trace.reader import read_trace, read_traces
from infer_opt.trace.timeline import (
    COMM,
    COMPUTE,
    MEMORY,
    WAIT,
    classify,
    merge,
    rank_skew,
    rank_timeline,
    union_length,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"


def test_two_overlapping_streams_in_a_25_us_window_are_busy_20_idle_5(tmp_path):
    doc = json.loads((FIXTURES / "two_streams.json").read_text())
    doc["traceEvents"].append({"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1", "pid": 0,
                               "tid": 7, "ts": 0, "dur": 25})  # fmt: skip
    (tmp_path / "t.json").write_text(json.dumps(doc))
    (step,) = rank_timeline(read_trace(tmp_path / "t.json")).steps
    assert (step.span_s, step.busy_s, step.idle_s) == pytest.approx((25e-6, 20e-6, 5e-6), abs=1e-15)
    assert step.kernel_time_s == pytest.approx(25e-6)


def test_without_a_gpu_annotation_the_window_is_the_steps_gpu_extent():
    r = rank_timeline(read_trace(FIXTURES / "two_streams.json"))
    assert r.steps[0].span_s == pytest.approx(20e-6) and r.idle_fraction == 0.0
    assert [(s.stream, s.busy_s) for s in r.streams] == [(7, pytest.approx(10e-6)), (8, pytest.approx(15e-6))]


def test_sub_microsecond_kernels_are_exact_and_a_trace_without_steps_is_one_window_with_a_warning():
    r = rank_timeline(read_trace(FIXTURES / "fractional.json"))
    (w,) = r.steps
    assert w.step is None
    assert w.span_s == pytest.approx(1.125e-6, abs=1e-18)  # 20.125 .. 21.25
    assert w.busy_s == pytest.approx(0.875e-6, abs=1e-18)  # 0.375 + 0.5
    assert [n.code for n in r.warnings] == ["trace_no_steps"]
    # HTA rounds ts up and the end down: [21, 20) and [21, 21): nothing left busy
    h = rank_timeline(read_trace(FIXTURES / "fractional.json"), hta_compat=True)
    assert h.steps[0].busy_s <= 0.0


def test_categories_memcpy_sync_and_steps():
    t = read_trace(FIXTURES / "pitfalls.json")
    assert classify(t).tolist() == [COMPUTE, MEMORY, COMPUTE, MEMORY, WAIT, COMPUTE, COMPUTE]
    (w,) = rank_timeline(t).steps  # no steps: [90, 141)
    assert w.span_s == pytest.approx(51e-6)
    assert w.busy_s == pytest.approx((5 + 4 + 3 + 1 + 6 + 1) * 1e-6)
    assert w.memcpy_s == pytest.approx(5e-6) and w.sync_s == pytest.approx(2e-6)
    s = rank_timeline(read_trace(FIXTURES / "steps.json"))
    assert [(x.step, x.span_s, x.busy_s) for x in s.steps] == [
        (1, pytest.approx(60e-6), pytest.approx(30e-6)),
        (2, pytest.approx(50e-6), pytest.approx(10e-6)),
    ]
    assert s.idle_fraction == pytest.approx(70 / 110)
    assert rank_timeline(read_trace(FIXTURES / "steps.json"), steps=(2, 2)).steps[0].step == 2


def test_two_ranks_comm_overlap_and_skew():
    ranks = [rank_timeline(t) for t in read_traces([FIXTURES / "two_ranks"])]
    r0 = ranks[0].steps[0]
    # rank 0: gemm [10, 30), nccl [15, 45): comm 30, overlap 15
    assert classify(read_traces([FIXTURES / "two_ranks"])[0]).tolist() == [COMPUTE, COMM]
    assert (r0.comm_s, r0.overlap_fraction) == (pytest.approx(30e-6), pytest.approx(0.5))
    assert rank_skew(ranks) == (1, pytest.approx(36 / 35.5))


intervals = st.lists(
    st.tuples(st.floats(0, 1e6, allow_nan=False), st.floats(0, 1e4, allow_nan=False)), min_size=1, max_size=60
)


@settings(max_examples=200, deadline=None)
@given(intervals, st.randoms())
def test_union_properties(pairs, rnd):
    ts = np.array([p[0] for p in pairs])
    end = ts + np.array([p[1] for p in pairs])
    busy = union_length(ts, end)
    span = end.max() - ts.min()
    assert busy <= span * (1 + 1e-12) + 1e-9
    assert busy <= (end - ts).sum() * (1 + 1e-12) + 1e-9
    order = list(range(len(pairs)))
    rnd.shuffle(order)
    assert union_length(ts[order], end[order]) == pytest.approx(busy, rel=1e-12, abs=1e-9)
    s, e = merge(ts, end)
    gaps = float(np.sum(s[1:] - e[:-1]))
    assert busy + gaps == pytest.approx(span, rel=1e-9, abs=1e-6)  # idle + busy = span


SHARED_FILES = sorted(SHARED.glob("*.json.gz")) if SHARED.is_dir() else []


@pytest.mark.skipif(not SHARED_FILES, reason="../shared/traces is absent")
@pytest.mark.parametrize("path", SHARED_FILES, ids=lambda p: p.name[:60])
def test_every_shared_trace_has_a_consistent_timeline(path):
    t = read_trace(path)
    for compat in (False, True):
        r = rank_timeline(t, hta_compat=compat)
        for w in r.steps:
            assert w.busy_s <= w.span_s * (1 + 1e-9) + 1e-12
            assert w.compute_s <= w.busy_s * (1 + 1e-9) + 1e-12 or compat
        if r.steps and not compat:
            assert r.idle_fraction + r.compute_fraction + r.non_compute_fraction == pytest.approx(1.0)
    for _, mask, lo, hi in tl._windows(t, None)[0]:  # each step's window holds its own GPU events
        start, end = t.gpu.ts_us[mask], t.gpu.ts_us[mask] + t.gpu.dur_us[mask]
        assert np.mean((start >= lo - 1) & (end <= hi + 1)) >= 0.9
