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


class Fit(InputFile):
    """A roofline fit file, or False for no roofline columns (the API's; the CLI always has one)."""

    takes = (Path, bool)

    def parse(self, text: Any, option: str) -> Any:
        if text is True:
            return None
        return text if text is False else super().parse(text, option)


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


#: the kernel suite's bounds on its timing options
MAX_KERNEL_REPS = 100_000
MAX_WARMUP_S = 600.0


class Measurements(InputFile):
    """Kernel measurements: a saved kernels result or CSV, or a kernels result itself (the API's)."""

    def check(self, value: Any, option: str) -> Any:
        from infer_opt.results.kernels import KernelSuiteResult

        return value if isinstance(value, KernelSuiteResult) else super().check(value, option)


# ----------------------------------------------------------------------------- group 2: measuring

#: the most timed (or untimed) calls per message size (``comm``)
MAX_COMM_REPS = 100_000
COLLECTIVES = ("all", "all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv")
DIST_BACKENDS = ("auto", "gloo", "nccl")


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


#: more trials than this would run for minutes; the checks need far fewer
MAX_TRIALS = 10_000_000
#: a vocabulary or draft larger than these turns the exact enumeration into hours; the check
#: is about the rule, which small cases settle
MAX_VOCAB = 4096
MAX_VERIFY_K = 16


#: the longest draft ``speculative measure`` and ``run`` time
MAX_K = 64


# ----------------------------------------------------------------------------- group 1: calculators


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


#: each command's request, in the module of its group, imported on first use (building a request
#: class costs ~1 ms: a command pays for its group's, not for all thirty)
_REQUESTS = {
    "StepRequest": "steps",
    "ProfileRequest": "steps",
    "PredictRequest": "steps",
    "ValidateRequest": "steps",
    "CalibrateRequest": "steps",
    "SuiteRequest": "suite",
    "KernelsRequest": "suite",
    "RooflineRequest": "suite",
    "AmdahlRequest": "calculators",
    "BucketsRequest": "calculators",
    "AttentionMemoryRequest": "calculators",
    "AttentionWindowRequest": "calculators",
    "AttentionCheckRequest": "calculators",
    "AmortizeRequest": "amortize",
    "AmortizeMeasureRequest": "amortize",
    "SpecCostsRequest": "speculative",
    "SpecSpeedupRequest": "speculative",
    "AcceptanceRequest": "speculative",
    "PlansRequest": "speculative",
    "FromMetricsRequest": "speculative",
    "CommRequest": "measuring",
    "AbRequest": "measuring",
    "SpeculativeVerifyRequest": "measuring",
    "SpeculativeMeasureRequest": "measuring",
    "SpeculativeRunRequest": "measuring",
    "TraceRequest": "traces",
    "TuneCaptureSizesRequest": "traces",
    "TuneSpeculativeRequest": "traces",
    "ReportRequest": "traces",
    "CompareRequest": "compare",
}


def __getattr__(name: str) -> Any:
    if name in _REQUESTS:
        import importlib

        return getattr(importlib.import_module(f"infer_opt.requests.{_REQUESTS[name]}"), name)
    raise AttributeError(f"module 'infer_opt.requests' has no attribute {name!r}")
