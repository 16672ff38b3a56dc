"""Megatron sharding of the built-ins: which shapes split, per-rank FLOP counts, and the
collectives a sharded step issues (the exactness at N = 2 is in test_distributed.py)."""

from __future__ import annotations

import pytest
import torch

from infer_opt.cost_models.comm import tp_collectives
from infer_opt.errors import InvalidInput
from infer_opt.profilers import distributed, models, op_recorder
from infer_opt.profilers.profile_tp import collective_name, collectives_seen
from infer_opt.profilers.tensor_parallel import ShardedConfig, check_shardable, shard
from infer_opt.results.profile import OpStat


@pytest.mark.parametrize(
    ("name", "tp", "needle"),
    [
        ("tiny", 3, "4 attention heads"),
        ("llama-small", 3, "4 key/value heads"),
        ("llama-tiny", 4, "2 key/value heads"),
    ],
)
def test_shapes_that_do_not_split_name_the_numbers(name, tp, needle):
    config = models.BUILTIN_CONFIGS[name]
    with pytest.raises(InvalidInput, match="tp") as info:
        check_shardable(config, tp)
    assert needle in str(info.value) and f"over {tp} ranks" in str(info.value)


def test_shapes_that_split_pass():
    for name, tp in (("tiny", 2), ("tiny", 4), ("gpt2-small", 4), ("llama-small", 4), ("llama-tiny", 2)):
        check_shardable(models.BUILTIN_CONFIGS[name], tp)
    with pytest.raises(InvalidInput, match="tp"):
        check_shardable(models.BUILTIN_CONFIGS["tiny"], 0)


def test_sharded_flops_are_one_ranks_share_with_the_lm_head_whole():
    full = models.BUILTIN_CONFIGS["gpt2-small"]
    head = full.d_model * full.vocab_size
    assert ShardedConfig.of(full, 1).forward_flops(1, 128) == full.forward_flops(1, 128)
    half = ShardedConfig.of(full, 2)
    assert half.matmul_params() - head == (full.matmul_params() - head) // 2
    assert half.attention_flops(1, 128, 128) * 2 == full.attention_flops(1, 128, 128)
    assert (half.local_heads, half.local_kv_heads) == (6, 6)


def test_a_sharded_step_issues_two_all_reduces_per_layer(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    with distributed.rank_job("gloo", "cpu", 10) as ctx:
        full = models.build_builtin("tiny")
        sharded = shard(models.build_builtin("tiny"), ctx.rank, 1)
        ids = models.random_tokens(1, 8, full.config.vocab_size)
        with torch.no_grad():
            assert torch.equal(sharded(ids), full(ids))  # one rank: the all_reduces are the identity
        calls = op_recorder.record_ops(lambda: sharded(ids), sharded)
    comm_calls = [c for c in calls if c.category == "communication"]
    reduces = [c for c in comm_calls if collective_name(c.name) == "all_reduce"]
    waits = [c for c in comm_calls if collective_name(c.name) == "wait_tensor"]
    (expected,) = tp_collectives(n_layers=2, d_model=128, batch=1, q_len=8, dtype_bytes=4, tp=2)
    assert len(reduces) == len(waits) == expected.count
    assert all(c.shapes[0] == (1, 8, 128) for c in reduces)
    assert all(c.module.endswith(("o_proj", "down_proj")) for c in reduces)


def _stat(name: str, shape: tuple[int, ...], calls: int, time_s: float) -> OpStat:
    return OpStat(
        name=name,
        shapes=(shape,),
        dtype="float32",
        category="communication",
        calls=calls,
        time_s=time_s,
        time_samples_s=(time_s,),
        share=0.0,
        flops=0.0,
        bytes=0.0,
        flops_source="none",
        module="",
        intensity=None,
        achieved_flops_per_s=0.0,
        achieved_bytes_per_s=0.0,
        predicted_s=time_s,
        bound="communication",
        efficiency=1.0,
    )


def test_waits_are_added_to_the_collective_they_wait_for():
    ops = [
        _stat("_c10d_functional::all_reduce", (1, 8, 128), 4, 1e-4),
        _stat("_c10d_functional::wait_tensor", (1, 8, 128), 4, 3e-4),
        _stat("_c10d_functional::all_reduce", (1, 1, 128), 2, 1e-5),
    ]
    seen = collectives_seen(ops, step_time_s=1e-3)
    assert [(c.collective, c.bytes, c.calls) for c in seen] == [
        ("all_reduce", 4096, 4),
        ("all_reduce", 512, 2),
    ]
    assert seen[0].time_s == pytest.approx(4e-4)
    assert seen[0].share == pytest.approx(0.4)
    assert collective_name("c10d::allreduce_") == "allreduce"
