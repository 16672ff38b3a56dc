"""The host's time between launching ops as a sum of physical counts, fitted on a GPU's traces:

    h_i = c_launch + c_module · m_i + c_python · p_i + c_op · o_i

for the interval ``i`` between two consecutive launching ops of one thread and step
(:func:`infer_opt.trace.host_costs.issue_samples`, waits at host syncs left out): ``m_i`` the
``nn.Module`` calls entered in it, ``p_i`` every Python call the profiler recorded in it (a
trace recorded ``with_stack=True`` holds both as ``python_function`` events: ``nn.Module: X``
for a module's forward, ``<built-in method ...>`` and ``file.py(n): f`` for the rest), ``o_i``
the ``cpu_op`` events (aten ops at any depth: ``aten::linear`` and its ``aten::t``, views and
allocations too). The reader keeps no ``python_function`` events; :func:`python_calls` reads
their starts in one light pass over the file.

**Fit**: least squares with a Cauchy loss (scipy ``least_squares``, scale 5 µs; an outlier's
pull fades with its size: the gaps that swallowed a wait the trace does not name — a blocking
copy, the GPU's queue full — are outliers, not host work), coefficients ≥ 0, each trace's
samples weighted ``1/√n`` so a long trace does not set the coefficients alone. On noiseless
gaps it recovers the coefficients exactly (tests).

**Stored for ``predict``**: ``calibrate --from-trace`` keeps :func:`fit_traces`' launch +
Python-call + aten-op coefficients and :func:`op_children` (per aten op, the ops its GPU kernel
records below it) in the calibration; ``predict`` counts ``p`` and ``o`` over its fake run
(:class:`infer_opt.profilers.op_recorder.HostCounter`) and issues each launching op after
``c_launch + c_python·p + c_op·o`` (:func:`infer_opt.trace.gpu_predict.issue_cost`).

Pure: numpy, scipy and the standard library.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from infer_opt.trace.events import TraceEvents
from infer_opt.trace.host_costs import HostIssueSamples

#: the columns a fit may use, in the order of :class:`HostGapFit`'s coefficients
COLUMNS = ("launch", "module", "python", "ops")
#: Cauchy scale of the fit (seconds): gaps much longer than the model are down-weighted
SCALE_S = 5e-6


@dataclass(frozen=True)
class PythonCalls:
    """The starts (µs) of a trace's ``python_function`` events, per thread, sorted; ``module``
    marks the ``nn.Module`` calls."""

    tid: np.ndarray
    ts_us: np.ndarray
    module: np.ndarray


@dataclass(frozen=True)
class GapCounts:
    """One trace's host intervals: seconds, module calls, Python calls and aten ops in each."""

    issue_s: np.ndarray
    modules: np.ndarray
    python: np.ndarray
    ops: np.ndarray | None = None


@dataclass(frozen=True)
class HostGapFit:
    """``h = launch_s + module_s · m + python_s · p + op_s · o`` (module docstring), fitted on ``samples``
    intervals of ``traces`` traces; ``columns``: the counts it used (the others are 0)."""

    launch_s: float
    module_s: float
    python_s: float
    op_s: float
    columns: tuple[str, ...]
    samples: int
    traces: int

    def host_s(
        self, modules: np.ndarray | float, python: np.ndarray | float = 0.0, ops: np.ndarray | float = 0.0
    ) -> np.ndarray:
        """The modelled host time of intervals with these counts."""
        return (
            self.launch_s
            + self.module_s * np.asarray(modules, float)
            + self.python_s * np.asarray(python, float)
            + self.op_s * np.asarray(ops, float)
        )


def python_calls(path: str | os.PathLike[str]) -> PythonCalls:
    """The ``python_function`` events of the trace at ``path`` (module docstring); empty arrays
    for a trace recorded without Python stacks."""
    rows = _typed_rows(Path(path))
    if rows is None:
        from infer_opt.trace.reader import _load_document

        doc, _ = _load_document(Path(path))
        rows = [
            (int(e.get("tid") or 0) if str(e.get("tid", "0")).lstrip("-").isdigit() else 0,
             float(e["ts"]), str(e.get("name", "")).startswith("nn.Module"))
            for e in doc.get("traceEvents", ())
            if isinstance(e, dict) and e.get("cat") == "python_function" and e.get("ph") == "X" and "ts" in e
        ]  # fmt: skip
    if not rows:
        return PythonCalls(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, bool))
    tid, ts, module = (np.array(c) for c in zip(*rows, strict=True))
    order = np.lexsort((ts, tid))
    return PythonCalls(tid[order].astype(np.int64), ts[order].astype(float), module[order].astype(bool))


@functools.cache
def _event_types() -> Any:
    """msgspec types that decode only what :func:`python_calls` reads of each event."""
    import msgspec

    fields = [("ph", str, ""), ("cat", str, ""), ("name", str, ""), ("ts", float | None, None),
              ("tid", int | str | None, None)]  # fmt: skip
    event = msgspec.defstruct("Event", fields)
    events = ("traceEvents", list[event], msgspec.field(default_factory=list))
    document = msgspec.defstruct("Document", [events])
    return msgspec.json.Decoder(document), (msgspec.DecodeError, msgspec.ValidationError)


def _typed_rows(path: Path) -> list[tuple[int, float, bool]] | None:
    """:func:`python_calls`' rows decoded typed (several times faster than the whole document);
    None where that cannot be (no msgspec, a cut file, a field of another type): the reader's
    own loader then."""
    from infer_opt.trace.reader import _gunzip, _quote_non_finite, _read_bytes

    try:
        decoder, errors = _event_types()
    except ImportError:
        return None
    data = _read_bytes(path)
    if data[:2] == b"\x1f\x8b":
        data, cut = _gunzip(data, path)
        if cut:
            return None
    try:
        doc = decoder.decode(_quote_non_finite(data))
    except errors:
        return None
    return [
        (e.tid if isinstance(e.tid, int) else int(e.tid) if str(e.tid).lstrip("-").isdigit() else 0,
         float(e.ts), e.name.startswith("nn.Module"))
        for e in doc.traceEvents
        if e.cat == "python_function" and e.ph == "X" and e.ts is not None
    ]  # fmt: skip


def _count(tid: np.ndarray, ts: np.ndarray, s: HostIssueSamples) -> np.ndarray:
    """Per sample, the events of ``(tid, ts)`` (sorted by thread then time) that started in
    ``(lo, hi]`` on its thread."""
    out = np.zeros(s.issue_s.size, np.int64)
    for t in np.unique(s.tid):
        mine = np.flatnonzero(s.tid == t)
        times = ts[tid == t]
        out[mine] = np.searchsorted(times, s.hi_us[mine], "right") - np.searchsorted(
            times, s.lo_us[mine], "right"
        )
    return out


def gap_counts(samples: HostIssueSamples, calls: PythonCalls, events: TraceEvents | None = None) -> GapCounts:
    """Each interval of ``samples`` with the module and Python calls that started in it, and with
    ``events`` (the trace the samples are of) its aten ops."""
    modules = _count(calls.tid[calls.module], calls.ts_us[calls.module], samples)
    ops = None
    if events is not None:
        order = np.lexsort((events.ops.ts_us, events.ops.tid))
        ops = _count(events.ops.tid[order], events.ops.ts_us[order], samples)
    return GapCounts(samples.issue_s, modules, _count(calls.tid, calls.ts_us, samples), ops)


def fit(traces: Sequence[GapCounts], columns: Sequence[str] = COLUMNS) -> HostGapFit | None:
    """The coefficients over the traces' intervals (module docstring); None without any."""
    from scipy.optimize import least_squares

    unknown = sorted(set(columns) - set(COLUMNS))
    if unknown or "launch" not in columns:
        raise ValueError(f"columns must include 'launch' and be among {COLUMNS} (got {tuple(columns)})")
    used = [t for t in traces if t.issue_s.size]
    if not used:
        return None
    if "ops" in columns and any(t.ops is None for t in used):
        raise ValueError("the 'ops' column needs every trace's aten op counts (gap_counts with events)")
    cols = [c for c in COLUMNS if c in columns]
    x = np.concatenate([_design(t, cols) for t in used])
    y = np.concatenate([t.issue_s for t in used])
    w = np.concatenate([np.full(t.issue_s.size, 1 / np.sqrt(t.issue_s.size)) for t in used])
    result = least_squares(
        lambda c: w * (x @ c - y) / SCALE_S, np.full(len(cols), 1e-6), loss="cauchy", bounds=(0.0, np.inf),
        x_scale=1e-6, xtol=1e-12, ftol=1e-12, gtol=1e-12,
    )  # fmt: skip
    coef = dict(zip(cols, (float(v) for v in result.x), strict=True))
    return HostGapFit(coef.get("launch", 0.0), coef.get("module", 0.0), coef.get("python", 0.0),
                      coef.get("ops", 0.0), tuple(cols), int(y.size), len(used))  # fmt: skip


def _design(t: GapCounts, cols: Sequence[str]) -> np.ndarray:
    values = {
        "launch": np.ones(t.issue_s.size),
        "module": t.modules.astype(float),
        "python": t.python.astype(float),
        "ops": np.asarray(t.ops if t.ops is not None else (), float),
    }
    return np.stack([values[c] for c in cols], axis=1)


def op_children(traces: Sequence[TraceEvents]) -> tuple[tuple[str, float], ...]:
    """Per aten op name, the mean ``cpu_op`` events a call of it holds below it (any depth) in
    the traces, where that is > 0: what the GPU backend's kernel of the op records under it
    (``aten::t``: its ``transpose`` and ``as_strided``; a GEMM: the ``aten::empty`` of its
    output), which a call recorded on fake tensors cannot show (its kernel is the fake one)."""
    calls: dict[str, int] = {}
    below: dict[str, int] = {}
    for t in traces:
        parent = t.ops.parent.astype(np.int64)
        held = np.zeros(parent.size, np.int64)
        up = parent.copy()
        while (live := up >= 0).any():
            np.add.at(held, up[live], 1)
            up[live] = parent[up[live]]
        names = np.asarray(t.names, dtype=object)[t.ops.name] if parent.size else np.zeros(0, object)
        for name in np.unique(names):
            mine = names == name
            calls[name] = calls.get(name, 0) + int(mine.sum())
            below[name] = below.get(name, 0) + int(held[mine].sum())
    return tuple((n, below[n] / calls[n]) for n in sorted(calls) if below[n] > 0)


def fit_traces(traces: Sequence[TraceEvents], samples: Sequence[HostIssueSamples]) -> HostGapFit | None:
    """The launch + Python-call + aten-op model over the traces' intervals (``samples[i]`` of
    ``traces[i]``), Python calls read from each trace's file; launch + aten ops when a trace
    was recorded without Python stacks (or its file is gone). None without intervals."""
    counts = []
    for t, s in zip(traces, samples, strict=True):
        calls = python_calls(t.path) if t.path and Path(t.path).is_file() else None
        empty = PythonCalls(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, bool))
        counts.append((gap_counts(s, calls if calls is not None else empty, t), calls is not None))
    stacks = all(found and g.python.sum() > 0 for g, found in counts if g.issue_s.size)
    return fit([g for g, _ in counts], ("launch", "python", "ops") if stacks else ("launch", "ops"))
