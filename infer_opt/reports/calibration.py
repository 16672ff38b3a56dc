"""View of an operator calibration: what was measured, per family, and the host term."""

from __future__ import annotations

import math

from infer_opt.cost_models.op_model import ORDER_TOLERANCE
from infer_opt.reports.view import Column, Table, View
from infer_opt.results.calibration import CalibrationResult
from infer_opt.units import format_bandwidth, format_bytes, format_duration, format_flop_rate, format_percent


def _rate(value: float) -> str:
    return "—" if not math.isfinite(value) else format_flop_rate(value)


def _bandwidth(value: float) -> str:
    return "—" if not math.isfinite(value) else format_bandwidth(value)


def family_table(r: CalibrationResult) -> Table:
    columns = [
        Column("family", "Family", align="left", csv_header="family"),
        Column("state", "Cache", align="left", csv_header="state"),
        Column("features", "Features", align="left", csv_header="features"),
        Column("points", "Shapes", csv_header="points"),
        Column("launch_s", "t0", format_duration, csv_header="launch_s"),
        Column("rate", "R", _rate, csv_header="rate_flop_per_s"),
        Column("bandwidth", "b", _bandwidth, csv_header="bandwidth_bytes_per_s"),
        Column("cv", "Held-out error", lambda v: format_percent(v, 1), csv_header="cv_rel_error"),
    ]
    rows = [
        {
            "family": f.family,
            "state": f.state,
            "features": ", ".join(f.feature_names) or "—",
            "points": len(f.points),
            "launch_s": f.launch_s,
            "rate": f.rate_flops,
            "bandwidth": f.bandwidth_bytes_per_s,
            "cv": f.cv_rel_error,
        }
        for f in sorted(r.families, key=lambda f: (-len(f.points), f.key))
    ]
    return Table(
        "Operator families (measured grids and their base rooflines t0 + max(F/R, Q/b))",
        columns,
        rows,
        caption="Held-out error: median |t̂ − t|/t of grid points predicted with them left out (an upper "
        "estimate of the error between grid points).",
    )


def _span(times: tuple[float, ...]) -> str:
    return f"{format_duration(min(times))}–{format_duration(max(times))}"


def _dispatch_context(r: CalibrationResult) -> list[tuple[str, str]]:
    if not r.context_reuse_bytes:
        return []
    far = f", the smallest after {format_bytes(r.far_reuse_bytes)} too" if r.far_reuse_bytes else ""
    near = (
        f" (from {format_bytes(r.context_near_bytes)}, the L1 caches, for its own code)"
        if r.context_near_bytes
        else ""
    )
    return [
        (
            "Dispatch context",
            f"small ops also timed after a {format_bytes(r.context_reuse_bytes)} read{far}; an op is "
            f"placed by the bytes touched since it last ran{near}",
        )
    ]


def _summary(r: CalibrationResult) -> list[tuple[str, str]]:
    threads = "" if r.from_traces else f", {r.threads} thread(s)"  # a GPU's traces have none
    out = [
        ("Device", f"{r.device} — {r.device_name}, {r.dtype}{threads}"),
        ("Key", r.device_key),
        ("Grid", f"{r.grid}: {r.shape_count} shapes in {len(r.families)} families"),
    ]
    if r.source:  # built from traces: its traces, no groups, one cache state (what the ops saw)
        out.append(
            (
                "Source",
                f"{r.source}: {', '.join(r.traces)}; launch floor {format_duration(r.launch_floor_s)}, "
                f"median gap between kernels {format_duration(r.kernel_gap_s)}",
            )
        )
    else:
        out.append(("Groups", ", ".join(r.groups_done) + ("" if r.complete else " (incomplete)")))
        out.append(
            (
                "Cache states",
                f"hot (just touched), warm ({format_bytes(r.warm_reuse_bytes)} read since), cold "
                f"({format_bytes(r.cold_reuse_bytes)} read since); an op is placed by its reuse distance",
            )
        )
    out += [
        *_dispatch_context(r),
        ("Op timer", r.op_timer),
        ("Took", format_duration(r.wall_s)),
        *_repeatability(r),
    ]
    if r.probe_median_s is not None:
        out.append(
            (
                "Speed probe",
                f"a square matmul took {format_duration(r.probe_median_s)} (median of "
                f"{len(r.usable_probe_s)}, one before each group: {_span(r.usable_probe_s)})"
                + (
                    f", a small dispatch-bound one {format_duration(r.dispatch_probe_median_s)} "
                    f"({_span(r.usable_dispatch_probe_s)})"
                    if r.dispatch_probe_median_s is not None
                    else ""
                )
                + "; validate times them again and compares",
            )
        )
    if r.roofline is not None:
        roof = r.roofline
        out.append(
            (
                "Device roofline",
                f"R = {format_flop_rate(roof.compute_rate_flops)}, "
                f"b = {format_bandwidth(roof.bandwidth_bytes_per_s)}, "
                f"t0 = {format_duration(roof.launch_overhead_s)} "
                + (
                    "(90th-percentile rates of the traces' points ≥ 10 µs, the launch floor)"
                    if r.from_traces
                    else "(matmul and elementwise grids)"
                ),
            )
        )
    if r.host is not None:
        h = r.host
        out.append(
            (
                "Host term",
                f"{format_duration(h.per_op_s)} per dispatched op, "
                f"{format_duration(h.per_module_call_s)} per module call "
                f"({h.chain_ops} ops, {h.chain_module_calls} module calls timed)",
            )
        )
    return out


def _repeatability(r: CalibrationResult) -> list[tuple[str, str]]:
    """How well the shapes repeat, and how often a colder cache state came out faster."""
    parts = []
    if r.point_spread is not None:
        spread = format_percent(r.point_spread, 0)
        parts.append(f"a shape's repetitions spread by {spread} (median IQR/median)")
    orders = [o for o in r.state_order if o.faster]
    if r.out_of_order_share is not None:
        worst = sorted(orders, key=lambda o: (-o.faster, o.family))[:2]
        parts.append(
            f"a colder cache state more than {format_percent(ORDER_TOLERANCE, 0)} faster than a hotter one "
            f"at {format_percent(r.out_of_order_share, 0)} of {r.shapes_in_two_states:,} shapes measured "
            "in both"
            + "".join(
                f"{'; most' if i == 0 else ','} {o.family} {o.colder} vs {o.hotter} {o.faster}/{o.shapes}"
                for i, o in enumerate(worst)
            )
        )
    return [("Repeatability", "; ".join(parts))] if parts else []


def build_view(result: CalibrationResult) -> View:
    return View(
        title="Operator calibration",
        summary=_summary(result),
        tables=[family_table(result)],
        notes=["Use it with infer-opt predict / validate (--calibration FILE on another machine)."],
        warnings=list(result.warnings),
    )
