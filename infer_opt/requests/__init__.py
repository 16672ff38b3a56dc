"""One request per command (torch.utils.benchmark's ``Timer`` is the same object whether a
script or ``Compare`` drives it): a frozen dataclass of the command's options, named as its
flags (``--seq-len`` -> ``seq_len``) with their defaults, that checks every field as it is
made, and one ``run(request)`` in the core. The CLI and :mod:`infer_opt.api` only build
requests, so they cannot drift.

The checkers here are the one set every value passes: text from the command line (the CLI's
option types, :mod:`infer_opt.cli.types`, are these checkers as click types) and Python
values from the API alike, with the same message. A refusal names the field as a flag
(``--batch``); the API says it as its parameter (``batch``). Light: no torch, no click."""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from infer_opt import units
from infer_opt.errors import InvalidInput

# ----------------------------------------------------------------------------- checkers


class Checker:
    """Checks one value, given as text (parsed by :meth:`parse`) or as one of :attr:`takes`
    (checked by the same :meth:`parse`, so both are refused alike); :meth:`check` returns the
    value the core uses, and takes that value back unchanged."""

    name = "TEXT"
    #: the value is a comma-separated list: the option given twice is refused, not overwritten
    #: (``infer_opt.cli.app``), unless it is repeatable; ``once`` says what to give instead
    listed = False
    once = ""
    #: the Python types a value may have besides text, and what to call them in a refusal
    takes: tuple[type, ...] = ()
    what = "a string"
    #: text is a way to give it from Python too ("200ms", "auto"); else only the command line's
    text = True

    def parse(self, text: Any, option: str) -> Any:
        return text

    def check(self, value: Any, option: str) -> Any:
        if isinstance(value, os.PathLike) and not isinstance(value, self.takes):
            value = os.fspath(value)
        if (isinstance(value, str) and not self.text) or (
            not isinstance(value, str)
            and ((isinstance(value, bool) and bool not in self.takes) or not isinstance(value, self.takes))
        ):
            raise InvalidInput(option, value, f"must be {self.what}, not {type(value).__name__}")
        return self.parse(value, option)


class Text(Checker):
    """Any string (a model, a device): the core says what it does not know."""


class Typed(Checker):
    """A Python value of one of ``kinds`` (a list of parts, a result: the API's), taken as it is."""

    def __init__(self, kinds: tuple[type, ...], what: str):
        self.takes, self.what = kinds, what

    def check(self, value: Any, option: str) -> Any:
        if (isinstance(value, bool) and bool not in self.takes) or not isinstance(value, self.takes):
            raise InvalidInput(option, value, f"must be {self.what}, not {type(value).__name__}")
        return value


class Flag(Checker):
    """True or False (a ``--x/--no-x`` flag)."""

    takes, what = (bool,), "True or False"

    def parse(self, text: Any, option: str) -> bool:
        if isinstance(text, str):
            raise InvalidInput(option, text, f"must be {self.what}, not str")
        return text


class Strings(Checker):
    """A repeatable option's strings, as a tuple: one string is one item (its comma-separated
    items where ``comma``, as ``--only a,b``)."""

    takes, what = (list, tuple), "a string or a list of strings"

    def __init__(self, *, comma: bool = False):
        self.comma = comma

    def check(self, value: Any, option: str) -> Any:
        return () if value is None else super().check(value, option)

    def parse(self, text: Any, option: str) -> tuple[str, ...]:
        if isinstance(text, str):
            return tuple(v.strip() for v in text.split(",")) if self.comma else (text,)
        return tuple(itertools.chain.from_iterable(self.parse(Text().check(v, option), option) for v in text))


class Each(Checker):
    """A repeatable option's values, each passing ``checker``, as a tuple."""

    takes, what = (list, tuple), "a list"

    def __init__(self, checker: Checker):
        self.checker = checker
        self.name = checker.name

    def check(self, value: Any, option: str) -> Any:
        items = [value] if isinstance(value, (str, os.PathLike)) else super().check(value, option)
        return tuple(self.checker.check(item, option) for item in items)

    def parse(self, text: Any, option: str) -> Any:
        return text


class Duration(Checker):
    """Seconds from ``3s``, ``1.5ms``, ``800us``; a bare number is in ``default_unit`` as text,
    in seconds as a Python number (as the value the command line parsed is)."""

    name, takes, what = "DURATION", (int, float), "a duration"

    def __init__(self, default_unit: str = "s", *, allow_zero: bool = True, most_s: float | None = None):
        self.default_unit, self.allow_zero, self.most_s = default_unit, allow_zero, most_s

    def parse(self, text: Any, option: str) -> float:
        unit = self.default_unit if isinstance(text, str) else "s"  # from Python: seconds, always
        seconds = units.parse_duration(text, option=option, default_unit=unit, allow_zero=self.allow_zero)
        if self.most_s is not None and seconds > self.most_s:
            raise InvalidInput(option, text, f"must be at most {units.format_duration(self.most_s)}")
        return seconds


class _UnitQuantity(Checker):
    """A quantity in units: :attr:`parser` (one of :mod:`infer_opt.units`' ``parse_*``) reads it."""

    parser: Callable[..., float]
    takes, what = (int, float), "a number"

    def parse(self, text: Any, option: str) -> float:
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


class Number(Checker):
    """A plain number in an interval (``low``/``high``, open or closed, ``inf`` if allowed)."""

    name, takes, what = "NUMBER", (int, float), "a number"
    text = False

    def __init__(self, low: float | None = None, high: float | None = None, **bounds: Any):
        self.bounds = {"low": low, "high": high, **bounds}

    def parse(self, text: Any, option: str) -> float:
        return units.parse_float(text, option=option, **self.bounds)


class Count(Checker):
    """A whole number in ``[low, high]`` (``1e3`` accepted, ``2.5`` refused)."""

    name, takes, what = "N", (int,), "an integer"
    text = False

    def __init__(self, low: int | None = 0, high: int | None = None):
        self.low, self.high = low, high

    def parse(self, text: Any, option: str) -> int:
        return units.parse_int(text, option=option, low=self.low, high=self.high)


class Fraction(Checker):
    """A fraction given as ``5%`` or ``0.05``, in ``[low, high]``; a bare number above 1 is
    ambiguous (5 = 500%?) and refused unless ``high`` allows it."""

    name, takes, what = "FRACTION", (int, float), "a number"
    text = False

    def __init__(self, low: float = 0.0, high: float | None = 1.0):
        self.low, self.high = low, high

    def parse(self, text: Any, option: str) -> float:
        return units.parse_fraction(text, option=option, low=self.low, high=self.high)


class Choice(Checker):
    """One of a fixed set of words (case-insensitive); the message lists them."""

    def __init__(self, choices: Sequence[str]):
        self.choices = tuple(choices)
        self.name = "|".join(self.choices)

    def parse(self, text: Any, option: str) -> str:
        word = text.strip().lower()
        if word not in self.choices:
            raise InvalidInput(option, text, f"expected one of {', '.join(self.choices)}")
        return word


class _Listed(Checker):
    """A comma-separated list; a Python list or tuple is checked as its items joined."""

    listed, takes, what = True, (list, tuple), "a list of numbers"

    def check(self, value: Any, option: str) -> Any:
        if isinstance(value, (list, tuple)):
            for item in value:
                Number().check(item, option)
            value = ",".join(str(v) for v in value)
        return super().check(value, option)


class NumberList(_Listed):
    """``0.9,0.7,0.5`` -> ``(0.9, 0.7, 0.5)``, every item checked; an empty item is an error."""

    name = "X,Y,…"

    def __init__(self, **bounds: Any):
        self.bounds = bounds

    def parse(self, text: Any, option: str) -> tuple[float, ...]:
        return tuple(units.parse_float_list(text, option=option, **self.bounds))


class CountList(_Listed):
    """``128,256,512`` -> whole numbers in ``[low, high]``; ``increasing`` asks for a strictly
    increasing list."""

    name = "N,M,…"

    def __init__(self, low: int | None = 0, high: int | None = None, *, increasing: bool = False):
        self.low, self.high, self.increasing = low, high, increasing

    def parse(self, text: Any, option: str) -> tuple[int, ...]:
        values = tuple(units.parse_int_list(text, option=option, low=self.low, high=self.high))
        if self.increasing and any(b <= a for a, b in itertools.pairwise(values)):
            raise InvalidInput(option, text, "must be strictly increasing")
        return values


class CountRange(_Listed):
    """``1..8`` (every whole number from 1 to 8) or a list ``1,2,4``, each in ``[low, high]``;
    a list must be increasing, without repeats (``3,2`` or ``2,2`` is refused, never reordered)."""

    name = "A..B"

    def __init__(self, low: int | None = 0, high: int | None = None):
        self.low, self.high = low, high

    def parse(self, text: Any, option: str) -> tuple[int, ...]:
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


def given_path(text: str, option: str, expected: str) -> Path:
    """``text`` as a path; an empty one is refused, asking for ``expected`` ("a file name")."""
    if text.strip() == "":
        raise InvalidInput(option, text, f"empty path; give {expected}")
    return Path(text)


class InputFile(Checker):
    """A file to read (``-`` = stdin where ``allow_stdin``); it must exist and be a file."""

    name, takes, what = "FILE", (Path,), "a file path"

    def __init__(self, *, allow_stdin: bool = False):
        self.allow_stdin = allow_stdin

    def parse(self, text: Any, option: str) -> Path:
        text = str(text)
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


class OutputFile(Checker):
    """A file to write, checked before any work starts (:func:`infer_opt.files.check_writable`).
    ``check`` adds a rule on the name (an extension), ``allow_stdout`` accepts ``-``."""

    name, takes, what = "FILE", (Path,), "a file path"

    def __init__(
        self, *, allow_stdout: bool = False, check: Callable[[Path, str], None] | None = None
    ) -> None:
        self.allow_stdout, self.rule = allow_stdout, check

    def parse(self, text: Any, option: str) -> Path:
        from infer_opt.files import check_writable

        path = check_writable(str(text), option, allow_stdout=self.allow_stdout)
        if self.rule is not None and str(path) != "-":
            self.rule(path, option)
        return path


class OutputDir(Checker):
    """A folder to write several files into (created if its parent exists)."""

    name, takes, what = "DIR", (Path,), "a folder path"

    def parse(self, text: Any, option: str) -> Path:
        from infer_opt.files import check_writable

        path = given_path(str(text), option, "a folder name")
        if path.exists() and not path.is_dir():
            raise InvalidInput(option, str(text), "exists and is not a folder")
        if not path.exists():
            check_writable(path, option)
        return path


class TracePath(Checker):
    """``--trace``: a file for one rank, or a folder (one ``rank<r>.json`` per rank) with ``--tp``."""

    name, takes, what = "PATH", (Path,), "a file or folder path"

    def parse(self, text: Any, option: str) -> Path:
        from infer_opt.files import check_writable

        path = given_path(str(text), option, "a file or folder name")
        if path.is_dir():
            return path
        return check_writable(str(text), option)


class Warmup(Checker):
    """A count of calls (``5``) or a duration (``200ms``): ``(calls, None)`` or ``(None, seconds)``."""

    name, takes, what = "N|DURATION", (int, float, tuple), "a count or a duration"

    def __init__(self, most_calls: int, most_s: float):
        self.most_calls, self.most_s = most_calls, most_s

    def parse(self, text: Any, option: str) -> tuple[int | None, float | None]:
        if isinstance(text, tuple):
            calls, seconds = text
            return (None, self.parse(seconds, option)[1]) if calls is None else self.parse(calls, option)
        if isinstance(text, int) or re.fullmatch(r"\s*-?\d+\s*", str(text)):
            return units.parse_int(text, option=option, low=0, high=self.most_calls), None
        return None, Duration(most_s=self.most_s).parse(text, option)


class Reps(Checker):
    """A count of repetitions, or ``auto`` (None: repeat until the spread settles)."""

    name, takes, what = "N|auto", (int, type(None)), "a count or 'auto'"

    def __init__(self, most: int):
        self.most = most

    def parse(self, text: Any, option: str) -> int | None:
        if text is None or (isinstance(text, str) and text.strip().lower() == "auto"):
            return None
        return units.parse_int(text, option=option, low=1, high=self.most)


class Resume(InputFile):
    """A saved result (``--resume``) of result kind ``kind``: the file's result, loaded
    (``what`` names it in the refusal, e.g. "a kernels result")."""

    def __init__(self, kind: str, what: str):
        super().__init__()
        self.kind, self.what_kind = kind, what

    def check(self, value: Any, option: str) -> Any:
        from infer_opt.registry import result_class

        return value if isinstance(value, result_class(self.kind)) else super().check(value, option)

    def parse(self, text: Any, option: str) -> Any:
        from infer_opt.results import load_result

        path = super().parse(text, option)
        if path.suffix.lower() != ".json":
            raise InvalidInput(option, str(path), "expected the .json file a run wrote with --out FILE.json")
        return load_result(path, expect=(self.kind,), option=option, what=self.what_kind).result


class PartSpec(Checker):
    """``NAME=F:S`` -> :class:`~infer_opt.cost_models.amdahl.Part` (``S`` may be ``inf``); a
    Part is taken as it is (it checks itself)."""

    name, what = "NAME=F:S", "a Part or 'NAME=F:S'"

    def check(self, value: Any, option: str) -> Any:
        from infer_opt.cost_models.amdahl import Part

        self.takes = (Part,)
        return value if isinstance(value, Part) else super().check(value, option)

    def parse(self, text: Any, option: str) -> Any:
        from infer_opt.cost_models.amdahl import MIN_SPEEDUP, Part

        name, sep, rest = text.partition("=")
        f_text, sep2, s_text = rest.partition(":")
        if not sep or not sep2 or not name.strip():
            raise InvalidInput(option, text, "expected NAME=FRACTION:SPEEDUP, e.g. attention=0.4:4")
        where = f"{option} {name.strip()}"
        fraction = units.parse_float(f_text, option=where, low=0, high=1)
        speedup = units.parse_float(s_text, option=where, low=MIN_SPEEDUP, allow_inf=True)
        return Part(name.strip(), fraction, speedup)


class Bounds(_Listed):
    """``128,256,512`` -> (128, 256, 512): positive whole numbers, strictly increasing."""

    name = "N,M,…"

    def parse(self, text: Any, option: str) -> tuple[int, ...]:
        from infer_opt.cost_models.bucketing import validate_bounds

        return validate_bounds(units.parse_int_list(text, option=option, low=1), option)


class Lengths(InputFile):
    """A length sample: a file (``-`` = stdin), or the lengths themselves (the API's)."""

    def __init__(self) -> None:
        super().__init__(allow_stdin=True)

    def check(self, value: Any, option: str) -> Any:
        if not isinstance(value, (list, tuple)):
            return super().check(value, option)
        for item in value:
            Count(0).check(item, option)
        return tuple(value)


# ----------------------------------------------------------------------------- requests


def option(default: Any = MISSING, check: Checker | None = None, *, positional: bool = False) -> Any:
    """A request field: its default (the CLI option's; none for a required argument) and the
    checker its value passes (a string by default)."""
    return field(default=default, kw_only=not positional, metadata={"check": check or Text()})


@dataclass(frozen=True)
class Request:
    """Base of the requests: every field checked, and replaced by its checked value, as the
    request is made; ``None`` passes where it is the default."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.default is None:
                continue
            flag = "--" + f.name.replace("_", "-")
            object.__setattr__(self, f.name, f.metadata["check"].check(value, flag))


@dataclass(frozen=True)
class AmdahlRequest(Request):
    """``infer-opt amdahl``: one part (``fraction``, ``speedup``) or several, added overhead, a
    target to solve for."""

    fraction: float | None = option(None, Number(0, 1), positional=True)
    speedup: float | None = option(None, Number(1e-9, allow_inf=True), positional=True)
    part: tuple[Any, ...] | None = option(None, Each(PartSpec()))
    added: float = option(0.0, Number(0))
    target_speedup: float | None = option(None, Number(0, low_open=True))


@dataclass(frozen=True)
class BucketsRequest(Request):
    """``infer-opt buckets``: padding waste of a length sample under ``bounds``, or the
    ``optimize`` bounds with the least."""

    file: Any = option(check=Lengths(), positional=True)
    bounds: tuple[int, ...] | None = option(None, Bounds(), positional=True)
    batch_size: int = option(1, Count(1, 1 << 20))
    allow_unbucketed: bool = option(False, Flag())
    optimize: int | None = option(None, Count(1))
    cost: str = option("linear", Choice(("linear", "quadratic")))
    compile_cost: float | None = option(None, Duration("s"))
    token_cost: float | None = option(None, Duration("us"))
    requests: int | None = option(None, Count(1))


@dataclass(frozen=True)
class AttentionMemoryRequest(Request):
    """``infer-opt attention memory``: score-matrix memory, HBM traffic and FLOPs of attention."""

    tq: int = option(check=Count(1, 1 << 30))
    tk: int = option(check=Count(1, 1 << 30))
    heads: int = option(check=Count(1, 1 << 30))
    head_dim: int = option(check=Count(1, 1 << 30))
    batch: int = option(1, Count(1, 1 << 30))
    dtype: str = option("float16")
    causal: bool = option(False, Flag())


@dataclass(frozen=True)
class AttentionWindowRequest(Request):
    """``infer-opt attention window``: the output error bound ``2·δ·M`` of dropping keys."""

    dropped_mass: float = option(check=Number(0, 1, high_open=True), positional=True)
    value_norm: float = option(check=Number(0), positional=True)


@dataclass(frozen=True)
class AttentionCheckRequest(Request):
    """``infer-opt attention check``: the attention kernels' exactness over the masks."""

    tq: int = option(4, Count(1, 8192))
    tk: int = option(128, Count(1, 8192))
    heads: int = option(4, Count(1, 128))
    head_dim: int = option(32, Count(1, 1024))
    block_size: int = option(32, Count(1, 8192))
    window: int = option(48, Count(1, 8192))
    seed: int = option(0, Count(0))
    dtype: str = option("float32", Choice(("float32", "float64")))


#: the most tokens, sequences or cache length a step takes (``--batch``, ``--seq-len``, …)
MAX_SIZE = 1 << 20
#: the most timed (or untimed) calls a step-timing command takes
MAX_REPS = 10_000
#: the most independent runs (``--runs``)
MAX_RUNS = 1000
#: the most ranks a tensor-parallel step is spread over
MAX_TP = 64
MODES = ("prefill", "decode", "generate")
DTYPES = ("auto", "float32", "bfloat16", "float16")
THREADS = Count(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class StepRequest(Request):
    """A model step (``profile``, ``predict``): the model, where it runs and its shape."""

    model: str = option("tiny", positional=True)
    batch: int = option(1, Count(1, MAX_SIZE))
    seq_len: int = option(128, Count(1, MAX_SIZE))
    mode: str = option("prefill", Choice(MODES))
    context: int = option(128, Count(0, MAX_SIZE))
    new_tokens: int = option(32, Count(1, MAX_SIZE))
    device: str = option("auto")
    dtype: str = option("auto")
    threads: int | None = option(None, THREADS)
    hf_config: tuple[str, ...] = option((), Strings())

    def shape(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("batch", "seq_len", "mode", "context", "new_tokens")}


class Fit(InputFile):
    """A roofline fit file, or False for no roofline columns (the API's; the CLI always has one)."""

    takes = (Path, bool)

    def parse(self, text: Any, option: str) -> Any:
        if text is True:
            return None
        return text if text is False else super().parse(text, option)


@dataclass(frozen=True)
class ProfileRequest(StepRequest):
    """``infer-opt profile`` on one rank (``--tp`` starts ranks: the command line's)."""

    warmup: int = option(3, Count(0, MAX_REPS))
    reps: int = option(20, Count(1, MAX_REPS))
    runs: int = option(1, Count(1, MAX_RUNS))
    roofline: Path | None = option(None, Fit())
    trace: Path | None = option(None, TracePath())

    def settings(self) -> Any:
        from infer_opt.steps import Shape, StepSettings

        return StepSettings(
            self.model, self.device, self.dtype, Shape(**self.shape()), warmup=self.warmup, reps=self.reps,
            runs=self.runs, threads=self.threads, hf_config=self.hf_config,
        )  # fmt: skip


class Sweep(Checker):
    """``batch=1,2,4`` (or ``seq-len=…``, ``context=…``): the parameter and its values."""

    name, takes, what = "PARAM=V1,V2,…", (tuple,), "a string such as 'batch=1,2,4'"
    listed = True
    once = "predict sweeps one parameter, its values in one --sweep (validate --grid takes several)"

    def parse(self, text: Any, option: str) -> tuple[str, tuple[int, ...]]:
        from infer_opt.profilers.predict import parse_sweep

        if isinstance(text, tuple):
            name, values = text
            text = f"{str(name).replace('_', '-')}={','.join(str(v) for v in values)}"
        try:
            return parse_sweep(text, high=MAX_SIZE)
        except InvalidInput as exc:
            raise InvalidInput(option, text, exc.expected) from None


@dataclass(frozen=True)
class PredictRequest(StepRequest):
    """``infer-opt predict``: a step's time from a calibration, without running it."""

    calibration: Path | None = option(None, InputFile())
    sweep: tuple[str, tuple[int, ...]] | None = option(None, Sweep())
    tp: int = option(1, Count(1, MAX_TP))
    comm: Path | None = option(None, InputFile())


@dataclass(frozen=True)
class ValidateRequest(StepRequest):
    """``infer-opt validate`` over a shape grid (``--against`` a trace: the command line's)."""

    mode: tuple[str, ...] | None = option(None, Each(Choice(MODES)))
    new_tokens: int = option(8, Count(1, MAX_SIZE))
    grid: tuple[tuple[str, tuple[int, ...]], ...] | None = option(None, Each(Sweep()))
    calibration: Path | None = option(None, InputFile())
    warmup: int = option(3, Count(0, MAX_REPS))
    reps: int = option(10, Count(1, MAX_REPS))
    passes: int = option(1, Count(1, 10))


@dataclass(frozen=True)
class CalibrateRequest(Request):
    """``infer-opt calibrate``: the operator calibration (``--from-trace``: the command line's)."""

    device: str = option("auto")
    dtype: str = option("auto")
    threads: int | None = option(None, THREADS)
    only: tuple[str, ...] | None = option(None, Strings())
    shapes: str = option("standard", Choice(("standard", "tiny")))
    reps: int = option(5, Count(3, 1000))
    continue_: bool = option(False, Flag())


#: the kernel suite's bounds on its timing options
MAX_KERNEL_REPS = 100_000
MAX_WARMUP_S = 600.0


@dataclass(frozen=True)
class SuiteRequest(Request):
    """The kernel suite's device and timing options (``kernels``, ``roofline`` measuring now)."""

    device: str = option("auto")
    dtype: str = option("auto", Choice(DTYPES))
    suite: str = option("quick", Choice(("quick", "full")))
    l2_flush: bool = option(False, Flag())
    warmup: Any = option(5, Warmup(MAX_KERNEL_REPS, MAX_WARMUP_S))
    reps: Any = option(20, Reps(MAX_KERNEL_REPS))
    threads: int | None = option(None, THREADS)

    def settings(self, max_time_s: float | None = None, cuda_graphs: bool = False) -> Any:
        """The timing options as :class:`SuiteSettings` (``reps`` None = adaptive, capped at 2 s)."""
        from infer_opt.results.kernels import SuiteSettings

        calls, seconds = self.warmup
        if self.reps is None and max_time_s is None:
            max_time_s = 2.0
        return SuiteSettings(
            warmup=calls, warmup_time_s=seconds, reps=self.reps, max_time_s=max_time_s,
            flush_cache=self.l2_flush, cuda_graphs=cuda_graphs,
        )  # fmt: skip


@dataclass(frozen=True)
class KernelsRequest(SuiteRequest):
    """``infer-opt kernels``: time the kernel suite."""

    only: tuple[str, ...] | None = option(None, Strings(comma=True))
    cuda_graphs: bool = option(False, Flag())
    max_time: float | None = option(None, Duration(allow_zero=False, most_s=24 * 3600.0))
    runs: int = option(1, Count(1, MAX_RUNS))
    resume: Any = option(None, Resume("kernels", "a kernels result"))

    def settings(self, max_time_s: float | None = None, cuda_graphs: bool = False) -> Any:
        return super().settings(self.max_time, self.cuda_graphs)


class Measurements(InputFile):
    """Kernel measurements: a saved kernels result or CSV, or a kernels result itself (the API's)."""

    def check(self, value: Any, option: str) -> Any:
        from infer_opt.results.kernels import KernelSuiteResult

        return value if isinstance(value, KernelSuiteResult) else super().check(value, option)


@dataclass(frozen=True)
class RooflineRequest(SuiteRequest):
    """``infer-opt roofline``: fit the empirical roofline to measurements, or measure now."""

    measurements: Any = option(None, Measurements(), positional=True)
    bootstrap: int = option(200, Count(0, 100_000))
    seed: int = option(0, Count(0))
    peak_flops: float | None = option(None, FlopRate())
    peak_bandwidth: float | None = option(None, Bandwidth())
    fit_on: str = option("auto")
    save: Path | None = option(None, OutputFile())
    no_save: bool = option(False, Flag())


# ----------------------------------------------------------------------------- group 2: measuring

#: the most timed (or untimed) calls per message size (``comm``)
MAX_COMM_REPS = 100_000
COLLECTIVES = ("all", "all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv")
DIST_BACKENDS = ("auto", "gloo", "nccl")


@dataclass(frozen=True)
class CommRequest(Request):
    """``infer-opt comm`` on this rank (``--nproc`` starts the ranks: the command line's)."""

    collective: tuple[str, ...] | None = option(None, Each(Choice(COLLECTIVES)))
    min_size: float = option(4.0, Size())
    max_size: float | None = option(None, Size())
    factor: int = option(2, Count(2, 1024))
    warmup: int = option(5, Count(0, MAX_COMM_REPS))
    reps: int = option(20, Count(1, MAX_COMM_REPS))
    device: str = option("auto")
    dtype: str = option("float32", Choice(("float32", "bfloat16", "float16")))
    dist_backend: str = option("auto", Choice(DIST_BACKENDS))
    timeout: float = option(60.0, Duration("s", allow_zero=False, most_s=24 * 3600.0))
    no_save: bool = option(False, Flag())


class Folder(Checker):
    """A folder to write into, made with its parents when the run starts; a file is refused."""

    name, takes, what = "DIR", (Path,), "a folder path"

    def __init__(self, holds: str):
        self.holds = holds

    def parse(self, text: Any, option: str) -> Path:
        path = given_path(str(text), option, "a folder name")
        if path.exists() and not path.is_dir():
            raise InvalidInput(option, str(text), f"is a file; give a folder for {self.holds}")
        return path


#: the most rounds ``ab`` alternates
MAX_AB_ROUNDS = 1000


@dataclass(frozen=True)
class AbRequest(Request):
    """``infer-opt ab``: two command lines (``base``, ``new``: the commands it runs, as text)
    alternated for ``rounds`` rounds, then compared."""

    base: str = option()
    new: str = option()
    rounds: int = option(3, Count(1, MAX_AB_ROUNDS))
    base_env: tuple[str, ...] = option((), Strings())
    new_env: tuple[str, ...] = option((), Strings())
    dir: Path | None = option(None, Folder("the rounds' results"))
    threshold: float = option(0.05, Fraction(0, 1))
    significance: float = option(0.05, Number(0, 1, low_open=True, high_open=True))
    force: bool = option(False, Flag())
    save_floor: bool = option(True, Flag())
    seed: int = option(0, Count(0))


#: more trials than this would run for minutes; the checks need far fewer
MAX_TRIALS = 10_000_000
#: a vocabulary or draft larger than these turns the exact enumeration into hours; the check
#: is about the rule, which small cases settle
MAX_VOCAB = 4096
MAX_VERIFY_K = 16


@dataclass(frozen=True)
class SpeculativeVerifyRequest(Request):
    """``infer-opt speculative verify``: the sampler's exactness over random p, q."""

    vocab: int = option(4, Count(2, MAX_VOCAB))
    k: int = option(3, Count(1, MAX_VERIFY_K))
    trials: int = option(20000, Count(1, MAX_TRIALS))
    seed: int = option(0, Count(0))
    alpha_target: float | None = option(None, Number(0, 1, low_open=True, high_open=True))


#: the longest draft ``speculative measure`` and ``run`` time
MAX_K = 64


@dataclass(frozen=True)
class SpeculativeMeasureRequest(Request):
    """``infer-opt speculative measure``: the costs of a target/draft pair, and the decisions
    for one of ``alpha``, ``alphas`` or ``metrics`` (a serving engine's counters)."""

    target: str = option("gpt2-small")
    draft: str = option("tiny")
    k_max: int = option(8, Count(1, MAX_K))
    context: int = option(128, Count(0, MAX_SIZE))
    device: str = option("auto")
    dtype: str = option("auto")
    warmup: int = option(2, Count(0, MAX_REPS))
    reps: int = option(10, Count(1, MAX_REPS))
    alpha: float | None = option(None, Number(0, 1))
    alphas: tuple[float, ...] | None = option(None, NumberList(low=0, high=1))
    metrics: Path | None = option(None, InputFile())
    k: int | None = option(None, Count(1, MAX_K))
    simulate_acceptance: bool = option(False, Flag())
    rounds: int = option(32, Count(1, 100_000))
    seed: int = option(0, Count(0))


@dataclass(frozen=True)
class SpeculativeRunRequest(Request):
    """``infer-opt speculative run``: speculative decoding run and timed against plain decoding."""

    target: str = option("gpt2-small")
    draft: str = option("self:4")
    k: int | None = option(None, Count(1, MAX_K))
    sweep_k: tuple[int, ...] | None = option(None, CountRange(1, MAX_K))
    new_tokens: int = option(64, Count(1, 100_000))
    greedy: bool = option(False, Flag())
    temperature: float | None = option(None, Number(0, low_open=True))
    prompt_len: int = option(32, Count(1, MAX_SIZE))
    seed: int = option(0, Count(0))
    threads: int | None = option(None, THREADS)
    device: str = option("auto")
    dtype: str = option("auto")
    warmup: int = option(1, Count(0, MAX_REPS))
    reps: int = option(5, Count(1, MAX_REPS))
    cost_reps: int = option(20, Count(1, MAX_REPS))


# ----------------------------------------------------------------------------- group 1: calculators


@dataclass(frozen=True)
class AmortizeRequest(Request):
    """``infer-opt amortize``: one shape (seconds from Python; ``eager``/``compiled`` bare
    numbers are ms on the command line) or a bucket CSV, its calls from a length sample."""

    compile_cost: float | None = option(None, Duration("s"), positional=True)
    eager: float | None = option(None, Duration("ms"), positional=True)
    compiled: float | None = option(None, Duration("ms"), positional=True)
    calls: int | None = option(None, Count(0), positional=True)
    buckets: Path | None = option(None, InputFile(allow_stdin=True))
    lengths: Path | None = option(None, InputFile(allow_stdin=True))
    requests: int | None = option(None, Count(1))


class VerifyModel(Checker):
    """``"12ms + 0.5ms*k"`` -> ``(0.012, 0.0005)`` seconds; from Python ``(A, B)`` in seconds."""

    name, takes, what = "A+B*k", (tuple,), "'A + B*k' or a pair (A, B) of seconds"

    def parse(self, text: Any, option: str) -> tuple[float, float]:
        from infer_opt.cost_models.speculative import parse_verify_model

        if isinstance(text, tuple):
            if len(text) != 2:
                raise InvalidInput(option, text, "expected a pair (A, B) of seconds")
            return (Duration().check(text[0], option), Duration().check(text[1], option))
        return parse_verify_model(text, option)


class KMax(Count):
    """``--k-max KMAX``: the sweep always starts at k = 1, so a range (``speculative run``'s
    ``--sweep-k A..B``) is refused with what to give instead."""

    name = "KMAX"

    def parse(self, text: Any, option: str) -> int:
        _, dots, last = str(text).partition("..")
        if dots:
            example = last.strip() if last.strip().isdigit() else "8"
            raise InvalidInput(option, text, f"the sweep runs k = 1..KMAX: give KMAX alone, e.g. {example}")
        return super().parse(text, option)


#: the longest draft a round is modelled with (:data:`infer_opt.cost_models.speculative.MAX_K`)
MAX_DRAFT = 1024


@dataclass(frozen=True)
class SpecCostsRequest(Request):
    """The per-round costs of a speculative calculator (seconds from Python; bare numbers are
    ms on the command line): c_v = c_t (said as assumed) without ``verify_cost(_model)``."""

    target_cost: float | None = option(None, Duration("ms", allow_zero=False))
    draft_cost: float | None = option(None, Duration("ms"))
    verify_cost: float | None = option(None, Duration("ms"))
    verify_cost_model: tuple[float, float] | None = option(None, VerifyModel())
    overhead: float = option(0.0, Duration("ms"))

    def costs(self) -> Any:
        from infer_opt.results.speculative import Costs

        c_t, c_d, c_v, model = self.target_cost, self.draft_cost, self.verify_cost, self.verify_cost_model
        if c_t is None:
            raise InvalidInput(
                "--target-cost", "missing", "give c_t, the cost of one plain target step (e.g. 10ms)"
            )
        if c_d is None:
            raise InvalidInput("--draft-cost", "missing", "give c_d, the cost of one draft token (e.g. 1ms)")
        if c_v is not None and model is not None:
            raise InvalidInput("--verify-cost", c_v, "give --verify-cost or --verify-cost-model, not both")
        if c_v is not None:
            return Costs(c_t, c_d, c_v, 0.0, self.overhead)
        if model is not None:
            return Costs(c_t, c_d, model[0], model[1], self.overhead)
        return Costs(c_t, c_d, c_t, 0.0, self.overhead, verify_assumed=True)


@dataclass(frozen=True)
class SpecSpeedupRequest(SpecCostsRequest):
    """``infer-opt speculative speedup``: E[N] and the speedup of one draft length (or a sweep)."""

    k: int | None = option(None, Count(1, MAX_DRAFT))
    alpha: float | None = option(None, Number(0, 1))
    alphas: tuple[float, ...] | None = option(None, NumberList(low=0, high=1))
    budget: int | None = option(None, Count(1))
    k_max: int | None = option(None, KMax(1, MAX_DRAFT))


@dataclass(frozen=True)
class AcceptanceRequest(Request):
    """``infer-opt speculative acceptance``: draft tokens ``x ~ q`` against the target ``p``."""

    p: tuple[float, ...] | None = option(None, NumberList(allow_inf=True), positional=True)
    q: tuple[float, ...] | None = option(None, NumberList(allow_inf=True), positional=True)
    p_file: Path | None = option(None, InputFile())
    q_file: Path | None = option(None, InputFile())
    logits: bool = option(False, Flag())
    p_temperature: float | None = option(None, Number(0, low_open=True))
    q_temperature: float | None = option(None, Number(0, low_open=True))
    normalize: bool = option(False, Flag())


@dataclass(frozen=True)
class PlansRequest(Request):
    """``infer-opt speculative plans``: the long-run cost per committed token of logged plans."""

    file: Path = option(check=InputFile(), positional=True)


@dataclass(frozen=True)
class FromMetricsRequest(SpecCostsRequest):
    """``infer-opt speculative from-metrics``: per-position acceptance from serving counters
    (given, a JSON ``file`` or a ``prometheus`` snapshot, ``before`` another), with costs the speedup."""

    drafts: int | None = option(None, Count(1))
    accepted_per_position: tuple[int, ...] | None = option(None, CountList(0))
    draft_tokens: int | None = option(None, Count(0))
    file: Path | None = option(None, InputFile())
    prometheus: Path | None = option(None, InputFile())
    before: Path | None = option(None, InputFile())
    model_name: str | None = option(None)


@dataclass(frozen=True)
class AmortizeMeasureRequest(Request):
    """``infer-opt amortize measure``: compile cost and steady times per (batch, bound) bucket of
    a model, the calls per bucket given or from a length sample; ``resume`` a saved sweep."""

    model: str = option("tiny", positional=True)
    bounds: tuple[int, ...] = option((32, 64), Bounds())
    batch_sizes: tuple[int, ...] = option((1,), CountList(1, 1 << 16))
    calls_per_bucket: tuple[int, ...] | None = option(None, CountList(0))
    lengths: Path | None = option(None, InputFile(allow_stdin=True))
    requests: int | None = option(None, Count(1))
    device: str = option("auto")
    dtype: str = option("auto")
    warmup: int = option(3, Count(0, MAX_REPS))
    reps: int = option(20, Count(1, MAX_REPS))
    backend: str = option("inductor", Choice(("inductor", "eager", "aot_eager", "cudagraphs")))
    cuda_graphs: bool | None = option(None, Flag())
    resume: Any = option(None, Resume("amortize-measure", "an amortize measure result"))
    hf_config: tuple[str, ...] = option((), Strings())
# --------------------------------------------------------------- group 3: traces and engine settings


class TraceInput(Checker):
    """A trace file, or a folder of one file per rank: it must exist (the reader checks the rest).
    On the command line (an argument's name, upper case) refused as ``TRACE``, as the reader is."""

    name, takes, what = "path", (Path,), "a trace file or folder (a str or os.PathLike)"

    def parse(self, text: Any, option: str) -> Path:
        from infer_opt.trace.reader import PARAM

        option = PARAM if option.isupper() else option
        path = given_path(str(text), option, "a trace file or folder")
        if not path.exists():
            raise InvalidInput(option, str(text), "file does not exist")
        if not path.is_dir() and not os.access(path, os.R_OK):
            raise InvalidInput(option, str(text), "cannot read it (permission denied)")
        return path


class Steps(Checker):
    """``N-M`` or ``N`` (ProfilerStep numbers) -> (N, M); the pair is taken back as it is."""

    name, takes, what = "N-M", (tuple,), "'N-M' or 'N' (ProfilerStep numbers)"

    def parse(self, text: Any, option: str) -> tuple[int, int] | None:
        from infer_opt.trace.analyze import parse_steps

        return parse_steps(text if isinstance(text, str) else "-".join(map(str, text)))


class Edits(Strings):
    """``--what-if`` edits, each parsed (bad syntax refused before a trace is read)."""

    def parse(self, text: Any, option: str) -> tuple[str, ...]:
        from infer_opt.trace.user_edits import parse_edit

        if isinstance(text, str):  # a list: each item comes here
            parse_edit(text)
        return super().parse(text, option)


#: a Dask scheduler: its address, or (the API's) a ``distributed.Client``
SCHEDULER = Text()
SCHEDULER.takes, SCHEDULER.what = (object,), "a scheduler address or a distributed.Client"


@dataclass(frozen=True)
class TraceRequest(Request):
    """``infer-opt trace`` and ``load_trace``: the traces (files, or folders of ranks) and how
    they are analyzed (``--augment`` and the display are the command line's)."""

    paths: tuple[Path, ...] = option(check=Each(TraceInput()), positional=True)
    steps: tuple[int, int] | None = option(None, Steps())
    device: str | None = option(None)
    peak_flops: float | None = option(None, FlopRate())
    peak_bandwidth: float | None = option(None, Bandwidth())
    hta_compat: bool = option(False, Flag())
    causal_flops: str = option("half", Choice(("half", "full")))
    matmul_fraction: float = option(0.7, Fraction(low=0.01))
    capture: tuple[Path, ...] | None = option(None, Each(InputFile()))
    scheduler: Any = option(None, SCHEDULER)
    workers: int | None = option(None, Count(1, 1024))
    strict: bool = option(False, Flag())
    roofline: Path | None = option(None, InputFile())
    joint_replay: bool = option(False, Flag())
    what_if: tuple[str, ...] = option((), Edits())
    kernels_from: Path | None = option(None, InputFile())


class CostSource(Checker):
    """``FILE``, or ``FILE@B``: a saved trace result and the batch size B it ran at (a trace
    does not record it) -> ``(path, B or None)``. A path that exists as written is a file, ``@``
    and all; the pair is taken back as it is."""

    name, takes, what = "FILE[@B]", (Path, tuple), "a file path, 'FILE@B' or (path, B)"

    def parse(self, text: Any, option: str) -> tuple[Path, int | None]:
        if isinstance(text, tuple):
            path, batch = text
            return InputFile().check(path, option), None if batch is None else Count(1).check(batch, option)
        text = str(text)
        if "@" in text and not Path(text).exists():
            path_text, _, batch = text.rpartition("@")
            if not batch.isdigit() or int(batch) < 1:
                raise InvalidInput(
                    option, text, "after @ comes the batch size the trace ran at, a whole number >= 1"
                )
            return InputFile().parse(path_text, option), int(batch)
        return InputFile().parse(text, option), None


@dataclass(frozen=True)
class TuneCaptureSizesRequest(Request):
    """``infer-opt tune capture-sizes``: the batch sizes seen (a table, or Prometheus snapshots),
    the step cost, the limits (count, memory) and the current list."""

    cost_file: tuple[Any, ...] | None = option(None, Each(CostSource()))
    batches: Path | None = option(None, InputFile())
    prometheus: Path | None = option(None, InputFile())
    before: Path | None = option(None, InputFile())
    max_captures: int | None = option(None, Count(1, 1 << 16))
    memory_per_capture: float | None = option(None, Size())
    memory: Path | None = option(None, InputFile())
    memory_budget: float | None = option(None, Size())
    current: tuple[int, ...] | None = option(None, CountList(0))
    engine: str = option("vllm")
    engine_max_size: int | None = option(None, Count(1, 1 << 20))
    eager_cost_file: tuple[Any, ...] | None = option(None, Each(CostSource()))
    eager_overhead: float | None = option(None, Duration("ms"))
    capture_time: float | None = option(None, Duration("s"))


@dataclass(frozen=True)
class TuneSpeculativeRequest(Request):
    """``infer-opt tune speculative``: the acceptance rates (given, or from Prometheus snapshots),
    the target's and the draft's step cost, and the batch sizes."""

    target_cost_file: tuple[Any, ...] = option(check=Each(CostSource()))
    draft_cost_file: tuple[Any, ...] = option(check=Each(CostSource()))
    alphas: tuple[float, ...] | None = option(None, NumberList(low=0, high=1))
    prometheus: Path | None = option(None, InputFile())
    before: Path | None = option(None, InputFile())
    overhead: float = option(0.0, Duration("ms"))
    batches: Path | None = option(None, InputFile())
    batch_sizes: tuple[int, ...] | None = option(None, CountList(1, 1 << 20, increasing=True))
    k_max: int | None = option(None, Count(1, 64))


class ResultSide(InputFile):
    """A side of ``compare``: a result's file or a trace file, or (the API's) a result, a
    :class:`~infer_opt.trace.loaded.LoadedTrace` or a list of results (the rounds of an ``ab``)."""

    what = "a file path, a result or a list of results"

    def check(self, value: Any, option: str) -> Any:
        if isinstance(value, (str, os.PathLike)):
            return super().check(value, option)
        if value is None or isinstance(value, (bool, int, float, bytes)):
            raise InvalidInput(option, repr(value), f"must be {self.what}, not {type(value).__name__}")
        return value


@dataclass(frozen=True)
class CompareRequest(Request):
    """``infer-opt compare``: two results (or traces), the change worth reporting and the test's
    settings (run-level: not for two traces)."""

    base: Any = option(check=ResultSide(), positional=True)
    new: Any = option(check=ResultSide(), positional=True)
    threshold: float = option(0.05, Fraction(0, 1))
    significance: float = option(0.05, Number(0, 1, low_open=True, high_open=True))
    force: bool = option(False, Flag())
    seed: int = option(0, Count(0))
    noise_floor: float | None = option(None, Fraction(0, 10))


@dataclass(frozen=True)
class ReportRequest(Request):
    """``infer-opt report``: the saved results, in order, and the report's title (where it is
    written, with its plots and an HTML copy, is the command line's)."""

    results: tuple[Path, ...] = option(check=Each(InputFile()), positional=True)
    title: str = option("infer-opt report")
