"""Rich terminal renderer of a :class:`View`."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from infer_opt.reports.view import Table, View

_ROW_STYLES = {"best": "bold green", "bad": "red", "muted": "dim"}


def rich_table(table: Table) -> RichTable:
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


def render(view: View, console: Console | None = None) -> None:
    """Print a view: title, summary block, tables, notes, verdict; warnings go to stderr."""
    console = console or Console()
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
    if view.warnings:
        err = Console(stderr=True)
        for warning in view.warnings:
            err.print(f"[yellow]warning:[/yellow] {escape(warning)}")
