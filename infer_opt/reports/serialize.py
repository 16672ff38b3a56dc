"""Machine-readable renderers: CSV of a view's tables (raw values, SI units in the
headers) and the JSON envelope (see :mod:`infer_opt.results`)."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from infer_opt.messages import as_json
from infer_opt.reports.render import Document, Renderer, Section, titled_tables
from infer_opt.reports.view import Column, Table
from infer_opt.results import Result, envelope


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


def fields_table(result: Result) -> Table:
    """A result without tables as CSV rows: each scalar field and its raw value."""
    rows = [
        {"field": key, "value": value}
        for key, value in result.to_dict().items()
        if not isinstance(value, (dict, list))
    ]
    return Table("Fields", [Column("field", "field"), Column("value", "value")], rows)


class CsvRenderer(Renderer):
    """Raw values in SI units, one CSV block per table (a ``# title`` line before each
    when there are several); a result without tables gives its scalar fields."""

    name = "csv"
    extensions = (".csv",)
    description = "CSV of the tables, raw values in SI units"

    def render(self, doc: Document) -> str:
        tables = titled_tables(doc)
        if not tables:
            tables = [(s.view.title, fields_table(s.result)) for s in doc.sections if s.result is not None]
        if len(tables) == 1:
            return table_csv(tables[0][1])
        return "\n".join(f"# {title}\n{table_csv(t)}" for title, t in tables)


def section_envelope(section: Section) -> dict[str, Any]:
    """The envelope a section came with, or a fresh one for a result computed just now; its
    ``warnings`` list holds each warning's code, words, subject and values."""
    if section.envelope is not None:
        return section.envelope
    if section.result is None:
        raise ValueError(f"section {section.view.title!r} has no result to serialize")
    data = envelope(section.result)
    data["warnings"] = [as_json(w) for w in section.view.warnings]
    return data


class JsonRenderer(Renderer):
    """The versioned envelope of the result; a list of envelopes for several results."""

    name = "json"
    extensions = (".json",)
    description = "the versioned JSON envelope"

    def render(self, doc: Document) -> str:
        envelopes = [section_envelope(s) for s in doc.sections]
        data: Any = envelopes[0] if len(envelopes) == 1 else envelopes
        return json.dumps(data, indent=2, allow_nan=False) + "\n"
