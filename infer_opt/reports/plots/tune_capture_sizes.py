"""Plot of ``tune capture-sizes``: the cost curve at the observed sizes (measured, interpolated,
extrapolated), the batch-size histogram, and the proposed and current capture sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from infer_opt.reports.plots import _style
from infer_opt.results.tune_capture_sizes import TuneCaptureSizesResult


def plot(result: TuneCaptureSizesResult, path: Path) -> Path:
    fig, (ax_t, ax_p) = _style.figure(2, 1, sharex=True, figsize=(8, 6), height_ratios=[3, 2])
    b = np.array([c.batch_size for c in result.curve], dtype=float)
    t = np.array([c.time_s for c in result.curve])
    share = np.array([c.share for c in result.curve])
    factor, unit = _style.time_unit(float(t.max()))
    extra = np.array([c.extrapolated for c in result.curve])
    measured = np.array([c.measured for c in result.curve])
    ax_t.plot(b, t / factor, color=_style.PALETTE[0], lw=1.2, label="step cost t(b) (interpolated log-log)")
    if measured.any():
        ax_t.plot(
            b[measured], t[measured] / factor, "o", ms=4, color=_style.PALETTE[0], label="measured size"
        )
    if extra.any():
        ax_t.plot(b[extra], t[extra] / factor, "x", ms=5, color=_style.PALETTE[3], label="extrapolated")
    for i, c in enumerate(result.capture_sizes):
        ax_t.axvline(
            c, color=_style.PALETTE[2], lw=0.8, alpha=0.7, label="proposed capture" if i == 0 else None
        )
        ax_p.axvline(c, color=_style.PALETTE[2], lw=0.8, alpha=0.7)
    shown = [c for c in result.current.capture_sizes if c <= 2 * b.max()]
    for i, c in enumerate(shown):
        ax_p.axvline(c, color=_style.PALETTE[1], lw=0.6, ls=":", label="current capture" if i == 0 else None)
    ax_t.set_ylabel(f"step time ({unit})")
    ax_t.set_xscale("log")
    ax_t.set_yscale("log")
    _style.plain_log_ticks(ax_t.yaxis)
    ax_t.set_title(
        f"Capture sizes: {len(result.capture_sizes)} proposed, expected step "
        f"{result.expected_step_s / factor:.4g} {unit} vs "
        f"{result.current.expected_step_s / factor:.4g} {unit} current"
    )
    ax_t.legend(loc="upper left")
    width = b * 0.12
    ax_p.bar(b, share * 100, width=width, color=_style.PALETTE[4], alpha=0.8, label="share of steps")
    ax_p.set_ylabel("share of steps (%)")
    ax_p.set_xlabel("batch size (sequences per decode step)")
    _style.plain_log_ticks(ax_p.xaxis)
    ax_p.legend(loc="best")
    return _style.save(fig, path)
