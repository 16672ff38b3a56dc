"""One rank's trace as typed columns: the contract between the reader and the analyses.

:func:`infer_opt.trace.reader.read_trace` turns a torch.profiler / Kineto Chrome-trace file
into a :class:`TraceEvents`; every analysis (timeline, ops, collectives, what-if) is a pure
function over it. Columns are numpy arrays aligned by position (one entry per event), strings
are indices into ``names``, and times are the file's own microseconds as float64 (integer µs in
older traces, fractional µs relative to ``baseTimeNanoseconds`` in newer ones; add
``base_time_ns / 1e3`` for an absolute time). Nothing here imports torch or pandas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infer_opt.notices import Notice

#: ``GpuEvents.kind`` values
KERNEL, MEMCPY, MEMSET, SYNC = 0, 1, 2, 3
GPU_KIND_NAMES = ("kernel", "memcpy", "memset", "sync")

#: the ``args`` keys the reader keeps (the analyses read no others; add a key here when one
#: does): a GPU event's stream and collective fields, a ``cuda_sync`` record's wait (the stream
#: and the ``cudaEventRecord`` it waits on, for :mod:`.graph`), a cpu_op's recorded inputs and stream.
#: Events with the same kept args share one dict: treat them as read-only.
GPU_ARG_KEYS = (
    "stream",
    "Collective name",
    "collective_name",
    "In msg nelems",
    "Out msg nelems",
    "Group size",
    "dtype",
    "Process Group Name",  # the NCCL communicator (cross-rank matching, trace/cross_rank.py)
    "wait_on_stream",
    "wait_on_cuda_event_record_corr_id",
)
OP_ARG_KEYS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs", "stream")

#: ``GpuEvents.launch`` for a kernel queued before the trace window opened (its correlation id
#: is below the first recorded launch's), as opposed to -1: no launch found at all
LAUNCH_BEFORE_WINDOW = -2


@dataclass(frozen=True, eq=False)
class GpuEvents:
    """GPU-side events (``kernel``/``Kernel``, ``gpu_memcpy``, ``gpu_memset``, ``cuda_sync``)."""

    ts_us: np.ndarray  # float64 start
    dur_us: np.ndarray  # float64 duration (>= 0)
    kind: np.ndarray  # int8: KERNEL, MEMCPY, MEMSET, SYNC
    name: np.ndarray  # int32 index into TraceEvents.names
    stream: np.ndarray  # int64 (a string stream id is mapped to a stable integer)
    device: np.ndarray  # int64 (a string device id is mapped like a stream)
    correlation: np.ndarray  # int64, -1 when the event has none
    launch: np.ndarray  # int64 index into TraceEvents.launches, -1 none, LAUNCH_BEFORE_WINDOW
    op: np.ndarray  # int64 index into TraceEvents.ops of the innermost enclosing cpu_op, -1 none
    step: np.ndarray  # int32 index into TraceEvents.steps (by its launch), -1 outside any step
    event_index: np.ndarray  # int64 position in the file's traceEvents (for --augment)
    args: tuple[dict[str, Any], ...]  # each event's GPU_ARG_KEYS args (shared, read-only)

    def __len__(self) -> int:
        return int(self.ts_us.shape[0])


@dataclass(frozen=True, eq=False)
class Launches:
    """Host-side launches: ``cuda_runtime``/``Runtime``/``cuda_driver`` events (HIP names too)."""

    ts_us: np.ndarray
    dur_us: np.ndarray
    name: np.ndarray  # int32 index into names
    tid: np.ndarray  # int64 thread id
    correlation: np.ndarray  # int64
    op: np.ndarray  # int64 innermost enclosing cpu_op on the same thread, -1 none
    event_index: np.ndarray

    def __len__(self) -> int:
        return int(self.ts_us.shape[0])


@dataclass(frozen=True, eq=False)
class CpuOps:
    """``cpu_op`` events with what ``record_shapes=True`` recorded (absent keys: empty)."""

    ts_us: np.ndarray
    dur_us: np.ndarray
    name: np.ndarray  # int32 index into names
    tid: np.ndarray  # int64
    parent: np.ndarray  # int64 index of the enclosing cpu_op on the same thread, -1 at the top
    external_id: np.ndarray  # int64, -1 when absent (``External id`` or ``external id``)
    event_index: np.ndarray
    args: tuple[dict[str, Any], ...]  # OP_ARG_KEYS: ``Input Dims``, ``Input type``, ... (shared, read-only)

    def __len__(self) -> int:
        return int(self.ts_us.shape[0])


@dataclass(frozen=True)
class Step:
    """One ``ProfilerStep#N`` window: the CPU annotation and, where present, its GPU-side
    ``gpu_user_annotation``."""

    number: int
    cpu_start_us: float
    cpu_end_us: float
    gpu_start_us: float | None = None
    gpu_end_us: float | None = None


@dataclass(frozen=True, eq=False)
class TraceEvents:
    """Everything the analyses read from one trace file (one rank)."""

    path: str
    names: tuple[str, ...]
    gpu: GpuEvents
    launches: Launches
    ops: CpuOps
    steps: tuple[Step, ...]
    rank: int | None = None  # distributedInfo.rank, else None
    world_size: int | None = None
    base_time_ns: int | None = None
    device_properties: tuple[dict[str, Any], ...] = ()  # deviceProperties as the file has it
    metadata: dict[str, Any] = field(default_factory=dict)  # schemaVersion, trace_id, versions ...
    warnings: tuple[Notice, ...] = ()  # repaired truncation, duplicates dropped, ...

    def name_of(self, index: int) -> str:
        return self.names[int(index)]


def fingerprint(events: TraceEvents) -> str:
    """A trace's identity from its own events (their kinds, times and durations, in time order),
    the same whatever the file's name, folder or compression: how a calibration knows the
    traces it was built from (``validate --against``)."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    for column in (
        events.gpu.ts_us,
        events.gpu.dur_us,
        events.launches.ts_us,
        events.ops.ts_us,
        events.ops.dur_us,
    ):
        digest.update(np.sort(np.asarray(column, dtype=np.float64)).tobytes())
    digest.update(np.sort(events.gpu.kind.astype(np.int8)).tobytes())
    return digest.hexdigest()
