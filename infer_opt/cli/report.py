"""``infer-opt report``: saved results (any mix of kinds) -> one markdown report with its
plots beside it, and optionally the same report as one self-contained HTML file."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import typer

from infer_opt.cli.common import argument, option
from infer_opt.cli.types import InputFile, OutputFile
from infer_opt.errors import InvalidInput, RunFailure
from infer_opt.files import check_writable, keep_unsaved, write_text
from infer_opt.registry import KINDS
from infer_opt.requests import ReportRequest

# Rich keeps single newlines in help text, so each paragraph is one (concatenated) line.
HELP = (
    f"Assemble saved results of any kind ({', '.join(KINDS)}) into one markdown report.\n\n"
    "The report opens with what matters (largest category, best Amdahl opportunity, bound of the top "
    "operators, the fitted roofline, any failed check) and the environment and command of each "
    "result, then one section per result with its tables and plots. Plots go to FILE_assets/ next "
    "to FILE.md, linked relatively (GitHub renders them); --html also writes FILE.html, one "
    "self-contained page with the plots embedded.\n\n"
    "Examples:\n\n"
    "  infer-opt profile --out p.json; infer-opt roofline --out r.json\n\n"
    "  infer-opt report p.json r.json -o report.md --html\n\n"
    "  infer-opt report results/*.json -o - > report.md   (no plots on stdout)\n"
)


def report_format(out: Path, option: str = "--out") -> str:
    """``markdown`` or ``html``, from the file's extension (the renderer registry decides)."""
    from infer_opt.reports.render import extension_map

    fmt = extension_map().get(out.suffix.lower())
    if fmt not in ("markdown", "html"):
        raise InvalidInput(option, str(out), "the report is written as FILE.md or FILE.html (or '-')")
    return fmt


def _report_name(path: Path, option: str) -> None:
    report_format(path, option)


def assets_dir(out: Path) -> Path:
    """``docs/report.md`` -> ``docs/report_assets``."""
    return out.with_name(f"{out.stem}_assets")


ResultsArg = argument(
    list[Path], metavar="RESULT.json...", parse=InputFile(), help="Saved results (any --out FILE.json)."
)
OutOpt = option(
    Path,
    "--out",
    "-o",
    parse=OutputFile(allow_stdout=True, check=_report_name),
    help="The report: FILE.md (plots in FILE_assets/), FILE.html, or '-' for stdout.",
)
HtmlOpt = option(bool, "--html", help="Also write FILE.html: the same report, self-contained.")
TitleOpt = option(str, "--title", help="The report's title.")
NoPlotsOpt = option(bool, "--no-plots", help="Leave the plots out.")


def report(
    results: ResultsArg,
    out: OutOpt = "report.md",
    html: HtmlOpt = False,
    title: TitleOpt = "infer-opt report",
    no_plots: NoPlotsOpt = False,
) -> None:
    from infer_opt.reports.console import ConsoleRenderer
    from infer_opt.reports.render import Document, get_renderer
    from infer_opt.reports.report import run

    to_stdout = str(out) == "-"
    fmt = "markdown" if to_stdout else report_format(out)
    html_only = fmt == "html"
    if html and (to_stdout or html_only):
        raise InvalidInput("--html", str(out), "--html writes FILE.html next to a FILE.md given with --out")
    _check_companions(out, html=html, plots=not (no_plots or to_stdout or html_only))
    request = ReportRequest(results, title=title)
    with tempfile.TemporaryDirectory(prefix="infer-opt-report-") as tmp:
        plots = None if no_plots or to_stdout else (Path(tmp), "") if html_only else assets_dir(out)
        doc = run(request, plots=plots)
        if to_stdout:
            sys.stdout.write(get_renderer("markdown").render(doc))
            return
        files = [(out, get_renderer(fmt).render(doc))]
        if html:
            files.append((out.with_suffix(".html"), get_renderer("html").render(doc)))
        written = _write_all(files)
    summary = Document(sections=[], title=title, highlights=doc.highlights)
    sys.stdout.write(ConsoleRenderer(terminal=True).render(summary))
    n_figures = sum(len(section.figures) for section in doc.sections)
    for path in written:
        typer.echo(f"wrote {path} ({len(doc.sections)} results, {n_figures} plots)", err=True)


def _check_companions(out: Path, *, html: bool, plots: bool) -> None:
    """Before any result is read: the FILE.html beside FILE.md must be writable, and the plots'
    folder FILE_assets/ must be a folder (or creatable)."""
    if html:
        check_writable(out.with_suffix(".html"), "--html")
    folder = assets_dir(out)
    if plots and folder.exists() and not folder.is_dir():
        raise InvalidInput("--out", str(out), f"the plots go to {folder}/, which exists and is not a folder")


def _write_all(files: list[tuple[Path, str]]) -> list[Path]:
    """Write each report file; one that cannot be written is kept in the cache's unsaved/
    folder and the run fails (exit 1) naming both."""
    written, failed = [], []
    for path, text in files:
        try:
            written.append(write_text(path, text))
        except OSError as exc:
            kept = keep_unsaved(path.name, text)
            failed.append(f"{path} ({exc.strerror or type(exc).__name__}; kept in {kept})")
    if failed:
        raise RunFailure(f"could not write {'; '.join(failed)}")
    return written


def register(app: typer.Typer) -> None:
    app.command("report", help=HELP)(report)
