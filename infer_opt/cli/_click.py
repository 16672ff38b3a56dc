"""The click that typer uses: typer >= 0.20 vendors it as ``typer._click``, older releases
depend on click itself. Every CLI module takes click's names from here."""

from __future__ import annotations

try:
    from typer import _click as click
    from typer._click.core import Context, Parameter, ParameterSource
    from typer._click.exceptions import ClickException, UsageError
    from typer._click.globals import get_current_context
    from typer._click.types import ParamType
except ImportError:  # pragma: no cover - depends on the installed typer
    import click  # type: ignore[no-redef]
    from click import (  # type: ignore[no-redef]
        ClickException,
        Context,
        Parameter,
        ParamType,
        UsageError,
        get_current_context,
    )
    from click.core import ParameterSource  # type: ignore[no-redef]

__all__ = [
    "ClickException",
    "Context",
    "ParamType",
    "Parameter",
    "ParameterSource",
    "UsageError",
    "click",
    "get_current_context",
]
