"""One ``amortize measure`` sweep from start to result: resume from a saved run, warm up the
compiler once, measure every bucket still missing, save after each, estimate what is left.

The measuring itself is :mod:`infer_opt.profilers.amortize_measure`; this module strings it
together so the command only parses options and shows the result. Nothing here prints: the
caller gets ``save(result so far)`` after each bucket and ``on_estimate(Estimate)`` once the
first new bucket has been measured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from infer_opt.errors import InvalidInput
from infer_opt.profilers import amortize_measure
from infer_opt.results.amortize_measure import AmortizeMeasureResult, BucketSpec, MeasuredBucket

if TYPE_CHECKING:
    from infer_opt.requests import AmortizeMeasureRequest

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Sweep:
    """What to measure: the model spec, where, how, which buckets and their call counts."""

    model: str
    device: Any
    dtype: Any
    backend: str
    cuda_graphs: bool
    warmup: int
    reps: int
    buckets: tuple[BucketSpec, ...]
    calls: Mapping[str, float] | None = None
    calls_source: str | None = None
    hf_overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Estimate:
    """After the first new bucket: its time, the time left, and the whole sweep's."""

    first_bucket_s: float
    remaining_s: float
    total_s: float
    buckets_left: int


def model_key(model: str) -> str:
    """The name a result records for ``model`` (aliases resolved; factories as given)."""
    if ":" in model:
        return model
    from infer_opt.profilers.models import ALIASES

    return ALIASES.get(model, model)


def setup_of(sweep: Sweep) -> dict[str, str]:
    """The identity a resumed file must share: model, device name, dtype and backend."""
    from infer_opt.profilers import device as devices

    return {
        "model": model_key(sweep.model),
        "device_name": devices.device_name(sweep.device),
        "dtype": devices.dtype_name(sweep.dtype),
        "backend": sweep.backend,
    }


def kept_rows(sweep: Sweep, previous: AmortizeMeasureResult | None) -> list[MeasuredBucket]:
    """The buckets of ``previous`` this sweep asks for (refusing another model or setup)."""
    if previous is None:
        return []
    amortize_measure.check_resumable(previous, option="resume", **setup_of(sweep))
    wanted = {s.name for s in sweep.buckets}
    return [r for r in previous.buckets if r.bucket in wanted]


def run(
    sweep: Sweep,
    *,
    previous: AmortizeMeasureResult | None = None,
    compile_fn: amortize_measure.CompileFn | None = None,
    save: Callable[[AmortizeMeasureResult], None] | None = None,
    on_estimate: Callable[[Estimate], None] | None = None,
    progress: Progress | None = None,
) -> AmortizeMeasureResult:
    """Measure the sweep's missing buckets (``previous`` holds those already measured) and
    return the result with its decisions; ``save`` gets the result after every bucket."""
    kept = kept_rows(sweep, previous)
    startup: list[float] = []
    caches = amortize_measure.cache_state(sweep.backend, custom_compiler=compile_fn is not None)

    def result_of(rows: Sequence[MeasuredBucket]) -> AmortizeMeasureResult:
        return amortize_measure.build_result(
            rows,
            **setup_of(sweep),
            device=str(sweep.device),
            cuda_graphs=sweep.cuda_graphs,
            warmup=sweep.warmup,
            reps=sweep.reps,
            compile_caches=caches,
            requested=sweep.buckets,
            calls=sweep.calls,
            calls_source=sweep.calls_source,
            compiler_startup_s=startup[0] if startup else None,
        )

    on_bucket = _on_bucket(result_of, save, on_estimate, startup, len(kept))
    loader = amortize_measure.default_loader(
        sweep.model, device=sweep.device, dtype=sweep.dtype, hf_overrides=sweep.hf_overrides
    )
    if len(kept) < len(sweep.buckets):
        if progress:
            progress(0, len(sweep.buckets) - len(kept), "warming up the compiler (one-time start-up)")
        seconds = amortize_measure.warm_up_compiler(
            sweep.device, backend=sweep.backend, compile_fn=compile_fn
        )
        startup.extend([] if seconds is None else [seconds])
    rows = amortize_measure.measure_sweep(
        sweep.buckets,
        loader,
        device=sweep.device,
        dtype_name=setup_of(sweep)["dtype"],
        warmup=sweep.warmup,
        reps=sweep.reps,
        backend=sweep.backend,
        cuda_graphs=sweep.cuda_graphs,
        compile_fn=compile_fn,
        previous=kept,
        on_bucket=on_bucket,
        progress=progress,
    )
    return result_of(rows)


def _on_bucket(
    result_of: Callable[[Sequence[MeasuredBucket]], AmortizeMeasureResult],
    save: Callable[[AmortizeMeasureResult], None] | None,
    on_estimate: Callable[[Estimate], None] | None,
    startup: list[float],
    n_kept: int,
) -> Callable[[list[MeasuredBucket], int], None]:
    estimated: list[bool] = []

    def on_bucket(rows: list[MeasuredBucket], left: int) -> None:
        if save is not None:
            save(result_of(rows))
        if estimated or not left or on_estimate is None:
            return
        estimated.append(True)
        new = rows[n_kept:]
        eta = amortize_measure.estimate_remaining_s(new, left)
        spent = (startup[0] if startup else 0.0) + sum(r.measure_s for r in new)
        on_estimate(Estimate(rows[-1].measure_s, eta, spent + eta, left))

    return on_bucket


def buckets_of(bounds: Sequence[int], batch_sizes: Sequence[int]) -> tuple[BucketSpec, ...]:
    """Every (batch, bound) pair, batch-major; batch sizes must be distinct."""
    if len(set(batch_sizes)) != len(batch_sizes):
        raise InvalidInput("batch_sizes", ",".join(map(str, batch_sizes)), "batch sizes must be distinct")
    return tuple(BucketSpec(b, t) for b in batch_sizes for t in bounds)


def sweep_of(request: AmortizeMeasureRequest) -> Sweep:
    """``infer-opt amortize measure``'s sweep: the request's buckets on its device (CUDA graphs
    by default there), their calls given or read from its length sample. ``run(sweep,
    previous=request.resume)`` measures it."""
    from infer_opt.errors import UnsupportedOnDevice
    from infer_opt.profilers import device as devices
    from infer_opt.profilers.models import parse_hf_overrides

    specs = buckets_of(request.bounds, request.batch_sizes)
    call_map, calls_source = _calls(request, specs)
    dev = devices.resolve_device(request.device)
    graphs = devices.is_cuda(dev) if request.cuda_graphs is None else request.cuda_graphs
    if graphs and not devices.is_cuda(dev):
        raise UnsupportedOnDevice(f"--cuda-graphs: CUDA graphs need a CUDA device; this run is on {dev}")
    return Sweep(
        request.model, dev, devices.parse_dtype(request.dtype, dev), request.backend, graphs, request.warmup,
        request.reps, specs, call_map, calls_source, parse_hf_overrides(list(request.hf_config)),
    )  # fmt: skip


def _calls(
    request: AmortizeMeasureRequest, specs: tuple[BucketSpec, ...]
) -> tuple[dict[str, float] | None, str | None]:
    calls, lengths, requests = request.calls_per_bucket, request.lengths, request.requests
    if calls is not None and lengths is not None:
        raise InvalidInput(
            "--calls-per-bucket", ",".join(map(str, calls)), "give --calls-per-bucket or --lengths, not both"
        )
    if requests is not None and lengths is None:
        raise InvalidInput("--requests", requests, "only used with --lengths FILE")
    if calls is not None:
        if len(calls) != len(specs):
            names = ", ".join(s.name for s in specs)
            shown = ",".join(map(str, calls))
            raise InvalidInput(
                "--calls-per-bucket", shown, f"give one call count per bucket ({len(specs)}: {names})"
            )
        return {s.name: float(n) for s, n in zip(specs, calls, strict=True)}, "--calls-per-bucket"
    if lengths is None:
        return None, None
    if len({s.batch for s in specs}) > 1:
        raise InvalidInput("--lengths", str(lengths), "with --lengths give one --batch-sizes value")
    from infer_opt.cost_models import bucketing
    from infer_opt.files import read_input

    text, source = read_input(lengths, "--lengths")
    sample = bucketing.parse_lengths_text(text, source=source)
    batch = specs[0].batch
    per_bound = amortize_measure.calls_from_sample(request.bounds, sample, batch=batch, requests=requests)
    how = f"{source} ({sample.total} lengths" + (
        f", scaled to {requests} requests" if requests is not None else ""
    )
    how += f", {batch} per call)" if batch > 1 else ")"
    return {s.name: per_bound[s.seq_len] for s in specs}, how
