"""The reference speculative sampler: exact enumeration, Monte-Carlo, round accounting.

Statistical tests use fixed seeds, so they are deterministic. Their thresholds are chosen so
that a correct sampler would fail them by chance with small probability over seeds: a
chi-square test at significance 1e-3 fails with probability 1e-3; a 5-standard-error
comparison with probability ~5.7e-7.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infer_opt
from infer_opt.checks import speculative_sampler
from infer_opt.cost_models import speculative as calc
from infer_opt.errors import InvalidInput

P = np.array([0.5, 0.3, 0.2])
Q = np.array([0.2, 0.5, 0.3])


def _first_token(dist: dict[tuple[int, ...], float], vocab: int) -> np.ndarray:
    out = np.zeros(vocab)
    for seq, mass in dist.items():
        out[seq[0]] += mass
    return out


def test_chapter_example_first_token_distribution():
    exact = _first_token(speculative_sampler.round_distribution(P, Q, 1), 3)
    np.testing.assert_allclose(exact, [0.5, 0.3, 0.2], atol=1e-15)
    wrong = _first_token(speculative_sampler.round_distribution(P, Q, 1, rule="resample-p"), 3)
    np.testing.assert_allclose(wrong, [0.35, 0.39, 0.26], atol=1e-15)


def test_round_distribution_is_a_distribution_and_matches_target():
    dist = speculative_sampler.round_distribution(P, Q, 3)
    assert sum(dist.values()) == pytest.approx(1.0, abs=1e-14)
    assert all(1 <= len(s) <= 4 for s in dist)
    assert speculative_sampler.exact_max_abs_error(P, Q, 3) < 1e-15
    assert speculative_sampler.exact_max_abs_error(P, Q, 3, rule="resample-p") > 0.01


def _markov(seed: int, vocab: int) -> tuple:
    rng = np.random.default_rng(seed)
    tp, tq = rng.dirichlet(np.ones(vocab), size=vocab), rng.dirichlet(np.ones(vocab), size=vocab)
    return (lambda prefix: tp[prefix[-1]]), (lambda prefix: tq[prefix[-1]])


@pytest.mark.parametrize(("stop", "budget"), [(None, None), (0, None), (None, 2), (2, 3), (1, 1)])
def test_markov_chain_round_preserves_target(stop, budget):
    p, q = _markov(5, 3)
    kw = {"context": (1,), "stop_token": stop, "budget": budget}
    assert speculative_sampler.exact_max_abs_error(p, q, 3, **kw) < 1e-12
    wrong = speculative_sampler.exact_max_abs_error(p, q, 3, rule="resample-p", **kw)
    if budget == 1:  # nothing is drafted, so no rejection can happen
        assert wrong < 1e-12
    else:
        assert wrong > 1e-3


@settings(max_examples=40)
@given(
    seed=st.integers(0, 2**32 - 1),
    vocab=st.integers(2, 4),
    k=st.integers(1, 3),
    stop=st.sampled_from([None, 0, 1]),
    budget=st.sampled_from([None, 1, 2, 3]),
)
def test_output_distribution_equals_p_for_random_p_q(seed, vocab, k, stop, budget):
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(vocab), size=k + 1), rng.dirichlet(np.ones(vocab), size=k)
    kw = {"stop_token": stop, "budget": budget}
    assert speculative_sampler.exact_max_abs_error(p, q, k, **kw) < 1e-12
    if budget != 1:  # Dirichlet p != q almost surely, so a rejection is possible
        assert speculative_sampler.exact_max_abs_error(p, q, k, rule="resample-p", **kw) > 1e-9


def test_draft_may_miss_tokens_the_target_has():
    p, q = np.array([0.6, 0.4, 0.0]), np.array([0.0, 0.5, 0.5])
    assert speculative_sampler.exact_max_abs_error(p, q, 2) < 1e-15


def test_identical_distributions_never_reject_and_build_no_residual():
    assert calc.acceptance(P, P).residual is None
    dist = speculative_sampler.round_distribution(P, P, 2)
    assert all(len(s) == 3 for s in dist)  # every draft accepted + bonus
    assert speculative_sampler.exact_max_abs_error(P, P, 2, rule="resample-p") < 1e-15


# ------------------------------------------------------------------------- round accounting


def test_all_accepted_round_commits_k_plus_one():
    out = speculative_sampler.speculative_round(P, P, 3, np.random.default_rng(0))
    assert (out.drafted, out.accepted, out.emitted) == (3, 3, 4)
    assert out.bonus and not out.rejected and not out.stopped
    assert (out.kv_written, out.kv_kept, out.kv_rolled_back, out.pending) == (3, 3, 0, 1)


def test_certain_rejection_discards_the_rest():
    p, q = np.array([0.0, 0.5, 0.5]), np.array([1.0, 0.0, 0.0])
    out = speculative_sampler.speculative_round(p, q, 4, np.random.default_rng(0))
    assert out.rejected and out.accepted == 0 and out.drafted == 4 and out.emitted == 1
    assert out.tokens[0] in (1, 2)
    assert (out.kv_kept, out.kv_rolled_back, out.pending) == (0, 4, 1)


def test_stop_token_ends_the_round_at_once():
    stop = np.array([0.0, 1.0, 0.0])
    out = speculative_sampler.speculative_round(stop, stop, 4, np.random.default_rng(0), stop_token=1)
    assert out.tokens == (1,) and out.stopped and not out.bonus
    assert (out.drafted, out.accepted, out.pending) == (1, 1, 0)


def test_budget_caps_committed_tokens():
    rng = np.random.default_rng(1)
    one = speculative_sampler.speculative_round(P, P, 4, rng, budget=1)
    assert one.drafted == 0 and one.emitted == 1 and one.bonus
    for _ in range(200):
        out = speculative_sampler.speculative_round(P, Q, 4, rng, budget=2)
        assert out.emitted <= 2 and out.drafted <= 1


def test_round_invariants_over_many_rounds():
    p, q = _markov(3, 4)
    rng = np.random.default_rng(2)
    for _ in range(300):
        out = speculative_sampler.speculative_round(p, q, 3, rng, context=(0,), stop_token=2, budget=3)
        assert 1 <= out.emitted <= 3 and out.accepted <= out.drafted <= 2
        assert 2 not in out.tokens[:-1]
        assert out.stopped == (out.tokens[-1] == 2)
        assert out.emitted == out.accepted + (out.rejected or out.bonus)


# ------------------------------------------------------------------------------ Monte-Carlo


def test_sequential_sampler_matches_exact_enumeration():
    p, q = _markov(11, 3)
    kw = {"context": (0,), "stop_token": 1, "budget": 3}
    rng = np.random.default_rng(4)
    seqs = [speculative_sampler.speculative_round(p, q, 3, rng, **kw).tokens for _ in range(3000)]
    width = max(len(s) for s in seqs)
    arr = np.array([list(s) + [-1] * (width - len(s)) for s in seqs])
    codes = speculative_sampler.encode_sequences(arr, 3)
    expected = speculative_sampler.sequence_codes(speculative_sampler.round_distribution(p, q, 3, **kw), 3)
    pval, cells = speculative_sampler.chi_square_p_value(codes, expected)
    assert cells >= 5 and pval > speculative_sampler.SIGNIFICANCE


def test_sequential_wrong_rule_is_rejected():
    rng = np.random.default_rng(5)
    firsts = [
        speculative_sampler.speculative_round(P, Q, 1, rng, rule="resample-p").tokens[0] for _ in range(3000)
    ]
    pval, _ = speculative_sampler.chi_square_p_value(np.array(firsts), dict(enumerate(P.tolist())))
    assert pval < 1e-10


@pytest.mark.parametrize(("stop", "budget"), [(None, None), (0, None), (None, 3), (3, 2)])
def test_vectorised_rounds_match_exact_enumeration(stop, budget):
    rng = np.random.default_rng(6)
    p, q = rng.dirichlet(np.ones(4), size=5), rng.dirichlet(np.ones(4), size=4)
    batch = speculative_sampler.simulate_rounds(p, q, 4, 40_000, rng, stop_token=stop, budget=budget)
    codes = speculative_sampler.encode_sequences(batch.tokens, 4)
    expected = speculative_sampler.sequence_codes(
        speculative_sampler.round_distribution(p, q, 4, stop_token=stop, budget=budget), 4
    )
    pval, _ = speculative_sampler.chi_square_p_value(codes, expected)
    assert pval > speculative_sampler.SIGNIFICANCE
    assert np.all(batch.emitted == batch.accepted + (batch.rejected | batch.bonus))
    assert np.all(batch.emitted <= (5 if budget is None else min(5, budget)))
    done = speculative_sampler.complete_with_target(batch, p, rng, stop_token=stop)
    horizon = done.shape[1]
    target = speculative_sampler.sequence_codes(
        speculative_sampler.target_distribution(p, horizon, stop_token=stop), 4
    )
    pval_done, _ = speculative_sampler.chi_square_p_value(
        speculative_sampler.encode_sequences(done, 4), target
    )
    assert pval_done > speculative_sampler.SIGNIFICANCE


def test_vectorised_budget_matches_calculator_within_budget():
    rng = np.random.default_rng(7)
    p, q = rng.dirichlet(np.ones(5), size=5), rng.dirichlet(np.ones(5), size=4)
    batch = speculative_sampler.simulate_rounds(p, q, 4, 50_000, rng, budget=3)
    alphas = [calc.acceptance(p[i], q[i]).acceptance_rate for i in range(4)]
    predicted = calc.expected_tokens_within_budget(alphas, 3)
    se = batch.emitted.std(ddof=1) / np.sqrt(batch.emitted.size)
    assert abs(batch.emitted.mean() - predicted) < 5 * se


def test_chi_square_edge_cases():
    assert speculative_sampler.chi_square_p_value(np.array([0, 0, 2]), {0: 1.0, 1: 0.0})[0] == 0.0
    assert speculative_sampler.chi_square_p_value(np.array([0, 1]), {0: 0.5, 1: 0.5}) == (None, 1)


# ------------------------------------------------------------------------------ the check


def test_verify_sampler_default_passes_and_detects_wrong_rule():
    r = infer_opt.speculative_verify(vocab=4, k=3, trials=20_000, seed=0)
    assert r.passed and r.exact_rule_ok and r.wrong_rule_detected and r.rates_ok
    assert r.exact.exact_max_abs_error < speculative_sampler.EXACT_TOLERANCE
    assert (
        r.exact.chi2_p_value > speculative_sampler.SIGNIFICANCE
        and r.exact.chi2_sequence_p_value > speculative_sampler.SIGNIFICANCE
    )
    assert r.wrong.exact_max_abs_error > 1e-3
    assert r.wrong.chi2_p_value < speculative_sampler.SIGNIFICANCE
    p, q = np.array(r.p), np.array(r.q)
    alphas = [calc.acceptance(p[i], q[i]).acceptance_rate for i in range(3)]
    assert [x.predicted for x in r.rates[:3]] == pytest.approx(alphas, abs=1e-15)
    assert r.rates[-1].predicted == pytest.approx(calc.expected_tokens(alphas), abs=1e-15)
    assert r.mean_emitted == pytest.approx(r.mean_kv_kept + 1)  # one correction or bonus per round
    assert r.mean_drafted == 3


def test_verify_sampler_is_deterministic_and_round_trips():
    a = infer_opt.speculative_verify(vocab=3, k=2, trials=2000, seed=9)
    b = infer_opt.speculative_verify(vocab=3, k=2, trials=2000, seed=9)
    assert a == b
    assert type(a).from_dict(a.to_dict()) == a


def test_alpha_target_tunes_the_draft():
    r = infer_opt.speculative_verify(vocab=5, k=2, trials=20_000, seed=3, alpha_target=0.9)
    assert [x.predicted for x in r.rates[:2]] == pytest.approx([0.9, 0.9], abs=1e-9)
    assert r.passed


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"vocab": 1}, "vocab"),
        ({"k": 0}, "k"),
        ({"trials": 0}, "trials"),
        ({"seed": -1}, "seed"),
        ({"alpha_target": 1.0}, "alpha_target"),
        ({"vocab": 50, "k": 5}, "exact enumeration"),
    ],
)
def test_verify_sampler_rejects_bad_input(kwargs, needle):
    with pytest.raises(InvalidInput, match=needle):
        infer_opt.speculative_verify(**{"trials": 100, **kwargs})


def test_bad_distributions_are_rejected():
    with pytest.raises(InvalidInput, match="p"):
        speculative_sampler.round_distribution([0.5, 0.6], [0.5, 0.5], 1)
    with pytest.raises(InvalidInput, match="vocabulary"):
        speculative_sampler.round_distribution([0.5, 0.5], [0.2, 0.3, 0.5], 1)
    with pytest.raises(InvalidInput, match="rule"):
        speculative_sampler.round_distribution(P, Q, 1, rule="greedy")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="rows"):
        speculative_sampler.round_distribution(np.tile(P, (2, 1)), Q, 3)


def test_mean_committed_tokens_uses_the_predicted_spread_not_the_sample_one():
    # With one trial the sample variance of N is 0; judging E[N] against a zero standard
    # error reported "measured rates disagree" (z = ∞) for a correct sampler.
    result = infer_opt.speculative_verify(trials=1)
    en = next(r for r in result.rates if r.quantity.startswith("E[N]"))
    p, q = speculative_sampler.random_pair(4, 3, np.random.default_rng(np.random.SeedSequence(0).spawn(3)[0]))
    alphas = [calc.acceptance(p[i], q[i]).acceptance_rate for i in range(3)]
    surv = calc.survival(alphas)
    e_n = surv.sum()
    var = sum((2 * j - 1) * s for j, s in enumerate(surv, start=1)) - e_n**2
    assert en.predicted == pytest.approx(e_n)
    assert en.standard_error == pytest.approx(np.sqrt(var / 1))
    assert en.within
