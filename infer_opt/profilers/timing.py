"""The one timer every measurement goes through: :func:`measure`.

What it does, in order:

1. **Cold call** (``time_cold``): the first call, timed apart on the host clock with a
   synchronisation before and after, so a compiling or allocating first call is never
   taken for steady state.
2. **Warm-up** by count (``warmup``) and/or by time (``warmup_time_s``), untimed.
3. **Repetitions**, one sample each (a sample may hold ``calls_per_sample`` calls and is
   divided by them): a fixed number (``reps``), or adaptive — until IQR/median falls below
   ``target_rel_iqr`` — with caps on the count (``max_reps``) and time (``max_time_s``).
   An optional cache flush (``flush_cache``) writes a buffer larger than the GPU's L2 or
   the CPU's last-level cache *outside* the timed region before each sample.

Clocks:

* CPU: ``time.perf_counter_ns`` around each sample (``mode="cpu-clock"``).
* CUDA: a ``torch.cuda.Event(enable_timing=True)`` pair per sample recorded on the current
  stream, and *one* synchronisation after the batch, then ``elapsed_time`` per pair
  (``mode="cuda-events"``). A fixed-count run is one batch; adaptive runs synchronise
  between batches to look at the spread.
* CUDA graphs (``cuda_graph=True``): after warm-up, ``calls_per_sample`` calls are captured
  into a ``torch.cuda.CUDAGraph`` (warmed on a side stream first, as PyTorch's CUDA graph
  notes ask) and each sample replays the graph once (``mode="cuda-graph"``). Comparing it
  with eager timing separates CPU launch overhead from kernel time.

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

from infer_opt.errors import InvalidInput, RunFailure, UnsupportedOnDevice
from infer_opt.stats import Summary, variance_warning

#: adaptive mode stops once IQR/median is at or below this unless told otherwise
DEFAULT_TARGET_REL_IQR = 0.05
#: adaptive CUDA runs synchronise after this many samples to look at the spread
CUDA_ADAPTIVE_BATCH = 10
#: calls run on a side stream before a CUDA graph is captured
GRAPH_SIDE_STREAM_WARMUP = 2
#: upper bound on calls batched into one sample by ``min_sample_time_s``
MAX_CALLS_PER_SAMPLE = 10_000

MODE_CPU = "cpu-clock"
MODE_EVENTS = "cuda-events"
MODE_GRAPH = "cuda-graph"


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
    warnings: tuple[str, ...]
    calls_per_sample: int = 1
    flushed: bool = False

    @property
    def median_s(self) -> float:
        return self.summary.median_s


class _Event(Protocol):
    def record(self) -> None: ...
    def elapsed_time(self, end: Any) -> float: ...


class CudaBackend(Protocol):
    """What :func:`measure` needs from CUDA; tests pass a fake."""

    def event(self) -> _Event: ...
    def synchronize(self) -> None: ...
    def capture(self, fn: Callable[[], object], calls: int) -> Callable[[], None]: ...
    def activate(self) -> AbstractContextManager[Any]: ...


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
        ``torch.cuda.graph`` captures on a stream of the *current* device."""
        torch = self._torch
        with torch.cuda.device(self.device):
            current = torch.cuda.current_stream(self.device)
            side = torch.cuda.Stream(self.device)
            side.wait_stream(current)
            with torch.cuda.stream(side):
                for _ in range(GRAPH_SIDE_STREAM_WARMUP):
                    fn()
            current.wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    for _ in range(calls):
                        fn()
            except Exception as exc:
                raise RunFailure(
                    f"CUDA graph capture failed: {type(exc).__name__}: {_first_line(exc)}"
                ) from exc
            graph.replay()
        self.synchronize()
        return graph.replay


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


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

    ``min_sample_time_s`` batches calls into a sample until one sample lasts about that
    long (estimated from the warm-up), so a sub-microsecond call is not swamped by the
    clock's own overhead. ``flush`` overrides the cache flush used when ``flush_cache``.
    """
    from infer_opt.profilers.device import is_cuda

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

    on_cuda = is_cuda(device)
    if cuda_graph and not on_cuda:
        raise UnsupportedOnDevice(
            f"--cuda-graphs: CUDA graphs need a CUDA device; this run is on {device} "
            "(drop --cuda-graphs or use --device cuda)"
        )
    clock = clock or time.perf_counter_ns
    backend: CudaBackend | None = None
    if on_cuda:
        backend = cuda_backend or TorchCudaBackend(device)
    sync = synchronize or (backend.synchronize if backend is not None else _no_sync)
    flusher = (flush or cache_flusher(device)) if flush_cache else None

    adaptive = reps is None or target_rel_iqr is not None
    target = target_rel_iqr if target_rel_iqr is not None else DEFAULT_TARGET_REL_IQR
    wanted = max_reps if adaptive else int(reps)  # type: ignore[arg-type]
    floor = min_reps if adaptive else min(min_reps, wanted)

    context = backend.activate() if backend is not None else nullcontext()
    with context:
        cold_s = _time_cold(fn, clock, sync) if time_cold else None
        warmup_calls, warmup_s = _warm_up(fn, warmup, warmup_time_s, clock, sync)
        calls = calls_per_sample
        if min_sample_time_s and calls_per_sample == 1:
            per_call = warmup_s / warmup_calls if warmup_calls else (cold_s or _time_cold(fn, clock, sync))
            if per_call > 0:
                calls = min(MAX_CALLS_PER_SAMPLE, max(1, math.ceil(min_sample_time_s / per_call)))
        if backend is None:
            mode = MODE_CPU
            run_batch = _cpu_runner(fn, calls, clock, sync, flusher)
        else:
            target_fn = _repeat(fn, calls)
            mode = MODE_EVENTS
            if cuda_graph:
                mode = MODE_GRAPH
                target_fn = backend.capture(fn, calls)
                warmup_calls += GRAPH_SIDE_STREAM_WARMUP
            run_batch = _event_runner(target_fn, calls, backend, sync, flusher)

        samples: list[float] = []
        stop_reason = ""
        start_ns = clock()
        one_batch = not adaptive and max_time_s is None
        step = CUDA_ADAPTIVE_BATCH if on_cuda else 1
        for size in _batches(one_batch, wanted, floor, step):
            samples.extend(run_batch(min(size, wanted - len(samples))))
            n = len(samples)
            if n >= wanted:
                stop_reason = "cap" if adaptive else ""
                break
            if n < floor:
                continue
            if adaptive and Summary.from_samples(samples).rel_iqr <= target:
                break
            if max_time_s is not None and (clock() - start_ns) * 1e-9 >= max_time_s:
                stop_reason = "time"
                break

    summary = Summary.from_samples(samples)
    warnings = _warnings(summary, adaptive, target, stop_reason, len(samples), wanted, max_time_s)
    return Measurement(
        samples_s=tuple(samples),
        summary=summary,
        cold_s=cold_s,
        warmup_calls=warmup_calls,
        mode=mode,
        device=str(device),
        warnings=tuple(warnings),
        calls_per_sample=calls,
        flushed=flusher is not None,
    )


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
    Returns the calls made and the seconds they took (synchronised at the end)."""
    calls = 0
    start = clock()
    while True:
        if duration_s is not None:
            sync()
        count_ok = count is None or calls >= count
        time_ok = duration_s is None or (clock() - start) * 1e-9 >= duration_s
        if count_ok and time_ok:
            break
        fn()
        calls += 1
    sync()
    return calls, (clock() - start) * 1e-9


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


def _warnings(
    summary: Summary,
    adaptive: bool,
    target: float,
    stop_reason: str,
    n: int,
    wanted: int,
    max_time_s: float | None,
) -> list[str]:
    out = []
    if adaptive and stop_reason and summary.rel_iqr > target:
        why = f"time limit {max_time_s:g} s" if stop_reason == "time" else f"at most {wanted} repetitions"
        out.append(
            f"IQR/median {100 * summary.rel_iqr:.0f}% did not settle below {100 * target:.0f}% "
            f"({why}); raise --max-time or quiet the machine"
        )
    elif not adaptive and stop_reason == "time":
        out.append(f"stopped after {n} of {wanted} repetitions (time limit {max_time_s:g} s)")
    variance = variance_warning(summary)
    if variance:
        out.append(variance)
    return out
