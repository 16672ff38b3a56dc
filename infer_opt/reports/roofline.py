"""View of a roofline fit: the fitted ceilings with intervals, the measured envelope,
datasheet figures (labelled as such) and every kernel against the model."""

from __future__ import annotations

from collections.abc import Callable

from infer_opt.cost_models.roofline import precision_label
from infer_opt.reports.view import Column, Table, View
from infer_opt.results.roofline import RooflineFit
from infer_opt.units import (
    format_bandwidth,
    format_bytes,
    format_duration,
    format_flop_rate,
    format_flops,
    format_percent,
    format_ratio,
)


def _with_interval(value: float, interval: tuple[float, float] | None, fmt: Callable[..., str]) -> str:
    text = fmt(value)
    if interval is not None:
        text += f" (95% CI {fmt(interval[0])} – {fmt(interval[1])})"
    return text


def _intensity(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _summary(fit: RooflineFit) -> list[tuple[str, str]]:
    summary = [
        (
            "Compute rate R (fitted)",
            _with_interval(fit.compute_rate_flops, fit.compute_rate_interval, format_flop_rate),
        ),
        (
            "Bandwidth b (fitted)",
            _with_interval(fit.bandwidth_bytes_per_s, fit.bandwidth_interval, format_bandwidth),
        ),
        (
            "Launch floor t0 (fitted)",
            _with_interval(fit.launch_overhead_s, fit.launch_overhead_interval, format_duration),
        ),
        ("Ridge point R/b", f"{_intensity(fit.ridge_point)} FLOP/byte"),
        (
            "Best achieved (measured)",
            f"{format_flop_rate(fit.envelope_flops)}, {format_bandwidth(fit.envelope_bytes_per_s)}",
        ),
        (
            "Fit error |t̂−t|/t",
            f"median {format_percent(fit.median_abs_rel_error)}, max {format_percent(fit.max_abs_rel_error)} "
            f"over the {fit.n_fitted} fitted kernels"
            + (
                f"; median {format_percent(fit.median_abs_rel_error_all)} over all"
                if fit.fit_families
                else ""
            ),
        ),
    ]
    if fit.datasheet_flops is not None:
        summary.append(
            (
                "Peak FLOP/s, datasheet (not measured)",
                f"{format_flop_rate(fit.datasheet_flops)}; fitted R is "
                f"{format_percent(fit.compute_of_datasheet)} of it",
            )
        )
    if fit.datasheet_bytes_per_s is not None:
        summary.append(
            (
                "Bandwidth, datasheet (not measured)",
                f"{format_bandwidth(fit.datasheet_bytes_per_s)}; fitted b is "
                f"{format_percent(fit.bandwidth_of_datasheet)} of it",
            )
        )
    dtype = precision_label(fit.dtype, fit.matmul_precision)
    threads = f"{fit.threads} threads" if fit.threads else ""
    where = ", ".join(x for x in (fit.device_name or fit.device, threads, dtype) if x)
    fitted_on = f"fitted to {', '.join(fit.fit_families)}" if fit.fit_families else "fitted to all"
    summary.append(
        (
            "Data",
            f"{fit.n_points} kernels ({fitted_on})"
            + (f" on {where}" if where else "")
            + (f", timed as {fit.timing}" if fit.timing else "")
            + f"; {fit.source}",
        )
    )
    return summary


def build_view(fit: RooflineFit) -> View:

    columns = [
        Column("name", "Kernel", align="left"),
        Column("flops", "F", format_flops, csv_header="flops"),
        Column("bytes", "Q", format_bytes, csv_header="bytes"),
        Column("intensity", "F/Q", _intensity, csv_header="intensity_flop_per_byte"),
        Column("time_s", "Measured", format_duration, csv_header="time_s", importance=1),
        Column("predicted_s", "Predicted", format_duration, csv_header="predicted_s"),
        Column("ratio", "Meas/pred", lambda v: format_ratio(v, 3), csv_header="measured_over_predicted"),
        Column("bound", "Bound", align="left", importance=2),
        Column("efficiency", "Effic.", format_percent, csv_header="efficiency", importance=2),
        Column("fitted", "In fit", lambda v: "yes" if v else "no", csv_header="fitted"),
    ]
    rows = [
        {
            "name": k.name,
            "flops": k.flops,
            "bytes": k.bytes,
            "intensity": k.intensity,
            "time_s": k.time_s,
            "predicted_s": k.predicted_s,
            "ratio": k.ratio,
            "bound": k.bound,
            "efficiency": k.efficiency,
            "fitted": k.fitted,
        }
        for k in fit.kernels
    ]
    highlight = {i: "bad" for i, k in enumerate(fit.kernels) if k.ratio > 2 or k.ratio < 0.5}
    table = Table(
        "Kernels against the fitted roofline (prediction = t0 + max(F/R, Q/b))",
        columns,
        rows,
        caption=(
            "F/Q in FLOP/byte; bound: the largest term of the prediction; efficiency = predicted / measured"
        ),
        highlight=highlight,
    )
    notes = [
        "R, b and t0 are fitted to these measurements (model values); 'best achieved' is measured.",
        "Kernels not in the fit are measured against the roofline the others define: their "
        "efficiency is their distance to it.",
        "Kernels off by more than 2× from the model are marked: a cache-resident working set, "
        "a slow fallback kernel, or a kernel moving more bytes than its minimum Q.",
    ]
    return View(
        title="Empirical roofline: t ≈ t0 + max(F/R, Q/b)",
        summary=_summary(fit),
        tables=[table],
        notes=notes,
        warnings=list(fit.warnings),
    )
