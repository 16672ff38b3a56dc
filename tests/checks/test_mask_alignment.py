"""Cached-decode causal-mask alignment: bottom-right is right, top-left is a detectable bug."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from infer_opt.checks.blocked_attention import blocked_attention_torch
from infer_opt.checks.mask_alignment import (
    TOLERANCES,
    causal_mask_bottom_right,
    causal_mask_top_left,
    check_attention,
    check_attention_fn,
    sdpa_is_causal_top_left,
)
from infer_opt.errors import InvalidInput
from infer_opt.results import Result


def test_masks_for_one_decode_query():
    assert causal_mask_bottom_right(1, 4).tolist() == [[True, True, True, True]]
    assert causal_mask_top_left(1, 4).tolist() == [[True, False, False, False]]


def test_masks_agree_only_for_square_prefill():
    np.testing.assert_array_equal(causal_mask_bottom_right(5, 5), causal_mask_top_left(5, 5))
    br, tl = causal_mask_bottom_right(2, 5), causal_mask_top_left(2, 5)
    assert br.tolist() == [[True, True, True, True, False], [True] * 5]
    assert tl.tolist() == [[True, False, False, False, False], [True, True, False, False, False]]
    with pytest.raises(InvalidInput, match="tq"):
        causal_mask_bottom_right(6, 5)


def test_sdpa_is_causal_aligns_top_left_on_this_torch():
    # the documented PyTorch behaviour: is_causal=True builds ones(T_q, T_k).tril(), so one
    # query over a cache sees key 0 only and its output is exactly v_0 — finite, and wrong
    assert sdpa_is_causal_top_left() is True
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, t, 8, generator=g, dtype=torch.float64) for t in (1, 6, 6))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out[0, 0, 0], v[0, 0, 0], atol=1e-12, rtol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_builtin_check_passes_and_detects_the_top_left_bug(dtype):
    result = check_attention(tq=3, tk=40, heads=2, head_dim=8, block_size=7, window=12, dtype=dtype)
    assert result.passed
    assert result.sdpa_is_causal_top_left is True
    buggy = [c for c in result.cases if c.expected_to_fail]
    assert {c.case for c in buggy} == {"decode 1 token", "decode 3 tokens"}
    for c in buggy:
        assert c.finite and not c.matches_reference and c.passed
        assert c.max_abs_error > 100 * TOLERANCES[dtype]
    good = [c for c in result.cases if not c.expected_to_fail]
    assert all(c.matches_reference for c in good)
    prefill_causal = next(c for c in result.cases if c.case == "prefill" and c.mask == "is_causal=True")
    assert not prefill_causal.expected_to_fail and prefill_causal.passed
    assert {c.case for c in result.cases} >= {"prefill", "decode 1 token", "decode 3 tokens"}


def test_square_and_single_key_edge_cases():
    square = check_attention(tq=6, tk=6, heads=1, head_dim=4, block_size=4, window=2)
    assert square.passed
    assert not any(c.case.startswith("decode 6") for c in square.cases)
    single = check_attention(tq=1, tk=1, heads=1, head_dim=4, block_size=1, window=1)
    assert single.passed and not any(c.expected_to_fail for c in single.cases)


def test_result_round_trips_through_json():
    result = check_attention(tq=2, tk=9, heads=1, head_dim=4, block_size=4, window=3)
    again = type(result).from_dict(result.to_dict())
    assert again == result and isinstance(again, Result)


def _bottom_right(q, k, v, offset):
    return blocked_attention_torch(q, k, v, block_size=16, causal_offset=offset)


def _top_left(q, k, v, offset):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_check_attention_fn_accepts_a_correct_callable():
    result = check_attention_fn(_bottom_right, name="blocked", tq=4, tk=33, heads=2, head_dim=8)
    assert result.passed and result.subject == "blocked"
    assert [c.tq for c in result.cases] == [33, 1, 4]
    assert [c.causal_offset for c in result.cases] == [0, 32, 29]


def test_check_attention_fn_rejects_a_top_left_callable():
    result = check_attention_fn(_top_left, name="is_causal", tq=4, tk=33, heads=2, head_dim=8)
    assert not result.passed
    by_case = {c.case: c for c in result.cases}
    assert by_case["prefill"].passed
    assert not by_case["decode 1 token"].passed and by_case["decode 1 token"].finite
    assert not by_case["decode 4 tokens"].passed


def test_check_attention_fn_flags_nan_output():
    result = check_attention_fn(lambda q, k, v, o: torch.full_like(q, float("nan")), tq=2, tk=4)
    assert not result.passed and not any(c.finite for c in result.cases)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"tq": 5, "tk": 4}, "tq"),
        ({"tq": 0}, "tq"),
        ({"block_size": 0}, "block_size"),
        ({"window": 0}, "window"),
        ({"heads": 0}, "heads"),
        ({"dtype": "int8"}, "dtype"),
    ],
)
def test_bad_sizes_are_rejected(kwargs, needle):
    with pytest.raises(InvalidInput, match=needle):
        check_attention(**{"tq": 2, "tk": 8, "heads": 1, "head_dim": 4, **kwargs})


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_builtin_check_on_cuda(dtype):
    result = check_attention(
        tq=4, tk=256, heads=4, head_dim=64, block_size=64, window=96, dtype=dtype, device="cuda"
    )
    failed = [(c.case, c.path, c.mask, c.max_abs_error, c.error) for c in result.cases if not c.passed]
    assert result.passed, failed


@pytest.mark.gpu
def test_sdpa_is_causal_aligns_top_left_on_every_cuda_backend_that_accepts_it():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    seen = {}
    for backend in (SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION):
        try:
            with sdpa_kernel(backend):
                seen[backend.name] = sdpa_is_causal_top_left("cuda", "float16")
        except RuntimeError:  # e.g. flash refuses is_causal with T_q != T_k
            continue
    assert seen.get("MATH") is True
    assert all(seen.values()), seen
