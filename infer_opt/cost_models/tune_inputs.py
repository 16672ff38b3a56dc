"""Reading what ``tune`` takes: a batch-size distribution (CSV/TSV ``batch_size,count``), a cost
curve (CSV/TSV ``batch_size,time_ms`` or ``tokens,time_ms``, or a saved ``predict --sweep
batch=...`` result), a graph-memory table (``batch_size,bytes``). Tables go through
:func:`infer_opt.tables.read_table`; result files are read as JSON (no result class imported)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from infer_opt.cost_models import capture_sizes as cs
from infer_opt.errors import InvalidInput
from infer_opt.files import read_text
from infer_opt.notices import Notice
from infer_opt.tables import Field, read_json, read_table

_SIZE_ALIASES = ("tokens", "batch", "bs", "num_tokens")


def read_distribution(path: Path, param: str = "batches") -> tuple[cs.Distribution, tuple[Notice, ...]]:
    """``batch_size[,count]`` rows (no count: each row is one step)."""
    fields = (
        Field("batch_size", "number", low=1, aliases=_SIZE_ALIASES),
        Field("count", "number", required=False, low=0),
    )
    table = read_table(read_text(path, param), fields, source=path.name)
    if len(table) == 0:
        raise InvalidInput(param, str(path), "the batch-size distribution is empty")
    frame = table.frame
    counts = frame["count"].to_numpy() if table.has("count") else np.ones(len(frame))
    return cs.distribution(frame["batch_size"].to_numpy(), counts, source=path.name), table.notices()


def read_cost(path: Path, param: str = "cost") -> tuple[cs.CostCurve, str, tuple[Notice, ...]]:
    """A cost curve and how it was obtained ("measured table" / "predicted (predict --sweep)")."""
    text = read_text(path, param)
    if path.suffix.lower() == ".json":
        return _cost_from_result(text, path, param)
    fields = (
        Field("batch_size", "number", low=1, aliases=_SIZE_ALIASES),
        Field("time", "duration", unit="ms", low=0, low_open=True, aliases=("step",)),
    )
    table = read_table(text, fields, source=path.name)
    frame = table.frame
    curve = cs.cost_curve(frame["batch_size"].to_numpy(), frame["time"].to_numpy(), source=path.name)
    return curve, f"table {path.name} (as given)", table.notices()


def _cost_from_result(text: str, path: Path, param: str) -> tuple[cs.CostCurve, str, tuple[Notice, ...]]:
    data = read_json(text, source=path.name)
    schema = str(data.get("schema", "")) if isinstance(data, dict) else ""
    result = data.get("result", {}) if isinstance(data, dict) else {}
    if schema == "infer-opt/predict":
        points = result.get("points") or []
        if result.get("sweep") != "batch" or not points:
            raise InvalidInput(
                param, str(path), "a predict result must be a sweep over batch (predict --sweep batch=...)"
            )
        sizes = [p["batch"] for p in points]
        times = [p["step_time_s"] for p in points]
        curve = cs.cost_curve(sizes, times, source=path.name)
        return curve, f"predicted by infer-opt predict ({path.name}; estimated, not measured)", ()
    raise InvalidInput(
        param,
        str(path),
        f"expected a CSV/TSV cost table or a predict --sweep batch result (got {schema or 'unknown JSON'})",
    )


def read_memory(path: Path, param: str = "memory") -> tuple[np.ndarray, np.ndarray]:
    """``batch_size,bytes`` rows: measured graph memory per captured size."""
    fields = (
        Field("batch_size", "number", low=1, aliases=_SIZE_ALIASES),
        Field("bytes", "number", low=0, aliases=("memory_bytes", "memory")),
    )
    frame = read_table(read_text(path, param), fields, source=path.name).frame.sort_values("batch_size")
    if len(frame) == 0:
        raise InvalidInput(param, str(path), "the memory table is empty")
    return frame["batch_size"].to_numpy(dtype=float), frame["bytes"].to_numpy(dtype=float)
