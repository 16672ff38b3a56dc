"""Plot of ``infer-opt ab``: the comparison's plot (ratio per case with its interval)."""

from __future__ import annotations

from pathlib import Path

from infer_opt.reports.plots.compare import plot as plot_compare
from infer_opt.results.ab import AbResult


def plot(result: AbResult, path: Path) -> Path:
    return plot_compare(result.comparison, path)
