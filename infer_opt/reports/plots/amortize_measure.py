"""Plot of ``amortize measure``: eager and compiled time per bucket, the gain, and the
break-even calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infer_opt.reports.plots._style import PALETTE, figure, plain_log_ticks, save, time_unit
from infer_opt.results.amortize_measure import AmortizeMeasureResult
from infer_opt.units import format_duration


def plot(result: AmortizeMeasureResult, path: Path) -> Path:
    """Left: eager vs compiled time per call per bucket (IQR bars). Right: the predicted net
    gain per bucket with call counts, else the break-even calls."""
    fig, (ax_t, ax_g) = figure(1, 2, figsize=(13, 4.8))
    _draw_times(ax_t, result)
    if result.total_net_gain_s is not None:
        _draw_gains(ax_g, result)
    else:
        _draw_break_even(ax_g, result)
    ax_g.set_xticks(range(len(result.buckets)))
    ax_g.set_xticklabels([b.bucket for b in result.buckets])
    ax_g.set_xlabel("bucket (batch x sequence length)")
    ax_g.grid(axis="x", visible=False)
    fig.suptitle(
        f"Compile amortization, {result.model} on {result.device_name} ({result.dtype}), "
        f"backend {result.backend}: times measured, gains predicted",
        fontsize=11,
    )
    return save(fig, path)


def _draw_times(ax: Any, result: AmortizeMeasureResult) -> None:
    """Eager and compiled time per call, side by side per bucket, median ± IQR/2."""
    buckets = list(result.buckets)
    xs = list(range(len(buckets)))
    times = [b.eager_s for b in buckets] + [b.compiled_s for b in buckets if b.compiled_s is not None]
    factor, unit = time_unit(max(times))
    width = 0.38
    bars = (
        ("eager t_e", PALETTE[0], -1, [(b.eager_s, b.eager.iqr_s) for b in buckets]),
        (
            "compiled t_c" + (" (CUDA graph replay)" if result.cuda_graphs else ""),
            PALETTE[3],
            1,
            [(b.compiled_s or 0.0, b.compiled.iqr_s if b.compiled else 0.0) for b in buckets],
        ),
    )
    for label, color, side, values in bars:
        ax.bar(
            [x + side * width / 2 for x in xs],
            [t / factor for t, _ in values],
            width,
            yerr=[iqr / 2 / factor for _, iqr in values],
            capsize=3,
            color=color,
            label=label,
        )
    for x, b in zip(xs, buckets, strict=True):
        if b.error:
            ax.annotate(
                "compile failed", (x + width / 2, 0), rotation=90, ha="center", va="bottom", fontsize=8
            )
    ax.set_xticks(xs)
    ax.set_xticklabels([b.bucket for b in buckets])
    ax.set_xlabel("bucket (batch x sequence length)")
    ax.set_ylabel(f"time per call ({unit})")
    ax.set_title("Measured time per call (median ± IQR/2)")
    ax.legend(loc="upper left")
    ax.grid(axis="x", visible=False)


def _draw_gains(ax: Any, result: AmortizeMeasureResult) -> None:
    """The predicted net gain per bucket at its call count; compiled buckets highlighted."""
    from matplotlib.patches import Patch

    buckets = list(result.buckets)
    gains = [b.net_gain_s or 0.0 for b in buckets]
    factor, unit = time_unit(max(abs(g) for g in gains) or 1.0)
    colors = [PALETTE[2] if b.compile else "#b0b0b0" for b in buckets]
    bars = ax.bar(range(len(buckets)), [g / factor for g in gains], color=colors)
    ax.bar_label(bars, labels=[_gain_label(b) for b in buckets], padding=2, fontsize=8)
    ax.axhline(0, color="black", lw=0.8)
    ax.margins(y=0.15)
    ax.set_ylabel(f"net gain n·(t_e − t_c) − C ({unit})")
    ax.set_title(
        f"Predicted net gain: compile {result.compiled_count} of {len(buckets)}, "
        f"total {format_duration(result.total_net_gain_s)}"
    )
    handles = [(PALETTE[2], "compile (net > 0)")] if any(b.compile for b in buckets) else []
    if not all(b.compile for b in buckets):
        handles.append(("#b0b0b0", "don't compile"))
    ax.legend([Patch(color=c) for c, _ in handles], [t for _, t in handles], loc="best")


def _draw_break_even(ax: Any, result: AmortizeMeasureResult) -> None:
    """Without call counts: the predicted break-even calls per bucket (log scale)."""
    buckets = list(result.buckets)
    shown = [b.break_even_calls if b.break_even_calls is not None else 0.0 for b in buckets]
    bars = ax.bar(range(len(buckets)), shown, color=PALETTE[4])
    ax.bar_label(bars, labels=[_break_even_label(b) for b in buckets], padding=2, fontsize=8)
    if any(v > 0 for v in shown):
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
    ax.set_ylabel("break-even calls C/(t_e − t_c)")
    ax.set_title("Predicted break-even calls (compile pays beyond)")


def _gain_label(bucket: Any) -> str:
    if bucket.error:
        return "failed"
    return format_duration(bucket.net_gain_s or 0.0)


def _break_even_label(bucket: Any) -> str:
    if bucket.error:
        return "failed"
    if bucket.break_even_calls is None:
        return "never"
    return f"{bucket.break_even_calls:,.0f}"
