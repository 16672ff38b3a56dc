"""Amdahl's law, generalised to several disjoint parts and added overhead.

``S = 1 / ((1 - Σf_i) + Σ f_i/s_i + a)`` where part i takes a fraction ``f_i`` of the
original time and is sped up ``s_i`` times, and ``a`` is new overhead (a layout
conversion, an extra synchronisation) as a fraction of the original time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results.amdahl import AmdahlResult, PartResult

if TYPE_CHECKING:
    from infer_opt.requests import AmdahlRequest

#: Σf may exceed 1 by this much (rounding of user-entered fractions).
FRACTION_SUM_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Part:
    name: str
    fraction: float
    speedup: float


#: the smallest speedup taken: below it f/s and every time after it would be meaningless
#: (and f/s overflows a float near 1e-308)
MIN_SPEEDUP = 1e-9


def validate_part(part: Part, option: str = "parts") -> None:
    f, s = part.fraction, part.speedup
    if not isinstance(f, (int, float)) or math.isnan(f) or not 0.0 <= f <= 1.0:
        raise InvalidInput(option, f"{part.name}={f}", "fraction must be in [0, 1]")
    if not isinstance(s, (int, float)) or math.isnan(s) or s <= 0:
        raise InvalidInput(option, f"{part.name} speedup {s}", "speedup must be > 0 (inf allowed)")
    if s < MIN_SPEEDUP:
        raise InvalidInput(
            option,
            f"{part.name} speedup {s:g}",
            f"speedup must be at least {MIN_SPEEDUP:g} (a slowdown, but finite)",
        )


def _validate(parts: Sequence[Part], added: float) -> float:
    if not parts:
        raise InvalidInput("parts", "none", "give at least one part")
    for part in parts:
        validate_part(part)
    names = [p.name for p in parts]
    if len(set(names)) != len(names):
        raise InvalidInput("parts", ",".join(names), "part names must be distinct")
    if math.isnan(added) or added < 0 or math.isinf(added):
        raise InvalidInput("added", added, "added overhead must be a finite fraction >= 0")
    total = math.fsum(p.fraction for p in parts)
    if total > 1.0 + FRACTION_SUM_TOLERANCE:
        raise InvalidInput("parts", f"Σf = {total:g}", "fractions of disjoint parts must sum to <= 1")
    return min(total, 1.0)


def amdahl_speedup(fraction: float, speedup: float, added: float = 0.0) -> float:
    """``S = 1 / ((1 - f) + f/s + a)``. Worked check: f = 0.4, s = 4 -> 1/0.7 ≈ 1.4286."""
    return combined(parts=[Part("part", fraction, speedup)], added=added).speedup


def _new_time(untouched: float, parts: Sequence[Part], added: float) -> float:
    return untouched + math.fsum(p.fraction / p.speedup for p in parts) + added


def _ratio(numerator: float, denominator: float) -> float:
    return math.inf if denominator == 0 else numerator / denominator


def combined(
    parts: Sequence[Part], added: float = 0.0, target: float | None = None, speedup_given: bool = True
) -> AmdahlResult:
    """End-to-end speedup of several disjoint parts plus added overhead, the ceiling, and
    (with ``target``) the speedup the parts need to reach it."""
    total_f = _validate(parts, added)
    untouched = max(0.0, 1.0 - total_f)
    new_time = _new_time(untouched, parts, added)
    speedup = _ratio(1.0, new_time)
    ceiling = _ratio(1.0, untouched + added)

    required: float | None = None
    reason: Notice | None = None
    per_part_required: list[float | None] = [None] * len(parts)
    if target is not None:
        if math.isnan(target) or target <= 0 or math.isinf(target):
            raise InvalidInput("target", target, "target speedup must be a finite number > 0")
        required, reason = solve_required(total_f, target, untouched + added)
        for i, part in enumerate(parts):
            others = new_time - part.fraction / part.speedup
            per_part_required[i], _ = _solve_one(part.fraction, target, others)

    results = tuple(
        PartResult(
            name=p.name,
            fraction=p.fraction,
            speedup=p.speedup,
            time_after=p.fraction / p.speedup,
            share_after=_ratio(p.fraction / p.speedup, new_time) if new_time > 0 else 0.0,
            required_speedup=per_part_required[i],
            slowdown=p.speedup < 1,
        )
        for i, p in enumerate(parts)
    )
    return AmdahlResult(
        parts=results,
        added=added,
        untouched_fraction=untouched,
        new_time=new_time,
        speedup=speedup,
        ceiling=ceiling,
        target=target,
        required_speedup=required,
        reason=reason,
        speedup_given=speedup_given,
        warnings=_warnings(results, speedup),
    )


def _warnings(parts: Sequence[PartResult], speedup: float) -> tuple[Notice, ...]:
    found = []
    slow = [p.name for p in parts if p.slowdown]
    if slow:
        found.append(Notice("parts_slower", {"parts": slow}))
    if speedup < 1:
        found.append(Notice("slower_overall", {"speedup": speedup}))
    return tuple(found)


def _solve_one(fraction: float, target: float, rest_time: float) -> tuple[float | None, Notice | None]:
    """Solve ``1 / (rest + f/s) = target`` for s. ``rest`` is the time that does not change."""
    budget = 1.0 / target - rest_time  # time the part may still take: f/s = budget
    if fraction == 0:
        return None, Notice("part_takes_no_time", {"target_holds": budget >= 0})
    if budget <= 0:
        return None, Notice("target_above_ceiling", {"target": target, "ceiling": _ratio(1.0, rest_time)})
    return fraction / budget, None


def solve_required(
    fraction: float, target: float, rest_time: float | None = None
) -> tuple[float | None, Notice | None]:
    """Speedup ``s`` a part of fraction ``f`` needs so that the end-to-end speedup is
    ``target``: ``s = f / (1/S* - (1 - f) - a)``. ``rest_time`` defaults to ``1 - f``
    (no overhead). Returns ``(None, reason)`` when ``S* >= 1/(1 - f + a)`` (impossible)."""
    rest = 1.0 - fraction if rest_time is None else rest_time
    return _solve_one(fraction, target, rest)


@dataclass(frozen=True)
class Curve:
    """End-to-end speedup as one part's speedup varies, the others held as given."""

    name: str
    part_speedups: tuple[float, ...]
    end_to_end: tuple[float, ...]
    #: the curve's asymptote: this part made free
    asymptote: float
    #: the point given on the command line
    at_speedup: float
    at_end_to_end: float


def part_curves(result: AmdahlResult, points: int = 200) -> list[Curve]:
    """One curve per part over part speedups from 1/10 of the smallest given (at most 0.5)
    to 100× the largest finite one (at least 1000), log-spaced."""
    finite = [p.speedup for p in result.parts if math.isfinite(p.speedup)] or [1.0]
    low = min(0.5, min(finite) / 10)
    high = max(1000.0, max(finite) * 100)
    step = (math.log10(high) - math.log10(low)) / (points - 1)
    grid = tuple(10 ** (math.log10(low) + i * step) for i in range(points))
    curves = []
    for part in result.parts:
        rest = result.new_time - part.time_after
        values = tuple(_ratio(1.0, rest + part.fraction / s) for s in grid)
        curves.append(Curve(part.name, grid, values, _ratio(1.0, rest), part.speedup, result.speedup))
    return curves


def run(request: AmdahlRequest) -> AmdahlResult:
    """``infer-opt amdahl``: the ``--part`` items, or one part from ``fraction``/``speedup``
    (s = 1 when only ``target_speedup`` is given: the parts are solved for, not evaluated), combined."""
    fraction, speedup, parts, target = (
        request.fraction,
        request.speedup,
        list(request.part or ()),
        request.target_speedup,
    )
    if fraction is None:
        if speedup is not None:
            raise InvalidInput("--speedup", speedup, "needs --fraction (or use --part NAME=F:S)")
        if not parts:
            raise InvalidInput(
                "--fraction", "missing", "give --fraction and --speedup, or one or more --part"
            )
    elif parts:
        raise InvalidInput("--fraction", fraction, "use either --fraction/--speedup or --part, not both")
    elif speedup is None and target is None:
        raise InvalidInput("--speedup", "missing", "give --speedup (or --target-speedup to solve for it)")
    else:
        parts = [Part("part", fraction, 1.0 if speedup is None else speedup)]
    given = fraction is None or speedup is not None
    return combined(parts, added=request.added, target=target, speedup_given=given)
