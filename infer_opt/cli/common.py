"""Options and output plumbing every command shares: ``--json``/``--format`` on stdout and
``--out``/``--markdown``/``--csv`` files, all through the one renderer registry
(:mod:`infer_opt.reports.render`), and ``--plot`` through the one plot registry
(:data:`PLOTTERS`, also used by ``infer-opt report``)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from infer_opt.errors import InvalidInput
from infer_opt.results import Result, atomic_write_text

DeviceOpt = Annotated[str, typer.Option("--device", help="auto (CUDA if available), cpu, cuda or cuda:N.")]
AutoDtypeOpt = Annotated[
    str,
    typer.Option("--dtype", help="auto (float32 on CPU, bfloat16 on CUDA), float32, bfloat16, float16."),
]
ModelArg = Annotated[
    str,
    typer.Argument(
        help="Built-in name, package.module:factory, path/to/file.py:factory, or hf:<model_type>."
    ),
]
HfConfigOpt = Annotated[
    list[str] | None,
    typer.Option("--hf-config", help="Config override for hf: models, KEY=VALUE (repeatable)."),
]
JsonOpt = Annotated[
    bool,
    typer.Option("--json", help="Print the result as a JSON envelope on stdout, nothing else."),
]
OutOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--out",
        "-o",
        help="Write the result to FILE; the extension picks the format (.json, .csv, .md, .html, .txt). "
        "Repeatable.",
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
FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        help="Print the result on stdout as console (default), markdown, csv, json or html.",
    ),
]

#: result kind -> "module:function(result, path) -> Path | list[Path] | None" writing the
#: plot(s) of a result. The functions live where the curve data is prepared from the cost
#: models (mostly the command's own module); ``infer-opt report`` uses them for saved files.
PLOTTERS: dict[str, str] = {
    "amdahl": "infer_opt.cli.amdahl:_plot",
    "amortize": "infer_opt.cli.amortize:_plot_one",
    "amortize-buckets": "infer_opt.cli.amortize:_plot_buckets",
    "buckets": "infer_opt.reports.plots.buckets:plot_per_bucket",
    "speculative-speedup": "infer_opt.cli.speculative:_plot_curves",
    "roofline": "infer_opt.cli.roofline:_plot",
    "profile": "infer_opt.cli.profile:_plot",
    "compare": "infer_opt.reports.plots.compare:plot",
    "amortize-measure": "infer_opt.cli.amortize_measure:plot_measured",
    "speculative-measure": "infer_opt.cli.speculative_measure:plot_measured",
    "speculative-run": "infer_opt.reports.plots.spec_run:plot_run",
}


def format_for(path: Path) -> str:
    """The output format a file's extension asks for (the renderer registry decides)."""
    from infer_opt.reports.render import format_for_path

    return format_for_path(path)


def plotter(kind: str) -> Callable[[Any, Path], Any] | None:
    """The function that writes ``kind``'s plot(s), or None if the kind has no plot."""
    if kind not in PLOTTERS:
        return None
    module_name, _, func = PLOTTERS[kind].partition(":")
    return getattr(importlib.import_module(module_name), func)


def write_plots(result: Result, path: Path, plot_fn: Callable[[Any, Path], Any] | None = None) -> list[Path]:
    """Write the plot(s) of ``result`` to ``path`` (extra figures beside it, e.g.
    ``FILE-roofline.png``); returns every file written, ``path`` first."""
    fn = plot_fn or plotter(result.KIND)
    if fn is None:
        raise InvalidInput("--plot", str(path), f"results of kind {result.KIND!r} have no plot")
    written = fn(result, path)
    if written is None:
        return [path]
    if isinstance(written, (str, Path)):
        return [Path(written)]
    return [Path(p) for p in written]


def _render(result: Result, fmt: str) -> str:
    """``result`` as a file in format ``fmt`` gets it (used for partial saves during a run)."""
    from infer_opt.reports.render import render

    return render(result, fmt)


def _write(path: Path, text: str) -> None:
    if str(path) == "-":
        sys.stdout.write(text)
    else:
        atomic_write_text(path, text)
        typer.echo(f"wrote {path}", err=True)


def check_png(option: str, path: Path | None) -> None:
    """Plots are PNG files: refuse any other extension before any work is done."""
    if path is not None and path.suffix.lower() != ".png":
        raise InvalidInput(option, str(path), "plots are written as PNG; use a .png file name")


def check_outputs(out: list[Path] | None = None, plot: Path | None = None) -> None:
    """Validate ``--out`` extensions and the ``--plot`` name up front, so a long measurement
    never ends in an error about a file name."""
    for path in out or []:
        format_for(path)
    check_png("--plot", plot)


def emit(
    result: Result,
    *,
    json_out: bool = False,
    out: list[Path] | None = None,
    markdown: Path | None = None,
    csv: Path | None = None,
    fmt: str | None = None,
    plot: Path | None = None,
    plot_fn: Callable[[Any, Path], Any] | None = None,
) -> None:
    """Show a result on stdout (console tables, or ``--format``; ``--json`` = ``--format
    json``) and write the files asked for, each in the format its extension names. Every
    format is one renderer of the same :class:`~infer_opt.reports.render.Document`."""
    from infer_opt.reports.render import Document, get_renderer, renderer_class

    if fmt is not None and json_out and fmt != "json":
        raise InvalidInput("--format", fmt, "--json already asks for json; give one of them")
    stdout_fmt = "json" if json_out else (fmt or "console")
    renderer_class(stdout_fmt)
    if plot is not None and plot_fn is None and plotter(result.KIND) is None:
        raise InvalidInput("--plot", str(plot), "this command has no plot")
    check_outputs(out, plot)
    targets = [(p, format_for(p)) for p in (out or [])]
    if markdown is not None:
        targets.append((markdown, "markdown"))
    if csv is not None:
        targets.append((csv, "csv"))
    doc = Document.of(result)
    if json_out or fmt is not None or not any(str(p) == "-" for p, _ in targets):
        options = {"terminal": True} if stdout_fmt == "console" else {}
        sys.stdout.write(get_renderer(stdout_fmt, **options).render(doc))
    for path, name in targets:
        _write(path, get_renderer(name).render(doc))
    if plot is not None:
        for written in write_plots(result, plot, plot_fn):
            typer.echo(f"wrote {written}", err=True)
