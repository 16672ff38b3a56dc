"""The analysis of ``speculative measure``'s measured costs (pure math on the measured c_t, c_d,
c_m and c_v(k)): the linear fit c_v(k) = a + b·k, the break-even acceptance rate per k, the
speedup table over α, and what the plot draws. :mod:`infer_opt.profilers.speculative_costs` measures
the costs and calls :func:`analyze`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infer_opt.cost_models import speculative as calc
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results.speculative import Costs, SpeedupResult
from infer_opt.results.speculative_measure import (
    AcceptanceSimulation,
    AlphaRow,
    BestK,
    BreakEvenPoint,
    MeasuredCost,
    SpecMeasureResult,
    VerifyFit,
    VerifyPoint,
)

#: the α grid of the speedup table and plots
ALPHA_GRID: tuple[float, ...] = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))


#: a c_v(k) fit worse than this (max relative error) is flagged
FIT_WARN_REL_ERROR = 0.10


def fit_verify(ks: Sequence[int], times_s: Sequence[float]) -> VerifyFit:
    """Least-squares ``c_v(k) = a + b·k`` with a, b >= 0 (a negative coefficient from noise
    is held at 0 and the other refitted); relative errors ``|fit - t|/t`` summarised."""
    k = np.asarray(ks, dtype=np.float64)
    t = np.asarray(times_s, dtype=np.float64)
    if k.size == 0 or k.size != t.size:
        raise InvalidInput("verify costs", f"{k.size} k, {t.size} times", "need one time per k, at least one")
    if np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise InvalidInput("verify costs", t.tolist(), "times must be finite and > 0")
    constrained = None
    if np.unique(k).size < 2:
        a, b, constrained = float(t.mean()), 0.0, "single point"
    else:
        design = np.stack([np.ones_like(k), k], axis=1)
        (a, b), *_ = np.linalg.lstsq(design, t, rcond=None)
        a, b = float(a), float(b)
        if b < 0:
            a, b, constrained = float(t.mean()), 0.0, "slope"
        elif a < 0:
            a, b, constrained = 0.0, float(k @ t / (k @ k)), "intercept"
    rel = np.abs(a + b * k - t) / t
    return VerifyFit(a, b, float(rel.max()), float(np.median(rel)), constrained)


def break_even_alpha(costs: Costs, k: int) -> BreakEvenPoint:
    """The α at which ``S(α) = 1`` for draft length k: solve ``E[N](α) = round(k)/c_t`` with
    brentq on the monotone ``E[N](α) = (1 - α^{k+1})/(1 - α)``."""
    k = calc.validate_k(k)
    calc.validate_costs(costs)
    round_s = float(costs.round_time_s(k))
    need = round_s / costs.target_s
    if need <= 1.0:
        alpha: float | None = 0.0
    elif need >= k + 1:
        alpha = None
    else:
        from scipy.optimize import brentq

        alpha = float(
            brentq(
                lambda a: float(calc.expected_tokens_constant(a, k)) - need, 0.0, 1.0, xtol=1e-13, rtol=1e-13
            )
        )
    return BreakEvenPoint(k, alpha, round_s, need)


def speedup_rows(costs: Costs, alphas: Sequence[float], k_max: int) -> tuple[AlphaRow, ...]:
    """For each constant α, the calculator's sweep over k = 1..k_max and its best k."""
    rows = []
    for a in alphas:
        sweep = calc.speculative_speedup(1, costs, alpha=float(a), sweep_kmax=k_max)
        rows.append(
            AlphaRow(
                float(a),
                tuple(p.speedup for p in sweep.curve),
                int(sweep.best_k),  # type: ignore[arg-type]
                float(sweep.best_speedup),  # type: ignore[arg-type]
            )
        )
    return tuple(rows)


def predict(
    costs: Costs,
    k_max: int,
    *,
    alpha: float | None = None,
    alphas: Sequence[float] | None = None,
    k: int | None = None,
) -> SpeedupResult:
    """The calculator's prediction for one acceptance profile: at ``k`` when given, else at
    the best k in 1..k_max (1..len(alphas) for per-position rates)."""
    if (alpha is None) == (alphas is None):
        raise InvalidInput("--alpha", "both or neither", "give one constant --alpha or per-position --alphas")
    top = k_max if alphas is None else min(k_max, len(alphas))
    if k is not None and k > top:
        raise InvalidInput(
            "--k", k, f"must be <= {top} (the measured --k-max and the number of per-position rates)"
        )
    sweep = calc.speculative_speedup(k or 1, costs, alpha=alpha, alphas=alphas, sweep_kmax=top)
    if k is None and sweep.best_k != sweep.k:
        sweep = calc.speculative_speedup(sweep.best_k, costs, alpha=alpha, alphas=alphas, sweep_kmax=top)  # type: ignore[arg-type]
    return sweep


def defined_alphas(alphas: Sequence[float | None]) -> list[float]:
    """The leading per-position rates that are defined (a position no round reached has none)."""
    out = []
    for a in alphas:
        if a is None:
            break
        out.append(float(a))
    return out


def analyze(
    measurements: Sequence[MeasuredCost],
    *,
    target: str,
    draft: str,
    vocab_size: int,
    context: int,
    device: str,
    device_name: str,
    dtype: str,
    threads: int | None,
    warmup: int,
    reps: int,
    alpha: float | None = None,
    alphas: Sequence[float] | None = None,
    alphas_source: str | None = None,
    k: int | None = None,
    simulation: AcceptanceSimulation | None = None,
    draft_note: str | None = None,
) -> SpecMeasureResult:
    """Turn the measured costs (c_t, c_d, c_v(1..k_max), c_m by ``name``) into the result:
    the c_v fit, the speedup grid, best k per α, break-even α per k and the prediction."""
    by_name = {m.name: m for m in measurements}
    verify = sorted((int(m.name[4:-1]), m) for m in measurements if m.name.startswith("c_v("))
    if not verify or not {"c_t", "c_d", "c_m"} <= set(by_name):
        raise InvalidInput("measurements", sorted(by_name), "need c_t, c_d, c_m and c_v(k) for k >= 1")
    k_max = max(kk for kk, _ in verify)
    fit, points = _verify_fit(verify)
    c_t, c_d, c_m = by_name["c_t"].median_s, by_name["c_d"].median_s, by_name["c_m"].median_s
    costs = calc.validate_costs(Costs(c_t, c_d, fit.base_s, fit.per_k_s, c_m))
    rows = speedup_rows(costs, ALPHA_GRID, k_max)
    warnings = [n.about(m.name) for m in measurements for n in m.warnings]
    if fit.max_rel_error > FIT_WARN_REL_ERROR:
        warnings.append(Notice("verify_cost_not_linear", {"max_rel_error": fit.max_rel_error}))
    prediction, source = _prediction(costs, k_max, alpha, alphas, alphas_source, k, simulation)
    return SpecMeasureResult(
        target=target,
        draft=draft,
        vocab_size=vocab_size,
        context=context,
        k_max=k_max,
        device=device,
        device_name=device_name,
        dtype=dtype,
        threads=threads,
        warmup=warmup,
        reps=reps,
        target_step_s=c_t,
        draft_step_s=c_d,
        bookkeeping_s=c_m,
        draft_to_target=c_d / c_t,
        verify_s=points,
        fit=fit,
        measurements=tuple(measurements),
        costs=costs,
        speedup_by_alpha=rows,
        best_k_by_alpha=tuple(BestK(r.alpha, r.best_k, r.best_speedup) for r in rows),
        break_even_alpha_by_k=tuple(break_even_alpha(costs, kk) for kk in range(1, k_max + 1)),
        prediction=prediction,
        prediction_source=source,
        simulation=simulation,
        draft_note=draft_note,
        warnings=tuple(warnings),
    )


def _verify_fit(verify: Sequence[tuple[int, MeasuredCost]]) -> tuple[VerifyFit, tuple[VerifyPoint, ...]]:
    """``c_v(k) ≈ a + b·k`` over the measured k, and each point beside the fit."""
    fit = fit_verify([kk for kk, _ in verify], [m.median_s for _, m in verify])
    points = []
    for kk, m in verify:
        fitted = fit.base_s + fit.per_k_s * kk
        error = abs(fitted - m.median_s) / m.median_s
        points.append(VerifyPoint(kk, m.median_s, m.summary.iqr_s, fitted, error))
    return fit, tuple(points)


def _prediction(
    costs: Costs,
    k_max: int,
    alpha: float | None,
    alphas: Sequence[float] | None,
    alphas_source: str | None,
    k: int | None,
    simulation: AcceptanceSimulation | None,
) -> tuple[SpeedupResult | None, str | None]:
    """The one prediction asked for: a constant α, per-position α_i, or the simulated α_i."""
    if alpha is not None:
        return predict(costs, k_max, alpha=alpha, k=k), f"--alpha {alpha:g}"
    if alphas is not None:
        return predict(costs, k_max, alphas=alphas, k=k), alphas_source or "--alphas"
    rates = defined_alphas(simulation.alphas) if simulation is not None else []
    if not rates:
        return None, None
    chosen = k if k is None or k <= len(rates) else None
    return (
        predict(costs, k_max, alphas=rates, k=chosen),
        "the simulated α (random weights: a plumbing check, not a quality estimate)",
    )


@dataclass(frozen=True)
class PlotData:
    """What the plot draws, precomputed from the result's costs by the calculators."""

    ks: tuple[int, ...]
    #: (α, predicted speedups over ks), one curve per α
    curves: tuple[tuple[float, tuple[float, ...]], ...]
    #: (k, break-even α): 0 = never loses, None = never wins
    break_even: tuple[tuple[int, float | None], ...]
    #: (k, measured c_v(k) median, IQR)
    verify_measured: tuple[tuple[int, float, float], ...]
    #: (k, fitted a + b·k) for k = 0..k_max
    verify_fit: tuple[tuple[int, float], ...]
    #: c_t, for reference beside c_v
    target_step_s: float


PLOT_ALPHAS: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


def plot_data(result: SpecMeasureResult) -> PlotData:
    """Speedup vs k for a few α, the break-even α per k and c_v(k) measured vs fitted."""
    ks = tuple(range(1, result.k_max + 1))
    rows = speedup_rows(result.costs, PLOT_ALPHAS, result.k_max)
    return PlotData(
        ks=ks,
        curves=tuple((r.alpha, r.speedups) for r in rows),
        break_even=tuple((b.k, b.alpha) for b in result.break_even_alpha_by_k),
        verify_measured=tuple((v.k, v.time_s, v.iqr_s) for v in result.verify_s),
        verify_fit=tuple((kk, float(result.costs.verify_s(kk))) for kk in (0, *ks)),
        target_step_s=result.target_step_s,
    )
