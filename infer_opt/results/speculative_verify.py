"""The ``speculative-verify`` result kind: the speculative sampler's correction rule checked
against the target distribution, exactly and by sampling (built by
:mod:`infer_opt.checks.speculative_sampler`, read by :mod:`infer_opt.reports.speculative_verify`),
and the limits its verdicts are judged by."""

from __future__ import annotations

from dataclasses import dataclass

from infer_opt.notices import Notice
from infer_opt.results import Result

#: |exact-rule distribution - target| must be below this (float64 rounding is ~1e-16)
EXACT_TOLERANCE = 1e-12
#: chi-square tests reject "the output is distributed as p" below this p-value
SIGNIFICANCE = 1e-3
#: measured acceptance / E[N] must lie within this many standard errors of the prediction.
#: Under the null each comparison fails with probability ~5.7e-7 (two-sided normal tail).
SIGMA_LIMIT = 5.0


@dataclass(frozen=True)
class RateCheck:
    """A measured rate against the calculator's prediction."""

    quantity: str
    measured: float
    #: the calculator's value (a prediction, not a measurement)
    predicted: float
    #: standard error of the measurement
    standard_error: float
    #: (measured - predicted) / standard_error (0 when both are exact)
    z_score: float
    #: |z| <= SIGMA_LIMIT
    within: bool


@dataclass(frozen=True)
class RuleVerdict:
    """How one correction rule fared against the target distribution."""

    rule: str
    #: max |P_round+target(s) - P_target(s)| over H-token sequences, by exact enumeration
    exact_max_abs_error: float
    #: chi-square p-value of the first committed token against p_1 (Monte-Carlo)
    chi2_p_value: float | None
    #: chi-square p-value of the completed H-token sequence against the target (Monte-Carlo)
    chi2_sequence_p_value: float | None
    chi2_cells: int
    chi2_sequence_cells: int
    #: exact enumeration shows a difference (> EXACT_TOLERANCE)
    exact_differs: bool
    #: some chi-square p-value is below the significance level
    chi2_rejects: bool


@dataclass(frozen=True)
class SpeculativeVerifyResult(Result):
    KIND = "speculative-verify"

    vocab: int
    k: int
    trials: int
    seed: int
    #: target distribution per round position (k+1 rows, the last for the bonus token)
    p: tuple[tuple[float, ...], ...]
    #: draft distribution per draft position (k rows)
    q: tuple[tuple[float, ...], ...]
    #: the exact rule (residual max(p - q, 0)/Z) against the target
    exact: RuleVerdict
    #: the wrong "resample from p" rule against the target (the check must detect it)
    wrong: RuleVerdict
    #: the exact rule matches p by enumeration and no chi-square test rejects it
    exact_rule_ok: bool
    #: the wrong rule differs by enumeration and a chi-square test rejects it
    wrong_rule_detected: bool
    #: α_i (measured conditional acceptance per position) and E[N]
    rates: tuple[RateCheck, ...]
    rates_ok: bool
    #: exact rule ok, wrong rule detected, rates within SIGMA_LIMIT standard errors
    passed: bool
    #: means per round (exact rule): KV positions written (= drafted), kept (= accepted), emitted
    mean_drafted: float
    mean_kv_kept: float
    mean_emitted: float
    alpha_target: float | None = None
    significance: float = SIGNIFICANCE
    exact_tolerance: float = EXACT_TOLERANCE
    sigma_limit: float = SIGMA_LIMIT
    #: ``wrong_rule_missed_by_sampling`` (only exact enumeration saw the wrong rule)
    warnings: tuple[Notice, ...] = ()
