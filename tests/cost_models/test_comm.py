"""The α-β model: bus-bandwidth factors, the slowest-rank rule, the robust fit, and the
tensor-parallel step prediction (SPEC §5.2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.cost_models.comm import (
    COLLECTIVES,
    CollectiveCall,
    algbw,
    bus_factor,
    busbw,
    comm_point,
    fit_alpha_beta,
    predict_time,
    predict_tp_step,
    skew,
    straggler,
    sweep,
    tp_collectives,
)
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results.comm import CommResult

ALPHA, BETA = 40e-6, 5e9
SIZES = [4 * 4**k for k in range(12)]  # 4 B .. 16 MiB


def synthetic_times(
    noise: float = 0.0, seed: int = 0, alpha: float = ALPHA, beta: float = BETA
) -> list[float]:
    rng = np.random.default_rng(seed)
    return [(alpha + s / beta) * (math.exp(rng.normal(0.0, noise)) if noise else 1.0) for s in SIZES]


def test_bus_factors_are_nccl_tests_factors():
    assert bus_factor("all_reduce", 2) == 1.0
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
    for name in ("all_gather", "reduce_scatter", "all_to_all"):
        assert bus_factor(name, 4) == pytest.approx(0.75)
    for name in ("broadcast", "reduce", "send_recv"):
        assert bus_factor(name, 8) == 1.0
    assert set(COLLECTIVES) <= {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "broadcast",
        "all_to_all",
        "send_recv",
    }


def test_bandwidths_of_a_worked_example():
    # 1 MiB in 100 µs over 8 ranks
    assert algbw(2**20, 100e-6) == pytest.approx(10.48576e9)
    assert busbw("all_reduce", 2**20, 100e-6, 8) == pytest.approx(10.48576e9 * 1.75)
    assert busbw("all_gather", 2**20, 100e-6, 8) == pytest.approx(10.48576e9 * 7 / 8)


def test_rejects_unknown_collective_and_bad_world_size():
    with pytest.raises(InvalidInput, match="collective"):
        bus_factor("gossip", 2)
    with pytest.raises(InvalidInput, match="world_size"):
        bus_factor("all_reduce", 0)
    with pytest.raises(InvalidInput, match="time_s"):
        algbw(4, 0.0)


def test_point_time_is_the_slowest_ranks_median():
    fast = [1e-3, 1.1e-3, 1.2e-3, 0.9e-3, 1e-3]
    slow = [2e-3, 2.2e-3, 1.8e-3, 2e-3, 2.4e-3]
    point = comm_point("all_reduce", 1024, [fast, slow])
    assert point.time_s == pytest.approx(2e-3)
    assert point.slowest_rank == 1
    assert point.rank_median_s == pytest.approx((1e-3, 2e-3))
    assert (point.q1_s, point.q3_s) == pytest.approx((2e-3, 2.2e-3))
    assert point.algbw_bytes_per_s == pytest.approx(1024 / 2e-3)
    assert point.busbw_bytes_per_s == pytest.approx(1024 / 2e-3)  # factor 2(n-1)/n = 1 at n = 2
    assert point.reps == 5


def test_point_needs_samples_from_every_rank():
    with pytest.raises(InvalidInput):
        comm_point("all_reduce", 8, [[1e-3], []])


def test_exact_data_recovers_alpha_and_beta():
    fit = fit_alpha_beta(SIZES, synthetic_times(), bootstrap=0)
    assert fit.alpha_s == pytest.approx(ALPHA, rel=1e-5)
    assert fit.beta_bytes_per_s == pytest.approx(BETA, rel=1e-5)
    assert fit.crossover_bytes == pytest.approx(ALPHA * BETA, rel=1e-5)  # 200 kB
    assert fit.median_abs_rel_error < 1e-6
    assert fit.parameters_at_bound == ()


def test_noise_and_an_outlier_still_recover_parameters_with_intervals():
    times = synthetic_times(noise=0.05, seed=2)
    times[5] *= 4.0  # one size hit by a hiccup
    fit = fit_alpha_beta(SIZES, times, bootstrap=200, seed=1)
    assert fit.alpha_s == pytest.approx(ALPHA, rel=0.15)
    assert fit.beta_bytes_per_s == pytest.approx(BETA, rel=0.15)
    assert fit.alpha_interval is not None and fit.beta_interval is not None
    assert fit.alpha_interval[0] <= fit.alpha_s <= fit.alpha_interval[1]
    assert fit.beta_interval[0] <= fit.beta_bytes_per_s <= fit.beta_interval[1]
    assert fit.bootstrap >= 10
    again = fit_alpha_beta(SIZES, times, bootstrap=200, seed=1)
    assert again.alpha_interval == fit.alpha_interval  # same seed, same intervals


def test_latency_only_sizes_leave_beta_unpinned():
    sizes = [4, 8, 16, 32]
    fit = fit_alpha_beta(sizes, [ALPHA] * 4, bootstrap=0)
    # β runs to the top of its range (100× the best S/t), which still leaves S/β ≈ 1% of α
    assert fit.alpha_s == pytest.approx(ALPHA, rel=0.02)
    assert "beta" in fit.parameters_at_bound


def test_fit_rejects_too_few_or_invalid_points():
    with pytest.raises(InvalidInput, match="sizes"):
        fit_alpha_beta([4, 8], [1e-5, 2e-5])
    with pytest.raises(InvalidInput, match="sizes"):
        fit_alpha_beta([0, 8, 16], [1e-5, 2e-5, 3e-5])
    with pytest.raises(InvalidInput, match="times_s"):
        fit_alpha_beta([4, 8, 16], [1e-5, -2e-5, 3e-5])
    with pytest.raises(InvalidInput, match="times_s"):
        fit_alpha_beta([4, 8, 16], [1e-5, 2e-5])


@given(
    alpha=st.floats(1e-6, 1e-3),
    beta=st.floats(1e8, 1e11),
)
def test_fit_recovers_any_alpha_beta_when_sizes_span_the_crossover(alpha, beta):
    crossover = alpha * beta
    sizes = list(np.geomspace(crossover / 100, crossover * 100, 9))
    times = [predict_time(alpha, beta, s) for s in sizes]
    fit = fit_alpha_beta(sizes, times, bootstrap=0)
    assert fit.alpha_s == pytest.approx(alpha, rel=1e-3)
    assert fit.beta_bytes_per_s == pytest.approx(beta, rel=1e-3)


@given(
    collective=st.sampled_from(COLLECTIVES),
    world=st.integers(1, 1024),
    n_bytes=st.integers(1, 2**36),
    time_s=st.floats(1e-7, 10.0),
)
def test_busbw_is_between_zero_and_twice_algbw(collective, world, n_bytes, time_s):
    bus = busbw(collective, n_bytes, time_s, world)
    assert 0.0 <= bus <= 2.0 * algbw(n_bytes, time_s)


def test_sweep_fits_with_three_sizes_or_more_only():
    points = [
        comm_point("broadcast", s, [[t], [t * 0.9]]) for s, t in zip(SIZES, synthetic_times(), strict=True)
    ]
    full = sweep("broadcast", 2, points, bootstrap=0)
    assert full.alpha_s == pytest.approx(ALPHA, rel=1e-5)
    assert full.predict_s(1e6) == pytest.approx(ALPHA + 1e6 / BETA, rel=1e-5)
    short = sweep("broadcast", 2, points[:2])
    assert short.alpha_s is None and short.predict_s(1e6) is None


def test_comm_result_round_trips_through_json():
    points = [comm_point("all_reduce", s, [[t], [t]]) for s, t in zip(SIZES, synthetic_times(), strict=True)]
    result = CommResult(
        world_size=2,
        backend="gloo",
        device="cpu",
        device_name="test cpu",
        dtype="float32",
        collectives=(sweep("all_reduce", 2, points, bootstrap=20),),
        warnings=(Notice("comm_partial", {"done": 3}),),
    )
    data = result.to_dict()
    assert {"world_size", "backend", "collectives"} <= set(data)
    entry = data["collectives"][0]
    assert {"collective", "points", "alpha_s", "beta_bytes_per_s"} <= set(entry)
    assert {"bytes", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s"} <= set(entry["points"][0])
    assert CommResult.from_dict(data) == result


# ---------------------------------------------------------------------------- tensor parallelism


def test_megatron_issues_two_all_reduces_per_layer():
    # gpt2-small prefill, B = 1, T = 128, float32, 2 ranks: 24 all_reduces of 128·768·4 bytes
    calls = tp_collectives(n_layers=12, d_model=768, batch=1, q_len=128, dtype_bytes=4, tp=2)
    assert calls == (CollectiveCall("all_reduce", 393_216, 24),)
    decode = tp_collectives(n_layers=12, d_model=768, batch=8, q_len=1, dtype_bytes=2, tp=4)
    assert decode == (CollectiveCall("all_reduce", 8 * 768 * 2, 24),)
    assert tp_collectives(n_layers=12, d_model=768, batch=1, q_len=128, dtype_bytes=4, tp=1) == ()
    with pytest.raises(InvalidInput, match="tp"):
        tp_collectives(n_layers=12, d_model=768, batch=1, q_len=128, dtype_bytes=4, tp=0)


def test_tp_step_is_slowest_compute_plus_collectives():
    calls = [CollectiveCall("all_reduce", 1_000_000, 24)]
    pred = predict_tp_step([10e-3, 12e-3], calls, {"all_reduce": (50e-6, 1e9)}, baseline_step_s=20e-3)
    each = 50e-6 + 1e-3
    assert pred.collectives[0].time_each_s == pytest.approx(each)
    assert pred.communication_s == pytest.approx(24 * each)
    assert pred.compute_s == pytest.approx(12e-3)
    assert pred.straggler_rank == 1
    assert pred.step_s == pytest.approx(12e-3 + 24 * each)
    assert pred.speedup == pytest.approx(20e-3 / (12e-3 + 24 * each))
    overlapped = predict_tp_step([10e-3, 12e-3], calls, {"all_reduce": (50e-6, 1e9)}, overlap_s=5e-3)
    assert overlapped.step_s == pytest.approx(12e-3 + 24 * each - 5e-3)


def test_tp_step_needs_a_fit_for_every_collective_it_issues():
    with pytest.raises(InvalidInput, match="all_reduce"):
        predict_tp_step([1e-3], [CollectiveCall("all_reduce", 8, 1)], {})
    with pytest.raises(InvalidInput, match="compute_per_rank_s"):
        predict_tp_step([], [], {})


@given(
    compute=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8),
    count=st.integers(0, 100),
    overlap=st.floats(0.0, 1.0),
)
def test_tp_step_never_beats_the_slowest_ranks_compute(compute, count, overlap):
    calls = [CollectiveCall("all_reduce", 4096, count)]
    pred = predict_tp_step(compute, calls, {"all_reduce": (1e-5, 1e9)}, overlap_s=overlap)
    assert pred.step_s >= max(compute)
    assert pred.step_s <= max(compute) + pred.communication_s + 1e-15


def test_skew_and_straggler():
    assert skew([1.0, 1.0, 2.0]) == pytest.approx(2.0)
    assert skew([3e-3, 3e-3]) == 1.0
    assert straggler([1.0, 3.0, 3.0, 2.0]) == 1
    with pytest.raises(InvalidInput):
        skew([])
    with pytest.raises(InvalidInput):
        skew([1.0, 0.0])
