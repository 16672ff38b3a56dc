"""Attention memory and HBM traffic: explicit (materialised scores) vs tiled, and the
sliding-window truncation bound.

* Explicit attention materialises a ``T_q × T_k`` score matrix S and probability matrix P
  per (batch, head). Check: T_q = T_k = 8192 -> 67,108,864 elements; 2 bytes -> 128 MiB
  per head; 32 heads -> 4 GiB.
* HBM traffic, explicit: write S, read S, write P, read P, plus read Q, K, V and write O;
  tiled (FlashAttention-style): Q, K, V, O only. FLOPs are the same for both:
  ``4·B·H·T_q·T_k·d`` (QKᵀ and PV, a multiply-add counted as 2).
* Window bound: dropped attention mass δ < 1 and value norms ≤ M give ``‖o - o'‖ ≤ 2·δ·M``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from infer_opt.errors import InvalidInput
from infer_opt.results.attention import AttentionMemoryResult, TrafficItem, WindowBoundResult

if TYPE_CHECKING:
    from infer_opt.requests import AttentionMemoryRequest, AttentionWindowRequest

#: element sizes in bytes of the dtypes the CLI knows by name
DTYPE_BYTES: dict[str, float] = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "fp8": 1}

#: other spellings of those dtypes
DTYPE_ALIASES: dict[str, str] = {
    "fp64": "float64",
    "double": "float64",
    "fp32": "float32",
    "float": "float32",
    "fp16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "float8": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
}


def _positive_int(option: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(option, value, "must be an integer >= 1")
    return value


#: element sizes a dtype may have: one bit (packed) to a 64-byte vector
MIN_ELEMENT_BYTES, MAX_ELEMENT_BYTES = 0.125, 64.0


def dtype_size(dtype: str) -> tuple[str, float]:
    """``(name, bytes per element)`` for a dtype name or a plain byte count (``"2"``)."""
    key = str(dtype).strip().lower().removeprefix("torch.")
    key = DTYPE_ALIASES.get(key, key)
    if key in DTYPE_BYTES:
        return key, float(DTYPE_BYTES[key])
    try:
        size = float(key)
    except ValueError:
        names = "float32, float16, bfloat16, float64, fp8"
        raise InvalidInput("dtype", dtype, f"expected one of {names}, or bytes per element") from None
    if not (math.isfinite(size) and MIN_ELEMENT_BYTES <= size <= MAX_ELEMENT_BYTES):
        raise InvalidInput(
            "dtype", dtype, f"bytes per element must be in [{MIN_ELEMENT_BYTES:g}, {MAX_ELEMENT_BYTES:g}]"
        )
    return f"{size:g} B", size


def visible_pairs(tq: int, tk: int, causal: bool) -> int:
    """(query, key) pairs a kernel must score. Causal: queries are the last ``T_q`` positions
    of the ``T_k`` keys (as with a KV cache), so query i (0-based) sees ``T_k - T_q + i + 1``
    keys: ``T_q·T_k - T_q(T_q - 1)/2`` (≈ half when T_q = T_k)."""
    if not causal:
        return tq * tk
    return tq * tk - tq * (tq - 1) // 2


def attention_memory(
    tq: int,
    tk: int,
    heads: int,
    batch: int,
    head_dim: int,
    dtype: str = "float16",
    causal: bool = False,
) -> AttentionMemoryResult:
    """Score-matrix memory, HBM traffic of the explicit and tiled paths, and FLOPs.

    The explicit path materialises the full ``T_q × T_k`` matrices even when causal; the
    tiled traffic is the ideal of reading Q, K, V once and writing O once."""
    tq = _positive_int("tq", tq)
    tk = _positive_int("tk", tk)
    heads = _positive_int("heads", heads)
    batch = _positive_int("batch", batch)
    head_dim = _positive_int("head_dim", head_dim)
    name, size = dtype_size(dtype)
    if causal and tq > tk:
        raise InvalidInput(
            "tq", tq, f"with --causal T_q must be <= T_k = {tk} (queries are the last T_q key positions)"
        )
    bh = batch * heads
    elements = tq * tk
    per_head = elements * size
    matrix_all = bh * per_head
    q_bytes = bh * tq * head_dim * size
    kv_bytes = bh * tk * head_dim * size
    traffic = (
        TrafficItem("write S (scores)", matrix_all, None),
        TrafficItem("read S", matrix_all, None),
        TrafficItem("write P (probabilities)", matrix_all, None),
        TrafficItem("read P", matrix_all, None),
        TrafficItem("read Q", q_bytes, q_bytes),
        TrafficItem("read K", kv_bytes, kv_bytes),
        TrafficItem("read V", kv_bytes, kv_bytes),
        TrafficItem("write O", q_bytes, q_bytes),
    )
    explicit = math.fsum(t.explicit_bytes for t in traffic)
    tiled = math.fsum(t.tiled_bytes or 0.0 for t in traffic)
    pairs = visible_pairs(tq, tk, causal)
    flops = 4.0 * bh * pairs * head_dim
    return AttentionMemoryResult(
        tq=tq,
        tk=tk,
        heads=heads,
        batch=batch,
        head_dim=head_dim,
        dtype=name,
        dtype_bytes=size,
        causal=causal,
        score_elements=elements,
        score_bytes_per_head=per_head,
        score_bytes_total=matrix_all,
        traffic=traffic,
        traffic_explicit_bytes=explicit,
        traffic_tiled_bytes=tiled,
        traffic_ratio=explicit / tiled,
        visible_pairs=pairs,
        flops=flops,
        intensity_explicit=flops / explicit,
        intensity_tiled=flops / tiled,
    )


def window_bound(dropped_mass: float, value_norm: float) -> WindowBoundResult:
    """Output error bound of dropping keys outside a window: ``‖o - o'‖ ≤ 2·δ·M``, where δ is
    the softmax mass of the dropped keys (δ < 1) and M bounds every value vector's norm.

    Why 2: o' renormalises the kept weights, so o - o' = (dropped part of o) - δ·o'; each
    term has norm ≤ δ·M."""
    if not (isinstance(dropped_mass, (int, float)) and math.isfinite(dropped_mass)) or not (
        0.0 <= dropped_mass < 1.0
    ):
        raise InvalidInput("dropped_mass", dropped_mass, "dropped mass δ must be in [0, 1)")
    if not (isinstance(value_norm, (int, float)) and math.isfinite(value_norm)) or value_norm < 0:
        raise InvalidInput("value_norm", value_norm, "value norm bound M must be a finite number >= 0")
    bound = 2.0 * dropped_mass * value_norm
    if not math.isfinite(bound):
        raise InvalidInput("value_norm", value_norm, "too large: the bound 2·δ·M overflows a float")
    return WindowBoundResult(
        dropped_mass=float(dropped_mass),
        value_norm=float(value_norm),
        bound=bound,
        relative_bound=2.0 * dropped_mass,
    )


def run_memory(request: AttentionMemoryRequest) -> AttentionMemoryResult:
    """``infer-opt attention memory``: :func:`attention_memory` of the request."""
    return attention_memory(**{f: getattr(request, f) for f in request.__dataclass_fields__})


def run_window(request: AttentionWindowRequest) -> WindowBoundResult:
    """``infer-opt attention window``: :func:`window_bound` of the request."""
    return window_bound(request.dropped_mass, request.value_norm)
