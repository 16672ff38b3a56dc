"""The one timer every measurement goes through: :func:`measure`.

What it does, in order:

1. **Cold call** (``time_cold``): the first call, timed apart on the host clock with a
   synchronisation before and after, so a compiling or allocating first call is never
   taken for steady state.
2. **Warm-up** by count (``warmup``) and/or by time (``warmup_time_s``), untimed. On CUDA the
   warm-up lasts at least :data:`~infer_opt.clocks.CUDA_MIN_WARMUP_S` (25 ms, as triton's
   ``do_bench``) unless a time is given, so the GPU's clocks have ramped up before the first
   sample; the time is checked once per batch of calls (one synchronisation each), not after every call.
3. **Repetitions**, one sample each (a sample may hold ``calls_per_sample`` calls and is
   divided by them): a fixed number (``reps``), or adaptive — until IQR/median falls below
   ``target_rel_iqr`` — with caps on the count (``max_reps``) and time (``max_time_s``).
   An optional cache flush (``flush_cache``) writes a buffer larger than the GPU's L2 or
   the CPU's last-level cache *outside* the timed region before each sample; a flushed
   sample holds one call (else every call after the first would find the caches warm).

Clocks:

* CPU: ``time.perf_counter_ns`` around each sample (``mode="cpu-clock"``).
* CUDA: a ``torch.cuda.Event(enable_timing=True)`` pair per sample recorded on the current
  stream — all the batch's events are created before its first sample — and *one*
  synchronisation after the batch, then ``elapsed_time`` per pair (``mode="cuda-events"``).
  A fixed-count run is one batch; adaptive runs synchronise between batches to look at the
  spread. The flush is enqueued before the start event, so the GPU is still busy flushing
  while the host enqueues the sample: the pair then times the device, not the launch.
* CUDA graphs (``cuda_graph=True``): after warm-up, ``calls_per_sample`` calls are captured
  into a ``torch.cuda.CUDAGraph`` (warmed on a side stream first, as PyTorch's CUDA graph
  notes ask) and each sample replays the graph once (``mode="cuda-graph"``). Comparing it
  with eager timing separates CPU launch overhead from kernel time. The side-stream warm-up
  runs under ``torch.cuda.set_sync_debug_mode("error")``, so a function that reads the
  device from the host (``.item()``, ``.cpu()``, ``nonzero``) is refused before capture.

Clock, synchroniser, flush and the CUDA backend are injectable so tests drive the exact
control flow with a fake clock and fake events.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from infer_opt.clocks import CUDA_MIN_WARMUP_S, MODE_CPU, MODE_EVENTS, MODE_GRAPH, timing_name
from infer_opt.errors import InvalidInput, RunFailure, UnsupportedOnDevice
from infer_opt.notices import Notice
from infer_opt.stats import Summary, variance_notice

#: adaptive mode stops once IQR/median is at or below this unless told otherwise
DEFAULT_TARGET_REL_IQR = 0.05
#: adaptive CUDA runs synchronise after this many samples to look at the spread
CUDA_ADAPTIVE_BATCH = 10
#: calls run on a side stream before a CUDA graph is captured
GRAPH_SIDE_STREAM_WARMUP = 2
#: upper bound on calls batched into one sample by ``min_sample_time_s``
MAX_CALLS_PER_SAMPLE = 10_000
#: a warm-up by time stops after this many calls even if the clock says it is not done
MAX_WARMUP_CALLS = 100_000


@dataclass(frozen=True)
class Measurement:
    """Timings of one callable. ``samples_s`` are per call (a sample's time divided by
    ``calls_per_sample``); ``summary`` summarises them."""

    samples_s: tuple[float, ...]
    summary: Summary
    cold_s: float | None
    warmup_calls: int
    mode: str
    device: str
    warnings: tuple[Notice, ...]
    calls_per_sample: int = 1
    flushed: bool = False

    @property
    def median_s(self) -> float:
        return self.summary.median_s

    @property
    def timing(self) -> str:
        """:func:`timing_name` of this measurement."""
        return timing_name(self.mode, self.flushed)


class _Event(Protocol):
    def record(self) -> None: ...
    def elapsed_time(self, end: Any) -> float: ...


class CudaBackend(Protocol):
    """What :func:`measure` needs from CUDA; tests pass a fake."""

    def event(self) -> _Event: ...
    def synchronize(self) -> None: ...
    def capture(self, fn: Callable[[], object], calls: int) -> Callable[[], None]: ...
    def activate(self) -> AbstractContextManager[Any]: ...


class CaptureFailed(RunFailure):
    """A CUDA graph could not be captured. The message names the innermost cause (what the
    captured function did), not the "operation failed due to a previous error during capture"
    that ``capture_end`` raises over it. ``device_usable`` is False when the device no longer
    synchronises afterwards: nothing more can run on it in this process."""

    def __init__(self, message: str, *, device_usable: bool = True) -> None:
        super().__init__(message)
        self.device_usable = device_usable


class TorchCudaBackend:
    """The real CUDA backend: timing events, device sync, graph capture."""

    def __init__(self, device: Any) -> None:
        import torch

        self._torch = torch
        self.device = torch.device(device)

    def event(self) -> Any:
        return self._torch.cuda.Event(enable_timing=True)

    def synchronize(self) -> None:
        self._torch.cuda.synchronize(self.device)

    def activate(self) -> AbstractContextManager[Any]:
        return self._torch.cuda.device(self.device)

    def capture(self, fn: Callable[[], object], calls: int) -> Callable[[], None]:
        """Capture ``calls`` calls of ``fn`` into a CUDA graph; return its replay.

        Runs under this device's context (callers outside :func:`measure` need not set it):
        ``torch.cuda.graph`` captures on a stream of the *current* device. ``fn`` is first run
        :data:`GRAPH_SIDE_STREAM_WARMUP` times on a side stream with synchronising calls made
        errors (``set_sync_debug_mode("error")``), so a function that reads the device from
        the host is refused before capture starts. The capture runs on a stream of its own and
        the caller's stream is restored in a ``finally``, also when ``capture_end`` raises.

        After a failed capture the caching allocator's state is undefined (torch does not end
        the capture's private pool when ``capture_end`` raises); the pool is bound to the
        capture's own stream, which nothing uses again, so later work on the caller's stream
        still runs. The device is synchronised to check it: if that fails, the
        :class:`CaptureFailed` says ``device_usable=False`` and a sweep must stop there."""
        torch = self._torch
        with torch.cuda.device(self.device):
            original = torch.cuda.current_stream(self.device)
            self._warm_on_side_stream(fn, original)
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph, stream=torch.cuda.Stream(self.device)):
                    for _ in range(calls):
                        fn()
            except Exception as exc:
                raise CaptureFailed(
                    f"CUDA graph capture failed: {describe_cause(exc)}", device_usable=self._usable()
                ) from exc
            finally:
                torch.cuda.set_stream(original)
            graph.replay()
        self.synchronize()
        return graph.replay

    def _warm_on_side_stream(self, fn: Callable[[], object], original: Any) -> None:
        torch = self._torch
        side = torch.cuda.Stream(self.device)
        side.wait_stream(original)
        previous = torch.cuda.get_sync_debug_mode()
        try:
            torch.cuda.set_sync_debug_mode("error")
            with torch.cuda.stream(side):
                for _ in range(GRAPH_SIDE_STREAM_WARMUP):
                    fn()
        except Exception as exc:
            raise CaptureFailed(
                "CUDA graph capture refused: the function synchronizes with the host (a .item(), "
                f".cpu() or data-dependent shape), which a graph cannot capture: {describe_cause(exc)}"
            ) from exc
        finally:
            torch.cuda.set_sync_debug_mode(previous)
            torch.cuda.set_stream(original)
        original.wait_stream(side)

    def _usable(self) -> bool:
        try:
            self.synchronize()
        except Exception:
            return False
        return True


def innermost_cause(exc: BaseException) -> BaseException:
    """The first exception of the chain that led to ``exc`` (following ``__cause__``, else
    ``__context__``): what actually went wrong when later errors were raised over it."""
    seen = {id(exc)}
    while True:
        inner = exc.__cause__ or exc.__context__
        if inner is None or id(inner) in seen:
            return exc
        seen.add(id(inner))
        exc = inner


def describe_cause(exc: BaseException) -> str:
    """``Type: first line`` of the innermost cause, and of ``exc`` itself when that differs
    (``RuntimeError: operation not permitted when stream is capturing (then: RuntimeError:
    operation failed due to a previous error during capture)``)."""
    inner = innermost_cause(exc)
    text = _one_line(inner)
    return text if inner is exc else f"{text} (then: {_one_line(exc)})"


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    first = lines[0].strip() if lines else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


_FLUSH_BUFFERS: dict[str, Any] = {}


def cache_flusher(device: Any) -> Callable[[], None]:
    """A function that evicts the caches: on the GPU it zeroes a buffer twice the L2 size
    (256 MiB when unknown); on the CPU it increments every element of a buffer twice the
    last-level cache (64 MiB when unknown) — a read-modify-write, since large memsets may
    use non-temporal stores that bypass the cache."""
    import torch

    from infer_opt.profilers.device import flush_buffer_bytes, is_cuda

    key = str(device)
    if key not in _FLUSH_BUFFERS:
        n = flush_buffer_bytes(device) // 4
        _FLUSH_BUFFERS[key] = torch.ones(n, dtype=torch.int32, device=device)
    buffer = _FLUSH_BUFFERS[key]
    if is_cuda(device):
        return buffer.zero_
    return lambda: buffer.add_(1)


def _check_int(name: str, value: int | None, low: int, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise InvalidInput(name, value, f"must be an integer >= {low}")


@dataclass(frozen=True)
class _Plan:
    """How many samples a run takes and when it stops."""

    adaptive: bool
    target: float
    wanted: int
    floor: int
    max_time_s: float | None

    @property
    def one_batch(self) -> bool:
        return not self.adaptive and self.max_time_s is None


def _check_settings(
    warmup: int | None,
    warmup_time_s: float | None,
    reps: int | None,
    min_reps: int,
    max_reps: int,
    max_time_s: float | None,
    target_rel_iqr: float | None,
    calls_per_sample: int,
    flush_cache: bool,
) -> None:
    _check_int("warmup", warmup, 0, optional=True)
    _check_int("reps", reps, 1, optional=True)
    _check_int("min_reps", min_reps, 1)
    _check_int("max_reps", max_reps, max(min_reps, 1))
    _check_int("calls_per_sample", calls_per_sample, 1)
    for name, value in (("warmup_time_s", warmup_time_s), ("max_time_s", max_time_s)):
        if value is not None and (not math.isfinite(value) or value < 0):
            raise InvalidInput(name, value, "must be a finite number of seconds >= 0")
    if target_rel_iqr is not None and not (target_rel_iqr > 0 and math.isfinite(target_rel_iqr)):
        raise InvalidInput("target_rel_iqr", target_rel_iqr, "must be a finite number > 0")
    if flush_cache and calls_per_sample > 1:
        raise InvalidInput(
            "calls_per_sample",
            calls_per_sample,
            "must be 1 with flush_cache: the flush runs once per sample, so every call after the "
            "first would find the caches warm (with CUDA graphs: capture one call per graph)",
        )


def measure(
    fn: Callable[[], object],
    *,
    device: Any = "cpu",
    warmup: int | None = 3,
    warmup_time_s: float | None = None,
    reps: int | None = 20,
    min_reps: int = 5,
    max_reps: int = 1000,
    max_time_s: float | None = None,
    target_rel_iqr: float | None = None,
    flush_cache: bool = False,
    cuda_graph: bool = False,
    calls_per_sample: int = 1,
    time_cold: bool = True,
    clock: Callable[[], int] | None = None,
    synchronize: Callable[[], None] | None = None,
    min_sample_time_s: float | None = None,
    flush: Callable[[], object] | None = None,
    cuda_backend: CudaBackend | None = None,
) -> Measurement:
    """Time ``fn`` (see the module docstring for the procedure).

    ``reps=None`` or a ``target_rel_iqr`` makes the run adaptive (target default
    ``DEFAULT_TARGET_REL_IQR``): at least ``min_reps`` samples, then stop as soon as
    IQR/median <= target, or at ``max_reps`` / ``max_time_s`` with a warning. With a fixed
    ``reps``, ``max_time_s`` may cut the run short (after at least ``min(min_reps, reps)``
    samples), also with a warning. ``max_time_s`` counts from the first timed sample.

    ``min_sample_time_s`` batches calls so one sample lasts about that long (not when
    flushing). ``flush`` overrides the cache flush; ``warmup_time_s=None`` on CUDA means
    :data:`~infer_opt.clocks.CUDA_MIN_WARMUP_S`."""
    from infer_opt.profilers.device import is_cuda

    _check_settings(
        warmup,
        warmup_time_s,
        reps,
        min_reps,
        max_reps,
        max_time_s,
        target_rel_iqr,
        calls_per_sample,
        flush_cache,
    )
    on_cuda = is_cuda(device)
    if cuda_graph and not on_cuda:
        raise UnsupportedOnDevice(
            f"--cuda-graphs: CUDA graphs need a CUDA device; this run is on {device} "
            "(drop --cuda-graphs or use --device cuda)"
        )
    if on_cuda and warmup_time_s is None:
        warmup_time_s = CUDA_MIN_WARMUP_S
    clock = clock or time.perf_counter_ns
    backend = (cuda_backend or TorchCudaBackend(device)) if on_cuda else None
    sync = synchronize or (backend.synchronize if backend is not None else _no_sync)
    flusher = (flush or cache_flusher(device)) if flush_cache else None
    plan = _plan(reps, target_rel_iqr, min_reps, max_reps, max_time_s)
    with backend.activate() if backend is not None else nullcontext():
        cold_s = _time_cold(fn, clock, sync) if time_cold else None
        warmup_calls, warmup_s = _warm_up(fn, warmup, warmup_time_s, clock, sync)
        calls = calls_per_sample
        if min_sample_time_s and calls_per_sample == 1 and flusher is None:
            per_call = warmup_s / warmup_calls if warmup_calls else (cold_s or _time_cold(fn, clock, sync))
            calls = _calls_for(min_sample_time_s, per_call)
        mode, run_batch = _runner(fn, calls, backend, cuda_graph, clock, sync, flusher)
        if mode == MODE_GRAPH:
            warmup_calls += GRAPH_SIDE_STREAM_WARMUP
        samples, stop_reason = _sample(run_batch, plan, clock, CUDA_ADAPTIVE_BATCH if on_cuda else 1)
    summary = Summary.from_samples(samples)
    notices = _notices(summary, plan, stop_reason, len(samples))
    return Measurement(
        tuple(samples), summary, cold_s, warmup_calls, mode, str(device), notices, calls, flusher is not None
    )


def _plan(
    reps: int | None, target_rel_iqr: float | None, min_reps: int, max_reps: int, max_time_s: float | None
) -> _Plan:
    """How many samples to take: a fixed ``reps``, or adaptive (``reps=None`` or a target)."""
    adaptive = reps is None or target_rel_iqr is not None
    wanted = max_reps if adaptive else int(reps)  # type: ignore[arg-type]
    return _Plan(
        adaptive=adaptive,
        target=target_rel_iqr if target_rel_iqr is not None else DEFAULT_TARGET_REL_IQR,
        wanted=wanted,
        floor=min_reps if adaptive else min(min_reps, wanted),
        max_time_s=max_time_s,
    )


def _calls_for(min_sample_time_s: float, per_call_s: float) -> int:
    """Calls per sample so one sample lasts about ``min_sample_time_s``."""
    if per_call_s <= 0:
        return 1
    return min(MAX_CALLS_PER_SAMPLE, max(1, math.ceil(min_sample_time_s / per_call_s)))


def _runner(
    fn: Callable[[], object],
    calls: int,
    backend: CudaBackend | None,
    cuda_graph: bool,
    clock: Callable[[], int],
    sync: Callable[[], None],
    flusher: Callable[[], object] | None,
) -> tuple[str, Callable[[int], list[float]]]:
    """The clock mode and the function taking ``n`` samples."""
    if backend is None:
        return MODE_CPU, _cpu_runner(fn, calls, clock, sync, flusher)
    if cuda_graph:
        return MODE_GRAPH, _event_runner(backend.capture(fn, calls), calls, backend, sync, flusher)
    return MODE_EVENTS, _event_runner(_repeat(fn, calls), calls, backend, sync, flusher)


def _sample(
    run_batch: Callable[[int], list[float]], plan: _Plan, clock: Callable[[], int], step: int
) -> tuple[list[float], str]:
    """Take samples batch by batch until the plan says stop; returns them and why it stopped
    early (``"cap"``, ``"time"`` or ``""``)."""
    samples: list[float] = []
    start_ns = clock()
    for size in _batches(plan.one_batch, plan.wanted, plan.floor, step):
        samples.extend(run_batch(min(size, plan.wanted - len(samples))))
        n = len(samples)
        if n >= plan.wanted:
            return samples, "cap" if plan.adaptive else ""
        if n < plan.floor:
            continue
        if plan.adaptive and Summary.from_samples(samples).rel_iqr <= plan.target:
            return samples, ""
        if plan.max_time_s is not None and (clock() - start_ns) * 1e-9 >= plan.max_time_s:
            return samples, "time"
    return samples, ""  # pragma: no cover - _batches never ends


def _no_sync() -> None:
    return None


def _repeat(fn: Callable[[], object], calls: int) -> Callable[[], object]:
    if calls == 1:
        return fn

    def run() -> None:
        for _ in range(calls):
            fn()

    return run


def _time_cold(fn: Callable[[], object], clock: Callable[[], int], sync: Callable[[], None]) -> float:
    sync()
    start = clock()
    fn()
    sync()
    return (clock() - start) * 1e-9


def _warm_up(
    fn: Callable[[], object],
    count: int | None,
    duration_s: float | None,
    clock: Callable[[], int],
    sync: Callable[[], None],
) -> tuple[int, float]:
    """Call ``fn`` until both the count and the duration (those given) are reached.
    Returns the calls made and the seconds they took (synchronised at the end).

    With a duration, calls run in batches with one synchronisation each: the first batch is
    ``count`` calls (at least one), each later one as many as the time per call so far says
    are still needed (as ``do_bench`` sizes its warm-up), so a queue of short kernels is
    never drained after every call."""
    start = clock()
    calls = 0
    if not duration_s:
        for _ in range(count or 0):
            fn()
        calls = count or 0
        sync()
        return calls, (clock() - start) * 1e-9
    batch = max(count or 0, 1)
    while True:
        for _ in range(batch):
            fn()
        calls += batch
        sync()
        elapsed = (clock() - start) * 1e-9
        per_call = elapsed / calls
        if elapsed >= duration_s or per_call <= 0 or calls >= MAX_WARMUP_CALLS:
            return calls, elapsed
        batch = min(math.ceil((duration_s - elapsed) / per_call), MAX_WARMUP_CALLS - calls)


def _batches(one_batch: bool, wanted: int, floor: int, step: int) -> Iterator[int]:
    """Sample counts between stopping checks. A fixed count without a time cap is one
    batch (on CUDA: one synchronisation). Otherwise ``floor`` samples first, then batches
    of ``max(step, n/10)`` — ``step`` is 1 on the CPU, ``CUDA_ADAPTIVE_BATCH`` on CUDA where
    each check synchronises — so checks cost O(n log n) in all, not O(n²)."""
    if one_batch:
        yield wanted
        return
    n = max(floor, 1)
    yield n
    while True:
        size = max(step, n // 10)
        n += size
        yield size


def _cpu_runner(
    fn: Callable[[], object],
    calls: int,
    clock: Callable[[], int],
    sync: Callable[[], None],
    flusher: Callable[[], object] | None,
) -> Callable[[int], list[float]]:
    def run(n: int) -> list[float]:
        out = []
        for _ in range(n):
            if flusher is not None:
                flusher()
            sync()
            start = clock()
            for _ in range(calls):
                fn()
            sync()
            out.append((clock() - start) * 1e-9 / calls)
        return out

    return run


def _event_runner(
    target: Callable[[], object],
    calls: int,
    backend: CudaBackend,
    sync: Callable[[], None],
    flusher: Callable[[], object] | None,
) -> Callable[[int], list[float]]:
    """``n`` samples as event pairs: every event of the batch is created first (creating
    one is a host call that must not land between a pair), then per sample the flush, the
    start event, the work and the end event are enqueued; one synchronisation at the end."""

    def run(n: int) -> list[float]:
        pairs = [(backend.event(), backend.event()) for _ in range(n)]
        for start, end in pairs:
            if flusher is not None:
                flusher()
            start.record()
            target()
            end.record()
        sync()
        return [start.elapsed_time(end) * 1e-3 / calls for start, end in pairs]

    return run


def _notices(summary: Summary, plan: _Plan, stop_reason: str, n: int) -> tuple[Notice, ...]:
    out = []
    if plan.adaptive and stop_reason and summary.rel_iqr > plan.target:
        limit = {"max_time_s": plan.max_time_s} if stop_reason == "time" else {"max_reps": plan.wanted}
        out.append(
            Notice("variance_not_settled", {"rel_iqr": summary.rel_iqr, "target": plan.target, **limit})
        )
    elif not plan.adaptive and stop_reason == "time":
        out.append(
            Notice("reps_cut_by_time", {"reps": n, "wanted": plan.wanted, "max_time_s": plan.max_time_s})
        )
    variance = variance_notice(summary)
    if variance is not None:
        out.append(variance)
    return tuple(out)
