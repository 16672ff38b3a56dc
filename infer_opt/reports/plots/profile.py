"""Plots of a model profile: time by category with the Amdahl predictions (``FILE.png``), and
the roofline with the model's operators as points (``FILE-roofline.png``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from infer_opt.cost_models.profile_amdahl import RooflineLine, roofline_line
from infer_opt.reports.plots._style import PALETTE, figure, plain_log_ticks, save
from infer_opt.reports.profile import CATEGORY_LABELS, category_label, format_shapes, short_name
from infer_opt.results.profile import OpStat, ProfileResult
from infer_opt.units import format_duration, format_flop_rate, format_percent

CATEGORY_COLORS = {
    "matmul": PALETTE[0],
    "attention": PALETTE[1],
    "normalization": PALETTE[2],
    "elementwise": PALETTE[3],
    "memory": PALETTE[4],
    "other": PALETTE[5],
}
OVERHEAD_COLOR = "#9e9e9e"
#: operators labelled by name on the roofline plot
LABELLED_OPS = 6


def roofline_path(path: Path) -> Path:
    """``prof.png`` -> ``prof-roofline.png``."""
    return path.with_name(f"{path.stem}-roofline{path.suffix}")


def plot(result: ProfileResult, path: Path) -> list[Path]:
    """``FILE.png`` (time by category, Amdahl predictions) and ``FILE-roofline.png``; returns
    their paths (``path`` first). Without a roofline fit only the first is drawn."""
    if result.roofline is None:
        return [plot_categories(result, path)]
    intensities = [o.intensity for o in result.ops if o.intensity and o.flops > 0]
    line = roofline_line(
        result.roofline.compute_rate_flops, result.roofline.bandwidth_bytes_per_s, intensities
    )
    return [plot_categories(result, path), plot_roofline(result, line, roofline_path(path))]


def plot_categories(result: ProfileResult, path: Path) -> Path:
    fig, (left, right) = figure(1, 2, figsize=(11, 4.6), gridspec_kw={"width_ratios": [1.15, 1]})
    cats = sorted(result.categories, key=lambda c: c.time_s)
    labels = [category_label(c) for c in cats]
    times = [c.time_s for c in cats]
    colors = [CATEGORY_COLORS.get(c.category, PALETTE[6]) for c in cats]
    shares = [c.fraction for c in cats]
    overhead = max(0.0, result.unattributed_s)
    if overhead > 0:
        labels.insert(0, "host/launch overhead\n(not in any op)")
        times.insert(0, overhead)
        colors.insert(0, OVERHEAD_COLOR)
        shares.insert(0, result.unattributed_fraction)
    y = range(len(labels))
    left.barh(list(y), [t * 1e3 for t in times], color=colors)
    left.set_yticks(list(y), labels)
    top = max(times) * 1e3 if times else 1.0
    for i, (t, share) in enumerate(zip(times, shares, strict=True)):
        left.text(
            t * 1e3 + top * 0.01,
            i,
            f"{format_duration(t)} ({format_percent(share, 0)})",
            va="center",
            fontsize=8.5,
        )
    left.set_xlim(0, top * 1.35)
    left.set_xlabel("time per step (ms, measured)")
    left.set_title(f"Where the {format_duration(result.step.median_s)} step goes")

    _plot_speedups(right, result)
    fig.suptitle(
        f"{result.model} · {result.mode} · {result.device_name} · {result.dtype}", fontsize=10.5, y=1.01
    )
    fig.tight_layout()
    return save(fig, path)


def _plot_speedups(right: Any, result: ProfileResult) -> None:
    """Per category, the end-to-end speedup if it took no time and (with a roofline fit) if
    every op in it ran at its roofline bound."""
    has_fit = result.roofline is not None
    ranked = sorted(result.categories, key=lambda c: (c.roofline_speedup or 1.0, c.ceiling_speedup))
    names = [category_label(c) for c in ranked]
    at_bound = [float(c.roofline_speedup or 1.0) for c in ranked] if has_fit else []
    free = [c.ceiling_speedup for c in ranked]
    finite = [v for v in free + at_bound if math.isfinite(v)]
    x_max = max([*finite, 1.1]) * 1.18
    ys = list(range(len(names)))
    height = 0.38
    right.barh(
        [v + height / 2 for v in ys],
        [min(v, x_max) for v in free],
        height,
        color="#d0d0d0",
    )
    for y, free_value in zip(ys, free, strict=True):
        shown = f" {free_value:.3g}×" if math.isfinite(free_value) else " ∞"
        right.text(min(free_value, x_max), y + height / 2, shown, va="center", fontsize=8.5, color="#555555")
    handles = [Patch(facecolor="#d0d0d0", label="if the category took no time: 1/(1−f)")]
    if has_fit:
        right.barh(
            [v - height / 2 for v in ys],
            at_bound,
            height,
            color=[CATEGORY_COLORS.get(c.category, PALETTE[6]) for c in ranked],
            edgecolor="black",
            linewidth=0.6,
        )
        for y, bound_value in zip(ys, at_bound, strict=True):
            right.text(bound_value, y - height / 2, f" {bound_value:.3g}×", va="center", fontsize=8.5)
        handles.append(
            Patch(facecolor="#707070", edgecolor="black", label="if every op ran at its roofline bound")
        )
    right.set_yticks(ys, names)
    right.axvline(1.0, color="black", lw=0.8)
    right.set_xlim(0.95, x_max * 1.12)
    where = "from the roofline fit" if has_fit else "Amdahl; no roofline fit"
    right.set_xlabel(f"end-to-end speedup of the step (predicted, {where})")
    right.set_title("What optimizing each category could buy")
    right.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=2, fontsize=8.5)


def _placed(result: ProfileResult) -> list[OpStat]:
    """The operators a log-log roofline can show: some FLOPs, some bytes, some time."""
    return [o for o in result.ops if o.flops > 0 and o.bytes > 0 and o.time_s > 0]


def _draw_roof(ax: Any, line: RooflineLine, compute_rate: float) -> None:
    ax.plot(
        line.intensity, line.attainable_flops_per_s, color="black", lw=2, label="fitted roofline min(R, b·I)"
    )
    ax.axvline(line.ridge_point, color="grey", ls=":", lw=1)
    ax.annotate(  # left of the ridge, above the sloped roof: clear of the operators near it
        f"ridge {line.ridge_point:.3g} FLOP/B",
        (line.ridge_point, compute_rate),
        textcoords="offset points",
        xytext=(-6, 6),
        ha="right",
        fontsize=8,
        color="grey",
    )


def _draw_ops(ax: Any, placed: list[OpStat]) -> None:
    for op in placed:
        ax.scatter(
            [op.intensity],
            [op.achieved_flops_per_s],
            s=20 + 1500 * op.share,
            color=CATEGORY_COLORS.get(op.category, PALETTE[6]),
            alpha=0.7,
            edgecolors="white",
            linewidths=0.6,
            zorder=3,
        )


def _label_largest(ax: Any, placed: list[OpStat]) -> None:
    """Number the largest operators on the plot and list them beside it; ops at (almost) the
    same point share one label ("3,4") instead of overprinting."""
    top_ops = sorted(placed, key=lambda o: -o.time_s)[:LABELLED_OPS]
    key_lines = []
    labels: dict[tuple[int, int], tuple[tuple[float, float], list[str]]] = {}
    for number, op in enumerate(top_ops, start=1):
        at = (op.intensity, op.achieved_flops_per_s)
        cell = (round(40 * math.log10(at[0])), round(40 * math.log10(at[1])))
        labels.setdefault(cell, (at, []))[1].append(str(number))
        key_lines.append(
            f"{number}  {short_name(op.name)} {format_shapes(op.shapes)}\n"
            f"    {format_duration(op.time_s)} ({format_percent(op.share, 0)}), {op.bound}-bound, "
            f"eff. {format_percent(op.efficiency, 0)}"
        )
    for at, numbers in labels.values():
        ax.annotate(
            ",".join(numbers), at, ha="center", va="center", fontsize=7.5, fontweight="bold", zorder=4
        )
    if key_lines:
        ax.text(
            1.02,
            1.0,
            "Largest operators\n\n" + "\n".join(key_lines),
            transform=ax.transAxes,
            va="top",
            fontsize=7.5,
            family="monospace",
        )


def _legend_handles(placed: list[OpStat]) -> list[Line2D]:
    categories = list(dict.fromkeys(op.category for op in placed))
    marker = {"ls": "", "marker": "o", "markersize": 7, "alpha": 0.7}
    return [
        Line2D([], [], color="black", lw=2, label="fitted roofline min(R, b·I)"),
        *(
            Line2D(
                [], [], color=CATEGORY_COLORS.get(c, PALETTE[6]), label=CATEGORY_LABELS.get(c, c), **marker
            )
            for c in categories
        ),
    ]


def plot_roofline(result: ProfileResult, line: RooflineLine, path: Path) -> Path:
    """The fitted roofline with each operator at its intensity and achieved FLOP/s (marker
    area ∝ share of the step), the largest numbered and listed beside the plot."""
    rf = result.roofline
    fig, ax = figure(figsize=(11, 5.4))
    _draw_roof(ax, line, rf.compute_rate_flops)
    placed = _placed(result)
    _draw_ops(ax, placed)
    _label_largest(ax, placed)
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_ticks(ax.xaxis)
    ax.set_xlabel("arithmetic intensity I = F/Q (FLOP/byte, log)")
    ax.set_ylabel("achieved FLOP/s (log)")
    ax.set_title(
        f"Operators on the roofline: {result.model} {result.mode}, {result.device_name}\n"
        f"R = {format_flop_rate(rf.compute_rate_flops)}, b = {rf.bandwidth_bytes_per_s / 1e9:.3g} GB/s "
        f"(fitted); marker area ∝ share of step time",
        fontsize=10,
    )
    hidden = len(result.ops) - len(placed)
    if hidden:
        ax.text(
            0.01,
            0.01,
            f"{hidden} op groups with 0 FLOPs or 0 bytes (views, copies) not shown",
            transform=ax.transAxes,
            fontsize=8,
            color="grey",
        )
    ax.legend(handles=_legend_handles(placed), loc="lower right")
    return save(fig, path)
