"""Result dataclasses' common base and the versioned JSON envelope.

Every command's result is a frozen dataclass deriving from :class:`Result` that declares its
``KIND``; it lives in the kind's torch-free schema module, ``infer_opt/kinds/<kind>.py``, which
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
import sys
import types
import typing
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from infer_opt import __version__
from infer_opt.errors import InvalidInput

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


def _from_jsonable(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _from_jsonable(args[0], value) if len(args) == 1 else value
    if origin in (list, tuple):
        args = typing.get_args(tp)
        inner = args[0] if args else Any
        items = [_from_jsonable(inner, v) for v in value]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        _, inner = typing.get_args(tp) or (Any, Any)
        return {k: _from_jsonable(inner, v) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if isinstance(value, str) and hasattr(tp, "from_text"):  # e.g. a warning saved as words
            return tp.from_text(value)
        return _dataclass_from_dict(tp, value)
    if tp is float:
        return float(value)
    if tp is int and isinstance(value, (int, float)):
        return int(value)
    return value


def _dataclass_from_dict(cls: type, data: dict[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name in data:
            kwargs[f.name] = _from_jsonable(hints.get(f.name, Any), data[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise InvalidInput("result file", cls.__name__, f"missing required key {f.name!r}")
    return cls(**kwargs)


@dataclasses.dataclass(frozen=True)
class Result:
    """Base of every command's result: a dataclass that round-trips through JSON."""

    KIND: ClassVar[str] = "result"

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        return _dataclass_from_dict(cls, data)

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
    """Where a result was produced. Reads torch's details only when torch is already
    imported (a calculator must not pay for importing it)."""
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


def _command_line() -> str:
    argv = list(sys.argv)
    if argv and argv[0].endswith(("infer-opt", "__main__.py")):
        argv[0] = "infer-opt"
    return " ".join(argv)


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


def parse_envelope(data: Any, *, source: str = "result file") -> LoadedResult:
    """Validate an envelope and rebuild its result. Refuses unknown major versions."""
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith(SCHEMA_PREFIX):
        raise InvalidInput(source, "…", "not an infer-opt result (no 'infer-opt/<kind>' schema)")
    kind = data["schema"][len(SCHEMA_PREFIX) :]
    version = data.get("version")
    if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
        raise InvalidInput(
            source, version, f"unsupported schema version; this infer-opt reads 1..{SCHEMA_VERSION}"
        )
    if not isinstance(data.get("result"), dict):
        raise InvalidInput(source, kind, "the envelope has no 'result' object")
    cls = result_class(kind)
    return LoadedResult(kind, version, cls.from_dict(data["result"]), data)


def load_result(path: str | os.PathLike[str]) -> LoadedResult:
    """Read a saved result file."""
    from infer_opt.files import read_text
    from infer_opt.tables import read_json

    p = Path(path)
    return parse_envelope(read_json(read_text(p, "result file"), source=str(p)), source=str(p))
