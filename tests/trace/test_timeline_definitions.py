"""A timeline never breaks its own definitions (issue 42, class 7): figures per GPU, shares of a
step summing to at most 1, skewed clocks said and handled, busy ≤ span and idle ≥ 0."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.trace import timeline as tl
from infer_opt.trace.analyze import analyze
from tests.trace import timeline_traces as tt


def _rank(tmp_path, doc, name="t.json"):
    result = analyze([tt.write(tmp_path / name, doc)]).result
    return result, result.ranks[0]


def _assert_within_definitions(rank):
    for s in rank.steps:
        assert 0 <= s.busy_s <= s.span_s * (1 + 1e-12)
        assert s.idle_s >= -1e-15
        assert math.isclose(sum(s.exclusive.values()), s.span_s, rel_tol=1e-9)
        assert all(v >= 0 for v in s.exclusive.values())
        for d in s.devices:
            assert 0 <= d.busy_s <= s.span_s * (1 + 1e-12) and d.idle_s >= -1e-15
    shares = rank.idle_fraction + rank.compute_fraction + rank.comm_fraction
    assert shares <= 1 + 1e-9
    assert rank.comm_fraction <= rank.non_compute_fraction + 1e-9


def test_two_gpus_in_one_file_are_figured_per_gpu(tmp_path):
    _, rank = _rank(tmp_path, tt.two_gpus())
    (step,) = rank.steps
    assert [d.device for d in step.devices] == [0, 1]
    for d in step.devices:  # each GPU busy half the step
        assert d.busy_s == pytest.approx(step.span_s / 2)
        assert d.idle_s == pytest.approx(step.span_s / 2)
    # the step's figures are the mean over its GPUs, not the union of both
    assert rank.idle_fraction == pytest.approx(0.5)
    assert step.busy_s == pytest.approx(step.span_s / 2)
    _assert_within_definitions(rank)


def test_one_gpu_lists_no_devices(tmp_path):
    _, rank = _rank(tmp_path, tt.overlapped())
    assert rank.steps[0].devices == ()


def test_comm_under_compute_is_counted_once(tmp_path):
    _, rank = _rank(tmp_path, tt.overlapped())
    (step,) = rank.steps
    # matmul [100, 600), all-reduce [150, 550): the all-reduce is all under the matmul
    assert step.exclusive["compute"] == pytest.approx(500e-6)
    assert step.exclusive["comm"] == pytest.approx(0.0)
    assert rank.comm_fraction == pytest.approx(0.0)
    assert rank.comm_overlapped_fraction == pytest.approx(400 / 500)
    assert rank.overlap_fraction == pytest.approx(1.0)
    _assert_within_definitions(rank)


def test_exposed_comm_is_the_part_outside_compute(tmp_path):
    doc = tt.overlapped([("sm90_gemm_a", 100, 200), ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 200, 300),
                         ("Memcpy HtoD (Pageable -> Device)", 250, 400)])  # fmt: skip
    doc["traceEvents"][-1]["cat"] = "gpu_memcpy"
    _, rank = _rank(tmp_path, doc)
    (step,) = rank.steps  # window [100, 650): compute 200, comm 300 − 100 under compute, memcpy the rest
    assert step.exclusive["compute"] == pytest.approx(200e-6)
    assert step.exclusive["comm"] == pytest.approx(200e-6)
    assert step.exclusive["memcpy"] == pytest.approx(150e-6)
    assert step.exclusive["idle"] == pytest.approx(0.0)
    _assert_within_definitions(rank)


def test_headline_shares_sum_to_at_most_one(tmp_path):
    from infer_opt.reports.trace import build_view

    result, _ = _rank(tmp_path, tt.overlapped())
    line = dict(build_view(result).summary)["GPU time (measured)"]
    assert "comm under compute 80.0%" in line and "counted once" in line


intervals = st.lists(
    st.tuples(
        st.floats(0, 1000, allow_nan=False), st.floats(0, 500, allow_nan=False), st.sampled_from([0, 1, 2, 3])
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(intervals, st.floats(0, 600), st.floats(1, 1500))
def test_exclusive_shares_sum_to_the_window(items, lo, width):
    ts = np.array([i[0] for i in items])
    end = ts + np.array([i[1] for i in items])
    cat = np.array([i[2] for i in items], dtype=np.int8)
    parts = tl.exclusive_breakdown(ts, end, cat, lo, lo + width)
    assert all(v >= -1e-9 for v in parts.values())
    assert sum(parts.values()) == pytest.approx(width, rel=1e-9, abs=1e-9)
    assert sum(v for k, v in parts.items() if k != "idle") <= width * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(intervals, st.lists(st.sampled_from([0, 1]), min_size=30, max_size=30))
def test_window_figures_keep_busy_within_span(items, devices):
    ts = np.array([i[0] for i in items])
    end = ts + np.array([i[1] for i in items])
    cat = np.array([i[2] for i in items], dtype=np.int8)
    device = np.array(devices[: len(items)], dtype=np.int32)
    lo, hi = float(ts.min()), float(end.max())
    row, _ = tl._window_figures(1, ts, end, cat, device, sorted(set(device.tolist())), lo, hi)
    assert 0 <= row.busy_s <= row.span_s * (1 + 1e-12) and row.idle_s >= -1e-12
    assert sum(row.exclusive.values()) == pytest.approx(row.span_s, rel=1e-9, abs=1e-12)
    assert row.exclusive["compute"] + row.exclusive["comm"] <= row.busy_s * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("gpu_annotation", [True, False])
def test_kernels_before_their_launch_stay_in_their_step(tmp_path, gpu_annotation):
    result, rank = _rank(tmp_path, tt.skewed(gpu_annotation))
    (step,) = rank.steps
    assert step.busy_s == pytest.approx(660e-6)  # never a step 100% idle with its kernels in it
    assert step.kernel_time_s == pytest.approx(660e-6)
    skew = [w for w in result.warnings if w.code == "trace_clock_skew"]
    assert skew and skew[0].values["events"] == 2
    assert skew[0].values["lead_s"] == pytest.approx((1012 - 100) * 1e-6)  # launch 1012, kernel 100
    _assert_within_definitions(rank)


@pytest.mark.parametrize(("lo", "dur"), [(1500, 18), (995, 500), (2500, 400)])
def test_a_gpu_step_span_that_does_not_hold_its_kernels_is_not_the_step(tmp_path, lo, dur):
    # a stub inside the step, one holding the first two of four kernels, one after them all
    result, rank = _rank(tmp_path, tt.gpu_span(lo, dur))
    (step,) = rank.steps
    assert step.span_s == pytest.approx(1000e-6)  # 1000 µs .. 2000 µs: its kernels' extent
    assert step.busy_s == pytest.approx(400e-6) and step.idle_s == pytest.approx(600e-6)
    (notice,) = [w for w in result.warnings if w.code == "trace_gpu_step_spans_ignored"]
    held = {1500: 0, 995: 2, 2500: 0}[lo]
    assert (notice.values["steps"], notice.values["step"], notice.values["held"]) == (1, 1, held)
    assert notice.values["events"] == 4 and notice.values["span_s"] == pytest.approx(dur * 1e-6)
    for w in result.what_if:  # never a step replayed shorter than nothing
        assert w.replayed_step_s is None or w.replayed_step_s > 0
    _assert_within_definitions(rank)


def test_a_gpu_step_span_that_holds_its_kernels_is_the_step(tmp_path):
    result, rank = _rank(tmp_path, tt.gpu_span(900, 1300))
    (step,) = rank.steps
    assert step.span_s == pytest.approx(1300e-6)  # the annotation's span, idle at both ends
    assert step.idle_s == pytest.approx(900e-6)
    assert not [w for w in result.warnings if w.code == "trace_gpu_step_spans_ignored"]


def test_a_gpu_step_span_that_misses_a_few_of_its_kernels_is_widened_to_hold_them(tmp_path):
    # ten kernels 1000 .. 3800 µs; the span ends at 3750 µs, in the last kernel: 9 of 10 held
    result, rank = _rank(tmp_path, tt.gpu_span(900, 2850, kernels=10))
    (step,) = rank.steps
    assert step.span_s == pytest.approx(2900e-6)  # 900 .. 3800 µs
    assert step.busy_s == pytest.approx(1000e-6) and step.replayed_span_s == pytest.approx(step.span_s)
    assert not [w for w in result.warnings if w.code == "trace_gpu_step_spans_ignored"]
    _assert_within_definitions(rank)


def test_no_skew_no_warning(tmp_path):
    result, _ = _rank(tmp_path, tt.overlapped())
    assert not [w for w in result.warnings if w.code == "trace_clock_skew"]


def test_steps_sharing_a_name_are_kept_apart_by_time(tmp_path):
    result, rank = _rank(tmp_path, tt.same_named_steps(3))
    assert [s.step for s in rank.steps] == [1, 2, 3]  # numbered in time order
    assert [s.start_s for s in rank.steps] == sorted(s.start_s for s in rank.steps)
    assert sum(g.calls for g in result.ops) == 3  # no op dropped, none counted twice
    assert sum(g.time_s for g in result.ops) == pytest.approx(900e-6)
    (notice,) = [w for w in result.warnings if w.code == "trace_repeated_steps"]
    assert notice.values["steps"] == (1,) and (notice.values["first"], notice.values["last"]) == (1, 3)


def test_a_copy_of_a_trace_given_beside_it_is_refused(tmp_path):
    from infer_opt.errors import InvalidInput
    from infer_opt.trace.reader import trace_files

    a = tt.write(tmp_path / "a.json", tt.two_gpus())
    b = tmp_path / "b.json"
    b.write_bytes(a.read_bytes())
    with pytest.raises(InvalidInput, match=r"given twice .*the same bytes"):
        trace_files([a, b])
    c = tt.write(tmp_path / "c.json", tt.overlapped())
    assert trace_files([a, c]) == [a, c]


def test_hta_conventions_count_comm_under_compute_once_too(tmp_path):
    from infer_opt.trace.reader import read_trace

    rank = tl.hta_rank_timeline(read_trace(tt.write(tmp_path / "t.json", tt.overlapped())))
    assert rank.comm_fraction == pytest.approx(0.0)
    assert rank.comm_overlapped_fraction == pytest.approx(400 / 500)
    assert rank.idle_fraction + rank.compute_fraction + rank.non_compute_fraction == pytest.approx(1.0)
