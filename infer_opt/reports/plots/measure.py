"""Plots of the measured-cost results: speculative decoding (speedup vs k, break-even α per
k, c_v(k) measured vs fitted) and compile amortization per bucket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infer_opt.profilers.compile_measure import AmortizeMeasureResult
from infer_opt.profilers.spec_measure import PlotData, SpecMeasureResult, plot_data
from infer_opt.reports.measure import fit_formula
from infer_opt.reports.plots._style import PALETTE, figure, plain_log_ticks, save
from infer_opt.units import format_duration

_UNITS = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")]


def _time_unit(largest_s: float) -> tuple[float, str]:
    for factor, unit in _UNITS:
        if largest_s >= factor:
            return factor, unit
    return _UNITS[-1]


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
    factor, unit = _time_unit(largest)
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
    buckets = list(result.buckets)
    names = [b.bucket for b in buckets]
    xs = list(range(len(buckets)))
    times = [b.eager_s for b in buckets] + [b.compiled_s for b in buckets if b.compiled_s is not None]
    factor, unit = _time_unit(max(times))
    width = 0.38
    eager = [b.eager_s / factor for b in buckets]
    eager_err = [b.eager.iqr_s / 2 / factor for b in buckets]
    ax_t.bar(
        [x - width / 2 for x in xs],
        eager,
        width,
        yerr=eager_err,
        capsize=3,
        color=PALETTE[0],
        label="eager t_e",
    )
    compiled = [(b.compiled_s or 0.0) / factor for b in buckets]
    compiled_err = [(b.compiled.iqr_s / 2 / factor) if b.compiled else 0.0 for b in buckets]
    label = "compiled t_c" + (" (CUDA graph replay)" if result.cuda_graphs else "")
    ax_t.bar(
        [x + width / 2 for x in xs],
        compiled,
        width,
        yerr=compiled_err,
        capsize=3,
        color=PALETTE[3],
        label=label,
    )
    for x, b in zip(xs, buckets, strict=True):
        if b.error:
            ax_t.annotate(
                "compile failed", (x + width / 2, 0), rotation=90, ha="center", va="bottom", fontsize=8
            )
    ax_t.set_xticks(xs)
    ax_t.set_xticklabels(names)
    ax_t.set_xlabel("bucket (batch x sequence length)")
    ax_t.set_ylabel(f"time per call ({unit})")
    ax_t.set_title("Measured time per call (median ± IQR/2)")
    ax_t.legend(loc="upper left")
    ax_t.grid(axis="x", visible=False)

    if result.total_net_gain_s is not None:
        gains = [b.net_gain_s or 0.0 for b in buckets]
        g_factor, g_unit = _time_unit(max(abs(g) for g in gains) or 1.0)
        colors = [PALETTE[2] if b.compile else "#b0b0b0" for b in buckets]
        bars = ax_g.bar(xs, [g / g_factor for g in gains], color=colors)
        ax_g.bar_label(bars, labels=[_gain_label(b) for b in buckets], padding=2, fontsize=8)
        ax_g.axhline(0, color="black", lw=0.8)
        ax_g.margins(y=0.15)
        ax_g.set_ylabel(f"net gain n·(t_e − t_c) − C ({g_unit})")
        ax_g.set_title(
            f"Predicted net gain: compile {result.compiled_count} of {len(buckets)}, "
            f"total {format_duration(result.total_net_gain_s)}"
        )
        handles = [(PALETTE[2], "compile (net > 0)")] if any(b.compile for b in buckets) else []
        if not all(b.compile for b in buckets):
            handles.append(("#b0b0b0", "don't compile"))
    else:
        values = [b.break_even_calls for b in buckets]
        shown = [v if v is not None else 0.0 for v in values]
        bars = ax_g.bar(xs, shown, color=PALETTE[4])
        ax_g.bar_label(bars, labels=[_break_even_label(b) for b in buckets], padding=2, fontsize=8)
        if any(v and v > 0 for v in shown):
            ax_g.set_yscale("log")
            plain_log_ticks(ax_g.yaxis)
        ax_g.set_ylabel("break-even calls C/(t_e − t_c)")
        ax_g.set_title("Predicted break-even calls (compile pays beyond)")
        handles = []
    ax_g.set_xticks(xs)
    ax_g.set_xticklabels(names)
    ax_g.set_xlabel("bucket (batch x sequence length)")
    ax_g.grid(axis="x", visible=False)
    if handles:
        from matplotlib.patches import Patch

        ax_g.legend([Patch(color=c) for c, _ in handles], [t for _, t in handles], loc="best")
    fig.suptitle(
        f"Compile amortization, {result.model} on {result.device_name} ({result.dtype}), "
        f"backend {result.backend}: times measured, gains predicted",
        fontsize=11,
    )
    return save(fig, path)


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
