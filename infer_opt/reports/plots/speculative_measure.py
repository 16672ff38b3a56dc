"""Plot of ``speculative measure``: the measured costs against k with their fit, and the
predicted speedup per α."""

from __future__ import annotations

from pathlib import Path

from infer_opt.cost_models.speculative_cost_fit import PlotData, plot_data
from infer_opt.reports.plots._style import PALETTE, figure, save, time_unit
from infer_opt.reports.speculative_measure import fit_formula
from infer_opt.results.speculative_measure import SpecMeasureResult
from infer_opt.units import format_duration


def plot(result: SpecMeasureResult, path: Path) -> Path:
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
