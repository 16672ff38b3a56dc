"""View of a shape-bucket padding result: the sample and its padding, batch padding, the
per-bucket table, and (with ``--optimize``) the ladders compared and the choice of K."""

from __future__ import annotations

from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.buckets import BatchPadding, BucketsResult, Optimization
from infer_opt.units import format_duration, format_number, format_percent, format_ratio, plural

BATCH_NOTE = (
    "Batch figures: n requests drawn with replacement from the sample, every sequence padded "
    "to the bucket of the longest, P(max ≤ x) = F(x)^n."
)


def _tokens(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{round(value):,}" if abs(value) >= 1000 else format_number(value, 4)


def _bounds(bounds: tuple[int, ...]) -> str:
    if len(bounds) <= 12:
        return ",".join(str(b) for b in bounds)
    return ",".join(str(b) for b in bounds[:5]) + ",…," + ",".join(str(b) for b in bounds[-3:])


def _summary(r: BucketsResult) -> list[tuple[str, str]]:
    out = [
        (
            "Sample",
            f"{format_number(r.sample_size)} lengths ({format_number(r.distinct_lengths)} distinct) "
            f"from {r.source}",
        ),
        ("Bounds", f"{_bounds(r.bounds)} ({plural(len(r.bounds), 'bucket')})"),
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
    if r.unbucketed_count:
        out.append(
            (
                "Unbucketed",
                f"{format_number(r.unbucketed_count)} lengths above {r.bounds[-1]} (max {r.unbucketed_max})",
            )
        )
    if r.batch is not None:
        out += _batch_summary(r.batch)
    if r.optimization is not None and r.optimization.k_choices:
        out.append(_costs_line(r.optimization))
    return out


def _batch_summary(b: BatchPadding) -> list[tuple[str, str]]:
    return [
        (
            f"Batch of {b.batch_size}, padded to b(max)",
            f"{_tokens(b.expected_padded_tokens)} tokens vs {_tokens(b.expected_tokens)} unpadded: "
            f"padding {_tokens(b.expected_padding)} = {format_percent(b.relative_padding)} of n·E[T] "
            f"(bucketing alone: {_tokens(b.per_request_padding)})",
        ),
        (
            f"Batch of {b.batch_size}, quadratic",
            f"{_tokens(b.expected_quadratic_padding)} tokens² = "
            f"{format_percent(b.relative_quadratic_padding)} of n·E[T²] "
            f"(bucketing alone: {_tokens(b.per_request_quadratic_padding)})",
        ),
    ]


def _costs_line(opt: Optimization) -> tuple[str, str]:
    unit_cost = "token" if opt.cost == "linear" else "token²"
    return (
        "Choosing K (given costs)",
        f"compile {format_duration(opt.compile_cost_s)} per bucket, "
        f"{format_duration(opt.token_cost_s)} per padded {unit_cost}, "
        f"{format_number(opt.requests)} requests",
    )


def _per_bucket_table(r: BucketsResult) -> Table:
    columns = [
        Column("range", "Bucket (lengths)", align="left", csv_header="lengths"),
        Column("bound", "Bound b", format_number, csv_header="bound"),
        Column("count", "Requests", format_number, csv_header="count"),
        Column("share", "Share", format_percent, csv_header="share"),
        Column("mean_length", "Mean T", _tokens, csv_header="mean_length"),
        Column("expected_padding", "Mean padding b − T", _tokens, csv_header="expected_padding"),
        Column(
            "padding_fraction", "Padding share", format_percent, csv_header="padding_fraction", importance=1
        ),
        Column(
            "expected_quadratic_padding", "Mean b² − T²", _tokens, csv_header="expected_quadratic_padding"
        ),
    ]
    return Table(
        "Per bucket",
        columns,
        rows_of(r.per_bucket, columns, range=lambda s: f"{s.lower}–{s.bound}"),
        caption="Means are per request in that bucket; padding share = Σ(b − T) / Σ b.",
        highlight={i: "muted" for i, s in enumerate(r.per_bucket) if s.count == 0},
    )


def _waste_unit(opt: Optimization) -> str:
    return "tokens" if opt.cost == "linear" else "tokens²"


def _ladder_table(opt: Optimization) -> Table:
    waste = "b − T" if opt.cost == "linear" else "b² − T²"
    columns = [
        Column("name", "Bounds", align="left", csv_header="name"),
        Column("buckets_used", "Buckets used", format_number, csv_header="buckets_used"),
        Column("bounds", "Values", align="left", csv_header="bounds"),
        Column("expected_waste", f"Waste ({_waste_unit(opt)})", _tokens, csv_header="expected_waste"),
        Column("relative_waste", "Relative", format_percent, csv_header="relative_waste"),
        Column("ratio_to_optimal", "× optimal, same K", format_ratio, csv_header="ratio_to_optimal_same_k"),
    ]
    return Table(
        f"Bounds compared on {opt.cost} waste (mean {waste} per request)",
        columns,
        rows_of(opt.ladders, columns, bounds=lambda row: _bounds(row.bounds)),
        caption="× optimal: this waste over the exact optimum with as many used buckets.",
        highlight={0: "best"},
    )


def _k_table(opt: Optimization) -> Table:
    columns = [
        Column("k", "K", format_number, csv_header="k"),
        Column("expected_waste", f"Waste ({_waste_unit(opt)})", _tokens, csv_header="expected_waste"),
        Column("waste_cost_s", "Padding cost", format_duration, csv_header="waste_cost_s"),
        Column("compile_cost_s", "Compile cost", format_duration, csv_header="compile_cost_s"),
        Column("total_cost_s", "Total", format_duration, csv_header="total_cost_s"),
    ]
    return Table(
        "Choosing K (predicted cost)", columns, rows_of(opt.k_choices, columns), highlight={opt.k - 1: "best"}
    )


def _tables(r: BucketsResult) -> list[Table]:
    tables = [_per_bucket_table(r)]
    opt = r.optimization
    if opt is not None:
        tables.append(_ladder_table(opt))
        if opt.k_choices:
            tables.append(_k_table(opt))
    return tables


def _notes(r: BucketsResult) -> list[str]:
    notes = [BATCH_NOTE] if r.batch is not None else []
    opt = r.optimization
    if opt is not None and opt.k_choices:
        notes.append(f"Objective: {opt.objective}.")
    if opt is not None and r.batch is not None:
        notes.append("The optimisation minimises per-request waste; batch figures are for the bounds found.")
    return notes


def _verdict(r: BucketsResult) -> str | None:
    opt = r.optimization
    if opt is None:
        return None
    if opt.k_choices:
        return f"Use K = {opt.k} ({plural(opt.k, 'bucket')}): {_bounds(r.bounds)}."
    return f"Optimal {opt.k} bounds for {opt.cost} waste: {_bounds(r.bounds)}."


def build_view(result: BucketsResult) -> View:
    return View(
        title="Shape buckets: padding waste",
        summary=_summary(result),
        tables=_tables(result),
        notes=_notes(result),
        warnings=list(result.warnings),
        verdict=_verdict(result),
    )
