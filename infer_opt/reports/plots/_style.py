"""Shared figure style and deterministic PNG output."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, LogFormatter

STYLE = {
    "figure.figsize": (7.5, 4.6),
    "figure.dpi": 110,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 12,
    "axes.labelsize": 10.5,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "savefig.bbox": "tight",
    "svg.hashsalt": "infer-opt",
}

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]

_TIME_UNITS = [(3600.0, "h"), (60.0, "min"), (1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")]


def time_unit(largest_s: float) -> tuple[float, str]:
    """The unit a time axis reads best in: ``(seconds per unit, name)`` for the largest value."""
    for factor, unit in _TIME_UNITS:
        if largest_s >= factor:
            return factor, unit
    return _TIME_UNITS[-1]


def figure(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Any, Any]:
    with plt.rc_context(STYLE):
        return plt.subplots(nrows, ncols, **kwargs)


class _PlainLogFormatter(LogFormatter):
    """matplotlib's choice of which log ticks to label, written 0.6, 2, 300 (as its own
    LogFormatterExponent changes only how a label is written)."""

    def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
        return f"{x:g}"


def plain_log_ticks(axis: Any) -> None:
    """Readable tick labels on a log axis: 1, 10, 100 rather than 10⁰, 10¹, 10²; and where the
    axis spans under a decade or so and matplotlib labels minor ticks, 0.6 and 2 rather than
    6×10⁻¹ and 2×10⁰ (the same ticks labelled, in plain numbers)."""
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(_PlainLogFormatter(labelOnlyBase=False))


def save(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Write a PNG without a timestamp in its metadata, so the same plot gives the same file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with plt.rc_context(STYLE):
        fig.savefig(target, format="png", metadata={"Software": None})
    plt.close(fig)
    return target
