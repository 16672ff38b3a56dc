"""Speculative decoding: speedup against draft length, and a heat map over (α, k)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from infer_opt.cost_models.speculative import SpeedupCurve, SpeedupGrid, speedup_curves, speedup_grid
from infer_opt.reports.plots._style import PALETTE, figure, save
from infer_opt.results.speculative import SpeedupResult


def _cost_text(result: SpeedupResult) -> str:
    c = result.costs
    verify = f"c_v = {c.verify_base_s * 1e3:g} ms" + (
        f" + {c.verify_per_k_s * 1e3:g} ms·k" if c.verify_per_k_s else ""
    )
    if c.verify_assumed:
        verify += " (assumed = c_t)"
    text = (
        f"c_t = {c.target_s * 1e3:g} ms, c_d = {c.draft_s * 1e3:g} ms, {verify}, "
        f"c_m = {c.overhead_s * 1e3:g} ms"
    )
    if result.budget is not None:
        text += f", budget L = {result.budget}"
    return text


def plot(result: SpeedupResult, path: Path) -> Path:
    """Predicted speedup against the draft length k."""
    return plot_speedup_curves(result, speedup_curves(result), path)


def plot_grid(result: SpeedupResult, path: Path) -> Path:
    """A heat map of the predicted speedup over (α, k)."""
    return plot_speedup_grid(result, speedup_grid(result), path)


def plot_speedup_curves(result: SpeedupResult, curves: list[SpeedupCurve], path: Path) -> Path:
    """Predicted speedup vs k, one line per acceptance profile; best k marked, S = 1 drawn."""
    fig, ax = figure()
    for i, curve in enumerate(curves):
        color = PALETTE[i % len(PALETTE)]
        width = 2.4 if curve.given else 1.3
        label = (
            f"{curve.label}{' (given)' if curve.given and len(curves) > 1 else ''}: best k = {curve.best_k}"
        )
        ax.plot(curve.ks, curve.speedups, "-o", color=color, lw=width, ms=3.5, label=label)
        ax.plot([curve.best_k], [curve.best_speedup], "*", color=color, ms=13, mec="black", mew=0.6, zorder=5)
    ax.plot(
        [result.k], [result.speedup], "o", mfc="none", mec="black", ms=11, mew=1.4, zorder=6,
        label=f"given k = {result.k}: {result.speedup:.3g}×",
    )  # fmt: skip
    ax.axhline(1.0, color="grey", lw=1, ls="--", label="S = 1 (plain decoding)")
    ax.set_xlabel("draft length k (tokens per round)")
    ax.set_ylabel("predicted speedup S over plain decoding")
    ax.set_title(
        "Speculative decoding: S = c_t·E[N] / (k·c_d + c_v(k) + c_m)\n" + _cost_text(result), fontsize=10
    )
    ks = curves[0].ks
    step = max(1, len(ks) // 12)
    ax.set_xticks(list(ks[::step]))
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="★ = best k for that α")
    return save(fig, path)


def plot_speedup_grid(result: SpeedupResult, grid: SpeedupGrid, path: Path) -> Path:
    """Heat map of the predicted speedup over constant α and k; S = 1 contour, best k per α."""
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.ticker import MaxNLocator

    fig, ax = figure(figsize=(7.5, 5.2))
    s = grid.speedup
    vmin, vmax = float(s.min()), float(s.max())
    norm = TwoSlopeNorm(vcenter=1.0, vmin=min(vmin, 0.999), vmax=max(vmax, 1.001))
    k_edges = [k - 0.5 for k in grid.ks] + [grid.ks[-1] + 0.5]
    step = grid.alphas[1] - grid.alphas[0]
    a_edges = [a - step / 2 for a in grid.alphas] + [grid.alphas[-1] + step / 2]
    ax.grid(False)
    mesh = ax.pcolormesh(k_edges, a_edges, s, cmap="RdBu", norm=norm, shading="flat")
    bar = fig.colorbar(mesh, ax=ax, label="predicted speedup S (blue: faster, red: slower)")
    below = [round(norm.vmin + (1.0 - norm.vmin) * f, 2) for f in (0.0, 0.5)]
    above = [t for t in MaxNLocator(5).tick_values(1.0, norm.vmax) if 1.0 < t <= norm.vmax]
    # a tick outside [vmin, vmax] (rounding can put one just below vmin) blanks the whole bar
    bar.set_ticks([t for t in (*below, 1.0, *above) if norm.vmin <= t <= norm.vmax])
    if vmin < 1 < vmax:
        contour = ax.contour(grid.ks, grid.alphas, s, levels=[1.0], colors="black", linewidths=1.2)
        ax.clabel(contour, fmt={1.0: "S = 1"}, fontsize=8)
    worth_it = np.where(grid.best_speedup > 1.0, grid.alphas, np.nan)
    ax.plot(grid.best_k, worth_it, color="gold", lw=2, label="best k for each α (where S > 1)")
    if result.alpha is not None:
        ax.plot([result.k], [result.alpha], "o", mfc="none", mec="black", ms=10, mew=1.6,
                label=f"given: k = {result.k}, α = {result.alpha:g} → {result.speedup:.3g}×")  # fmt: skip
    else:
        ax.plot([], [], " ", label="(given per-position α_i: not on this constant-α map)")
    ax.set_xlabel("draft length k")
    ax.set_ylabel("acceptance rate α (same at every position)")
    ax.set_xlim(k_edges[0], k_edges[-1])
    ax.set_ylim(0, 1)
    ax.set_title("Predicted speculative speedup over (α, k)\n" + _cost_text(result), fontsize=10)
    ax.legend(loc="lower right", framealpha=0.85, frameon=True)
    return save(fig, path)
