"""How fast the machine runs right now: two fixed matmuls, timed hot.

* the **matmul probe**, a square matmul: a fraction of a millisecond of arithmetic on a CPU
  core — what a large model's step is made of;
* the **dispatch probe**, a (1×128)·(128×128) matmul: a few microseconds, almost all of it the
  call's way through Python, the dispatcher and the library's entry (on a GPU, a launch) — what a
  small model's step and a step's small ops are made of.

A calibration takes both before every group and ``validate`` before every point, so a
validation can say how far the machine's speed has moved since the calibration was made, which
a prediction made from the calibration cannot know. The two probes can move apart (a small
model's step follows the dispatch probe, a large one's the matmul probe; measurements in
docs/notebook/journal.md, "Machine drift" and "Two speeds"). The probes are reported, never used
to correct a prediction: they move with the step in direction, not by the same amount.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import torch

from infer_opt.profilers.device import is_cuda, run_key
from infer_opt.profilers.timing import measure
from infer_opt.run_key import RunKey

#: the probe's square matmul side, float32: a fraction of a millisecond on a CPU core, a few
#: microseconds of work on a GPU
SIZE = {"cpu": 256, "cuda": 2048}
REPS = 30
#: the dispatch probe's (M, K, N), float32, and its repetitions (a few microseconds each)
DISPATCH_SHAPE = (1, 128, 128)
DISPATCH_REPS = 200


def probe_s(device: Any = "cpu") -> float:
    """Median time of the probe matmul on ``device``, hot."""
    n = SIZE["cuda" if is_cuda(device) else "cpu"]
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=generator).to(device)
    b = torch.randn(n, n, generator=generator).to(device)
    return measure(lambda: a @ b, device=device, warmup=10, reps=REPS, time_cold=False).median_s


def dispatch_probe_s(device: Any = "cpu") -> float:
    """Median time of the dispatch probe's small matmul on ``device``, hot."""
    m, k, n = DISPATCH_SHAPE
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(m, k, generator=generator).to(device)
    w = torch.randn(k, n, generator=generator).to(device)
    return measure(lambda: x @ w, device=device, warmup=20, reps=DISPATCH_REPS, time_cold=False).median_s


def same_machine(calibration: Any, device: Any) -> bool:
    """Whether ``calibration`` was made on this device model with the thread count set now: only
    then does its probe time say anything about this machine's speed (dtype aside: the probe is
    always float32)."""
    keys = (RunKey.of(calibration), run_key(device, "float32"))
    return len({(k.device_kind, k.device_name, k.threads) for k in keys}) == 1


def slowdown(now: Sequence[float], then: Sequence[float]) -> float | None:
    """Median probe time ``now`` over the median ``then`` (> 1: slower now), or None without
    both (a calibration's usable times: :attr:`CalibrationResult.usable_probe_s`,
    :attr:`CalibrationResult.usable_dispatch_probe_s`)."""
    if not now or not then:
        return None
    return statistics.median(now) / statistics.median(then)
