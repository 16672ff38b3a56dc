"""Plots of a prediction: a sweep (step time and tokens/s with the uncertainty band, where the
matmuls turn compute-bound), or, without a sweep, the predicted time per category."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infer_opt.reports.plots._style import PALETTE, figure, plain_log_ticks, save
from infer_opt.reports.predict import SWEEP_LABELS
from infer_opt.reports.profile import category_label


def plot(result: Any, path: Path) -> Path:
    """The sweep plot when the result has points, else the category bars."""
    return plot_sweep(result, path) if result.points else plot_categories(result, path)


def plot_sweep(result: Any, path: Path) -> Path:
    fig, (ax_t, ax_r) = figure(1, 2, figsize=(11.0, 4.4))
    xs = [p.value for p in result.points]
    steps = [p.step_time_s * 1e3 for p in result.points]
    low = [p.step_time_s * (1 - p.rel_uncertainty) * 1e3 for p in result.points]
    high = [p.step_time_s * (1 + p.rel_uncertainty) * 1e3 for p in result.points]
    ax_t.fill_between(xs, low, high, color=PALETTE[0], alpha=0.18, label="uncertainty band")
    ax_t.plot(xs, steps, "o-", color=PALETTE[0], label="step time (predicted)")
    ax_t.set_ylabel("step time (ms)")
    rates = [p.tokens_per_s or 0.0 for p in result.points]
    ax_r.plot(xs, rates, "s-", color=PALETTE[2], label="tokens/s (predicted)")
    ax_r.set_ylabel("tokens / s")
    label = SWEEP_LABELS.get(result.sweep or "", result.sweep or "")
    for ax in (ax_t, ax_r):
        ax.set_xlabel(label)
        if len(xs) > 1 and xs[0] > 0 and xs[-1] / xs[0] >= 8:
            ax.set_xscale("log", base=2)
            plain_log_ticks(ax.xaxis)
        if result.compute_bound_from is not None:
            ax.axvline(result.compute_bound_from, color=PALETTE[1], linestyle="--", linewidth=1.2)
            ax.annotate(
                "compute-bound →",
                (result.compute_bound_from, 0.04),
                xycoords=("data", "axes fraction"),
                color=PALETTE[1],
                fontsize=9,
                ha="left",
            )
        ax.legend(loc="upper left")
    fig.suptitle(
        f"{result.model} {result.mode}: predicted over {label.lower()} ({result.calibration.device_name})"
    )
    return save(fig, path)


def plot_categories(result: Any, path: Path) -> Path:
    fig, ax = figure(figsize=(8.0, 4.2))
    cats = list(result.categories)
    names = [category_label(c) for c in cats] + ["host (outside ops)"]
    times = [c.time_s * 1e3 for c in cats] + [result.host_s * 1e3]
    ax.barh(names[::-1], times[::-1], color=PALETTE[0])
    ax.set_xlabel("predicted time per step (ms)")
    ax.set_title(
        f"{result.model} {result.mode}: {result.step_time_s * 1e3:.3g} ms predicted "
        f"(±{100 * result.rel_uncertainty:.0f}%) on {result.calibration.device_name}"
    )
    return save(fig, path)
