"""Option types that parse themselves: click parameter types built on :mod:`infer_opt.units`.

A command declares ``typer.Option("--compile-cost", click_type=Duration())`` and receives
seconds as a float; a bad value is refused with the project's one-line message (``Error:
--compile-cost: unknown duration unit 'parsecs'; … (got '3parsecs')``, exit 2) before the
command's body runs. Defaults may be given as text (``"5ms"``) or as parsed values.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from infer_opt import units
from infer_opt.cli._click import Context, Parameter, ParamType, UsageError
from infer_opt.errors import InvalidInput


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


def given_path(text: str, option: str, expected: str) -> Path:
    """``text`` as a path; an empty one is refused, asking for ``expected`` ("a file name")."""
    if text.strip() == "":
        raise InvalidInput(option, text, f"empty path; give {expected}")
    return Path(text)


class Parsed(ParamType):
    """Base of the unit-aware types: :meth:`parse` turns the text into the value or raises
    :class:`InvalidInput`, which becomes a :class:`BadParameter`."""

    name = "value"
    #: the value is a comma-separated list: the option given twice is refused, not overwritten
    #: (``infer_opt.cli.app``), unless it is repeatable; ``once`` says what to give instead
    #: (default: all the values in one list)
    listed = False
    once = ""

    def parse(self, text: str, option: str) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def convert(self, value: Any, param: Parameter | None, ctx: Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self.parse(value, flag_of(param))
        except InvalidInput as exc:
            raise BadParameter(str(exc)) from None


class Duration(Parsed):
    """Seconds from ``3s``, ``1.5ms``, ``800us``; a bare number is in ``default_unit``."""

    name = "DURATION"

    def __init__(self, default_unit: str = "s", *, allow_zero: bool = True, most_s: float | None = None):
        self.default_unit, self.allow_zero, self.most_s = default_unit, allow_zero, most_s

    def parse(self, text: str, option: str) -> float:
        seconds = units.parse_duration(
            text, option=option, default_unit=self.default_unit, allow_zero=self.allow_zero
        )
        if self.most_s is not None and seconds > self.most_s:
            raise InvalidInput(option, text, f"must be at most {units.format_duration(self.most_s)}")
        return seconds


class _UnitQuantity(Parsed):
    """A quantity in units: :attr:`parser` (one of :mod:`infer_opt.units`' ``parse_*``) reads it."""

    parser: Callable[..., float]

    def parse(self, text: str, option: str) -> float:
        return type(self).parser(text, option=option)


class Size(_UnitQuantity):
    """Bytes from ``4GiB``, ``512MB`` or a bare number of bytes."""

    name = "SIZE"
    parser = staticmethod(units.parse_size)


class Bandwidth(_UnitQuantity):
    """Bytes per second from ``1.2TB/s`` or a bare number."""

    name = "RATE"
    parser = staticmethod(units.parse_bandwidth)


class FlopRate(_UnitQuantity):
    """FLOP/s from ``312TFLOP/s`` or a bare number."""

    name = "RATE"
    parser = staticmethod(units.parse_flops_rate)


class Number(Parsed):
    """A plain number in an interval (``low``/``high``, open or closed, ``inf`` if allowed)."""

    name = "NUMBER"

    def __init__(self, low: float | None = None, high: float | None = None, **bounds: Any):
        self.bounds = {"low": low, "high": high, **bounds}

    def parse(self, text: str, option: str) -> float:
        return units.parse_float(text, option=option, **self.bounds)


class Count(Parsed):
    """A whole number in ``[low, high]`` (``1e3`` accepted, ``2.5`` refused)."""

    name = "N"

    def __init__(self, low: int | None = 0, high: int | None = None):
        self.low, self.high = low, high

    def parse(self, text: str, option: str) -> int:
        return units.parse_int(text, option=option, low=self.low, high=self.high)


class Fraction(Parsed):
    """A fraction given as ``5%`` or ``0.05``, in ``[low, high]``; a bare number above 1 is
    ambiguous (5 = 500%?) and refused unless ``high`` allows it."""

    name = "FRACTION"

    def __init__(self, low: float = 0.0, high: float | None = 1.0):
        self.low, self.high = low, high

    def parse(self, text: str, option: str) -> float:
        return units.parse_fraction(text, option=option, low=self.low, high=self.high)


class Choice(Parsed):
    """One of a fixed set of words (case-insensitive); the message lists them."""

    def __init__(self, choices: Sequence[str]):
        self.choices = tuple(choices)
        self.name = "|".join(self.choices)

    def parse(self, text: str, option: str) -> str:
        word = text.strip().lower()
        if word not in self.choices:
            raise InvalidInput(option, text, f"expected one of {', '.join(self.choices)}")
        return word


class NumberList(Parsed):
    """``0.9,0.7,0.5`` -> ``(0.9, 0.7, 0.5)``, every item checked; an empty item is an error."""

    name = "X,Y,…"
    listed = True

    def __init__(self, **bounds: Any):
        self.bounds = bounds

    def parse(self, text: str, option: str) -> tuple[float, ...]:
        return tuple(units.parse_float_list(text, option=option, **self.bounds))


class CountList(Parsed):
    """``128,256,512`` -> whole numbers in ``[low, high]``; ``increasing`` asks for a strictly
    increasing list."""

    name = "N,M,…"
    listed = True

    def __init__(self, low: int | None = 0, high: int | None = None, *, increasing: bool = False):
        self.low, self.high, self.increasing = low, high, increasing

    def parse(self, text: str, option: str) -> tuple[int, ...]:
        values = tuple(units.parse_int_list(text, option=option, low=self.low, high=self.high))
        if self.increasing and any(b <= a for a, b in itertools.pairwise(values)):
            raise InvalidInput(option, text, "must be strictly increasing")
        return values


class CountRange(Parsed):
    """``1..8`` (every whole number from 1 to 8) or a list ``1,2,4``, each in ``[low, high]``;
    a list must be increasing, without repeats (``3,2`` or ``2,2`` is refused, never reordered)."""

    name = "A..B"
    listed = True

    def __init__(self, low: int | None = 0, high: int | None = None):
        self.low, self.high = low, high

    def parse(self, text: str, option: str) -> tuple[int, ...]:
        first, dots, last = text.partition("..")
        if not dots:
            values = units.parse_int_list(text, option=option, low=self.low, high=self.high)
            if any(b <= a for a, b in itertools.pairwise(values)):
                order = "list each value once, in increasing order, e.g. 1,2,4 (or A..B)"
                raise InvalidInput(option, text, order)
            return tuple(values)
        a = units.parse_int(first, option=option, low=self.low, high=self.high)
        b = units.parse_int(last, option=option, low=self.low, high=self.high)
        if b < a:
            raise InvalidInput(option, text, "expected A..B with A <= B, e.g. 1..8")
        return tuple(range(a, b + 1))


class InputFile(Parsed):
    """A file to read (``-`` = stdin where ``allow_stdin``); it must exist and be a file."""

    name = "FILE"

    def __init__(self, *, allow_stdin: bool = False):
        self.allow_stdin = allow_stdin

    def parse(self, text: str, option: str) -> Path:
        if text == "-" and self.allow_stdin:
            return Path(text)
        path = given_path(text, option, "a file name")
        try:
            if not path.exists():
                raise InvalidInput(option, text, "file does not exist")
            if path.is_dir():
                raise InvalidInput(option, text, "is a directory, expected a file")
            from infer_opt.files import check_readable_file

            check_readable_file(path, option)
        except OSError as exc:  # a name too long, a loop of links
            raise InvalidInput(option, text, f"cannot use this path ({exc.strerror})") from None
        if not os.access(path, os.R_OK):
            raise InvalidInput(option, text, "cannot read it (permission denied)")
        return path


class OutputFile(Parsed):
    """A file to write, checked before any work starts (:func:`infer_opt.files.check_writable`).
    ``check`` adds a rule on the name (an extension), ``allow_stdout`` accepts ``-``."""

    name = "FILE"

    def __init__(
        self, *, allow_stdout: bool = False, check: Callable[[Path, str], None] | None = None
    ) -> None:
        self.allow_stdout, self.check = allow_stdout, check

    def parse(self, text: str, option: str) -> Path:
        from infer_opt.files import check_writable

        path = check_writable(text, option, allow_stdout=self.allow_stdout)
        if self.check is not None and str(path) != "-":
            self.check(path, option)
        return path


class OutputDir(Parsed):
    """A folder to write several files into (created if its parent exists)."""

    name = "DIR"

    def parse(self, text: str, option: str) -> Path:
        from infer_opt.files import check_writable

        path = given_path(text, option, "a folder name")
        if path.exists() and not path.is_dir():
            raise InvalidInput(option, text, "exists and is not a folder")
        if not path.exists():
            check_writable(path, option)
        return path


def png_name(path: Path, option: str) -> None:
    """Plots are PNG files: any other extension is refused."""
    if path.suffix.lower() != ".png":
        raise InvalidInput(option, str(path), "plots are written as PNG; use a .png file name")


def result_format_name(path: Path, option: str) -> None:
    """``--out`` files: the extension must name a renderer (.json, .csv, .md, .html, .txt)."""
    from infer_opt.reports.render import format_for_path

    format_for_path(path, option)
