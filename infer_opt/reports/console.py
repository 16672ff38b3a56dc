"""Rich terminal renderer. Colours only when stdout is a terminal; warnings go to stderr
(in yellow) when the renderer is printing for a command, inline otherwise."""

from __future__ import annotations

import os
import sys
from typing import Any

from infer_opt.reports.messages import text
from infer_opt.reports.render import Document, Renderer, Section, grouped_highlights
from infer_opt.reports.view import Table, View

_ROW_STYLES = {"best": "bold green", "bad": "red", "muted": "dim"}
_LEVEL_STYLES = {"bad": "bold red", "good": "green", "info": ""}


def rich_table(table: Table) -> Any:
    from rich.markup import escape
    from rich.table import Table as RichTable

    out = RichTable(
        title=escape(table.title),
        caption=escape(table.caption) if table.caption else None,
        title_justify="left",
    )
    for col in table.columns:
        out.add_column(escape(col.header), justify=col.align, no_wrap=col.align == "right")
    for i, row in enumerate(table.rows):
        out.add_row(
            *(escape(col.format(row.get(col.key))) for col in table.columns),
            style=_ROW_STYLES.get(table.highlight.get(i, "")),
        )
    return out


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
    if view.summary:
        width = max(len(k) for k, _ in view.summary)
        for key, value in view.summary:
            console.print(f"  {escape(key.ljust(width))}  {escape(value)}", highlight=False)
    for table in view.tables:
        console.print()
        console.print(rich_table(table))
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
