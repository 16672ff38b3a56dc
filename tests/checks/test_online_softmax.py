"""Online-softmax state: the chapter's worked merge, EMPTY handling and merge algebra."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.checks.online_softmax import (
    EmptyRowError,
    SoftmaxState,
    block_state,
    empty_state,
    finalize,
    merge,
    merge_all,
)
from infer_opt.errors import InvalidInput

SCORES = np.log([2.0, 1.0, 6.0])
VALUES = np.array([[1.0], [4.0], [5.0]])


def _close(a: SoftmaxState, b: SoftmaxState) -> None:
    np.testing.assert_array_equal(a.empty, b.empty)
    np.testing.assert_allclose(finalize(a, "zero"), finalize(b, "zero"), rtol=1e-12, atol=1e-12)
    # total mass exp(m)·ℓ and exp(m)·u are convention-free
    live = ~a.empty
    np.testing.assert_allclose((np.exp(a.m) * a.l)[live], (np.exp(b.m) * b.l)[live], rtol=1e-12)


def test_chapter_worked_merge():
    a = block_state(SCORES[:2], VALUES[:2])
    b = block_state(SCORES[2:], VALUES[2:])
    assert a.m == pytest.approx(math.log(2), rel=1e-15)
    assert a.l == pytest.approx(1.5, rel=1e-15)
    assert a.u[0] == pytest.approx(3.0, rel=1e-15)
    assert b.m == pytest.approx(math.log(6), rel=1e-15)
    assert b.l == pytest.approx(1.0, rel=1e-15)
    assert b.u[0] == pytest.approx(5.0, rel=1e-15)
    merged = merge(a, b)
    # ℓ and u are relative to the merged m = log 6: block A is scaled by e^{log2 - log6} = 1/3
    assert merged.m == pytest.approx(math.log(6), rel=1e-15)
    assert merged.l == pytest.approx(1.5, rel=1e-14)
    assert merged.u[0] == pytest.approx(6.0, rel=1e-14)
    assert finalize(merged)[0] == pytest.approx(4.0, rel=1e-14)
    # the full computation agrees: (2·1 + 1·4 + 6·5)/(2 + 1 + 6) = 4
    full = finalize(block_state(SCORES, VALUES))
    assert full[0] == pytest.approx(4.0, rel=1e-14)


def test_naive_block_combinations_are_wrong():
    a = finalize(block_state(SCORES[:2], VALUES[:2]))[0]
    b = finalize(block_state(SCORES[2:], VALUES[2:]))[0]
    assert (a, b) == pytest.approx((2.0, 5.0))
    assert a + b == pytest.approx(7.0)
    assert (a + b) / 2 == pytest.approx(3.5)
    assert finalize(merge(block_state(SCORES[:2], VALUES[:2]), block_state(SCORES[2:], VALUES[2:])))[0] != 3.5


def test_fully_masked_block_is_empty_and_contributes_nothing():
    blk = block_state(SCORES, VALUES, visible=np.zeros(3, dtype=bool))
    assert bool(blk.empty) and blk.l == 0 and np.all(np.isfinite([blk.m, blk.l]))
    full = block_state(SCORES, VALUES)
    with np.errstate(all="raise"):  # no -inf - (-inf), no 0/0 anywhere
        left, right = merge(blk, full), merge(full, blk)
        both_empty = merge(blk, blk)
    for out in (left, right):
        assert out.m == full.m and out.l == full.l
        np.testing.assert_array_equal(out.u, full.u)
    assert bool(both_empty.empty)


def test_minus_inf_scores_are_masked():
    z = np.array([np.log(2.0), -np.inf, np.log(6.0)])
    got = finalize(block_state(z, VALUES))[0]
    assert got == pytest.approx((2 * 1 + 6 * 5) / 8)


def test_row_with_no_visible_key_raises_by_default_and_zero_on_request():
    scores = np.zeros((2, 3))
    visible = np.array([[True, False, True], [False, False, False]])
    state = block_state(scores, VALUES, visible)
    with pytest.raises(EmptyRowError) as info:
        finalize(state)
    assert isinstance(info.value, InvalidInput)
    assert info.value.first_row == (1,) and "no visible key" in str(info.value)
    out = finalize(state, empty_rows="zero")
    assert out[0, 0] == pytest.approx(3.0) and out[1, 0] == 0.0
    assert np.isfinite(out).all()


def test_rejects_nan_scores_and_bad_mode():
    with pytest.raises(InvalidInput, match="scores"):
        block_state(np.array([0.0, np.nan]), VALUES[:2])
    with pytest.raises(InvalidInput, match="empty_rows"):
        finalize(block_state(SCORES, VALUES), empty_rows="nan")  # type: ignore[arg-type]


def _random_state(rng: np.random.Generator, rows: int, n: int, d: int, masked: float) -> SoftmaxState:
    z = rng.normal(scale=4.0, size=(rows, n))
    return block_state(z, rng.normal(size=(rows, n, d)), rng.random((rows, n)) >= masked)


@given(seed=st.integers(0, 2**32 - 1), masked=st.sampled_from([0.0, 0.5, 0.9, 1.0]))
def test_merge_is_commutative_and_associative(seed, masked):
    rng = np.random.default_rng(seed)
    a, b, c = (_random_state(rng, 5, int(rng.integers(1, 6)), 3, masked) for _ in range(3))
    _close(merge(a, b), merge(b, a))
    _close(merge(merge(a, b), c), merge(a, merge(b, c)))


@given(seed=st.integers(0, 2**32 - 1))
def test_empty_state_is_the_identity(seed):
    rng = np.random.default_rng(seed)
    a = _random_state(rng, 4, 3, 2, 0.3)
    e = empty_state((4,), 2)
    for out in (merge(e, a), merge(a, e)):
        np.testing.assert_array_equal(out.empty, a.empty)
        np.testing.assert_array_equal(out.l, a.l)
        np.testing.assert_array_equal(out.u, a.u)


@given(seed=st.integers(0, 2**32 - 1), cuts=st.lists(st.integers(1, 11), min_size=1, max_size=4))
def test_any_split_equals_the_single_block(seed, cuts):
    rng = np.random.default_rng(seed)
    n = 12
    z, v = rng.normal(scale=5.0, size=(3, n)), rng.normal(size=(3, n, 2))
    vis = rng.random((3, n)) > 0.3
    vis[:, 0] = True
    edges = sorted({0, n, *cuts})
    parts = [block_state(z[:, i:j], v[:, i:j], vis[:, i:j]) for i, j in itertools.pairwise(edges)]
    order = rng.permutation(len(parts))
    got = finalize(merge_all(parts[i] for i in order))
    np.testing.assert_allclose(got, finalize(block_state(z, v, vis)), rtol=1e-12, atol=1e-12)
