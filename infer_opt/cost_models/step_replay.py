"""A predicted step replayed as a graph: one host thread issuing ops onto one device stream.

The host issues op ``i`` after its host cost ``h_i`` (the Python, dispatch and launch work since
the previous op); its kernels (device time ``k_i``, 0 for an op that launches none) start when the
launch arrives and the stream is free::

    a_i   = T + Σ_{j≤i} h_j                       launch arrival (T: the host's start)
    end_i = max(end_{i−1}, a_i) + k_i               the stream's order
          = S_i + max(end_{−1}, max_{j≤i}(a_j − S_{j−1}))   with S = cumsum(k) (vectorized)

A **host sync** after op ``i`` (a host read of a device value, ``.item()``) makes the host wait
for the device: the next op's host work starts at ``max(a_i, end_i)``. The step ends where the
replay ends (``max`` of the host's last arrival and the device's last end), so
``max(Σh, Σk) ≤ step ≤ Σh + Σk`` — the serial sum is the upper bound, reached only when the two
never overlap.

**What bounds it**: the critical path, walked back from the end: a kernel that started when its
launch arrived (``a_i ≥ end_{i−1}``) hands the path to the host, one that waited for the stream
keeps it on the device, a sync the host waited at hands it to the device. ``host_critical_s +
device_critical_s = step_s``; the step is **host-bound** when the host's part is the larger.

Pure: numpy only.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

HOST = "host"
DEVICE = "device"


@dataclass(frozen=True)
class StepReplay:
    """A replayed step: when it ends, what set that, and the sums it is held against."""

    step_s: float
    #: Σ h (the host's own work, waits at syncs excluded)
    host_s: float
    #: Σ k (the device's busy time)
    device_s: float
    #: Σ h + Σ k: the step if host and device never overlapped (the old serial sum)
    serial_s: float
    host_critical_s: float
    device_critical_s: float
    #: ``"host"`` or ``"device"``: which side the larger part of the critical path is on
    bound: str

    @property
    def idle_s(self) -> float:
        """The device's idle time inside the step (``step − Σk``)."""
        return max(self.step_s - self.device_s, 0.0)


@dataclass(frozen=True)
class _Segment:
    """The ops between two host syncs: host start ``t0``, device free at ``d0``, per op the launch
    arrival, its end, whether its start was set by the launch, and whether a sync ends it."""

    t0: float
    d0: float
    arrival: np.ndarray
    end: np.ndarray
    host_set: np.ndarray
    synced: bool


def _check(host_s: Sequence[float], kernel_s: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    h = np.asarray(host_s, dtype=np.float64).ravel()
    k = np.asarray(kernel_s, dtype=np.float64).ravel()
    if h.shape != k.shape:
        raise ValueError(f"host_s and kernel_s differ in length ({h.size} and {k.size})")
    if not (np.all(np.isfinite(h)) and np.all(np.isfinite(k))) or (h < 0).any() or (k < 0).any():
        raise ValueError("host and kernel times must be finite and >= 0")
    return h, k


def _segments(h: np.ndarray, k: np.ndarray, sync: np.ndarray) -> list[_Segment]:
    cuts = sorted({0, *(np.flatnonzero(sync) + 1).tolist(), h.size})
    out: list[_Segment] = []
    t0 = d0 = 0.0
    for a, b in itertools.pairwise(cuts):
        arrival = t0 + np.cumsum(h[a:b])
        s = np.cumsum(k[a:b])
        end = s + np.maximum(d0, np.maximum.accumulate(arrival - (s - k[a:b])))
        before = np.concatenate(([d0], end[:-1]))
        synced = bool(sync[b - 1])
        out.append(_Segment(t0, d0, arrival, end, arrival >= before, synced))
        d0 = float(end[-1])
        t0 = max(float(arrival[-1]), d0) if synced else float(arrival[-1])
    return out


def _critical(segments: list[_Segment]) -> tuple[float, float]:
    """``(host, device)`` seconds of the critical path, walked back from the step's end."""
    host = device = 0.0
    s = len(segments) - 1
    last = segments[s]
    on_device = last.end[-1] >= last.arrival[-1]
    point = float(last.end[-1] if on_device else last.arrival[-1])
    index = last.end.size - 1
    while s >= 0:
        seg = segments[s]
        if on_device:
            set_by_host = np.flatnonzero(seg.host_set[: index + 1])
            if set_by_host.size:
                j = int(set_by_host[-1])
                device += point - float(seg.arrival[j])
                point, on_device = float(seg.arrival[j]), False
                continue
            device += point - seg.d0
            point = seg.d0
        else:
            host += point - seg.t0
            point = seg.t0
        s -= 1
        if s < 0:
            break
        prev = segments[s]
        index = prev.end.size - 1
        # the host started this segment when its sync returned: the device's end or its own
        on_device = on_device or float(prev.end[-1]) > float(prev.arrival[-1])
        point = float(prev.end[-1]) if on_device else float(prev.arrival[-1])
    return host, device


def replay(
    host_s: Sequence[float], kernel_s: Sequence[float], sync: Sequence[bool] | None = None
) -> StepReplay:
    """Replay one step (module docstring): per op its host cost, its device time (0: no kernel)
    and whether the host waits for the device after it."""
    h, k = _check(host_s, kernel_s)
    if h.size == 0:
        return StepReplay(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, DEVICE)
    waits = np.zeros(h.size, dtype=bool) if sync is None else np.asarray(sync, dtype=bool).ravel()
    if waits.shape != h.shape:
        raise ValueError(f"sync has {waits.size} entries for {h.size} ops")
    segments = _segments(h, k, waits)
    last = segments[-1]
    step = max(float(last.end[-1]), float(last.arrival[-1]))
    host_c, device_c = _critical(segments)
    host, device = float(h.sum()), float(k.sum())
    return StepReplay(
        step_s=step,
        host_s=host,
        device_s=device,
        serial_s=host + device,
        host_critical_s=host_c,
        device_critical_s=device_c,
        bound=HOST if host_c > device_c else DEVICE,
    )
