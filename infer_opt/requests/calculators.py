"""The requests of the calculators (amdahl, buckets, attention):
:mod:`infer_opt.requests`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infer_opt.requests import (
    Bounds,
    Choice,
    Count,
    Duration,
    Each,
    Flag,
    Lengths,
    Number,
    PartSpec,
    Request,
    option,
)


@dataclass(frozen=True)
class AmdahlRequest(Request):
    """``infer-opt amdahl``: one part (``fraction``, ``speedup``) or several, added overhead, a
    target to solve for."""

    fraction: float | None = option(None, Number(0, 1), positional=True)
    speedup: float | None = option(None, Number(1e-9, allow_inf=True), positional=True)
    part: tuple[Any, ...] | None = option(None, Each(PartSpec()))
    added: float = option(0.0, Number(0))
    target_speedup: float | None = option(None, Number(0, low_open=True))


@dataclass(frozen=True)
class BucketsRequest(Request):
    """``infer-opt buckets``: padding waste of a length sample under ``bounds``, or the
    ``optimize`` bounds with the least."""

    file: Any = option(check=Lengths(), positional=True)
    bounds: tuple[int, ...] | None = option(None, Bounds(), positional=True)
    batch_size: int = option(1, Count(1, 1 << 20))
    allow_unbucketed: bool = option(False, Flag())
    optimize: int | None = option(None, Count(1))
    cost: str = option("linear", Choice(("linear", "quadratic")))
    compile_cost: float | None = option(None, Duration("s"))
    token_cost: float | None = option(None, Duration("us"))
    requests: int | None = option(None, Count(1))


@dataclass(frozen=True)
class AttentionMemoryRequest(Request):
    """``infer-opt attention memory``: score-matrix memory, HBM traffic and FLOPs of attention."""

    tq: int = option(check=Count(1, 1 << 30))
    tk: int = option(check=Count(1, 1 << 30))
    heads: int = option(check=Count(1, 1 << 30))
    head_dim: int = option(check=Count(1, 1 << 30))
    batch: int = option(1, Count(1, 1 << 30))
    dtype: str = option("float16")
    causal: bool = option(False, Flag())


@dataclass(frozen=True)
class AttentionWindowRequest(Request):
    """``infer-opt attention window``: the output error bound ``2·δ·M`` of dropping keys."""

    dropped_mass: float = option(check=Number(0, 1, high_open=True), positional=True)
    value_norm: float = option(check=Number(0), positional=True)


@dataclass(frozen=True)
class AttentionCheckRequest(Request):
    """``infer-opt attention check``: the attention kernels' exactness over the masks."""

    tq: int = option(4, Count(1, 8192))
    tk: int = option(128, Count(1, 8192))
    heads: int = option(4, Count(1, 128))
    head_dim: int = option(32, Count(1, 1024))
    block_size: int = option(32, Count(1, 8192))
    window: int = option(48, Count(1, 8192))
    seed: int = option(0, Count(0))
    dtype: str = option("float32", Choice(("float32", "float64")))
