"""View of a validation: per step predicted against measured, the error statistics (steps by
mode, operators of at least 10 µs, the shorter ones, the host term) and the worst operators."""

from __future__ import annotations

from operator import attrgetter

from infer_opt.reports.profile import format_shapes, short_name
from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.validate import (
    NOISE_HOST,
    NOISE_OPS,
    NOISE_SMALL_OPS,
    SMALL_OP_S,
    ErrorSummary,
    ValidateResult,
)
from infer_opt.units import format_duration, format_percent

#: a probe ratio within this of 1 is reported as the calibration's speed
SPEED_TOLERANCE = 0.05


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.1f}%"


def _pct(value: float | None) -> str:
    return format_percent(value, 1)


def point_table(r: ValidateResult) -> Table:
    passes = r.passes > 1
    columns = [
        Column("mode", "Mode", align="left", csv_header="mode"),
        Column("batch", "Batch", csv_header="batch"),
        Column("seq_len", "Seq len", csv_header="seq_len"),
        Column("context", "Context", csv_header="context"),
        Column("measured_s", "Measured", format_duration, csv_header="measured_s"),
        Column("predicted_s", "Predicted", format_duration, csv_header="predicted_s"),
        Column("rel_error", "Error", _signed, csv_header="rel_error"),
        Column("host_measured", "Host measured", format_duration, csv_header="measured_host_s"),
        Column("host_predicted", "Host predicted", format_duration, csv_header="predicted_host_s"),
        Column("on_grid", "On grid", _pct, csv_header="on_grid_share"),
    ]
    if passes:
        columns.insert(5, Column("spread", "Pass spread", _pct, csv_header="pass_spread"))
    rows = rows_of(
        r.points,
        columns,
        host_measured=attrgetter("measured_host_s"),
        host_predicted=attrgetter("predicted_host_s"),
        on_grid=attrgetter("on_grid_share"),
        spread=attrgetter("pass_spread"),
    )
    measured = (
        f"Measured: the median of the point's {r.passes} passes; pass spread = (slowest − fastest) / "
        "that median. "
        if passes
        else ""
    )
    return Table(
        "Step time: predicted vs measured",
        columns,
        rows,
        caption=f"{measured}Error = (predicted − measured) / measured. Host measured = step − Σ measured op "
        "times (profile's unattributed time). On grid: share of the predicted op time on shapes the "
        "calibration measured (validation shapes should lie between them).",
    )


def _stats_row(what: str, s: ErrorSummary, noise: ErrorSummary | None) -> dict[str, object]:
    return {
        "what": what,
        "n": s.n,
        "mape": s.mape,
        "p90": s.p90_abs_rel_error,
        "max": s.max_abs_rel_error,
        "bias": s.mean_signed_rel_error,
        "noise": noise.mape if noise else None,
    }


def _noise(r: ValidateResult, key: str) -> float | None:
    s = r.noise.get(key)
    return s.mape if s else None


def stats_table(r: ValidateResult) -> Table:
    rows = [_stats_row(f"step: {mode}", s, r.noise.get(mode)) for mode, s in r.step_by_mode.items()]
    small = format_duration(SMALL_OP_S)
    rows.append(
        {
            "what": f"operators ≥ {small}",
            "n": r.op_count,
            "mape": r.op_mape,
            "p90": r.op_p90_abs_rel_error,
            "max": None,
            "bias": None,
            "noise": _noise(r, NOISE_OPS),
        }
    )
    rows.append(
        {
            "what": f"operators < {small}",
            "n": r.small_op_count,
            "mape": r.small_op_mape,
            "p90": None,
            "max": None,
            "bias": None,
            "noise": _noise(r, NOISE_SMALL_OPS),
        }
    )
    rows.append(_stats_row("host term", r.host, r.noise.get(NOISE_HOST)))
    columns = [
        Column("what", "Over", align="left", csv_header="over"),
        Column("n", "n", csv_header="n"),
        Column("mape", "MAPE", _pct, csv_header="mape"),
        Column("p90", "p90 |error|", _pct, csv_header="p90_abs_rel_error"),
        Column("max", "max |error|", _pct, csv_header="max_abs_rel_error"),
        Column("bias", "Mean signed", _signed, csv_header="mean_signed_rel_error"),
    ]
    noise = ""
    if r.noise:
        columns.append(Column("noise", "Between passes", _pct, csv_header="between_passes_mape"))
        noise = (
            " Between passes: the MAPE of the passes' measurements against each other (every pair, the "
            "later against the earlier) — a prediction error below it cannot be told from the machine's "
            "noise."
        )
    return Table(
        "Error (absolute relative errors |t̂ − t| / t)",
        columns,
        rows,
        caption="MAPE = mean |t̂ − t| / t. Signed errors can cancel; the mean signed error is shown only as "
        f"the bias. Operators: per call, matched by name and shapes.{noise}",
    )


def worst_table(r: ValidateResult) -> Table:
    columns = [
        Column("name", "Operator", short_name, align="left", csv_header="name"),
        Column("shapes", "Input shapes", align="left"),
        Column("mode", "Mode", align="left", csv_header="mode"),
        Column("family", "Family", align="left", csv_header="family"),
        Column("measured_s", "Measured", format_duration, csv_header="measured_s"),
        Column("predicted_s", "Predicted", format_duration, csv_header="predicted_s"),
        Column("rel_error", "Error", _signed, csv_header="rel_error"),
        Column("extrapolated", "Extrapolated", csv_header="extrapolated"),
    ]
    rows = [
        {
            "name": o.name,
            "shapes": format_shapes(o.shapes),
            "mode": o.mode,
            "family": o.family,
            "measured_s": o.measured_s,
            "predicted_s": o.predicted_s,
            "rel_error": o.rel_error,
            "extrapolated": o.extrapolated,
        }
        for o in r.worst_ops
    ]
    return Table(f"Worst operators (≥ {format_duration(SMALL_OP_S)} per call)", columns, rows)


def _summary(r: ValidateResult) -> list[tuple[str, str]]:
    c = r.calibration
    return [
        ("Model", f"{r.model}, {r.dtype}, {r.threads} thread(s)"),
        (
            "Calibration",
            f"{c.source or c.device_key} ({c.device_name}, {c.threads} thread(s), grid {c.grid})",
        ),
        (
            "Step",
            f"MAPE {_pct(r.step_mape)}, p90 {_pct(r.step_p90_abs_rel_error)} over {len(r.points)} points",
        ),
        (
            "Operators",
            f"MAPE {_pct(r.op_mape)}, p90 {_pct(r.op_p90_abs_rel_error)} over {r.op_count} (≥ "
            f"{format_duration(SMALL_OP_S)}); shorter ones MAPE {_pct(r.small_op_mape)} over "
            f"{r.small_op_count}",
        ),
        (
            "Measured with",
            f"profile's timing: {r.warmup} warm-up calls (on a CPU 0.1 s at least, unless 0), "
            f"{r.reps} repetitions per point"
            + (
                f", the grid {r.passes} times (each point at the median of its passes)"
                if r.passes > 1
                else ""
            ),
        ),
        ("Noise floor", _noise_floor(r)),
        ("Machine speed", _speed(r.probe_slowdown, r.dispatch_probe_slowdown)),
    ]


def _noise_floor(r: ValidateResult) -> str:
    """How far the passes' measurements moved against each other, beside the step errors."""
    if not r.noise:
        return "not measured: one pass over the grid (--passes 2 measures the same steps again)"
    steps = [
        f"{_pct(s.mape)} ({mode})"
        for mode, s in r.noise.items()
        if mode not in (NOISE_OPS, NOISE_SMALL_OPS, NOISE_HOST)
    ]
    within = [
        mode
        for mode, s in r.step_by_mode.items()
        if (n := r.noise.get(mode)) and n.mape is not None and s.mape is not None and s.mape <= n.mape
    ]
    verdict = (
        f"; the {' and '.join(within)} step error{'s are' if len(within) > 1 else ' is'} within it: "
        "this machine cannot judge the model any closer"
        if within
        else ""
    )
    return (
        f"between passes the same steps moved {', '.join(steps)}, the operators ≥ "
        f"{format_duration(SMALL_OP_S)} {_pct(_noise(r, NOISE_OPS))} (MAPE of the later pass against "
        f"the earlier){verdict}"
    )


def _speed(matmul: float | None, dispatch: float | None) -> str:
    if matmul is None and dispatch is None:
        return "not compared (a calibration of another device, or made without the speed probe)"
    if dispatch is None:
        words = f"the speed probe (a fixed matmul) took {matmul:.2f}× its time at calibration"
    elif matmul is None:
        words = f"the dispatch probe (a small matmul) took {dispatch:.2f}× its time at calibration"
    else:
        words = (
            f"the speed probes took {matmul:.2f}× (a square matmul) and {dispatch:.2f}× (a small, "
            "dispatch-bound one) their times at calibration"
        )
    ratios = [r for r in (matmul, dispatch) if r is not None]
    if all(abs(r - 1.0) < SPEED_TOLERANCE for r in ratios):
        return words
    if all(r > 1.0 - SPEED_TOLERANCE for r in ratios) or all(r < 1.0 + SPEED_TOLERANCE for r in ratios):
        moved = "slower" if max(ratios, key=lambda r: abs(r - 1.0)) > 1.0 else "faster"
        return f"{words}: the machine ran {moved} than when calibrated, and the step errors include that"
    return f"{words}: the machine's speed moved since it was calibrated, and the step errors include that"


def build_view(result: ValidateResult) -> View:
    return View(
        title=f"Validation of the predictor on {result.model}",
        summary=_summary(result),
        tables=[point_table(result), stats_table(result), worst_table(result)],
        notes=[
            "Measured exactly as infer-opt profile measures; predicted from the calibration with the ops "
            "recorded on fake tensors, not from the measured run.",
        ],
        warnings=list(result.warnings),
    )
