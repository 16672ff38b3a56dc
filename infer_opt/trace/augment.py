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
from infer_opt.trace.ops import _works, attribute
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
    events: TraceEvents, mask: np.ndarray, groups: dict[tuple[str, str, str], Any], causal: str
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
        key = (events.name_of(ops.name[op]), att.shapes(ops.args[op]), att.dtypes(ops.args[op]))
        group = groups.get(key)
        time_s = time_us / 1e6
        figures = {
            "flops": float(cost.flops),
            "bytes": float(cost.bytes),
            "achieved_flops_per_s": cost.flops / time_s if time_s > 0 else 0.0,
            "achieved_bytes_per_s": cost.bytes / time_s if time_s > 0 else 0.0,
            "peak_fraction": group.peak_fraction if group is not None else 0.0,
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


#: the process id of the replayed timeline added by ``--augment-what-if``
REPLAY_PID = 1_000_000


def replayed_events(found: Analysis, rank: int, what_if: str, trace_events: list) -> list[dict]:
    """A second process in the trace: every GPU event of rank ``rank`` where the replay of the
    ``--what-if`` edit ``what_if`` puts it (``"none"``: the unedited replay), its measured start
    and duration in ``args``, so a person sees in Perfetto which kernels moved."""
    from infer_opt.trace.replay import replay
    from infer_opt.trace.user_edits import edit_of

    rr = found.replays[rank] if found.replays else None
    if rr is None:
        return []
    events = found.traces[rank]
    rep = rr.replayed
    if what_if != "none":
        e = edit_of(events, rr, what_if, found.masks[rank], found.result.causal_flops)
        rep = replay(rr.graph, dur=e.dur, l1=e.l1, l2=e.l2, base=e.base, waits=e.waits, since=rr.replayed)
    starts, ends = rep.gpu_start_us(), rep.gpu_end_us()
    out: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": REPLAY_PID, "args": {"name": f"replayed: {what_if}"}}
    ]
    g = events.gpu
    for j, position in enumerate(g.event_index.tolist()):
        original = trace_events[position] if 0 <= position < len(trace_events) else None
        if not isinstance(original, dict):
            continue
        args = original.get("args") if isinstance(original.get("args"), dict) else {}
        out.append(
            {
                **original,
                "pid": REPLAY_PID,
                "tid": int(g.stream[j]),
                "ts": float(starts[j]),
                "dur": float(ends[j] - starts[j]),
                "args": {
                    **args,
                    "infer_opt_measured_ts": float(g.ts_us[j]),
                    "infer_opt_measured_dur": float(g.dur_us[j]),
                },
            }
        )
    return out


def write_augmented(found: Analysis, out: str | os.PathLike[str], what_if: str | None = None) -> list[Path]:
    """Write each rank's trace with the annotations to ``out`` (several ranks: ``out`` with
    ``.rank<i>`` before the suffix); gzip when the name ends in ``.gz``. ``what_if``: add the
    replayed timeline of that ``--what-if`` edit (``"none"``: unedited) as a second process."""
    result = found.result
    groups = {(g.name, g.shapes, g.dtype): g for g in result.ops}
    written = []
    for rank, (events, mask, target) in enumerate(
        zip(found.traces, found.masks, _targets(Path(out), len(found.traces)), strict=True)
    ):
        doc, _ = _load_document(Path(events.path))
        trace_events = doc["traceEvents"]
        added = replayed_events(found, rank, what_if, trace_events) if what_if is not None else []
        for position, extra in annotations(events, mask, groups, result.causal_flops).items():
            if 0 <= position < len(trace_events) and isinstance(trace_events[position], dict):
                event = trace_events[position]
                args = event.get("args")
                event["args"] = {**(args if isinstance(args, dict) else {}), **extra}
        trace_events.extend(added)
        doc.setdefault("infer_opt", {"device": result.device_name, "peaks": result.peaks.source})
        data = orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
        if target.name.endswith(".gz"):
            data = gzip.compress(data, compresslevel=6)
        written.append(write_bytes(target, data))
    return written


__all__ = ["KEYS", "REPLAY_PID", "annotations", "replayed_events", "write_augmented"]
