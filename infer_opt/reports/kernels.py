"""View of a kernel-suite result: one table per family."""

from __future__ import annotations

from typing import Any

from infer_opt.clocks import CUDA_MIN_WARMUP_S
from infer_opt.cost_models.roofline import precision_label
from infer_opt.messages import text
from infer_opt.notices import Notice, has
from infer_opt.reports.view import Column, Table, View
from infer_opt.results.kernels import KernelRow, KernelSuiteResult
from infer_opt.units import (
    format_bandwidth,
    format_bytes,
    format_duration,
    format_flop_rate,
    format_flops,
    format_with_spread,
)


class _Timed(float):
    """A median that carries its spread, so one cell reads ``1.52 ms ± 0.04 ms`` while the
    CSV keeps the plain number."""

    spread: float = 0.0


class _Checked(float):
    """A relative error that carries its verdict: the cell reads ``ok 3.1e-07`` (or
    ``FAIL 0.2``), the CSV keeps the number."""

    passed: bool = True


class _Name(str):
    """A case name shown without its family prefix in the family's own table
    (``attention_sdpa`` -> ``sdpa``); the CSV keeps the full name."""

    short: str = ""


def _timed(median: float | None, spread: float) -> _Timed | None:
    if median is None:
        return None
    value = _Timed(median)
    value.spread = spread
    return value


def _checked(error: float | None, passed: bool | None) -> _Checked | None:
    if error is None:
        return None
    value = _Checked(error)
    value.passed = bool(passed)
    return value


def _name(name: str, family: str) -> _Name:
    value = _Name(name)
    value.short = name[len(family) + 1 :] if name.startswith(family + "_") else name
    return value


def _time_cell(value: Any) -> str:
    spread = getattr(value, "spread", 0.0)
    return format_with_spread(float(value), spread)


def _check_cell(value: Any) -> str:
    return f"{'ok' if getattr(value, 'passed', False) else 'FAIL'} {float(value):.1e}"


def _row(row: KernelRow) -> dict[str, Any]:
    spread = row.summary.iqr_s / 2 if row.summary is not None else 0.0
    # the spread is in the time cell and noisy cases are listed once under the tables, so
    # the note carries only what is not said elsewhere (skip reasons, other warnings)
    note = row.skipped_reason or "; ".join(text(w) for w in row.warnings if w.code != "high_variance")
    return {
        "name": _name(row.name, row.family),
        "label": row.label,
        "time_s": _timed(row.time_s, spread),
        "cold_s": row.cold_s,
        "eager_time_s": row.eager_time_s,
        "flops_per_s": row.achieved_flops_per_s if row.flops > 0 else None,
        "bytes_per_s": row.achieved_bytes_per_s,
        "flops": row.flops,
        "bytes": row.bytes,
        "error": _checked(row.error, row.passed),
        "note": note or None,
    }


def _runs(runs: int) -> str:
    if runs < 2:
        return ""
    return f"; {runs} runs (each case warmed up in each, order rotated; medians pool every run)"


_CAPTIONS = {
    "matmul": "size n: (n×n)·(n×n)",
    "elementwise": "N elements per tensor",
    "launch": "N elements: the launch/dispatch floor",
    "attention": "size B×H×T×d (batch, heads, tokens, head dim); Q counts only reading Q, K, V and writing O",
    "bias_gelu": "size rows×hidden; compiled = torch.compile of gelu(x + b), checked against eager",
}


def _columns(graphs: bool, checks: bool, notes: bool) -> list[Column]:
    columns = [
        Column("name", "Case", lambda v: getattr(v, "short", v), align="left"),
        Column("label", "Size", align="left", csv_header="size"),
        Column("time_s", "Median ± IQR/2", _time_cell, csv_header="time_s", importance=2),
    ]
    if graphs:
        columns.append(Column("eager_time_s", "Eager (launches)", format_duration, csv_header="eager_time_s"))
    columns += [
        Column("cold_s", "Cold", format_duration, csv_header="cold_s"),
        Column("flops_per_s", "FLOP/s", format_flop_rate, csv_header="flops_per_s"),
        Column("bytes_per_s", "Bytes/s", format_bandwidth, csv_header="bytes_per_s"),
        Column("flops", "F", format_flops, csv_header="flops"),
        Column("bytes", "Q", format_bytes, csv_header="bytes"),
    ]
    if checks:
        columns.append(Column("error", "Check", _check_cell, csv_header="rel_error", importance=1))
    if notes:
        columns.append(Column("note", "Note", align="left", csv_header="note"))
    return columns


def build_view(result: KernelSuiteResult) -> View:
    families: dict[str, list[KernelRow]] = {}
    for row in result.rows:
        families.setdefault(row.family, []).append(row)
    s = result.settings
    tables = []
    for family, rows in families.items():
        checks = any(r.reference is not None for r in rows)
        table_rows = [_row(r) for r in rows]
        notes_needed = any(r["note"] for r in table_rows)
        highlight = {}
        for i, r in enumerate(rows):
            if r.passed is False:
                highlight[i] = "bad"
            elif r.time_s is None:
                highlight[i] = "muted"
        tables.append(
            Table(
                family,
                _columns(s.cuda_graphs, checks, notes_needed),
                table_rows,
                caption=_CAPTIONS.get(family),
                highlight=highlight,
            )
        )

    timed = [r for r in result.rows if r.time_s is not None]
    notes = [
        "FLOP/s = F/t and bytes/s = Q/t from the median t (measured); Q is the minimum bytes the "
        "kernel must move, so a kernel moving more (explicit attention) shows less.",
        "Cold = the first call (allocation, compilation), timed apart and never part of the median. "
        "Check = relative error against the reference variant (ok within tolerance).",
    ]
    failed = [r.key for r in result.rows if r.passed is False]
    verdict = None
    if failed:
        verdict = f"Output check failed for {', '.join(failed)}: not timed."
    elif any(r.passed for r in result.rows):
        verdict = "Every optimized variant matches its reference."
    dtype = precision_label(result.dtype, result.matmul_precision)
    return View(
        title=f"Kernel suite — {result.device_name}, {dtype}",
        summary=_summary(result, timed),
        tables=tables,
        notes=notes,
        warnings=_warnings(result, timed),
        verdict=verdict,
        verdict_ok=not failed,
    )


def _summary(result: KernelSuiteResult, timed: list[KernelRow]) -> list[tuple[str, str]]:
    s = result.settings
    cuda = result.device.startswith("cuda")
    if s.warmup_time_s is not None:
        warm = f"{format_duration(s.warmup_time_s)}" + (f" and ≥ {s.warmup} calls" if s.warmup else "")
    else:
        warm = f"{s.warmup} calls" + (f" and ≥ {format_duration(CUDA_MIN_WARMUP_S)}" if cuda else "")
    reps = f"{s.reps}" if s.reps is not None else "adaptive (until IQR/median < 5%)"
    if s.max_time_s is not None:
        reps += f", at most {format_duration(s.max_time_s)} per case"
    mode = timed[0].mode if timed else "—"
    threads = result.threads
    device = result.device_name + (f" ({threads} threads)" if threads else "")
    dtype = precision_label(result.dtype, result.matmul_precision)
    summary = [
        ("Device", f"{device} [{result.device}]"),
        ("Dtype", dtype + (" (float32 matmuls run as TF32)" if dtype == "tf32" else "")),
        ("Suite", result.suite),
        ("Timing", f"{mode}; warm-up {warm}; repetitions {reps}" + _runs(result.runs)),
        ("Cache flush", "on (outside the timed region)" if s.flush_cache else "off"),
        ("Cases", f"{len(timed)} timed, {len(result.rows) - len(timed)} skipped"),
        ("Wall time", format_duration(result.wall_s)),
    ]
    if s.cuda_graphs:
        per = "one call per graph (flushed)" if s.flush_cache else "per call in graph replays"
        summary.insert(4, ("CUDA graphs", f"median is {per}; 'Eager' is the same kernel launched"))
    return summary


def _warnings(result: KernelSuiteResult, timed: list[KernelRow]) -> list[Notice]:
    warnings = []
    noisy = [r.key for r in timed if has(r.warnings, "high_variance")]
    if noisy:
        warnings.append(Notice("high_variance_cases", {"cases": noisy}))
    warnings += result.warnings
    if not result.complete and not result.warnings:
        warnings.append(Notice("sweep_interrupted", {"cases": len(result.rows)}))
    return warnings
