"""Amdahl's law over a measured profile: where does optimization pay most?

For each operator category c (matmul, attention, ...) with measured time ``T_c`` in a step of
time ``T``:

* its fraction ``f_c = T_c / T``;
* the end-to-end **ceiling** if the category were free: ``1 / (1 - f_c)``;
* the end-to-end speedup if every op in it ran at its **roofline bound**: the category's own
  speedup ``s_c = T_c / Σ_i min(t_i, p_i)`` with ``p_i = t0 + max(F_i/R, Q_i/b)`` the fitted
  roofline's prediction for op i, then ``S_c = 1 / ((1 - f_c) + f_c/s_c)``.

``min(t_i, p_i)`` caps each op at "no slower than now": an op already faster than the fit
predicts is not slowed down, so ``s_c >= 1``. The launch floor ``t0`` keeps zero-work ops
(views) from counting as free. The step time ``T`` is the larger of the measured step and the
per-op total, so the fractions never sum above 1. These are model predictions from the
fitted roofline, not measurements.

Pure: stdlib only; the Amdahl arithmetic is :mod:`infer_opt.cost_models.amdahl`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from infer_opt.cost_models.amdahl import Part, amdahl_speedup, combined
from infer_opt.errors import InvalidInput


@dataclass(frozen=True)
class CategoryTime:
    """Measured time of one category and the sum of its ops' roofline-bound times (each
    already capped at the op's measured time)."""

    category: str
    time_s: float
    bound_time_s: float


@dataclass(frozen=True)
class Opportunity:
    category: str
    time_s: float
    #: f = time / step time
    fraction: float
    #: the category's own speedup at its roofline bound, s = time / bound time
    part_speedup: float
    #: 1 / (1 - f): the category made free
    ceiling_speedup: float
    #: 1 / ((1 - f) + f/s): every op at its roofline bound (a prediction)
    roofline_speedup: float
    bound_time_s: float


@dataclass(frozen=True)
class ProfileAmdahl:
    """Opportunities ranked by ``roofline_speedup`` (then ceiling), best first."""

    step_time_s: float
    opportunities: tuple[Opportunity, ...]
    #: every category at its bound together
    all_at_bound_speedup: float
    #: every attributed op free: what only host/launch overhead would leave
    all_free_ceiling: float
    #: share of the step no operator accounts for
    unattributed_fraction: float


def capped_bound(time_s: float, predicted_s: float) -> float:
    """An op's target time: its roofline prediction, but never slower than it is now."""
    return min(time_s, predicted_s)


def _check(value: float, what: str) -> None:
    if not isinstance(value, (int, float)) or math.isnan(value) or value < 0 or math.isinf(value):
        raise InvalidInput(what, value, "must be a finite number >= 0")


def profile_amdahl(categories: Sequence[CategoryTime], step_time_s: float) -> ProfileAmdahl:
    """Rank categories by the end-to-end speedup their roofline bound would give."""
    _check(step_time_s, "step time")
    for c in categories:
        _check(c.time_s, f"{c.category} time")
        _check(c.bound_time_s, f"{c.category} bound time")
        if c.bound_time_s > c.time_s * (1 + 1e-12):
            raise InvalidInput(
                f"{c.category} bound time", c.bound_time_s, "must not exceed the category's time"
            )
    total_ops = math.fsum(c.time_s for c in categories)
    step = max(step_time_s, total_ops)
    if step <= 0:
        raise InvalidInput("step time", step_time_s, "must be > 0 (nothing was timed)")
    opportunities = []
    parts = []
    for c in categories:
        f = min(1.0, c.time_s / step)
        s = math.inf if c.bound_time_s == 0 else max(1.0, c.time_s / c.bound_time_s)
        if c.time_s == 0:
            s = 1.0
        opportunities.append(
            Opportunity(
                category=c.category,
                time_s=c.time_s,
                fraction=f,
                part_speedup=s,
                ceiling_speedup=amdahl_speedup(f, math.inf),
                roofline_speedup=amdahl_speedup(f, s),
                bound_time_s=c.bound_time_s,
            )
        )
        if f > 0:
            parts.append(Part(c.category, f, s))
    opportunities.sort(key=lambda o: (-o.roofline_speedup, -o.ceiling_speedup, o.category))
    if parts:
        together = combined(parts)
        all_at_bound, all_free = (
            together.speedup,
            combined([Part(p.name, p.fraction, math.inf) for p in parts]).speedup,
        )
    else:
        all_at_bound = all_free = 1.0
    return ProfileAmdahl(
        step_time_s=step,
        opportunities=tuple(opportunities),
        all_at_bound_speedup=all_at_bound,
        all_free_ceiling=all_free,
        unattributed_fraction=max(0.0, 1.0 - total_ops / step),
    )


@dataclass(frozen=True)
class RooflineLine:
    """The attainable FLOP/s ``min(R, b·I)`` over a grid of intensities (for a plot)."""

    intensity: tuple[float, ...]
    attainable_flops_per_s: tuple[float, ...]
    ridge_point: float


def roofline_line(
    compute_rate_flops: float, bandwidth_bytes_per_s: float, intensities: Sequence[float], n: int = 200
) -> RooflineLine:
    """``min(R, b·I)`` on a log grid spanning ``intensities`` and the ridge ``R/b`` (×/÷ 4)."""
    ridge = compute_rate_flops / bandwidth_bytes_per_s
    finite = [i for i in intensities if i > 0 and math.isfinite(i)]
    lo = min([ridge, *finite]) / 4
    hi = max([ridge, *finite]) * 4
    step = (math.log10(hi) - math.log10(lo)) / (n - 1)
    grid = tuple(10 ** (math.log10(lo) + k * step) for k in range(n))
    return RooflineLine(grid, tuple(min(compute_rate_flops, bandwidth_bytes_per_s * i) for i in grid), ridge)
