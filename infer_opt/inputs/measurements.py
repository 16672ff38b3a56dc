"""Kernel measurement files ``infer-opt roofline`` fits: a CSV/TSV (``name, flops, bytes,
time_s``; the sections ``infer-opt kernels --out FILE.csv`` writes) or a saved ``kernels`` or
``roofline`` result."""

from __future__ import annotations

import os
from typing import Any

from infer_opt.cost_models.roofline import KernelPoint
from infer_opt.errors import InvalidInput
from infer_opt.inputs.tables import Field, read_table
from infer_opt.run_key import RunKey

REQUIRED_COLUMNS = ("name", "flops", "bytes", "time_s")


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
    by :func:`infer_opt.inputs.tables.read_table` (errors name the file, line, column and value).

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


def kernel_points(result: Any) -> list[KernelPoint]:
    """A kernel suite's timed rows as roofline points, named ``case[size]``."""
    return [
        KernelPoint(f"{row.name}[{row.label}]", row.family, row.flops, row.bytes, row.time_s)
        for row in result.rows
        if row.time_s is not None and row.time_s > 0 and (row.flops > 0 or row.bytes > 0)
    ]


def load_points(path: str | os.PathLike[str]) -> tuple[list[KernelPoint], dict[str, str]]:
    """Kernel points from a measurements file: a ``kernels`` or ``roofline`` result (JSON)
    or a CSV. Also returns what the file says about the device and timing (:func:`measurement_meta`;
    empty for CSV)."""
    from infer_opt.files import read_text
    from infer_opt.results import load_result

    if os.fspath(path).lower().endswith(".json"):
        loaded = load_result(path, expect=("kernels", "roofline"), option="MEASUREMENTS")
    else:
        return points_from_csv(read_text(path, "MEASUREMENTS"), str(path)), {}
    result = loaded.result
    if loaded.kind == "kernels":
        return kernel_points(result), measurement_meta(result)
    points = [KernelPoint(k.name, k.family, k.flops, k.bytes, k.time_s) for k in result.kernels]
    return points, measurement_meta(result)


def measurement_meta(result: Any) -> dict[str, Any]:
    """What a kernels or roofline result says about where and how it was measured: the
    arguments :func:`fit_roofline` records (device, dtype, names, and the run key's threads,
    matmul precision and timing)."""
    key = RunKey.of(result)
    return {
        "device": result.device,
        "dtype": result.dtype,
        "device_name": result.device_name,
        "device_key": result.device_key,
        "threads": key.threads,
        "matmul_precision": key.matmul_precision,
        "timing": key.timing,
    }
