"""The one intermediate shape every renderer formats.

A result kind's view builder (``reports/<kind>.py``) turns the result into a
:class:`View` once; the console, markdown, CSV and JSON renderers only format it.
Rows hold raw values (floats in SI base units); a :class:`Column` says how to show them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from infer_opt.notices import Notice
from infer_opt.units import format_number

Formatter = Callable[[Any], str]


def _default_format(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return format_number(value)
    return str(value)


@dataclass(frozen=True)
class Column:
    """One column: ``key`` into the row dicts, a human ``header``, how to format a cell,
    and the ``csv_header`` (with the SI unit of the raw value, e.g. ``time_s``).

    For a narrow terminal: ``is_key`` marks the column that names the row (default: the
    table's first column), which never wraps or disappears; when the table cannot fit, the
    columns of lowest ``importance`` are hidden first (ties: the rightmost first)."""

    key: str
    header: str
    fmt: Formatter = _default_format
    align: Literal["left", "right"] = "right"
    csv_header: str | None = None
    is_key: bool = False
    importance: int = 0
    #: the cell's text on a terminal, whose width is short (default: ``fmt``); markdown, HTML
    #: and CSV have no width and keep ``fmt``'s whole text
    terminal: Formatter | None = None

    def format(self, value: Any) -> str:
        return self.fmt(value) if value is not None else "—"

    def format_terminal(self, value: Any) -> str:
        return self.terminal(value) if self.terminal is not None and value is not None else self.format(value)


@dataclass
class Table:
    title: str
    columns: Sequence[Column]
    rows: list[dict[str, Any]]
    caption: str | None = None
    #: a row index -> style hint ("best", "bad", "muted") used by rich renderers
    highlight: dict[int, str] = field(default_factory=dict)


@dataclass
class View:
    """What a result says, in the order a reader wants it."""

    title: str
    summary: list[tuple[str, str]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: what went wrong or looks suspicious, as codes with values (words: infer_opt/messages.py)
    warnings: list[Notice] = field(default_factory=list)
    verdict: str | None = None
    verdict_ok: bool = True


def build_view(result: Any, **options: Any) -> View:
    """The view of any registered result kind (its builder comes from :mod:`infer_opt.registry`);
    ``options`` are display options the kind's builder takes (``profile``: ``top``, ``by``)."""
    from infer_opt.registry import KINDS, resolve

    kind = result.KIND
    if kind not in KINDS:
        raise KeyError(f"no result kind {kind!r} in infer_opt.registry")
    return resolve(KINDS[kind].view)(result, **options)


def rows_of(items: Iterable[Any], columns: Sequence[Column], **computed: Callable[[Any], Any]) -> list[dict]:
    """One row per item: each column's cell is ``computed[key](item)`` where given, else the
    item's attribute named by the column's key (a mistyped key raises, never prints "—")."""
    return [
        {c.key: computed[c.key](item) if c.key in computed else getattr(item, c.key) for c in columns}
        for item in items
    ]
