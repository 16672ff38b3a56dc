"""``--augment``: write a trace back with the analysis in each kernel's and op's ``args``, so it
opens in Perfetto or chrome://tracing with ``flops``, ``bytes``, ``achieved_flops_per_s``,
``achieved_bytes_per_s``, ``peak_fraction`` and ``bound`` on every event that has them.

An op instance gets its own FLOPs and bytes (from its recorded shapes), its kernel time (the sum
of its kernels) and the rates over that time; its bound and peak fraction are its (op, shapes,
dtype) group's. A kernel gets its op's FLOPs and bytes apportioned by duration (so a kernel's
rate is its op's), labelled ``infer_opt_share``. Everything else is left as the file has it.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from infer_opt.files import write_bytes
from infer_opt.trace.analyze import Analysis
from infer_opt.trace.events import TraceEvents
from infer_opt.trace.ops import TRANSFER, _works, attribute, link_bytes
from infer_opt.trace.reader import _load_document

#: the keys added to an event's ``args``
KEYS = ("flops", "bytes", "achieved_flops_per_s", "achieved_bytes_per_s", "peak_fraction", "bound")


def _targets(out: Path, n: int) -> list[Path]:
    if n == 1:
        return [out]
    name = out.name
    stem, suffix = (
        (name[: -len(".json.gz")], ".json.gz")
        if name.endswith(".json.gz")
        else (out.stem, out.suffix or ".json")
    )
    return [out.with_name(f"{stem}.rank{i}{suffix}") for i in range(n)]


def annotations(
    events: TraceEvents, mask: np.ndarray, groups: dict[tuple[str, tuple, str], Any], causal: str
) -> dict[int, dict]:
    """File position → the args to add, for the ops and kernels of the analyzed windows."""
    att = attribute(events, None, causal)
    gpu, ops = events.gpu, events.ops
    kernel_us: dict[int, float] = {}
    for e in np.flatnonzero(mask & (att.owner >= 0)).tolist():
        op = int(att.owner[e])
        kernel_us[op] = kernel_us.get(op, 0.0) + float(gpu.dur_us[e])
    added: dict[int, dict] = {}
    for op, time_us in kernel_us.items():
        cost = att.costs.get(op)
        if not _works(cost):
            continue
        c_dtype = cost.dtype or att.dtypes(ops.args[op])  # the group's key (ops._key)
        key = (events.name_of(ops.name[op]), att.shapes_of(ops.args[op]), c_dtype)
        group = groups.get(key)
        time_s = time_us / 1e6
        # a host↔device copy: the tensor once over the link, as its row says (ops.link_bytes)
        nbytes = link_bytes(cost.bytes) if group is not None and group.family == TRANSFER else cost.bytes
        figures = {
            "flops": float(cost.flops),
            "bytes": float(nbytes),
            "achieved_flops_per_s": cost.flops / time_s if time_s > 0 else None,
            "achieved_bytes_per_s": nbytes / time_s if time_s > 0 else None,
            "peak_fraction": group.peak_fraction if group is not None else None,
            "bound": group.bound if group is not None else "unknown",
        }
        added[int(ops.event_index[op])] = {**figures, "infer_opt_kernel_time_us": time_us}
        for e in np.flatnonzero(mask & (att.owner == op)).tolist():
            share = float(gpu.dur_us[e]) / time_us if time_us > 0 else 0.0
            added[int(gpu.event_index[e])] = {
                **figures,
                "flops": figures["flops"] * share,
                "bytes": figures["bytes"] * share,
                "infer_opt_share": share,
            }
    return added


def write_augmented(found: Analysis, out: str | os.PathLike[str]) -> list[Path]:
    """Write each rank's trace with the annotations to ``out`` (several ranks: ``out`` with
    ``.rank<i>`` before the suffix); gzip when the name ends in ``.gz``."""
    result = found.result
    groups = {(g.name, g.shapes, g.dtype): g for g in result.ops}
    written = []
    for events, mask, target in zip(
        found.traces, found.masks, _targets(Path(out), len(found.traces)), strict=True
    ):
        doc, _ = _load_document(Path(events.path))
        trace_events = doc["traceEvents"]
        for position, extra in annotations(events, mask, groups, result.causal_flops).items():
            if 0 <= position < len(trace_events) and isinstance(trace_events[position], dict):
                event = trace_events[position]
                args = event.get("args")
                event["args"] = {**(args if isinstance(args, dict) else {}), **extra}
        doc.setdefault("infer_opt", {"device": result.device_name, "peaks": result.peaks.source})
        data = orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
        if target.name.endswith(".gz"):
            data = gzip.compress(data, compresslevel=6)
        written.append(write_bytes(target, data))
    return written


__all__ = ["KEYS", "annotations", "write_augmented"]
