"""View of ``amortize measure``: eager against compiled time per bucket, compile cost, break-even
calls and the decision."""

from __future__ import annotations

import math
from typing import Any

from infer_opt.notices import Notice
from infer_opt.reports.view import Column, Table, View
from infer_opt.results.amortize_measure import AmortizeMeasureResult
from infer_opt.units import (
    format_bytes,
    format_duration,
    format_number,
    format_with_spread,
)

AMORTIZE_NOTE = (
    "Times are measurements (medians over the repetitions); break-even calls, net gains and the "
    "decision are the model's prediction n·(t_e − t_c) − C from them."
)


class _Spread(float):
    """A median carrying its IQR: the cell reads ``1.52 ms ± 0.04 ms`` (± IQR/2), the CSV
    keeps the plain number."""

    iqr: float = 0.0


def _with_iqr(median: float | None, iqr: float | None) -> _Spread | None:
    if median is None:
        return None
    value = _Spread(median)
    value.iqr = iqr or 0.0
    return value


def _time_spread(value: Any) -> str:
    return format_with_spread(float(value), getattr(value, "iqr", 0.0) / 2)


def _signed(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return ("+" if seconds > 0 else "") + format_duration(seconds)


def _calls(value: float | None) -> str:
    if value is None:
        return "—"
    if math.isinf(value):
        return "never"
    return f"{value:,.0f}" if abs(value) >= 1000 else format_number(value, 4)


def _decision(row: Any) -> str:
    if row.error:
        return "no (failed)"
    if row.compile is None:
        return "depends on calls"
    return "yes" if row.compile else "no"


def _amortize_columns(result: AmortizeMeasureResult) -> list[Column]:
    graphs = result.cuda_graphs
    columns = [
        Column("bucket", "Bucket B×T", align="left", csv_header="bucket"),
        Column("eager_s", "Eager t_e ± IQR/2", _time_spread, csv_header="eager_s"),
        Column(
            "compiled_s",
            ("Graph replay" if graphs else "Compiled") + " t_c ± IQR/2",
            _time_spread,
            csv_header="compiled_s",
        ),
    ]
    if graphs:
        columns.append(
            Column("graph_capture_s", "Graph capture", format_duration, csv_header="graph_capture_s")
        )
    columns += [
        Column("compile_s", "Compile C", format_duration, csv_header="compile_s"),
        Column("calls", "Calls", _calls, csv_header="calls"),
        Column("break_even", "Break-even", _calls, csv_header="break_even_calls"),
        Column("net", "Net gain", _signed, csv_header="net_gain_s", importance=2),
        Column("decision", "Compile?", align="left", csv_header="compile", importance=2),
    ]
    if _has_peaks(result):
        columns += [
            Column("eager_peak", "Peak eager", format_bytes, csv_header="eager_peak_bytes"),
            Column("compiled_peak", "Peak compiled", format_bytes, csv_header="compiled_peak_bytes"),
        ]
    if any(b.error for b in result.buckets):
        columns.append(Column("note", "Note", align="left", csv_header="note"))
    return columns


def _has_peaks(result: AmortizeMeasureResult) -> bool:
    return any(b.eager_peak_bytes is not None for b in result.buckets)


def _bucket_row(b: Any) -> dict[str, Any]:
    # a compiled step no faster than eager never pays: shown as an infinite break-even
    never = b.break_even_calls is None and not b.error and b.reason is not None
    return {
        "bucket": b.bucket,
        "eager_s": _with_iqr(b.eager_s, b.eager.iqr_s),
        "compiled_s": _with_iqr(b.compiled_s, None if b.compiled is None else b.compiled.iqr_s),
        "graph_capture_s": b.graph_capture_s,
        "compile_s": b.compile_s,
        "calls": b.calls,
        "break_even": math.inf if never else b.break_even_calls,
        "net": b.net_gain_s,
        "decision": _decision(b),
        "eager_peak": b.eager_peak_bytes,
        "compiled_peak": b.compiled_peak_bytes,
        "note": b.error,
    }


def _amortize_table(result: AmortizeMeasureResult) -> Table:
    caption = (
        "C = first compiled call − t_e"
        + (" + CUDA graph capture" if result.cuda_graphs else "")
        + "; break-even = C/(t_e − t_c) calls (never: t_c ≥ t_e); net gain = n·(t_e − t_c) − C; "
        "compile iff net gain > 0."
    )
    return Table(
        "Per bucket (measured times, predicted gains)",
        _amortize_columns(result),
        [_bucket_row(b) for b in result.buckets],
        caption=caption,
        highlight={
            i: "bad" if b.error else ("best" if b.compile else "muted") for i, b in enumerate(result.buckets)
        },
    )


def _amortize_summary(result: AmortizeMeasureResult) -> list[tuple[str, str]]:
    n = len(result.buckets)
    startup = result.compiler_startup_s
    summary = [
        ("Model", result.model),
        ("Device", f"{result.device_name} ({result.device}), {result.dtype}"),
        (
            "Compiler",
            f"torch.compile(dynamic=False, backend={result.backend!r})"
            + (" + CUDA graph capture" if result.cuda_graphs else ""),
        ),
        ("Compile caches", result.compile_caches),
        (
            "Compiler start-up",
            "—"
            if startup is None
            else f"{format_duration(startup)} (once per process; not in any bucket's C)",
        ),
        ("Timing", f"{result.reps} reps after {result.warmup} warm-up calls per step"),
        ("Peak memory", "per bucket below" if _has_peaks(result) else "not reported on this device"),
        ("Measured", f"{n} bucket(s) in {format_duration(result.measured_s)} of measuring"),
    ]
    if result.pending:
        summary.append(("Not measured yet", ", ".join(result.pending) + " (resume with --resume FILE)"))
    if result.calls_source:
        summary += [
            ("Calls from", f"{result.calls_source}; {_calls(result.total_calls)} in total"),
            ("Compile", f"{result.compiled_count} of {n} bucket(s)"),
            ("Net gain, chosen set", _signed(result.total_net_gain_s)),
            ("Net gain, compile every bucket", _signed(result.compile_all_net_gain_s)),
        ]
    return summary


def _amortize_verdict(result: AmortizeMeasureResult) -> tuple[str, bool]:
    if result.total_net_gain_s is None:
        return (
            "Compile a bucket if it will run more than its break-even number of calls "
            "(give --calls or --lengths to decide).",
            True,
        )
    if result.compiled_count:
        return (
            f"Compile {result.compiled_count} of {len(result.buckets)} bucket(s): net "
            f"{_signed(result.total_net_gain_s)} "
            f"(vs {_signed(result.compile_all_net_gain_s)} compiling all).",
            True,
        )
    return "Compile no bucket: none recovers its compile cost at these call counts.", False


def _bucket_warnings(result: AmortizeMeasureResult) -> list[Notice]:
    """What the result holds, per bucket: why it was not compiled, and its timer warnings."""
    failed = [
        Notice("bucket_not_compiled", {"error": b.error}, f"bucket {b.bucket}")
        for b in result.buckets
        if b.error
    ]
    return failed + [w.about(f"bucket {b.bucket}") for b in result.buckets for w in b.warnings]


def build_view(result: AmortizeMeasureResult) -> View:
    notes = [AMORTIZE_NOTE]
    if result.failed_count:
        notes.append(f"{result.failed_count} bucket(s) failed to compile and are treated as not compiled.")
    verdict, ok = _amortize_verdict(result)
    return View(
        title=f"Compile amortization from measurements: {result.model}",
        summary=_amortize_summary(result),
        tables=[_amortize_table(result)],
        notes=notes,
        warnings=_bucket_warnings(result),
        verdict=verdict,
        verdict_ok=ok,
    )
