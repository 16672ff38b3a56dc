"""Compare plot: per operator (case) the ratio new/base with its confidence interval, on a
log axis around 1, the threshold band shaded and the verdict in colour."""

from __future__ import annotations

from pathlib import Path

from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullFormatter

from infer_opt.cost_models.compare_runs import BELOW_THRESHOLD, FASTER, SLOWER
from infer_opt.reports.compare import headline_text
from infer_opt.reports.plots._style import PALETTE, figure, plain_log_ticks, save
from infer_opt.results.compare import NOISE, CompareResult

#: rows shown (the largest base times first); the table lists them all
MAX_ROWS = 30
_RATIO_TICKS = (0.1, 0.2, 0.25, 0.333, 0.5, 0.667, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 4, 5, 10)
_COLORS = {FASTER: PALETTE[2], SLOWER: PALETTE[1], NOISE: "#8c8c8c", BELOW_THRESHOLD: "#8c8c8c"}


def _label(result: CompareResult, label: str, shapes: tuple[tuple[int, ...], ...], detail: str) -> str:
    if result.compared == "profile":
        from infer_opt.reports.profile import format_shapes, short_name

        text = f"{short_name(label)} {format_shapes(shapes)}" if shapes else short_name(label)
    else:
        text = f"{label} {detail}".strip()
    return text if len(text) <= 42 else text[:41] + "…"


def plot(result: CompareResult, path: Path) -> Path:
    """One row per matched operator/case: ratio of medians with its CI."""
    matched = [r for r in result.rows if r.ratio is not None and r.base is not None]
    matched.sort(key=lambda r: -r.base.median_s)  # type: ignore[union-attr]
    shown = matched[:MAX_ROWS]
    height = 1.6 + 0.28 * max(len(shown), 3)
    fig, ax = figure(figsize=(8.6, height))
    ys = list(range(len(shown)))[::-1]
    t = result.threshold
    ax.axvspan(1 / (1 + t), 1 + t, color="#e8e8e8", zorder=0)
    ax.axvline(1.0, color="black", lw=0.9, zorder=1)
    for y, row in zip(ys, shown, strict=True):
        color = _COLORS.get(row.verdict, "#8c8c8c")
        low, high = row.ratio_low or row.ratio, row.ratio_high or row.ratio
        ax.plot([low, high], [y, y], color=color, lw=2, solid_capstyle="butt", zorder=2)
        ax.plot([row.ratio], [y], "o", color=color, ms=5, zorder=3)
    ax.set_yticks(ys, [_label(result, r.label, r.shapes, r.detail) for r in shown], fontsize=8)
    ax.set_xscale("log")
    values = [v for r in shown for v in (r.ratio_low, r.ratio_high, r.ratio) if v]
    lo, hi = min([*values, 1 / (1 + t)]), max([*values, 1 + t])
    ax.set_xlim(lo / 1.08, hi * 1.08)
    plain_log_ticks(ax.xaxis)
    ticks = [v for v in _RATIO_TICKS if lo / 1.08 <= v <= hi * 1.08]
    if len(ticks) >= 3:  # a narrow log axis has at most one decade tick: name the usual ratios
        ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(-0.7, len(shown) - 0.3)
    ax.grid(axis="y", visible=False)
    what = "operators" if result.compared == "profile" else "cases"
    ax.set_xlabel(
        f"time ratio new/base (median; log scale) — left of 1: new is faster; "
        f"bars: {100 * result.confidence:g}% bootstrap CI"
    )
    extra = f" (the {MAX_ROWS} largest of {len(matched)})" if len(matched) > MAX_ROWS else ""
    ax.set_title(f"{headline_text(result)}\nper {what[:-1]}{extra}", fontsize=10)
    handles = [
        Line2D([], [], color=_COLORS[FASTER], marker="o", lw=2, label="faster (significant, ≥ threshold)"),
        Line2D([], [], color=_COLORS[SLOWER], marker="o", lw=2, label="slower (significant, ≥ threshold)"),
        Line2D([], [], color=_COLORS[NOISE], marker="o", lw=2, label="within noise or threshold"),
        Patch(facecolor="#e8e8e8", label=f"threshold ±{100 * t:g}%"),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return save(fig, path)
