"""View of a shape-bucket padding result."""

from __future__ import annotations

from infer_opt.cost_models.bucketing import BucketsResult
from infer_opt.reports.view import Column, Table, View
from infer_opt.units import format_duration, format_number, format_percent, format_ratio


def _tokens(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{round(value):,}" if abs(value) >= 1000 else format_number(value, 4)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _bounds(bounds: tuple[int, ...]) -> str:
    if len(bounds) <= 12:
        return ",".join(str(b) for b in bounds)
    return ",".join(str(b) for b in bounds[:5]) + ",…," + ",".join(str(b) for b in bounds[-3:])


def build_view(result: BucketsResult) -> View:
    r = result
    summary = [
        (
            "Sample",
            f"{format_number(r.sample_size)} lengths ({format_number(r.distinct_lengths)} distinct) "
            f"from {r.source}",
        ),
        ("Bounds", f"{_bounds(r.bounds)} ({_plural(len(r.bounds), 'bucket')})"),
        ("E[T], E[T²]", f"{_tokens(r.mean_length)} tokens, {_tokens(r.mean_square_length)} tokens²"),
        (
            "Padding E[b(T) − T]",
            f"{_tokens(r.expected_padding)} tokens per request = "
            f"{format_percent(r.relative_padding)} of E[T]",
        ),
        (
            "Quadratic E[b(T)² − T²]",
            f"{_tokens(r.expected_quadratic_padding)} tokens² per request = "
            f"{format_percent(r.relative_quadratic_padding)} of E[T²]",
        ),
    ]
    notes: list[str] = []
    warnings: list[str] = []
    if r.unbucketed_count:
        summary.append(
            (
                "Unbucketed",
                f"{format_number(r.unbucketed_count)} lengths above {r.bounds[-1]} (max {r.unbucketed_max})",
            )
        )
        warnings.append(
            f"{r.unbucketed_count} of {r.sample_size} lengths exceed the largest bound {r.bounds[-1]} "
            f"(max {r.unbucketed_max}); they are left out of every expectation and count above"
        )
    if r.batch is not None:
        b = r.batch
        summary.append(
            (
                f"Batch of {b.batch_size}, padded to b(max)",
                f"{_tokens(b.expected_padded_tokens)} tokens vs {_tokens(b.expected_tokens)} unpadded: "
                f"padding {_tokens(b.expected_padding)} = {format_percent(b.relative_padding)} of n·E[T] "
                f"(bucketing alone: {_tokens(b.per_request_padding)})",
            )
        )
        summary.append(
            (
                f"Batch of {b.batch_size}, quadratic",
                f"{_tokens(b.expected_quadratic_padding)} tokens² = "
                f"{format_percent(b.relative_quadratic_padding)} of n·E[T²] "
                f"(bucketing alone: {_tokens(b.per_request_quadratic_padding)})",
            )
        )
        notes.append(
            "Batch figures: n requests drawn with replacement from the sample, every sequence padded "
            "to the bucket of the longest, P(max ≤ x) = F(x)^n."
        )

    columns = [
        Column("range", "Bucket (lengths)", align="left", csv_header="lengths"),
        Column("bound", "Bound b", format_number, csv_header="bound"),
        Column("count", "Requests", format_number, csv_header="count"),
        Column("share", "Share", format_percent, csv_header="share"),
        Column("mean", "Mean T", _tokens, csv_header="mean_length"),
        Column("pad", "Mean padding b − T", _tokens, csv_header="expected_padding"),
        Column("frac", "Padding share", format_percent, csv_header="padding_fraction", importance=1),
        Column("pad2", "Mean b² − T²", _tokens, csv_header="expected_quadratic_padding"),
    ]
    rows = [
        {
            "range": f"{s.lower}–{s.bound}",
            "bound": s.bound,
            "count": s.count,
            "share": s.share,
            "mean": s.mean_length,
            "pad": s.expected_padding,
            "frac": s.padding_fraction,
            "pad2": s.expected_quadratic_padding,
        }
        for s in r.per_bucket
    ]
    highlight = {i: "muted" for i, s in enumerate(r.per_bucket) if s.count == 0}
    tables = [
        Table(
            "Per bucket",
            columns,
            rows,
            caption="Means are per request in that bucket; padding share = Σ(b − T) / Σ b.",
            highlight=highlight,
        )
    ]
    verdict = None
    opt = r.optimization
    if opt is not None:
        unit = "tokens" if opt.cost == "linear" else "tokens²"
        waste = "b − T" if opt.cost == "linear" else "b² − T²"
        lrows = [
            {
                "name": row.name,
                "k": row.buckets_used,
                "bounds": _bounds(row.bounds),
                "waste": row.expected_waste,
                "rel": row.relative_waste,
                "vs": row.ratio_to_optimal,
            }
            for row in opt.ladders
        ]
        tables.append(
            Table(
                f"Bounds compared on {opt.cost} waste (mean {waste} per request)",
                [
                    Column("name", "Bounds", align="left", csv_header="name"),
                    Column("k", "Buckets used", format_number, csv_header="buckets_used"),
                    Column("bounds", "Values", align="left", csv_header="bounds"),
                    Column("waste", f"Waste ({unit})", _tokens, csv_header="expected_waste"),
                    Column("rel", "Relative", format_percent, csv_header="relative_waste", importance=1),
                    Column("vs", "× optimal, same K", format_ratio, csv_header="ratio_to_optimal_same_k"),
                ],
                lrows,
                caption="× optimal: this waste over the exact optimum with as many used buckets.",
                highlight={0: "best"},
            )
        )
        if opt.k_choices:
            crows = [
                {
                    "k": ch.k,
                    "waste": ch.expected_waste,
                    "waste_cost": ch.waste_cost_s,
                    "compile": ch.compile_cost_s,
                    "total": ch.total_cost_s,
                }
                for ch in opt.k_choices
            ]
            tables.append(
                Table(
                    "Choosing K (predicted cost)",
                    [
                        Column("k", "K", format_number, csv_header="k"),
                        Column("waste", f"Waste ({unit})", _tokens, csv_header="expected_waste"),
                        Column("waste_cost", "Padding cost", format_duration, csv_header="waste_cost_s"),
                        Column("compile", "Compile cost", format_duration, csv_header="compile_cost_s"),
                        Column("total", "Total", format_duration, csv_header="total_cost_s"),
                    ],
                    crows,
                    highlight={opt.k - 1: "best"},
                )
            )
            unit_cost = "token" if opt.cost == "linear" else "token²"
            summary.append(
                (
                    "Choosing K (given costs)",
                    f"compile {format_duration(opt.compile_cost_s)} per bucket, "
                    f"{format_duration(opt.token_cost_s)} per padded {unit_cost}, "
                    f"{format_number(opt.requests)} requests",
                )
            )
            notes.append(f"Objective: {opt.objective}.")
            verdict = f"Use K = {opt.k} ({_plural(opt.k, 'bucket')}): {_bounds(r.bounds)}."
        else:
            verdict = f"Optimal {opt.k} bounds for {opt.cost} waste: {_bounds(r.bounds)}."
        if r.batch is not None:
            notes.append(
                "The optimisation minimises per-request waste; batch figures are for the bounds found."
            )
    return View(
        title="Shape buckets: padding waste",
        summary=summary,
        tables=tables,
        notes=notes,
        warnings=warnings,
        verdict=verdict,
    )
