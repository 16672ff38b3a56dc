"""The ``attention-memory`` and ``attention-window`` kinds: attention's memory and HBM traffic,
and the window bound."""

from __future__ import annotations

from dataclasses import dataclass

from infer_opt.results import Result


@dataclass(frozen=True)
class TrafficItem:
    """One tensor's trip to or from HBM."""

    name: str
    explicit_bytes: float
    #: None: the tiled path never moves it (it stays on chip)
    tiled_bytes: float | None


@dataclass(frozen=True)
class AttentionMemoryResult(Result):
    KIND = "attention-memory"

    tq: int
    tk: int
    heads: int
    batch: int
    head_dim: int
    dtype: str
    dtype_bytes: float
    causal: bool
    #: elements of one score matrix (one batch element, one head): T_q·T_k
    score_elements: int
    score_bytes_per_head: float
    #: all batch elements and heads: B·H·T_q·T_k·bytes
    score_bytes_total: float
    traffic: tuple[TrafficItem, ...]
    traffic_explicit_bytes: float
    traffic_tiled_bytes: float
    #: explicit / tiled traffic
    traffic_ratio: float
    #: (query, key) pairs whose score is used, per (batch, head)
    visible_pairs: int
    #: 4·B·H·visible_pairs·d (QKᵀ and PV; softmax not included)
    flops: float
    intensity_explicit: float
    intensity_tiled: float


@dataclass(frozen=True)
class WindowBoundResult(Result):
    KIND = "attention-window"

    dropped_mass: float
    value_norm: float
    #: 2·δ·M
    bound: float
    #: 2·δ: the bound as a fraction of M
    relative_bound: float
