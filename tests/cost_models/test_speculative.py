from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from infer_opt.cost_models.speculative import (
    DISTRIBUTION_TOLERANCE,
    PlanRound,
    acceptance,
    acceptance_report,
    compare_plans,
    expected_tokens,
    expected_tokens_constant,
    expected_tokens_within_budget,
    leviathan_speedup,
    rates_from_counts,
    softmax,
    speculative_speedup,
    speedup_curves,
    speedup_grid,
    survival,
    validate_distribution,
    validate_pair,
)
from infer_opt.errors import InvalidInput
from infer_opt.results.speculative import Costs

MS = 1e-3
SPEC_COSTS = Costs(target_s=10 * MS, draft_s=1 * MS, verify_base_s=12 * MS, overhead_s=1 * MS)

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
alpha_lists = st.lists(unit, min_size=1, max_size=12)


def _distribution(draw_values: list[float]) -> np.ndarray:
    arr = np.asarray(draw_values, dtype=float)
    return arr / arr.sum()


positive_vectors = st.integers(min_value=1, max_value=12).flatmap(
    lambda n: st.tuples(
        st.lists(st.floats(min_value=0.0, max_value=10.0), min_size=n, max_size=n),
        st.lists(st.floats(min_value=0.0, max_value=10.0), min_size=n, max_size=n),
    )
)


# ---------------------------------------------------------------- committed tokens per round


def test_expected_tokens_worked_example():
    # k = 3, α = 0.8 -> 1 + 0.8 + 0.64 + 0.512
    assert expected_tokens([0.8, 0.8, 0.8]) == pytest.approx(2.952, abs=1e-12)
    assert expected_tokens_constant(0.8, 3) == pytest.approx(2.952, abs=1e-12)


def test_survival_is_the_running_product_with_empty_product_first():
    assert survival([0.9, 0.7, 0.5]) == pytest.approx([1.0, 0.9, 0.63, 0.315])


def test_alpha_one_gives_k_plus_one_without_dividing_by_zero():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in (1, 3, 17):
            assert expected_tokens_constant(1.0, k) == k + 1
            assert expected_tokens([1.0] * k) == k + 1


def test_alpha_zero_commits_exactly_one_token():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert expected_tokens_constant(0.0, 5) == 1.0


@pytest.mark.parametrize("eps", [1e-6, 1e-9, 1e-12, 1e-15])
def test_closed_form_is_accurate_near_alpha_one(eps):
    alpha, k = 1.0 - eps, 7
    direct = math.fsum(alpha**i for i in range(k + 1))
    assert expected_tokens_constant(alpha, k) == pytest.approx(direct, rel=1e-13)


def test_closed_form_vectorises_over_alpha_and_k():
    alphas = np.array([[0.0], [0.5], [1.0]])
    ks = np.array([[1, 2, 3]])
    out = expected_tokens_constant(alphas, ks)
    assert out.shape == (3, 3)
    assert out[1] == pytest.approx([1.5, 1.75, 1.875])
    assert out[2] == pytest.approx([2, 3, 4])


@given(alpha_lists)
def test_expected_tokens_is_between_one_and_k_plus_one(alphas):
    e_n = expected_tokens(alphas)
    assert 1.0 <= e_n <= len(alphas) + 1 + 1e-12


@given(alpha_lists, st.data())
def test_expected_tokens_is_non_decreasing_in_every_alpha(alphas, data):
    i = data.draw(st.integers(min_value=0, max_value=len(alphas) - 1))
    raised = list(alphas)
    raised[i] = data.draw(st.floats(min_value=alphas[i], max_value=1.0))
    assert expected_tokens(raised) >= expected_tokens(alphas) - 1e-12


@given(unit, st.integers(min_value=1, max_value=40))
def test_constant_closed_form_matches_the_sum(alpha, k):
    assert expected_tokens_constant(alpha, k) == pytest.approx(expected_tokens([alpha] * k), rel=1e-12)


def test_averaging_per_position_rates_is_wrong_when_they_differ():
    rates = [0.9, 0.7, 0.5]
    right = expected_tokens(rates)  # 1 + 0.9 + 0.63 + 0.315
    wrong = expected_tokens_constant(float(np.mean(rates)), 3)  # 1 + 0.7 + 0.49 + 0.343
    assert right == pytest.approx(2.845)
    assert wrong == pytest.approx(2.533)
    result = speculative_speedup(3, SPEC_COSTS, alphas=rates)
    assert result.expected_tokens == pytest.approx(2.845)
    assert result.averaged_alpha == pytest.approx(0.7)
    assert result.averaged_alpha_expected_tokens == pytest.approx(2.533)


def test_equal_per_position_rates_report_no_averaging_note():
    result = speculative_speedup(3, SPEC_COSTS, alphas=[0.8, 0.8, 0.8])
    assert result.averaged_alpha is None
    assert result.expected_tokens == pytest.approx(2.952)


def _brute_force_budget(rates: list[float], budget: int) -> float:
    # P(N = n): first n-1 positions accepted, then a rejection (or all k accepted: N = k+1)
    total, reach = 0.0, 1.0
    for n in range(1, len(rates) + 2):
        stop = 1.0 - rates[n - 1] if n <= len(rates) else 1.0
        total += min(n, budget) * reach * stop
        if n <= len(rates):
            reach *= rates[n - 1]
    return total


@pytest.mark.parametrize(("budget", "expected"), [(1, 1.0), (2, 1.9), (3, 2.53), (4, 2.845), (50, 2.845)])
def test_budget_truncates_the_round(budget, expected):
    rates = [0.9, 0.7, 0.5]
    assert expected_tokens_within_budget(rates, budget) == pytest.approx(expected)
    assert expected_tokens_within_budget(rates, budget) == pytest.approx(_brute_force_budget(rates, budget))


@given(alpha_lists, st.integers(min_value=1, max_value=15))
def test_budget_matches_the_distribution_of_n(rates, budget):
    assert expected_tokens_within_budget(rates, budget) == pytest.approx(
        _brute_force_budget(rates, budget), abs=1e-12
    )


def test_budget_changes_the_speedup():
    result = speculative_speedup(3, SPEC_COSTS, alpha=0.8, budget=2)
    assert result.expected_tokens == pytest.approx(2.952)
    assert result.expected_tokens_within_budget == pytest.approx(1.8)
    assert result.speedup == pytest.approx(10 * 1.8 / 16)


# ---------------------------------------------------------------------------------- speedup


def test_speedup_worked_example():
    result = speculative_speedup(3, SPEC_COSTS, alpha=0.8)
    assert result.round_time_s == pytest.approx(16 * MS)
    assert result.speedup == pytest.approx(29.52 / 16)
    assert result.speedup == pytest.approx(1.845)
    assert result.cost_per_token_s == pytest.approx(16 * MS / 2.952)
    assert not result.slowdown


def test_expensive_verification_is_a_slowdown():
    costs = Costs(target_s=10 * MS, draft_s=1 * MS, verify_base_s=30 * MS, overhead_s=1 * MS)
    result = speculative_speedup(3, costs, alpha=0.8)
    assert result.speedup == pytest.approx(29.52 / 34)
    assert result.speedup < 1 and result.slowdown
    assert result.plain_time_s == pytest.approx(29.52 * MS)


@given(
    st.floats(min_value=0.0, max_value=1.0),
    st.integers(min_value=1, max_value=20),
    st.floats(min_value=0.0, max_value=2.0),
)
def test_matches_leviathan_closed_form_when_verify_costs_one_target_step(alpha, k, c):
    assume(alpha < 1.0)
    costs = Costs(target_s=10 * MS, draft_s=c * 10 * MS, verify_base_s=10 * MS, overhead_s=0.0)
    leviathan = (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + 1))
    result = speculative_speedup(k, costs, alpha=alpha)
    assert result.speedup == pytest.approx(leviathan, rel=1e-9)
    assert leviathan_speedup(alpha, k, c) == pytest.approx(leviathan, rel=1e-9)


def test_linear_verify_cost_model():
    costs = Costs(target_s=10 * MS, draft_s=1 * MS, verify_base_s=9 * MS, verify_per_k_s=1 * MS)
    result = speculative_speedup(3, costs, alpha=0.8)
    assert result.verify_cost_s == pytest.approx(12 * MS)
    assert result.round_time_s == pytest.approx(15 * MS)


def test_sweep_finds_the_best_draft_length():
    result = speculative_speedup(3, SPEC_COSTS, alpha=0.8, sweep_kmax=12)
    by_hand = {k: 10 * (1 - 0.8 ** (k + 1)) / 0.2 / (k + 13) for k in range(1, 13)}
    assert [p.k for p in result.curve] == list(range(1, 13))
    assert [p.speedup for p in result.curve] == pytest.approx([by_hand[k] for k in range(1, 13)])
    assert result.best_k == max(by_hand, key=by_hand.get) == 7
    assert result.best_speedup == pytest.approx(by_hand[7])


def test_sweep_with_per_position_rates_uses_the_prefixes():
    rates = [0.9, 0.7, 0.5, 0.3]
    result = speculative_speedup(2, SPEC_COSTS, alphas=rates, sweep_kmax=4)
    assert result.alphas_used == (0.9, 0.7)
    assert [p.expected_tokens for p in result.curve] == pytest.approx(
        [expected_tokens(rates[:k]) for k in range(1, 5)]
    )


def test_sweep_needs_enough_per_position_rates():
    with pytest.raises(InvalidInput, match="k-max"):
        speculative_speedup(2, SPEC_COSTS, alphas=[0.9, 0.7, 0.5], sweep_kmax=5)


def test_curves_and_grid_for_plots_agree_with_the_result():
    result = speculative_speedup(3, SPEC_COSTS, alpha=0.8, sweep_kmax=10)
    curves = speedup_curves(result)
    given_curve = next(c for c in curves if c.given)
    assert given_curve.speedups == pytest.approx([p.speedup for p in result.curve])
    assert {c.label for c in curves} == {"α = 0.6", "α = 0.7", "α = 0.8", "α = 0.9"}
    grid = speedup_grid(result)
    row = int(np.argmin(np.abs(grid.alphas - 0.8)))
    assert grid.speedup[row, 2] == pytest.approx(result.speedup)
    assert grid.best_k[row] == 7
    assert grid.speedup[-1, 0] == pytest.approx(10 * 2 / 14)  # α = 1, k = 1: E[N] = 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": 3, "alpha": 1.2}, "alpha"),
        ({"k": 3, "alpha": -0.1}, "alpha"),
        ({"k": 3, "alpha": float("nan")}, "alpha"),
        ({"k": 0, "alpha": 0.5}, "k: "),
        ({"k": 3, "alphas": [0.9, 1.5, 0.2]}, "alphas"),
        ({"k": 3, "alphas": [0.9, 0.5]}, "alphas"),
        ({"k": 3}, "alpha"),
        ({"k": 3, "alpha": 0.5, "budget": 0}, "budget"),
    ],
)
def test_speedup_rejects_bad_input(kwargs, match):
    with pytest.raises(InvalidInput, match=match):
        speculative_speedup(costs=SPEC_COSTS, **kwargs)


@pytest.mark.parametrize(
    ("costs", "match"),
    [
        (Costs(0.0, MS, MS), "target_cost"),
        (Costs(10 * MS, -MS, MS), "draft_cost"),
        (Costs(10 * MS, MS, -MS), "verify_cost"),
        (Costs(10 * MS, MS, MS, overhead_s=-MS), "overhead"),
        (Costs(10 * MS, 0.0, 0.0), "round time"),
    ],
)
def test_speedup_rejects_bad_costs(costs, match):
    with pytest.raises(InvalidInput, match=match):
        speculative_speedup(3, costs, alpha=0.5)


# ------------------------------------------------------------------------------- acceptance


def test_acceptance_worked_example():
    an = acceptance([0.5, 0.3, 0.2], [0.2, 0.5, 0.3])
    assert an.accept_prob == pytest.approx([1.0, 0.6, 2 / 3])
    assert an.accepted_mass == pytest.approx([0.2, 0.3, 0.2])
    assert an.acceptance_rate == pytest.approx(0.7)
    assert an.rejection_mass == pytest.approx(0.3)
    assert an.residual == pytest.approx([1.0, 0.0, 0.0])
    assert an.exact_output == pytest.approx([0.5, 0.3, 0.2])
    # resampling from p after a rejection: min(p, q) + Z·p
    assert an.wrong_output == pytest.approx([0.35, 0.39, 0.26])


def test_tokens_never_drafted_have_no_acceptance_probability():
    an = acceptance([0.5, 0.5, 0.0], [1.0, 0.0, 0.0])
    assert list(an.proposed) == [True, False, False]
    assert an.accept_prob[0] == 0.5 and np.isnan(an.accept_prob[1:]).all()
    report = acceptance_report(an.p, an.q)
    assert [t.accept_prob for t in report.per_token] == [0.5, None, None]
    assert report.residual == pytest.approx((0.0, 1.0, 0.0))


def test_identical_distributions_build_no_residual():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        an = acceptance([0.25, 0.75], [0.25, 0.75])
    assert an.rejection_mass == 0.0 and an.residual is None
    assert an.acceptance_rate == pytest.approx(1.0)
    assert an.exact_output == pytest.approx([0.25, 0.75])
    assert acceptance_report(an.p, an.q).residual is None


@given(positive_vectors)
def test_acceptance_is_one_minus_total_variation(pq):
    p_raw, q_raw = pq
    assume(sum(p_raw) > 1e-3 and sum(q_raw) > 1e-3)
    p, q = _distribution(p_raw), _distribution(q_raw)
    an = acceptance(p, q)
    assert an.acceptance_rate == pytest.approx(1.0 - 0.5 * np.abs(p - q).sum(), abs=1e-12)
    assert an.rejection_mass == pytest.approx(1.0 - an.acceptance_rate, abs=1e-12)


@given(positive_vectors)
def test_exact_rule_outputs_p(pq):
    p_raw, q_raw = pq
    assume(sum(p_raw) > 1e-3 and sum(q_raw) > 1e-3)
    p, q = _distribution(p_raw), _distribution(q_raw)
    an = acceptance(p, q)
    residual = an.residual if an.residual is not None else np.zeros_like(p)
    assert np.minimum(p, q) + an.rejection_mass * residual == pytest.approx(p, abs=1e-12)
    if an.residual is not None:
        assert an.residual.sum() == pytest.approx(1.0)
        assert (an.residual >= 0).all()


def test_validate_distribution_tolerance_is_absolute_on_the_sum():
    tol = DISTRIBUTION_TOLERANCE
    assert tol == 1e-6
    validate_distribution("p", [0.5, 0.5 + 0.5 * tol])
    with pytest.raises(InvalidInput, match=r"sum to 1 within 1e-06 \(absolute\)"):
        validate_distribution("p", [0.5, 0.5 + 2 * tol])


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ([0.5, -0.1, 0.6], ">= 0"),
        ([0.5, float("nan"), 0.5], "finite"),
        ([0.5, float("inf")], "finite"),
        ([], "at least one"),
        ([0.3, 0.3], "sum to 1"),
    ],
)
def test_validate_distribution_rejects(values, match):
    with pytest.raises(InvalidInput, match=match):
        validate_distribution("--p", values)


def test_validate_distribution_can_normalise():
    assert validate_distribution("p", [2.0, 6.0], normalize=True) == pytest.approx([0.25, 0.75])
    with pytest.raises(InvalidInput, match="sum to 0"):
        validate_distribution("p", [0.0, 0.0], normalize=True)


def test_validate_pair_requires_the_same_vocabulary():
    with pytest.raises(InvalidInput, match="same length"):
        validate_pair([0.5, 0.5], [0.2, 0.3, 0.5])


def test_softmax_with_temperature_and_masked_logits():
    assert softmax([0.0, math.log(3.0)]) == pytest.approx([0.25, 0.75])
    assert softmax([0.0, math.log(3.0)], temperature=0.5) == pytest.approx([0.1, 0.9])
    assert softmax([1000.0, 1001.0, -math.inf]) == pytest.approx(
        [1 / (1 + math.e), math.e / (1 + math.e), 0.0]
    )
    with pytest.raises(InvalidInput, match="temperature"):
        softmax([0.0, 1.0], temperature=0.0)
    with pytest.raises(InvalidInput, match="finite"):
        softmax([-math.inf, -math.inf])


# ------------------------------------------------------------------------------------ plans


def _rounds(rows):
    return [PlanRound(plan, t * MS, n) for plan, t, n in rows]


def test_plans_use_ratio_of_sums_not_mean_of_ratios():
    # A: a cheap 1-token round and an expensive 4-token round; B: steady 7 ms per token
    log = _rounds([("A", 2, 1), ("A", 40, 4), ("B", 7, 1), ("B", 7, 1)])
    result = compare_plans(log)
    by_name = {p.plan: p for p in result.plans}
    assert by_name["A"].cost_per_token_s == pytest.approx(42 / 5 * MS)  # 8.4 ms
    assert by_name["A"].mean_of_ratios_s == pytest.approx((2 + 10) / 2 * MS)  # 6 ms, the wrong number
    assert by_name["A"].tokens_per_round == pytest.approx(2.5)
    assert by_name["B"].cost_per_token_s == pytest.approx(7 * MS)
    assert result.best == "B"
    assert result.naive_best == "A"
    assert result.naive_ranking_differs
    assert [p.plan for p in result.plans] == ["B", "A"]
    assert by_name["A"].relative_cost == pytest.approx(8.4 / 7)


def test_plans_rankings_agree_when_rounds_are_uniform():
    result = compare_plans(_rounds([("A", 10, 2), ("A", 10, 2), ("B", 9, 3), ("B", 9, 3)]))
    assert result.best == result.naive_best == "B"
    assert not result.naive_ranking_differs


@pytest.mark.parametrize(
    ("rows", "match"),
    [([], "no data"), ([("A", 0, 1)], "time"), ([("A", 5, 0)], "tokens")],
)
def test_plans_reject_bad_rounds(rows, match):
    with pytest.raises(InvalidInput, match=match):
        compare_plans(_rounds(rows))


# ------------------------------------------------------------------------ engine counters


def test_rates_from_counts():
    result = rates_from_counts(1000, [820, 610, 400])
    assert [p.unconditional for p in result.positions] == pytest.approx([0.82, 0.61, 0.40])
    assert [p.conditional for p in result.positions] == pytest.approx([0.82, 610 / 820, 400 / 610])
    assert result.expected_tokens == pytest.approx(2.83)
    # the conditional rates give the same E[N] through the survival products
    assert expected_tokens([p.conditional for p in result.positions]) == pytest.approx(2.83)
    assert result.draft_acceptance_rate == pytest.approx(1830 / 3000)
    assert result.speedup is None


def test_rates_from_counts_with_costs_and_draft_tokens():
    costs = Costs(10 * MS, 1 * MS, 12 * MS)
    result = rates_from_counts(1000, [820, 610, 400], draft_tokens=2900, costs=costs)
    assert result.speedup == pytest.approx(10 * 2.83 / 15)
    assert result.short_drafts
    assert result.draft_acceptance_rate == pytest.approx(1830 / 2900)


def test_conditional_rate_is_undefined_after_a_position_never_accepted():
    result = rates_from_counts(10, [0, 0])
    assert [p.conditional for p in result.positions] == [0.0, None]
    assert result.expected_tokens == 1.0


@pytest.mark.parametrize(
    ("drafts", "acc", "extra", "match"),
    [
        (1000, [820, 830, 400], {}, "non-increasing"),
        (100, [820], {}, "more often than there were drafts"),
        (0, [0], {}, "drafts"),
        (1000, [-1], {}, "non-negative"),
        (1000, [], {}, "accepted count"),
        (1000, [820, 610], {"draft_tokens": 1000}, "fewer draft tokens"),
        (1000, [820, 610], {"draft_tokens": 2001}, "drafts × positions"),
    ],
)
def test_rates_from_counts_rejects(drafts, acc, extra, match):
    with pytest.raises(InvalidInput, match=match):
        rates_from_counts(drafts, acc, **extra)
