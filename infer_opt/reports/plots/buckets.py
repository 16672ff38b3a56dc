"""Shape-bucket plot: the length histogram with the bounds, and the padded area between
the sorted lengths and their buckets."""

from __future__ import annotations

import itertools
from pathlib import Path

from infer_opt.cost_models.bucketing import BucketPlotData, LengthSample, plot_data
from infer_opt.reports.plots._style import PALETTE, figure, save
from infer_opt.results.buckets import BucketsResult
from infer_opt.units import format_number, format_percent


def plot_sample(result: BucketsResult, sample: LengthSample, path: Path) -> Path:
    """The histogram of the sample with the bounds, and the padding between sorted lengths and
    their buckets (needs the sample, which a saved result does not hold)."""
    return draw_sample(result, plot_data(sample, result.bounds), path)


def draw_sample(result: BucketsResult, data: BucketPlotData, path: Path) -> Path:
    fig, (top, bottom) = figure(2, 1, figsize=(8, 7.2), gridspec_kw={"height_ratios": [1, 1.15]})
    edges = data.bin_edges
    widths = [b - a for a, b in itertools.pairwise(edges)]
    top.bar(
        edges[:-1], data.bin_counts, width=widths, align="edge", color=PALETTE[0], alpha=0.8, label="lengths"
    )
    if any(data.unbucketed_bin_counts):
        top.bar(
            edges[:-1],
            data.unbucketed_bin_counts,
            width=widths,
            align="edge",
            color="#b0b0b0",
            label=f"above the largest bound ({format_number(result.unbucketed_count)}, excluded)",
        )
    shown = ", ".join(str(b) for b in data.bounds[:8]) + (", …" if len(data.bounds) > 8 else "")
    for i, bound in enumerate(data.bounds):
        top.axvline(
            bound, color=PALETTE[1], ls="--", lw=1, label=f"bucket bounds ({shown})" if i == 0 else None
        )
    top.set_xlim(0, edges[-1])
    top.set_xlabel("length T (tokens)")
    top.set_ylabel("requests per bin")
    top.set_title(f"Length sample ({format_number(result.sample_size)} requests) and bucket bounds")
    top.legend(loc="upper right")

    q, lengths, padded = data.quantiles, data.lengths, data.padded
    bottom.plot(q, padded, color=PALETTE[1], lw=1.5, label="padded length b(T)")
    bottom.plot(q, lengths, color=PALETTE[0], lw=1.5, label="length T")
    bottom.fill_between(
        q,
        lengths,
        padded,
        color=PALETTE[1],
        alpha=0.25,
        label=f"padding: area = E[b(T) − T] = {format_number(result.expected_padding, 4)} tokens "
        f"({format_percent(result.relative_padding)} of E[T])",
    )
    bottom.set_xlim(0, 1)
    bottom.set_ylim(bottom=0)
    which = "bucketed requests" if result.unbucketed_count else "requests"
    bottom.set_xlabel(f"fraction of {which}, sorted by length")
    bottom.set_ylabel("tokens")
    bottom.set_title("Sorted lengths and their buckets: the shaded area is the expected padding")
    bottom.legend(loc="upper left")
    fig.tight_layout()
    return save(fig, path)


def plot(result: BucketsResult, path: Path) -> Path:
    """From a saved result alone (the sample is not stored): the share of requests in each
    bucket and the share of each bucket's padded tokens that are padding."""
    buckets = result.per_bucket
    labels = [f"{b.lower}–{b.bound}" for b in buckets]
    xs = list(range(len(buckets)))
    rotate = len(buckets) > 6
    fig, (left, right) = figure(1, 2, figsize=(10, 4.2))
    bars = left.bar(xs, [100 * b.share for b in buckets], color=PALETTE[0])
    left.bar_label(bars, labels=[format_number(b.count) for b in buckets], padding=2, fontsize=8)
    left.set_ylabel("requests in the bucket (% of bucketed)")
    left.set_title(f"Requests per bucket ({format_number(result.sample_size)} in the sample)")
    padding = [b.expected_padding or 0.0 for b in buckets]
    bars = right.bar(
        xs, padding, color=PALETTE[1], label="per bucket (in brackets: share of its padded tokens)"
    )
    right.bar_label(
        bars,
        labels=[
            f"{p:.3g} ({format_percent(b.padding_fraction, 0)})"
            for p, b in zip(padding, buckets, strict=True)
        ],
        padding=2,
        fontsize=8,
    )
    right.axhline(
        result.expected_padding,
        color="black",
        ls="--",
        lw=1,
        label=f"all buckets: E[b(T) − T] = {format_number(result.expected_padding, 3)} tokens "
        f"({format_percent(result.relative_padding)} of E[T])",
    )
    right.set_ylabel("E[b − T | bucket] (padding tokens per request)")
    right.set_title("Expected padding per request")
    right.legend(loc="upper left", fontsize=8)
    for ax in (left, right):
        ax.set_xticks(xs, labels, rotation=30 if rotate else 0, ha="right" if rotate else "center")
        ax.set_xlabel("bucket: lengths lower–bound (tokens), padded to the bound")
        ax.margins(y=0.25)
        ax.grid(axis="x", visible=False)
    fig.tight_layout()
    return save(fig, path)
