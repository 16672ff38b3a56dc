"""Two ranks replayed jointly (trace/replay_ranks.py): a collective's kernel ends no earlier than
the last peer's matching kernel's start + its transfer; the waits iterated to a fixed point."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.trace.graph import build_graph
from infer_opt.trace.replay_ranks import collective_events, replay_ranks
from tests.trace.builders import make_events

AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def rank(compute_us: float, end_us: float = 175.0):
    """One rank: a compute kernel of ``compute_us`` at 5 µs, then an all-reduce queued behind it
    on the same stream, ending at ``end_us`` (its measured end: the last peer's start + 20)."""
    launches = [("cudaLaunchKernel", 0.0, 2.0, 1, -1), ("cudaLaunchKernel", 3.0, 2.0, 2, -1)]
    ar_start = 5.0 + compute_us
    gpu = [
        ("kernel", "gemm", 5.0, compute_us, 7, 1, 0, -1, -1),
        ("kernel", AR, ar_start, end_us - ar_start, 7, 2, 1, -1, -1),
    ]
    return make_events(launches=launches, gpu=gpu)


def two_ranks():
    # rank 0 computes 100 µs, reaches the all-reduce at 105; rank 1 computes 150 µs, 50 µs late
    # (155): rank 0's kernel waits 50 µs, both end at 175 (transfer 20 µs)
    return {0: rank(100.0), 1: rank(150.0)}


def test_the_collectives_are_matched_by_group_name_and_position():
    ev = two_ranks()
    assert collective_events(ev[0]) == [(("", "all_reduce", 0), 1)]
    joint = replay_ranks(ev)
    (c,) = joint.collectives
    assert (c.name, c.index) == ("all_reduce", 0)
    assert [(m.rank, m.gpu, m.transfer_us) for m in c.members] == [(0, 1, 20.0), (1, 1, 20.0)]


def test_unedited_the_joint_replay_is_the_trace_and_rank_0_waits_for_rank_1():
    joint = replay_ranks(two_ranks())
    assert joint.converged and joint.iterations == 2
    assert joint.waits_us == {(0, 1): 50.0, (1, 1): 0.0}
    s0, e0 = joint.gpu_times_us(0)
    s1, e1 = joint.gpu_times_us(1)
    assert s0.tolist() == [5.0, 105.0] and e0.tolist() == [105.0, 175.0]
    assert s1.tolist() == [5.0, 155.0] and e1.tolist() == [155.0, 175.0]


def test_halving_the_late_ranks_compute_shrinks_the_others_wait():
    ev = two_ranks()
    graphs = {r: build_graph(e) for r, e in ev.items()}
    dur1 = graphs[1].dur.copy()
    dur1[graphs[1].n_host + 0] = 75.0  # rank 1's compute halved: it reaches the all-reduce at 80
    joint = replay_ranks(ev, graphs=graphs, durs={1: dur1})
    assert joint.converged
    # now rank 0 (105) is the last: its wait 50 → 0, rank 1 waits 25; both end at 105 + 20
    assert joint.waits_us == {(0, 1): 0.0, (1, 1): 25.0}
    assert joint.gpu_times_us(0)[1].tolist() == [105.0, 125.0]
    assert joint.gpu_times_us(1)[1].tolist() == [80.0, 125.0]
    # each rank replayed alone keeps rank 0's measured 50 µs wait inside its kernel: 175
    from infer_opt.trace.replay import replay

    assert replay(graphs[0]).end[graphs[0].n_host + 1] == 175.0


def test_a_fixed_point_not_reached_is_said():
    joint = replay_ranks(two_ranks(), max_iterations=1)
    assert not joint.converged and joint.iterations == 1


def test_a_collective_on_one_rank_only_is_not_matched():
    joint = replay_ranks({0: rank(100.0, 125.0), 1: make_events(launches=[], gpu=[])})
    assert joint.collectives == () and joint.converged
    assert joint.gpu_times_us(0)[1].tolist() == [105.0, 125.0]


@settings(max_examples=40, deadline=None)
@given(
    st.floats(20.0, 500.0),  # long enough that each all-reduce queues behind its compute, not its
    st.floats(20.0, 500.0),  # launch (launched at 3 µs, typical latency 5 µs), even halved
    st.floats(0.0, 100.0),
    st.floats(0.5, 1.0),
)
def test_unedited_is_the_trace_and_a_faster_peer_never_ends_anything_later(c0, c1, transfer, scale):
    end = 5.0 + max(c0, c1) + transfer
    ev = {0: rank(c0, end), 1: rank(c1, end)}
    graphs = {r: build_graph(e) for r, e in ev.items()}
    joint = replay_ranks(ev, graphs=graphs)
    assert joint.converged
    for r in (0, 1):
        np.testing.assert_allclose(joint.gpu_times_us(r)[1], ev[r].gpu.ts_us + ev[r].gpu.dur_us, atol=1e-6)
    dur1 = graphs[1].dur.copy()
    dur1[graphs[1].n_host] *= scale
    faster = replay_ranks(ev, graphs=graphs, durs={1: dur1})
    assert faster.converged
    for r in (0, 1):
        assert (faster.gpu_times_us(r)[1] <= joint.gpu_times_us(r)[1] + 1e-6).all()
        # the all-reduce ends at the last arrival + the transfer
        assert faster.gpu_times_us(r)[1][1] == pytest.approx(5.0 + max(c0, c1 * scale) + transfer, abs=1e-6)


def test_a_match_that_ended_before_its_last_peer_started_is_not_one_collective():
    # rank 0's all-reduce ends at 125, before rank 1's starts (155): it met other peers (or the
    # clocks disagree): left out and counted, each rank keeps its own measured times
    ev = {0: rank(100.0, 125.0), 1: rank(150.0, 175.0)}
    joint = replay_ranks(ev)
    assert joint.collectives == () and joint.inconsistent == 1
    assert joint.gpu_times_us(0)[1].tolist() == [105.0, 125.0]
    assert joint.gpu_times_us(1)[1].tolist() == [155.0, 175.0]
    assert replay_ranks(two_ranks()).inconsistent == 0
