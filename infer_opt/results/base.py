"""Result dataclasses' common base and the versioned JSON envelope.

Every command's result is a frozen dataclass deriving from :class:`Result` that declares its
``KIND``; it lives in the kind's torch-free schema module, ``infer_opt/results/<kind>.py``, which
the core function that computes it imports. Saved files look like::

    {"schema": "infer-opt/<kind>", "version": 1, "created": "...Z",
     "environment": {...}, "command": "infer-opt ...", "result": {...}}

Non-finite floats are stored as the strings ``"inf"``, ``"-inf"`` and ``"nan"`` so the
files stay strict JSON; :meth:`Result.from_dict` turns them back into floats.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import os
import platform
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from infer_opt import __version__
from infer_opt.errors import BadField, InvalidInput

SCHEMA_PREFIX = "infer-opt/"
SCHEMA_VERSION = 1

R = TypeVar("R", bound="Result")


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types only: dataclasses to dicts, tuples to lists, inf/NaN to strings."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float):
        if math.isnan(obj):
            return "nan"
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return to_jsonable(obj.item())
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy arrays
        return to_jsonable(obj.tolist())
    return obj


class FieldError(Exception):
    """A field that is not what its annotation allows (the path from the result's root)."""

    def __init__(self, where: str, value: Any, expected: str) -> None:
        super().__init__(where, expected)
        self.where, self.value, self.expected = where, value, expected


class JsonValue:
    """A value as the file holds it, for messages (``null``, ``"two"``, ``-1e-06``)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __str__(self) -> str:
        try:
            text = json.dumps(self.value, allow_nan=True)
        except (TypeError, ValueError):
            text = repr(self.value)
        return text if len(text) <= 60 else text[:50] + "…"


#: how a non-finite float is saved (:func:`to_jsonable`)
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (list, tuple):
        return "a list"
    if origin in (dict, Mapping) or tp is dict:
        return "an object"
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return "an object"
    return {float: "a number", int: "an integer", str: "a string", bool: "true or false"}.get(tp, str(tp))


def _join(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def _from_jsonable(tp: Any, value: Any, where: str = "") -> Any:
    """``value`` as annotation ``tp`` holds it, checked: a null only where ``tp`` is optional, a
    number where it is a number, a list where a tuple (of its length, when fixed). A mismatch is
    a :class:`FieldError` naming the field."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _from_jsonable(args[0], value, where) if len(args) == 1 else value
    if tp is Any or tp is object:
        return value
    if value is None:
        raise FieldError(where, value, f"must be {_describe(tp)}, not null")
    if origin in (list, tuple):
        return _sequence(tp, origin, value, where)
    if origin in (dict, Mapping):
        if not isinstance(value, dict):
            raise FieldError(where, value, "must be an object")
        _, inner = typing.get_args(tp) or (Any, Any)
        return {k: _from_jsonable(inner, v, _join(where, k)) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if isinstance(value, str) and hasattr(tp, "from_text"):  # e.g. a warning saved as words
            return tp.from_text(value)
        if not isinstance(value, dict):
            raise FieldError(where, value, "must be an object")
        return _dataclass_from_dict(tp, value, where)
    return _scalar(tp, value, where)


def _sequence(tp: Any, origin: Any, value: Any, where: str) -> Any:
    if not isinstance(value, list):
        raise FieldError(where, value, "must be a list")
    args = typing.get_args(tp)
    if origin is tuple and args and (len(args) != 2 or args[1] is not Ellipsis):
        if len(value) != len(args):
            raise FieldError(where, value, f"must be a list of {len(args)} items")
        pairs = enumerate(zip(args, value, strict=True))
        return tuple(_from_jsonable(a, v, _join(where, i)) for i, (a, v) in pairs)
    inner = args[0] if args else Any
    items = [_from_jsonable(inner, v, _join(where, i)) for i, v in enumerate(value)]
    return tuple(items) if origin is tuple else items


def _scalar(tp: Any, value: Any, where: str) -> Any:
    if tp is float:
        if isinstance(value, str) and value in _NON_FINITE:
            return _NON_FINITE[value]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise FieldError(where, value, "must be a number")
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise FieldError(where, value, "must be an integer")
    if tp is bool and not isinstance(value, bool):
        raise FieldError(where, value, "must be true or false")
    if tp is str and not isinstance(value, str):
        raise FieldError(where, value, "must be a string")
    return value


def _dataclass_from_dict(cls: type, data: dict[str, Any], where: str = "") -> Any:
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name in data:
            kwargs[f.name] = _from_jsonable(hints.get(f.name, Any), data[f.name], _join(where, f.name))
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise FieldError(_join(where, f.name), None, "missing (a required field)")
    try:
        built = cls(**kwargs)
    except FieldError as exc:  # a field checked as the row is built (its __post_init__)
        raise FieldError(_join(where, exc.where), exc.value, exc.expected) from None
    check = getattr(built, "loaded_problems", None)
    problems = [*(check() if check is not None else ()), *_run_problems(built)]
    for field, value, expected in problems:
        raise FieldError(_join(where, field), value, expected)
    return built


#: a device a result can have been measured on ("" where none was recorded)
_DEVICE = re.compile(r"^(|cpu|meta|mps|(cuda|xpu)(:\d+)?)$")


#: a time (a field named ``*_s``) beyond this many seconds (317 years) is no measurement
TIME_LIMIT_S = 1e10
#: a rate (``*_per_s``) beyond this (FLOP/s, bytes/s) is none either; infinity is allowed (a rate
#: of work a family does not do)
RATE_LIMIT = 1e21
#: any other finite number beyond this magnitude is none (a count, bytes, FLOPs, a ratio)
NUMBER_LIMIT = 1e30
#: times that may be negative (a gain, a saving, a gap): every other ``*_s`` is >= 0
#: ``measured_host_s`` (validate) is the step less its ops' times, as profile's ``unattributed_s``:
#: a difference of two measurements, below 0 when the ops' times ran long in their own run
_SIGNED_TIME = re.compile(
    r"(gain|sav(ing|ed)|gap|unattributed|measured_host|delta|diff|error|offset|skew|extra)"
)
#: counts and sizes: whole-run quantities that are >= 0 and finite
_COUNT = re.compile(r"^(n|n_\w+|\w*_count|count|calls|\w+_calls|kernels|events|runs|reps|steps|bytes|"
                    r"\w+_bytes|flops|flops_\w+|tokens|\w+_tokens|\w*length|\w*padding\w*|\w*waste|"
                    r"expected_(?!gain)\w+|k|k_max|\w+_k)$")  # fmt: skip
#: ratios of times and their bounds: >= 0 (infinity: a part made free), or NaN (undefined)
_RATIO = re.compile(r"^(speedup|speedups|\w+_speedup|ratio|ratio_\w+|\w+_ratio|low|high)$")


def _number_rule(name: str, value: float) -> str | None:
    """What a numeric field named ``name`` allows when ``value`` is outside it (None: it is in):
    a time finite, >= 0 (unless signed) and < :data:`TIME_LIMIT_S`; a rate not NaN, >= 0 and
    finite below :data:`RATE_LIMIT` or infinite; a count or size finite and >= 0; anything a
    finite magnitude below :data:`NUMBER_LIMIT` (NaN and ±inf left to the kind's own checks)."""
    if name.endswith("_per_s"):
        ok = value >= 0 and (value <= RATE_LIMIT or value == math.inf)
        return None if ok else f"must be a rate >= 0 and <= {RATE_LIMIT:g} (or inf)"
    if name.endswith("_s"):
        signed = _SIGNED_TIME.search(name) is not None
        ok = math.isfinite(value) and abs(value) <= TIME_LIMIT_S and (signed or value >= 0)
        return None if ok else f"must be a finite time{'' if signed else ' >= 0'} within {TIME_LIMIT_S:g} s"
    if _COUNT.match(name):
        ok = math.isfinite(value) and 0 <= value <= NUMBER_LIMIT
        return None if ok else f"must be a finite number >= 0 and <= {NUMBER_LIMIT:g}"
    if _RATIO.match(name) and not (0 <= value <= NUMBER_LIMIT or value in (math.inf,) or value != value):
        return f"must be a ratio >= 0 and <= {NUMBER_LIMIT:g}, inf or nan"
    if math.isfinite(value) and abs(value) > NUMBER_LIMIT:
        return f"must be within ±{NUMBER_LIMIT:g} (no measurement is that large)"
    return None


def _numbers_problems(built: Any) -> list[tuple[str, Any, str]]:
    """Every numeric field of ``built`` (and each item of a tuple of numbers) under
    :func:`_number_rule`."""
    out: list[tuple[str, Any, str]] = []

    def check(name: str, where: str, item: Any) -> None:
        if isinstance(item, (tuple, list)):
            for i, inner in enumerate(item):
                check(name, f"{where}[{i}]", inner)
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            number = float(item) if isinstance(item, float) or abs(item) < 1e300 else 1e300
            allowed = _number_rule(name, number)
            if allowed is not None:
                out.append((where, item, allowed))

    for f in dataclasses.fields(built):
        check(f.name, f.name, getattr(built, f.name))
    return out


def _run_problems(built: Any) -> list[tuple[str, Any, str]]:
    """What no result may hold, whatever its kind: a thread count below 1, a device torch has
    no such name for, a number its field's name rules out (:func:`_number_rule`)."""
    out: list[tuple[str, Any, str]] = _numbers_problems(built)
    threads = getattr(built, "threads", None)
    if isinstance(built, Result) and isinstance(threads, int) and threads < 1:
        out.append(("threads", threads, "must be an integer >= 1 (CPU threads the run used)"))
    device = getattr(built, "device", None)
    if isinstance(built, Result) and isinstance(device, str) and not _DEVICE.match(device):
        out.append(("device", device, "must be cpu, cuda or cuda:N"))
    return out


def number_problems(
    obj: Any,
    *,
    positive: Sequence[str] = (),
    finite_positive: Sequence[str] = (),
    non_negative: Sequence[str] = (),
) -> list[tuple[str, Any, str]]:
    """``(field, value, what is allowed)`` for each named numeric field of ``obj`` outside its
    range (None skipped: an optional field not recorded): ``positive`` > 0 (infinity allowed:
    a rate of a family that does no such work), ``finite_positive`` finite and > 0,
    ``non_negative`` finite and >= 0; a list field has each of its items checked. For
    ``loaded_problems`` methods."""
    out: list[tuple[str, Any, str]] = []
    for names, ok, allowed in (
        (positive, lambda v: v > 0, "must be > 0"),
        (finite_positive, lambda v: math.isfinite(v) and v > 0, "must be a finite number > 0"),
        (non_negative, lambda v: math.isfinite(v) and v >= 0, "must be a finite number >= 0"),
    ):
        for name in names:
            value = getattr(obj, name)
            items = enumerate(value) if isinstance(value, (tuple, list)) else [(None, value)]
            for i, item in items:
                if item is not None and not ok(item):
                    out.append((name if i is None else f"{name}[{i}]", item, allowed))
    return out


@dataclasses.dataclass(frozen=True)
class Result:
    """Base of every command's result: a dataclass that round-trips through JSON."""

    KIND: ClassVar[str] = "result"

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any], *, source: str = "result") -> R:
        """The result a saved ``data`` holds, validated whole: every field of its annotated
        type (a null only where it may be missing), then each part's own ``loaded_problems()``
        (``(field, value, what is allowed)`` for values its type allows but the kind does not).
        A problem is a :class:`~infer_opt.errors.BadField` naming ``source`` and the field."""
        try:
            return _dataclass_from_dict(cls, data)
        except FieldError as exc:
            raise BadField(source, exc.where, JsonValue(exc.value), exc.expected) from None

    def to_frame(self, table: int | str | None = None) -> Any:
        """The result's main table as a pandas DataFrame (raw values, SI units in the column
        names, as in ``--csv``); ``table`` picks another table of its view by position or title."""
        from infer_opt.reports.frames import result_frame

        return result_frame(self, table)

    def _repr_markdown_(self) -> str:
        """How a notebook shows the result: the markdown report."""
        from infer_opt.reports.render import render

        return render(self, "markdown")


def environment_info() -> dict[str, Any]:
    """Where a result was produced. Reads torch's (and transformers') details only when already
    imported (a calculator must not pay for importing them)."""
    env: dict[str, Any] = {
        "infer_opt": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or None,
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        env["torch"] = torch.__version__
        env["torch_num_threads"] = torch.get_num_threads()
        cuda = torch.cuda.is_available()
        env["cuda_available"] = cuda
        if cuda:
            env["cuda"] = torch.version.cuda
            env["device_name"] = torch.cuda.get_device_name()
    transformers = sys.modules.get("transformers")  # an hf: model is this version's code
    if transformers is not None and isinstance(getattr(transformers, "__version__", None), str):
        env["transformers"] = transformers.__version__
    return env


def envelope(
    result: Result, *, command: str | None = None, environment: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Wrap a result in the versioned envelope."""
    return {
        "schema": SCHEMA_PREFIX + result.KIND,
        "version": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "environment": environment if environment is not None else environment_info(),
        "command": command if command is not None else _command_line(),
        "result": result.to_dict(),
    }


#: the command line a torchrun job's launcher was given (set for its ranks: theirs lacks --nproc)
COMMAND_ENV = "INFER_OPT_COMMAND"


def _command_line() -> str:
    """The command that produced a result, as a shell would take it back (quoted: ``ab``'s
    ``--base 'infer-opt kernels ...'``); a rank of a job started with ``--nproc N`` gives its
    launcher's command, ``--nproc N`` included."""
    import shlex

    launched = os.environ.get(COMMAND_ENV)
    if launched:
        return launched
    argv = list(sys.argv)
    if argv and argv[0].endswith(("infer-opt", "__main__.py")):
        argv[0] = "infer-opt"
    return shlex.join(argv)


def dumps(result: Result, **kwargs: Any) -> str:
    return json.dumps(envelope(result, **kwargs), indent=2, allow_nan=False)


def save_result(path: str | os.PathLike[str], result: Result, **kwargs: Any) -> Path:
    """Write ``result``'s envelope to ``path`` (atomically; the folder is created, as the
    cache's folders are made on first use)."""
    from infer_opt.files import write_text

    target = Path(path)
    if os.fspath(path) != "-":
        target.parent.mkdir(parents=True, exist_ok=True)
    return write_text(target, dumps(result, **kwargs) + "\n")


@dataclasses.dataclass(frozen=True)
class LoadedResult:
    kind: str
    version: int
    result: Result
    envelope: dict[str, Any]


def result_class(kind: str) -> type[Result]:
    """The result class of ``kind`` (from the one registry, :mod:`infer_opt.registry`)."""
    from infer_opt import registry

    return registry.result_class(kind)


def parse_envelope(
    data: Any, *, source: str = "result file", expect: Sequence[str] = (), what: str = ""
) -> LoadedResult:
    """Validate an envelope and rebuild its result. Refuses unknown major versions and, with
    ``expect``, any other kind (before its fields are read; ``what`` says what was expected)."""
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith(SCHEMA_PREFIX):
        raise InvalidInput(source, "…", "not an infer-opt result (no 'infer-opt/<kind>' schema)")
    kind = data["schema"][len(SCHEMA_PREFIX) :]
    version = data.get("version")
    if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
        raise InvalidInput(
            source, version, f"unsupported schema version; this infer-opt reads 1..{SCHEMA_VERSION}"
        )
    if expect and kind not in expect:
        raise InvalidInput(source, kind, f"holds a {kind!r} result; expected {what or ' or '.join(expect)}")
    if not isinstance(data.get("result"), dict):
        raise InvalidInput(source, kind, "the envelope has no 'result' object")
    cls = result_class(kind)
    return LoadedResult(kind, version, cls.from_dict(data["result"], source=source), data)


def load_result(
    path: str | os.PathLike[str], *, expect: Sequence[str] = (), option: str | None = None, what: str = ""
) -> LoadedResult:
    """A saved result file, read through the one checked reader (:func:`infer_opt.files.read_text`).
    With ``option`` (the flag that named the file) every refusal names it: a missing, unreadable
    or non-regular file, one that is not an infer-opt result, a field its kind does not allow
    (a :class:`BadField` naming the file and field), and with ``expect`` a result of any other
    kind (``what`` says what was expected; default the kinds' names)."""
    from infer_opt.files import read_text
    from infer_opt.inputs.tables import read_json

    p = Path(path)
    try:
        data = read_json(read_text(p, option or "result file"), source=str(p))
        return parse_envelope(data, source=str(p), expect=expect, what=what)
    except InvalidInput as exc:
        if option is None:
            raise
        raise exc.under(option, str(p)) from None
