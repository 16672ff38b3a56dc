"""View of ``tune capture-sizes``: the proposed list against the current one, the flags, the
audit, per-bucket waste and the break-even of each extra capture."""

from __future__ import annotations

from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.tune_capture_sizes import ListCost, TuneCaptureSizesResult
from infer_opt.units import format_bytes, format_duration, format_number, format_percent, format_ratio


def _sizes(sizes: tuple[int, ...], most: int = 12) -> str:
    if not sizes:
        return "none"
    if len(sizes) <= most:
        return ",".join(str(s) for s in sizes)
    head = ",".join(str(s) for s in sizes[: most // 2])
    tail = ",".join(str(s) for s in sizes[-most // 2 :])
    return f"{head},…,{tail} ({len(sizes)} sizes)"


def _step(lc: ListCost) -> str:
    text = format_duration(lc.expected_step_s, 4)
    if lc.expected_step_range_s is not None:
        lo, hi = lc.expected_step_range_s
        text += f" (range {format_duration(lo, 4)} – {format_duration(hi, 4)} over the histogram placement)"
    return text


def _summary(r: TuneCaptureSizesResult) -> list[tuple[str, str]]:
    out = [
        ("Proposed capture sizes", _sizes(r.capture_sizes)),
        ("Expected step, proposed", _step(r.proposed)),
        (f"Current ({r.current_source})", _sizes(r.current.capture_sizes)),
        ("Expected step, current", _step(r.current)),
        ("Gain (current / proposed)", format_ratio(r.gain)),
    ]
    if r.memory_bytes is not None:
        out.append(
            (
                "Graph memory, proposed / current",
                f"{format_bytes(r.memory_bytes)} / {format_bytes(r.current.memory_bytes)}",
            )
        )
    out.append(
        (
            "Uncaptured batches",
            f"{format_percent(r.proposed.uncaptured_share)} of steps (proposed), "
            f"{format_percent(r.current.uncaptured_share)} (current); {r.eager}",
        )
    )
    if r.recommendation == "keep_current":
        out.append(
            ("Recommendation", f"keep the current list ({r.current_source}): the one found is no faster")
        )
    out += [(f"Flag ({engine})", flag) for engine, flag in r.flags.items()]
    out += [(f"Input: {name}", label) for name, label in r.inputs.items()]
    out.append(("Histogram spread", r.spread))
    return out


def _bucket_table(r: TuneCaptureSizesResult) -> Table:
    columns = [
        Column("list_name", "List", align="left", csv_header="list"),
        Column("range", "Batches", align="left", csv_header="batches"),
        Column("bound", "Captured size", format_number, csv_header="bound"),
        Column("share", "Share of steps", format_percent, csv_header="share", importance=2),
        Column(
            "padding_waste_s",
            "Padding waste / step",
            format_duration,
            csv_header="padding_waste_s",
            importance=2,
        ),
    ]
    rows = [b for b in r.buckets if b.share > 0]
    return Table(
        "Per captured size (sizes no step used are left out)",
        columns,
        rows_of(rows, columns, range=lambda b: f"{b.lower}–{b.bound}"),
        caption="Padding waste: Σ p(b)·(t(bound) − t(b)) over the bucket, per step.",
    )


def _audit_table(r: TuneCaptureSizesResult) -> Table:
    columns = [
        Column("capture_sizes_of", "List", align="left", csv_header="list"),
        Column(
            "batch_sizes", "Batch sizes above the largest capture", align="left", csv_header="batch_sizes"
        ),
        Column("share", "Share of steps", format_percent, csv_header="share"),
    ]
    return Table(
        "Uncaptured (audit)",
        columns,
        rows_of(r.uncaptured, columns, batch_sizes=lambda u: _sizes(u.batch_sizes)),
    )


def _marginal_table(r: TuneCaptureSizesResult) -> Table:
    columns = [
        Column("captures", "Captures", format_number, csv_header="captures"),
        Column(
            "expected_step_s",
            "Best expected step",
            lambda v: format_duration(v, 4),
            csv_header="expected_step_s",
        ),
        Column(
            "saving_per_step_s", "Saving of the last one", format_duration, csv_header="saving_per_step_s"
        ),
        Column("memory_bytes", "Memory", format_bytes, csv_header="memory_bytes"),
        Column("break_even_steps", "Break-even steps", format_number, csv_header="break_even_steps"),
    ]
    return Table(
        "Each extra capture (optimal lists of 1..N sizes)",
        columns,
        rows_of(r.marginal, columns),
        caption="Break-even: capture time / saving per step (the amortize model); — without --capture-time.",
    )


def build_view(result: TuneCaptureSizesResult) -> View:
    return View(
        title="CUDA-graph capture sizes",
        summary=_summary(result),
        tables=[_bucket_table(result), _audit_table(result), _marginal_table(result)],
        notes=["Expected step times are the cost model's prediction Σ p(b)·cost(b), not measurements."],
        warnings=list(result.warnings),
    )
