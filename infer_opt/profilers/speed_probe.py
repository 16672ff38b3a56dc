"""How fast the machine runs right now: one fixed matmul, and a fixed chain of small ops, timed hot.

A calibration takes both before every group and ``validate`` before every point, so a validation
can say how far the machine's speed has moved since the calibration was made — on a shared VM
the same step measures 10–30% apart a minute later (docs/benchmarks.md, "Machine drift"), which
a prediction made from the calibration cannot know. The probes are reported, never used to
correct a prediction: a fixed matmul moves with the step in direction (correlation 0.9 over
15 s windows on the Xeon) but not by the same amount.

Two probes, because the two kinds of work move apart: on a 2-core EPYC VM two calibrations an
hour apart timed the matmul probe within 5% of each other, while every small op's hot time
(means, norms, products) differed by 2–3× and the matmul grids by 15% (docs/benchmarks.md, "A
new machine") — a matmul is compute-bound in its own L1/L2, a small op is dispatcher code and
a few cache lines, which a neighbour on the shared last-level cache slows down.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from infer_opt.cost_models.roofline import RunKey
from infer_opt.profilers.device import is_cuda, run_key
from infer_opt.profilers.timing import measure

#: the probe's square matmul side, float32: a fraction of a millisecond on a CPU core, a few
#: microseconds of work on a GPU
SIZE = {"cpu": 256, "cuda": 2048}
REPS = 30


def probe_s(device: Any = "cpu") -> float:
    """Median time of the probe matmul on ``device``, hot."""
    n = SIZE["cuda" if is_cuda(device) else "cpu"]
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=generator).to(device)
    b = torch.randn(n, n, generator=generator).to(device)
    return measure(lambda: a @ b, device=device, warmup=10, reps=REPS, time_cold=False).median_s


#: the small-ops probe's row: a decode step's hidden size
SMALL_HIDDEN = 768


def small_ops_s(device: Any = "cpu") -> float:
    """Median time of a fixed chain of small ops on one row (a layer norm, a mean, an add, a
    product, a tanh-GELU, a softmax: a decode step's small ops), hot, on ``device``."""
    generator = torch.Generator().manual_seed(1)
    x, y = (torch.randn(1, SMALL_HIDDEN, generator=generator).to(device) for _ in range(2))
    weight, bias = torch.ones(SMALL_HIDDEN, device=device), torch.zeros(SMALL_HIDDEN, device=device)

    def chain() -> torch.Tensor:
        h = F.layer_norm(x, (SMALL_HIDDEN,), weight, bias)
        h = (h - h.mean(-1, keepdim=True)) * y
        return torch.softmax(F.gelu(h, approximate="tanh"), -1)

    return measure(chain, device=device, warmup=10, reps=REPS, time_cold=False).median_s


def same_machine(calibration: Any, device: Any) -> bool:
    """Whether ``calibration`` was made on this device model with the thread count set now: only
    then does its probe time say anything about this machine's speed (dtype aside: the probe is
    always float32)."""
    keys = (RunKey.of(calibration), run_key(device, "float32"))
    return len({(k.device_kind, k.device_name, k.threads) for k in keys}) == 1


def slowdown(now: Sequence[float], then: Sequence[float]) -> float | None:
    """Median probe time ``now`` over the median ``then`` (> 1: slower now), or None without
    both (a calibration's usable times: :attr:`CalibrationResult.usable_probe_s`)."""
    if not now or not then:
        return None
    return statistics.median(now) / statistics.median(then)
