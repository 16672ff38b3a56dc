"""The root ``infer-opt`` app: registration only, plus the error boundary."""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperGroup

try:  # typer >= 0.20 vendors click as typer._click; older releases use click itself
    from typer import _click as click
except ImportError:  # pragma: no cover - depends on the installed typer
    import click  # type: ignore[no-redef]

from infer_opt import __version__
from infer_opt.errors import InferOptError


class InferOptGroup(TyperGroup):
    """Turns every error into one ``Error: ...`` line on stderr and an exit code:
    bad input (ours or click's) -> 2, a run-time failure -> 1. ``--debug`` (or
    ``INFER_OPT_DEBUG=1``) re-raises with the traceback instead."""

    def main(
        self, args: Any = None, prog_name: Any = None, standalone_mode: bool = True, **extra: Any
    ) -> Any:  # type: ignore[override]
        argv = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in argv
        try:
            rv = super().main(args=argv, prog_name=prog_name or "infer-opt", standalone_mode=False, **extra)
        except click.ClickException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":
                sys.exit(0)
            if debug or not standalone_mode:
                raise
            click.echo(f"Error: {_one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except (typer.Abort, getattr(click, "Abort", typer.Abort), KeyboardInterrupt):
            if not standalone_mode:
                raise
            click.echo("Aborted.", err=True)
            sys.exit(130)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except InferOptError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            raise _UserError(str(exc), exc.exit_code) from None


class _UserError(click.ClickException):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


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


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors."),
) -> None:
    ctx.obj = {"debug": debug}


def _register() -> None:
    """Register every command, in the order ``infer-opt --help`` lists them. Command modules
    import only light things at import time (torch and friends load inside the commands)."""
    from infer_opt.cli import (
        amdahl,
        amortize,
        amortize_measure,  # noqa: F401 - adds `amortize measure` to the amortize group
        attention,
        attention_check,  # noqa: F401 - adds `attention check` to the attention group
        buckets,
        compare,
        kernels,
        profile,
        report,
        roofline,
        speculative,
        speculative_measure,  # noqa: F401 - adds `speculative measure` to the speculative group
        speculative_verify,  # noqa: F401 - adds `speculative verify` to the speculative group
    )

    profile.register(app)
    kernels.register(app)
    roofline.register(app)
    amdahl.register(app)
    app.add_typer(amortize.app, name="amortize")
    buckets.register(app)
    app.add_typer(speculative.app, name="speculative")
    app.add_typer(attention.app, name="attention")
    report.register(app)
    compare.register(app)


_register()


def main() -> None:
    app()
