"""View of a prediction: the step (with its band), the top operators and the categories with
their Amdahl ceilings — every number labelled *predicted* — and a sweep's points."""

from __future__ import annotations

from operator import attrgetter

from infer_opt.reports.profile import category_label, format_shapes, short_name, step_shape
from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.predict import PredictResult, TPPrediction
from infer_opt.units import (
    format_bytes,
    format_duration,
    format_flops,
    format_number,
    format_percent,
    format_ratio,
)

SWEEP_LABELS = {"batch": "Batch", "seq_len": "Sequence length", "context": "Context"}


def _shape_line(r: PredictResult) -> str:
    if r.mode in ("decode", "generate"):
        return step_shape(r) or ""
    if r.batch is not None and r.seq_len is not None:
        return f"batch {r.batch} × {r.seq_len} tokens"
    if r.batch is not None:  # an hf: image or video model: its config's image size
        return f"batch {r.batch} of the model's example inputs"
    return "the factory's example inputs"


def _summary(r: PredictResult) -> list[tuple[str, str]]:
    c = r.calibration
    params = (
        f"{r.n_params / 1e9:.3g} B parameters"
        if r.n_params >= 1e9
        else f"{r.n_params / 1e6:.3g} M parameters"
    )
    step = (
        f"{format_duration(r.step_time_s)} predicted (band {format_duration(r.step_low_s)}–"
        f"{format_duration(r.step_high_s)}, ±{format_percent(r.rel_uncertainty, 0)})"
    )
    out = [
        ("Model", f"{r.model} ({r.model_source}, {params})"),
        (
            "For",
            f"{c.device_name}, {c.dtype}{'' if c.from_traces else f', {c.threads} thread(s)'} — "
            f"calibration {c.source or c.device_key}",
        ),
        ("Shapes", _shape_line(r)),
        ("Step time (whole generation)" if r.mode == "generate" else "Step time", step),
    ]
    if r.bound is not None and r.host_critical_s is not None and r.device_critical_s is not None:
        serial = f"; host and device summed: {format_duration(r.serial_step_s)}" if r.serial_step_s else ""
        out.append(
            (
                "Bound",
                f"{r.bound}-bound (replayed: host {format_duration(r.host_critical_s)}, device "
                f"{format_duration(r.device_critical_s)} of the critical path{serial})",
            )
        )
    if r.ttft_s is not None:
        out.append(("Time to first token", f"{format_duration(r.ttft_s)} predicted"))
    if r.tpot_s is not None:
        out.append(("Time per output token", f"{format_duration(r.tpot_s)} predicted"))
    if r.tokens_per_s is not None:
        out.append(("Throughput", f"{format_number(r.tokens_per_s, 4)} tokens/s predicted"))
    out.append(
        (
            "Operators",
            f"{format_duration(r.op_time_s)} in {r.n_ops} aten calls; host {format_duration(r.host_s)} "
            f"({r.module_calls} module calls); {format_percent(r.extrapolated_share, 0)} of the op time "
            "extrapolated",
        )
    )
    flops = format_flops(r.flops)
    if r.flops_analytic and r.flops_vs_analytic is not None:
        flops += f" (analytic {format_flops(r.flops_analytic)}, {100 * r.flops_vs_analytic:+.1f}%)"
    out.append(("FLOPs / bytes", f"{flops}; {format_bytes(r.bytes)} moved"))
    out.append(("Recorded", f"on {r.recorded_by} in {format_duration(r.record_s)} (no data, no weights)"))
    return out


def op_table(r: PredictResult, top: int) -> Table:
    rows = [
        {
            "name": o.name,
            "shapes": format_shapes(o.shapes),
            "family": f"{o.family} ({o.state})",
            "calls": o.calls,
            "predicted_s": o.predicted_s,
            "share": o.share,
            "flops": o.flops,
            "bytes": o.bytes,
            "bound": o.bound,
            "source": o.source,
            "extrapolated": o.extrapolated,
        }
        for o in r.ops[:top]
    ]
    columns = [
        Column("name", "Operator", short_name, align="left", csv_header="name"),
        Column("shapes", "Input shapes", align="left"),
        Column("family", "Family (cache)", align="left", csv_header="family"),
        Column("calls", "Calls", csv_header="calls"),
        Column("predicted_s", "Predicted", format_duration, csv_header="predicted_s"),
        Column("share", "Share", format_percent, csv_header="share"),
        Column("flops", "FLOPs", format_flops, csv_header="flops"),
        Column("bytes", "Bytes", format_bytes, csv_header="bytes"),
        Column("bound", "Bound", align="left", csv_header="bound"),
        Column("source", "From", align="left", csv_header="source"),
    ]
    caption = (
        f"Top {len(rows)} of {len(r.ops)} operator/shape groups; predicted times summed over calls. "
        "From: grid (interpolated), nearest (outside the grid: extrapolated), fallback (a related "
        "family), roofline."
    )
    return Table("Top operators by time (predicted)", columns, rows, caption=caption)


def category_table(r: PredictResult) -> Table:
    columns = [
        Column("category", "Category", align="left"),
        Column("time_s", "Time", format_duration, csv_header="time_s"),
        Column("fraction", "Share f", format_percent, csv_header="fraction"),
        Column("calls", "Calls", csv_header="calls"),
        Column("part_speedup", "Category at bound", format_ratio, csv_header="category_speedup_at_bound"),
        Column("roofline_speedup", "End to end at bound", format_ratio, csv_header="roofline_speedup"),
        Column("ceiling_speedup", "End to end if free", format_ratio, csv_header="ceiling_speedup"),
    ]
    rows = rows_of(r.categories, columns, category=category_label)
    return Table(
        "Time by category and where optimization pays (predicted)",
        columns,
        rows,
        caption="f = predicted category time / predicted step. If free: 1/(1-f). At bound: every op at the "
        "device roofline t0 + max(F/R, Q/b) (never slower than predicted), S = 1/((1-f) + f/s).",
    )


def sweep_table(r: PredictResult) -> Table:
    label = SWEEP_LABELS.get(r.sweep or "", r.sweep or "")
    columns = [
        Column("value", label, csv_header=r.sweep or "value"),
        Column("step_time_s", "Step (predicted)", format_duration, csv_header="step_time_s"),
        Column("band", "±", format_percent, csv_header="rel_uncertainty"),
        Column("tokens_per_s", "Tokens/s", lambda v: format_number(v, 4), csv_header="tokens_per_s"),
        Column("intensity", "Matmul FLOP/B", lambda v: format_number(v, 3), csv_header="matmul_intensity"),
        Column("bound", "Bound", align="left", csv_header="bound"),
    ]
    rows = rows_of(
        r.points, columns, band=attrgetter("rel_uncertainty"), intensity=attrgetter("matmul_intensity")
    )
    caption = None
    if r.ridge_point is not None:
        where = (
            f"from {label.lower()} ≈ {format_number(r.compute_bound_from, 3)}"
            if r.compute_bound_from is not None
            else "nowhere in this sweep"
        )
        caption = (
            f"The matmuls turn compute-bound where their intensity F/Q reaches the ridge R/b = "
            f"{format_number(r.ridge_point, 3)} FLOP/B of their calibrated family: {where}."
        )
    return Table(f"Sweep over {label.lower()} (predicted)", columns, rows, caption=caption)


def tp_table(tp: TPPrediction) -> Table:
    """The collectives a tensor-parallel step issues, each priced with the comm fit."""
    columns = [
        Column("collective", "Collective", align="left", is_key=True),
        Column("bytes", "Message", format_bytes, csv_header="bytes"),
        Column("count", "Calls", csv_header="count"),
        Column("time_each_s", "Each (α + S/β)", format_duration, csv_header="time_each_s"),
        Column("total_s", "Total", format_duration, csv_header="total_s"),
    ]
    return Table(
        f"Collectives of the {tp.world_size}-rank split (predicted from the comm fit)",
        columns,
        rows_of(tp.collectives, columns),
    )


def _tp_summary(tp: TPPrediction) -> list[tuple[str, str]]:
    speedup = "" if tp.speedup is None else f"; speedup over one device {format_ratio(tp.speedup, 3)}"
    if tp.speedup is not None and tp.speedup < 1:
        speedup += " (slower)"
    return [
        (
            f"Tensor-parallel ({tp.world_size} ranks)",
            f"{format_duration(tp.step_s)} predicted = compute {format_duration(tp.compute_s)} per rank + "
            f"communication {format_duration(tp.communication_s)}{speedup}",
        )
    ]


def build_view(result: PredictResult, top: int = 15) -> View:
    tables = [op_table(result, top), category_table(result)]
    if result.points:
        tables.insert(0, sweep_table(result))
    if result.tensor_parallel is not None:
        tables.insert(0, tp_table(result.tensor_parallel))
    if result.calibration.from_traces:
        notes = [
            "Predictions, not measurements: GPU kernel times from the kernels of the calibration's traces "
            "(each family's traced shapes, interpolated in log space; outside them the nearest traced "
            "shape's efficiency), plus the traces' gap between kernels per launching call. See "
            "docs/gpu_model.md.",
            "infer-opt validate --against TRACE --calibration CAL measures the error on a held-out trace.",
        ]
    else:
        notes = [
            "Predictions, not measurements: operators from the calibration's grids (interpolated in log "
            "space over each family's measured shapes, on the family's roofline t0 + max(F/R, Q/b)), plus "
            "the host term per dispatched op and per module call. See docs/prediction.md.",
            "infer-opt validate measures the same shapes and reports how far these are off.",
        ]
    return View(
        title=f"Predicted step of {result.model} — {result.mode}",
        summary=_summary(result)
        + ([] if result.tensor_parallel is None else _tp_summary(result.tensor_parallel)),
        tables=tables,
        notes=notes,
        warnings=list(result.warnings),
    )
