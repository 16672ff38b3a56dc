from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.cost_models import capture_sizes as cs
from infer_opt.errors import InvalidInput


def _problem(sizes, counts, times, overhead):
    curve = cs.cost_curve(sizes, times)
    dist = cs.distribution(sizes, counts)
    return cs.problem(dist, curve, eager_overhead_s=overhead, eager=None), curve


def test_worked_check():
    prob, curve = _problem([1, 3], [1, 1], [0.002, 0.004], 0.010)
    table = cs.optimal_lists(prob, 1)
    assert table.capture_list(1) == (3,)
    assert table.best[1] == pytest.approx(0.004)
    assert cs.expected_step(prob, [1], curve) == pytest.approx(0.008)
    assert cs.expected_step(prob, [3], curve) == pytest.approx(0.004)


def test_log_log_interpolation_and_extrapolation_flag():
    curve = cs.cost_curve([1, 4], [1.0, 4.0])
    assert float(curve([2])[0]) == pytest.approx(2.0)  # t ∝ b on a log-log line
    assert float(curve([8])[0]) == pytest.approx(8.0)
    assert curve.extrapolated(np.array([8, 2])).tolist() == [True, False]


def test_decreasing_cost_warns():
    curve = cs.cost_curve([1, 2, 4], [1.0, 0.5, 2.0])
    (notice,) = cs.decreasing_notices(curve)
    assert notice.code == "cost_decreasing" and notice.values["at"] == 2


def test_engine_defaults():
    sizes, label = cs.engine_default("vllm", 512)
    assert sizes[:5] == (1, 2, 4, 8, 16) and sizes[-1] == 512 and 248 in sizes and 264 not in sizes
    assert "set_cudagraph_sizes" in label
    assert cs.engine_default("vllm", 6)[0] == (1, 2, 4)
    assert cs.engine_default("vllm", 100)[0][-1] == 96  # 8-stride below 256, as vLLM cuts it


def test_sglang_default():
    # [1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) + range(512, max + 1, 32)
    sizes, label = cs.engine_default("sglang", None)
    assert sizes[:6] == (1, 2, 4, 8, 12, 16) and sizes[-1] == 160 and len(sizes) == 24
    assert "--engine-max-size" in label
    big = cs.engine_default("sglang", 600)[0]
    assert len(big) == 5 + 31 + 15 + 3 and big[-3:] == (512, 544, 576) and 264 not in big


def test_bad_current_lists():
    with pytest.raises(InvalidInput, match="twice"):
        cs.validate_list([1, 2, 2])
    with pytest.raises(InvalidInput, match="0 is not"):
        cs.validate_list([0, 4])


def _brute(prob, curve, k):
    sizes = prob.dist.sizes.tolist()
    best = cs.expected_step(prob, [], curve)
    for m in range(1, k + 1):
        for combo in itertools.combinations(sizes, m):
            best = min(best, cs.expected_step(prob, combo, curve))
    return best


@st.composite
def cases(draw):
    n = draw(st.integers(1, 7))
    sizes = sorted(draw(st.sets(st.integers(1, 200), min_size=n, max_size=n)))
    counts = draw(st.lists(st.integers(1, 50), min_size=n, max_size=n))
    increments = draw(st.lists(st.floats(0.0, 5.0), min_size=n, max_size=n))
    monotone = draw(st.booleans())
    times = (1.0 + np.cumsum(increments)).tolist() if monotone else [1.0 + x for x in increments]
    k = draw(st.integers(1, n))
    overhead = draw(st.floats(0.0, 10.0))
    return sizes, counts, times, k, overhead


@settings(max_examples=400, deadline=None)
@given(cases())
def test_dp_equals_brute_force(case):
    sizes, counts, times, k, overhead = case
    prob, curve = _problem(sizes, counts, times, overhead)
    table = cs.optimal_lists(prob, k)
    m = cs.best_within(table, k)
    chosen = table.capture_list(m)
    assert len(chosen) == m <= k
    assert cs.expected_step(prob, chosen, curve) == pytest.approx(table.best[m], rel=1e-9, abs=1e-12)
    assert table.best[m] == pytest.approx(_brute(prob, curve, k), rel=1e-9, abs=1e-12)


def _brute_any_size(prob, curve, k):
    """Every list of at most k sizes from 1 to the largest evaluable size (observed or measured)."""
    top = max(int(prob.dist.sizes[-1]), int(curve.sizes[-1]))
    best = cs.expected_step(prob, [], curve)
    for m in range(1, k + 1):
        for combo in itertools.combinations(range(1, top + 1), m):
            best = min(best, cs.expected_step(prob, combo, curve))
    return best


@st.composite
def free_cases(draw):
    """Observed batches and measured sizes drawn apart (so unobserved sizes matter), any costs."""
    observed = sorted(draw(st.sets(st.integers(1, 12), min_size=1, max_size=5)))
    counts = draw(st.lists(st.integers(1, 50), min_size=len(observed), max_size=len(observed)))
    measured = sorted(draw(st.sets(st.integers(1, 14), min_size=1, max_size=5)))
    times = draw(st.lists(st.floats(0.5, 5.0), min_size=len(measured), max_size=len(measured)))
    return observed, counts, measured, times, draw(st.integers(1, 3)), draw(st.floats(0.0, 10.0))


@settings(max_examples=250, deadline=None)
@given(free_cases())
def test_dp_equals_brute_force_over_every_size_for_any_cost_curve(case):
    observed, counts, measured, times, k, overhead = case
    curve = cs.cost_curve(measured, times)
    prob = cs.problem(cs.distribution(observed, counts), curve, eager_overhead_s=overhead, eager=None)
    table = cs.optimal_lists(prob, k)
    m = cs.best_within(table, k)
    chosen = table.capture_list(m)
    assert len(chosen) == m <= k
    value = cs.expected_step(prob, chosen, curve)
    assert value == pytest.approx(_brute_any_size(prob, curve, k), rel=1e-9, abs=1e-12)
    # the unconstrained optimum is a lower bound of every list, and is reached
    free_s, free = cs.unconstrained(prob)
    assert cs.expected_step(prob, free, curve) == pytest.approx(free_s, rel=1e-9)
    assert free_s <= value * (1 + 1e-12)


def test_flat_curve_with_a_cheaper_unobserved_size_is_proposed():
    # observed 1..13, t flat 10 ms but t(16) 5% lower: capturing 16 serves them all cheapest
    curve = cs.cost_curve([1, 2, 4, 8, 16], [0.010, 0.010, 0.010, 0.010, 0.0095])
    prob = cs.problem(cs.distribution(range(1, 14), [1] * 13), curve, eager_overhead_s=0.005, eager=None)
    table = cs.optimal_lists(prob, 64)
    chosen = table.capture_list(cs.best_within(table, 64))
    assert chosen == (16,)
    assert cs.expected_step(prob, chosen, curve) == pytest.approx(0.0095)
    default = cs.engine_default("vllm", 512)[0]
    assert cs.expected_step(prob, chosen, curve) <= cs.expected_step(prob, default, curve)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 6))
def test_hull_layer_equals_dense_layer(seed, m):
    rng = np.random.default_rng(seed)
    d = 60
    p = rng.random(d) + 1e-3
    prefix = np.concatenate(([0.0], np.cumsum(p / p.sum())))
    tj = np.concatenate(([0.0], rng.random(d) + 0.1))
    prev = np.full(d + 1, math.inf)
    prev[m - 1 :] = rng.random(d + 2 - m) * 2
    dense, _ = cs._dense_layer(prev, m, prefix, tj, d)
    hull, parent = cs._hull_layer(prev, m, prefix, tj, d)
    np.testing.assert_allclose(hull[m:], dense[m:], rtol=1e-12)
    j = np.arange(m, d + 1)
    par = np.asarray(parent)[m:]
    np.testing.assert_allclose(prev[par] + (prefix[j] - prefix[par]) * tj[j], hull[m:], rtol=1e-12)


def test_an_unbounded_optimum_beyond_the_marginal_layers(monkeypatch):
    monkeypatch.setattr(cs, "MARGINAL_LAYERS", 2)
    prob, curve = _problem([1, 2, 3, 4, 5], [1] * 5, [1.0, 2.0, 3.0, 4.0, 5.0], 10.0)
    table = cs.optimal_lists(prob, 10)
    assert table.layers == 2
    m = cs.best_within(table, 10)
    assert table.capture_list(m) == (1, 2, 3, 4, 5)  # each batch at its own cost: 3.0 on average
    assert cs.expected_step(prob, table.capture_list(m), curve) == pytest.approx(3.0)
    assert cs.best_within(cs.optimal_lists(prob, 3), 3) == 3  # a binding limit: every layer
