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
import importlib
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from infer_opt.requests import (
    AbRequest,
    AcceptanceRequest,
    AmdahlRequest,
    AmortizeMeasureRequest,
    AmortizeRequest,
    AttentionCheckRequest,
    AttentionMemoryRequest,
    AttentionWindowRequest,
    BucketsRequest,
    CalibrateRequest,
    CommRequest,
    CompareRequest,
    FromMetricsRequest,
    KernelsRequest,
    PlansRequest,
    PredictRequest,
    ProfileRequest,
    ReportRequest,
    Request,
    RooflineRequest,
    SpecSpeedupRequest,
    SpeculativeMeasureRequest,
    SpeculativeRunRequest,
    SpeculativeVerifyRequest,
    TraceRequest,
    TuneCaptureSizesRequest,
    TuneSpeculativeRequest,
    Typed,
    ValidateRequest,
)

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


_PATH = Typed((str, os.PathLike), "a file path")


def _runs(request: type[Request], run: str, *, first: bool = False) -> Callable[[Callable[[], Any]], Any]:
    """The API function of a command: its parameters are ``request``'s fields (the command's
    options, with their defaults), and it hands the request they make to ``run``
    (``"module:function"``, imported on first use); ``first``: ``run`` returns the result and
    what only the command line shows (notices, a sample to plot), and the API returns the result."""

    def decorate(func: Callable[[], Any]) -> Any:
        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            module, name = run.split(":")
            done = getattr(importlib.import_module(module), name)(request(*args, **kwargs))
            return done[0] if first else done

        call.__signature__ = inspect.signature(request).replace(return_annotation=Any)  # type: ignore[attr-defined]
        return _api(call)

    return decorate


@_runs(AmdahlRequest, "infer_opt.cost_models.amdahl:run")
def amdahl() -> Any:
    """Amdahl's law ``S = 1/((1 - Σf_i) + Σ f_i/s_i + a)``: one part (``fraction``,
    ``speedup``) or several (``part``: :class:`Part` s or ``"NAME=F:S"``), added overhead
    ``added``, and with ``target`` the speedup the parts need to reach it."""


@_api
def load(path: str | Path) -> Any:
    """A saved result (any ``--out FILE.json``) as its result object, validated whole (a field
    of the wrong type or an impossible value: :class:`~infer_opt.errors.BadField`)."""
    from infer_opt.errors import InvalidInput
    from infer_opt.results import load_result

    _PATH.check(path, "path")
    try:
        return load_result(path).result
    except InvalidInput as exc:
        if exc.option == "result file":  # the file itself (missing, a device): said as `path`
            raise exc.under("path", exc.value) from None
        raise


@_runs(AttentionMemoryRequest, "infer_opt.cost_models.attention:run_memory")
def attention_memory() -> Any:
    """Score-matrix memory, HBM traffic of explicit and tiled attention, and FLOPs
    (``infer-opt attention memory``): ``tq``, ``tk``, ``heads``, ``head_dim`` by name."""


@_runs(AttentionWindowRequest, "infer_opt.cost_models.attention:run_window")
def window_bound() -> Any:
    """The output error bound ``‖o - o'‖ ≤ 2·δ·M`` of dropping keys of softmax mass δ with
    value norms at most M (``infer-opt attention window``)."""


@_runs(AttentionCheckRequest, "infer_opt.checks.mask_alignment:run")
def attention_check() -> Any:
    """The attention kernels checked exact over causal, decode and window masks
    (``infer-opt attention check``): an ``AttentionCheckResult`` (``.passed``)."""


@_runs(ProfileRequest, "infer_opt.profilers.model_profile:run")
def profile() -> Any:
    """Profile one step of ``model`` per aten operator, as ``infer-opt profile`` does: a
    built-in name, ``module:factory``, ``file.py:factory`` or ``hf:<model_type>[:base]``. ``roofline``:
    a fit file, None for the fit cached for this machine (calibrated now if there is none), or
    False for no roofline columns. Returns a
    :class:`~infer_opt.profilers.model_profile.ProfileResult`."""


@_runs(PredictRequest, "infer_opt.profilers.predict:run")
def predict() -> Any:
    """Predict one step of ``model`` from the operator calibration without running it, as
    ``infer-opt predict`` does: ``calibration`` a file (``infer-opt calibrate --out``), else the
    one cached for ``device``, ``dtype`` and ``threads``; ``sweep`` as the CLI's
    (``"batch=1,2,4"``). Returns a :class:`~infer_opt.results.predict.PredictResult`."""


@_runs(KernelsRequest, "infer_opt.profilers.kernels:run")
def kernels() -> Any:
    """Time the kernel suite (``infer-opt kernels``): a
    :class:`~infer_opt.profilers.kernels.KernelSuiteResult`."""


@_runs(RooflineRequest, "infer_opt.profilers.roofline:run")
def fit_roofline() -> Any:
    """Fit ``t ≈ t0 + max(F/R, Q/b)`` (``infer-opt roofline``) to a kernel-suite result, a
    saved ``.json`` or a measurement ``.csv`` (None: the quick suite measured now), with the
    datasheet peaks shown beside it: a :class:`~infer_opt.results.roofline.RooflineFit`,
    cached for ``profile`` unless ``no_save``."""


@_runs(CalibrateRequest, "infer_opt.profilers.calibration:run")
def calibrate() -> Any:
    """The operator calibration ``predict`` and ``validate`` use (``infer-opt calibrate``), cached
    for the device, dtype and threads: a :class:`~infer_opt.results.calibration.CalibrationResult`."""


@_runs(ValidateRequest, "infer_opt.profilers.validate:run")
def validate() -> Any:
    """Measure and predict ``model``'s step over a shape grid (``infer-opt validate``): ``grid``
    as the CLI's ``--grid`` values (``["batch=1,3", "seq-len=48,200"]``). Returns a
    :class:`~infer_opt.results.validate.ValidateResult`."""


@_runs(BucketsRequest, "infer_opt.cost_models.bucketing:run", first=True)
def buckets() -> Any:
    """Padding waste of a length sample under ``bounds`` (or, with ``optimize=K``, the K
    bounds with the least waste): ``file`` is a file path or a sequence of lengths."""


@_runs(AmortizeRequest, "infer_opt.cost_models.amortization:run", first=True)
def amortize() -> Any:
    """Break-even calls and net gain of a compile (``infer-opt amortize``): one shape
    (``compile_cost``, ``eager``, ``compiled`` in seconds, ``calls``) or a bucket CSV
    (``buckets``, its calls from a ``lengths`` sample scaled to ``requests``)."""


@_api
def amortize_buckets(path: str | Path) -> Any:
    """Compile amortization per bucket from a bucket CSV (``infer-opt amortize --buckets``)."""
    from infer_opt.errors import InvalidInput

    try:
        return amortize(buckets=_PATH.check(path, "path"))
    except InvalidInput as exc:
        raise (exc.under("path", exc.value) if exc.option == "buckets" else exc) from None


@_runs(SpecSpeedupRequest, "infer_opt.cost_models.speculative:run_speedup")
def spec_speedup() -> Any:
    """Expected committed tokens per round and the speedup over plain decoding
    (``infer-opt speculative speedup``): durations in seconds, ``verify_cost_model`` as
    ``"12ms+0.5ms*k"`` or ``(A, B)`` seconds. :func:`speculative_speedup` takes a :class:`Costs`."""


@_runs(AcceptanceRequest, "infer_opt.cost_models.speculative:run_acceptance")
def acceptance() -> Any:
    """Acceptance of draft tokens ``x ~ q`` against the target ``p`` (``infer-opt speculative
    acceptance``): ``a(x) = min(1, p/q)``, ``A = Σ min(p, q)``, the residual and both sampling
    rules' outputs; ``p``/``q`` as lists or ``p_file``/``q_file``, as ``logits`` at temperatures."""


@_runs(PlansRequest, "infer_opt.cost_models.speculative:run_plans", first=True)
def spec_plans() -> Any:
    """The long-run cost per committed token of the plans logged in ``file`` (``infer-opt
    speculative plans``); :func:`compare_plans` takes the rounds themselves."""


@_runs(FromMetricsRequest, "infer_opt.cost_models.speculative:run_from_metrics")
def spec_from_metrics() -> Any:
    """Per-position acceptance from serving counters (``infer-opt speculative from-metrics``):
    given, a JSON ``file`` or a ``prometheus`` snapshot; with costs (seconds) the speedup."""


@_runs(AmortizeMeasureRequest, "infer_opt.api:_amortize_measure")
def amortize_measure() -> Any:
    """Measure compile cost and steady times per (batch, bound) bucket of ``model`` and decide
    which to compile (``infer-opt amortize measure``): an ``AmortizeMeasureResult``."""


def _amortize_measure(request: AmortizeMeasureRequest) -> Any:
    from infer_opt.profilers import amortize_measure_sweep

    return amortize_measure_sweep.run(amortize_measure_sweep.sweep_of(request), previous=request.resume)


#: name -> "module:attribute", for infer_opt.__getattr__ (each imported on first use)
EXPORTS: dict[str, str] = {
    "amdahl": "infer_opt.api:amdahl",
    "Part": "infer_opt.cost_models.amdahl:Part",
    "load": "infer_opt.api:load",
    "profile": "infer_opt.api:profile",
    "kernels": "infer_opt.api:kernels",
    "predict": "infer_opt.api:predict",
    "validate": "infer_opt.api:validate",
    "calibrate": "infer_opt.api:calibrate",
    "fit_roofline": "infer_opt.api:fit_roofline",
    "buckets": "infer_opt.api:buckets",
    "amortize": "infer_opt.api:amortize",
    "amortize_buckets": "infer_opt.api:amortize_buckets",
    "speculative_speedup": "infer_opt.cost_models.speculative:speculative_speedup",
    "Costs": "infer_opt.results.speculative:Costs",
    "acceptance": "infer_opt.api:acceptance",
    "compare_plans": "infer_opt.cost_models.speculative:compare_plans",
    "PlanRound": "infer_opt.cost_models.speculative:PlanRound",
    "rates_from_counts": "infer_opt.cost_models.speculative:rates_from_counts",
    "attention_memory": "infer_opt.api:attention_memory",
    "window_bound": "infer_opt.api:window_bound",
    "attention_check": "infer_opt.api:attention_check",
    "compare": "infer_opt.api:compare",
    "render": "infer_opt.reports.render:render",
    "load_trace": "infer_opt.api:load_trace",
    "InvalidInput": "infer_opt.errors:InvalidInput",
    "RunFailure": "infer_opt.errors:RunFailure",
    # group 2: measuring
    "comm": "infer_opt.api:comm",
    "ab": "infer_opt.api:ab",
    "speculative_verify": "infer_opt.api:speculative_verify",
    "speculative_measure": "infer_opt.api:speculative_measure",
    "speculative_run": "infer_opt.api:speculative_run",
    # group 1: calculators
    "spec_speedup": "infer_opt.api:spec_speedup",
    "spec_plans": "infer_opt.api:spec_plans",
    "spec_from_metrics": "infer_opt.api:spec_from_metrics",
    "amortize_measure": "infer_opt.api:amortize_measure",
    # group 3: traces and engine settings
    "tune_capture_sizes": "infer_opt.api:tune_capture_sizes",
    "tune_speculative": "infer_opt.api:tune_speculative",
    "report": "infer_opt.api:report",
}


# ----------------------------------------------------------------------------- group 2: measuring


@_runs(CommRequest, "infer_opt.profilers.comm:run")
def comm() -> Any:
    """Time the collectives over message sizes and fit ``t ≈ α + S/β`` (``infer-opt comm``) on
    this rank: a job of one (the local copy) outside torchrun; under torchrun rank 0 returns the
    :class:`~infer_opt.results.comm.CommResult`, the other ranks None."""


@_runs(AbRequest, "infer_opt.profilers.ab:run")
def ab() -> Any:
    """Run the command lines ``base`` and ``new`` alternately for ``rounds`` rounds and compare
    their results (``infer-opt ab``): an :class:`~infer_opt.results.ab.AbResult`."""


@_runs(SpeculativeVerifyRequest, "infer_opt.checks.speculative_sampler:run")
def speculative_verify() -> Any:
    """Check that the speculative sampler's output is distributed exactly as the target
    (``infer-opt speculative verify``): a result with ``.passed``."""


@_runs(SpeculativeMeasureRequest, "infer_opt.profilers.speculative_costs:run")
def speculative_measure() -> Any:
    """Measure c_t, c_d, c_v(k) and c_m of a target/draft pair and decide k
    (``infer-opt speculative measure``)."""


@_runs(SpeculativeRunRequest, "infer_opt.profilers.speculative_run:run")
def speculative_run() -> Any:
    """Run speculative decoding, time it against plain decoding and hold it against the cost
    model (``infer-opt speculative run``)."""


# --------------------------------------------------------------- group 3: traces and engine settings


@_runs(TraceRequest, "infer_opt.trace.loaded:run")
def load_trace() -> Any:
    """Analyze trace file(s) as ``infer-opt trace`` does (``paths``: a file, a folder of ranks, or a
    list of them): a :class:`~infer_opt.trace.loaded.LoadedTrace`, the result with its tables as
    DataFrames. ``scheduler``: a Dask scheduler address (or ``distributed.Client``) to read the
    ranks on; ``workers``: local processes (default the cores); ``strict``: refuse when a rank
    cannot be read."""


@_runs(TuneCaptureSizesRequest, "infer_opt.cost_models.capture_tuning:run")
def tune_capture_sizes() -> Any:
    """The CUDA-graph capture list minimising the expected decode step time (``infer-opt tune
    capture-sizes``): ``cost_file`` a list of cost files (``"FILE@B"`` for a trace result at batch
    B), ``batches`` or ``prometheus`` (``before``: a window) the batch sizes seen; durations in
    seconds. A :class:`~infer_opt.results.tune_capture_sizes.TuneCaptureSizesResult`."""


@_runs(TuneSpeculativeRequest, "infer_opt.cost_models.speculative_tuning:run")
def tune_speculative() -> Any:
    """The draft length per batch size (``infer-opt tune speculative``) from ``alphas`` (or the
    ``prometheus`` window) and the target's and draft's cost files; ``overhead`` in seconds. A
    :class:`~infer_opt.results.tune_speculative.TuneSpeculativeResult`."""


@_runs(CompareRequest, "infer_opt.cost_models.compare_runs:run")
def compare() -> Any:
    """Two results compared as ``infer-opt compare`` compares them (each a file, a result, or a
    list of results: the rounds of an ``ab``): two trace results (or
    :class:`~infer_opt.trace.loaded.LoadedTrace` s) op by op (``threshold`` only); two profiles
    or kernel-suite runs with the run-level statistics of
    :func:`~infer_opt.cost_models.compare_runs.compare_results`."""


@_runs(ReportRequest, "infer_opt.reports.report:run")
def report() -> Any:
    """Saved results (files, any mix of kinds) as one report (``infer-opt report``), without its
    plots: a :class:`~infer_opt.reports.render.Document` (``infer_opt.render`` or a renderer
    writes it as markdown or HTML)."""
