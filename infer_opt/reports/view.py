"""The one intermediate shape every renderer formats.

A result kind's view builder (``reports/<kind>.py``) turns the result into a
:class:`View` once; the console, markdown, CSV and JSON renderers only format it.
Rows hold raw values (floats in SI base units); a :class:`Column` says how to show them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from infer_opt.units import format_number

Formatter = Callable[[Any], str]


def _default_format(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return format_number(value)
    return str(value)


@dataclass(frozen=True)
class Column:
    """One column: ``key`` into the row dicts, a human ``header``, how to format a cell,
    and the ``csv_header`` (with the SI unit of the raw value, e.g. ``time_s``)."""

    key: str
    header: str
    fmt: Formatter = _default_format
    align: Literal["left", "right"] = "right"
    csv_header: str | None = None

    def format(self, value: Any) -> str:
        return self.fmt(value) if value is not None else "—"


@dataclass
class Table:
    title: str
    columns: Sequence[Column]
    rows: list[dict[str, Any]]
    caption: str | None = None
    #: a row index -> style hint ("best", "bad", "muted") used by rich renderers
    highlight: dict[int, str] = field(default_factory=dict)


@dataclass
class View:
    """What a result says, in the order a reader wants it."""

    title: str
    summary: list[tuple[str, str]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    verdict: str | None = None
    verdict_ok: bool = True


#: result kind -> "module:function" building its View (lazy imports keep startup fast)
VIEW_BUILDERS: dict[str, str] = {
    "amdahl": "infer_opt.reports.amdahl:build_view",
    "kernels": "infer_opt.reports.kernels:build_view",
    "roofline": "infer_opt.reports.roofline:build_view",
    "attention-check": "infer_opt.reports.checks:build_attention_check_view",
    "speculative-verify": "infer_opt.reports.checks:build_speculative_verify_view",
    "speculative-speedup": "infer_opt.reports.speculative:build_speedup_view",
    "speculative-acceptance": "infer_opt.reports.speculative:build_acceptance_view",
    "speculative-plans": "infer_opt.reports.speculative:build_plans_view",
    "speculative-metrics": "infer_opt.reports.speculative:build_metrics_view",
    "attention-memory": "infer_opt.reports.attention:build_memory_view",
    "attention-window": "infer_opt.reports.attention:build_window_view",
    "amortize": "infer_opt.reports.amortize:build_view",
    "amortize-buckets": "infer_opt.reports.amortize:build_buckets_view",
    "amortize-measure": "infer_opt.reports.measure:build_amortize_view",
    "speculative-measure": "infer_opt.reports.measure:build_speculative_view",
    "speculative-run": "infer_opt.reports.spec_run:build_view",
    "buckets": "infer_opt.reports.buckets:build_view",
    "profile": "infer_opt.reports.profile:build_view",
    "compare": "infer_opt.reports.compare:build_view",
}


def build_view(result: Any) -> View:
    """The view of any registered result kind."""
    kind = result.KIND
    if kind not in VIEW_BUILDERS:
        raise KeyError(f"no view builder registered for result kind {kind!r}")
    module_name, _, func = VIEW_BUILDERS[kind].partition(":")
    return getattr(importlib.import_module(module_name), func)(result)
