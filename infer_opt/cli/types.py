"""Option types that parse themselves: the checkers of :mod:`infer_opt.requests` as click
parameter types, so the command line refuses a value with the same message as the API.

A command declares ``typer.Option("--compile-cost", click_type=Duration())`` and receives
seconds as a float; a bad value is refused with the project's one-line message (``Error:
--compile-cost: unknown duration unit 'parsecs'; … (got '3parsecs')``, exit 2) before the
command's body runs. Defaults may be given as text (``"5ms"``) or as parsed values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infer_opt import requests
from infer_opt.cli._click import Context, Parameter, ParamType, UsageError
from infer_opt.errors import InvalidInput
from infer_opt.requests import given_path

__all__ = ["given_path"]


class BadParameter(UsageError):
    """A value its option's type refused: one line, exit code 2."""

    exit_code = 2


def flag_of(param: Parameter | None) -> str:
    """The name messages use for ``param``: its long flag (``--compile-cost``), else its name."""
    if param is None:
        return "value"
    opts = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
    if opts:
        return max(opts, key=len)
    return (param.human_readable_name or param.name or "value").upper()


class Parsed(requests.Checker, ParamType):
    """A checker as a click type: :meth:`parse` turns the text into the value or raises
    :class:`InvalidInput`, which becomes a :class:`BadParameter`."""

    name = "value"

    def convert(self, value: Any, param: Parameter | None, ctx: Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self.parse(value, flag_of(param))
        except InvalidInput as exc:
            raise BadParameter(str(exc)) from None


def _clicked(checker: type[requests.Checker]) -> Any:
    """``checker`` as a click type (the checker's name, parse and bounds; click's convert)."""
    return type(checker.__name__, (checker, Parsed), {"__doc__": checker.__doc__, "__module__": __name__})


Duration, Size, Bandwidth, FlopRate, Number, Count, Fraction, Choice = map(
    _clicked,
    (requests.Duration, requests.Size, requests.Bandwidth, requests.FlopRate, requests.Number,
     requests.Count, requests.Fraction, requests.Choice),
)  # fmt: skip
NumberList, CountList, CountRange, InputFile, OutputFile, OutputDir, TracePath = map(
    _clicked,
    (requests.NumberList, requests.CountList, requests.CountRange, requests.InputFile,
     requests.OutputFile, requests.OutputDir, requests.TracePath),
)  # fmt: skip
Warmup, Reps, Sweep, PartSpec, Bounds = map(
    _clicked, (requests.Warmup, requests.Reps, requests.Sweep, requests.PartSpec, requests.Bounds)
)
VerifyModel, KMax = map(_clicked, (requests.VerifyModel, requests.KMax))  # group 1: calculators
# group 3: traces and engine settings
TraceInput, CostSource = map(_clicked, (requests.TraceInput, requests.CostSource))


def png_name(path: Path, option: str) -> None:
    """Plots are PNG files: any other extension is refused."""
    if path.suffix.lower() != ".png":
        raise InvalidInput(option, str(path), "plots are written as PNG; use a .png file name")


def result_format_name(path: Path, option: str) -> None:
    """``--out`` files: the extension must name a renderer (.json, .csv, .md, .html, .txt)."""
    from infer_opt.reports.render import format_for_path

    format_for_path(path, option)
