"""Rich terminal renderer. Colours only when stdout is a terminal; warnings go to stderr
(in yellow) when the renderer is printing for a command, inline otherwise."""

from __future__ import annotations

import os
import sys
import textwrap
from dataclasses import dataclass
from typing import Any

from infer_opt.messages import text
from infer_opt.reports.render import Document, Renderer, Section, grouped_highlights
from infer_opt.reports.view import Column, Table, View

_ROW_STYLES = {"best": "bold green", "bad": "red", "muted": "dim"}
_LEVEL_STYLES = {"bad": "bold red", "good": "green", "info": ""}

#: the key column (what names a row) keeps at least this much room; longer names end in "…"
KEY_MAX_WIDTH = 40
#: a wrapping text column is never squeezed below this
TEXT_MIN_WIDTH = 10
#: a terminal shows at most this many rows of a table (files get every row)
MAX_ROWS = 200


@dataclass(frozen=True)
class _Planned:
    """One column as it will be shown: its cells' text, widths and header."""

    column: Column
    cells: list[str]
    natural: int  # header and every cell on one line
    least: int  # the narrowest it may get
    is_key: bool

    @property
    def is_number(self) -> bool:
        return self.column.align == "right" and not self.is_key


@dataclass(frozen=True)
class Layout:
    """How a table fits ``width``: the columns shown (in order), those hidden, whether number
    headers wrap, and whether the table is shown one row per block (``vertical``)."""

    shown: list[_Planned]
    hidden: list[Column]
    wrap_headers: bool
    vertical: bool
    rows_left_out: int


def _overhead(n_columns: int) -> int:
    """Borders and padding of a boxed rich table: ``│ a │ b │`` = 3 per column + 1."""
    return 3 * n_columns + 1


def _plan(column: Column, cells: list[str], is_key: bool) -> _Planned:
    widest = max((cell_width(line) for c in cells for line in c.splitlines() or [""]), default=0)
    header_words = max((cell_width(w) for w in column.header.split()), default=0)
    natural = max(widest, cell_width(column.header))
    if is_key:
        least = min(natural, KEY_MAX_WIDTH)
    elif column.align == "right":
        least = max(widest, header_words)  # numbers keep their width; headers may wrap
    else:
        least = min(natural, max(TEXT_MIN_WIDTH, header_words))
    if column.terminal is not None and not is_key:
        # a cell fitted for the terminal (shapes) wraps between its words, never inside one
        least = max(least, max((cell_width(w) for c in cells for w in c.split()), default=0))
    return _Planned(column, cells, natural, least, is_key)


def layout(table: Table, width: int) -> Layout:
    """Fit ``table`` to ``width`` characters: every column at its natural width when it fits;
    else number headers wrap and text columns wrap; else the least important columns are hidden
    (never the key column); if even the key and one more column do not fit, one block per row."""
    rows = table.rows[:MAX_ROWS]
    key_index = next((i for i, c in enumerate(table.columns) if c.is_key), 0)
    planned = [
        _plan(col, [col.format_terminal(row.get(col.key)) for row in rows], i == key_index)
        for i, col in enumerate(table.columns)
    ]
    left_out = max(0, len(table.rows) - MAX_ROWS)
    if sum(p.natural for p in planned) + _overhead(len(planned)) <= width:
        return Layout(planned, [], False, False, left_out)
    shown = list(planned)
    order = sorted(
        (p for p in planned if not p.is_key),
        key=lambda p: (p.column.importance, -planned.index(p)),
    )
    hidden: list[Column] = []
    while sum(p.least for p in shown) + _overhead(len(shown)) > width and order:
        dropped = order.pop(0)
        shown.remove(dropped)
        hidden.append(dropped.column)
    hidden.sort(key=lambda c: list(table.columns).index(c))
    vertical = len(shown) < 2 < len(planned) + 1 and len(planned) > 1
    if vertical:
        return Layout(planned, [], False, True, left_out)
    return Layout(shown, hidden, True, False, left_out)


def cell_width(text: str) -> int:
    from rich.cells import cell_len

    return cell_len(text)


def rich_table(table: Table, width: int = 120) -> Any:
    """``table`` as a rich renderable that fits ``width`` (see :func:`layout`), with a footnote
    naming the columns hidden and the rows left out."""
    from rich.console import Group
    from rich.markup import escape
    from rich.table import Table as RichTable
    from rich.text import Text

    plan = layout(table, width)
    if plan.vertical:
        return Group(*_vertical(table, plan), *_footnotes(plan))
    out = RichTable(
        title=escape(table.title),
        caption=escape(table.caption) if table.caption else None,
        title_justify="left",
    )
    for p in plan.shown:
        header = p.column.header
        if plan.wrap_headers and p.is_number and cell_width(header) > p.least:
            header = textwrap.fill(header, width=p.least)
        out.add_column(
            escape(header),
            justify=p.column.align,
            no_wrap=p.is_key or p.is_number,
            min_width=p.least,
            max_width=KEY_MAX_WIDTH if p.is_key and p.natural > KEY_MAX_WIDTH else None,
            overflow="ellipsis" if p.is_key else "fold",
        )
    for i in range(len(plan.shown[0].cells) if plan.shown else 0):
        out.add_row(
            *(Text(p.cells[i]) for p in plan.shown),
            style=_ROW_STYLES.get(table.highlight.get(i, "")),
        )
    return Group(out, *_footnotes(plan)) if (plan.hidden or plan.rows_left_out) else out


def summary_lines(summary: list[tuple[str, str]], width: int) -> list[str]:
    """The summary block: keys in one column, values beside them, a long value wrapping under
    its own column (not back to the margin). Keys wider than half the terminal are not
    aligned: such a value starts on the line after its key."""
    keys = max(cell_width(k) for k, _ in summary)
    aligned = keys <= width // 2
    indent = " " * (2 + keys + 2) if aligned else "    "
    lines = []
    for key, value in summary:
        if aligned:
            first = f"  {key}{' ' * (keys - cell_width(key))}  "
        else:
            lines.append(f"  {key}")
            first = indent
        # a path or a command is not cut in two (it overflows, and the terminal folds it)
        wrapped = textwrap.wrap(
            value, width=max(width - len(indent), 10), break_long_words=False, break_on_hyphens=False
        ) or [""]
        lines.append(first + wrapped[0])
        lines.extend(indent + line for line in wrapped[1:])
    return lines


def _vertical(table: Table, plan: Layout) -> list[Any]:
    """One block per row: the key in bold, then ``header: value`` lines (a table too wide for
    the terminal even with one column beside its key)."""
    from rich.markup import escape
    from rich.text import Text

    key = next(p for p in plan.shown if p.is_key)
    others = [p for p in plan.shown if not p.is_key]
    out: list[Any] = [Text(table.title, style="bold")]
    for i, name in enumerate(key.cells):
        out.append(Text(name, style="bold", overflow="fold"))
        for p in others:
            out.append(Text(f"  {p.column.header}: {p.cells[i]}", overflow="fold"))
    if table.caption:
        out.append(Text(escape(table.caption), style="dim"))
    return out


def _footnotes(plan: Layout) -> list[Any]:
    from rich.text import Text

    notes = []
    if plan.hidden:
        n = len(plan.hidden)
        names = ", ".join(c.header for c in plan.hidden)
        notes.append(
            f"{n} column{'s' if n > 1 else ''} hidden ({names}); widen the terminal or use --format markdown"
        )
    if plan.rows_left_out:
        notes.append(
            f"… {plan.rows_left_out:,} more rows not shown; --csv FILE or --out FILE.json has every row"
        )
    return [Text(note, style="dim") for note in notes]


def make_console(stderr: bool = False, width: int | None = None, plain: bool = False) -> Any:
    """A rich console: the terminal's width on a terminal, else ``$COLUMNS`` (default 120);
    ``plain`` = no colours or styles (text for a file)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if width is None and (plain or not stream.isatty()):
        width = int(os.environ.get("COLUMNS", "120"))
    if plain:
        return Console(width=width, color_system=None, force_terminal=False, no_color=True)
    return Console(width=width, stderr=stderr)


def print_view(view: View, console: Any, figures: list[Any] | None = None, warnings: bool = True) -> None:
    """Title, summary block, tables, notes, verdict (and warnings when ``warnings``)."""
    from rich.markup import escape

    console.print(f"[bold]{escape(view.title)}[/bold]")
    for line in summary_lines(view.summary, console.width) if view.summary else []:
        console.print(escape(line), highlight=False, overflow="fold")
    for table in view.tables:
        console.print()
        console.print(rich_table(table, console.width))
    for note in view.notes:
        console.print(f"[dim]{escape(note)}[/dim]")
    if view.verdict:
        style = "bold green" if view.verdict_ok else "bold red"
        console.print(f"[{style}]{escape(view.verdict)}[/{style}]")
    for figure in figures or []:
        console.print(f"[dim]plot: {escape(str(figure.path))}[/dim]")
    if warnings:
        print_warnings(view, console)


def print_warnings(view: View, console: Any) -> None:
    from rich.markup import escape

    for warning in view.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(text(warning))}", highlight=False)


def print_warnings_to_stderr(doc: Document) -> None:
    """Every section's warnings on stderr, in yellow on a terminal (whatever stdout gets)."""
    err = make_console(stderr=True)
    for section in doc.sections:
        print_warnings(section.view, err)


class ConsoleRenderer(Renderer):
    """Rich tables. By default plain text with the warnings inline (what a ``.txt`` file
    gets); with ``terminal=True`` styled when stdout is a terminal and without the warnings
    (a command prints those to stderr, see :func:`print_warnings_to_stderr`)."""

    name = "console"
    extensions = (".txt",)
    description = "rich tables for the terminal (plain text in a file)"

    def __init__(self, *, width: int | None = None, terminal: bool = False) -> None:
        self.width = width
        self.terminal = terminal

    def render(self, doc: Document) -> str:
        console = make_console(width=self.width, plain=not self.terminal)
        with console.capture() as capture:
            self._print(doc, console)
        if self.terminal:
            return capture.get()
        return "".join(line.rstrip() + "\n" for line in capture.get().splitlines())

    def _print(self, doc: Document, console: Any) -> None:
        from rich.markup import escape

        inline = not self.terminal
        if doc.title:
            console.rule(f"[bold]{escape(doc.title)}[/bold]")
        if doc.highlights:
            console.print("[bold]What matters[/bold]")
            for topic, group in grouped_highlights(doc.highlights):
                if len(group) > 1:
                    console.print(f"  • [bold]{escape(topic)}[/bold]", highlight=False)
                for item in group:
                    style = _LEVEL_STYLES[item.level]
                    text = (
                        f"  • {escape(topic)}: {escape(item.text)}"
                        if len(group) == 1
                        else f"    – {escape(item.text)}"
                    )
                    console.print(f"[{style}]{text}[/{style}]" if style else text, highlight=False)
            console.print()
        if doc.about is not None:
            print_view(doc.about, console)
            console.print()
        for i, section in enumerate(doc.sections):
            if i:
                console.print()
            self._section(section, console, inline)

    @staticmethod
    def _section(section: Section, console: Any, inline: bool) -> None:
        from rich.markup import escape

        if section.command:
            console.print(f"[dim]$ {escape(section.command)}[/dim]", highlight=False)
        print_view(section.view, console, section.figures, warnings=inline)
