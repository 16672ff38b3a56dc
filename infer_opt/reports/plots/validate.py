"""The parity plot of a validation: predicted against measured time, log-log, with y = x and
the ±10% band; steps and operators (the sub-10 µs ones hollow)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from infer_opt.reports.plots._style import PALETTE, figure, save
from infer_opt.results.validate import SMALL_OP_S

BAND = 0.10


def plot(result: Any, path: Path) -> Path:
    fig, ax = figure(figsize=(6.6, 6.0))
    small = [o for o in result.ops if o.measured_s < SMALL_OP_S]
    large = [o for o in result.ops if o.measured_s >= SMALL_OP_S]
    values = [o.measured_s for o in result.ops] + [o.predicted_s for o in result.ops]
    values += [p.measured_s for p in result.points] + [p.predicted_s for p in result.points]
    positive = [v for v in values if v > 0]
    lo, hi = (min(positive) / 2, max(positive) * 2) if positive else (1e-6, 1.0)
    line = np.geomspace(lo, hi, 50)
    ax.fill_between(line, line * (1 - BAND), line * (1 + BAND), color="grey", alpha=0.18, label="±10%")
    ax.plot(line, line, color="black", linewidth=1.0, label="y = x")
    if small:
        ax.scatter(
            [o.measured_s for o in small],
            [o.predicted_s for o in small],
            facecolor="white",
            edgecolor=PALETTE[0],
            s=14,
            label="operators < 10 µs",
        )
    if large:
        ax.scatter(
            [o.measured_s for o in large],
            [o.predicted_s for o in large],
            color=PALETTE[0],
            s=16,
            label="operators",
        )
    for i, mode in enumerate(sorted({p.mode for p in result.points})):
        pts = [p for p in result.points if p.mode == mode]
        ax.scatter(
            [p.measured_s for p in pts],
            [p.predicted_s for p in pts],
            marker="D",
            s=48,
            color=PALETTE[1 + i % (len(PALETTE) - 1)],
            edgecolor="black",
            zorder=5,
            label=f"{mode} steps",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured time (s)")
    ax.set_ylabel("predicted time (s)")
    step = "—" if result.step_mape is None else f"{100 * result.step_mape:.1f}%"
    ops = "—" if result.op_mape is None else f"{100 * result.op_mape:.1f}%"
    ax.set_title(f"{result.model}: step MAPE {step}, operator MAPE {ops} (≥ 10 µs)")
    ax.legend(loc="upper left")
    return save(fig, path)
