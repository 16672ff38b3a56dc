"""Plots of the measured-cost results: speculative decoding (speedup vs k, break-even α per
k, c_v(k) measured vs fitted) and compile amortization per bucket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infer_opt.cost_models.speculative_measure import PlotData, plot_data
from infer_opt.kinds.amortize_measure import AmortizeMeasureResult
from infer_opt.kinds.speculative_measure import SpecMeasureResult
from infer_opt.reports.measure import fit_formula
from infer_opt.reports.plots._style import PALETTE, figure, plain_log_ticks, save, time_unit
from infer_opt.units import format_duration


def plot_speculative(result: SpecMeasureResult, path: Path) -> Path:
    """Speedup vs k for several α, the break-even α per k, and c_v(k) measured vs fitted."""
    return draw_speculative(result, plot_data(result), path)


def draw_speculative(result: SpecMeasureResult, data: PlotData, path: Path) -> Path:
    """Three panels: predicted S vs k per α; break-even α per k; c_v(k) measured and fitted."""
    fig, (ax_s, ax_b, ax_v) = figure(1, 3, figsize=(16, 4.8))
    ks = list(data.ks)
    for i, (alpha, speedups) in enumerate(data.curves):
        color = PALETTE[i % len(PALETTE)]
        best = max(range(len(speedups)), key=lambda j: (speedups[j], -j))
        ax_s.plot(
            ks, speedups, "-o", color=color, ms=3.5, lw=1.6, label=f"α = {alpha:g} (best k = {ks[best]})"
        )
        ax_s.plot([ks[best]], [speedups[best]], "*", color=color, ms=12, mec="black", mew=0.6, zorder=5)
    ax_s.axhline(1.0, color="grey", ls="--", lw=1, label="S = 1 (plain decoding)")
    ax_s.set_xlabel("draft length k")
    ax_s.set_ylabel("predicted speedup S")
    ax_s.set_title("Predicted speedup vs k (★ best k)")
    ax_s.set_xticks(ks)
    ax_s.set_ylim(bottom=0)
    ax_s.legend(loc="upper left", fontsize=8, frameon=True, framealpha=0.9)

    finite = [(k, a) for k, a in data.break_even if a is not None]
    never = [k for k, a in data.break_even if a is None]
    if finite:
        fk, fa = zip(*finite, strict=True)
        ax_b.plot(fk, fa, "-o", color=PALETTE[1], lw=2, ms=4, label="break-even α (S = 1)")
        ax_b.fill_between(fk, fa, 1.0, color=PALETTE[2], alpha=0.15, label="speculation wins (S > 1)")
        ax_b.fill_between(fk, 0.0, fa, color=PALETTE[1], alpha=0.08, label="speculation loses (S < 1)")
    if never:
        ax_b.plot(
            never, [1.0] * len(never), "x", color="black", ms=9, mew=2, label="never wins, even at α = 1"
        )
    ax_b.set_xlabel("draft length k")
    ax_b.set_ylabel("acceptance rate α")
    ax_b.set_title("Break-even α per k (below it: a slowdown)")
    ax_b.set_xticks(ks)
    ax_b.set_ylim(0, 1.02)
    ax_b.legend(loc="lower right", fontsize=8)

    largest = max(
        [t for _, t, _ in data.verify_measured] + [t for _, t in data.verify_fit] + [data.target_step_s]
    )
    factor, unit = time_unit(largest)
    mk = [k for k, _, _ in data.verify_measured]
    mt = [t / factor for _, t, _ in data.verify_measured]
    err = [iqr / 2 / factor for _, _, iqr in data.verify_measured]
    ax_v.errorbar(
        mk, mt, yerr=err, fmt="o", color=PALETTE[0], capsize=3, label="c_v(k) measured (median ± IQR/2)"
    )
    fit = result.fit
    ax_v.plot(
        [k for k, _ in data.verify_fit],
        [t / factor for _, t in data.verify_fit],
        "-",
        color=PALETTE[3],
        label=f"fit: {fit_formula(fit.base_s, fit.per_k_s)}",
    )
    ax_v.axhline(
        data.target_step_s / factor,
        color="grey",
        ls="--",
        lw=1,
        label=f"c_t = {format_duration(data.target_step_s)} (one decode step)",
    )
    ax_v.set_xlabel("draft length k (verification covers k + 1 positions)")
    ax_v.set_ylabel(f"time ({unit})")
    ax_v.set_title("Verification cost c_v(k), measured")
    ax_v.set_xticks([0, *ks])
    ax_v.set_ylim(bottom=0)
    ax_v.legend(loc="lower right", fontsize=8)
    fig.suptitle(
        f"Speculative decoding, {result.target} + {result.draft} draft on {result.device_name} "
        f"({result.dtype}), context {result.context}: c_t = {format_duration(result.target_step_s)}, "
        f"c_d = {format_duration(result.draft_step_s)}, c_m = {format_duration(result.bookkeeping_s)} "
        "(measured); S predicted",
        fontsize=11,
    )
    return save(fig, path)


def plot_amortize(result: AmortizeMeasureResult, path: Path) -> Path:
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
