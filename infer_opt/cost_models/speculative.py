"""Speculative decoding: acceptance of a draft token, committed tokens per round, speedup.

* Acceptance of a draft token ``x ~ q`` (only where ``q(x) > 0``): ``a(x) = min(1, p(x)/q(x))``;
  total ``A = Σ min(p, q) = 1 - TV(p, q)``; on rejection sample the residual
  ``r = max(p - q, 0)/Z`` with ``Z = 1 - A``. The output distribution ``min(p, q) + Z·r`` is p.
* Committed tokens per round (bonus included) with per-position conditional acceptance
  ``α_i``: ``E[N] = Σ_{i=0}^{k} Π_{j≤i} α_j``; constant α: ``(1 - α^{k+1})/(1 - α)``, ``k + 1``
  at α = 1. A length budget L truncates a round: ``E[min(N, L)] = Σ_{j=1}^{min(L, k+1)} P(N ≥ j)``.
* Speedup: ``S = c_t·E[N] / (k·c_d + c_v(k) + c_m)``.

All durations are in seconds. Functions take and return numpy arrays where a vector is
natural and raise :class:`~infer_opt.errors.InvalidInput` on bad input.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results.speculative import (
    AcceptanceResult,
    Costs,
    MetricsResult,
    PlansResult,
    PlanStats,
    PositionRate,
    SpeedupResult,
    SweepPoint,
    TokenAcceptance,
)
from infer_opt.units import parse_duration

if TYPE_CHECKING:
    from infer_opt.requests import AcceptanceRequest, FromMetricsRequest, PlansRequest, SpecSpeedupRequest

#: a distribution's entries must sum to 1 within this (absolute) unless asked to normalise
DISTRIBUTION_TOLERANCE = 1e-6
#: the longest draft a round is modelled with (real drafts are a few to a few dozen tokens)
MAX_K = 1024


# ----------------------------------------------------------------------------- distributions


#: the largest entry a probability vector may hold (with --normalize, weights are rescaled by
#: their sum, which must fit a float)
MAX_WEIGHT = 1e300


@dataclass(frozen=True)
class PlanRound:
    plan: str
    time_s: float
    tokens: int


def _total(values: np.ndarray) -> float:
    """The sum of non-negative terms by numpy's pairwise summation: relative error about
    ``log2(n)·eps`` (the terms are >= 0, so nothing cancels). ``math.fsum`` over a Python list
    is exact but took milliseconds per call on a 50k-token vocabulary, inside every round of
    ``speculative run``."""
    return float(np.sum(values))


def validate_distribution(
    name: str,
    values: Sequence[float] | np.ndarray,
    tol: float = DISTRIBUTION_TOLERANCE,
    normalize: bool = False,
) -> np.ndarray:
    """A probability vector as a float64 1-D array: finite, non-negative, summing to 1
    within ``tol`` (absolute) — or, with ``normalize``, rescaled by its sum."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput(name, "…", "expected a vector of numbers") from None
    if arr.ndim != 1:
        arr = arr.squeeze()
        if arr.ndim != 1:
            raise InvalidInput(
                name, f"shape {tuple(np.shape(values))}", "expected a 1-D vector of probabilities"
            )
    if arr.size == 0:
        raise InvalidInput(name, "empty", "expected at least one probability")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        i = int(bad[0])
        raise InvalidInput(name, f"entry {i} = {arr[i]}", "probabilities must be finite (no NaN or inf)")
    neg = np.flatnonzero(arr < 0)
    if neg.size:
        i = int(neg[0])
        raise InvalidInput(name, f"entry {i} = {arr[i]:g}", "probabilities must be >= 0")
    if arr.max() > MAX_WEIGHT:
        i = int(arr.argmax())
        raise InvalidInput(name, f"entry {i} = {arr[i]:g}", f"weights must be at most {MAX_WEIGHT:g}")
    total = _total(arr)
    if normalize:
        if total <= 0:
            raise InvalidInput(name, "all zeros", "cannot normalise: the entries sum to 0")
        return arr / total
    if abs(total - 1.0) > tol:
        raise InvalidInput(
            name,
            f"sum {total:.10g}",
            f"probabilities must sum to 1 within {tol:g} (absolute); use --normalize to rescale",
        )
    return arr


def validate_pair(
    p: Sequence[float] | np.ndarray,
    q: Sequence[float] | np.ndarray,
    *,
    tol: float = DISTRIBUTION_TOLERANCE,
    normalize: bool = False,
    names: tuple[str, str] = ("p", "q"),
) -> tuple[np.ndarray, np.ndarray]:
    """Both distributions validated, over the same vocabulary (same length)."""
    p_arr = validate_distribution(names[0], p, tol=tol, normalize=normalize)
    q_arr = validate_distribution(names[1], q, tol=tol, normalize=normalize)
    if p_arr.size != q_arr.size:
        raise InvalidInput(
            names[1],
            f"{q_arr.size} entries vs {p_arr.size} in {names[0]}",
            "p and q must be over the same vocabulary (same length)",
        )
    return p_arr, q_arr


def softmax(
    logits: Sequence[float] | np.ndarray, temperature: float = 1.0, name: str = "logits"
) -> np.ndarray:
    """``softmax(z / T)``, computed stably (max subtracted). ``-inf`` logits (masked tokens)
    get probability 0; NaN and ``+inf`` are rejected, and at least one logit must be finite."""
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0):
        raise InvalidInput(f"{name} temperature", temperature, "temperature must be a finite number > 0")
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 1 or z.size == 0:
        raise InvalidInput(name, f"shape {z.shape}", "expected a non-empty 1-D vector of logits")
    bad = np.flatnonzero(np.isnan(z) | (z == np.inf))
    if bad.size:
        i = int(bad[0])
        raise InvalidInput(
            name, f"entry {i} = {z[i]}", "logits must be finite (-inf allowed for masked tokens)"
        )
    if not np.isfinite(z).any():
        raise InvalidInput(name, "all -inf", "at least one logit must be finite")
    with np.errstate(over="ignore"):
        scaled = z / temperature
    if np.isinf(scaled[np.isfinite(z)]).any():
        raise InvalidInput(
            f"{name} temperature", temperature, "too small for these logits: z/T overflows a float"
        )
    scaled = scaled - scaled[np.isfinite(scaled)].max()
    e = np.exp(scaled)
    return e / e.sum()


@dataclass(frozen=True, eq=False)
class Acceptance:
    """The acceptance analysis of a draft distribution q against a target p (numpy arrays)."""

    p: np.ndarray
    q: np.ndarray
    #: x can be drafted at all: q(x) > 0
    proposed: np.ndarray
    #: a(x) = min(1, p(x)/q(x)) where q(x) > 0; NaN where q(x) = 0 (never drafted: undefined)
    accept_prob: np.ndarray
    #: min(p, q): probability that x is drafted and accepted
    accepted_mass: np.ndarray
    #: A = Σ min(p, q) = 1 - TV(p, q)
    acceptance_rate: float
    #: Z = Σ max(p - q, 0) = 1 - A: probability of a rejection
    rejection_mass: float
    #: TV(p, q) = ½ Σ |p - q|
    total_variation: float
    #: r = max(p - q, 0)/Z; None when Z = 0 (a rejection cannot happen)
    residual: np.ndarray | None
    #: output of the exact rule: min(p, q) + Z·r (equals p)
    exact_output: np.ndarray
    #: output of the wrong rule "resample from p after a rejection": min(p, q) + Z·p
    wrong_output: np.ndarray


def acceptance(
    p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray, *, tol: float = DISTRIBUTION_TOLERANCE
) -> Acceptance:
    """Acceptance analysis of drafting from q for target p (both validated, same length).

    Check: p = (0.5, 0.3, 0.2), q = (0.2, 0.5, 0.3) -> a = (1, 0.6, 2/3), accepted mass
    (0.2, 0.3, 0.2), A = 0.7, r = (1, 0, 0); the wrong rule gives (0.35, 0.39, 0.26).
    Z is summed from ``max(p - q, 0)`` directly (no cancellation in ``1 - A``), and r is
    only built when Z > 0, so the division never sees a zero.
    """
    p_arr, q_arr = validate_pair(p, q, tol=tol)
    proposed = q_arr > 0
    accept_prob = np.full(p_arr.shape, np.nan)
    with np.errstate(over="ignore"):  # p/q overflows only where the minimum is 1 anyway
        accept_prob[proposed] = np.minimum(1.0, p_arr[proposed] / q_arr[proposed])
    accepted_mass = np.minimum(p_arr, q_arr)
    excess = np.maximum(p_arr - q_arr, 0.0)
    a_total = _total(accepted_mass)
    z_total = _total(excess)
    tv = 0.5 * _total(np.abs(p_arr - q_arr))
    residual = excess / z_total if z_total > 0 else None
    exact = accepted_mass + (z_total * residual if residual is not None else 0.0)
    wrong = accepted_mass + z_total * p_arr
    return Acceptance(
        p=p_arr,
        q=q_arr,
        proposed=proposed,
        accept_prob=accept_prob,
        accepted_mass=accepted_mass,
        acceptance_rate=a_total,
        rejection_mass=z_total,
        total_variation=tv,
        residual=residual,
        exact_output=exact,
        wrong_output=wrong,
    )


def acceptance_report(
    p: np.ndarray,
    q: np.ndarray,
    *,
    tol: float = DISTRIBUTION_TOLERANCE,
    normalized: bool = False,
    from_logits: bool = False,
    p_temperature: float | None = None,
    q_temperature: float | None = None,
) -> AcceptanceResult:
    """:func:`acceptance` as a per-token result for the ``speculative acceptance`` command."""
    an = acceptance(p, q, tol=tol)
    rows = tuple(
        TokenAcceptance(
            token=i,
            p=float(an.p[i]),
            q=float(an.q[i]),
            accept_prob=float(an.accept_prob[i]) if an.proposed[i] else None,
            accepted_mass=float(an.accepted_mass[i]),
            residual=None if an.residual is None else float(an.residual[i]),
            output=float(an.exact_output[i]),
            wrong_output=float(an.wrong_output[i]),
        )
        for i in range(an.p.size)
    )
    return AcceptanceResult(
        acceptance_rate=an.acceptance_rate,
        rejection_mass=an.rejection_mass,
        total_variation=an.total_variation,
        residual=None if an.residual is None else tuple(float(v) for v in an.residual),
        per_token=rows,
        exact_rule_max_error=float(np.max(np.abs(an.exact_output - an.p))),
        wrong_rule_max_error=float(np.max(np.abs(an.wrong_output - an.p))),
        tolerance=tol,
        normalized=normalized,
        from_logits=from_logits,
        p_temperature=p_temperature,
        q_temperature=q_temperature,
    )


# ------------------------------------------------------------------- committed tokens per round


def validate_alphas(alphas: Sequence[float] | np.ndarray, option: str = "alphas") -> np.ndarray:
    """Per-position conditional acceptance rates as a float64 array, each in [0, 1]."""
    arr = np.atleast_1d(np.asarray(alphas, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidInput(option, "empty", "expected at least one acceptance rate")
    for i, a in enumerate(arr.tolist()):
        if not (math.isfinite(a) and 0.0 <= a <= 1.0):
            where = f"{a}" if arr.size == 1 else f"α_{i + 1} = {a}"
            raise InvalidInput(option, where, "acceptance rates must be in [0, 1]")
    return arr


def validate_k(k: int, option: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_K:
        raise InvalidInput(option, k, f"draft length must be an integer in [1, {MAX_K}]")
    return int(k)


def survival(alphas: Sequence[float] | np.ndarray) -> np.ndarray:
    """``P(N ≥ j)`` for j = 1..k+1: ``(1, α_1, α_1α_2, …, Π_{i≤k} α_i)`` (N counts the bonus)."""
    arr = validate_alphas(alphas)
    return np.concatenate(([1.0], np.cumprod(arr)))


def expected_tokens(alphas: Sequence[float] | np.ndarray) -> float:
    """``E[N] = Σ_{i=0}^{k} Π_{j≤i} α_j`` with k = len(alphas); the empty product is 1.
    Check: α = (0.8, 0.8, 0.8) -> 2.952."""
    return math.fsum(survival(alphas).tolist())


def expected_tokens_within_budget(alphas: Sequence[float] | np.ndarray, budget: int) -> float:
    """``E[min(N, L)] = Σ_{j=1}^{min(L, k+1)} P(N ≥ j)``: a length budget (or the tokens left
    before a stop) of L ≥ 1 caps what one round can commit."""
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
        raise InvalidInput("budget", budget, "budget must be an integer >= 1")
    return math.fsum(survival(alphas)[: int(budget)].tolist())


def expected_tokens_constant(alpha: float | np.ndarray, k: int | np.ndarray) -> float | np.ndarray:
    """``(1 - α^{k+1})/(1 - α)``, ``k + 1`` at α = 1 exactly, vectorised over α and k.

    Written as ``-expm1((k+1)·log1p(-ε))/ε`` with ε = 1 - α so it stays accurate near α = 1
    (the textbook form loses digits to cancellation there)."""
    a = np.asarray(alpha, dtype=np.float64)
    kk = np.asarray(k, dtype=np.float64)
    if np.any(~np.isfinite(a)) or np.any((a < 0) | (a > 1)):
        raise InvalidInput("alpha", alpha, "acceptance rate must be in [0, 1]")
    if np.any(kk < 0) or np.any(kk != np.floor(kk)):
        raise InvalidInput("k", k, "draft length must be an integer >= 0")
    eps = 1.0 - a
    with np.errstate(divide="ignore", invalid="ignore"):
        closed = -np.expm1((kk + 1.0) * np.log1p(-eps)) / eps
    out = np.where(eps == 0.0, kk + 1.0, closed)
    return float(out) if out.ndim == 0 else out


# ---------------------------------------------------------------------------------- speedup


def validate_costs(costs: Costs) -> Costs:
    checks = [
        ("target_cost", costs.target_s, False),
        ("draft_cost", costs.draft_s, True),
        ("verify_cost", costs.verify_base_s, True),
        ("verify_cost_model", costs.verify_per_k_s, True),
        ("overhead", costs.overhead_s, True),
    ]
    for option, value, zero_ok in checks:
        if (
            not (isinstance(value, (int, float)) and math.isfinite(value))
            or value < 0
            or (value == 0 and not zero_ok)
        ):
            raise InvalidInput(
                option, value, f"cost must be a finite duration {'>= 0' if zero_ok else '> 0'}"
            )
    return costs


def _rates(k: int, alpha: float | None, alphas: np.ndarray | None) -> np.ndarray:
    if alphas is None:
        return np.full(k, float(alpha))
    if alphas.size < k:
        raise InvalidInput(
            "alphas", f"{alphas.size} rates", f"need k = {k} per-position rates (one per draft position)"
        )
    return alphas[:k]


def committed_tokens(rates: np.ndarray, budget: int | None) -> float:
    """E[N], or E[min(N, L)] with a budget."""
    return expected_tokens(rates) if budget is None else expected_tokens_within_budget(rates, budget)


def _point(k: int, rates: np.ndarray, costs: Costs, budget: int | None) -> SweepPoint:
    t_round = float(costs.round_time_s(k))
    if t_round <= 0:
        raise InvalidInput(
            "draft_cost", "round time 0", "the round time k·c_d + c_v(k) + c_m must be > 0; give some cost"
        )
    n = committed_tokens(rates, budget)
    return SweepPoint(k, n, t_round, finite_speedup(costs.target_s * n, t_round), t_round / n)


def finite_speedup(plain_s: float, round_s: float) -> float:
    """``plain / round`` (``c_t·E[N] / round time``), refused when it does not fit a float:
    costs some 300 orders of magnitude apart are a typo, not a speedup of 1e308."""
    speed = plain_s / round_s
    if not math.isfinite(speed):
        raise InvalidInput(
            "target_cost",
            plain_s,
            "too large against the round time k·c_d + c_v(k) + c_m: the speedup overflows",
        )
    return speed


def speculative_speedup(
    k: int,
    costs: Costs,
    *,
    alpha: float | None = None,
    alphas: Sequence[float] | np.ndarray | None = None,
    budget: int | None = None,
    sweep_kmax: int | None = None,
) -> SpeedupResult:
    """``S = c_t·E[N] / (k·c_d + c_v(k) + c_m)``, with one constant ``alpha`` or per-position
    ``alphas`` (α_1..α_k; longer lists serve sweeps). With ``budget`` L the committed tokens
    are ``E[min(N, L)]``. With ``sweep_kmax`` also the curve over k = 1..K_max and the best k.

    Check: k = 3, α = 0.8, c_t = 10 ms, c_d = 1 ms, c_v = 12 ms, c_m = 1 ms -> 29.52/16 = 1.845.
    """
    k = validate_k(k)
    validate_costs(costs)
    if (alpha is None) == (alphas is None):
        raise InvalidInput("alpha", "both or neither", "give one constant --alpha or per-position --alphas")
    arr = None
    if alphas is not None:
        arr = validate_alphas(alphas)
    else:
        validate_alphas([alpha], option="alpha")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise InvalidInput("budget", budget, "budget must be an integer >= 1")
    rates = _rates(k, alpha, arr)
    point = _point(k, rates, costs, budget)
    e_n = expected_tokens(rates)

    averaged = averaged_e = None
    if arr is not None and np.ptp(rates) > 0:
        averaged = float(np.mean(rates))
        averaged_e = float(expected_tokens_constant(averaged, k))

    curve: tuple[SweepPoint, ...] = ()
    best_k = best_s = None
    if sweep_kmax is not None:
        validate_k(sweep_kmax, "--k-max")
        if arr is not None and arr.size < sweep_kmax:
            raise InvalidInput(
                "--k-max",
                sweep_kmax,
                f"a sweep to K_max = {sweep_kmax} needs a constant --alpha or >= {sweep_kmax} per-position "
                f"rates in --alphas (got {arr.size})",
            )
        curve = tuple(_point(j, _rates(j, alpha, arr), costs, budget) for j in range(1, sweep_kmax + 1))
        best = max(curve, key=lambda pt: (pt.speedup, -pt.k))
        best_k, best_s = best.k, best.speedup

    return SpeedupResult(
        k=k,
        alphas_used=tuple(float(a) for a in rates),
        costs=costs,
        survival=tuple(float(v) for v in survival(rates)),
        expected_tokens=e_n,
        verify_cost_s=float(costs.verify_s(k)),
        round_time_s=point.round_time_s,
        speedup=point.speedup,
        cost_per_token_s=point.cost_per_token_s,
        plain_time_s=costs.target_s * point.expected_tokens,
        slowdown=point.speedup < 1,
        alpha=None if alpha is None else float(alpha),
        alphas=None if arr is None else tuple(float(a) for a in arr),
        budget=budget,
        expected_tokens_within_budget=None if budget is None else point.expected_tokens,
        averaged_alpha=averaged,
        averaged_alpha_expected_tokens=averaged_e,
        sweep_kmax=sweep_kmax,
        best_k=best_k,
        best_speedup=best_s,
        curve=curve,
        warnings=cost_notices(costs),
    )


def cost_notices(costs: Costs) -> tuple[Notice, ...]:
    """``verify_cost_assumed`` when c_v = c_t was assumed (no verification cost given)."""
    if not costs.verify_assumed:
        return ()
    return (Notice("verify_cost_assumed", {"target_s": costs.target_s}),)


def leviathan_speedup(alpha: float, k: int, cost_ratio: float) -> float:
    """Leviathan et al.'s closed form ``(1 - α^{k+1}) / ((1 - α)(k·c + 1))``, c = c_d/c_t:
    the speedup when verification costs one target step (c_v = c_t) and c_m = 0."""
    return float(expected_tokens_constant(alpha, k)) / (k * cost_ratio + 1.0)


@dataclass(frozen=True)
class SpeedupCurve:
    """Speedup against draft length for one acceptance profile (for plots)."""

    label: str
    ks: tuple[int, ...]
    speedups: tuple[float, ...]
    best_k: int
    best_speedup: float
    #: this is the profile given on the command line
    given: bool


def _plot_kmax(result: SpeedupResult) -> int:
    if result.sweep_kmax is not None:
        return result.sweep_kmax
    if result.alphas is not None:
        return len(result.alphas)
    return max(10, 2 * result.k)


def _curve(label: str, rates_for: object, result: SpeedupResult, kmax: int, given: bool) -> SpeedupCurve:
    ks = tuple(range(1, kmax + 1))
    pts = [_point(j, rates_for(j), result.costs, result.budget) for j in ks]  # type: ignore[operator]
    best = max(pts, key=lambda pt: (pt.speedup, -pt.k))
    return SpeedupCurve(label, ks, tuple(pt.speedup for pt in pts), best.k, best.speedup, given)


def speedup_curves(result: SpeedupResult) -> list[SpeedupCurve]:
    """Speedup vs k for the given profile and, for a constant α, a few α around it."""
    kmax = _plot_kmax(result)
    if result.alphas is not None:
        arr = np.asarray(result.alphas)
        return [_curve("given α_i", lambda j: arr[:j], result, kmax, True)]
    given = float(result.alpha)  # type: ignore[arg-type]
    values = sorted({round(a, 6) for a in (given - 0.2, given - 0.1, given, given + 0.1) if 0.0 <= a <= 1.0})
    return [
        _curve(f"α = {a:g}", lambda j, a=a: np.full(j, a), result, kmax, math.isclose(a, given, abs_tol=1e-9))
        for a in values
    ]


@dataclass(frozen=True, eq=False)
class SpeedupGrid:
    """Speedup over a grid of constant α (rows) and draft lengths k (columns)."""

    alphas: np.ndarray
    ks: np.ndarray
    speedup: np.ndarray
    #: for each α, the k with the largest speedup, and that speedup
    best_k: np.ndarray
    best_speedup: np.ndarray


def speedup_grid(result: SpeedupResult, alpha_step: float = 0.01) -> SpeedupGrid:
    """``S(α, k)`` for α = 0, 0.01, …, 1 and k = 1..K with the result's costs and budget."""
    kmax = max(_plot_kmax(result), result.k)
    alphas = np.linspace(0.0, 1.0, round(1.0 / alpha_step) + 1)
    ks = np.arange(1, kmax + 1)
    a, kk = np.meshgrid(alphas, ks, indexing="ij")
    # E[min(N, L)] for constant α is the geometric sum with min(L, k+1) terms
    terms = kk + 1 if result.budget is None else np.minimum(result.budget, kk + 1)
    n = expected_tokens_constant(a, terms - 1)
    t_round = result.costs.round_time_s(kk)
    s = result.costs.target_s * n / t_round
    return SpeedupGrid(alphas, ks, s, ks[np.argmax(s, axis=1)], s.max(axis=1))


# ------------------------------------------------------------------------- plans from logs


def compare_plans(rounds: Sequence[PlanRound]) -> PlansResult:
    """Per plan: long-run cost per token ``Σ time / Σ tokens`` (never the mean of the
    per-round ratios, which over-weights short rounds), tokens per round, and the ranking."""
    if not rounds:
        raise InvalidInput("plans", "no rounds", "the log has no data rows")
    groups: dict[str, list[PlanRound]] = {}
    for r in rounds:
        if not (math.isfinite(r.time_s) and r.time_s > 0):
            raise InvalidInput("time", r.time_s, "round time must be > 0")
        if isinstance(r.tokens, bool) or not isinstance(r.tokens, int) or r.tokens < 1:
            raise InvalidInput("tokens", r.tokens, "committed tokens must be an integer >= 1")
        groups.setdefault(r.plan, []).append(r)
    raw = []
    for plan, rs in groups.items():
        total_t = math.fsum(r.time_s for r in rs)
        total_n = sum(r.tokens for r in rs)
        naive = math.fsum(r.time_s / r.tokens for r in rs) / len(rs)
        raw.append((plan, len(rs), total_t, total_n, total_t / total_n, naive))
    order = sorted(raw, key=lambda x: (x[4], x[0]))
    naive_order = sorted(raw, key=lambda x: (x[5], x[0]))
    rank = {x[0]: i + 1 for i, x in enumerate(order)}
    naive_rank = {x[0]: i + 1 for i, x in enumerate(naive_order)}
    best_cost = order[0][4]
    stats = tuple(
        PlanStats(
            plan=plan,
            rounds=n_rounds,
            total_time_s=total_t,
            total_tokens=total_n,
            cost_per_token_s=cost,
            tokens_per_round=total_n / n_rounds,
            time_per_round_s=total_t / n_rounds,
            mean_of_ratios_s=naive,
            relative_cost=cost / best_cost,
            rank=rank[plan],
            naive_rank=naive_rank[plan],
        )
        for plan, n_rounds, total_t, total_n, cost, naive in order
    )
    differs = [x[0] for x in order] != [x[0] for x in naive_order]
    best, naive_best = order[0][0], naive_order[0][0]
    return PlansResult(
        plans=stats,
        best=best,
        naive_best=naive_best,
        naive_ranking_differs=differs,
        warnings=(Notice("naive_ranking_differs", {"best": best, "naive_best": naive_best}),)
        if differs
        else (),
    )


# --------------------------------------------------------------------- serving-engine counters


def _count(option: str, value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InvalidInput(option, value, f"{what} must be a non-negative integer")
    return int(value)


def rates_from_counts(
    drafts: int,
    accepted_per_position: Sequence[int],
    *,
    draft_tokens: int | None = None,
    costs: Costs | None = None,
) -> MetricsResult:
    """Per-position rates from serving-engine counters (vLLM exports
    ``spec_decode_num_drafts`` and ``spec_decode_num_accepted_tokens_per_pos``):
    ``u_i = acc_i/drafts``, ``α_i = acc_i/acc_{i-1}``, ``E[N] = 1 + Σ u_i``; with costs, the
    implied ``S = c_t·E[N] / (k·c_d + c_v(k) + c_m)`` with k = the number of positions."""
    drafts = _count("drafts", drafts, "the number of drafts")
    if drafts < 1:
        raise InvalidInput("drafts", drafts, "need at least one draft round")
    if not accepted_per_position:
        raise InvalidInput("accepted_per_position", "empty", "give one accepted count per draft position")
    acc = [_count("accepted_per_position", a, "accepted counts") for a in accepted_per_position]
    if acc[0] > drafts:
        raise InvalidInput(
            "accepted_per_position",
            f"{acc[0]} at position 1 > {drafts} drafts",
            "position 1 cannot be accepted more often than there were drafts",
        )
    for i in range(1, len(acc)):
        if acc[i] > acc[i - 1]:
            raise InvalidInput(
                "accepted_per_position",
                f"{acc[i]} at position {i + 1} > {acc[i - 1]} at position {i}",
                "counts must be non-increasing: position i can only be accepted if position i-1 was",
            )
    k = len(acc)
    total_acc = sum(acc)
    short = False
    if draft_tokens is not None:
        draft_tokens = _count("draft_tokens", draft_tokens, "the number of draft tokens")
        if draft_tokens < total_acc:
            raise InvalidInput(
                "draft_tokens",
                draft_tokens,
                f"fewer draft tokens than accepted ones ({total_acc}); counters do not match",
            )
        if draft_tokens > drafts * k:
            raise InvalidInput(
                "draft_tokens",
                draft_tokens,
                f"more than drafts × positions = {drafts * k}; give one accepted count per draft position",
            )
        short = draft_tokens < drafts * k
    denominator = draft_tokens if draft_tokens is not None else drafts * k
    positions = _positions(drafts, acc)
    mean_acc = math.fsum(a / drafts for a in acc)
    e_n = 1.0 + mean_acc
    round_time = speed = per_token = None
    if costs is not None:
        validate_costs(costs)
        round_time = float(costs.round_time_s(k))
        if round_time <= 0:
            raise InvalidInput(
                "draft_cost", "round time 0", "the round time k·c_d + c_v(k) + c_m must be > 0"
            )
        speed = finite_speedup(costs.target_s * e_n, round_time)
        per_token = round_time / e_n
    return MetricsResult(
        drafts=drafts,
        accepted_per_position=tuple(acc),
        positions=positions,
        expected_tokens=e_n,
        mean_accepted=mean_acc,
        draft_acceptance_rate=total_acc / denominator if denominator > 0 else None,
        draft_tokens=draft_tokens,
        short_drafts=short,
        costs=costs,
        round_time_s=round_time,
        speedup=speed,
        cost_per_token_s=per_token,
        warnings=_metrics_notices(short, draft_tokens, drafts, k, costs),
    )


def _positions(drafts: int, acc: Sequence[int]) -> tuple[PositionRate, ...]:
    """``u_i = acc_i/drafts`` and ``α_i = acc_i/acc_{i-1}`` (acc_0 = drafts; None after a 0)."""
    previous = [drafts, *acc[:-1]]
    return tuple(
        PositionRate(i + 1, a, a / drafts, a / before if before > 0 else None)
        for i, (a, before) in enumerate(zip(acc, previous, strict=True))
    )


def _metrics_notices(
    short: bool, draft_tokens: int | None, drafts: int, k: int, costs: Costs | None
) -> tuple[Notice, ...]:
    found = cost_notices(costs) if costs is not None else ()
    if short:
        values = {"draft_tokens": draft_tokens, "drafts": drafts, "k": k}
        found = (Notice("short_drafts", values), *found)
    return found


_VERIFY_MODEL_EXPECTED = "expected 'A + B*k' with durations >= 0, e.g. '12ms+0.5ms*k' (bare numbers are ms)"
_K_TERM = re.compile(r"^(?:(?P<pre>.+?)\s*[*·×]?\s*k|k\s*[*·×]\s*(?P<post>.+))$", re.IGNORECASE)


def parse_verify_model(text: str, option: str = "--verify-cost-model") -> tuple[float, float]:
    """``"12ms + 0.5ms*k"`` -> ``(0.012, 0.0005)`` seconds: terms joined by ``+``, each a
    duration or a duration times ``k`` (``0.5ms*k``, ``k*0.5ms``, ``0.5ms·k``)."""
    terms = [t.strip() for t in re.split(r"(?<![eE])\+", str(text))]
    if not terms or any(t == "" for t in terms):
        raise InvalidInput(option, text, _VERIFY_MODEL_EXPECTED)
    base = per_k = 0.0
    for term in terms:
        match = _K_TERM.match(term)
        coefficient = (match.group("pre") or match.group("post")).strip() if match else term
        try:
            value = parse_duration(coefficient, option=option, default_unit="ms")
        except InvalidInput:
            shown = term if len(term) <= 40 else term[:30] + "…"
            raise InvalidInput(option, text, f"{_VERIFY_MODEL_EXPECTED}; {shown!r} is not") from None
        if match:
            per_k += value
        else:
            base += value
    return base, per_k


def run_speedup(request: SpecSpeedupRequest, *, plotted: bool = False) -> SpeedupResult:
    """``infer-opt speculative speedup``: one constant ``alpha`` or per-position ``alphas``
    (longer than ``k`` only for a sweep, or where a curve is ``plotted``)."""
    alpha, alphas, k = request.alpha, request.alphas, request.k
    if (alpha is None) == (alphas is None):
        raise InvalidInput("--alpha", "both or neither", "give one constant --alpha or per-position --alphas")
    if k is None and alphas is None:
        raise InvalidInput("--k", "missing", "give the draft length --k (an integer >= 1)")
    k_val = len(alphas) if k is None else k  # type: ignore[arg-type]
    if alphas is not None and len(alphas) > k_val and request.k_max is None and not plotted:
        raise InvalidInput(
            "--alphas", ",".join(f"{a:g}" for a in alphas),
            f"give exactly k = {k_val} rates (longer lists only with --k-max or --plot)",
        )  # fmt: skip
    rates = None if alphas is None else list(alphas)
    return speculative_speedup(
        k_val, request.costs(), alpha=alpha, alphas=rates, budget=request.budget, sweep_kmax=request.k_max
    )


def _vector(inline: tuple[float, ...] | None, file: Path | None, name: str) -> tuple[list[float], str]:
    from infer_opt.inputs.speculative import read_vector

    if (inline is None) == (file is None):
        raise InvalidInput(f"--{name}", "both or neither", f"give --{name} (inline) or --{name}-file")
    if file is not None:
        return read_vector(file, f"--{name}-file"), f"--{name}-file"
    return list(inline), f"--{name}"  # type: ignore[arg-type]


def run_acceptance(request: AcceptanceRequest) -> AcceptanceResult:
    """``infer-opt speculative acceptance``: p and q given or from files, as probabilities or
    as logits at their temperatures (1 unless given)."""
    p_vals, p_name = _vector(request.p, request.p_file, "p")
    q_vals, q_name = _vector(request.q, request.q_file, "q")
    logits = request.logits
    temps: list[float | None] = []
    for value, flag in (
        (request.p_temperature, "--p-temperature"),
        (request.q_temperature, "--q-temperature"),
    ):
        if value is not None and not logits:
            raise InvalidInput(flag, value, "a temperature applies only to logits; add --logits")
        temps.append((1.0 if value is None else value) if logits else None)
    for name, values in ((p_name, p_vals), (q_name, q_vals)):
        if not logits and any(math.isinf(v) for v in values):
            raise InvalidInput(name, ",".join(f"{v:g}" for v in values), "probabilities must be finite")
    if logits:
        p_vals = softmax(p_vals, temps[0], name=p_name).tolist()  # type: ignore[arg-type]
        q_vals = softmax(q_vals, temps[1], name=q_name).tolist()  # type: ignore[arg-type]
    p_arr, q_arr = validate_pair(p_vals, q_vals, normalize=request.normalize, names=(p_name, q_name))
    return acceptance_report(
        p_arr, q_arr, normalized=request.normalize, from_logits=logits,
        p_temperature=temps[0], q_temperature=temps[1],
    )  # fmt: skip


def run_plans(request: PlansRequest) -> tuple[PlansResult, tuple[Notice, ...]]:
    """``infer-opt speculative plans``: the logged rounds of ``file`` compared, with what the
    reader noticed."""
    from infer_opt.inputs.speculative import read_plan_log

    rounds, notices = read_plan_log(request.file)
    return compare_plans(rounds), notices


def run_from_metrics(request: FromMetricsRequest) -> MetricsResult:
    """``infer-opt speculative from-metrics``: the counters as options, a JSON ``file`` or a
    Prometheus snapshot (``before``: the interval since another), with costs the speedup."""
    r = request
    given = {"--drafts": r.drafts, "--accepted-per-position": r.accepted_per_position}
    if r.prometheus is None:
        for flag, value in (("--before", r.before), ("--model-name", r.model_name)):
            if value is not None:
                raise InvalidInput(flag, str(value), "applies to --prometheus files only")
    else:
        for flag, value in {**given, "--draft-tokens": r.draft_tokens, "--file": r.file}.items():
            if value is not None:
                raise InvalidInput(flag, str(value), "give the counters as --prometheus or as this, not both")
    costs = None
    if r.target_cost is not None:
        costs = r.costs()
    elif any(c is not None for c in (r.draft_cost, r.verify_cost, r.verify_cost_model)) or r.overhead:
        raise InvalidInput(
            "--target-cost", "missing", "costs need c_t too (the cost of one plain target step)"
        )
    if r.prometheus is not None:
        from infer_opt.inputs.prometheus import metrics_from_prometheus

        return metrics_from_prometheus(r.prometheus, before=r.before, model_name=r.model_name, costs=costs)
    return rates_from_counts(**_counters(r), costs=costs)


def _counters(r: FromMetricsRequest) -> dict[str, Any]:
    """The counters from ``file`` or from the options."""
    if r.file is not None:
        from infer_opt.inputs.speculative import read_metrics

        if r.drafts is not None or r.accepted_per_position is not None or r.draft_tokens is not None:
            raise InvalidInput("--file", str(r.file), "give the counters in --file or as options, not both")
        return read_metrics(r.file)
    if r.drafts is None or r.accepted_per_position is None:
        raise InvalidInput(
            "--drafts", "missing", "give --drafts and --accepted-per-position (or --file, or --prometheus)"
        )
    counters: dict[str, Any] = {"drafts": r.drafts, "accepted_per_position": list(r.accepted_per_position)}
    if r.draft_tokens is not None:
        counters["draft_tokens"] = r.draft_tokens
    return counters
