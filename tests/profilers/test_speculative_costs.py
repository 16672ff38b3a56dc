from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.cost_models import speculative as calc
from infer_opt.cost_models.speculative_cost_fit import (
    ALPHA_GRID,
    analyze,
    break_even_alpha,
    defined_alphas,
    fit_verify,
    predict,
    speedup_rows,
)
from infer_opt.errors import InvalidInput
from infer_opt.profilers import models, speculative_costs
from infer_opt.results import Result
from infer_opt.results.speculative import Costs
from infer_opt.results.speculative_measure import MeasuredCost, SpecMeasureResult
from infer_opt.stats import Summary

pytestmark = pytest.mark.usefixtures("one_thread")


def _costs(c_t=10e-3, c_d=1e-3, base=9e-3, per_k=1e-3, c_m=0.2e-3) -> Costs:
    return Costs(c_t, c_d, base, per_k, c_m)


def _speedup(costs: Costs, alpha: float, k: int) -> float:
    """S written out independently of the calculator: c_t·(1-α^{k+1})/(1-α) / round time."""
    e_n = k + 1.0 if alpha == 1.0 else (1.0 - alpha ** (k + 1)) / (1.0 - alpha)
    return (
        costs.target_s
        * e_n
        / (k * costs.draft_s + costs.verify_base_s + costs.verify_per_k_s * k + costs.overhead_s)
    )


# ----------------------------------------------------------------------------- the c_v fit


def test_fit_recovers_an_exact_line():
    ks = list(range(1, 9))
    fit = fit_verify(ks, [12e-3 + 0.5e-3 * k for k in ks])
    assert fit.base_s == pytest.approx(12e-3, rel=1e-9)
    assert fit.per_k_s == pytest.approx(0.5e-3, rel=1e-9)
    assert fit.max_rel_error < 1e-9 and fit.constrained is None


def test_fit_of_noisy_data_reports_its_error():
    rng = np.random.default_rng(1)
    ks = np.arange(1, 9)
    noise = 1 + rng.uniform(-0.03, 0.03, ks.size)
    times = (20e-3 + 2e-3 * ks) * noise
    fit = fit_verify(ks.tolist(), times.tolist())
    assert fit.base_s == pytest.approx(20e-3, rel=0.1)
    assert fit.per_k_s == pytest.approx(2e-3, rel=0.15)
    rel = np.abs(fit.base_s + fit.per_k_s * ks - times) / times
    assert fit.max_rel_error == pytest.approx(rel.max())
    assert fit.median_rel_error == pytest.approx(np.median(rel))
    assert 0 < fit.median_rel_error <= fit.max_rel_error < 0.06


def test_fit_holds_a_negative_slope_at_zero():
    fit = fit_verify([1, 2, 3], [0.012, 0.011, 0.010])
    assert fit.per_k_s == 0.0 and fit.base_s == pytest.approx(0.011) and fit.constrained == "slope"


def test_fit_holds_a_negative_intercept_at_zero():
    fit = fit_verify([1, 2, 3], [1e-3, 3e-3, 5e-3])  # exact line -1 ms + 2 ms·k
    assert fit.base_s == 0.0 and fit.constrained == "intercept"
    assert fit.per_k_s == pytest.approx((1e-3 + 6e-3 + 15e-3) / 14)


def test_fit_of_one_point_is_a_constant():
    fit = fit_verify([1], [0.02])
    assert (fit.base_s, fit.per_k_s, fit.constrained) == (0.02, 0.0, "single point")


def test_fit_rejects_bad_times():
    with pytest.raises(InvalidInput):
        fit_verify([1, 2], [0.01, 0.0])
    with pytest.raises(InvalidInput):
        fit_verify([1, 2], [0.01])


# ----------------------------------------------------------------------------- break-even α


def _scan(costs: Costs, k: int, step: float = 1e-4) -> float | None:
    """The smallest α on a fine grid where the calculator's speedup reaches 1."""
    for alpha in np.arange(0.0, 1.0 + step / 2, step):
        if calc.speculative_speedup(k, costs, alpha=float(min(alpha, 1.0))).speedup >= 1.0:
            return float(alpha)
    return None


@pytest.mark.parametrize(
    ("costs", "k"),
    [
        (_costs(), 1),
        (_costs(), 3),
        (_costs(), 8),
        (_costs(c_d=3e-3, base=15e-3, per_k=2e-3), 4),
        (_costs(c_d=0.2e-3, base=10e-3, per_k=0.1e-3, c_m=0.0), 6),
    ],
)
def test_break_even_alpha_matches_a_brute_force_scan(costs, k):
    point = break_even_alpha(costs, k)
    scanned = _scan(costs, k)
    assert point.alpha is not None and scanned is not None
    assert point.alpha == pytest.approx(scanned, abs=1.5e-4)
    assert calc.speculative_speedup(k, costs, alpha=point.alpha).speedup == pytest.approx(1.0, abs=1e-9)
    assert point.round_time_s == pytest.approx(float(costs.round_time_s(k)))


def test_break_even_edges_never_wins_and_never_loses():
    expensive = _costs(c_t=10e-3, c_d=5e-3, base=30e-3, per_k=0.0, c_m=0.0)
    point = break_even_alpha(expensive, 2)  # round 40 ms needs 4 tokens > k + 1 = 3
    assert point.alpha is None and point.required_tokens == pytest.approx(4.0)
    assert _speedup(expensive, 1.0, 2) < 1
    cheap = _costs(c_t=10e-3, c_d=1e-3, base=5e-3, per_k=0.0, c_m=0.0)
    point = break_even_alpha(cheap, 2)  # round 7 ms < c_t: even α = 0 gains
    assert point.alpha == 0.0 and _speedup(cheap, 0.0, 2) > 1


@given(
    c_t=st.floats(1e-4, 1.0),
    ratios=st.tuples(st.floats(0.0, 1.0), st.floats(0.01, 3.0), st.floats(0.0, 0.5), st.floats(0.0, 0.5)),
    k=st.integers(1, 16),
)
def test_break_even_separates_slowdowns_from_gains(c_t, ratios, k):
    d, base, per_k, m = ratios
    costs = Costs(c_t, d * c_t, base * c_t, per_k * c_t, m * c_t)
    point = break_even_alpha(costs, k)
    if point.alpha is None:
        assert _speedup(costs, 1.0, k) <= 1 + 1e-12
    elif point.alpha == 0.0:
        assert _speedup(costs, 0.0, k) >= 1 - 1e-12
    else:
        assert _speedup(costs, point.alpha, k) == pytest.approx(1.0, rel=1e-9)
        below, above = max(point.alpha - 1e-3, 0.0), min(point.alpha + 1e-3, 1.0)
        assert _speedup(costs, below, k) < 1 < _speedup(costs, above, k) or point.alpha > 0.999


# ----------------------------------------------------------------------------- best k per α


@pytest.mark.parametrize("costs", [_costs(), _costs(c_d=2e-3, base=20e-3, per_k=3e-3), _costs(c_d=0.1e-3)])
def test_best_k_per_alpha_matches_a_direct_sweep(costs):
    rows = speedup_rows(costs, ALPHA_GRID, 10)
    assert [r.alpha for r in rows] == list(ALPHA_GRID)
    for row in rows:
        direct = [_speedup(costs, row.alpha, k) for k in range(1, 11)]
        assert row.speedups == pytest.approx(direct, rel=1e-12)
        assert row.best_k == 1 + int(np.argmax(direct))
        assert row.best_speedup == pytest.approx(max(direct), rel=1e-12)


def test_prediction_defaults_to_the_best_k_and_honours_k():
    costs = _costs()
    best = predict(costs, 8, alpha=0.8)
    direct = [_speedup(costs, 0.8, k) for k in range(1, 9)]
    assert best.k == 1 + int(np.argmax(direct)) and best.speedup == pytest.approx(max(direct))
    assert predict(costs, 8, alpha=0.8, k=2).speedup == pytest.approx(direct[1])
    per_position = predict(costs, 8, alphas=[0.9, 0.5])
    assert per_position.k in (1, 2) and per_position.sweep_kmax == 2
    with pytest.raises(InvalidInput, match="--k"):
        predict(costs, 8, alphas=[0.9, 0.5], k=3)


def test_defined_alphas_stop_at_the_first_unreached_position():
    assert defined_alphas([0.9, 0.5, None, 0.3]) == [0.9, 0.5]


# ----------------------------------------------------------------------------- analyze


def _measured(name: str, median: float) -> MeasuredCost:
    return MeasuredCost(name, name, Summary.from_samples([median * 0.99, median, median * 1.01]))


def _synthetic(k_max: int = 4) -> list[MeasuredCost]:
    out = [_measured("c_t", 10e-3), _measured("c_d", 1e-3)]
    out += [_measured(f"c_v({k})", 9e-3 + 1e-3 * k) for k in range(1, k_max + 1)]
    return [*out, _measured("c_m", 1e-7)]


def _analyze(**kwargs):
    base = dict(
        target="t", draft="d", vocab_size=10, context=8, device="cpu", device_name="cpu",
        dtype="float32", threads=1, warmup=0, reps=3,
    )  # fmt: skip
    return analyze(_synthetic(), **{**base, **kwargs})


def test_analyze_feeds_the_fit_to_the_calculators_and_round_trips():
    result = _analyze(alpha=0.8)
    assert result.fit.base_s == pytest.approx(9e-3) and result.fit.per_k_s == pytest.approx(1e-3)
    assert result.costs.verify_s(3) == pytest.approx(12e-3)
    assert [v.k for v in result.verify_s] == [1, 2, 3, 4]
    assert [b.k for b in result.break_even_alpha_by_k] == [1, 2, 3, 4]
    assert result.prediction is not None and result.prediction_source == "--alpha 0.8"
    assert result.prediction.speedup == pytest.approx(
        max(_speedup(result.costs, 0.8, k) for k in range(1, 5))
    )
    data = result.to_dict()
    assert {"target_step_s", "draft_step_s", "verify_s", "best_k_by_alpha", "break_even_alpha_by_k"} <= set(
        data
    )
    assert set(data["verify_s"][0]) >= {"k", "time_s"}
    again = SpecMeasureResult.from_dict(data)
    assert again.prediction.speedup == result.prediction.speedup and isinstance(again, Result)


def test_analyze_warns_when_c_v_is_not_linear():
    measured = _synthetic()
    measured[3] = _measured("c_v(2)", 30e-3)
    base = dict(target="t", draft="d", vocab_size=10, context=8, device="cpu", device_name="cpu",
                dtype="float32", threads=1, warmup=0, reps=3)  # fmt: skip
    result = analyze(measured, **base)
    (notice,) = [w for w in result.warnings if w.code == "verify_cost_not_linear"]
    assert notice["max_rel_error"] > 0.1


# ----------------------------------------------------------------------------- real models


def test_measure_costs_on_tiny_models():
    pair = speculative_costs.load_pair("tiny", "tiny", device="cpu", dtype=torch.float32)
    costs = speculative_costs.measure_costs(
        pair, context=8, k_max=2, device="cpu", warmup=0, reps=2, rounds=2
    )
    assert [m.name for m in costs] == ["c_t", "c_d", "c_v(1)", "c_v(2)", "c_m"]
    assert all(m.summary.n == 2 and m.median_s > 0 for m in costs[:-1])
    assert costs[-1].median_s < costs[0].median_s  # a length reset vs a forward pass


def test_each_repetition_sees_the_same_cache_state():
    model = models.build_builtin("tiny")
    cache = model.new_cache(1, 16)
    ids = models.random_tokens(1, 8, model.config.vocab_size)
    with torch.no_grad():
        model(ids, cache)
    step = speculative_costs._forward_from(model, cache, 8, ids[:, :3])
    first, second = step(), step()
    assert torch.equal(first, second) and cache.length == 11


def test_a_builtin_draft_takes_the_targets_vocabulary(mini_factory):
    pair = speculative_costs.load_pair(f"{mini_factory}:make", "tiny", device="cpu", dtype=torch.float32)
    assert pair.vocab_size == 2048 and pair.draft.config.vocab_size == 2048
    assert pair.draft_note and "2048" in pair.draft_note and "1024" in pair.draft_note


def test_a_factory_draft_with_another_vocabulary_is_refused(mini_factory):
    with pytest.raises(InvalidInput, match=r"--draft.*share the target's vocabulary"):
        speculative_costs.load_pair(
            f"{mini_factory}:make", f"{mini_factory}:make_1024", device="cpu", dtype=torch.float32
        )


def test_unknown_models_and_models_without_a_cache_are_refused():
    with pytest.raises(InvalidInput, match="--target"):
        speculative_costs.load_pair("nope", "tiny", device="cpu", dtype=torch.float32)
    with pytest.raises(InvalidInput, match=r"--draft.*KV cache"):
        speculative_costs.load_pair("tiny", "hf:gpt2", device="cpu", dtype=torch.float32)


def test_one_verification_forward_gives_every_prefix_distribution():
    model = models.build_builtin("llama-tiny")
    prompt = models.random_tokens(1, 6, model.config.vocab_size, seed=4)
    drafts = (5, 17, 3)
    batched = speculative_costs._NextToken(model, prompt, 4)
    batched.lookahead = drafts
    batched(())
    assert batched.forwards == 1 and set(batched.memo) == {(), (5,), (5, 17), drafts}
    for i in range(len(drafts) + 1):
        single = speculative_costs._NextToken(model, prompt, 4)
        np.testing.assert_allclose(batched.memo[drafts[:i]], single(drafts[:i]), rtol=1e-4, atol=1e-9)


def test_identical_models_accept_every_draft():
    pair = speculative_costs.load_pair("tiny", "tiny", device="cpu", dtype=torch.float32)
    sim = speculative_costs.simulate_acceptance(
        pair, context=6, k=3, device="cpu", prompts=2, rounds=4, seed=0
    )
    assert sim.accepted_per_position == (4, 4, 4) and sim.alphas == (1.0, 1.0, 1.0)
    assert sim.mean_tokens == 4.0 and sim.mean_overlap == pytest.approx(1.0)
    assert "plumbing" in sim.note


def test_different_models_accept_some_drafts():
    pair = speculative_costs.load_pair("tiny", "llama-tiny", device="cpu", dtype=torch.float32)
    sim = speculative_costs.simulate_acceptance(
        pair, context=6, k=3, device="cpu", prompts=2, rounds=12, seed=1
    )
    acc = sim.accepted_per_position
    assert list(acc) == sorted(acc, reverse=True) and acc[0] <= 12
    assert 0.0 < sim.mean_overlap < 1.0
    assert 1.0 <= sim.mean_tokens <= 4.0
    assert math.isclose(sim.mean_tokens, 1 + sum(acc) / 12)
