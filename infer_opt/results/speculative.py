"""The speculative decoding kinds (``speculative-speedup``, ``-acceptance``, ``-plans``,
``-metrics``): what the model predicts, and the acceptance behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from infer_opt.notices import Notice
from infer_opt.results import Result

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class TokenAcceptance:
    token: int
    p: float
    q: float
    #: a(x) = min(1, p/q); None where q(x) = 0 (never drafted)
    accept_prob: float | None
    accepted_mass: float
    #: r(x); None when Z = 0
    residual: float | None
    #: output probability under the exact rule (= p)
    output: float
    #: output probability under the wrong "resample from p" rule
    wrong_output: float


@dataclass(frozen=True)
class AcceptanceResult(Result):
    KIND = "speculative-acceptance"

    acceptance_rate: float
    rejection_mass: float
    total_variation: float
    #: the residual distribution r, or None when Z = 0 (no rejection possible)
    residual: tuple[float, ...] | None
    per_token: tuple[TokenAcceptance, ...]
    #: largest |exact rule output - p| over tokens (rounding only)
    exact_rule_max_error: float
    #: largest |wrong rule output - p| over tokens
    wrong_rule_max_error: float
    tolerance: float
    normalized: bool = False
    from_logits: bool = False
    p_temperature: float | None = None
    q_temperature: float | None = None


@dataclass(frozen=True)
class Costs:
    """Per-round costs in seconds. Verification is ``c_v(k) = verify_base_s + verify_per_k_s·k``."""

    target_s: float
    draft_s: float
    verify_base_s: float
    verify_per_k_s: float = 0.0
    overhead_s: float = 0.0
    #: c_v = c_t was assumed because no verification cost was given
    verify_assumed: bool = False

    def verify_s(self, k: int | np.ndarray) -> float | np.ndarray:
        return self.verify_base_s + self.verify_per_k_s * k

    def round_time_s(self, k: int | np.ndarray) -> float | np.ndarray:
        """``k·c_d + c_v(k) + c_m``."""
        return k * self.draft_s + self.verify_s(k) + self.overhead_s


@dataclass(frozen=True)
class SweepPoint:
    k: int
    expected_tokens: float
    round_time_s: float
    speedup: float
    cost_per_token_s: float


@dataclass(frozen=True)
class SpeedupResult(Result):
    KIND = "speculative-speedup"

    k: int
    #: the per-position rates used, α_1..α_k
    alphas_used: tuple[float, ...]
    costs: Costs
    #: P(N ≥ j) for j = 1..k+1
    survival: tuple[float, ...]
    #: E[N], committed tokens per round, bonus included
    expected_tokens: float
    #: c_v(k)
    verify_cost_s: float
    #: k·c_d + c_v(k) + c_m
    round_time_s: float
    #: S = c_t·E[N] (or E[min(N, L)] with a budget) / round time
    speedup: float
    #: round time / committed tokens
    cost_per_token_s: float
    #: c_t × committed tokens: what plain decoding needs for the tokens one round commits
    plain_time_s: float
    slowdown: bool
    #: the constant α given, or None for per-position rates
    alpha: float | None = None
    #: the per-position rates as given (may be longer than k, for sweeps)
    alphas: tuple[float, ...] | None = None
    budget: int | None = None
    #: E[min(N, L)] with a budget L
    expected_tokens_within_budget: float | None = None
    #: E[N] if the α_i were wrongly averaged into one α (only when they differ)
    averaged_alpha: float | None = None
    averaged_alpha_expected_tokens: float | None = None
    sweep_kmax: int | None = None
    best_k: int | None = None
    best_speedup: float | None = None
    curve: tuple[SweepPoint, ...] = field(default_factory=tuple)
    #: ``verify_cost_assumed`` (c_v = c_t: no verification cost given)
    warnings: tuple[Notice, ...] = ()


@dataclass(frozen=True)
class PlanStats:
    plan: str
    rounds: int
    total_time_s: float
    total_tokens: int
    #: Σ time / Σ tokens: the long-run cost per committed token
    cost_per_token_s: float
    tokens_per_round: float
    time_per_round_s: float
    #: mean over rounds of time/tokens: the naive (wrong) estimate, shown for contrast
    mean_of_ratios_s: float
    #: cost per token relative to the best plan's
    relative_cost: float
    rank: int
    naive_rank: int


@dataclass(frozen=True)
class PlansResult(Result):
    KIND = "speculative-plans"

    plans: tuple[PlanStats, ...]
    best: str
    naive_best: str
    #: the mean of per-round ratios would order the plans differently
    naive_ranking_differs: bool
    #: ``naive_ranking_differs`` (the mean of per-round ratios ranks the plans otherwise)
    warnings: tuple[Notice, ...] = ()


@dataclass(frozen=True)
class PositionRate:
    position: int
    accepted: int
    #: u_i = acc_i / drafts: P(position i accepted)
    unconditional: float
    #: α_i = acc_i / acc_{i-1} (acc_0 = drafts); None when acc_{i-1} = 0
    conditional: float | None


@dataclass(frozen=True)
class MetricsSource:
    """Where serving-engine counters were read: a Prometheus exposition (``file``), optionally
    as the interval since an earlier snapshot (``before``), for one ``model_name``, summed over
    ``engines``."""

    file: str
    before: str | None = None
    model_name: str | None = None
    engines: tuple[str, ...] = ()


@dataclass(frozen=True)
class MetricsResult(Result):
    KIND = "speculative-metrics"

    drafts: int
    accepted_per_position: tuple[int, ...]
    positions: tuple[PositionRate, ...]
    #: E[N] = 1 + Σ u_i, mean committed tokens per round (bonus included)
    expected_tokens: float
    #: Σ u_i, mean accepted draft tokens per round
    mean_accepted: float
    #: Σ acc_i / draft tokens (drafts·k when not given); None with no draft tokens at all
    draft_acceptance_rate: float | None
    draft_tokens: int | None = None
    #: draft tokens < drafts·k: some rounds drafted fewer than k tokens
    short_drafts: bool = False
    costs: Costs | None = None
    round_time_s: float | None = None
    speedup: float | None = None
    cost_per_token_s: float | None = None
    #: the engine's own total of accepted draft tokens (Σ acc_i when the counters agree)
    accepted_total: int | None = None
    source: MetricsSource | None = None
    #: ``short_drafts`` (later positions' rates biased low), ``verify_cost_assumed``; from a
    #: Prometheus file also ``prometheus_accepted_mismatch``
    warnings: tuple[Notice, ...] = ()
