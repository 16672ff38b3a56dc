"""The timer's control flow, driven by a fake clock and fake CUDA events."""

from __future__ import annotations

import itertools
from contextlib import nullcontext

import pytest

from infer_opt.clocks import MODE_CPU, MODE_EVENTS, MODE_GRAPH
from infer_opt.errors import InvalidInput, UnsupportedOnDevice
from infer_opt.messages import text
from infer_opt.notices import has
from infer_opt.profilers.timing import (
    GRAPH_SIDE_STREAM_WARMUP,
    measure,
)


class FakeTime:
    """A nanosecond clock that only moves when the fake work runs."""

    def __init__(self) -> None:
        self.now = 0
        self.log: list[str] = []

    def clock(self) -> int:
        return self.now

    def work(self, durations_ns):
        """A callable whose n-th call takes ``durations_ns[n]`` (cycled)."""
        it = itertools.cycle(durations_ns)

        def fn():
            self.log.append("call")
            self.now += next(it)

        return fn

    def sync(self) -> None:
        self.log.append("sync")


def test_fixed_reps_give_exact_samples_and_separate_cold_call():
    t = FakeTime()
    # cold 5 ms, then 3 warm-up calls of 2 µs, then reps of 1, 2, 3, 4 µs
    durations = [5_000_000, 2_000, 2_000, 2_000, 1_000, 2_000, 3_000, 4_000]
    fn = t.work(durations)
    m = measure(fn, warmup=3, reps=5, clock=t.clock, synchronize=t.sync)
    assert m.cold_s == pytest.approx(5e-3)
    assert m.warmup_calls == 3
    assert m.samples_s == pytest.approx((1e-6, 2e-6, 3e-6, 4e-6, 5e-3))
    assert t.log.count("call") == 1 + 3 + 5
    assert m.mode == MODE_CPU
    assert m.summary.median_s == pytest.approx(3e-6)
    assert m.summary.n == 5


def test_samples_exclude_warmup_and_cold_when_cold_is_off():
    t = FakeTime()
    fn = t.work([7_000, 1_000])
    m = measure(fn, warmup=0, reps=4, time_cold=False, clock=t.clock, synchronize=t.sync)
    assert m.cold_s is None
    assert m.warmup_calls == 0
    assert m.samples_s == pytest.approx((7e-6, 1e-6, 7e-6, 1e-6))


def test_calls_per_sample_divides_each_sample():
    t = FakeTime()
    fn = t.work([1_000, 3_000])
    m = measure(fn, warmup=0, reps=3, calls_per_sample=2, time_cold=False, clock=t.clock, synchronize=t.sync)
    assert m.samples_s == pytest.approx((2e-6, 2e-6, 2e-6))
    assert m.calls_per_sample == 2
    assert t.log.count("call") == 6


def test_warmup_by_time_runs_until_the_duration_is_reached():
    t = FakeTime()
    fn = t.work([1_000_000])  # 1 ms a call
    m = measure(
        fn, warmup=None, warmup_time_s=0.0045, reps=2, time_cold=False, clock=t.clock, synchronize=t.sync
    )
    assert m.warmup_calls == 5  # 4 ms < 4.5 ms, 5 ms >= 4.5 ms
    assert len(m.samples_s) == 2


def test_warmup_needs_both_count_and_time():
    t = FakeTime()
    fn = t.work([1_000_000])
    m = measure(fn, warmup=8, warmup_time_s=0.002, reps=1, time_cold=False, clock=t.clock, synchronize=t.sync)
    assert m.warmup_calls == 8


def test_adaptive_stops_once_spread_settles():
    t = FakeTime()
    # noisy first samples, then a steady 10 µs
    fn = t.work([10_000, 30_000, 5_000, 50_000, 10_000] + [10_000] * 100)
    m = measure(
        fn,
        warmup=0,
        reps=None,
        min_reps=5,
        max_reps=100,
        target_rel_iqr=0.05,
        time_cold=False,
        clock=t.clock,
        synchronize=t.sync,
    )
    n = len(m.samples_s)
    assert 5 < n < 100
    assert m.summary.rel_iqr <= 0.05
    # one fewer sample and it had not settled yet
    from infer_opt.stats import Summary

    assert Summary.from_samples(m.samples_s[:-1]).rel_iqr > 0.05
    assert not has(m.warnings, "variance_not_settled")


def test_adaptive_hits_the_cap_and_warns():
    t = FakeTime()
    fn = t.work([1_000, 3_000])  # never settles: IQR/median ~ 100%
    m = measure(fn, warmup=0, reps=None, max_reps=12, time_cold=False, clock=t.clock, synchronize=t.sync)
    assert len(m.samples_s) == 12
    (unsettled,) = [n for n in m.warnings if n.code == "variance_not_settled"]
    assert unsettled["max_reps"] == 12 and unsettled["target"] == 0.05
    assert "12 repetitions" in text(unsettled)
    assert has(m.warnings, "high_variance") and "--reps" in text(m.warnings[-1])


def test_time_cap_stops_a_fixed_run_after_min_reps():
    t = FakeTime()
    fn = t.work([1_000_000])  # 1 ms
    m = measure(
        fn,
        warmup=0,
        reps=100,
        min_reps=3,
        max_time_s=0.0055,
        time_cold=False,
        clock=t.clock,
        synchronize=t.sync,
    )
    assert len(m.samples_s) == 6
    (cut,) = m.warnings
    assert (cut.code, cut["reps"], cut["wanted"]) == ("reps_cut_by_time", 6, 100)
    assert "stopped after 6 of 100" in text(cut)


def test_flush_runs_outside_the_timed_region():
    t = FakeTime()
    flushes = []

    def flush():
        flushes.append(1)
        t.now += 1_000_000_000  # a slow flush must not show up in the samples

    fn = t.work([2_000])
    m = measure(
        fn,
        warmup=1,
        reps=4,
        flush_cache=True,
        flush=flush,
        time_cold=False,
        clock=t.clock,
        synchronize=t.sync,
    )
    assert len(flushes) == 4
    assert m.samples_s == pytest.approx((2e-6,) * 4)
    assert m.flushed


def test_min_sample_time_batches_short_calls():
    t = FakeTime()
    fn = t.work([500])  # 0.5 µs
    m = measure(
        fn, warmup=4, reps=3, min_sample_time_s=10e-6, time_cold=False, clock=t.clock, synchronize=t.sync
    )
    assert m.calls_per_sample == 20
    assert m.samples_s == pytest.approx((5e-7,) * 3)


def test_steady_samples_give_no_warnings():
    t = FakeTime()
    m = measure(t.work([1_000]), warmup=1, reps=10, clock=t.clock, synchronize=t.sync)
    assert m.warnings == ()


class FakeEvent:
    def __init__(self, backend):
        self.backend = backend
        self.at = None

    def record(self):
        self.backend.log.append("record")
        self.at = self.backend.t.now

    def elapsed_time(self, end):
        assert self.backend.synced_after_record, "elapsed_time read before synchronize"
        return (end.at - self.at) / 1e6  # milliseconds, like torch.cuda.Event


class FakeCuda:
    def __init__(self, t):
        self.t = t
        self.log = t.log
        self.syncs = 0
        self.synced_after_record = False
        self.captured = None

    def event(self):
        self.synced_after_record = False
        return FakeEvent(self)

    def synchronize(self):
        self.syncs += 1
        self.log.append("sync")
        self.synced_after_record = True

    def activate(self):
        return nullcontext()

    def capture(self, fn, calls):
        for _ in range(GRAPH_SIDE_STREAM_WARMUP):
            fn()
        self.captured = calls

        def replay():
            self.log.append("replay")
            self.t.now += 1_500 * calls  # a graph replays each call in 1.5 µs

        return replay


def test_cuda_events_one_sync_for_a_fixed_run():
    t = FakeTime()
    cuda = FakeCuda(t)
    fn = t.work([4_000, 2_000])
    m = measure(
        fn,
        device="cuda:0",
        warmup=2,
        warmup_time_s=0,
        reps=6,
        time_cold=False,
        clock=t.clock,
        cuda_backend=cuda,
    )
    assert m.mode == MODE_EVENTS
    assert m.samples_s == pytest.approx((4e-6, 2e-6) * 3)
    # warm-up ends with a sync, then the 6 repetitions share exactly one
    after_warmup = t.log[t.log.index("record") :]
    assert after_warmup.count("sync") == 1 and after_warmup[-1] == "sync"
    assert after_warmup.count("record") == 12


def test_cuda_events_adaptive_synchronises_per_batch():
    t = FakeTime()
    cuda = FakeCuda(t)
    fn = t.work([1_000, 3_000])
    m = measure(
        fn,
        device="cuda",
        warmup=0,
        warmup_time_s=0,
        reps=None,
        min_reps=5,
        max_reps=25,
        clock=t.clock,
        cuda_backend=cuda,
    )
    assert len(m.samples_s) == 25  # 5 + 10 + 10
    assert cuda.syncs == 2 + 1 + 3  # cold call (2), end of warm-up (1), one per batch (3)


def test_cuda_graph_mode_times_replays_and_divides_by_calls():
    t = FakeTime()
    cuda = FakeCuda(t)
    fn = t.work([9_000])
    m = measure(
        fn,
        device="cuda",
        warmup=3,
        warmup_time_s=0,
        reps=4,
        cuda_graph=True,
        calls_per_sample=10,
        clock=t.clock,
        cuda_backend=cuda,
    )
    assert m.mode == MODE_GRAPH
    assert cuda.captured == 10
    assert m.samples_s == pytest.approx((1.5e-6,) * 4)
    assert m.warmup_calls == 3 + GRAPH_SIDE_STREAM_WARMUP
    assert m.cold_s == pytest.approx(9e-6)
    assert t.log.count("replay") == 4


def test_cuda_graph_on_cpu_is_unsupported():
    with pytest.raises(UnsupportedOnDevice, match="--cuda-graphs"):
        measure(lambda: None, device="cpu", cuda_graph=True)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"reps": 0},
        {"warmup": -1},
        {"calls_per_sample": 0},
        {"max_time_s": -1.0},
        {"target_rel_iqr": 0.0},
        {"min_reps": 10, "max_reps": 5},
    ],
)
def test_rejects_bad_settings(kwargs):
    with pytest.raises(InvalidInput):
        measure(lambda: None, **kwargs)


def test_real_clock_on_a_cpu_kernel():
    import torch

    x = torch.randn(256, 256)
    m = measure(lambda: x @ x, warmup=2, reps=5)
    assert m.summary.n == 5
    assert all(s > 0 for s in m.samples_s)
    assert m.summary.min_s <= m.summary.median_s <= m.summary.max_s


def test_real_cpu_flush_buffer_exceeds_the_llc():
    import torch

    from infer_opt.profilers.device import cpu_llc_bytes
    from infer_opt.profilers.timing import _FLUSH_BUFFERS, cache_flusher

    flush = cache_flusher("cpu")
    flush()
    buf = _FLUSH_BUFFERS["cpu"]
    assert buf.dtype == torch.int32
    assert buf.numel() * 4 > (cpu_llc_bytes() or 0)
    assert int(buf[0]) == int(buf[-1]) >= 2


@pytest.mark.gpu
def test_real_cuda_events_and_graph_agree_roughly():
    import torch

    x = torch.randn(2048, 2048, device="cuda")
    eager = measure(lambda: x @ x, device="cuda", warmup=5, reps=20)
    graph = measure(lambda: x @ x, device="cuda", warmup=5, reps=20, cuda_graph=True, calls_per_sample=5)
    flushed = measure(lambda: x @ x, device="cuda", warmup=5, reps=20, flush_cache=True)
    assert eager.mode == MODE_EVENTS and graph.mode == MODE_GRAPH and flushed.flushed
    # a 17 GFLOP matmul is kernel-bound: the three ways agree within 25%
    assert graph.median_s == pytest.approx(eager.median_s, rel=0.25)
    assert flushed.median_s == pytest.approx(eager.median_s, rel=0.25)


def test_stopping_checks_grow_geometrically():
    import itertools as it

    from infer_opt.profilers.timing import _batches

    sizes = list(it.islice(_batches(False, 10**6, 5, 1), 60))
    assert sizes[:3] == [5, 1, 1]
    totals = list(it.accumulate(sizes))
    assert totals[-1] > 1000  # 60 checks reach over a thousand samples
    assert list(_batches(True, 40, 5, 1)) == [40]


class _FakeTorchCuda:
    """Just the ``torch.cuda`` surface :class:`TorchCudaBackend.capture` uses, logging where
    each call happens (device context, stream, graph capture) and behaving as torch does at
    the edges: ``host_read`` (an ``.item()``) raises under ``set_sync_debug_mode("error")`` and
    invalidates a capture; a failed capture's ``capture_end`` raises over the real error and
    leaves the capture stream current (torch's ``graph.__exit__`` never reaches its stream
    context's exit); ``broken`` makes the device fail to synchronise."""

    def __init__(self, fail_capture: bool = False) -> None:
        self.log: list[str] = []
        self.where: list[str] = []  # context stack: "device:<d>", "stream:side", "capture"
        self.fail_capture = fail_capture
        self.sync_debug = 0
        self.capturing = False
        self.invalidated = False
        self.broken = False
        self.streams = 0
        fake = self

        class Stream:
            def __init__(self, device=None, name=None):
                fake.streams += 1
                self.name = name or ("side" if fake.streams == 1 else f"stream{fake.streams}")
                fake.log.append(f"new stream {self.name} on {device}")

            def wait_stream(self, other):
                fake.log.append(f"{self.name} waits for {other.name}")

        class CUDAGraph:
            def replay(self):
                fake.log.append("replay")

        self.Stream, self.CUDAGraph = Stream, CUDAGraph
        self.current = Stream.__new__(Stream)
        self.current.name = "current"

    def _ctx(self, label, stream=None):
        from contextlib import contextmanager

        @contextmanager
        def ctx():
            self.where.append(label)
            before = self.current
            if stream is not None:
                self.current = stream
            try:
                yield
            finally:
                self.where.pop()
                self.current = before

        return ctx()

    def device(self, device):
        return self._ctx(f"device:{device}")

    def stream(self, stream):
        return self._ctx(f"stream:{stream.name}", stream)

    def set_stream(self, stream):
        self.log.append(f"set stream {stream.name}")
        self.current = stream

    def graph(self, graph, stream=None):
        if self.fail_capture:
            raise RuntimeError("operation not permitted when stream is capturing\nmore")
        return _FakeGraphCapture(self, stream)

    def current_stream(self, device=None):
        self.log.append(f"current stream of {device}")
        return self.current

    def synchronize(self, device=None):
        if self.broken:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        self.log.append(f"sync {device}")

    def get_sync_debug_mode(self):
        return self.sync_debug

    def set_sync_debug_mode(self, mode):
        self.log.append(f"sync debug {mode}")
        self.sync_debug = {"default": 0, "warn": 1, "error": 2}.get(mode, mode)

    def host_read(self):
        """What ``.item()`` does: a device-to-host copy and a stream synchronisation."""
        if self.sync_debug == 2:
            raise RuntimeError("called a synchronizing CUDA operation")
        if self.capturing:
            self.invalidated = True
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")


class _FakeGraphCapture:
    def __init__(self, fake, stream):
        self.fake, self.stream, self.before = fake, stream, None

    def __enter__(self):
        fake = self.fake
        fake.where.append("capture")
        self.before, fake.current = fake.current, self.stream  # torch enters its stream context ...
        fake.capturing = True

    def __exit__(self, *exc):
        fake = self.fake
        fake.where.pop()
        fake.capturing = False
        if fake.invalidated or exc[0] is not None:
            # ... and leaves it only when capture_end succeeds
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")
        fake.current = self.before


def _fake_backend(fake_cuda, device="cuda:1"):
    from types import SimpleNamespace

    from infer_opt.profilers.timing import TorchCudaBackend

    backend = TorchCudaBackend.__new__(TorchCudaBackend)
    backend._torch = SimpleNamespace(cuda=fake_cuda)
    backend.device = device
    return backend


def test_real_backend_capture_warms_on_a_side_stream_then_captures_on_its_device():
    fake = _FakeTorchCuda()
    calls: list[tuple[str, ...]] = []

    def fn():
        calls.append(tuple(fake.where))
        fake.log.append("call")

    replay = _fake_backend(fake).capture(fn, 3)
    # warm-up on the side stream, then the captured calls; all under the run's device
    # (torch.cuda.graph captures on the current device, which need not be cuda:1)
    assert (
        calls
        == [("device:cuda:1", "stream:side")] * GRAPH_SIDE_STREAM_WARMUP + [("device:cuda:1", "capture")] * 3
    )
    log = fake.log
    assert log.index("side waits for current") < log.index("call")
    warm_end = [i for i, e in enumerate(log) if e == "call"][GRAPH_SIDE_STREAM_WARMUP - 1]
    assert warm_end < log.index("current waits for side") < [i for i, e in enumerate(log) if e == "call"][-1]
    # one replay to settle the graph, then a synchronize, before the replay is handed back
    assert log[-2:] == ["replay", "sync cuda:1"]
    replay()
    assert fake.log[-1] == "replay"


def test_real_backend_capture_failure_is_a_one_line_run_failure():
    from infer_opt.errors import RunFailure

    fake = _FakeTorchCuda(fail_capture=True)
    with pytest.raises(
        RunFailure, match=r"^CUDA graph capture failed: RuntimeError: operation not permitted"
    ):
        _fake_backend(fake).capture(lambda: None, 2)


def test_capture_failure_reports_the_innermost_cause_and_restores_the_stream():
    """A function that reads the device during capture (here past the side-stream check, as
    when the read depends on a call count): capture_end raises "operation failed due to a
    previous error during capture" over the real error; the message names the real one and
    the caller's stream is current again."""
    from infer_opt.profilers.timing import CaptureFailed

    fake = _FakeTorchCuda()
    calls = []

    def fn():
        calls.append(1)
        if len(calls) > GRAPH_SIDE_STREAM_WARMUP:
            fake.host_read()

    with pytest.raises(CaptureFailed) as info:
        _fake_backend(fake).capture(fn, 2)
    message = str(info.value)
    assert message.startswith(
        "CUDA graph capture failed: RuntimeError: CUDA error: operation not permitted when stream is "
        "capturing"
    )
    assert "(then: RuntimeError: CUDA error: operation failed due to a previous error" in message
    assert "\n" not in message
    assert fake.current.name == "current"  # restored, though torch's graph context never exited
    assert info.value.device_usable and fake.sync_debug == 0


def test_a_syncing_function_is_refused_before_capture_starts():
    from infer_opt.profilers.timing import CaptureFailed

    fake = _FakeTorchCuda()
    with pytest.raises(
        CaptureFailed, match=r"synchronizes with the host.*called a synchronizing CUDA operation"
    ):
        _fake_backend(fake).capture(fake.host_read, 2)
    assert "capture" not in fake.where and not fake.capturing  # no capture began
    assert fake.log.count("sync debug error") == 1 and fake.sync_debug == 0  # mode restored
    assert fake.current.name == "current"


def test_a_capture_that_breaks_the_device_says_so():
    from infer_opt.profilers.timing import CaptureFailed

    fake = _FakeTorchCuda()
    calls = []

    def fn():
        calls.append(1)
        if len(calls) > GRAPH_SIDE_STREAM_WARMUP:
            fake.broken = True
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    with pytest.raises(CaptureFailed, match="illegal memory access") as info:
        _fake_backend(fake).capture(fn, 1)
    assert not info.value.device_usable


def test_innermost_cause_follows_the_chain():
    from infer_opt.profilers.timing import describe_cause, innermost_cause

    try:
        try:
            raise ValueError("the real problem\nwith detail")
        except ValueError:
            raise RuntimeError("raised over it") from None
    except RuntimeError as exc:
        outer = exc
    # `from None` hides the context from tracebacks but keeps __context__: still the cause
    assert isinstance(innermost_cause(outer), ValueError)
    assert describe_cause(outer) == "ValueError: the real problem (then: RuntimeError: raised over it)"
    assert describe_cause(KeyError()) == "KeyError"


def test_flushing_refuses_several_calls_per_sample():
    t = FakeTime()
    with pytest.raises(InvalidInput, match=r"calls_per_sample.*caches warm"):
        measure(t.work([1_000]), flush_cache=True, flush=lambda: None, calls_per_sample=10, clock=t.clock)


def test_flushed_graph_replays_capture_one_call_and_flush_before_each():
    t = FakeTime()
    cuda = FakeCuda(t)
    flushes = []
    m = measure(
        t.work([9_000]),
        device="cuda",
        warmup=2,
        reps=5,
        cuda_graph=True,
        flush_cache=True,
        flush=lambda: (flushes.append(1), t.log.append("flush")),
        clock=t.clock,
        cuda_backend=cuda,
    )
    assert cuda.captured == 1 and m.calls_per_sample == 1 and m.flushed
    assert len(flushes) == 5 == t.log.count("replay")
    replays = [i for i, e in enumerate(t.log) if e == "replay"]
    assert all(t.log[i - 2 : i] == ["flush", "record"] for i in replays)
    assert m.timing == "cuda-graph-flushed"


def test_flushing_ignores_min_sample_time_batching():
    t = FakeTime()
    m = measure(
        t.work([500]),
        warmup=4,
        reps=3,
        min_sample_time_s=10e-6,
        flush_cache=True,
        flush=lambda: None,
        time_cold=False,
        clock=t.clock,
        synchronize=t.sync,
    )
    assert m.calls_per_sample == 1


def test_cuda_warm_up_lasts_25_ms_with_few_synchronisations():
    t = FakeTime()
    cuda = FakeCuda(t)
    m = measure(
        t.work([10_000]), device="cuda", warmup=5, reps=3, time_cold=False, clock=t.clock, cuda_backend=cuda
    )
    assert m.warmup_calls * 10e-6 >= 0.025 > (m.warmup_calls - 1) * 10e-6
    warm_up = t.log[: t.log.index("record")]
    assert warm_up.count("sync") <= 3  # 5 calls, then the rest in one batch (not a sync per call)


def test_warm_up_time_zero_keeps_the_count_on_cuda():
    t = FakeTime()
    cuda = FakeCuda(t)
    m = measure(
        t.work([10_000]), device="cuda", warmup=5, warmup_time_s=0, reps=3, clock=t.clock, cuda_backend=cuda
    )
    assert m.warmup_calls == 5


def test_events_of_a_batch_are_created_before_its_first_sample():
    t = FakeTime()
    cuda = FakeCuda(t)
    original = cuda.event

    def event():
        t.log.append("event")
        return original()

    cuda.event = event
    measure(
        t.work([3_000]), device="cuda", warmup=1, reps=4, time_cold=False, clock=t.clock, cuda_backend=cuda
    )
    timed = t.log[t.log.index("event") :]
    assert timed[:8] == ["event"] * 8 and "event" not in timed[8:]


def test_measure_stops_on_a_failed_capture_with_the_reason():
    from infer_opt.profilers.timing import CaptureFailed

    t = FakeTime()
    cuda = FakeCuda(t)

    def capture(fn, calls):
        raise CaptureFailed("CUDA graph capture failed: RuntimeError: boom", device_usable=False)

    cuda.capture = capture
    with pytest.raises(CaptureFailed, match="boom") as info:
        measure(t.work([1_000]), device="cuda", cuda_graph=True, clock=t.clock, cuda_backend=cuda)
    assert not info.value.device_usable
