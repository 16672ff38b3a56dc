"""The rank × step heat map of a multi-rank trace: each rank's step time (``result.ranks[i].steps``),
the straggler of each step (``result.cross_rank.straggler``) marked. Draws result fields only."""

from __future__ import annotations

import numpy as np

from infer_opt.reports.plots import _style
from infer_opt.results.trace import TraceResult


def heatmap(ax, result: TraceResult) -> None:
    steps = sorted({s.step for r in result.ranks for s in r.steps}, key=lambda s: (s is None, s or 0))
    ranks = [r.rank for r in result.ranks]
    if not steps or not ranks:
        ax.text(0.5, 0.5, "no steps", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    grid = np.full((len(ranks), len(steps)), np.nan)
    for i, r in enumerate(result.ranks):
        for s in r.steps:
            grid[i, steps.index(s.step)] = s.span_s
    factor, unit = _style.time_unit(float(np.nanmax(grid)) if np.isfinite(grid).any() else 1.0)
    image = ax.imshow(grid / factor, aspect="auto", cmap="viridis", interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, label=f"step time ({unit}, measured)")
    marked = [
        (steps.index(s.step), ranks.index(s.rank))
        for s in (result.cross_rank.straggler if result.cross_rank else ())
        if s.step in steps and s.rank in ranks
    ]
    if marked:
        ax.scatter([m[0] for m in marked], [m[1] for m in marked], marker="x", c="red", s=40,
                   label="straggler (the others waited for it)")  # fmt: skip
        ax.legend(loc="upper right", fontsize=8)
    labels = ["all" if s is None else f"#{s}" for s in steps]
    every = max(len(steps) // 16, 1)
    ax.set_xticks(range(0, len(steps), every), labels[::every], rotation=45 if len(steps) > 8 else 0)
    every = max(len(ranks) // 24, 1)
    ax.set_yticks(range(0, len(ranks), every), [str(r) for r in ranks[::every]])
    ax.set_xlabel("step")
    ax.set_ylabel("rank")
    ax.grid(False)
    ax.set_title("Step time per rank and step")
