"""Build a :class:`~infer_opt.trace.events.TraceEvents` from a few Python tuples (tests only).

``make_events(ops=..., launches=..., gpu=..., steps=...)``:

- ``ops``: ``(name, ts_us, dur_us, parent, args)``; ``parent`` is the index of the enclosing op
  in this list (``-1`` at the top); ``args`` the cpu_op's args (``Input Dims`` ...).
- ``launches``: ``(name, ts_us, dur_us, correlation, op)``; ``op`` the innermost enclosing op.
- ``gpu``: ``(kind, name, ts_us, dur_us, stream, correlation, launch, op, step)``; ``kind`` one
  of ``"kernel"``, ``"memcpy"``, ``"memset"``, ``"sync"``; ``launch``/``op``/``step`` indices
  (-1 none).
- ``steps``: ``(number, cpu_start_us, cpu_end_us)``.

Every event runs on thread 1 and device 0; names are interned in first-seen order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from infer_opt.trace.events import GPU_KIND_NAMES, CpuOps, GpuEvents, Launches, Step, TraceEvents


def make_events(
    *,
    ops: Sequence[tuple] = (),
    launches: Sequence[tuple] = (),
    gpu: Sequence[tuple] = (),
    steps: Sequence[tuple] = (),
    path: str = "built.json",
    **extra: Any,
) -> TraceEvents:
    names: dict[str, int] = {}

    def intern(text: str) -> int:
        return names.setdefault(text, len(names))

    def col(rows: Sequence[tuple], i: int, dtype: Any) -> np.ndarray:
        return np.array([r[i] for r in rows], dtype=dtype)

    cpu = CpuOps(
        ts_us=col(ops, 1, np.float64),
        dur_us=col(ops, 2, np.float64),
        name=np.array([intern(o[0]) for o in ops], dtype=np.int32),
        tid=np.ones(len(ops), dtype=np.int64),
        parent=col(ops, 3, np.int64),
        external_id=np.arange(len(ops), dtype=np.int64),
        event_index=np.arange(len(ops), dtype=np.int64),
        args=tuple(dict(o[4]) for o in ops),
    )
    launch = Launches(
        ts_us=col(launches, 1, np.float64),
        dur_us=col(launches, 2, np.float64),
        name=np.array([intern(x[0]) for x in launches], dtype=np.int32),
        tid=np.ones(len(launches), dtype=np.int64),
        correlation=col(launches, 3, np.int64),
        op=col(launches, 4, np.int64),
        event_index=np.arange(len(launches), dtype=np.int64),
    )
    g = GpuEvents(
        ts_us=col(gpu, 2, np.float64),
        dur_us=col(gpu, 3, np.float64),
        kind=np.array([GPU_KIND_NAMES.index(x[0]) for x in gpu], dtype=np.int8),
        name=np.array([intern(x[1]) for x in gpu], dtype=np.int32),
        stream=col(gpu, 4, np.int64),
        device=np.zeros(len(gpu), dtype=np.int32),
        correlation=col(gpu, 5, np.int64),
        launch=col(gpu, 6, np.int64),
        op=col(gpu, 7, np.int64),
        step=col(gpu, 8, np.int32),
        event_index=np.arange(len(gpu), dtype=np.int64),
        args=tuple({} for _ in gpu),
    )
    return TraceEvents(
        path=path,
        names=tuple(names),
        gpu=g,
        launches=launch,
        ops=cpu,
        steps=tuple(Step(*s) for s in steps),
        **extra,
    )
