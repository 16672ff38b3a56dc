"""Plots: matplotlib with the Agg backend, one shared style (:mod:`._style`), one module
per result kind. Imported lazily: a command that plots nothing never loads matplotlib."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_plots(result: Any, path: Path, plot_fn: Callable[[Any, Path], Any] | None = None) -> list[Path]:
    """Write the plot(s) of ``result`` to ``path`` (extra figures beside it, e.g.
    ``FILE-roofline.png``) with its kind's plotter (:mod:`infer_opt.registry`) or ``plot_fn``;
    returns every file written, ``path`` first."""
    from infer_opt.errors import InvalidInput
    from infer_opt.registry import plotter

    fn = plot_fn or plotter(result.KIND)
    if fn is None:
        raise InvalidInput("--plot", str(path), f"results of kind {result.KIND!r} have no plot")
    written = fn(result, path)
    if written is None:
        return [path]
    if isinstance(written, (str, Path)):
        return [Path(written)]
    return [Path(p) for p in written]
