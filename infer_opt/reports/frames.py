"""Results as pandas DataFrames: a result's main table (the same rows and raw values the CSV
renderer writes, from the kind's one view), for :meth:`infer_opt.results.Result.to_frame`."""

from __future__ import annotations

import math
import sys
from typing import Any

from infer_opt.reports.serialize import fields_table
from infer_opt.reports.view import Table, build_view


def _raw(value: Any) -> Any:
    """A cell as a DataFrame holds it: numbers and text as they are, None as missing, other
    objects by their text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return math.nan if value is None else value
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return str(value)


def whole_view(result: Any) -> Any:
    """The result's view with every row: a builder's display cut (``top``, the console's
    ``--top``) lifted, so a frame holds the whole table, never the first 15 operator groups."""
    from infer_opt.registry import kind

    return build_view(result, top=sys.maxsize) if kind(result.KIND).top else build_view(result)


def main_tables(result: Any) -> list[Table]:
    """The view's main table (the kind's ``frame``, else its first), and every later one with
    the same columns (the kernel suite's per-family tables); a result without tables gives its
    scalar fields."""
    from infer_opt.registry import kind

    tables = whole_view(result).tables
    title = kind(result.KIND).frame
    tables = tables[next((i for i, t in enumerate(tables) if t.title == title), 0) :]
    if not tables:
        return [fields_table(result)]
    keys = [c.key for c in tables[0].columns]
    return [t for t in tables if [c.key for c in t.columns] == keys]


def result_frame(result: Any, table: int | str | None = None) -> Any:
    """The main table of ``result`` as a DataFrame, columns named by their CSV headers (SI
    units: ``time_s``, ``bytes``). ``table`` picks another of the view's tables by position or
    title."""
    import pandas as pd

    if table is None:
        chosen = main_tables(result)
    else:
        tables = whole_view(result).tables
        by_title = {t.title: t for t in tables}
        if isinstance(table, str):
            if table not in by_title:
                from infer_opt.errors import InvalidInput

                raise InvalidInput("table", table, f"expected one of {', '.join(by_title) or 'no tables'}")
            chosen = [by_title[table]]
        else:
            chosen = [tables[table]]
    frames = []
    for t in chosen:
        columns = {c.csv_header or c.key: [_raw(row.get(c.key)) for row in t.rows] for c in t.columns}
        frame = pd.DataFrame(columns)
        if len(chosen) > 1:
            frame.insert(0, "table", t.title)
        frames.append(frame)
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
