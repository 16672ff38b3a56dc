"""View of an Amdahl result."""

from __future__ import annotations

from infer_opt.cost_models.amdahl import AmdahlResult
from infer_opt.reports.messages import text
from infer_opt.reports.view import Column, Table, View
from infer_opt.units import format_number, format_percent, format_ratio


def _speed(value: float | None) -> str:
    return format_ratio(value) if value is not None else "—"


def build_view(result: AmdahlResult) -> View:
    has_target = result.target is not None
    columns = [
        Column("name", "Part", align="left"),
        Column("fraction", "Share before", format_percent, csv_header="fraction"),
        Column("speedup", "Speedup", _speed, csv_header="speedup"),
        Column(
            "time_after",
            "Time after (of original)",
            format_percent,
            csv_header="time_after_fraction",
        ),
        Column("share_after", "Share after", format_percent, csv_header="share_after"),
    ]
    if has_target:
        columns.append(Column("required", "Needed alone for target", _speed, csv_header="required_speedup"))
    rows = [
        {
            "name": p.name + (" (slower)" if p.slowdown else ""),
            "fraction": p.fraction,
            "speedup": p.speedup if result.speedup_given else None,
            "time_after": p.time_after,
            "share_after": p.share_after,
            "required": p.required_speedup,
        }
        for p in result.parts
    ]
    rows.append(
        {
            "name": "untouched",
            "fraction": result.untouched_fraction,
            "speedup": 1.0,
            "time_after": result.untouched_fraction,
            "share_after": result.untouched_fraction / result.new_time if result.new_time else 0.0,
        }
    )
    if result.added:
        rows.append(
            {
                "name": "added overhead",
                "fraction": 0.0,
                "time_after": result.added,
                "share_after": result.added / result.new_time if result.new_time else 0.0,
            }
        )
    rows.append(
        {
            "name": "total",
            "fraction": 1.0,
            "speedup": result.speedup,
            "time_after": result.new_time,
            "share_after": 1.0,
        }
    )
    table = Table("Time by part", columns, rows, highlight={len(rows) - 1: "best"})

    summary = [
        ("End-to-end speedup", format_ratio(result.speedup)),
        ("New time", f"{format_percent(result.new_time)} of the original"),
        ("Ceiling (parts free)", format_ratio(result.ceiling)),
    ]
    if not result.speedup_given:
        summary[:2] = [("End-to-end speedup", "— (no --speedup given: solving for --target)")]
    notes: list[str] = []
    if has_target:
        summary.append(("Target", format_ratio(result.target)))
        if result.required_speedup is not None:
            who = "the part" if len(result.parts) == 1 else "every part (the same factor)"
            summary.append(("Speedup needed", f"{format_ratio(result.required_speedup)} for {who}"))
        else:
            summary.append(("Speedup needed", text(result.reason) if result.reason else "—"))
    if result.added:
        notes.append(
            f"Added overhead {format_number(result.added)} of the original time is paid "
            "even if the parts become free."
        )
    verdict = None
    if has_target and result.reason is not None and result.reason.code == "target_above_ceiling":
        verdict = "Target not reachable by speeding up these parts."
    return View(
        title="Amdahl's law",
        summary=summary,
        tables=[table],
        notes=notes,
        warnings=list(result.warnings),
        verdict=verdict,
        verdict_ok=verdict is None,
    )
