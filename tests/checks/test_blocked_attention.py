"""Blocked (online-softmax) attention equals full softmax attention: numpy float64 and torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.checks.blocked_attention import (
    blocked_attention,
    blocked_attention_torch,
    explicit_attention_torch,
    full_attention,
    key_blocks,
    visibility,
    visibility_torch,
    visible_blocks,
)
from infer_opt.checks.online_softmax import EmptyRowError
from infer_opt.errors import InvalidInput


def _qkv(seed: int, b: int = 2, h: int = 3, tq: int = 5, tk: int = 13, d: int = 8, dv: int = 4):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(b, h, tq, d)),
        rng.normal(size=(b, h, tk, d)),
        rng.normal(size=(b, h, tk, dv)),
    )


def _softmax_reference(q, k, v, vis):
    """Textbook softmax with -inf masking, written independently of the module."""
    z = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    z = np.where(vis, z, -np.inf)
    w = np.exp(z - z.max(axis=-1, keepdims=True))
    return (w / w.sum(axis=-1, keepdims=True)) @ v


def test_full_attention_matches_textbook_softmax():
    q, k, v = _qkv(0)
    vis = np.tril(np.ones((5, 13), dtype=bool), k=8)
    np.testing.assert_allclose(
        full_attention(q, k, v, causal_offset=8), _softmax_reference(q, k, v, vis), atol=1e-13
    )


MASKS = st.sampled_from(["none", "causal", "decode", "window", "padding", "random"])


def _mask_kwargs(kind: str, rng: np.random.Generator, tq: int, tk: int) -> dict:
    if kind == "causal":
        return {"causal_offset": 0}
    if kind == "decode":
        return {"causal_offset": tk - tq}
    if kind == "window":
        return {"causal_offset": tk - tq, "window": int(rng.integers(1, tk + 1))}
    if kind == "padding":
        pad = np.ones((2, 1, tk), dtype=bool)
        pad[1, :, : int(rng.integers(0, tk))] = False
        return {"key_padding": pad}
    if kind == "random":
        m = rng.random((tq, tk)) < 0.6
        m[:, int(rng.integers(0, tk))] = True  # every row sees something
        return {"mask": m}
    return {}


@given(
    seed=st.integers(0, 2**32 - 1),
    block_size=st.integers(1, 20),
    kind=MASKS,
    shuffle=st.booleans(),
)
def test_blocked_equals_full_for_any_block_size_order_and_mask(seed, block_size, kind, shuffle):
    rng = np.random.default_rng(seed)
    tq, tk = int(rng.integers(1, 6)), int(rng.integers(6, 18))
    q, k, v = _qkv(seed, tq=tq, tk=tk)
    kw = _mask_kwargs(kind, rng, tq, tk)
    n_blocks = len(key_blocks(tk, block_size))
    order = rng.permutation(n_blocks).tolist() if shuffle else None
    got = blocked_attention(q, k, v, block_size=block_size, block_order=order, **kw)
    np.testing.assert_allclose(got, full_attention(q, k, v, **kw), rtol=1e-12, atol=1e-12)


def test_results_do_not_depend_on_block_size():
    q, k, v = _qkv(3, tq=7, tk=40)
    outs = [blocked_attention(q, k, v, block_size=bs, causal_offset=33) for bs in (1, 3, 8, 16, 40, 1000)]
    for out in outs[1:]:
        np.testing.assert_allclose(out, outs[0], rtol=1e-12, atol=1e-13)


def test_causal_prefill_skips_blocks_no_query_sees():
    vis = visibility(4, 64, causal_offset=0)
    assert visible_blocks(vis, 64, 16) == [True, False, False, False]
    win = visibility(2, 64, causal_offset=62, window=10)
    assert visible_blocks(win, 64, 16) == [False, False, False, True]


def test_visibility_rules():
    br = visibility(2, 5, causal_offset=3)
    assert br.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]
    win = visibility(1, 6, causal_offset=5, window=3)
    assert win.tolist() == [[False, False, False, True, True, True]]
    assert visibility(3, 4) is None


def test_row_with_no_visible_key_errors_or_gives_zeros():
    q, k, v = _qkv(1, tq=3, tk=6)
    pad = np.ones((2, 1, 6), dtype=bool)
    pad[1, :, :4] = False  # batch 1: keys 0..3 are padding, so prefill rows 0..3 see nothing
    kw = {"causal_offset": 0, "key_padding": pad}
    for fn in (full_attention, lambda *a, **k_: blocked_attention(*a, block_size=2, **k_)):
        with pytest.raises(EmptyRowError, match="no visible key"):
            fn(q, k, v, **kw)
        out = fn(q, k, v, empty_rows="zero", **kw)
        assert np.isfinite(out).all()
        assert np.all(out[1, :, :3] == 0.0)
        np.testing.assert_allclose(out[0], full_attention(q, k, v, causal_offset=0)[0], atol=1e-13)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"block_size": 0}, "block_size"),
        ({"block_size": 2, "window": 3}, "window"),
        ({"block_size": 2, "causal_offset": 0, "window": 0}, "window"),
        ({"block_size": 2, "block_order": [0, 0, 1]}, "block_order"),
        ({"block_size": 2, "causal_offset": -1}, "causal_offset"),
        ({"block_size": 2, "mask": np.ones((3, 6))}, "mask"),
    ],
)
def test_bad_arguments_are_rejected(kwargs, needle):
    q, k, v = _qkv(0, tq=3, tk=6)
    with pytest.raises(InvalidInput, match=needle):
        blocked_attention(q, k, v, **kwargs)


# ----------------------------------------------------------------------------------- torch


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("block_size", [1, 5, 16, 64])
@pytest.mark.parametrize("kind", ["none", "causal", "decode", "window", "padding", "random"])
def test_torch_blocked_matches_float64_reference(dtype, block_size, kind):
    rng = np.random.default_rng(block_size)
    tq, tk = 4, 37
    q, k, v = _qkv(7, tq=tq, tk=tk)
    kw = _mask_kwargs(kind, rng, tq, tk)
    ref = full_attention(q, k, v, **kw)
    tkw = {key: torch.from_numpy(val) if isinstance(val, np.ndarray) else val for key, val in kw.items()}
    tq_, tk_, tv_ = (torch.from_numpy(x).to(dtype) for x in (q, k, v))
    out = blocked_attention_torch(tq_, tk_, tv_, block_size=block_size, **tkw)
    assert out.dtype == dtype and out.shape == ref.shape
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    # float32 inputs are rounded; compare with the reference on those rounded inputs
    ref32 = full_attention(*(x.double().numpy() for x in (tq_, tk_, tv_)), **kw)
    np.testing.assert_allclose(out.double().numpy(), ref32 if dtype == torch.float32 else ref, atol=tol)
    explicit = explicit_attention_torch(tq_, tk_, tv_, **tkw)
    np.testing.assert_allclose(explicit.double().numpy(), ref32 if dtype == torch.float32 else ref, atol=tol)


def test_torch_blocked_agrees_with_sdpa_given_the_same_boolean_mask():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, t, 16, generator=g, dtype=torch.float64) for t in (6, 50, 50))
    mask = visibility_torch(6, 50, causal_offset=44, window=20)
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ours = blocked_attention_torch(q, k, v, block_size=8, causal_offset=44, window=20)
    torch.testing.assert_close(ours, sdpa, atol=1e-12, rtol=0)


def test_torch_blocked_half_precision_accumulates_in_float32():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, t, 32, generator=g) for t in (8, 300, 300))
    ref = full_attention(*(x.to(torch.bfloat16).double().numpy() for x in (q, k, v)), causal_offset=292)
    out = blocked_attention_torch(
        *(x.to(torch.bfloat16) for x in (q, k, v)), block_size=64, causal_offset=292
    )
    assert out.dtype == torch.bfloat16
    assert np.abs(out.double().numpy() - ref).max() < 2e-2


def test_torch_empty_rows():
    q, k, v = (torch.randn(1, 1, t, 4, dtype=torch.float64) for t in (3, 5, 5))
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    with pytest.raises(EmptyRowError):
        blocked_attention_torch(q, k, v, block_size=2, mask=mask)
    with pytest.raises(EmptyRowError):
        explicit_attention_torch(q, k, v, mask=mask)
    out = blocked_attention_torch(q, k, v, block_size=2, mask=mask, empty_rows="zero")
    assert torch.isfinite(out).all() and torch.all(out[0, 0, 1] == 0)
    out2 = explicit_attention_torch(q, k, v, mask=mask, empty_rows="zero")
    torch.testing.assert_close(out, out2, atol=1e-12, rtol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_torch_blocked_on_cuda_matches_reference(dtype):
    q, k, v = _qkv(5, b=2, h=4, tq=8, tk=300, d=64, dv=64)
    tensors = [torch.from_numpy(x).to(dtype) for x in (q, k, v)]
    ref = full_attention(*(x.double().numpy() for x in tensors), causal_offset=292, window=100)
    out = blocked_attention_torch(*(x.cuda() for x in tensors), block_size=64, causal_offset=292, window=100)
    assert out.is_cuda and out.dtype == dtype
    assert np.abs(out.cpu().double().numpy() - ref).max() < (2e-5 if dtype == torch.float32 else 5e-3)
