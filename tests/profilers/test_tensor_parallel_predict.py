"""The tensor-parallel step prediction's pieces: one rank's compute-only ops, the collectives
priced with a comm fit, and the roofline's sum over the ops."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from infer_opt.cost_models.comm import predict_time
from infer_opt.cost_models.roofline import predict_time as roofline_time
from infer_opt.errors import InvalidInput
from infer_opt.profilers import tensor_parallel_predict
from tests.reports.fixtures import fixture


def _shard(mode: str = "prefill"):
    loaded = tensor_parallel_predict.compute_shard(
        "tiny", tp=2, batch=1, seq_len=16, device="cpu", dtype=torch.float32
    )
    step = tensor_parallel_predict.shard_step(loaded, mode=mode, context=16, new_tokens=1, device="cpu")
    return loaded, step


def test_a_compute_only_shard_runs_one_ranks_ops_and_no_collective():
    loaded, step = _shard()
    calls = tensor_parallel_predict.rank_ops(loaded, step)
    assert not [c for c in calls if c.category == "communication"]
    counted = sum(c.flops for c in calls)
    assert counted == pytest.approx(loaded.config.forward_flops(1, 16), rel=0.05)  # one rank's share


def test_the_step_is_the_ranks_compute_plus_its_all_reduces_priced_by_the_fit():
    loaded, _ = _shard()
    comm = fixture("comm")  # 2 ranks, all_reduce α ≈ 152 µs, β ≈ 1.19 GB/s
    pred = tensor_parallel_predict.predict_tp(
        loaded.config, tp=2, mode="prefill", batch=1, seq_len=16, new_tokens=1, dtype_bytes=4,
        compute_per_rank_s=[1e-3, 1.2e-3], comm=comm, baseline_step_s=4e-3,
    )  # fmt: skip
    reduce = comm.collective("all_reduce")
    each = predict_time(reduce.alpha_s, reduce.beta_bytes_per_s, 16 * 128 * 4)
    assert pred.communication_s == pytest.approx(2 * 2 * each)  # 2 layers × 2 all_reduces
    assert pred.step_s == pytest.approx(1.2e-3 + 4 * each)
    assert pred.speedup == pytest.approx(4e-3 / pred.step_s)


def test_a_fit_from_another_world_size_is_refused():
    loaded, _ = _shard()
    comm = dataclasses.replace(fixture("comm"), world_size=4)
    with pytest.raises(InvalidInput, match="4 ranks"):
        tensor_parallel_predict.predict_tp(
            loaded.config, tp=2, mode="decode", batch=1, seq_len=16, new_tokens=1, dtype_bytes=4,
            compute_per_rank_s=[1e-3, 1e-3], comm=comm,
        )  # fmt: skip


def test_roofline_compute_is_the_sum_of_the_ops_predictions():
    loaded, step = _shard("decode")
    calls = tensor_parallel_predict.rank_ops(loaded, step)
    fit = fixture("roofline")
    assert tensor_parallel_predict.roofline_compute_s(calls, fit) == pytest.approx(
        sum(roofline_time(fit, c.flops, c.bytes) for c in calls)
    )
    assert tensor_parallel_predict.measured_compute_s(step, device="cpu", warmup=1, reps=3) > 0
