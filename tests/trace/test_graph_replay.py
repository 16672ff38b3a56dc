"""The dependency graph and its replay on hand-made traces: one exact fixture per dependency
kind (a sync, a cross-stream wait, a graph launch, a pre-window launch, two threads), SPEC §7.1's
worked check, and the replay's invariants (unedited = the trace; faster never later)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.trace import graph as tg
from infer_opt.trace.events import LAUNCH_BEFORE_WINDOW
from infer_opt.trace.graph import build_graph
from infer_opt.trace.replay import replay, step_replays
from tests.trace.builders import make_events


def build(launches, gpu, *, tids=None, gpu_args=None, steps=()):
    """``make_events`` with each launch's thread and each GPU event's args."""
    ev = make_events(launches=launches, gpu=gpu, steps=steps)
    if tids is not None:
        ev = dataclasses.replace(
            ev, launches=dataclasses.replace(ev.launches, tid=np.array(tids, dtype=np.int64))
        )
    if gpu_args is not None:
        ev = dataclasses.replace(ev, gpu=dataclasses.replace(ev.gpu, args=tuple(gpu_args)))
    return ev


def gpu_times(ev, rep):
    return rep.gpu_start_us().tolist(), rep.gpu_end_us().tolist()


def assert_self_replay(ev):
    g = build_graph(ev)
    rep = replay(g)
    # exact up to float rounding (start + (S − start) need not be S in floats)
    np.testing.assert_allclose(rep.start, g.start, rtol=0, atol=1e-9)
    np.testing.assert_allclose(rep.end, g.start + g.dur, rtol=0, atol=1e-9)
    for s in step_replays(ev, g, rep):
        assert s.replayed_s == pytest.approx(s.measured_s, rel=0, abs=1e-15)
    return g, rep


def gpu_dur(g, ev, **by_index):
    """The graph's durations with GPU events ``i`` set to ``by_index['k<i>']``."""
    dur = g.dur.copy()
    for key, value in by_index.items():
        dur[g.n_host + int(key[1:])] = value
    return dur


def host_bound(n=100, period=10.0, call=2.0, kernel=3.0, latency=2.0):
    """SPEC §7.1: a launch every ``period`` µs (the call ``call`` µs), each kernel ``kernel`` µs."""
    launches = [("cudaLaunchKernel", period * i, call, i + 1, -1) for i in range(n)]
    gpu = [("kernel", "k", period * i + latency, kernel, 7, i + 1, i, -1, -1) for i in range(n)]
    return build(launches, gpu)


def test_host_bound_worked_check():
    ev = host_bound()
    g, rep = assert_self_replay(ev)
    (s,) = step_replays(ev, g, rep)
    assert s.measured_s == pytest.approx(993e-6)
    halved = replay(g, dur=np.where(np.arange(g.n) >= g.n_host, g.dur / 2, g.dur))
    (h,) = step_replays(ev, g, halved)
    assert h.replayed_s == pytest.approx(991.5e-6)  # the last kernel ends 1.5 µs sooner: 1.0015×
    assert s.measured_s / h.replayed_s == pytest.approx(1.0, abs=2e-3)
    assert g.typical["launch"] == 2.0 and g.unplaced == {}


def test_device_bound_queue_follows_kernel_time():
    # launches every 1 µs, kernels of 10 µs queue on the stream: halving them halves the span
    launches = [("cudaLaunchKernel", float(i), 1.0, i + 1, -1) for i in range(10)]
    gpu = [("kernel", "k", 5.0 + 10 * i, 10.0, 7, i + 1, i, -1, -1) for i in range(10)]
    ev = build(launches, gpu)
    g, _ = assert_self_replay(ev)
    rep = replay(g, dur=np.where(np.arange(g.n) >= g.n_host, g.dur / 2, g.dur))
    starts, ends = gpu_times(ev, rep)
    assert starts == [5.0 + 5 * i for i in range(10)]
    assert ends[-1] == 55.0


def test_stream_sync_waits_for_its_stream():
    # k0 100 µs on stream 7; the host syncs at 5 (returns at 105: wake 3); k1 launched 5 µs later
    launches = [
        ("cudaLaunchKernel", 0.0, 2.0, 1, -1),
        ("cudaStreamSynchronize", 5.0, 100.0, 2, -1),
        ("cudaLaunchKernel", 110.0, 2.0, 3, -1),
    ]
    gpu = [("kernel", "k0", 2.0, 100.0, 7, 1, 0, -1, -1), ("kernel", "k1", 112.0, 1.0, 7, 3, 2, -1, -1)]
    ev = build(launches, gpu)
    g, _ = assert_self_replay(ev)
    assert g.waits[1] == ((g.n_host + 0, 3.0),)
    rep = replay(g, dur=gpu_dur(g, ev, k0=50.0))
    assert rep.end[1] == 55.0  # 2 + 50 + wake 3
    assert gpu_times(ev, rep)[0] == [2.0, 62.0]  # the launch 5 µs of host work later, +2 latency


def test_stream_sync_from_its_cuda_sync_record_names_the_stream():
    # two streams; the sync's record names stream 9, so the long kernel on 7 is not waited for
    launches = [
        ("cudaLaunchKernel", 0.0, 1.0, 1, -1),
        ("cudaLaunchKernel", 1.0, 1.0, 2, -1),
        ("cudaStreamSynchronize", 2.0, 20.0, 3, -1),
    ]
    gpu = [
        ("kernel", "long", 2.0, 100.0, 7, 1, 0, -1, -1),
        ("kernel", "short", 3.0, 18.0, 9, 2, 1, -1, -1),
        ("sync", "Stream Sync", 2.5, 19.0, 9, 3, 2, -1, -1),
    ]
    ev = build(launches, gpu, gpu_args=[{}, {}, {"stream": 9}])
    g, _ = assert_self_replay(ev)
    assert [w for w, _ in g.waits[2]] == [g.n_host + 1]
    rep = replay(g, dur=gpu_dur(g, ev, k1=8.0))
    assert rep.end[2] == 12.0  # 3 + 8 + wake 1
    # the record follows its call: 0.5 µs after its start, 0.5 µs before its end
    assert gpu_times(ev, rep)[0][2] == 2.5 and gpu_times(ev, rep)[1][2] == 11.5


def test_event_sync_and_cross_stream_wait():
    # k0 on stream 20, an event recorded after it (corr 2), stream 24 waits on it (Stream Wait
    # Event record), then k1 on 24; the host waits on the same event (Event Sync record)
    launches = [
        ("cudaLaunchKernel", 0.0, 1.0, 1, -1),
        ("cudaEventRecord", 1.0, 1.0, 2, -1),
        ("cudaStreamWaitEvent", 2.0, 1.0, 3, -1),
        ("cudaLaunchKernel", 3.0, 1.0, 4, -1),
        ("cudaEventSynchronize", 4.0, 50.0, 5, -1),
    ]
    gpu = [
        ("kernel", "k0", 1.0, 50.0, 20, 1, 0, -1, -1),
        ("sync", "Stream Wait Event", 3.0, 49.0, 24, 3, 2, -1, -1),
        ("kernel", "k1", 53.0, 5.0, 24, 4, 3, -1, -1),
        ("sync", "Event Sync", 4.5, 49.0, -1, 5, 4, -1, -1),
    ]
    wait = {"wait_on_stream": 20, "wait_on_cuda_event_record_corr_id": 2}
    ev = build(launches, gpu, gpu_args=[{}, {"stream": 24, **wait}, {}, {"stream": -1, **wait}])
    g, _ = assert_self_replay(ev)
    h = g.n_host
    assert g.waits[h + 1] == ((h + 0, 1.0),)  # the device waits on k0: ends 1 µs after it
    assert g.waits[4] == ((h + 0, 3.0),)
    rep = replay(g, dur=gpu_dur(g, ev, k0=20.0))
    starts, ends = gpu_times(ev, rep)
    assert ends[1] == 22.0 and starts[2] == 23.0 and rep.end[4] == 24.0


def test_graph_launch_releases_its_kernels_in_order():
    launches = [("cudaGraphLaunch", 0.0, 5.0, 1, -1)]
    gpu = [("kernel", f"g{i}", 6.0 + 4 * i, 3.0, 7, 1, 0, -1, -1) for i in range(3)]
    ev = build(launches, gpu)
    g, _ = assert_self_replay(ev)
    assert g.a1[g.n_host :].tolist() == [0, 0, 0]
    rep = replay(g, dur=gpu_dur(g, ev, k0=1.0))
    assert gpu_times(ev, rep)[0] == [6.0, 8.0, 12.0]  # 1 µs gaps kept; the launch still binds k0


def test_pre_window_launch_counted_and_placed_by_its_stream():
    launches = [("cudaLaunchKernel", 10.0, 1.0, 5, -1)]
    gpu = [
        ("kernel", "old", 0.0, 20.0, 7, 3, LAUNCH_BEFORE_WINDOW, -1, -1),
        ("kernel", "new", 20.5, 2.0, 7, 5, 0, -1, -1),
    ]
    ev = build(launches, gpu)
    g, _ = assert_self_replay(ev)
    assert g.unplaced == {tg.BEFORE_WINDOW: 1} and g.unplaced_examples[tg.BEFORE_WINDOW] == "old"
    rep = replay(g, dur=gpu_dur(g, ev, k0=5.0))
    # now its launch binds (no launch into an idle stream to learn a latency from: 0 µs)
    assert gpu_times(ev, rep)[0] == [0.0, 10.0]


def test_two_threads_launch_onto_one_stream():
    launches = [
        ("cudaLaunchKernel", 0.0, 1.0, 1, -1),
        ("cudaLaunchKernel", 2.0, 1.0, 2, -1),
        ("cudaLaunchKernel", 30.0, 1.0, 3, -1),
    ]
    gpu = [
        ("kernel", "a", 1.0, 10.0, 7, 1, 0, -1, -1),
        ("kernel", "b", 12.0, 10.0, 7, 2, 1, -1, -1),
        ("kernel", "c", 31.0, 1.0, 7, 3, 2, -1, -1),
    ]
    ev = build(launches, gpu, tids=[1, 2, 1])
    g, _ = assert_self_replay(ev)
    assert g.a2[:3].tolist() == [-1, -1, 0]  # thread order per thread
    rep = replay(g, dur=gpu_dur(g, ev, k0=1.0))
    assert gpu_times(ev, rep)[0] == [1.0, 3.0, 31.0]


def test_corrupt_timestamps_are_named_not_a_hang():
    launches = [("cudaLaunchKernel", 50.0, 1.0, 1, -1)]
    gpu = [("kernel", "early", 10.0, 5.0, 7, 1, 0, -1, -1)]
    ev = build(launches, gpu)
    g, _ = assert_self_replay(ev)
    assert g.unplaced == {tg.SKEW: 1} and g.unplaced_examples[tg.SKEW] == "early"


@st.composite
def chains(draw):
    n = draw(st.integers(1, 25))
    t, launches, gpu, free = 0.0, [], [], 0.0
    for i in range(n):
        t += draw(st.floats(0.0, 20.0, allow_nan=False))
        call = draw(st.floats(0.0, 3.0))
        launches.append(("cudaLaunchKernel", t, call, i + 1, -1))
        start = max(t + draw(st.floats(0.0, 5.0)), free + draw(st.floats(0.0, 2.0)))
        dur = draw(st.floats(0.0, 30.0))
        gpu.append(("kernel", "k", start, dur, 7, i + 1, len(launches) - 1, -1, -1))
        free = start + dur
        t += call
        if draw(st.booleans()):
            launches.append(("cudaStreamSynchronize", t, max(0.0, free - t) + 1.0, 10_000 + i, -1))
            t = max(t, free) + 1.0
    return build(launches, gpu)


@settings(max_examples=60, deadline=None)
@given(chains(), st.data())
def test_replay_properties(ev, data):
    g, rep = assert_self_replay(ev)
    k = data.draw(st.integers(0, len(ev.gpu) - 1))
    factor = data.draw(st.floats(0.0, 1.0))
    dur = g.dur.copy()
    dur[g.n_host + k] *= factor
    faster = replay(g, dur=dur)
    assert np.all(faster.end <= rep.end + 1e-9)  # faster never later
    resumed = replay(g, dur=dur, since=rep)  # from the first point the edit touches: the same
    np.testing.assert_array_equal(resumed.start, faster.start)
    np.testing.assert_array_equal(resumed.end, faster.end)
    saved = g.dur[g.n_host + k] - dur[g.n_host + k]
    (s0,) = step_replays(ev, g, rep)
    (s1,) = step_replays(ev, g, faster)
    assert s0.replayed_s - s1.replayed_s <= saved * 1e-6 + 1e-12  # never more than Δ


# ---------------------------------------------------------------- what bounds a step


def bounds_of(ev, rep=None):
    from infer_opt.trace.critical import step_bounds

    g = build_graph(ev)
    return step_bounds(ev, rep or replay(g))


def test_critical_path_of_the_host_bound_check():
    (b,) = bounds_of(host_bound())
    us = {k: round(v * 1e6, 9) for k, v in b.causes.items()}
    # the last kernel (3), its launch (2), then 99 gaps of host work (8) and 98 launch calls (2)
    assert us == {"host": 792.0, "launch": 198.0, "kernel": 3.0, "memcpy": 0.0, "sync_wait": 0.0, "comm": 0.0}
    assert b.kernels == {"other": pytest.approx(3e-6)}
    assert b.bound == "host" and b.bound_share == pytest.approx(990 / 993)
    assert b.idle == {"late launch": pytest.approx(99 * 7e-6)}


def test_critical_path_through_a_sync_names_it():
    launches = [
        ("cudaLaunchKernel", 0.0, 2.0, 1, -1),
        ("cudaStreamSynchronize", 5.0, 100.0, 2, 1),
        ("cudaLaunchKernel", 110.0, 2.0, 3, -1),
    ]
    gpu = [("kernel", "k0", 2.0, 100.0, 7, 1, 0, -1, -1), ("kernel", "k1", 112.0, 1.0, 7, 3, 2, -1, -1)]
    ops = [("aten::is_nonzero", 3.0, 104.0, -1, {}), ("aten::item", 4.0, 102.0, 0, {})]
    ev = make_events(ops=ops, launches=launches, gpu=gpu)
    (b,) = bounds_of(ev)
    us = {k: round(v * 1e6, 9) for k, v in b.causes.items()}
    # k1 (1) ← launch (2) ← host work (5) ← the sync's wake after k0 (3) ← k0 (100), to k0's start
    assert us == {"host": 5.0, "launch": 2.0, "kernel": 101.0, "memcpy": 0.0, "sync_wait": 3.0, "comm": 0.0}
    assert b.bound == "device"
    # the op it sat in, past the scalar-read plumbing (aten::item)
    assert b.idle == {"host work after sync: cudaStreamSynchronize in aten::is_nonzero": pytest.approx(10e-6)}


def test_cross_stream_wait_is_an_idle_cause():
    launches = [
        ("cudaLaunchKernel", 0.0, 1.0, 1, -1),
        ("cudaEventRecord", 1.0, 1.0, 2, -1),
        ("cudaStreamWaitEvent", 2.0, 1.0, 3, -1),
        ("cudaLaunchKernel", 3.0, 1.0, 4, -1),
    ]
    gpu = [
        ("kernel", "k0", 1.0, 50.0, 20, 1, 0, -1, -1),
        ("sync", "Stream Wait Event", 3.0, 49.0, 24, 3, 2, -1, -1),
        ("kernel", "k1", 60.0, 5.0, 24, 4, 3, -1, -1),
    ]
    wait = {"wait_on_stream": 20, "wait_on_cuda_event_record_corr_id": 2}
    ev = build(launches, gpu, gpu_args=[{}, {"stream": 24, **wait}, {}])
    (b,) = bounds_of(ev)
    assert b.idle == {"cross-stream wait": pytest.approx(9e-6)}
    assert b.causes["sync_wait"] == pytest.approx(1e-6) and b.causes["launch"] == pytest.approx(8e-6)


@settings(max_examples=40, deadline=None)
@given(chains())
def test_critical_path_sums_to_the_step(ev):
    for b in bounds_of(ev):
        assert sum(b.causes.values()) == pytest.approx(b.span_s, rel=1e-9, abs=1e-15)
        assert sum(b.kernels.values()) == pytest.approx(b.causes["kernel"], rel=1e-9, abs=1e-15)
        assert (b.bound in ("host", "device") and 0.5 <= b.bound_share <= 1.0) or b.span_s == 0


def test_a_kernel_before_its_launch_is_a_notice_naming_it():
    from infer_opt.messages import text
    from infer_opt.trace import timeline as tt
    from infer_opt.trace.critical import with_bounds
    from infer_opt.trace.replay import replay_rank

    launches = [("cudaLaunchKernel", 50.0, 1.0, 1, -1), ("cudaLaunchKernel", 60.0, 1.0, 2, -1)]
    gpu = [("kernel", "early", 10.0, 5.0, 7, 1, 0, -1, -1), ("kernel", "late", 62.0, 5.0, 7, 2, 1, -1, -1)]
    ev = build(launches, gpu)
    rr = replay_rank(ev)
    rank = with_bounds(tt.rank_timeline(ev), rr.bounds, rr.graph)
    (notice,) = [w for w in rank.warnings if w.code == "trace_replay_unplaced"]
    assert "1 events" in text(notice) and "early" in text(notice)
    assert rank.replay_unplaced == {tg.SKEW: 1}


def test_a_step_window_starts_no_earlier_than_the_previous_one_ends():
    # step 1: K0 on stream 7 (50 µs); step 2: K1 on stream 9, K2 queued on 7
    launches = [
        ("cudaLaunchKernel", 0.0, 1.0, 1, -1),
        ("cudaLaunchKernel", 100.0, 1.0, 2, -1),
        ("cudaLaunchKernel", 101.0, 1.0, 3, -1),
    ]
    gpu = [
        ("kernel", "k0", 2.0, 50.0, 7, 1, 0, -1, 0),
        ("kernel", "k1", 102.0, 1.0, 9, 2, 1, -1, 1),
        ("kernel", "k2", 103.0, 50.0, 7, 3, 2, -1, 1),
    ]
    ev = build(launches, gpu, steps=[(1, 0.0, 100.0), (2, 100.0, 200.0)])
    g, _ = assert_self_replay(ev)
    # the host between the steps 2× faster: step 2 is launched at 51 (k1 at 53, k2 at 54)
    faster = replay(g, l2=np.where(g.host_gap, g.l2 / 2, g.l2))
    s1, s2 = step_replays(ev, g, faster)
    assert s2.replayed_s == pytest.approx(51e-6)  # 53 .. 104: the same 51 µs, only earlier
    # k0 4× longer (200 µs): k1 still runs at 102, k2 waits for k0 (ends 202): step 2's window
    # starts where step 1's ends, not at k1 (no overlap the trace did not have)
    longer = replay(g, dur=gpu_dur(g, ev, k0=200.0))
    s1, s2 = step_replays(ev, g, longer)
    assert s1.replayed_s == pytest.approx(200e-6) and s2.replayed_s == pytest.approx(50e-6)


@pytest.mark.parametrize(
    ("copy", "blocks"),
    [("Memcpy HtoD (Pageable -> Device)", True), ("Memcpy HtoD (Pinned -> Device)", False)],
)
def test_an_async_copy_of_pageable_memory_blocks_the_host_until_its_copy_ends(copy, blocks):
    # cudaMemcpyAsync at 0 for 3500 µs; its copy 100 → 3460 (3360 µs); the next launch 40 µs of
    # host work after the call returned. A pageable copy: the call ends with its copy (+40 wake),
    # so a copy 3× faster (1120 µs) brings the call back to 1260 and the kernel to 1304; a pinned
    # copy's call is the host's own work and keeps its 3500 µs.
    launches = [("cudaMemcpyAsync", 0.0, 3500.0, 1, -1), ("cudaLaunchKernel", 3540.0, 2.0, 2, -1)]
    gpu = [("memcpy", copy, 100.0, 3360.0, 7, 1, 0, -1, -1), ("kernel", "k1", 3544.0, 10.0, 7, 2, 1, -1, -1)]
    ev = build(launches, gpu)
    g, _ = assert_self_replay(ev)
    assert (0 in g.waits) is blocks
    rep = replay(g, dur=gpu_dur(g, ev, k0=1120.0))
    if blocks:
        assert g.waits[0] == ((g.n_host + 0, 40.0),)
        assert rep.end[0] == 1260.0  # 100 + 1120 + wake 40
        assert gpu_times(ev, rep) == ([100.0, 1304.0], [1220.0, 1314.0])  # launch 1300, +4 latency
    else:
        assert rep.end[0] == 3500.0
        assert gpu_times(ev, rep)[0] == [100.0, 3544.0]
