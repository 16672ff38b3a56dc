"""View of an Amdahl result: the parts before and after, the speedup, its ceiling and, with
a target, the speedup each part needs."""

from __future__ import annotations

from typing import Any

from infer_opt.messages import text
from infer_opt.reports.view import Column, Table, View
from infer_opt.results.amdahl import AmdahlResult
from infer_opt.units import format_number, format_percent, format_ratio


def _speed(value: float | None) -> str:
    return format_ratio(value) if value is not None else "—"


def _columns(has_target: bool) -> list[Column]:
    columns = [
        Column("name", "Part", align="left"),
        Column("fraction", "Share before", format_percent, csv_header="fraction"),
        Column("speedup", "Speedup", _speed, csv_header="speedup"),
        Column("time_after", "Time after (of original)", format_percent, csv_header="time_after_fraction"),
        Column("share_after", "Share after", format_percent, csv_header="share_after"),
    ]
    if has_target:
        columns.append(Column("required", "Needed alone for target", _speed, csv_header="required_speedup"))
    return columns


def _rows(r: AmdahlResult) -> list[dict[str, Any]]:
    """One row per part, then the untouched rest, the added overhead and the total."""
    keys = ("name", "fraction", "speedup", "time_after", "share_after", "required")
    rows = [
        (
            p.name + (" (slower)" if p.slowdown else ""),
            p.fraction,
            p.speedup if r.speedup_given else None,
            p.time_after,
            p.share_after,
            p.required_speedup,
        )
        for p in r.parts
    ]
    rows.append(("untouched", r.untouched_fraction, 1.0, r.untouched_fraction, r.untouched_share_after, None))
    if r.added:
        rows.append(("added overhead", 0.0, None, r.added, r.added_share_after, None))
    rows.append(("total", 1.0, r.speedup, r.new_time, 1.0, None))
    return [dict(zip(keys, row, strict=True)) for row in rows]


def _summary(r: AmdahlResult) -> list[tuple[str, str]]:
    if r.speedup_given:
        summary = [
            ("End-to-end speedup", format_ratio(r.speedup)),
            ("New time", f"{format_percent(r.new_time)} of the original"),
        ]
    else:
        summary = [("End-to-end speedup", "— (no --speedup given: solving for --target)")]
    summary.append(("Ceiling (parts free)", format_ratio(r.ceiling)))
    if r.target is not None:
        summary.append(("Target", format_ratio(r.target)))
        if r.required_speedup is not None:
            who = "the part" if len(r.parts) == 1 else "every part (the same factor)"
            summary.append(("Speedup needed", f"{format_ratio(r.required_speedup)} for {who}"))
        else:
            summary.append(("Speedup needed", text(r.reason) if r.reason else "—"))
    return summary


def _notes(r: AmdahlResult) -> list[str]:
    if not r.added:
        return []
    return [
        f"Added overhead {format_number(r.added)} of the original time is paid even if the parts become free."
    ]


def _verdict(r: AmdahlResult) -> str | None:
    if r.target is not None and r.reason is not None and r.reason.code == "target_above_ceiling":
        return "Target not reachable by speeding up these parts."
    return None


def build_view(result: AmdahlResult) -> View:
    rows = _rows(result)
    table = Table(
        "Time by part", _columns(result.target is not None), rows, highlight={len(rows) - 1: "best"}
    )
    verdict = _verdict(result)
    return View(
        title="Amdahl's law",
        summary=_summary(result),
        tables=[table],
        notes=_notes(result),
        warnings=list(result.warnings),
        verdict=verdict,
        verdict_ok=verdict is None,
    )
