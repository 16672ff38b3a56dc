"""View of ``infer-opt compare`` on two traces: the step, the ops that changed most, and the
categories' shares side by side (every figure measured; the verdicts are the rule in
:mod:`infer_opt.trace.compare`)."""

from __future__ import annotations

import os

from infer_opt.reports.profile import short_name
from infer_opt.reports.trace import _shapes, _shapes_full
from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.trace import shapes_text
from infer_opt.results.trace_compare import TraceCompareResult, TraceSide
from infer_opt.units import format_duration, format_percent, format_ratio

TOP = 20
_VERDICTS = {
    "slower": "slower",
    "faster": "faster",
    "same": "same",
    "within_spread": "within spread",
    "only_base": "only in base",
    "only_new": "only in new",
}


def _side(s: TraceSide) -> str:
    return (
        f"{os.path.basename(s.name)}: {s.device_name or 'unknown device'}, {s.steps} step(s)"
        + (f" over {s.ranks} ranks" if s.ranks > 1 else "")
        + f", median step {format_duration(s.step_median_s, 4)}"
        + (f", GPU idle {format_percent(s.idle_fraction)}" if s.idle_fraction is not None else "")
    )


def build_view(result: TraceCompareResult, *, top: int = TOP) -> View:
    summary = [
        ("Base", _side(result.base)),
        ("New", _side(result.new)),
        ("Step ratio (new / base)", format_ratio(result.step_ratio)),
        (
            "Kernel time per step",
            f"{format_duration(result.base.kernel_time_per_step_s, 4)} → "
            f"{format_duration(result.new.kernel_time_per_step_s, 4)}",
        ),
    ]
    if result.matched_fraction is not None:
        summary.append(("Kernel time in ops both ran", format_percent(result.matched_fraction)))
    for label, side in (("Base", result.base), ("New", result.new)):
        if side.bound:
            summary.append((f"{label} step bound (replayed)", _bound(side)))
        if side.idle_causes:
            summary.append((f"{label} idle causes", _idle(side)))
    op_columns = [
        Column("name", "Op", short_name, align="left", csv_header="name", is_key=True),
        Column("shapes", "Shapes", _shapes_full, "left", "shapes", importance=-1, terminal=_shapes),
        Column("base_per_step_s", "Base / step", format_duration, csv_header="base_per_step_s"),
        Column("new_per_step_s", "New / step", format_duration, csv_header="new_per_step_s"),
        Column("ratio", "Ratio", format_ratio, csv_header="ratio", importance=2),
        Column("spread_s", "Spread", format_duration, csv_header="spread_s", importance=-2),
        Column(
            "verdict",
            "Verdict",
            lambda v: _VERDICTS.get(v, v),
            align="left",
            csv_header="verdict",
            importance=1,
        ),
    ]
    shown = result.ops[:top]
    several = result.base.steps > 1 or result.new.steps > 1  # else the spread is unknown, not 0
    ops = Table(
        "Ops that changed most (kernel time per step, measured)",
        op_columns,
        rows_of(
            shown,
            op_columns,
            spread_s=lambda o: o.spread_s if several else None,
            shapes=lambda o: shapes_text(o.shapes),
        ),
        caption=f"Top {len(shown)} of {len(result.ops)} (op, shapes, dtype) groups by |new − base|. "
        f"A change is called at ±{result.threshold:.0%} and beyond the spread between steps (max − min).",
        highlight={
            i: ("bad" if o.verdict == "slower" else "best")
            for i, o in enumerate(shown)
            if o.verdict in ("slower", "faster")
        },
    )
    cat_columns = [
        Column("category", "Category", align="left", csv_header="category", is_key=True),
        Column("base_share", "Base share", format_percent, csv_header="base_share", importance=2),
        Column("new_share", "New share", format_percent, csv_header="new_share", importance=2),
        Column("base_per_step_s", "Base / step", format_duration, csv_header="base_per_step_s"),
        Column("new_per_step_s", "New / step", format_duration, csv_header="new_per_step_s"),
    ]
    categories = Table(
        "Categories side by side (share of kernel time, measured)",
        cat_columns,
        rows_of(result.categories, cat_columns),
    )
    tables = [ops, categories]
    if result.critical_path:
        tables.append(_critical_table(result))
    return View(
        title="Trace comparison",
        summary=summary,
        tables=tables,
        verdict=result.headline,
        verdict_ok=result.step_ratio <= 1 if result.step_ratio == result.step_ratio else True,
        warnings=list(result.warnings),
    )


def _bound(s: TraceSide) -> str:
    return (
        f"{s.bound}-bound ({format_percent(s.bound_share)} of the critical path), replayed step "
        f"{format_duration(s.replayed_step_s, 4)}"
    )


def _idle(s: TraceSide, top: int = 3) -> str:
    return ", ".join(f"{c.cause} {format_duration(c.time_s)}/step" for c in s.idle_causes[:top])


def _critical_table(result: TraceCompareResult) -> Table:
    columns = [
        Column("cause", "Cause", align="left", csv_header="cause", is_key=True),
        Column("base_per_step_s", "Base / step", format_duration, csv_header="base_per_step_s"),
        Column("new_per_step_s", "New / step", format_duration, csv_header="new_per_step_s"),
        Column("base_share", "Base share", format_percent, csv_header="base_share", importance=2),
        Column("new_share", "New share", format_percent, csv_header="new_share", importance=2),
    ]
    return Table(
        "Critical path by cause side by side (replayed, per step)",
        columns,
        rows_of(result.critical_path, columns),
        caption="Each side's mean over its replayed steps; host, launch and sync_wait are the host's "
        "side, the rest the device's; 'kernel: …' rows split the kernel time by category.",
    )
