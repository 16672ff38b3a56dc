"""The straggler's cost replayed (trace/straggler_replay.py): the ranks replayed jointly, then
with the straggler's own work in the step scaled to the median rank's; worked numbers on
hand-made ranks, and the saving's properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.trace import cross_rank as xr
from infer_opt.trace import straggler_replay as tsr
from infer_opt.trace import timeline as tt
from infer_opt.trace.replay_ranks import rank_input
from tests.trace.builders import make_events

AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def rank(compute_us: float, end_us: float, tail_us: float = 0.0):
    """ProfilerStep#1 (CPU 0–400 µs): a gemm of ``compute_us`` at 5 µs (launched at 0, 2 µs
    calls, 1 µs of host work between), then an all-reduce queued behind it ending at ``end_us``,
    then, with ``tail_us``, a kernel of that length after it."""
    launches = [("cudaLaunchKernel", 0.0, 2.0, 1, -1), ("cudaLaunchKernel", 3.0, 2.0, 2, -1)]
    ar_start = 5.0 + compute_us
    gpu = [
        ("kernel", "gemm", 5.0, compute_us, 7, 1, 0, -1, 0),
        ("kernel", AR, ar_start, end_us - ar_start, 7, 2, 1, -1, 0),
    ]
    if tail_us:
        launches.append(("cudaLaunchKernel", 6.0, 2.0, 3, -1))
        gpu.append(("kernel", "tail", end_us, tail_us, 7, 3, 2, -1, 0))
    return make_events(launches=launches, gpu=gpu, steps=[(1, 0.0, 400.0)])


def job(ev: dict):
    """(inputs, timelines, stragglers) as analyze() hands them over."""
    timelines = [tt.rank_timeline(e) for e in ev.values()]
    timelines = [type(t)(**{**t.__dict__, "rank": r}) for r, t in zip(ev, timelines, strict=True)]
    records = {r: xr.collective_records(e, tt.analyzed_mask(e)) for r, e in ev.items()}
    crossed = xr.analyze_ranks(timelines, records)
    return {r: rank_input(e) for r, e in ev.items()}, timelines, crossed.straggler


def test_the_late_rank_as_fast_as_the_median_saves_what_the_others_waited():
    # rank 0: 100 µs of gemm, reaches the all-reduce at 105; rank 1: 150 µs, at 155; both end
    # at 175 (20 µs transfer). Step 5 → 175: 170 µs on both. Outside communication rank 0 spent
    # 170 − 70 = 100 µs, rank 1 170 − 20 = 150: k = 100 / 150. Rank 1's gemm 150 → 100 µs: it
    # reaches the all-reduce at 105 with rank 0, both end at 125: the step 120 µs, 50 saved —
    # what rank 0 waited (cost_s).
    inputs, timelines, found = job({0: rank(100.0, 175.0), 1: rank(150.0, 175.0)})
    (s,) = found
    assert (s.step, s.rank, s.cost_s) == (1, 1, pytest.approx(50e-6))
    (r,), check = tsr.on_time(inputs, timelines, found)
    assert r.on_time_scale == pytest.approx(2 / 3)
    assert r.replayed_step_s == pytest.approx(170e-6)
    assert r.replayed_step_s_if_on_time == pytest.approx(120e-6)
    assert r.replayed_saving_s == pytest.approx(50e-6)
    assert r.replayed_vs_waits == "same"
    assert (check.steps, check.error_max, check.matched, check.left_out) == (1, 0.0, 1, 0) and check.converged


def test_a_late_rank_whose_peer_ends_the_step_later_saves_only_up_to_that_peer():
    # rank 0 reaches the all-reduce at 105 and has 40 µs of work after it: it ends at 215;
    # rank 1 reaches it at 155 and has none: 175. The job's step (5 → 215) is rank 0's: 210 µs.
    # Outside communication: rank 0 210 − 70 = 140, rank 1 170 − 20 = 150: k = 140 / 150, rank
    # 1's gemm 150 → 140 µs: at the all-reduce at 145, it ends at 165, rank 0's tail at 205:
    # 10 µs saved, against the 50 µs rank 0 waited (the waits' sum promises 5× more).
    inputs, timelines, found = job({0: rank(100.0, 175.0, tail_us=40.0), 1: rank(150.0, 175.0)})
    (r,), check = tsr.on_time(inputs, timelines, found)
    assert r.rank == 1 and r.cost_s == pytest.approx(50e-6)
    assert r.on_time_scale == pytest.approx(140 / 150)
    assert r.replayed_step_s == pytest.approx(210e-6)
    assert r.replayed_saving_s == pytest.approx(10e-6)
    assert r.replayed_vs_waits.startswith("less")
    assert check.error_max == 0.0


def test_no_rank_slower_than_the_median_saves_nothing():
    inputs, timelines, found = job({0: rank(100.0, 125.0), 1: rank(100.0, 125.0)})
    (r,), _ = tsr.on_time(inputs, timelines, found)
    assert r.on_time_scale == 1.0 and r.replayed_saving_s == 0.0
    assert r.replayed_step_s_if_on_time == r.replayed_step_s


def test_the_edit_touches_only_the_straggler_s_own_work_in_the_step():
    inp = rank_input(rank(150.0, 175.0))
    g, h = inp.graph, inp.graph.n_host
    dur, l2 = tsr.edited(inp, 1, 0.5)
    assert dur[:h].tolist() == [1.0, 1.0]  # the two launch calls
    assert dur[h:].tolist() == [75.0, 20.0]  # the gemm halved, the all-reduce kept
    assert l2[1] == g.l2[1] * 0.5 and g.host_gap[1]  # the host work between the calls
    assert tsr.edited(inp, 7, 0.5)[0].tolist() == g.dur.tolist()  # no such step: nothing


@settings(max_examples=40, deadline=None)
@given(
    st.floats(20.0, 400.0),
    st.floats(20.0, 400.0),
    st.floats(0.0, 100.0),
    st.floats(0.0, 200.0),
)
def test_on_time_never_makes_the_step_longer_and_an_equal_job_saves_nothing(c0, c1, transfer, tail):
    end = 5.0 + max(c0, c1) + transfer
    inputs, timelines, found = job({0: rank(c0, end, tail_us=tail), 1: rank(c1, end)})
    out, check = tsr.on_time(inputs, timelines, found)
    assert check.converged and check.error_max == pytest.approx(0.0, abs=1e-9)
    for r in out:
        assert r.replayed_saving_s >= -1e-12
        assert r.replayed_step_s_if_on_time <= r.replayed_step_s + 1e-12
        assert 0.0 <= r.on_time_scale <= 1.0
    same, timelines, found = job({0: rank(c0, end, tail_us=tail), 1: rank(c0, end, tail_us=tail)})
    (r,), _ = tsr.on_time(same, timelines, found)
    assert r.replayed_saving_s == 0.0
