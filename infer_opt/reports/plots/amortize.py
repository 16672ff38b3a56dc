"""Compile amortization plots: cumulative time against calls (one shape), and the net gain
per bucket."""

from __future__ import annotations

from pathlib import Path

from infer_opt.cost_models.amortization import TimeCurve, time_curve
from infer_opt.reports.plots._style import PALETTE, figure, save, time_unit
from infer_opt.results.amortize import AmortizeBucketsResult, AmortizeResult
from infer_opt.units import format_duration, format_number


def plot_one(result: AmortizeResult, path: Path) -> Path:
    """Cumulative eager and compiled time against calls for one shape."""
    return plot_one_shape(result, time_curve(result), path)


def plot_one_shape(result: AmortizeResult, curve: TimeCurve, path: Path) -> Path:
    """Eager ``n·t_e`` and compiled ``C + n·t_c`` totals, the break-even and the given n."""
    fig, ax = figure()
    factor, unit = time_unit(max(max(curve.eager_s), max(curve.compiled_s)))
    eager = [t / factor for t in curve.eager_s]
    compiled = [t / factor for t in curve.compiled_s]
    ax.plot(
        curve.calls,
        eager,
        color=PALETTE[0],
        lw=2,
        label=f"eager: n·t_e (t_e = {format_duration(result.eager_s)})",
    )
    ax.plot(
        curve.calls,
        compiled,
        color=PALETTE[1],
        lw=2,
        label=f"compiled: C + n·t_c (C = {format_duration(result.compile_cost_s)}, "
        f"t_c = {format_duration(result.compiled_s)})",
    )
    ax.fill_between(
        curve.calls,
        eager,
        compiled,
        where=[e > c for e, c in zip(eager, compiled, strict=True)],
        color=PALETTE[2],
        alpha=0.15,
        label="net gain from compiling",
    )
    for point in result.checkpoints:
        if point.label == "break-even":
            ax.axvline(point.calls, color="grey", ls="--", lw=1)
            ax.plot([point.calls], [point.eager_total_s / factor], "o", color="black", zorder=5)
            ax.annotate(
                f"break-even n* = {format_number(point.calls, 6)}",
                (point.calls, point.eager_total_s / factor),
                textcoords="offset points",
                xytext=(8, -14),
            )
        elif point.label == "given --calls":
            ax.plot(
                [point.calls, point.calls],
                [point.eager_total_s / factor, point.compiled_total_s / factor],
                color="black",
                lw=1.5,
                marker="_",
                markersize=10,
                label=f"n = {format_number(point.calls, 6)}: net {format_duration(point.net_gain_s)}",
            )
    ax.set_xlim(0, curve.calls[-1])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("calls n")
    ax.set_ylabel(f"cumulative time ({unit})")
    ax.set_title("Compile amortization: gain iff C + n·t_c < n·t_e (predicted)")
    ax.legend(loc="upper left")
    return save(fig, path)


def plot_buckets(result: AmortizeBucketsResult, path: Path) -> Path:
    """Net gain ``n_i·Δt_i − C_i`` per bucket; the buckets worth compiling highlighted."""
    fig, ax = figure()
    gains = [b.net_gain_s for b in result.buckets]
    factor, unit = time_unit(max(abs(g) for g in gains) or 1.0)
    labels = [b.bucket for b in result.buckets]
    colors = [PALETTE[2] if b.compile else "#b0b0b0" for b in result.buckets]
    bars = ax.bar(range(len(gains)), [g / factor for g in gains], color=colors)
    ax.bar_label(bars, labels=[format_duration(g) for g in gains], padding=2, fontsize=8)
    ax.axhline(0, color="black", lw=0.8)
    ax.margins(y=0.12)
    ax.set_xticks(range(len(gains)))
    ax.set_xticklabels(
        labels, rotation=30 if len(labels) > 6 else 0, ha="right" if len(labels) > 6 else "center"
    )
    ax.set_xlabel("bucket")
    ax.set_ylabel(f"net gain n_i·Δt_i − C_i ({unit})")
    ax.set_title(
        f"Net gain per bucket (predicted): compile {result.compiled_count} of {len(gains)}, "
        f"total {format_duration(result.total_net_gain_s)}"
    )
    handles = [bars.patches[i] for i in range(len(gains))]
    compiled = next((h for h, b in zip(handles, result.buckets, strict=True) if b.compile), None)
    skipped = next((h for h, b in zip(handles, result.buckets, strict=True) if not b.compile), None)
    legend = [
        (h, text)
        for h, text in ((compiled, "compile (net > 0)"), (skipped, "don't compile"))
        if h is not None
    ]
    ax.legend([h for h, _ in legend], [t for _, t in legend], loc="best")
    ax.grid(axis="x", visible=False)
    return save(fig, path)
