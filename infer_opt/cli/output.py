"""The one output-options type every command shares, and the decorator that gives a command
its output options.

A command body parses nothing by hand and formats nothing: it receives parsed options (see
:mod:`infer_opt.cli.types`), calls one core function and returns the result::

    @with_output(plot=True)
    def amdahl(fraction: ..., speedup: ...) -> Result:
        return model.combined(...)

:func:`with_output` adds ``--json``, ``--out/-o``, ``--markdown``, ``--csv``, ``--format``
(and ``--plot`` where the kind has a plot) to the command, checks every output path before the
body runs, and afterwards shows the result on stdout and writes the files, each through the
one renderer registry (:mod:`infer_opt.reports.render`). A body that writes partial results
during a long run declares an ``output: Output`` parameter and calls :meth:`Output.save_partial`.
A parameter whose annotation is a dataclass is an option group: its fields (each annotated with
an option alias, with its default) become the command's options in its place, and the body
receives the dataclass (``shape: StepShape = StepShape()`` in ``profile`` and ``predict``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
import sys
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import typer

from infer_opt.cli.common import option
from infer_opt.cli.types import Choice, OutputFile, png_name, result_format_name
from infer_opt.errors import InferOptError, InvalidInput, RunFailure
from infer_opt.notices import Notice
from infer_opt.registry import RENDERERS
from infer_opt.results import Result

#: ``--format`` values: the renderer registry's names
FORMATS = tuple(RENDERERS)

PlotFn = Callable[[Any, Path], Any]


@dataclass(frozen=True)
class Output:
    """Where and how a result goes: stdout in one format, files by extension, plots."""

    json: bool = False
    out: tuple[Path, ...] = ()
    markdown: Path | None = None
    csv: Path | None = None
    format: str | None = None
    plot: Path | None = None

    def check(self) -> None:
        """Refuse combinations that would mix two documents on stdout."""
        to_stdout = [opt for opt, p in (("--markdown", self.markdown), ("--csv", self.csv)) if _is_stdout(p)]
        if self.json and self.format not in (None, "json"):
            raise InvalidInput("--format", self.format, "--json already asks for json; give one of them")
        if (self.json or self.format) and to_stdout:
            first = "--json" if self.json else "--format"
            raise InvalidInput(to_stdout[0], "-", f"{first} already prints to stdout; write this to a file")
        if len(to_stdout) > 1:
            raise InvalidInput(to_stdout[1], "-", f"{to_stdout[0]} already prints to stdout")
        self.check_distinct(())

    def check_distinct(self, others: tuple[tuple[str, Path | None], ...]) -> None:
        """Refuse two outputs on one file (``--out X --plot X``, ``--out X --trace X``): the
        second would replace the first. ``others`` are the command's own outputs (option, path)."""
        from infer_opt.files import same_file_key

        named = [("--out", p) for p in self.out]
        named += [("--markdown", self.markdown), ("--csv", self.csv), ("--plot", self.plot), *others]
        seen: dict[str, str] = {}
        for flag, path in named:
            if path is None or _is_stdout(path):
                continue
            key = same_file_key(path)
            if key in seen:
                raise InvalidInput(flag, str(path), f"{seen[key]} already writes this file; give another")
            seen[key] = flag

    @property
    def stdout_format(self) -> str:
        return "json" if self.json else (self.format or "console")

    def targets(self) -> list[tuple[Path, str]]:
        """Every file to write with its format (stdout targets included, as ``-``)."""
        from infer_opt.reports.render import format_for_path

        found = [(p, format_for_path(p)) for p in self.out]
        if self.markdown is not None:
            found.append((self.markdown, "markdown"))
        if self.csv is not None:
            found.append((self.csv, "csv"))
        return found

    def save_partial(self, result: Result) -> None:
        """Write ``result`` (a run so far) to every ``--out`` file, so an interrupt keeps it."""
        from infer_opt.files import write_text
        from infer_opt.reports.render import render

        for path, fmt in self.targets():
            if not _is_stdout(path):
                try:
                    with interrupts_deferred():
                        write_text(path, render(result, fmt))
                except OSError:  # the run goes on; emit() tries again and keeps the result if it fails
                    continue

    def emit(
        self,
        result: Result,
        plot_fn: PlotFn | None = None,
        view: dict[str, Any] | None = None,
        warnings: tuple[Notice, ...] = (),
    ) -> None:
        """Show ``result`` on stdout, write its files and plots, print its warnings (and
        ``warnings`` about its inputs) to stderr. A file that cannot be written after the work
        does not lose the result: it is kept in the cache folder and the failure names both
        (exit 1)."""
        from infer_opt.reports.render import Document, get_renderer

        doc = Document.of(result, options=view)
        doc.sections[0].view.warnings.extend(warnings)
        targets = self.targets()
        stdout_error: OSError | None = None
        if self.json or self.format is not None or not any(_is_stdout(p) for p, _ in targets):
            options = {"terminal": True} if self.stdout_format == "console" else {}
            stdout_error = _stdout_failure(
                lambda: _stdout(get_renderer(self.stdout_format, **options).render(doc))
            )
        failed: list[tuple[Path, OSError]] = (
            [] if stdout_error is None else [(Path(STDOUT_NAME), stdout_error)]
        )
        for path, fmt in targets:
            _write(path, lambda fmt=fmt: get_renderer(fmt).render(doc), failed)
        if self.plot is not None:
            _plots(result, self.plot, plot_fn, failed)
        if any(section.view.warnings for section in doc.sections):  # rich only when there is one
            from infer_opt.reports.console import print_warnings_to_stderr

            print_warnings_to_stderr(doc)
        if failed:
            raise _kept(result, failed)


@dataclass
class Outcome:
    """What a command body may return instead of a bare result: the result, plus an error
    to raise once it is shown and saved, an exit code, or its own plot function."""

    result: Result
    error: InferOptError | None = None
    exit_code: int = 0
    plot: PlotFn | None = field(default=None)
    #: result files to write besides ``--out`` (e.g. the file a run resumed from)
    also_write: tuple[Path, ...] = ()
    #: display options for the view (``profile``: ``top``, ``by``); never stored in the result
    view: dict[str, Any] = field(default_factory=dict)
    #: what reading the inputs noticed (extra columns in a file): shown with the result's own
    warnings: tuple[Notice, ...] = ()


def _is_stdout(path: Path | None) -> bool:
    return path is not None and str(path) == "-"


#: how a failed stdout (``> /dev/full``) is named in the error
STDOUT_NAME = "stdout"


def _stdout_failure(show: Callable[[], None]) -> OSError | None:
    """Run ``show``; an OSError writing stdout (a full device) is returned, not raised, so the
    files are still written and the result is kept, with one line saying so (exit 1)."""
    try:
        show()
    except BrokenPipeError:
        return None
    except OSError as exc:
        with contextlib.suppress(Exception):  # drop what could not be flushed
            sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
        return exc
    return None


def _stdout(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `infer-opt ... | head`: the reader left; nothing to report
        pass


def _write(path: Path, text: Callable[[], str], failed: list[tuple[Path, OSError]]) -> None:
    from infer_opt.files import write_text

    try:
        write_text(path, text())
    except OSError as exc:
        failed.append((path, exc))
        return
    if not _is_stdout(path):
        typer.echo(f"wrote {path}", err=True)


def _plots(result: Result, path: Path, plot_fn: PlotFn | None, failed: list[tuple[Path, OSError]]) -> None:
    from infer_opt.reports.plots import write_plots

    try:
        written = write_plots(result, path, plot_fn)
    except OSError as exc:
        failed.append((path, exc))
        return
    for item in written:
        typer.echo(f"wrote {item}", err=True)


def _kept(result: Result, failed: list[tuple[Path, OSError]]) -> RunFailure:
    from infer_opt.files import keep_unsaved
    from infer_opt.results import dumps

    what = "; ".join(f"{p} ({exc.strerror or type(exc).__name__})" for p, exc in failed)
    try:
        kept = keep_unsaved(f"{result.KIND}.json", dumps(result) + "\n")
    except OSError as exc:
        return RunFailure(f"could not write {what}, nor keep the result in the cache ({exc.strerror})")
    return RunFailure(f"could not write {what}; the result is kept in {kept}")


# ----------------------------------------------------------------------------- the decorator


def _output_parameters(*, plot: bool, csv: bool, markdown: bool) -> list[inspect.Parameter]:
    kw = inspect.Parameter.KEYWORD_ONLY
    opts: list[tuple[str, Any, Any]] = [
        (
            "json_out",
            option(bool, "--json", help="Print the result as a JSON envelope on stdout, nothing else."),
            False,
        ),
        (
            "out",
            option(
                list[Path] | None,
                "--out",
                "-o",
                parse=OutputFile(check=result_format_name),
                help="Write the result to FILE; the extension picks the format (.json, .csv, .md, "
                ".html, .txt). Repeatable.",
            ),
            None,
        ),
    ]
    if markdown:
        opts.append(_file_option("markdown", "--markdown", "Write a markdown report to FILE ('-' = stdout)."))
    if csv:
        opts.append(_file_option("csv", "--csv", "Write the main table as CSV to FILE ('-' = stdout)."))
    opts.append(
        (
            "fmt",
            option(
                str | None,
                "--format",
                parse=Choice(FORMATS),
                help="Print the result on stdout as console (default), markdown, csv, json or html.",
            ),
            None,
        )
    )
    if plot:
        opts.append(
            (
                "plot",
                option(
                    Path | None,
                    "--plot",
                    parse=OutputFile(check=png_name),
                    help="Write the plot(s) to FILE.png.",
                ),
                None,
            )
        )
    return [inspect.Parameter(name, kw, default=default, annotation=ann) for name, ann, default in opts]


def _file_option(name: str, flag: str, help_text: str) -> tuple[str, Any, Any]:
    ann = option(Path | None, flag, parse=OutputFile(allow_stdout=True), help=help_text)
    return name, ann, None


#: the stdout a command body's own output belongs on while its prints are sent to stderr
_TOOL_STDOUT: list[Any] = []


def tool_stdout() -> Any:
    """The tool's stdout inside a command body (whose ``print`` goes to stderr): where the body
    writes what it shows the user itself, such as its help."""
    return _TOOL_STDOUT[-1] if _TOOL_STDOUT else sys.stdout


def with_output(
    *, plot: bool = False, csv: bool = True, markdown: bool = True
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the shared output options; its body returns a Result (or an
    :class:`Outcome`, or None when it printed nothing)."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(func, eval_str=True)
        takes_output = "output" in signature.parameters
        own, groups = _expand_groups([p for name, p in signature.parameters.items() if name != "output"])
        added = _output_parameters(plot=plot, csv=csv, markdown=markdown)

        @functools.wraps(func)
        def command(**kwargs: Any) -> None:
            for name, group in groups.items():
                kwargs[name] = group(**{f.name: kwargs.pop(f.name) for f in dataclasses.fields(group)})
            output = Output(
                json=kwargs.pop("json_out"),
                out=tuple(kwargs.pop("out") or ()),
                markdown=kwargs.pop("markdown", None),
                csv=kwargs.pop("csv", None),
                format=kwargs.pop("fmt"),
                plot=kwargs.pop("plot", None),
            )
            output.check()
            # stdout belongs to the tool (the --json document, the table): whatever the body's
            # code — a model factory's print(), a library's chatter — writes there goes to stderr
            _TOOL_STDOUT.append(sys.stdout)
            try:
                with contextlib.redirect_stdout(sys.stderr):
                    returned = func(**kwargs, output=output) if takes_output else func(**kwargs)
            finally:
                _TOOL_STDOUT.pop()
            _finish(output, returned)

        params = own + added
        command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__  # typer must see the new signature, not the body's
        return command

    return decorate


def _expand_groups(params: list[inspect.Parameter]) -> tuple[list[inspect.Parameter], dict[str, type]]:
    """``params`` with each option group (a parameter annotated with a dataclass) replaced by
    the group's fields as parameters, and the groups by parameter name."""
    expanded: list[inspect.Parameter] = []
    groups: dict[str, type] = {}
    for param in params:
        group = param.annotation
        if not (isinstance(group, type) and dataclasses.is_dataclass(group)):
            expanded.append(param)
            continue
        groups[param.name] = group
        hints = typing.get_type_hints(group, include_extras=True)
        expanded += [
            inspect.Parameter(f.name, param.kind, default=f.default, annotation=hints[f.name])
            for f in dataclasses.fields(group)
        ]
    return expanded, groups


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C while a finished result is being shown and written waits until it is done (then
    the interrupt goes on, exit 130): a result is never lost, nor a file left half-written, to
    an interrupt that came after the work. (Main thread only: elsewhere a no-op.)"""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _finish(output: Output, returned: Any) -> None:
    if returned is None:
        return
    outcome = returned if isinstance(returned, Outcome) else Outcome(returned)
    extra = tuple(p for p in outcome.also_write if p not in output.out)
    if extra:
        output = replace(output, out=(*output.out, *extra))
    with interrupts_deferred():
        output.emit(outcome.result, outcome.plot, outcome.view, outcome.warnings)
    if outcome.error is not None:
        raise outcome.error
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)
