"""Options and output plumbing every command shares: one ``--json`` envelope, one way to
write ``--out``/``--markdown``/``--csv``/``--plot`` files."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from infer_opt.errors import InvalidInput
from infer_opt.results import Result, atomic_write_text, dumps

JsonOpt = Annotated[
    bool,
    typer.Option("--json", help="Print the result as a JSON envelope on stdout, nothing else."),
]
OutOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--out",
        "-o",
        help="Write the result to FILE; the extension picks the format (.json, .csv, .md). Repeatable.",
    ),
]
MarkdownOpt = Annotated[
    Path | None,
    typer.Option("--markdown", help="Write a markdown report to FILE ('-' = stdout)."),
]
CsvOpt = Annotated[
    Path | None,
    typer.Option("--csv", help="Write the main table as CSV to FILE ('-' = stdout)."),
]
PlotOpt = Annotated[Path | None, typer.Option("--plot", help="Write a plot to FILE.png.")]

_FORMATS = {".json": "json", ".csv": "csv", ".md": "markdown", ".markdown": "markdown"}


def format_for(path: Path) -> str:
    fmt = _FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InvalidInput("--out", str(path), "extension must be one of .json, .csv, .md")
    return fmt


def _render(result: Result, fmt: str) -> str:
    if fmt == "json":
        return dumps(result) + "\n"
    from infer_opt.reports.view import build_view

    view = build_view(result)
    if fmt == "csv":
        from infer_opt.reports.serialize import render_csv

        return render_csv(view)
    from infer_opt.reports.markdown import render

    return render(view)


def _write(path: Path, text: str) -> None:
    if str(path) == "-":
        sys.stdout.write(text)
    else:
        atomic_write_text(path, text)
        typer.echo(f"wrote {path}", err=True)


def console() -> Any:
    from rich.console import Console

    width = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "120"))
    return Console(width=width)


def emit(
    result: Result,
    *,
    json_out: bool = False,
    out: list[Path] | None = None,
    markdown: Path | None = None,
    csv: Path | None = None,
    plot: Path | None = None,
    plot_fn: Callable[[Any, Path], Any] | None = None,
) -> None:
    """Show a result (console table, or the JSON envelope with ``--json``) and write the
    files asked for."""
    if plot is not None and plot_fn is None:
        raise InvalidInput("--plot", str(plot), "this command has no plot")
    if plot is not None and plot.suffix.lower() != ".png":
        raise InvalidInput("--plot", str(plot), "plots are written as PNG; use a .png file name")
    targets = [(p, format_for(p)) for p in (out or [])]
    if markdown is not None:
        targets.append((markdown, "markdown"))
    if csv is not None:
        targets.append((csv, "csv"))
    if json_out:
        sys.stdout.write(dumps(result) + "\n")
    elif not any(str(p) == "-" for p, _ in targets):
        from infer_opt.reports.console import render
        from infer_opt.reports.view import build_view

        render(build_view(result), console())
    for path, fmt in targets:
        _write(path, _render(result, fmt))
    if plot is not None and plot_fn is not None:
        plot_fn(result, plot)
        typer.echo(f"wrote {plot}", err=True)
