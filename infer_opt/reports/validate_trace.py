"""View of ``validate --against TRACE``: a calibration's predictions against a held-out GPU trace's
kernel times — per step, the error statistics (ops of at least 10 µs, the shorter ones), per
family and the worst ops."""

from __future__ import annotations

from pathlib import PurePath

from infer_opt.reports.profile import short_name
from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.validate import SMALL_OP_S
from infer_opt.results.validate_trace import TIER_UNSEEN, TraceValidateResult
from infer_opt.units import format_duration, format_percent

#: shapes are cut to this many characters in the worst-ops table
SHAPES_WIDTH = 34


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.1f}%"


def _pct(value: float | None) -> str:
    return format_percent(value, 1)


def _shapes(text: str) -> str:
    return text if len(text) <= SHAPES_WIDTH else text[: SHAPES_WIDTH - 1] + "…"


def step_table(r: TraceValidateResult) -> Table:
    columns = [
        Column("mode", "Kind", align="left", csv_header="step_kind"),
        Column("step", "#", csv_header="step"),
        Column("kernels", "GPU events", csv_header="kernels"),
        Column("measured_s", "Measured", format_duration, csv_header="measured_s"),
        Column("predicted_s", "Predicted", format_duration, csv_header="predicted_s"),
        Column("rel_error", "Error", _signed, csv_header="rel_error"),
        Column("modelled_share", "Modelled", _pct, csv_header="modelled_share"),
    ]
    return Table(
        "GPU kernel time per step",
        columns,
        rows_of(r.points, columns),
        caption="Measured: every kernel, memcpy and memset of the step. Predicted: each op with a "
        "formula from its shapes, the other events at the calibration's launch floor. Modelled: the "
        "measured share in ops with a formula.",
    )


def stats_table(r: TraceValidateResult) -> Table:
    small = format_duration(SMALL_OP_S)
    s = r.ops_summary
    rows = [
        {"what": "steps", "n": len(r.points), "mape": r.step_mape, "p90": None, "bias": None},
        {
            "what": f"operators ≥ {small}",
            "n": r.op_count,
            "mape": r.op_mape,
            "p90": r.op_p90_abs_rel_error,
            "bias": s.mean_signed_rel_error,
        },
        {
            "what": f"operators < {small}",
            "n": r.small_op_count,
            "mape": r.small_op_mape,
            "p90": None,
            "bias": None,
        },
    ]
    columns = [
        Column("what", "Over", align="left", csv_header="over"),
        Column("n", "n", csv_header="n"),
        Column("mape", "MAPE", _pct, csv_header="mape"),
        Column("p90", "p90 |error|", _pct, csv_header="p90_abs_rel_error"),
        Column("bias", "Mean signed", _signed, csv_header="mean_signed_rel_error"),
    ]
    return Table(
        "Error |t̂ − t| / t",
        columns,
        rows,
        caption="Operators: per call, by name, shapes and dtype (the median over their instances).",
    )


def family_table(r: TraceValidateResult) -> Table:
    columns = [
        Column("family", "Family", align="left", csv_header="family"),
        Column("n", "Ops", csv_header="n"),
        Column("mape", "MAPE", _pct, csv_header="mape"),
        Column("measured_s", "Measured", format_duration, csv_header="measured_s"),
        Column("predicted_s", "Predicted", format_duration, csv_header="predicted_s"),
    ]
    return Table(
        f"Per family (ops ≥ {format_duration(SMALL_OP_S)})",
        columns,
        rows_of(r.families, columns),
        caption="Measured and predicted: the family's time summed over its ops' calls.",
    )


def worst_table(r: TraceValidateResult) -> Table:
    columns = [
        Column("name", "Operator", short_name, align="left", csv_header="name"),
        Column("shapes", "Input shapes", _shapes, align="left", csv_header="shapes"),
        Column("measured_s", "Measured", format_duration, csv_header="measured_s"),
        Column("predicted_s", "Predicted", format_duration, csv_header="predicted_s"),
        Column("rel_error", "Error", _signed, csv_header="rel_error"),
        Column("source", "From", align="left", csv_header="source"),
    ]
    return Table(
        f"Worst ops (≥ {format_duration(SMALL_OP_S)} per call)",
        columns,
        rows_of(r.worst_ops, columns),
        caption="From: grid (between its family's shapes), nearest (outside them), fallback (a related "
        "family), roofline (the device roofline: no family).",
    )


def _summary(r: TraceValidateResult) -> list[tuple[str, str]]:
    c = r.calibration
    tier = r.tier + (
        " (a calibration of another GPU, scaled by datasheet peaks)" if r.tier == TIER_UNSEEN else ""
    )
    return [
        ("Trace", f"{PurePath(r.trace).name} ({r.device_name}, {r.dtype})"),
        ("Calibration", c.source),
        ("Tier", tier),
        ("Step", f"MAPE {_pct(r.step_mape)} over {len(r.points)} step(s)"),
        (
            "Operators",
            f"MAPE {_pct(r.op_mape)}, p90 {_pct(r.op_p90_abs_rel_error)} over {r.op_count} (≥ "
            f"{format_duration(SMALL_OP_S)}); time-weighted {_pct(r.op_weighted_error)}; shorter ones "
            f"MAPE {_pct(r.small_op_mape)} over {r.small_op_count}",
        ),
        ("Modelled", f"{_pct(r.modelled_share)} of the trace's GPU time is in ops with a formula"),
    ]


def build_view(result: TraceValidateResult) -> View:
    return View(
        title=f"Validation of the predictor against {result.model}",
        summary=_summary(result),
        tables=[step_table(result), stats_table(result), family_table(result), worst_table(result)],
        notes=[
            "Each op predicted from its recorded shapes, dtype and family alone, never from its measured "
            + (
                "time; this trace is among those the calibration was built from: the errors say how well "
                "the model fits it, not how well it predicts a held-out trace."
                if result.in_calibration
                else "time; the trace was not among those the calibration was built from (give it one that "
                "was and the errors say how well the model fits, not how well it predicts)."
            ),
            "Kernel time only: the host time around the kernels and the gaps between them are not compared.",
        ],
        warnings=list(result.warnings),
    )
