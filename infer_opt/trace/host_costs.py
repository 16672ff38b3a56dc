"""What the host spends to issue each op, and the device's gap between queued kernels, measured
from a trace: the inputs of ``predict``'s replayed step (:mod:`infer_opt.cost_models.step_replay`,
docs/gpu_model.md).

* **Issue cost per op.** The ops that launched GPU work (each GPU event's owner,
  :func:`infer_opt.trace.ops.attribute`: ``aten::linear`` for its GEMM, split-K reduce and
  memset) in the order the host started them, per thread and step: an op's issue cost is the
  time from the previous launching op's start to its own — the Python between the calls, the
  ops that launch nothing (views, reshapes), its own dispatch and launches — less the time the
  host sat in a sync call (:data:`infer_opt.trace.ops.SYNC_CALLS`) in between (a wait for the
  device is the replay's to place, not the host's work). The first launching op of a step has
  none. Kept per family (the op's formula's, ``gemm.nt``, ``attention_flash``; ``""`` without
  a formula) with the number of GPU events the op launched.
* **Queued gap.** Between consecutive kernels on one stream in one step whose later kernel's
  launch call had returned before the earlier kernel ended (it was waiting in the queue): the
  device's own time between back-to-back kernels, which a host-bound gap would swamp.

Pure: numpy and the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from infer_opt.results.calibration import HostIssue
from infer_opt.trace.events import KERNEL, SYNC, TraceEvents


@dataclass(frozen=True)
class HostIssueSamples:
    """One trace's issue costs (per launching op with a predecessor) and queued gaps."""

    family: tuple[str, ...]
    issue_s: np.ndarray
    kernels: np.ndarray
    queued_gap_s: np.ndarray
    #: per sample its thread and the host interval it measures (µs: the previous launching op's
    #: start, its own start), for :mod:`infer_opt.trace.host_fit` to count the calls inside
    tid: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    lo_us: np.ndarray = field(default_factory=lambda: np.zeros(0))
    hi_us: np.ndarray = field(default_factory=lambda: np.zeros(0))


def _sync_waits(events: TraceEvents) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(thread, start µs, duration µs)`` of the host's sync calls, sorted by start."""
    from infer_opt.trace.ops import SYNC_CALLS

    launches = events.launches
    is_sync = np.array([bool(SYNC_CALLS.search(n)) for n in events.names], dtype=bool)
    idx = np.flatnonzero(is_sync[launches.name]) if len(launches.name) else np.zeros(0, np.int64)
    idx = idx[np.argsort(launches.ts_us[idx], kind="stable")]
    return launches.tid[idx], launches.ts_us[idx], launches.dur_us[idx]


def _waited(sync: tuple[np.ndarray, np.ndarray, np.ndarray], tid: int, lo: float, hi: float) -> float:
    threads, starts, durs = sync
    a, b = np.searchsorted(starts, [lo, hi])
    mine = threads[a:b] == tid
    return float(durs[a:b][mine].sum())


def issue_samples(events: TraceEvents, *, causal: str = "half") -> HostIssueSamples:
    """The trace's issue costs per launching op and its queued gaps (module docstring)."""
    from infer_opt.trace.ops import attribute

    gpu, ops = events.gpu, events.ops
    att = attribute(events, None, causal)
    keep = (gpu.kind != SYNC) & (att.owner >= 0) & (gpu.launch >= 0) & (gpu.step >= 0)
    owners, first, counts = np.unique(att.owner[keep], return_index=True, return_counts=True)
    steps = gpu.step[keep][first]
    tids, starts = ops.tid[owners], ops.ts_us[owners]
    order = np.lexsort((starts, steps, tids))
    owners, steps, tids, starts, counts = (x[order] for x in (owners, steps, tids, starts, counts))
    sync = _sync_waits(events)
    same = (tids[1:] == tids[:-1]) & (steps[1:] == steps[:-1])
    families, issue, kernels = [], [], []
    pairs = np.flatnonzero(same)
    for i in pairs.tolist():
        lo, hi = float(starts[i]), float(starts[i + 1])
        cost = getattr(att.costs.get(int(owners[i + 1])), "family", "") or ""
        families.append(cost)
        issue.append(max(hi - lo - _waited(sync, int(tids[i + 1]), lo, hi), 0.0) / 1e6)
        kernels.append(int(counts[i + 1]))
    return HostIssueSamples(
        tuple(families), np.array(issue, dtype=np.float64), np.array(kernels, np.int64), queued_gaps(events),
        tids[pairs + 1].astype(np.int64), starts[pairs].astype(float), starts[pairs + 1].astype(float),
    )  # fmt: skip


def queued_gaps(events: TraceEvents) -> np.ndarray:
    """Seconds between consecutive kernels on one stream in one step, where the later kernel's
    launch call had returned before the earlier one ended (module docstring)."""
    gpu, launches = events.gpu, events.launches
    ks = np.flatnonzero((gpu.kind == KERNEL) & (gpu.launch >= 0) & (gpu.step >= 0))
    if ks.size < 2:
        return np.zeros(0)
    ks = ks[np.lexsort((gpu.ts_us[ks], gpu.step[ks], gpu.stream[ks]))]
    start, end = gpu.ts_us[ks], gpu.ts_us[ks] + gpu.dur_us[ks]
    li = gpu.launch[ks]
    returned = launches.ts_us[li] + launches.dur_us[li]
    pair = (gpu.stream[ks][1:] == gpu.stream[ks][:-1]) & (gpu.step[ks][1:] == gpu.step[ks][:-1])
    gap = start[1:] - end[:-1]
    queued = pair & (returned[1:] <= end[:-1]) & (gap >= 0)
    return gap[queued] / 1e6


def summarize(
    samples: Sequence[HostIssueSamples],
) -> tuple[tuple[HostIssue, ...], float, float]:
    """``(per family, median issue cost over all ops, median queued gap)`` over the traces'
    samples pooled: per family the median issue cost and the mean GPU events per op (0.0 each
    where the traces have none)."""
    families = [f for s in samples for f in s.family]
    issue = np.concatenate([s.issue_s for s in samples]) if samples else np.zeros(0)
    kernels = np.concatenate([s.kernels for s in samples]) if samples else np.zeros(0, np.int64)
    gaps = np.concatenate([s.queued_gap_s for s in samples]) if samples else np.zeros(0)
    names = np.array(families, dtype=object)
    rows = []
    for family in sorted(set(families)):
        mine = names == family
        rows.append(
            HostIssue(
                family=family,
                issue_s=float(np.median(issue[mine])),
                kernels=float(kernels[mine].mean()),
                samples=int(mine.sum()),
            )
        )
    overall = float(np.median(issue)) if issue.size else 0.0
    return tuple(rows), overall, float(np.median(gaps)) if gaps.size else 0.0
