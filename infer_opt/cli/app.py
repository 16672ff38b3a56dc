"""The root ``infer-opt`` app: registration only, plus the error boundary."""

from __future__ import annotations

# isort: off
from infer_opt.cli import _starting  # first: Ctrl-C while importing is "Aborted.", exit 130

# isort: on

import contextlib
import importlib
import os
import sys
import traceback
import warnings
from typing import Any

import typer
import typer.main
from typer.core import TyperGroup

from infer_opt import __version__
from infer_opt.cli._click import click
from infer_opt.cli.common import RENAMED, option, renamed_spellings
from infer_opt.errors import InferOptError, InvalidInput, out_of_memory


class InferOptGroup(TyperGroup):
    """Turns every error into one ``Error: ...`` line on stderr and an exit code:
    bad input (ours or click's) -> 2, a run-time failure -> 1. ``--debug`` (or
    ``INFER_OPT_DEBUG=1``) re-raises with the traceback instead."""

    def main(
        self, args: Any = None, prog_name: Any = None, standalone_mode: bool = True, **extra: Any
    ) -> Any:  # type: ignore[override]
        argv = list(sys.argv[1:] if args is None else args)
        # --debug may stand anywhere (`infer-opt profile m.py:f --debug`): take it out here
        debug = "--debug" in argv or os.environ.get("INFER_OPT_DEBUG", "") not in ("", "0")
        argv = [a for a in argv if a != "--debug"]
        self.debug = debug
        if not debug:  # numbers are checked where they are made; numpy's own warnings are noise
            warnings.simplefilter("ignore", RuntimeWarning)
        try:
            rv = super().main(args=argv, prog_name=prog_name or "infer-opt", standalone_mode=False, **extra)
        except click.ClickException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":
                sys.exit(0)
            if not standalone_mode:
                raise
            _fail(f"Error: {_one_line(exc.format_message())}", exc.exit_code, debug)
        except (typer.Abort, getattr(click, "Abort", typer.Abort), KeyboardInterrupt):
            if not standalone_mode:
                raise
            _fail("Aborted.", 130, debug)
        except InferOptError as exc:  # raised with --debug, which keeps the traceback
            _fail(f"Error: {_one_line(str(exc))}", exc.exit_code, True)
        except (Exception, MemoryError) as exc:  # out of memory outside a profiler's guard
            if out_of_memory(exc) is None:
                raise
            _fail(f"Error: {out_of_memory_message(exc)}", 1, debug)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *(n for n in super().list_commands(ctx) if n not in COMMANDS)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> Any:
        if cmd_name in COMMANDS:
            return _load_command(cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # typer would make it a silent exit 130: say "Aborted." (main)
            raise typer.Abort() from None
        except InferOptError as exc:
            if getattr(self, "debug", False):
                raise
            raise _UserError(str(exc), exc.exit_code) from None
        except (Exception, MemoryError) as exc:
            if out_of_memory(exc) is None or getattr(self, "debug", False):
                raise
            raise _UserError(out_of_memory_message(exc), 1) from None


def _fail(message: str, code: int, debug: bool) -> None:
    """Print the one-line message (after the traceback with ``--debug``) and exit ``code``:
    ``--debug`` adds detail, never changes the exit code."""
    if debug and sys.exc_info()[0] is not None:
        traceback.print_exc()
    click.echo(message, err=True)
    sys.exit(code)


#: command name -> the modules that define it, imported only when the command is used (so
#: ``infer-opt amdahl`` never pays for importing the profilers, or even the other
#: calculators). The first module either has ``register(app)`` (one command) or ``app`` (a
#: group); the others add subcommands to that group when imported. Order = ``--help`` order.
COMMANDS: dict[str, tuple[str, ...]] = {
    "profile": ("infer_opt.cli.profile",),
    "kernels": ("infer_opt.cli.kernels",),
    "roofline": ("infer_opt.cli.roofline",),
    "calibrate": ("infer_opt.cli.calibrate",),
    "predict": ("infer_opt.cli.predict",),
    "validate": ("infer_opt.cli.validate",),
    "trace": ("infer_opt.cli.trace",),
    "amdahl": ("infer_opt.cli.amdahl",),
    "amortize": ("infer_opt.cli.amortize", "infer_opt.cli.amortize_measure"),
    "buckets": ("infer_opt.cli.buckets",),
    "speculative": (
        "infer_opt.cli.speculative",
        "infer_opt.cli.speculative_verify",
        "infer_opt.cli.speculative_measure",
        "infer_opt.cli.speculative_run",
    ),
    "attention": ("infer_opt.cli.attention", "infer_opt.cli.attention_check"),
    "report": ("infer_opt.cli.report",),
    "compare": ("infer_opt.cli.compare",),
    "ab": ("infer_opt.cli.ab",),
    "comm": ("infer_opt.cli.comm",),
    "tune": ("infer_opt.cli.tune",),
}

_LOADED: dict[str, Any] = {}


def _load_command(name: str) -> Any:
    """Import a command's modules and build its click command (cached)."""
    if name not in _LOADED:
        modules = [importlib.import_module(m) for m in COMMANDS[name]]
        main_module = modules[0]
        if hasattr(main_module, "register"):
            holder = typer.Typer(add_completion=False)
            main_module.register(holder)
            command = typer.main.get_command(holder)
        else:
            command = typer.main.get_command(main_module.app)
        command.name = name
        _reflow_help(command)
        _name_flags_in_errors(command)
        _refuse_repeated_lists(command)
        _take_old_spellings(command, name)
        _LOADED[name] = command
    return _LOADED[name]


def _reflow_help(command: Any) -> None:
    """Join the wrapped lines of each prose paragraph of a command's help (and its
    subcommands'), so the help renderer wraps them to the terminal; indented lines
    (examples) keep their line breaks."""
    if command.help:
        paragraphs = command.help.strip("\n").split("\n\n")
        command.help = "\n\n".join(
            p if any(line.startswith(" ") for line in p.splitlines()) else " ".join(p.split())
            for p in paragraphs
        )
    for sub in getattr(command, "commands", {}).values():
        _reflow_help(sub)


def _name_flags_in_errors(command: Any) -> None:
    """The core names parameters (``compile_cost``); a command's user knows its flags
    (``--compile-cost``). Wrap each leaf command so an :class:`InvalidInput` about one of its
    parameters names the flag instead."""
    for sub in getattr(command, "commands", {}).values():
        _name_flags_in_errors(sub)
    invoke = command.invoke  # a group's own options (`amortize --lengths`) are named too

    def invoke_naming_flags(ctx: click.Context) -> Any:
        try:
            return invoke(ctx)
        except InvalidInput as exc:
            flag = flag_for(ctx.command, exc.option)
            if flag is None or ctx.invoked_subcommand is not None:
                raise
            raise InvalidInput(flag, exc.value, exc.expected) from exc

    command.invoke = invoke_naming_flags


def _refuse_repeated_lists(command: Any) -> None:
    """An option that takes a comma-separated list once (``--bounds 128,256``), given twice,
    would keep only its last list: refuse it instead (one line, exit 2), naming both. Wraps each
    command's parsing; a group checks only its own options, before its subcommand's name."""
    for sub in getattr(command, "commands", {}).values():
        _refuse_repeated_lists(sub)
    parse_args = command.parse_args

    def parse_args_once(ctx: click.Context, args: list[str]) -> Any:
        tokens = args[: args.index("--")] if "--" in args else list(args)
        subcommands = getattr(command, "commands", None)
        if subcommands:
            tokens = tokens[: next((i for i, t in enumerate(tokens) if t in subcommands), len(tokens))]
        for param in command.params:
            listed = getattr(param.type, "listed", False) and not getattr(param, "multiple", True)
            given = _occurrences(param.opts, tokens) if param.param_type_name == "option" and listed else []
            if len(given) > 1:
                flag = max(param.opts, key=len)
                once = getattr(param.type, "once", "") or f"put all its values in one {flag}, comma-separated"
                expected = f"given more than once; {once}"
                raise InvalidInput(flag, " ".join(given), expected)
        return parse_args(ctx, args)

    command.parse_args = parse_args_once


def _take_old_spellings(command: Any, path: str) -> None:
    """A renamed option's old spelling (``common.RENAMED``) still works for one release: each
    command's arguments are rewritten before parsing, with a line on stderr."""
    for name, sub in getattr(command, "commands", {}).items():
        _take_old_spellings(sub, f"{path} {name}")
    if path in RENAMED:
        parse_args = command.parse_args
        command.parse_args = lambda ctx, args: parse_args(ctx, renamed_spellings(path, list(args)))


def _occurrences(flags: list[str], tokens: list[str]) -> list[str]:
    """Each use of one of ``flags`` in ``tokens``, as written (``--bounds 128,256``, ``--bounds=512``)."""
    out = []
    for i, token in enumerate(tokens):
        if token in flags:
            out.append(f"{token} {tokens[i + 1]}" if i + 1 < len(tokens) else token)
        elif any(token.startswith(f + "=") for f in flags if f.startswith("--")):
            out.append(token)
        elif any(token.startswith(f) and len(token) > 2 for f in flags if len(f) == 2 and f[1] != "-"):
            out.append(token)  # -b512
    return out


def flag_for(command: Any, parameter: str) -> str | None:
    """The flag of ``command`` that sets ``parameter`` (a snake_case name), or None when the
    name already is a flag or the command has no such option."""
    if parameter.startswith("-"):
        return None
    name = parameter.replace("-", "_")
    dashed = "--" + name.replace("_", "-")
    # an exact name first: `alphas` is --alphas even where --alpha comes earlier
    for wanted in (name, name.removesuffix("s")):
        for param in command.params:
            flags = [o for o in param.opts if o.startswith("--")]
            if param.name == wanted or (wanted == name and dashed in flags):
                return max(flags, key=len) if flags else (param.human_readable_name or param.name).upper()
    return None


class _UserError(click.ClickException):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def out_of_memory_message(exc: BaseException) -> str:
    """One line for an allocation that failed: what it tried to allocate and what is kept."""
    size = out_of_memory(exc)
    tried = f" (tried to allocate {size})" if size else ""
    return (
        f"out of memory{tried}; results already written (--out files, saved sweeps) are kept. "
        "Lower the sizes (--batch, --seq-len, --context, sample or file sizes) and rerun"
    )


def _one_line(message: str) -> str:
    return " ".join(message.split())


app = typer.Typer(
    name="infer-opt",
    cls=InferOptGroup,
    help=(
        "Measure where inference time goes, fit the device roofline, and turn measurements "
        "into decisions (Amdahl, compile amortization, shape buckets, speculative decoding)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"infer-opt {__version__}")
        raise typer.Exit()


VersionOpt = option(bool, "--version", callback=_version, is_eager=True, help="Show the version and exit.")
DebugOpt = option(
    bool, "--debug", help="Show tracebacks instead of one-line errors (may follow any command)."
)


@app.callback()
def _root(version: VersionOpt = False, debug: DebugOpt = False) -> None:
    """Measure where inference time goes, fit the device roofline, and turn measurements
    into decisions."""


def main() -> None:
    try:
        app()
    except SystemExit as exc:
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # a rank of a torchrun job
            leave_rank(exc.code)
        raise


def leave_rank(code: object) -> None:
    """End a torchrun rank now, with ``code``, skipping the interpreter's finalization: gloo's
    worker threads can still hold work objects then, and tearing them down aborts the process
    (SIGABRT, "terminate called without an active exception"; pytorch/pytorch#179291) after
    the rank's work is done and its process group destroyed."""
    status = code if isinstance(code, int) else (0 if code is None else 1)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)


_starting.started()
