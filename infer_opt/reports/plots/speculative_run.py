"""Speculative decoding run: measured speedup against the cost model's prediction, per k."""

from __future__ import annotations

from pathlib import Path

from infer_opt.reports.plots._style import PALETTE, figure, save
from infer_opt.results.speculative_run import SpecRunResult, measured_speedup_range


def plot(result: SpecRunResult, path: Path) -> Path:
    """Measured speedup per k (median, bar = the quartile range) and the predicted one, S = 1
    drawn; the relative error beside each point."""
    fig, ax = figure()
    ks = [p.k for p in result.points]
    measured = [p.measured_speedup for p in result.points]
    ranges = [measured_speedup_range(result.plain_time, p.time) for p in result.points]
    low = [m - lo for m, (lo, _) in zip(measured, ranges, strict=True)]
    high = [hi - m for m, (_, hi) in zip(measured, ranges, strict=True)]
    ax.errorbar(
        ks, measured, yerr=[low, high], fmt="o-", color=PALETTE[0], lw=2, ms=6, capsize=4,
        label="measured: plain time / speculative time (bar: quartiles)",
    )  # fmt: skip
    ax.plot(
        ks, [p.predicted_speedup for p in result.points], "s--", color=PALETTE[1], lw=1.6, ms=5,
        label="predicted: c_t·E[N] / (k·c_d + c_v(k) + c_m)",
    )  # fmt: skip
    for p in result.points:
        ax.annotate(
            f"{p.relative_error:+.0%}", (p.k, p.predicted_speedup), textcoords="offset points",
            xytext=(6, 6), fontsize=8, color=PALETTE[1],
        )  # fmt: skip
    ax.axhline(1.0, color="grey", lw=1, ls=":", label="S = 1 (plain decoding)")
    decoding = "greedy" if result.temperature is None else f"T = {result.temperature:g}"
    threads = f", {result.threads} thread(s)" if result.threads else ""
    ax.set_title(
        f"Speculative decoding, measured vs predicted: {result.target} / {result.draft}\n"
        f"{decoding}, {result.new_tokens} tokens after {result.prompt_len}; {result.device_name}"
        f"{threads}, {result.dtype}",
        fontsize=10,
    )
    ax.set_xlabel("draft length k")
    ax.set_ylabel("speedup over plain decoding")
    ax.set_xticks(ks)
    ax.set_ylim(bottom=0)
    ax.legend(loc="best", title="labels: (predicted − measured) / measured")
    return save(fig, path)
