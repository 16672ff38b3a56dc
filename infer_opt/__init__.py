"""infer-opt: measure where inference time goes and decide which optimization pays.

The command-line tool is ``infer-opt``; the same work is available as functions
(:mod:`infer_opt.api`), importable from here and loaded on first use, so ``import infer_opt``
stays as light as the calculators::

    import infer_opt

    infer_opt.amdahl(0.4, 4).speedup          # 1.4286
    infer_opt.profile("tiny").to_frame()      # the operator table as a pandas DataFrame
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API = {
    "amdahl", "Part", "load", "profile", "predict", "kernels", "fit_roofline", "buckets", "amortize",
    "amortize_buckets", "speculative_speedup", "Costs", "acceptance", "compare_plans", "PlanRound",
    "rates_from_counts", "attention_memory", "window_bound", "compare", "render", "load_trace",
    "InvalidInput", "RunFailure", "validate", "calibrate", "attention_check",
    # group 2: measuring
    "comm", "ab", "speculative_verify", "speculative_measure", "speculative_run",
    "spec_speedup", "spec_plans", "spec_from_metrics", "amortize_measure",  # group 1: calculators
    "tune_capture_sizes", "tune_speculative", "report",  # group 3: traces and engine settings
}  # fmt: skip

__all__ = ["__version__", *sorted(_API)]


def __getattr__(name: str) -> Any:
    """The API's names (see :data:`infer_opt.api.EXPORTS`), imported when first used."""
    if name not in _API:
        raise AttributeError(f"module 'infer_opt' has no attribute {name!r}")
    import importlib

    from infer_opt.api import EXPORTS

    module_name, _, attr = EXPORTS[name].partition(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
