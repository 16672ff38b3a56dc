"""Tabular input: the one reader for every CSV/TSV file infer-opt reads (bucket files, plan
logs, length samples, roofline measurement CSVs), and strict JSON for metric and result files.

A reader declares the columns it wants as :class:`Field` s; :func:`read_table` returns them as
a pandas DataFrame with canonical names, durations in seconds, counts as integers:

- CSV or TSV (the header line decides; ``.tsv`` files are tab-separated);
- duration columns may carry their unit in the header (``time_ms``, ``time_us``, ``time_s``,
  ``compile_s``) or in a cell (``12ms``); a bare number is in the header's unit, else the
  field's default;
- blank lines and ``#`` comment lines are skipped; columns nobody asked for are reported
  (:attr:`Table.extra`, :meth:`Table.notices`), not silently used or dropped;
- every error names the file, the line, the column and the value, in one line: an empty cell,
  NaN or infinity, a value out of range, a row with the wrong number of fields;
- vectorised (pandas' C parser, numpy checks): a 10⁶-row file takes about a second.

pandas is imported inside the functions, so importing this module costs nothing.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.units import DURATION_UNITS, parse_duration, parse_float

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

Kind = Literal["text", "count", "number", "duration"]

#: unit suffixes a duration column's header may carry: ``time_ms`` -> ms
_SUFFIX_UNITS = {"ns": "ns", "us": "us", "µs": "us", "ms": "ms", "s": "s", "sec": "s", "min": "min", "h": "h"}
_BLANK_OR_COMMENT = re.compile(r"^[ \t]*(#.*)?$", re.MULTILINE)
_CELL = re.compile(r"^\s*(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<unit>[A-Za-zµ]*)\s*$")


#: the largest magnitude a number cell may hold (in its column's base unit)
TABLE_NUMBER_MAX = 1e15


@dataclass(frozen=True)
class Field:
    """A column a reader wants: its canonical ``name``, what its cells hold, whether it must be
    there, and for numbers the smallest value allowed (``low``; ``None`` = any sign) and whether
    ``low`` itself is allowed. ``unit`` is the unit of a bare duration when the header does not
    name one. ``aliases`` are other accepted header names."""

    name: str
    kind: Kind = "number"
    required: bool = True
    unit: str = "s"
    low: float | None = 0.0
    low_open: bool = False
    high: float | None = None
    aliases: tuple[str, ...] = ()
    #: an empty cell is allowed: NaN in a number column, "" in a text column
    blank_ok: bool = False


@dataclass(frozen=True, eq=False)
class Table:
    """What :func:`read_table` read: the frame (canonical column names, durations in seconds),
    the header as written for each field found, the columns no field asked for, and where each
    row came from (file lines, for messages)."""

    frame: pd.DataFrame
    source: str
    headers: dict[str, str]
    extra: tuple[str, ...] = ()
    #: file line of each data row (None: the header's line + 1 + row)
    row_lines: np.ndarray | None = None
    header_line: int = 1

    def __len__(self) -> int:
        return len(self.frame)

    def has(self, name: str) -> bool:
        return name in self.headers

    def line(self, row: int) -> int:
        """The 1-based file line of data row ``row``."""
        if self.row_lines is None:
            return self.header_line + 1 + row
        return int(self.row_lines[row])

    def where(self, row: int, name: str | None = None) -> str:
        """``file line N, column C`` for messages."""
        text = f"{self.source} line {self.line(row)}"
        return text if name is None else f"{text}, column {self.headers.get(name, name)}"

    def notices(self) -> tuple[Notice, ...]:
        """An ``extra_columns`` notice when the file has columns no field asked for."""
        if not self.extra:
            return ()
        return (Notice("extra_columns", {"file": self.source, "columns": list(self.extra)}),)


@dataclass(frozen=True)
class _Header:
    names: list[str]
    sep: str
    line: int  # 1-based line of the header
    #: field name -> (column index, header text, unit of bare durations)
    found: dict[str, tuple[int, str, str]] = field(default_factory=dict)


def read_table(
    text: str,
    fields: Sequence[Field],
    *,
    source: str,
    sep: str | None = None,
    comments: bool = True,
    names: Sequence[str] | None = None,
) -> Table:
    """Read ``text`` (CSV or TSV with a header line; with ``names``, a file without one whose
    columns are these) into the columns ``fields`` asks for.

    Raises :class:`InvalidInput` naming ``source`` (and the line, column and value) for a
    missing required column, a duplicate column, a malformed row or a bad cell."""
    import numpy as np

    lines, row_lines = _data_lines(text, comments)
    if not lines:
        raise InvalidInput(source, "no rows", "the file is empty")
    if names is None:
        header = _header(lines[0], fields, source, sep, 1 if row_lines is None else int(row_lines[0]))
        skip = 1
    else:
        header = _header(",".join(names), fields, source, sep or ",", 0)
        skip = 0
    body = lines[skip:]
    data_lines = None if row_lines is None else np.asarray(row_lines[skip:], dtype=np.int64)
    frame = _parse(body, header, fields, source, data_lines)
    table = Table(
        frame=frame,
        source=source,
        headers={name: text for name, (_, text, _) in header.found.items()},
        extra=tuple(
            n for i, n in enumerate(header.names) if i not in {c for c, _, _ in header.found.values()}
        ),
        row_lines=data_lines,
        header_line=header.line,
    )
    return _convert(table, body, header, fields)


def _data_lines(text: str, comments: bool) -> tuple[list[str], list[int] | None]:
    """The non-blank, non-comment lines and, when any line was dropped, each kept line's
    1-based number (None: no line dropped, line i is the i-th)."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines()
    pattern = _BLANK_OR_COMMENT if comments else re.compile(r"^[ \t]*$", re.MULTILINE)
    if not lines or not pattern.search(text.rstrip()):
        return lines, None
    keep = [(i + 1, line) for i, line in enumerate(lines) if not pattern.match(line)]
    return [line for _, line in keep], [i for i, _ in keep]


def _header(first: str, fields: Sequence[Field], source: str, sep: str | None, line: int) -> _Header:
    if sep is None:
        sep = "\t" if "\t" in first and "," not in first else ","
    names = [n.strip().lower() for n in next(csv.reader([first], delimiter=sep))]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise InvalidInput(f"{source} line {line}", first, f"column {duplicated[0]!r} appears twice")
    header = _Header(names, sep, line)
    for f in fields:
        match = _match(names, f)
        if match is not None:
            header.found[f.name] = match
        elif f.required:
            raise InvalidInput(
                f"{source} line {line}",
                first,
                f"needs a {_describe(f)} column",
            )
    return header


def _match(names: list[str], f: Field) -> tuple[int, str, str] | None:
    for i, name in enumerate(names):
        if name == f.name or name in f.aliases:
            return i, name, f.unit
        if f.kind == "duration":
            stem, _, suffix = name.rpartition("_")
            if (stem == f.name or stem in f.aliases) and suffix in _SUFFIX_UNITS:
                return i, name, _SUFFIX_UNITS[suffix]
    return None


def _describe(f: Field) -> str:
    if f.kind != "duration":
        return f"'{f.name}'"
    others = ", ".join(f"{f.name}_{u}" for u in ("s", "ms", "us") if u != f.unit)
    return f"'{f.name}_{f.unit}' (or {others}; bare {f.name} = {f.unit})"


def _parse(
    body: list[str], header: _Header, fields: Sequence[Field], source: str, row_lines: Any
) -> pd.DataFrame:
    """The raw cells, one column per header name (position-indexed); a row with more fields
    than the header is an error here, one with fewer has empty cells (named by the checks)."""
    import pandas as pd

    width = len(header.names)
    if not body:
        return pd.DataFrame({i: pd.Series([], dtype=object) for i in range(width)})
    text_columns = {
        header.found[f.name][0]: str for f in fields if f.kind == "text" and f.name in header.found
    }
    try:
        frame = pd.read_csv(
            io.StringIO("\n".join(body)),
            sep=header.sep,
            header=None,
            dtype=text_columns or None,
            na_filter=False,
            skipinitialspace=True,
            engine="c",
        )
        row = 0 if frame.shape[1] > width else -1
    except pd.errors.ParserError as exc:
        row = _row_of_parser_error(str(exc), len(body))
    if row >= 0:
        line = (header.line + 1 + row) if row_lines is None else int(row_lines[row])
        raise InvalidInput(
            f"{source} line {line}", body[row], f"expected {width} fields ({', '.join(header.names)})"
        )
    for missing in range(frame.shape[1], width):
        frame[missing] = ""
    return frame


def _row_of_parser_error(message: str, rows: int) -> int:
    match = re.search(r"line (\d+)", message)
    return min(rows - 1, int(match.group(1)) - 1) if match else 0


def _convert(table: Table, body: list[str], header: _Header, fields: Sequence[Field]) -> Table:
    """Each found column checked and converted in place of the raw one (canonical names)."""
    import pandas as pd

    columns: dict[str, Any] = {}
    for f in fields:
        if f.name not in header.found:
            continue
        index, name, unit = header.found[f.name]
        raw = table.frame[index]
        check = _Check(table, body, header, f, name, unit)
        columns[f.name] = check.column(raw)
    frame = pd.DataFrame(columns, index=pd.RangeIndex(len(table.frame)))
    return Table(frame, table.source, table.headers, table.extra, table.row_lines, table.header_line)


@dataclass
class _Check:
    """Converts and checks one column; on a bad cell, raises naming file, line, column, value."""

    table: Table
    body: list[str]
    header: _Header
    field: Field
    name: str
    unit: str

    def column(self, raw: pd.Series) -> Any:
        kind = self.field.kind
        if kind == "text":
            return self._text(raw)
        values = self._numbers(raw)
        if kind == "duration":
            values = values * DURATION_UNITS[self.unit]
        self._check_range(values)
        if kind == "count":
            return self._counts(values)
        return values

    def _text(self, raw: pd.Series) -> Any:
        import numpy as np

        values = np.array([str(v).strip() for v in raw.to_numpy(dtype=object)], dtype=object)
        empty = values == ""
        if empty.any() and not self.field.blank_ok:
            self._fail(int(empty.argmax()), "empty cell")
        return values

    def _numbers(self, raw: pd.Series) -> np.ndarray:
        import numpy as np
        import pandas as pd

        if raw.dtype.kind in "iuf":
            values = raw.to_numpy(dtype=np.float64)
        elif self.field.kind == "duration":
            values = self._with_units(raw.to_numpy(dtype=object))
        else:
            values = pd.to_numeric(raw.astype(str), errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values)
        if self.field.blank_ok and bad.any() and raw.dtype.kind not in "iuf":
            bad &= (raw.astype(str).str.strip() != "").to_numpy()
        if bad.any():
            self._explain(int(bad.argmax()))
        return values

    def _with_units(self, cells: np.ndarray) -> np.ndarray:
        """Cells such as ``12``, ``12ms`` or ``800us``, in the header's unit (NaN where a cell
        is no duration, for :meth:`_explain` to name)."""
        import numpy as np

        scale = DURATION_UNITS[self.unit]
        factors = {unit: factor / scale for unit, factor in DURATION_UNITS.items()}
        factors[""] = 1.0
        match = _CELL.match

        def value(cell: str) -> float:
            found = match(cell)
            if found is None:
                return math.nan
            num, unit = found.groups()
            return float(num) * factors[unit] if unit in factors else math.nan

        return np.fromiter((value(str(c)) for c in cells), dtype=np.float64, count=len(cells))

    def _check_range(self, values: np.ndarray) -> None:
        """``low``/``high`` are in the column's base unit (seconds for durations)."""
        import numpy as np

        f = self.field
        if f.low is not None:
            with np.errstate(invalid="ignore"):
                bad = values <= f.low if f.low_open else values < f.low
            if bad.any():
                bound = f"> {f.low:g}" if f.low_open else f">= {f.low:g}"
                self._fail(int(bad.argmax()), f"must be {bound}")
        if f.high is not None:
            with np.errstate(invalid="ignore"):
                bad = values > f.high
            if bad.any():
                self._fail(int(bad.argmax()), f"must be at most {f.high:g}")
        with np.errstate(invalid="ignore"):  # 1e308 steps, a batch of 2**63: no measurement
            bad = np.abs(values) > TABLE_NUMBER_MAX
        if bad.any():
            self._fail(
                int(bad.argmax()), f"must be within ±{TABLE_NUMBER_MAX:g} (no measurement is that large)"
            )

    def _counts(self, values: np.ndarray) -> np.ndarray:
        import numpy as np

        bad = (values != np.floor(values)) | (np.abs(values) > 2.0**53)
        if bad.any():
            self._fail(int(bad.argmax()), "expected an integer (a whole number)")
        return values.astype(np.int64)

    def _cell(self, row: int) -> tuple[str, int]:
        """The cell's text as written and the row's number of fields."""
        cells = next(csv.reader([self.body[row]], delimiter=self.header.sep), [])
        index = self.header.found[self.field.name][0]
        return (cells[index].strip() if index < len(cells) else ""), len(cells)

    def _explain(self, row: int) -> None:
        """Raise the message the scalar parser gives for a cell the vector parse refused."""
        cell, width = self._cell(row)
        if width != len(self.header.names):
            raise InvalidInput(
                self.table.where(row),
                self.body[row],
                f"expected {len(self.header.names)} fields ({', '.join(self.header.names)})",
            )
        where = self.table.where(row, self.field.name)
        if cell == "":
            raise InvalidInput(where, cell, "empty cell")
        if self.field.kind == "duration":
            signs = len(cell) - len(cell.lstrip("+-"))
            if signs > 1 or (signs and self.field.low is None and cell.lstrip("+-")[:1].isspace()):
                raise InvalidInput(where, cell, "expected at most one sign, e.g. -2 or 500us")
            parse_duration(
                cell.lstrip("+-") if self.field.low is None else cell, option=where, default_unit=self.unit
            )
        else:
            try:
                float(cell)
            except ValueError:
                raise InvalidInput(where, cell, "expected a number") from None
            parse_float(cell, option=where)
        raise InvalidInput(where, cell, "expected a finite number")

    def _fail(self, row: int, expected: str) -> None:
        cell, width = self._cell(row)
        if width != len(self.header.names):
            self._explain(row)
        raise InvalidInput(self.table.where(row, self.field.name), cell, expected)


# ----------------------------------------------------------------------------------- JSON


class _NotFinite:
    def __init__(self, text: str) -> None:
        self.text = text


def reject_non_finite(constant: str) -> Any:
    """``parse_constant`` for :func:`json.loads` that refuses NaN and ±Infinity (a ValueError)."""
    raise ValueError(f"{constant} is not a number JSON allows")


def read_json(text: str, *, source: str) -> Any:
    """Parse JSON strictly: ``NaN``, ``Infinity`` and ``-Infinity`` (which Python's json module
    accepts) are refused, naming the key that holds them."""
    try:
        data = json.loads(text, parse_constant=_NotFinite)
    except json.JSONDecodeError as exc:
        raise InvalidInput(source, "…", f"not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except RecursionError:
        raise InvalidInput(source, "…", "not usable JSON (nested too deeply)") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise InvalidInput(source, "…", f"not usable JSON ({str(exc).split(';')[0]})") from None
    path = _find_not_finite(data, "")
    if path is not None:
        key, constant = path
        raise InvalidInput(
            f"{source}: {key or 'value'}", constant, "must be a finite number, not NaN or Infinity"
        )
    return data


def _find_not_finite(data: Any, path: str) -> tuple[str, str] | None:
    if isinstance(data, _NotFinite):
        return path, data.text
    if isinstance(data, dict):
        items = ((f"{path}.{k}" if path else str(k), v) for k, v in data.items())
    elif isinstance(data, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(data))
    else:
        return None
    for key, value in items:
        found = _find_not_finite(value, key)
        if found is not None:
            return found
    return None
