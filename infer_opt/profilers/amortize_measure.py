"""Compile cost, eager and compiled time per shape bucket, measured: ``infer-opt amortize measure``.

For each bucket (batch B, sequence length T — a forward over ``B × T`` tokens, no KV cache):

1. ``torch._dynamo.reset()``, and inductor's on-disk caches are disabled
   (``force_disable_caches``), so every compile is cold — a rerun is not flattered by the
   kernels the previous run left on disk.
2. Eager steady state ``t_e`` with :func:`infer_opt.profilers.timing.measure` (warm-up,
   median and IQR over the repetitions).
3. ``torch.compile(model, dynamic=False)`` (static shapes: one graph per bucket). The first
   compiled call is timed on its own (synchronised); the compile cost is
   ``C = first compiled call - t_e`` (the call itself would have cost one eager step anyway).
   The compiled output is checked against the eager one before it is timed.
4. Compiled steady state ``t_c``, as in 2.
5. On a GPU (``cuda_graphs``): the compiled call is captured into a CUDA graph; the capture's
   wall time is added to C and the replay's steady time becomes ``t_c``.
6. Peak memory of the eager and the compiled step where the device reports it (CUDA
   ``max_memory_allocated``); the CPU reports none.

Before the first bucket a tiny function is compiled once (:func:`warm_up_compiler`), so the
compiler's one-time start-up in the process (imports, toolchain checks) is reported apart and
not charged to whichever bucket happens to come first.

A compile that fails (or whose output differs) is reported with the reason in its row and the
bucket is treated as not compiled; the sweep goes on. After each bucket the caller's
``on_bucket`` gets everything measured so far, so a long sweep can be saved as it goes and
resumed (buckets already measured are passed back in as ``previous`` and skipped).

The decisions (:func:`decide`) are pure: break-even calls ``C_i/(t_e,i - t_c,i)``, net gain
``n_i·(t_e,i - t_c,i) - C_i`` and the chosen set, through
:mod:`infer_opt.cost_models.amortization`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from infer_opt.cost_models import amortization
from infer_opt.errors import InferOptError, InvalidInput, RunFailure
from infer_opt.notices import Notice, about
from infer_opt.results.amortize_measure import AmortizeMeasureResult, BucketSpec, MeasuredBucket

#: whole-model compiled output vs eager output, relative L2 error allowed per dtype
OUTPUT_TOLERANCE = {"float32": 1e-3, "bfloat16": 5e-2, "float16": 5e-2}
BACKENDS = ("inductor", "eager", "aot_eager", "cudagraphs")

Progress = Callable[[int, int, str], None]
#: compile_fn(model, dynamic=False, backend=...) -> a callable with the model's signature
CompileFn = Callable[..., Callable[..., Any]]


# ----------------------------------------------------------------------------- decisions


def decide(
    rows: Sequence[MeasuredBucket], calls: Mapping[str, float] | None
) -> tuple[list[MeasuredBucket], dict[str, Any]]:
    """Break-even, net gain and decision per bucket; totals over the chosen set.

    A failed bucket is not compiled (net gain 0). Without call counts only the break-even is
    known and the decision is left open."""
    ok = [r for r in rows if not r.failed]
    out: dict[str, MeasuredBucket] = {}
    totals: dict[str, Any] = {
        "total_net_gain_s": None,
        "compile_all_net_gain_s": None,
        "compiled_count": 0,
        "total_calls": None,
    }
    have_calls = calls is not None and all(r.bucket in calls for r in rows)
    if have_calls and ok:
        inputs = [
            amortization.BucketInput(
                r.bucket,
                float(r.compile_s),  # type: ignore[arg-type]
                float(r.eager_s - r.compiled_s),  # type: ignore[operator]
                float(calls[r.bucket]),  # type: ignore[index]
                r.eager_s,
                r.compiled_s,
                r.seq_len,
            )
            for r in ok
        ]
        summary = amortization.amortize_buckets(inputs, source="measured buckets", calls_source="")
        for r, b in zip(ok, summary.buckets, strict=True):
            out[r.bucket] = replace(
                r,
                calls=b.calls,
                break_even_calls=b.break_even_calls,
                net_gain_s=b.net_gain_s,
                compile=b.compile,
                reason=b.reason,
            )
        totals.update(
            total_net_gain_s=summary.total_net_gain_s,
            compile_all_net_gain_s=summary.compile_all_net_gain_s,
            compiled_count=summary.compiled_count,
        )
    else:
        for r in ok:
            be = amortization.break_even(r.compile_s, r.eager_s, r.compiled_s)  # type: ignore[arg-type]
            n = None if calls is None else calls.get(r.bucket)
            out[r.bucket] = replace(
                r,
                calls=n,
                break_even_calls=be.break_even_calls,
                compile=False if be.reason else None,
                reason=be.reason,
            )
    if have_calls:
        totals["total_calls"] = float(sum(calls[r.bucket] for r in rows))  # type: ignore[index]
        if not ok:
            totals.update(total_net_gain_s=0.0, compile_all_net_gain_s=0.0)
    for r in rows:
        if r.failed:
            n = None if calls is None or r.bucket not in calls else float(calls[r.bucket])
            out[r.bucket] = replace(
                r,
                calls=n,
                break_even_calls=None,
                net_gain_s=None if n is None else 0.0,
                compile=False,
                reason=r.error,
            )
    return [out[r.bucket] for r in rows], totals


def build_result(
    rows: Sequence[MeasuredBucket],
    *,
    model: str,
    device: str,
    device_name: str,
    dtype: str,
    backend: str,
    cuda_graphs: bool,
    warmup: int,
    reps: int,
    compile_caches: str,
    requested: Sequence[BucketSpec],
    calls: Mapping[str, float] | None = None,
    calls_source: str | None = None,
    compiler_startup_s: float | None = None,
) -> AmortizeMeasureResult:
    """The result for the buckets measured so far (in the requested order), with decisions."""
    order = {spec.name: i for i, spec in enumerate(requested)}
    measured = sorted(rows, key=lambda r: order.get(r.bucket, len(order)))
    decided, totals = decide(measured, calls)
    done = {r.bucket for r in measured}
    return AmortizeMeasureResult(
        model=model,
        device=device,
        device_name=device_name,
        dtype=dtype,
        backend=backend,
        cuda_graphs=cuda_graphs,
        warmup=warmup,
        reps=reps,
        compile_caches=compile_caches,
        buckets=tuple(decided),
        pending=tuple(s.name for s in requested if s.name not in done),
        calls_source=calls_source,
        failed_count=sum(1 for r in measured if r.failed),
        measured_s=float(sum(r.measure_s for r in measured)),
        compiler_startup_s=compiler_startup_s,
        **totals,
    )


def check_resumable(
    previous: AmortizeMeasureResult, *, model: str, device_name: str, dtype: str, backend: str, option: str
) -> None:
    """Refuse to mix measurements of another model, device, dtype or compiler backend."""
    theirs = (previous.model, previous.device_name, previous.dtype, previous.backend)
    ours = (model, device_name, dtype, backend)
    if theirs != ours:
        raise InvalidInput(
            option,
            f"{previous.model} on {previous.device_name}, {previous.dtype}, backend {previous.backend}",
            f"the file was measured for another setup; this run is {model} on {device_name}, {dtype}, "
            f"backend {backend} (use a new --out file)",
        )


# ----------------------------------------------------------------------------- measuring


@dataclass
class BucketInputs:
    """What one bucket runs: ``model(*args, **kwargs)``."""

    model: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def _first_tensor(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value
    logits = getattr(value, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    items = (
        value.values() if isinstance(value, Mapping) else value if isinstance(value, (tuple, list)) else ()
    )
    for item in items:
        found = _first_tensor(item)
        if found is not None:
            return found
    return None


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    first = text[:240] + ("..." if len(text) > 240 else "")
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _is_oom(exc: BaseException) -> bool:
    from infer_opt.errors import out_of_memory

    return out_of_memory(exc) is not None


def cache_state(backend: str, custom_compiler: bool = False) -> str:
    """What happens to inductor's on-disk caches during the sweep (said in the result)."""
    if custom_compiler or backend != "inductor":
        return "not used (not an inductor compile)"
    try:
        import torch._inductor.config as inductor_config
    except ImportError:  # pragma: no cover - torch without inductor
        return "inductor not available"
    if not hasattr(inductor_config, "force_disable_caches"):  # pragma: no cover - old torch
        return "could not be disabled in this torch: later compiles may be warm"
    return "disabled: every compile is cold"


@contextlib.contextmanager
def cold_compiles(enabled: bool) -> Iterator[None]:
    """Disable inductor's on-disk caches (FX graph, autotuning, compiled kernels) inside."""
    if not enabled or not cache_state("inductor").startswith("disabled"):
        yield
        return
    import warnings

    import torch._inductor.config as inductor_config

    with inductor_config.patch(force_disable_caches=True), warnings.catch_warnings():
        # torch says, once per process, that disabling the caches also disables dynamo's PGO
        warnings.filterwarnings("ignore", message=".*force disabled by.*force_disable_caches")
        yield


def warm_up_compiler(
    device: Any,
    *,
    backend: str = "inductor",
    compile_fn: CompileFn | None = None,
    clock: Callable[[], int] | None = None,
) -> float | None:
    """Compile and run a tiny function once, so the compiler's one-time start-up in this
    process (imports, toolchain checks) is not charged to the first bucket. Returns its wall
    time, or None if even this compile fails (each bucket then reports its own failure)."""
    import time

    import torch

    from infer_opt.profilers import device as devices

    clock = clock or time.perf_counter_ns
    x = torch.ones(8, device=device)
    start = clock()
    try:
        with cold_compiles(compile_fn is None and backend == "inductor"):
            (compile_fn or _torch_compile)(_warm_up_step, dynamic=False, backend=backend)(x)
        devices.synchronize(device)
    except KeyboardInterrupt:
        raise
    except Exception:
        return None
    finally:
        torch._dynamo.reset()
    return (clock() - start) * 1e-9


def _warm_up_step(x: Any) -> Any:
    return (x * 2.0 + 1.0).relu()


def _torch_compile(model: Any, *, dynamic: bool, backend: str) -> Any:
    import torch

    return torch.compile(model, dynamic=dynamic, backend=backend)


def measure_bucket(
    spec: BucketSpec,
    inputs: BucketInputs,
    *,
    device: Any,
    dtype_name: str,
    warmup: int,
    reps: int,
    backend: str = "inductor",
    cuda_graphs: bool = False,
    compile_fn: CompileFn | None = None,
    clock: Callable[[], int] | None = None,
    cuda_backend: Any = None,
) -> MeasuredBucket:
    """Measure one bucket (module docstring). An eager failure is a :class:`RunFailure`; a
    compile failure is recorded in the row; a CUDA graph capture that leaves the device
    unusable is a :class:`RunFailure` (the sweep stops; buckets already measured are kept)."""
    import time

    import torch

    from infer_opt.profilers import device as devices
    from infer_opt.profilers.model_profile import guard
    from infer_opt.profilers.timing import measure

    clock = clock or time.perf_counter_ns
    on_cuda = devices.is_cuda(device)
    began = clock()
    model, args, kwargs = inputs.model, inputs.args, inputs.kwargs

    def eager() -> Any:
        with torch.no_grad():
            return model(*args, **kwargs)

    torch._dynamo.reset()
    _reset_peak(device, on_cuda)
    with guard(f"running bucket {spec.name} eagerly"):
        eager_m = measure(eager, device=device, warmup=warmup, reps=reps, clock=clock)
        reference = _first_tensor(eager())
    row = MeasuredBucket(
        bucket=spec.name,
        batch=spec.batch,
        seq_len=spec.seq_len,
        eager_s=eager_m.summary.median_s,
        eager=eager_m.summary,
        eager_cold_s=eager_m.cold_s,
        eager_peak_bytes=_peak(device, on_cuda),
        warnings=about(eager_m.warnings, "eager"),
    )
    _reset_peak(device, on_cuda)
    timing = _Timing(device, warmup, reps, clock, cuda_graphs, cuda_backend)
    try:
        row = _compiled(row, inputs, reference, timing, dtype_name, backend, compile_fn or _torch_compile)
    finally:
        torch._dynamo.reset()
    return replace(row, compiled_peak_bytes=_peak(device, on_cuda), measure_s=(clock() - began) * 1e-9)


@dataclass(frozen=True)
class _Timing:
    """How a bucket's compiled step is timed."""

    device: Any
    warmup: int
    reps: int
    clock: Callable[[], int]
    cuda_graphs: bool
    cuda_backend: Any

    def sync(self) -> None:
        from infer_opt.profilers import device as devices

        devices.synchronize(self.device)


def _reset_peak(device: Any, on_cuda: bool) -> None:
    if on_cuda:
        import torch

        torch.cuda.reset_peak_memory_stats(device)


def _peak(device: Any, on_cuda: bool) -> int | None:
    if not on_cuda:
        return None
    import torch

    return int(torch.cuda.max_memory_allocated(device))


def _compiled(
    row: MeasuredBucket,
    inputs: BucketInputs,
    reference: Any,
    timing: _Timing,
    dtype_name: str,
    backend: str,
    compile_fn: CompileFn,
) -> MeasuredBucket:
    """Compile, check against ``reference``, time (and capture, with ``cuda_graphs``); a
    failure is recorded in the row, except a capture that leaves the device unusable."""
    import torch

    from infer_opt.profilers.kernels import relative_error
    from infer_opt.profilers.timing import CaptureFailed, TorchCudaBackend, measure

    step = "compiling"
    try:
        compiled_model = compile_fn(inputs.model, dynamic=False, backend=backend)

        def compiled() -> Any:
            with torch.no_grad():
                return compiled_model(*inputs.args, **inputs.kwargs)

        timing.sync()
        start = timing.clock()
        out = compiled()
        timing.sync()
        first_call_s = (timing.clock() - start) * 1e-9
        step = "checking the compiled output"
        error = None
        got = _first_tensor(out)
        if got is not None and reference is not None:
            error = relative_error(got, reference)
            tol = OUTPUT_TOLERANCE.get(dtype_name, 5e-2)
            if not error <= tol:
                raise _Mismatch(f"compiled output differs from eager (relative error {error:.2g} > {tol:g})")
        step = "timing the compiled step"
        compiled_m = measure(
            compiled,
            device=timing.device,
            warmup=timing.warmup,
            reps=timing.reps,
            clock=timing.clock,
            time_cold=False,
        )
        row = replace(
            row,
            compiled_s=compiled_m.summary.median_s,
            compiled=compiled_m.summary,
            first_call_s=first_call_s,
            compile_s=max(0.0, first_call_s - row.eager_s),
            output_rel_error=error,
            warnings=row.warnings + about(compiled_m.warnings, "compiled"),
        )
        if timing.cuda_graphs:
            graph_backend = timing.cuda_backend or TorchCudaBackend(timing.device)
            row = _with_graph(row, compiled, timing, graph_backend)
    except KeyboardInterrupt:
        raise
    except CaptureFailed as exc:
        if not exc.device_usable:
            raise RunFailure(
                f"bucket {row.bucket}: {exc}; the device no longer works, so the sweep stops "
                "(buckets measured before are kept)"
            ) from exc
        row = replace(row, error=f"{step} failed: {exc}")
    except _Mismatch as exc:
        row = replace(row, error=str(exc))
    except Exception as exc:
        if _is_oom(exc):
            row = replace(row, error=f"out of memory while {step}")
        else:
            what = exc.args[0] if isinstance(exc, InferOptError) and exc.args else _describe(exc)
            row = replace(row, error=f"{step} failed: {what}")
    return row


class _Mismatch(Exception):
    pass


def _with_graph(
    row: MeasuredBucket, compiled: Callable[[], Any], timing: _Timing, backend: Any
) -> MeasuredBucket:
    """Capture the compiled step in a CUDA graph: C grows by the capture's wall time and t_c
    becomes the replay's. A capture that fails cleanly leaves the compiled (no graph) numbers,
    with a ``graph_capture_failed`` warning naming the innermost cause: the compile itself
    worked. A capture that leaves the device unusable propagates (:class:`CaptureFailed`)."""
    from infer_opt.profilers.timing import CaptureFailed, measure

    try:
        timing.sync()
        start = timing.clock()
        replay = backend.capture(compiled, 1)
        timing.sync()
        capture_s = (timing.clock() - start) * 1e-9
        graph_m = measure(
            replay,
            device=timing.device,
            warmup=timing.warmup,
            reps=timing.reps,
            clock=timing.clock,
            time_cold=False,
            cuda_backend=timing.cuda_backend,
        )
    except KeyboardInterrupt:
        raise
    except CaptureFailed as exc:
        if not exc.device_usable:
            raise
        return replace(row, warnings=(*row.warnings, Notice("graph_capture_failed", {"reason": str(exc)})))
    except Exception as exc:
        what = exc.args[0] if isinstance(exc, InferOptError) and exc.args else _describe(exc)
        return replace(row, warnings=(*row.warnings, Notice("graph_capture_failed", {"reason": what})))
    return replace(
        row,
        compiled_s=graph_m.summary.median_s,
        compiled=graph_m.summary,
        compiled_no_graph_s=row.compiled_s,
        graph_capture_s=capture_s,
        compile_s=(row.compile_s or 0.0) + capture_s,
        warnings=row.warnings + about(graph_m.warnings, "graph replay"),
    )


def default_loader(
    spec_text: str, *, device: Any, dtype: Any, hf_overrides: Mapping[str, Any] | None = None
) -> Callable[[BucketSpec], BucketInputs]:
    """Inputs per bucket for ``MODEL``: built-ins and ``hf:`` models are built once and get
    new token inputs per bucket; a factory is called per bucket with ``batch_size`` and
    ``seq_len`` and must honour them."""
    from infer_opt.profilers import models

    cached: dict[str, Any] = {}

    def load(spec: BucketSpec) -> BucketInputs:
        if "loaded" in cached and cached["loaded"].source in ("builtin", "hf"):
            loaded = cached["loaded"]
            vocab = loaded.config.vocab_size if loaded.config else _hf_vocab(loaded.model)
            ids = models.random_tokens(spec.batch, spec.seq_len, vocab, device=device)
            if loaded.source == "builtin":
                limit = loaded.config.max_seq_len
                if spec.seq_len > limit:
                    raise InvalidInput(
                        "--bounds", spec.seq_len, f"model {loaded.name!r} has {limit} positions"
                    )
                return BucketInputs(loaded.model, (ids,), {})
            return BucketInputs(loaded.model, (), {**loaded.kwargs, "input_ids": ids})
        try:
            loaded = models.load_model(
                spec_text,
                batch_size=spec.batch,
                seq_len=spec.seq_len,
                device=device,
                dtype=dtype,
                hf_overrides=hf_overrides,
            )
        except InvalidInput as exc:  # the sequence length is a bucket bound here
            if exc.option != "seq_len":
                raise
            raise InvalidInput("bounds", exc.value, exc.expected) from None
        if loaded.source == "factory" and (loaded.batch, loaded.seq_len) != (spec.batch, spec.seq_len):
            got = "no token inputs" if loaded.seq_len is None else f"inputs {loaded.batch}x{loaded.seq_len}"
            raise InvalidInput(
                "MODEL",
                spec_text,
                f"bucket {spec.name} asked the factory for batch_size={spec.batch}, seq_len={spec.seq_len} "
                f"but it returned {got}; bucketing needs a factory that takes batch_size and seq_len",
            )
        cached["loaded"] = loaded
        return BucketInputs(loaded.model, loaded.args, dict(loaded.kwargs))

    return load


def _hf_vocab(model: Any) -> int:
    return int(getattr(getattr(model, "config", None), "vocab_size", 1000) or 1000)


def measure_sweep(
    buckets: Sequence[BucketSpec],
    loader: Callable[[BucketSpec], BucketInputs],
    *,
    device: Any,
    dtype_name: str,
    warmup: int = 3,
    reps: int = 20,
    backend: str = "inductor",
    cuda_graphs: bool = False,
    compile_fn: CompileFn | None = None,
    clock: Callable[[], int] | None = None,
    previous: Sequence[MeasuredBucket] = (),
    on_bucket: Callable[[list[MeasuredBucket], int], None] | None = None,
    progress: Progress | None = None,
    cuda_backend: Any = None,
) -> list[MeasuredBucket]:
    """Measure every bucket not in ``previous``; after each, ``on_bucket(rows so far, buckets
    left)``. Returns the previous and the new rows. Call :func:`warm_up_compiler` first, or
    the first bucket's C includes the compiler's one-time start-up. ``cuda_backend`` replaces
    the CUDA graph capture (tests)."""
    from infer_opt.profilers.model_profile import guard

    done = {r.bucket: r for r in previous}
    todo = [s for s in buckets if s.name not in done]
    rows = list(previous)
    with cold_compiles(compile_fn is None and backend == "inductor"):
        for i, spec in enumerate(todo):
            if progress:
                progress(i, len(todo), f"bucket {spec.name} (eager, then compile)")
            with guard(f"building the inputs of bucket {spec.name}"):
                inputs = loader(spec)
            rows.append(
                measure_bucket(
                    spec,
                    inputs,
                    device=device,
                    dtype_name=dtype_name,
                    warmup=warmup,
                    reps=reps,
                    backend=backend,
                    cuda_graphs=cuda_graphs,
                    compile_fn=compile_fn,
                    clock=clock,
                    cuda_backend=cuda_backend,
                )
            )
            if on_bucket:
                on_bucket(list(rows), len(todo) - i - 1)
    if progress:
        progress(len(todo), len(todo), "done")
    return rows


def calls_from_sample(
    bounds: Sequence[int], sample: Any, *, batch: int, requests: int | None
) -> dict[int, float]:
    """Calls per sequence-length bound from a length sample (``b(T)`` = the smallest bound
    ``>= T``; scaled to ``requests`` in total when given), each call serving ``batch``
    requests. Lengths above the largest bound are an error, as in ``amortize --lengths``."""
    rows = [amortization.BucketInput(str(b), 0.0, 0.0) for b in bounds]
    counted, _ = amortization.calls_from_lengths(rows, sample, requests=requests, source="--bounds")
    return {int(r.bucket): float(r.calls) / batch for r in counted}  # type: ignore[arg-type]


def estimate_remaining_s(rows: Sequence[MeasuredBucket], left: int) -> float:
    """Seconds the buckets left would take at the mean time of those measured."""
    if not rows or left <= 0:
        return 0.0
    return left * math.fsum(r.measure_s for r in rows) / len(rows)
