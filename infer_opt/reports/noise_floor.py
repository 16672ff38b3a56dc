"""View of a saved noise floor (``noise-floor``, measured by ``infer-opt ab``'s A/A): each family's
between-run spread and the single-run floor it implies; the table ``ab`` shows beside its
comparison."""

from __future__ import annotations

from infer_opt.reports.compare import _pct
from infer_opt.reports.view import Column, Table, View
from infer_opt.results.noise_floor import NoiseFloor


def noise_table(record: NoiseFloor) -> Table:
    """One row per family: its between-run CV and the single-run floor it implies."""
    rows = [
        {"key": g.key, "cv": g.between_run_cv, "floor": g.floor, "rows": g.rows, "df": g.df}
        for g in record.groups
    ]
    columns = [
        Column("key", "Family" if record.compared == "kernels" else "Group", align="left", csv_header="key"),
        Column("cv", "Between-run CV", _pct, csv_header="between_run_cv"),
        Column("floor", "Single-run floor", _pct, csv_header="floor"),
        Column("rows", "Rows", csv_header="rows"),
        Column("df", "df", csv_header="df"),
    ]
    return Table("Run-to-run noise", columns, rows)


NOISE_NOTE = (
    "Between-run CV: the pooled standard deviation of the log run medians of the family's rows over "
    "every run of the A/A. Single-run floor = e^(2.576·√2·CV) − 1: two single runs of unchanged code "
    "differ by more in about 1% of rows; compare gives no verdict below it with one run a side, and "
    "takes CV² as the least between-run variance of a run-level test."
)


def build_view(result: NoiseFloor) -> View:
    summary = [
        ("Device", f"{result.device_name} ({result.key.slug()})"),
        ("Measured on", f"{result.subject}, {result.dtype}"),
        ("Runs", str(result.runs)),
    ]
    if result.command:
        summary.append(("Command", result.command))
    return View(
        title=f"Noise floor: {result.key.slug()} ({result.compared})",
        summary=summary,
        tables=[noise_table(result)],
        notes=[NOISE_NOTE],
    )
