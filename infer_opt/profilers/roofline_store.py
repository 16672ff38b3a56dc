"""Fitted rooflines saved per device and dtype, reloaded by ``profile``; measurement files
read for ``infer-opt roofline``; a quick calibration sweep when no fit is saved.

Fits live in ``cache_dir()/roofline/<device key>.json`` (``$INFER_OPT_CACHE`` overrides
the directory, default ``~/.cache/infer-opt``), as ordinary result envelopes.
torch is imported only by the functions that need a device.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from infer_opt.cost_models.roofline import KernelPoint, RooflineFit, default_fit_families, fit_roofline
from infer_opt.errors import InvalidInput
from infer_opt.results import parse_envelope, save_result
from infer_opt.tables import Field, read_json, read_table

CACHE_ENV = "INFER_OPT_CACHE"
REQUIRED_COLUMNS = ("name", "flops", "bytes", "time_s")


def cache_dir() -> Path:
    """``$INFER_OPT_CACHE`` or ``~/.cache/infer-opt``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "infer-opt"


def key_path(key: str) -> Path:
    """Where the fit for a device key (``cpu-amd-epyc-2t-float32``) is cached."""
    return cache_dir() / "roofline" / f"{key}.json"


def fit_path(device: Any, dtype: Any) -> Path:
    """Where the fit for this device model and dtype is cached."""
    from infer_opt.profilers.device import device_key

    return key_path(device_key(device, dtype))


def save_fit(fit: RooflineFit, device: Any, dtype: Any, path: Path | None = None) -> Path:
    """Save ``fit`` (envelope JSON, atomic) to ``path`` or the cache; returns the path.
    ``device``/``dtype`` are torch objects or specs (``"cpu"``, ``"bfloat16"``)."""
    target = Path(path) if path is not None else fit_path(device, dtype)
    return save_result(target, fit)


def load_fit(device: Any, dtype: Any, path: Path | None = None) -> RooflineFit | None:
    """The saved fit, or ``None`` when there is none (or the cached file is unreadable).
    An explicit ``path`` that is missing or not a roofline fit is an error."""
    target = Path(path) if path is not None else fit_path(device, dtype)
    try:
        data = read_json(target.read_text(encoding="utf-8"), source=str(target))
        loaded = parse_envelope(data, source=str(target))
    except FileNotFoundError:
        if path is not None:
            raise InvalidInput("roofline fit", str(target), "file does not exist") from None
        return None
    except (InvalidInput, TypeError, ValueError, KeyError, OSError):
        if path is not None:
            raise InvalidInput("roofline fit", str(target), "not a readable infer-opt roofline fit") from None
        return None
    if not isinstance(loaded.result, RooflineFit):
        if path is not None:
            raise InvalidInput(
                "roofline fit", str(target), f"holds a {loaded.kind!r} result, not a roofline fit"
            )
        return None
    return loaded.result


# ---------------------------------------------------------------------------- measurement files


#: a measurement CSV's columns: name, flops, bytes, time (``time_s``; ``time_us`` etc. change the
#: unit); ``family``, ``size``/``label`` optional; an empty time is a case that was skipped
POINT_FIELDS = (
    Field("name", "text"),
    Field("flops", "number", high=1e30),
    Field("bytes", "number", high=1e30),
    # below a femtosecond a time is a unit mistake, not a kernel (and its log overflows the fit)
    Field("time", "duration", unit="s", low=1e-15, high=1e9, blank_ok=True),
    Field("family", "text", required=False, blank_ok=True),
    Field("size", "text", required=False, blank_ok=True, aliases=("label",)),
)


def points_from_csv(text: str, source: str = "measurements") -> list[KernelPoint]:
    """Rows of a CSV/TSV with columns ``name, flops, bytes, time_s`` (``family`` optional), read
    by :func:`infer_opt.tables.read_table` (errors name the file, line, column and value).

    The CSV that ``infer-opt kernels --out FILE.csv`` writes holds one section per family,
    each after a ``# <family>`` line with its own header; sections are read in turn and the
    family is taken from the section title when there is no ``family`` column."""
    sections: list[tuple[str, int, list[str]]] = []
    title, start, lines = "", 0, []
    for number, line in enumerate(text.splitlines()):
        if line.startswith("#"):
            if any(s.strip() for s in lines):
                sections.append((title, start, lines))
            title, start, lines = line.lstrip("#").strip(), number + 1, []
        else:
            lines.append(line)
    if any(s.strip() for s in lines):
        sections.append((title, start, lines))
    if not sections:
        raise InvalidInput(source, "empty", f"expected CSV columns {', '.join(REQUIRED_COLUMNS)}")
    points: list[KernelPoint] = []
    for title, start, body in sections:
        # blank lines keep the section's line numbers equal to the file's
        table = read_table("\n" * start + "\n".join(body), POINT_FIELDS, source=source, comments=False)
        points.extend(_points(table.frame, title))
    return points


def _points(frame: Any, title: str) -> list[KernelPoint]:
    out = []
    for row in frame.to_dict("records"):
        if row["time"] != row["time"]:  # NaN: a skipped case in a kernels CSV
            continue
        label = row.get("size") or ""
        name = f"{row['name']}[{label}]" if label else row["name"]
        out.append(KernelPoint(name, row.get("family") or title, row["flops"], row["bytes"], row["time"]))
    return out


def load_points(path: str | os.PathLike[str]) -> tuple[list[KernelPoint], dict[str, str]]:
    """Kernel points from a measurements file: a ``kernels`` or ``roofline`` result (JSON)
    or a CSV. Also returns what the file says about the device (``device``, ``dtype``,
    ``device_name``, ``device_key``; empty for CSV)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput("MEASUREMENTS", str(p), "file does not exist") from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise InvalidInput("MEASUREMENTS", str(p), f"cannot read it ({type(exc).__name__})") from None
    if p.suffix.lower() != ".json":
        return points_from_csv(text, str(p)), {}
    data = read_json(text, source=str(p))
    loaded = parse_envelope(data, source=str(p))
    result = loaded.result
    if loaded.kind == "kernels":
        from infer_opt.profilers.kernels import kernel_points

        meta = {
            "device": result.device,
            "dtype": result.dtype,
            "device_name": result.device_name,
            "device_key": result.device_key,
        }
        return kernel_points(result), meta
    if loaded.kind == "roofline":
        points = [KernelPoint(k.name, k.family, k.flops, k.bytes, k.time_s) for k in result.kernels]
        meta = {
            "device": result.device,
            "dtype": result.dtype,
            "device_name": result.device_name,
            "device_key": result.device_key,
        }
        return points, meta
    raise InvalidInput(
        "MEASUREMENTS", str(p), f"holds a {loaded.kind!r} result; expected kernels or roofline"
    )


# ---------------------------------------------------------------------------- calibration

#: the calibration sweep: enough of each regime to pin R, b and t0
CALIBRATION_CASES = ("matmul", "copy", "add", "tiny_add")
CALIBRATION_REPS = 10


def calibrate(device: Any, dtype: Any, *, progress: Any = None) -> RooflineFit:
    """A quick kernel sweep (matmul, copy, add, tiny add from the quick suite; about 10 s
    on a 2-core CPU) and its fit. ``device``/``dtype`` are specs or torch objects."""
    from infer_opt.profilers import device as devices
    from infer_opt.profilers import kernels

    dev = devices.resolve_device(device)
    torch_dtype = devices.parse_dtype(dtype, dev)
    kind = "cuda" if devices.is_cuda(dev) else "cpu"
    cases = [c for c in kernels.all_cases(kind, "quick") if c.name in CALIBRATION_CASES]
    settings = kernels.SuiteSettings(warmup=3, reps=CALIBRATION_REPS)
    result = kernels.run_suite(cases, dev, torch_dtype, settings, suite="calibration", progress=progress)
    return fit_roofline(
        kernels.kernel_points(result),
        device=result.device,
        dtype=result.dtype,
        device_name=result.device_name,
        device_key=result.device_key,
        source="calibration sweep",
        fit_families=default_fit_families(kernels.kernel_points(result)),
    )
