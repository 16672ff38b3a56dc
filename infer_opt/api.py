"""The Python API for notebooks and scripts: what the commands do, as functions returning
result objects (each with ``.to_frame()`` for its main table as a pandas DataFrame, and a
markdown ``_repr_markdown_`` a notebook shows by itself).

Everything here is also importable from :mod:`infer_opt` itself (lazily: ``import infer_opt``
imports nothing heavy until a function is used)::

    import infer_opt as io

    io.amdahl(0.4, 4).speedup                      # 1.4286
    r = io.profile("tiny", seq_len=128)            # ProfileResult (torch)
    r.to_frame()                                   # the operator table as a DataFrame
    fit = io.fit_roofline(io.kernels(suite="quick"))

Errors are the CLI's: :class:`~infer_opt.errors.InvalidInput` for bad input (naming the
parameter), :class:`~infer_opt.errors.RunFailure` for a failure while running.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from infer_opt.cost_models.amdahl import Part, combined
from infer_opt.results.amdahl import AmdahlResult
from infer_opt.results.kernels import SuiteSettings

F = TypeVar("F", bound=Callable[..., Any])


def _api(func: F) -> F:
    """Errors name the API's own parameters: what the core or the CLI's checks call a flag
    (``--hf-config``) or a word (``MODEL``) is said as the parameter (``hf_config``, ``model``)."""

    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        from infer_opt.errors import InvalidInput

        try:
            return func(*args, **kwargs)
        except InvalidInput as exc:
            name = _parameter(exc.option)
            if name == exc.option:
                raise
            raise exc.under(name, exc.value) from None

    return call  # type: ignore[return-value]


def _parameter(option: str) -> str:
    """``--hf-config`` -> ``hf_config``, ``MODEL`` -> ``model``; anything else as it is."""
    if option.startswith("--") and " " not in option:
        return option[2:].replace("-", "_")
    if option.isupper() and option.isidentifier():
        return option.lower()
    return option


def _typed(name: str, value: Any, kinds: tuple[type, ...], what: str) -> None:
    """``value`` must be one of ``kinds`` (a bool is no number): :class:`InvalidInput` naming
    the parameter, before any work — never "the model raised TypeError"."""
    from infer_opt.errors import InvalidInput

    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise InvalidInput(name, value, f"must be {what}, not {type(value).__name__}")


def _strings(name: str, value: Any, *, comma: bool = False) -> tuple[str, ...]:
    """A sequence of strings (one string: one item, or its comma-separated items when
    ``comma``, as the CLI reads ``--only a,b``)."""
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",")) if comma else (value,)
    _typed(name, value, (list, tuple), "a string or a list of strings")
    for item in value:
        _typed(name, item, (str,), "a list of strings")
    return tuple(value)


def _numbers(name: str, value: Any) -> list[float]:
    """A sequence of numbers (not a string)."""
    _typed(name, value, (list, tuple), "a list of numbers")
    for item in value:
        _typed(name, item, (int, float), "a list of numbers")
    return list(value)


_PATH = (str, os.PathLike)


@_api
def amdahl(
    fraction: float | None = None,
    speedup: float | None = None,
    *,
    parts: Sequence[Part] = (),
    added: float = 0.0,
    target: float | None = None,
) -> AmdahlResult:
    """Amdahl's law ``S = 1/((1 - Σf_i) + Σ f_i/s_i + a)``: one part (``fraction``,
    ``speedup``) or several :class:`Part` s, added overhead ``added``, and with ``target`` the
    speedup the parts need to reach it."""
    for name, value in (("fraction", fraction), ("speedup", speedup), ("target", target)):
        if value is not None:
            _typed(name, value, (int, float), "a number")
    _typed("added", added, (int, float), "a number")
    _typed("parts", parts, (list, tuple), "a list of Part")
    all_parts = list(parts)
    if fraction is not None:
        all_parts.insert(0, Part("part", fraction, 1.0 if speedup is None else speedup))
    return combined(all_parts, added=added, target=target, speedup_given=speedup is not None or bool(parts))


@_api
def load(path: str | Path) -> Any:
    """A saved result (any ``--out FILE.json``) as its result object, validated whole (a field
    of the wrong type or an impossible value: :class:`~infer_opt.errors.BadField`)."""
    from infer_opt.errors import InvalidInput
    from infer_opt.results import load_result

    _typed("path", path, _PATH, "a file path")
    try:
        return load_result(path).result
    except InvalidInput as exc:
        if exc.option == "result file":  # the file itself (missing, a device): said as `path`
            raise exc.under("path", exc.value) from None
        raise


@_api
def profile(
    model: str = "tiny",
    *,
    batch: int = 1,
    seq_len: int = 128,
    mode: str = "prefill",
    context: int = 128,
    new_tokens: int = 32,
    device: str = "auto",
    dtype: str = "auto",
    warmup: int = 3,
    reps: int = 20,
    roofline: str | Path | bool | None = None,
    hf_config: Sequence[str] = (),
    trace: str | Path | None = None,
) -> Any:
    """Profile one step of ``model`` per aten operator, as ``infer-opt profile`` does: a
    built-in name, ``module:factory``, ``file.py:factory`` or ``hf:<model_type>``. ``roofline``:
    a fit file, None for the fit cached for this machine (calibrated now if there is none), or
    False for no roofline columns. Returns a
    :class:`~infer_opt.profilers.model_profile.ProfileResult`."""
    from infer_opt.profilers import model_profile
    from infer_opt.profilers.roofline_calibration import ResolvedFit
    from infer_opt.steps import Shape, StepSettings

    _counts(batch=(batch, 1), seq_len=(seq_len, 1), context=(context, 1), new_tokens=(new_tokens, 1))
    _counts(warmup=(warmup, 0), reps=(reps, 1))
    for name, value in (("model", model), ("mode", mode), ("device", device), ("dtype", dtype)):
        _typed(name, value, (str,), "a string")
    if roofline is not None:
        _typed("roofline", roofline, (*_PATH, bool), "a fit file, None or False")
    if trace is not None:
        _typed("trace", trace, _PATH, "a file path")
    hf_config = _strings("hf_config", hf_config)
    shape = Shape(batch=batch, seq_len=seq_len, mode=mode, context=context, new_tokens=new_tokens)
    settings = StepSettings(model, device, dtype, shape, warmup=warmup, reps=reps, hf_config=tuple(hf_config))
    step = model_profile.load(settings)
    resolved = ResolvedFit(None, "not used")
    if roofline is not False:
        path = None if roofline is None or roofline is True else Path(roofline)
        resolved = model_profile.resolve_fit(step.device, step.dtype, path)
    return model_profile.profile_model(step, resolved, trace_path=trace)


@_api
def predict(
    model: str = "tiny",
    *,
    batch: int = 1,
    seq_len: int = 128,
    mode: str = "prefill",
    context: int = 128,
    new_tokens: int = 32,
    calibration: str | Path | None = None,
    device: str = "auto",
    dtype: str = "auto",
    threads: int | None = None,
    hf_config: Sequence[str] = (),
    sweep: str | None = None,
) -> Any:
    """Predict one step of ``model`` from the operator calibration without running it, as
    ``infer-opt predict`` does: ``calibration`` a file (``infer-opt calibrate --out``), else the
    one cached for ``device``, ``dtype`` and ``threads``; ``sweep`` as the CLI's
    (``"batch=1,2,4"``). Checked as the CLI checks (:class:`InvalidInput` naming the parameter).
    Returns a :class:`~infer_opt.results.predict.PredictResult`."""
    from infer_opt.profilers import models
    from infer_opt.profilers import predict as pr

    _counts(batch=(batch, 1), seq_len=(seq_len, 1), context=(context, 0), new_tokens=(new_tokens, 1))
    for name, value in (("model", model), ("mode", mode), ("device", device), ("dtype", dtype)):
        _typed(name, value, (str,), "a string")
    if threads is not None:
        _counts(threads=(threads, 1))
        if threads > (os.cpu_count() or 1):
            from infer_opt.errors import InvalidInput

            cores = os.cpu_count() or 1
            raise InvalidInput("threads", threads, f"must be in [1, {cores}] (CPU threads here)")
    if calibration is not None:
        _typed("calibration", calibration, _PATH, "a calibration file")
    overrides = models.parse_hf_overrides(list(_strings("hf_config", hf_config)))
    parsed = None
    if sweep is not None:
        _typed("sweep", sweep, (str,), "a string such as 'batch=1,2,4'")
        parsed = pr.parse_sweep(sweep, high=MAX_COUNT)
    path = None if calibration is None else Path(calibration)
    found = pr.calibration_for_run(path, dtype, threads, device, trace_ok=True)
    return pr.predict(
        model, found.calibration, calibration_source=found.source, mode=mode, batch=batch,
        seq_len=seq_len, context=context, new_tokens=new_tokens, dtype=found.dtype,
        hf_overrides=overrides, sweep=parsed,
    )  # fmt: skip


@_api
def kernels(
    *,
    suite: str = "quick",
    only: Sequence[str] | None = None,
    device: str = "auto",
    dtype: str = "auto",
    warmup: int = 5,
    reps: int = 20,
    flush_cache: bool = False,
) -> Any:
    """Time the kernel suite (``infer-opt kernels``): a
    :class:`~infer_opt.profilers.kernels.KernelSuiteResult`."""
    from infer_opt.profilers import device as devices
    from infer_opt.profilers import kernels as suite_module

    _counts(warmup=(warmup, 0), reps=(reps, 1))
    for name, value in (("suite", suite), ("device", device), ("dtype", dtype)):
        _typed(name, value, (str,), "a string")
    _typed("flush_cache", flush_cache, (bool,), "True or False")
    only = None if only is None else _strings("only", only, comma=True)
    dev = devices.resolve_device(device)
    torch_dtype = devices.parse_dtype(dtype, dev)
    known = suite_module.all_cases("cuda" if devices.is_cuda(dev) else "cpu", suite)
    cases = suite_module.select(known, list(only) if only is not None else None)
    settings = SuiteSettings(warmup=warmup, reps=reps, flush_cache=flush_cache)
    return suite_module.run_suite(cases, dev, torch_dtype, settings, suite=suite, all_known=known)


@_api
def fit_roofline(measurements: Any, *, bootstrap: int = 200, seed: int = 0) -> Any:
    """Fit ``t ≈ t0 + max(F/R, Q/b)`` (``infer-opt roofline``) to a kernel-suite result, a
    saved ``.json`` or a measurement ``.csv``: a :class:`~infer_opt.results.roofline.RooflineFit`."""
    from infer_opt.cost_models import roofline
    from infer_opt.results.kernels import KernelSuiteResult

    _typed("measurements", measurements, (*_PATH, KernelSuiteResult), "a kernels result or a file path")
    _counts(bootstrap=(bootstrap, 0))
    _typed("seed", seed, (int,), "an integer")
    if isinstance(measurements, (str, os.PathLike)):
        from infer_opt.inputs.measurements import load_points

        points, meta = load_points(measurements)
        source = str(measurements)
    else:
        from infer_opt.inputs.measurements import kernel_points

        points = kernel_points(measurements)
        meta = {k: getattr(measurements, k) for k in ("device", "dtype", "device_name", "device_key")}
        source = "kernel suite"
    return roofline.fit_roofline(
        points,
        bootstrap=bootstrap,
        seed=seed,
        source=source,
        fit_families=roofline.default_fit_families(points),
        **meta,
    )


@_api
def buckets(
    lengths: Any,
    bounds: Sequence[int] | None = None,
    *,
    optimize: int | None = None,
    cost: str = "linear",
    batch_size: int = 1,
) -> Any:
    """Padding waste of a length sample under ``bounds`` (or, with ``optimize=K``, the K
    bounds with the least waste): ``lengths`` is a file path or a sequence of lengths."""
    from infer_opt.cost_models import bucketing

    _typed("lengths", lengths, (*_PATH, list, tuple), "a file path or a list of lengths")
    if bounds is not None:
        _numbers("bounds", bounds)
    if optimize is not None:
        _counts(optimize=(optimize, 1))
    _typed("cost", cost, (str,), "a string")
    _counts(batch_size=(batch_size, 1))
    if isinstance(lengths, (str, os.PathLike)):
        from infer_opt.files import read_text

        sample = bucketing.parse_lengths_text(read_text(lengths, "lengths"), source=str(lengths))
    else:
        sample = bucketing.sample_from_lengths(list(lengths))
    if optimize is None:
        if bounds is None:
            from infer_opt.errors import InvalidInput

            raise InvalidInput("bounds", "missing", "give bounds, or optimize=K to design them")
        return bucketing.analyze(sample, bounds, batch_size=batch_size)
    return bucketing.optimize(sample, optimize, cost=cost, batch_size=batch_size, given_bounds=bounds)  # type: ignore[arg-type]


@_api
def amortize_buckets(path: str | Path) -> Any:
    """Compile amortization per bucket from a bucket CSV (``infer-opt amortize --buckets``)."""
    from infer_opt.cost_models import amortization
    from infer_opt.files import read_text

    _typed("path", path, _PATH, "a file path")
    rows = amortization.read_bucket_csv(read_text(path, "path"), source=str(path))
    return amortization.amortize_buckets(rows, source=str(path))


@_api
def acceptance(p: Sequence[float], q: Sequence[float], *, normalize: bool = False) -> Any:
    """Acceptance of draft tokens ``x ~ q`` against the target ``p``: ``a(x) = min(1, p/q)``,
    ``A = Σ min(p, q)``, the residual and both sampling rules' outputs."""
    from infer_opt.cost_models import speculative

    p, q = _numbers("p", p), _numbers("q", q)
    _typed("normalize", normalize, (bool,), "True or False")
    p_arr, q_arr = speculative.validate_pair(list(p), list(q), normalize=normalize, names=("p", "q"))
    return speculative.acceptance_report(p_arr, q_arr, normalized=normalize)


def compare(base: Any, new: Any, **options: Any) -> Any:
    """Two results compared as ``infer-opt compare`` compares them: two trace results (the
    ``trace`` analysis, or a :class:`~infer_opt.trace.loaded.LoadedTrace`) op by op
    (``base_name``, ``new_name``, ``threshold``); two profiles or kernel-suite runs (or lists
    of them, the rounds of an ``ab``) with the run-level statistics of
    :func:`~infer_opt.cost_models.run_stats.compare_results`."""
    from infer_opt.results.trace import TraceResult

    sides = [getattr(x, "result", x) if type(x).__name__ == "LoadedTrace" else x for x in (base, new)]
    traces = [isinstance(x, TraceResult) for x in sides]
    if all(traces):
        from infer_opt.errors import InvalidInput
        from infer_opt.trace.compare import compare_traces

        unknown = set(options) - {"base_name", "new_name", "threshold"}
        if unknown:
            allowed = "base_name, new_name, threshold"
            raise InvalidInput(sorted(unknown)[0], options[sorted(unknown)[0]], f"two traces take {allowed}")
        return compare_traces(sides[0], sides[1], **options)
    if any(traces):
        from infer_opt.errors import InvalidInput

        which = "new" if traces[0] else "base"
        other = sides[1] if traces[0] else sides[0]
        raise InvalidInput(which, type(other).__name__, "a trace compares with a trace result")
    from infer_opt.cost_models.run_stats import compare_results

    return compare_results(base, new, **options)


#: name -> "module:attribute", for infer_opt.__getattr__ (each imported on first use)
EXPORTS: dict[str, str] = {
    "amdahl": "infer_opt.api:amdahl",
    "Part": "infer_opt.cost_models.amdahl:Part",
    "load": "infer_opt.api:load",
    "profile": "infer_opt.api:profile",
    "kernels": "infer_opt.api:kernels",
    "predict": "infer_opt.api:predict",
    "fit_roofline": "infer_opt.api:fit_roofline",
    "buckets": "infer_opt.api:buckets",
    "amortize": "infer_opt.cost_models.amortization:amortize",
    "amortize_buckets": "infer_opt.api:amortize_buckets",
    "speculative_speedup": "infer_opt.cost_models.speculative:speculative_speedup",
    "Costs": "infer_opt.results.speculative:Costs",
    "acceptance": "infer_opt.api:acceptance",
    "compare_plans": "infer_opt.cost_models.speculative:compare_plans",
    "PlanRound": "infer_opt.cost_models.speculative:PlanRound",
    "rates_from_counts": "infer_opt.cost_models.speculative:rates_from_counts",
    "attention_memory": "infer_opt.cost_models.attention:attention_memory",
    "window_bound": "infer_opt.cost_models.attention:window_bound",
    "compare": "infer_opt.api:compare",
    "render": "infer_opt.reports.render:render",
    "load_trace": "infer_opt.trace.loaded:load_trace",
    "InvalidInput": "infer_opt.errors:InvalidInput",
    "RunFailure": "infer_opt.errors:RunFailure",
}


#: the largest count the API takes for a shape or repetition parameter (as the CLI's Count bounds)
MAX_COUNT = 1 << 20


def _counts(**params: tuple[object, int]) -> None:
    """Each ``name=(value, least)`` must be an integer in [least, MAX_COUNT], as the CLI's
    option types check it: :class:`InvalidInput` naming the parameter otherwise."""
    from infer_opt.errors import InvalidInput

    for name, (value, least) in params.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(name, value, f"must be an integer >= {least}, not {type(value).__name__}")
        if not least <= value <= MAX_COUNT:
            raise InvalidInput(name, value, f"must be an integer in [{least}, {MAX_COUNT}]")
