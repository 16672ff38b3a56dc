"""The one registry of result kinds: for each kind, its result class, the function that
builds its :class:`~infer_opt.reports.view.View`, the function that draws its plot(s), its
report highlights and whether its view cuts a table at ``top``; and the one table of output
formats (:data:`RENDERERS`).

Everything that needs to know the kinds reads this table: loading a saved file
(:func:`infer_opt.results.load_result`), rendering (:func:`infer_opt.reports.view.build_view`),
``--plot`` and ``infer-opt report``. Entries are ``"module:name"`` strings resolved on first
use, so importing the registry imports nothing heavy. Adding a kind is one :class:`Kind`
line here (see docs/ARCHITECTURE.md, "Add a result kind").
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from infer_opt.errors import InvalidInput


@dataclass(frozen=True)
class Kind:
    """A result kind: ``result`` is the dataclass, ``view`` builds its View, ``plot`` (or
    None) writes its PNG(s) as ``plot(result, path) -> Path | list[Path]``, ``highlights`` (or
    None: the view's verdict) picks a report's "what matters" lines as
    ``highlights(result, view) -> list[Highlight]``; ``top``: the view builder takes ``top=``, a
    display cut that a DataFrame lifts; ``frame``: the title of the view's table that
    ``to_frame()`` gives (None: the first table)."""

    name: str
    result: str
    view: str
    plot: str | None = None
    highlights: str | None = None
    top: bool = False
    frame: str | None = None


_RS = "infer_opt.results"
_RP = "infer_opt.reports"
_PL = "infer_opt.reports.plots"
_HL = "infer_opt.reports.highlights"
#: the trace view's op table (its main table: one row per op group)
TRACE_OPS = "Top ops by GPU kernel time (measured)"

# fmt: off
KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("amdahl", f"{_RS}.amdahl:AmdahlResult", f"{_RP}.amdahl:build_view", f"{_PL}.amdahl:plot",
            f"{_HL}:amdahl"),
        Kind("kernels", f"{_RS}.kernels:KernelSuiteResult", f"{_RP}.kernels:build_view", None,
            f"{_HL}:kernels"),
        Kind("roofline", f"{_RS}.roofline:RooflineFit", f"{_RP}.roofline:build_view", f"{_PL}.roofline:plot",
            f"{_HL}:roofline"),
        Kind("attention-check", f"{_RS}.attention_check:AttentionCheckResult",
            f"{_RP}.attention_check:build_view"),
        Kind("speculative-verify", f"{_RS}.speculative_verify:SpeculativeVerifyResult",
            f"{_RP}.speculative_verify:build_view"),
        Kind("speculative-speedup", f"{_RS}.speculative:SpeedupResult",
            f"{_RP}.speculative:build_speedup_view", f"{_PL}.speculative:plot", f"{_HL}:speculative_speedup"),
        Kind("speculative-acceptance", f"{_RS}.speculative:AcceptanceResult",
            f"{_RP}.speculative:build_acceptance_view", None, None, top=True),
        Kind("speculative-plans", f"{_RS}.speculative:PlansResult", f"{_RP}.speculative:build_plans_view"),
        Kind("speculative-metrics", f"{_RS}.speculative:MetricsResult",
            f"{_RP}.speculative:build_metrics_view"),
        Kind("attention-memory", f"{_RS}.attention:AttentionMemoryResult",
            f"{_RP}.attention:build_memory_view"),
        Kind("attention-window", f"{_RS}.attention:WindowBoundResult", f"{_RP}.attention:build_window_view"),
        Kind("amortize", f"{_RS}.amortize:AmortizeResult", f"{_RP}.amortize:build_view",
            f"{_PL}.amortize:plot_one", f"{_HL}:amortize"),
        Kind("amortize-buckets", f"{_RS}.amortize:AmortizeBucketsResult",
            f"{_RP}.amortize:build_buckets_view", f"{_PL}.amortize:plot_buckets", f"{_HL}:amortize_buckets"),
        Kind("amortize-measure", f"{_RS}.amortize_measure:AmortizeMeasureResult",
            f"{_RP}.amortize_measure:build_view", f"{_PL}.amortize_measure:plot"),
        Kind("speculative-measure", f"{_RS}.speculative_measure:SpecMeasureResult",
            f"{_RP}.speculative_measure:build_view", f"{_PL}.speculative_measure:plot"),
        Kind("speculative-run", f"{_RS}.speculative_run:SpecRunResult", f"{_RP}.speculative_run:build_view",
            f"{_PL}.speculative_run:plot"),
        Kind("buckets", f"{_RS}.buckets:BucketsResult", f"{_RP}.buckets:build_view", f"{_PL}.buckets:plot",
            f"{_HL}:buckets"),
        Kind("profile", f"{_RS}.profile:ProfileResult", f"{_RP}.profile:build_view", f"{_PL}.profile:plot",
            f"{_HL}:profile", top=True),
        Kind("compare", f"{_RS}.compare:CompareResult", f"{_RP}.compare:build_view", f"{_PL}.compare:plot",
            f"{_HL}:compare"),
        Kind("ab", f"{_RS}.ab:AbResult", f"{_RP}.ab:build_view", f"{_PL}.ab:plot"),
        Kind("noise-floor", f"{_RS}.noise_floor:NoiseFloor", f"{_RP}.noise_floor:build_view"),
        Kind("comm", f"{_RS}.comm:CommResult", f"{_RP}.comm:build_view", f"{_PL}.comm:plot"),
        Kind("profile-tp", f"{_RS}.profile_tp:TPProfileResult", f"{_RP}.profile_tp:build_view",
            f"{_PL}.profile:plot", None, top=True),
        # ---- calibrated performance model (calibrate, predict, validate)
        Kind("calibration", f"{_RS}.calibration:CalibrationResult", f"{_RP}.calibration:build_view", None,
            f"{_HL}:calibration"),
        Kind("predict", f"{_RS}.predict:PredictResult", f"{_RP}.predict:build_view", f"{_PL}.predict:plot",
            f"{_HL}:predict", top=True),
        Kind("validate", f"{_RS}.validate:ValidateResult", f"{_RP}.validate:build_view",
            f"{_PL}.validate:plot", f"{_HL}:validate"),
        Kind("validate-trace", f"{_RS}.validate_trace:TraceValidateResult",
            f"{_RP}.validate_trace:build_view", f"{_PL}.validate:plot"),
        # ---- real GPU traces (trace)
        Kind("trace", f"{_RS}.trace:TraceResult", f"{_RP}.trace:build_view", f"{_PL}.trace:plot",
            f"{_HL}:trace", top=True, frame=TRACE_OPS),
        Kind("trace-compare", f"{_RS}.trace_compare:TraceCompareResult", f"{_RP}.trace_compare:build_view",
            f"{_PL}.trace_compare:plot", f"{_HL}:trace_compare", top=True),
        # ---- engine settings (tune)
        Kind("tune-capture-sizes", f"{_RS}.tune_capture_sizes:TuneCaptureSizesResult",
            f"{_RP}.tune_capture_sizes:build_view", f"{_PL}.tune_capture_sizes:plot"),
        Kind("tune-speculative", f"{_RS}.tune_speculative:TuneSpeculativeResult",
            f"{_RP}.tune_speculative:build_view", f"{_PL}.tune_speculative:plot"),
    )
}
# fmt: on


#: output format name -> "module:Class" of its renderer (lazy: printing JSON never imports rich);
#: ``--format`` takes these names, a file's extension picks one through the class's ``extensions``
RENDERERS: dict[str, str] = {
    "console": "infer_opt.reports.console:ConsoleRenderer",
    "markdown": "infer_opt.reports.markdown:MarkdownRenderer",
    "csv": "infer_opt.reports.serialize:CsvRenderer",
    "json": "infer_opt.reports.serialize:JsonRenderer",
    "html": "infer_opt.reports.html:HtmlRenderer",
}


def kind(name: str) -> Kind:
    """The registry entry of ``name``; an unknown kind is bad input naming the known ones."""
    if name not in KINDS:
        raise InvalidInput(
            "result file", name, f"unknown result kind; known kinds: {', '.join(sorted(KINDS))}"
        )
    return KINDS[name]


def resolve(reference: str) -> Any:
    """Import ``"module:name"`` and return the object."""
    module_name, _, attr = reference.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def result_class(name: str) -> Any:
    return resolve(kind(name).result)


def view_builder(name: str) -> Any:
    return resolve(kind(name).view)


def plotter(name: str) -> Any | None:
    """The function writing ``name``'s plot(s), or None when the kind has no plot."""
    entry = KINDS.get(name)
    return None if entry is None or entry.plot is None else resolve(entry.plot)


def highlighter(name: str) -> Any | None:
    """The function picking ``name``'s report highlights, or None (the view's verdict)."""
    entry = KINDS.get(name)
    return None if entry is None or entry.highlights is None else resolve(entry.highlights)
