from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.cost_models.attention import attention_memory, dtype_size, visible_pairs, window_bound
from infer_opt.errors import InvalidInput

MIB = 2**20
GIB = 2**30


def test_score_matrix_worked_example():
    r = attention_memory(tq=8192, tk=8192, heads=32, batch=1, head_dim=128, dtype="float16")
    assert r.score_elements == 67_108_864
    assert r.score_bytes_per_head == 128 * MIB
    assert r.score_bytes_total == 4 * GIB


def test_traffic_explicit_vs_tiled():
    b, h, tq, tk, d, size = 2, 4, 100, 300, 64, 4
    r = attention_memory(tq=tq, tk=tk, heads=h, batch=b, head_dim=d, dtype="float32")
    qkvo = b * h * (tq * d + tk * d + tk * d + tq * d) * size
    scores = b * h * tq * tk * size
    assert r.traffic_tiled_bytes == qkvo
    # write S, read S, write P, read P
    assert r.traffic_explicit_bytes == qkvo + 4 * scores
    assert r.traffic_ratio == pytest.approx((qkvo + 4 * scores) / qkvo)
    assert sum(t.explicit_bytes for t in r.traffic) == r.traffic_explicit_bytes
    assert [t.name for t in r.traffic if t.tiled_bytes is None] == [
        "write S (scores)",
        "read S",
        "write P (probabilities)",
        "read P",
    ]


def test_flops_are_the_same_for_both_paths():
    r = attention_memory(tq=8192, tk=8192, heads=32, batch=1, head_dim=128)
    assert r.flops == 4 * 32 * 8192 * 8192 * 128
    assert r.intensity_explicit == pytest.approx(r.flops / r.traffic_explicit_bytes)
    assert r.intensity_tiled == pytest.approx(r.flops / r.traffic_tiled_bytes)


def _visible_by_loop(tq: int, tk: int) -> int:
    offset = tk - tq
    return sum(1 for i in range(tq) for j in range(tk) if j <= i + offset)


@pytest.mark.parametrize(("tq", "tk"), [(1, 1), (3, 5), (5, 5), (1, 9), (8, 8)])
def test_causal_visible_pairs_match_the_mask(tq, tk):
    assert visible_pairs(tq, tk, causal=True) == _visible_by_loop(tq, tk)
    assert visible_pairs(tq, tk, causal=False) == tq * tk


def test_causal_roughly_halves_flops_but_not_the_materialised_matrix():
    full = attention_memory(tq=8192, tk=8192, heads=32, batch=1, head_dim=128)
    causal = attention_memory(tq=8192, tk=8192, heads=32, batch=1, head_dim=128, causal=True)
    assert causal.flops == 4 * 32 * 128 * (8192 * 8193 // 2)
    assert causal.flops / full.flops == pytest.approx(0.5, abs=1e-3)
    assert causal.score_bytes_total == full.score_bytes_total
    assert causal.traffic_explicit_bytes == full.traffic_explicit_bytes


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("float32", 4),
        ("fp16", 2),
        ("bfloat16", 2),
        ("bf16", 2),
        ("float64", 8),
        ("fp8", 1),
        ("torch.half", 2),
        ("1.5", 1.5),
    ],
)
def test_dtype_sizes(name, size):
    assert dtype_size(name)[1] == size


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dtype": "int3"}, "dtype"),
        ({"dtype": "0"}, "dtype"),
        ({"tq": 0}, "tq"),
        ({"heads": 2.5}, "heads"),
        ({"tq": 10, "tk": 5, "causal": True}, "tq"),
    ],
)
def test_memory_rejects_bad_input(kwargs, match):
    args = {"tq": 8, "tk": 8, "heads": 2, "batch": 1, "head_dim": 4, **kwargs}
    with pytest.raises(InvalidInput, match=match):
        attention_memory(**args)


def test_window_bound_formula():
    r = window_bound(0.01, 4.0)
    assert r.bound == pytest.approx(0.08)
    assert r.relative_bound == pytest.approx(0.02)
    assert window_bound(0.0, 5.0).bound == 0.0


@pytest.mark.parametrize(
    ("delta", "norm", "match"), [(1.0, 1.0, "dropped"), (-0.1, 1.0, "dropped"), (0.5, -1.0, "value")]
)
def test_window_bound_rejects(delta, norm, match):
    with pytest.raises(InvalidInput, match=match):
        window_bound(delta, norm)


@given(st.integers(min_value=0, max_value=2**32 - 1), st.integers(min_value=2, max_value=24))
def test_window_bound_holds_for_random_attention(seed, n_keys):
    rng = np.random.default_rng(seed)
    scores = rng.normal(scale=3.0, size=n_keys)
    values = rng.normal(size=(n_keys, 5))
    m = float(np.linalg.norm(values, axis=1).max())
    weights = np.exp(scores - scores.max())
    weights /= weights.sum()
    keep = rng.random(n_keys) < 0.6
    keep[rng.integers(n_keys)] = True
    delta = float(weights[~keep].sum())
    exact = weights @ values
    kept = weights * keep
    truncated = (kept / kept.sum()) @ values
    error = float(np.linalg.norm(exact - truncated))
    assert error <= window_bound(min(delta, 1 - 1e-12), m).bound + 1e-12
