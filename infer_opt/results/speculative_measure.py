"""The ``speculative-measure`` result kind: the measured costs of a draft/target pair (c_t, c_d,
c_v(k)), the verify fit, and the speedups they predict (built by
:mod:`infer_opt.profilers.speculative_costs`, read by :mod:`infer_opt.reports.speculative_measure`)."""

from __future__ import annotations

from dataclasses import dataclass

from infer_opt.notices import Notice
from infer_opt.results import Result
from infer_opt.results.speculative import Costs, SpeedupResult
from infer_opt.stats import Summary

SIMULATION_NOTE = (
    "random weights: this α only checks the measurement and sampler plumbing end to end; "
    "it says nothing about the acceptance of a trained draft/target pair"
)


@dataclass(frozen=True)
class MeasuredCost:
    """One measured cost and its spread."""

    name: str
    what: str
    summary: Summary
    cold_s: float | None = None
    warnings: tuple[Notice, ...] = ()

    @property
    def median_s(self) -> float:
        return self.summary.median_s


@dataclass(frozen=True)
class VerifyPoint:
    """c_v(k) as measured, and the fit's value there."""

    k: int
    time_s: float
    iqr_s: float
    fit_s: float
    #: |fit - measured| / measured
    fit_rel_error: float


@dataclass(frozen=True)
class VerifyFit:
    """``c_v(k) ≈ base_s + per_k_s·k`` by least squares over the measured k."""

    base_s: float
    per_k_s: float
    max_rel_error: float
    median_rel_error: float
    #: None, or which coefficient was held at 0 to keep both >= 0 ("slope", "intercept");
    #: "single point" when only k = 1 was measured
    constrained: str | None = None


@dataclass(frozen=True)
class AlphaRow:
    """Predicted speedup at one constant α for k = 1..k_max."""

    alpha: float
    speedups: tuple[float, ...]
    best_k: int
    best_speedup: float


@dataclass(frozen=True)
class BestK:
    alpha: float
    k: int
    speedup: float


@dataclass(frozen=True)
class BreakEvenPoint:
    """Below ``alpha`` speculation with this k is slower than plain decoding.

    ``alpha = 0``: it never loses (a round costs no more than one target step);
    ``alpha = None``: it never wins (even α = 1 commits too few tokens for the round's cost)."""

    k: int
    alpha: float | None
    round_time_s: float
    #: E[N] a round must commit to break even: round time / c_t
    required_tokens: float


@dataclass(frozen=True)
class AcceptanceSimulation:
    """The reference sampler run with the two models' next-token distributions."""

    k: int
    prompts: int
    rounds: int
    seed: int
    #: rounds in which draft position i was accepted, i = 1..k
    accepted_per_position: tuple[int, ...]
    #: conditional acceptance α_i = acc_i / acc_{i-1}; None where no round got that far
    alphas: tuple[float | None, ...]
    #: mean committed tokens per round (bonus included)
    mean_tokens: float
    #: mean of Σ min(p, q) = 1 - TV(p, q) over the positions the rounds verified
    mean_overlap: float
    positions_compared: int
    elapsed_s: float
    note: str = SIMULATION_NOTE


@dataclass(frozen=True)
class SpecMeasureResult(Result):
    KIND = "speculative-measure"

    target: str
    draft: str
    vocab_size: int
    context: int
    k_max: int
    device: str
    device_name: str
    dtype: str
    threads: int | None
    warmup: int
    reps: int
    #: c_t, c_d, c_m medians (seconds)
    target_step_s: float
    draft_step_s: float
    bookkeeping_s: float
    #: c_d / c_t
    draft_to_target: float
    verify_s: tuple[VerifyPoint, ...]
    fit: VerifyFit
    #: every measurement with its spread: c_t, c_d, c_v(1..k_max), c_m
    measurements: tuple[MeasuredCost, ...]
    #: what the calculators were given (c_v from the fit)
    costs: Costs
    speedup_by_alpha: tuple[AlphaRow, ...]
    best_k_by_alpha: tuple[BestK, ...]
    break_even_alpha_by_k: tuple[BreakEvenPoint, ...]
    #: the single prediction asked for (--alpha, --alphas, --metrics or the simulation)
    prediction: SpeedupResult | None = None
    prediction_source: str | None = None
    simulation: AcceptanceSimulation | None = None
    draft_note: str | None = None
    warnings: tuple[Notice, ...] = ()
