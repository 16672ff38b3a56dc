"""Plot of ``tune speculative``: S(k, b) per draft length k against the batch size, with the best k."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from infer_opt.reports.plots import _style
from infer_opt.results.tune_speculative import TuneSpeculativeResult


def plot(result: TuneSpeculativeResult, path: Path) -> Path:
    fig, ax = _style.figure()
    b = np.array([r.batch_size for r in result.table], dtype=float)
    s = np.array(result.speedups)
    for k in range(1, s.shape[1]):
        ax.plot(
            b,
            s[:, k],
            marker=".",
            lw=1.2,
            color=_style.PALETTE[(k - 1) % len(_style.PALETTE)],
            label=f"k = {k}",
        )
    best = np.array([r.speedup for r in result.table])
    ax.plot(b, best, "o", mfc="none", ms=9, color="black", label="best k (k = 0: S = 1)")
    ax.axhline(1.0, color="grey", lw=1, ls="--")
    if result.stop_above_batch is not None:
        ax.axvline(
            result.stop_above_batch,
            color=_style.PALETTE[1],
            lw=1,
            ls=":",
            label=f"stops paying at {result.stop_above_batch}",
        )
    if len(b) > 1 and b.max() / b.min() > 8:
        ax.set_xscale("log")
        _style.plain_log_ticks(ax.xaxis)
    ax.set_xlabel("batch size")
    ax.set_ylabel("speedup S(k, b) (model)")
    ax.set_title(f"Speculation per batch size: expected gain {result.expected_gain:.3g}×")
    ax.legend(ncol=2)
    return _style.save(fig, path)
