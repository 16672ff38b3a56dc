"""End-to-end speedup against one part's speedup, with the ceiling as an asymptote."""

from __future__ import annotations

import math
from pathlib import Path

from infer_opt.cost_models.amdahl import Curve, part_curves
from infer_opt.reports.plots._style import PALETTE, figure, plain_log_ticks, save
from infer_opt.results.amdahl import AmdahlResult


def plot(result: AmdahlResult, path: Path) -> Path:
    """End-to-end speedup against each part's speedup (the others as given)."""
    return draw(result, part_curves(result), path)


def draw(result: AmdahlResult, curves: list[Curve], path: Path) -> Path:
    fig, ax = figure()
    for i, curve in enumerate(curves):
        color = PALETTE[i % len(PALETTE)]
        label = curve.name if len(curves) > 1 else f"f = {result.parts[0].fraction:g}"
        ax.plot(curve.part_speedups, curve.end_to_end, color=color, lw=2, label=label)
        if math.isfinite(curve.asymptote):
            ax.axhline(
                curve.asymptote,
                color=color,
                ls="--",
                lw=1,
                label=f"ceiling {curve.asymptote:.3g}× ({curve.name} free)",
            )
    given = curves[0]
    marker_x = given.at_speedup if math.isfinite(given.at_speedup) else given.part_speedups[-1]
    ax.plot(
        [marker_x],
        [given.at_end_to_end],
        "o",
        color="black",
        zorder=5,
        label=f"given: {result.speedup:.4g}× end to end",
    )
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log")
    plain_log_ticks(ax.xaxis)
    ax.set_xlabel("speedup of the part, s (log scale)")
    ax.set_ylabel("end-to-end speedup S")
    ax.set_title("Amdahl's law: S = 1 / ((1 − f) + f/s + a)")
    ax.legend(loc="lower right")
    return save(fig, path)
