"""Megatron-style tensor parallelism for the built-in decoders.

:func:`shard` turns a built :class:`~infer_opt.profilers.models.DecoderLM` into rank ``r``'s
shard of an ``N``-way tensor-parallel model by slicing its weights:

* attention: the query, key and value projections are **column-parallel** (rank r keeps
  heads ``r·H/N … (r+1)·H/N − 1`` and key/value heads ``r·H_kv/N …``, so grouped-query
  attention keeps each query head with its key/value head); the output projection is
  **row-parallel** (the matching input columns), followed by an all_reduce, then its bias;
* MLP: the up (and SwiGLU gate) projections column-parallel (``d_ff/N`` rows each), the down
  projection row-parallel, followed by an all_reduce, then its bias;
* embeddings, norms and the LM head are replicated.

So each layer issues two all_reduces of the ``B·T·d`` activations. They run as the
functional collectives ``_c10d_functional.all_reduce`` + ``wait_tensor`` — ops the
dispatcher sees, so the op recorder and ``torch.profiler`` name them and time the wait — on
whatever process group is initialised (gloo on the CPU, NCCL on CUDA). With the same seeded
weights the shards' logits equal the single-device model's up to floating-point rounding
(the partial sums are added in a different order).

The shard's :class:`ShardedConfig` counts one rank's FLOPs (``matmul_params`` and
``attention_flops`` divided by N, the LM head whole), so a profile's analytic FLOPs are the
rank's own.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from infer_opt.errors import InvalidInput
from infer_opt.profilers.models import (
    MLP,
    Attention,
    DecoderLM,
    KVCache,
    TransformerConfig,
)


def check_shardable(config: TransformerConfig, tp: int) -> None:
    """Heads, key/value heads and the MLP width must split evenly over ``tp`` ranks."""
    if not isinstance(tp, int) or isinstance(tp, bool) or tp < 1:
        raise InvalidInput("tp", tp, "must be an integer >= 1")
    for what, value in (
        ("attention heads", config.n_heads),
        ("key/value heads", config.n_kv_heads),
        ("MLP hidden width d_ff", config.d_ff),
    ):
        if value % tp:
            raise InvalidInput(
                "tp",
                tp,
                f"{config.name} has {value} {what}, which do not split over {tp} ranks "
                f"({value} is not a multiple of {tp})",
            )


@dataclass(frozen=True)
class ShardedConfig(TransformerConfig):
    """A built-in's shape as one of ``tp`` tensor-parallel ranks sees it: the full model's
    fields, with FLOP counts per rank."""

    tp: int = 1

    @classmethod
    def of(cls, config: TransformerConfig, tp: int) -> ShardedConfig:
        check_shardable(config, tp)
        values = {f.name: getattr(config, f.name) for f in fields(TransformerConfig)}
        return cls(**values, tp=tp)

    @property
    def local_heads(self) -> int:
        return self.n_heads // self.tp

    @property
    def local_kv_heads(self) -> int:
        return self.n_kv_heads // self.tp

    def matmul_params(self) -> int:
        """One rank's matmul weights: the attention and MLP projections over ``tp``, the LM
        head whole (replicated)."""
        d = self.d_model
        per_layer = super().matmul_params() - d * self.vocab_size
        return per_layer // self.tp + d * self.vocab_size

    def attention_flops(self, batch: int, q_len: int, k_len: int) -> int:
        """One rank's share: ``H/tp`` heads."""
        return super().attention_flops(batch, q_len, k_len) // self.tp


def all_reduce(x: torch.Tensor, group_name: str) -> torch.Tensor:
    """Sum ``x`` over the group: the functional collective and its wait, two dispatcher ops
    (``_c10d_functional.all_reduce``, ``_c10d_functional.wait_tensor``)."""
    reduced = torch.ops._c10d_functional.all_reduce(x, "sum", group_name)
    return torch.ops._c10d_functional.wait_tensor(reduced)


def _rows(weight: torch.Tensor, rank: int, tp: int) -> torch.Tensor:
    size = weight.shape[0] // tp
    return weight[rank * size : (rank + 1) * size].detach().clone()


class ColumnParallelLinear(nn.Linear):
    """Rank ``r``'s slice of a linear layer's output features (rows of its weight)."""

    @classmethod
    def from_linear(cls, full: nn.Linear, rank: int, tp: int) -> ColumnParallelLinear:
        layer = cls(full.in_features, full.out_features // tp, bias=full.bias is not None, device="meta")
        layer.weight = nn.Parameter(_rows(full.weight, rank, tp), requires_grad=False)
        if full.bias is not None:
            layer.bias = nn.Parameter(_rows(full.bias, rank, tp), requires_grad=False)
        return layer


class RowParallelLinear(nn.Module):
    """Rank ``r``'s slice of a linear layer's input features (columns of its weight): the
    partial products are summed over ranks with an all_reduce, then the bias is added. With
    no ``group_name`` the all_reduce is left out (a compute-only shard, whose ops can be
    recorded or timed without a process group; its output is only the partial sum)."""

    def __init__(self, full: nn.Linear, rank: int, tp: int, group_name: str | None) -> None:
        super().__init__()
        size = full.in_features // tp
        self.weight = nn.Parameter(
            full.weight[:, rank * size : (rank + 1) * size].detach().clone(), requires_grad=False
        )
        self.bias = (
            None if full.bias is None else nn.Parameter(full.bias.detach().clone(), requires_grad=False)
        )
        self.group_name = group_name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.linear(x, self.weight)
        if self.group_name is not None:
            out = all_reduce(out, self.group_name)
        return out if self.bias is None else out + self.bias


class ParallelAttention(Attention):
    """One rank's heads of :class:`~infer_opt.profilers.models.Attention`."""

    def __init__(self, full: Attention, config: ShardedConfig, rank: int, group_name: str | None) -> None:
        nn.Module.__init__(self)  # the projections are slices of ``full``'s, not new layers
        self.config = config
        self.heads, self.kv_heads = config.local_heads, config.local_kv_heads
        tp = config.tp
        self.q_proj = ColumnParallelLinear.from_linear(full.q_proj, rank, tp)
        self.k_proj = ColumnParallelLinear.from_linear(full.k_proj, rank, tp)
        self.v_proj = ColumnParallelLinear.from_linear(full.v_proj, rank, tp)
        self.o_proj = RowParallelLinear(full.o_proj, rank, tp, group_name)


class ParallelMLP(nn.Module):
    """One rank's ``d_ff/N`` hidden units of :class:`~infer_opt.profilers.models.MLP`."""

    def __init__(self, full: MLP, config: ShardedConfig, rank: int, group_name: str | None) -> None:
        super().__init__()
        tp = config.tp
        self.swiglu = full.swiglu
        if self.swiglu:
            self.gate_proj = ColumnParallelLinear.from_linear(full.gate_proj, rank, tp)
        self.up_proj = ColumnParallelLinear.from_linear(full.up_proj, rank, tp)
        self.down_proj = RowParallelLinear(full.down_proj, rank, tp, group_name)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.swiglu:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(F.gelu(self.up_proj(x), approximate="tanh"))


class TensorParallelLM(DecoderLM):
    """Rank ``r``'s shard of a :class:`DecoderLM` (module docstring). Same ``forward`` and
    KV-cache interface as the full model; the cache holds this rank's key/value heads."""

    def __init__(self, full: DecoderLM, rank: int, tp: int, group_name: str | None) -> None:
        nn.Module.__init__(self)
        config = ShardedConfig.of(full.config, tp)
        if not 0 <= rank < tp:
            raise InvalidInput("rank", rank, f"must be in 0..{tp - 1}")
        self.config = config
        self.rank = rank
        self.embed = full.embed
        if config.positions == "learned":
            self.pos_embed = full.pos_embed
        else:
            self.register_buffer("rope_cos", full.rope_cos, persistent=False)
            self.register_buffer("rope_sin", full.rope_sin, persistent=False)
        for block in full.blocks:
            block.attn = ParallelAttention(block.attn, config, rank, group_name)
            block.mlp = ParallelMLP(block.mlp, config, rank, group_name)
        self.blocks = full.blocks
        self.final_norm = full.final_norm
        self.lm_head = full.lm_head

    def new_cache(self, batch: int, max_len: int | None = None) -> KVCache:
        c = self.config
        p = self.lm_head.weight
        assert isinstance(c, ShardedConfig)
        return KVCache(
            c.n_layers,
            batch,
            c.local_kv_heads,
            max_len or c.max_seq_len,
            c.head_dim,
            device=p.device,
            dtype=p.dtype,
        )


def shard(
    model: DecoderLM, rank: int, tp: int, group: Any = None, *, communicate: bool = True
) -> TensorParallelLM:
    """Rank ``rank``'s shard of ``model`` over ``tp`` ranks of ``group`` (default: the whole
    job). ``model`` is consumed: its blocks are rebuilt around the slices. With
    ``communicate=False`` the shard issues no collective and needs no process group: the ops one
    rank computes, to record or time alone (its logits are not the model's)."""
    check_shardable(model.config, tp)
    group_name = None
    if communicate:
        import torch.distributed as dist

        group_name = (group if group is not None else dist.group.WORLD).group_name
    return TensorParallelLM(model, rank, tp, group_name).eval()
