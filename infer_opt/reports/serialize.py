"""Machine-readable renderers: CSV of a view's tables (raw values, SI units in the
headers) and the JSON envelope (see :mod:`infer_opt.results`)."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from infer_opt.reports.view import Table, View


def _raw(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return value


def table_csv(table: Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([c.csv_header or c.key for c in table.columns])
    for row in table.rows:
        writer.writerow([_raw(row.get(c.key)) for c in table.columns])
    return buffer.getvalue()


def render_csv(view: View) -> str:
    """The view's tables as CSV; several tables are separated by a ``# title`` line."""
    if len(view.tables) == 1:
        return table_csv(view.tables[0])
    return "\n".join(f"# {t.title}\n{table_csv(t)}" for t in view.tables)
