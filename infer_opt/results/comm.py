"""The ``comm`` kind: collective times over message sizes, per collective, with their α-β fits."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from infer_opt.notices import Notice
from infer_opt.results import Result, number_problems

#: how far (×/÷) the fitted bandwidth may wander from the best measured S/t
BANDWIDTH_RANGE = 100.0


@dataclass(frozen=True)
class CommPoint:
    """One message size of one collective, over all ranks."""

    bytes: int
    #: the slowest rank's median: max over ranks of each rank's median time
    time_s: float
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    #: each rank's median, in rank order
    rank_median_s: tuple[float, ...]
    #: the slowest rank's quartiles (the spread behind ``time_s``)
    q1_s: float
    q3_s: float
    slowest_rank: int
    #: samples per rank
    reps: int

    def loaded_problems(self) -> list[tuple[str, object, str]]:
        """A saved point's size and times are finite and > 0 (a file read back)."""
        out = number_problems(self, finite_positive=("bytes", "time_s", "rank_median_s"))
        return out + number_problems(self, non_negative=("q1_s", "q3_s"))


@dataclass(frozen=True)
class CollectiveSweep:
    """One collective over its message sizes, and its α-β fit (the fit fields are ``None``
    with fewer than :data:`MIN_FIT_POINTS` sizes)."""

    collective: str
    #: busbw / algbw at this world size
    bus_factor: float
    points: tuple[CommPoint, ...]
    alpha_s: float | None = None
    beta_bytes_per_s: float | None = None
    #: S* = α·β: below it latency dominates
    crossover_bytes: float | None = None
    alpha_interval: tuple[float, float] | None = None
    beta_interval: tuple[float, float] | None = None
    #: median and largest |t̂ − t|/t over the sizes
    fit_median_abs_rel_error: float | None = None
    fit_max_abs_rel_error: float | None = None
    #: fit parameters on the edge of their search range (the sizes do not pin them)
    parameters_at_bound: tuple[str, ...] = ()

    def loaded_problems(self) -> list[tuple[str, object, str]]:
        """What a saved sweep may not hold: α < 0 or β <= 0, or a fit its own points contradict
        — α above twice the smallest measured time, β beyond ×/÷:data:`BANDWIDTH_RANGE` of the
        best measured S/t (the fit's own search range: :func:`fit_alpha_beta`)."""
        out = number_problems(self, non_negative=("alpha_s",), finite_positive=("beta_bytes_per_s",))
        points = [p for p in self.points if p.time_s > 0 and math.isfinite(p.time_s)]
        if out or not points:
            return out
        t_min = min(p.time_s for p in points)
        best = max(p.bytes / p.time_s for p in points)
        slack = 1 + 1e-6
        if self.alpha_s is not None and self.alpha_s > 2 * t_min * slack:
            allowed = f"must be at most twice the sweep's smallest time ({t_min:.3g} s)"
            out.append(("alpha_s", self.alpha_s, allowed))
        beta = self.beta_bytes_per_s
        if beta is not None and not best / BANDWIDTH_RANGE / slack <= beta <= best * BANDWIDTH_RANGE * slack:
            allowed = f"must be within ×/÷{BANDWIDTH_RANGE:g} of the best measured S/t ({best:.3g} B/s)"
            out.append(("beta_bytes_per_s", beta, allowed))
        return out

    def predict_s(self, n_bytes: float) -> float | None:
        """``α + S/β`` from this sweep's fit (None without one)."""
        if self.alpha_s is None or self.beta_bytes_per_s is None:
            return None
        return self.alpha_s + n_bytes / self.beta_bytes_per_s


@dataclass(frozen=True)
class CommResult(Result):
    """Collective times over message sizes, per collective, with their α-β fits."""

    KIND = "comm"

    world_size: int
    backend: str
    device: str
    device_name: str
    dtype: str
    collectives: tuple[CollectiveSweep, ...]
    #: nodes taking part (from torchrun's environment; 1 when unknown)
    nnodes: int = 1
    #: the cache key of the device model and dtype (profilers.device.device_key)
    device_key: str = ""
    warmup: int = 0
    reps: int = 0
    #: False when the sweep stopped early (interrupted or a rank failed): what was measured
    complete: bool = True
    warnings: tuple[Notice, ...] = field(default_factory=tuple)
    #: the points measured over every collective, derived when built
    point_count: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "point_count", sum(len(s.points) for s in self.collectives))

    def collective(self, name: str) -> CollectiveSweep | None:
        """The sweep of collective ``name``, if measured."""
        return next((c for c in self.collectives if c.collective == name), None)
