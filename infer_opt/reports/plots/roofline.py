"""The roofline plot (intensity vs achieved FLOP/s, fitted ceilings, ridge point, kernels
by family) and the predicted-vs-measured time plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from infer_opt.cost_models.roofline import RooflineCurve, roofline_curve
from infer_opt.reports.plots._style import PALETTE, figure, save
from infer_opt.results.roofline import KernelFit, RooflineFit
from infer_opt.units import format_bandwidth, format_duration, format_flop_rate

_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def plot(fit: RooflineFit, path: Path) -> list[Path]:
    """The roofline at ``path`` and predicted-vs-measured beside it (``FILE-pred.png``)."""
    pred = path.with_name(f"{path.stem}-pred{path.suffix}")
    return [plot_roofline(fit, roofline_curve(fit), path), plot_predicted(fit, pred)]


def _family_styles(kernels: tuple[KernelFit, ...]) -> dict[str, tuple[str, str]]:
    families = list(dict.fromkeys(k.family or "other" for k in kernels))
    return {f: (PALETTE[i % len(PALETTE)], _MARKERS[i % len(_MARKERS)]) for i, f in enumerate(families)}


def _scatter(
    ax: Any, members: list[KernelFit], xs: list, ys: list, color: str, marker: str, family: str
) -> None:
    """Fitted kernels filled, kernels only measured against the fit hollow."""
    fitted = all(k.fitted for k in members)
    ax.scatter(
        xs,
        ys,
        facecolor=color if fitted else "white",
        edgecolor="white" if fitted else color,
        marker=marker,
        s=40,
        linewidth=0.5 if fitted else 1.4,
        label=family if fitted else f"{family} (not in fit)",
        zorder=4,
    )


def _subtitle(fit: RooflineFit) -> str:
    where = ", ".join(x for x in (fit.device_name or fit.device, fit.dtype) if x)
    return f" — {where}" if where else ""


def plot_roofline(fit: RooflineFit, curve: RooflineCurve, path: Path) -> Path:
    """Arithmetic intensity (FLOP/byte) against achieved FLOP/s, log-log."""
    fig, ax = figure(figsize=(8.2, 5.2))
    styles = _family_styles(fit.kernels)
    ax.plot(
        curve.intensity,
        curve.attainable,
        color="black",
        lw=2,
        label=(
            f"fitted: R = {format_flop_rate(fit.compute_rate_flops)}, "
            f"b = {format_bandwidth(fit.bandwidth_bytes_per_s)}"
        ),
        zorder=3,
    )
    if curve.datasheet_attainable is not None:
        ax.plot(
            curve.intensity,
            curve.datasheet_attainable,
            color="grey",
            lw=1.5,
            ls=":",
            label="datasheet (not measured)",
            zorder=2,
        )
    if math.isfinite(curve.ridge_point) and curve.ridge_point > 0:
        ax.axvline(curve.ridge_point, color="black", lw=0.8, ls="--", zorder=1)
        ax.annotate(
            f"ridge R/b = {curve.ridge_point:.3g} FLOP/B",
            xy=(curve.ridge_point, fit.compute_rate_flops),
            xytext=(6, -14),
            textcoords="offset points",
            fontsize=8.5,
        )
    for family, (color, marker) in styles.items():
        members = [k for k in curve.points if (k.family or "other") == family]
        if members:
            xs = [k.intensity for k in members]
            _scatter(ax, members, xs, [k.achieved_flops_per_s for k in members], color, marker, family)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity F/Q (FLOP per byte, log scale)")
    ax.set_ylabel("achieved FLOP/s = F / t (log scale)")
    ax.set_title("Roofline" + _subtitle(fit))
    top = max([fit.compute_rate_flops, *(k.achieved_flops_per_s for k in curve.points)])
    if curve.datasheet_attainable is not None and fit.datasheet_flops:
        top = max(top, fit.datasheet_flops)
    bottom = min([*(k.achieved_flops_per_s for k in curve.points), float(np.min(curve.attainable))])
    ax.set_ylim(bottom / 3, top * 3)
    if curve.zero_flop:
        ax.text(
            0.0,
            -0.16,
            f"Not shown: {len(curve.zero_flop)} kernels with F = 0 (copies); "
            "see the predicted-vs-measured plot.",
            transform=ax.transAxes,
            ha="left",
            va="top",
            fontsize=8,
            color="dimgray",
        )
    ax.legend(loc="lower right", fontsize=8, frameon=True, framealpha=0.9)
    return save(fig, path)


def plot_predicted(fit: RooflineFit, path: Path) -> Path:
    """Predicted (t0 + max(F/R, Q/b)) against measured time, log-log, with y = x."""
    fig, ax = figure(figsize=(6.8, 5.6))
    styles = _family_styles(fit.kernels)
    times = [k.time_s for k in fit.kernels] + [k.predicted_s for k in fit.kernels]
    lo, hi = min(times) / 2, max(times) * 2
    line = np.geomspace(lo, hi, 50)
    ax.plot(line, line, color="black", lw=1.2, label="measured = predicted")
    ax.fill_between(line, line / 2, line * 2, color="grey", alpha=0.12, lw=0, label="within 2×")
    for family, (color, marker) in styles.items():
        members = [k for k in fit.kernels if (k.family or "other") == family]
        xs = [k.predicted_s for k in members]
        _scatter(ax, members, xs, [k.time_s for k in members], color, marker, family)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel("predicted time t0 + max(F/R, Q/b) (s, log scale)")
    ax.set_ylabel("measured median time (s, log scale)")
    ax.set_title(
        "Predicted vs measured"
        + _subtitle(fit)
        + f"\nmedian |error| {100 * fit.median_abs_rel_error:.0f}% over fitted kernels, "
        f"t0 = {format_duration(fit.launch_overhead_s)}",
        fontsize=11,
    )
    ax.legend(loc="upper left", fontsize=8)
    return save(fig, path)
