"""Plots of a collective sweep: time against message size with the α-β fit (log-log), and bus
bandwidth against message size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infer_opt.cost_models.comm import fit_curve
from infer_opt.reports.plots._style import PALETTE, figure, save
from infer_opt.results.comm import CommResult
from infer_opt.units import format_bytes, format_duration

_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]


def _bytes_axis(ax: Any) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(lambda v, _pos: format_bytes(v, 3))
    ax.set_xlabel("message size S (bytes)")


def _title(result: CommResult, what: str) -> str:
    where = f"{result.world_size} ranks, {result.backend} on {result.device_name or result.device}"
    return f"{what} — {where}" + ("" if result.complete else " (stopped early)")


def plot_times(result: CommResult, path: Path) -> Path:
    """Slowest-rank median time per size (its IQR as error bars) and the fitted α + S/β."""
    fig, ax = figure(figsize=(8.2, 5.2))
    for i, sweep in enumerate(result.collectives):
        color, marker = PALETTE[i % len(PALETTE)], _MARKERS[i % len(_MARKERS)]
        xs = [p.bytes for p in sweep.points]
        ys = [p.time_s for p in sweep.points]
        spread = [[p.time_s - p.q1_s for p in sweep.points], [p.q3_s - p.time_s for p in sweep.points]]
        ax.errorbar(xs, ys, yerr=spread, fmt=marker, color=color, ms=4, lw=0.8, label=sweep.collective)
        curve = fit_curve(sweep)
        if curve is not None:
            ax.plot(*curve, color=color, lw=1.2, alpha=0.8)
            if sweep.crossover_bytes and xs[0] <= sweep.crossover_bytes <= xs[-1]:
                ax.axvline(sweep.crossover_bytes, color=color, lw=0.6, ls=":")
    _bytes_axis(ax)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(lambda v, _pos: format_duration(v, 2))
    ax.set_ylabel("time t (slowest rank's median)")
    ax.set_title(_title(result, "Collective time vs message size"))
    ax.legend(title="measured; lines: fitted t = α + S/β, dotted: S* = α·β", ncols=2)
    return save(fig, path)


def plot_busbw(result: CommResult, path: Path) -> Path:
    """Bus bandwidth (nccl-tests' busbw) per size."""
    fig, ax = figure(figsize=(8.2, 5.2))
    for i, sweep in enumerate(result.collectives):
        ax.plot(
            [p.bytes for p in sweep.points],
            [p.busbw_bytes_per_s / 1e9 for p in sweep.points],
            marker=_MARKERS[i % len(_MARKERS)],
            color=PALETTE[i % len(PALETTE)],
            ms=4,
            lw=1.2,
            label=sweep.collective,
        )
    _bytes_axis(ax)
    ax.set_ylabel("bus bandwidth (GB/s, measured)")
    ax.set_title(_title(result, "Bus bandwidth vs message size"))
    ax.legend(ncols=2)
    return save(fig, path)


def plot(result: CommResult, path: Path) -> list[Path]:
    """``FILE.png`` (time vs size with the fit) and ``FILE-busbw.png``."""
    busbw_path = path.with_name(f"{path.stem}-busbw{path.suffix}")
    return [plot_times(result, path), plot_busbw(result, busbw_path)]
