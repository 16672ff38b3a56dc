"""The online-softmax state ``(m, ℓ, u)`` that makes blocked attention exact.

For a non-empty set A of visible keys with scores ``z_j`` and value vectors ``v_j``::

    m_A = max_j z_j,   ℓ_A = Σ_j exp(z_j - m_A),   u_A = Σ_j exp(z_j - m_A)·v_j

Two disjoint sets merge with ``m = max(m_A, m_B)``,
``ℓ = e^{m_A-m}·ℓ_A + e^{m_B-m}·ℓ_B``, ``u = e^{m_A-m}·u_A + e^{m_B-m}·u_B``, and the
attention output is ``o = u/ℓ``. ``ℓ`` and ``u`` are always relative to the state's own
``m`` (the *scale convention*): the chapter's worked merge ends with ``m = log 6``,
``ℓ = 3/2``, ``u = 6``, i.e. a total mass of ``6·3/2 = 9``.

Every array is vectorised over leading axes (batch, heads, query rows): ``m``, ``ℓ`` and
``empty`` have shape ``(...,)`` and ``u`` has shape ``(..., d_v)``.

Empty sets: a row whose block has no visible key gets the explicit EMPTY state
(``empty=True``; ``m``, ``ℓ``, ``u`` hold the finite placeholders 0). Merging with an empty
state returns the other state unchanged, and no ``-inf - (-inf)`` is ever evaluated.
A row that stays empty after all blocks has no defined softmax: :func:`finalize` raises
:class:`EmptyRowError` by default, or returns a zero output row with ``empty_rows="zero"``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from infer_opt.errors import InvalidInput

EmptyRows = Literal["raise", "zero"]
EMPTY_ROW_MODES: tuple[str, ...] = ("raise", "zero")


class EmptyRowError(InvalidInput):
    """A query row sees no key at all (every key masked): ``softmax`` over the empty set is
    undefined (``ℓ = 0``). Raised by default instead of returning NaN; pass
    ``empty_rows="zero"`` to get a documented zero output for such rows instead.
    Exit code 2 at the CLI (it is a property of the inputs, not a run-time failure)."""

    def __init__(self, n_rows: int, first_row: tuple[int, ...]) -> None:
        self.n_rows = n_rows
        self.first_row = first_row
        super().__init__(
            "mask",
            f"{n_rows} query row(s) with no visible key, first at index {first_row}",
            "every query row must see at least one key (or use empty_rows='zero' for a zero output)",
        )


@dataclass(frozen=True, eq=False)
class SoftmaxState:
    """Online-softmax statistics of one key set per row (see the module docstring)."""

    #: max visible score per row; placeholder 0 where ``empty``
    m: np.ndarray
    #: Σ exp(z - m) per row; 0 where ``empty``
    l: np.ndarray  # noqa: E741 - the chapter's ℓ
    #: Σ exp(z - m)·v per row, shape (..., d_v); 0 where ``empty``
    u: np.ndarray
    #: the row has no visible key in this set
    empty: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.m.shape


def empty_state(shape: tuple[int, ...], d_v: int) -> SoftmaxState:
    """The state of the empty key set for rows of ``shape`` (the identity of :func:`merge`)."""
    return SoftmaxState(
        m=np.zeros(shape),
        l=np.zeros(shape),
        u=np.zeros((*shape, d_v)),
        empty=np.ones(shape, dtype=bool),
    )


def block_state(
    scores: np.ndarray,
    values: np.ndarray,
    visible: np.ndarray | None = None,
) -> SoftmaxState:
    """The state of one block of keys.

    ``scores``: (..., n) scores ``z_j`` per row (already scaled, bias added); ``-inf`` means
    masked. ``values``: (..., n, d_v) whose ``...`` broadcasts against the rows' ``...`` (give
    shared values a size-1 row axis, e.g. (B, H, 1, n, d_v) for rows (B, H, T_q)).
    ``visible``: optional boolean (..., n), True where the row may see the key. Rows with no
    visible key are EMPTY.
    NaN or ``+inf`` scores are rejected.
    """
    z = np.asarray(scores, dtype=np.float64)
    vals = np.asarray(values, dtype=np.float64)
    if z.ndim < 1:
        raise InvalidInput("scores", f"shape {z.shape}", "expected at least one axis of keys")
    if vals.ndim < 2 or vals.shape[-2] != z.shape[-1]:
        raise InvalidInput(
            "values", f"shape {vals.shape}", f"expected (..., {z.shape[-1]}, d_v) to match the scores' keys"
        )
    if np.isnan(z).any() or (z == np.inf).any():
        raise InvalidInput("scores", "NaN or +inf", "scores must be finite (-inf marks a masked key)")
    vis = z > -np.inf
    if visible is not None:
        vis = vis & np.asarray(visible, dtype=bool)
    empty = ~vis.any(axis=-1)
    row_max = np.max(np.where(vis, z, -np.inf), axis=-1) if z.shape[-1] else np.zeros(z.shape[:-1])
    m = np.where(empty, 0.0, row_max)
    # masked entries never reach exp(); empty rows keep the finite placeholder m = 0
    w = np.where(vis, np.exp(np.where(vis, z - m[..., None], 0.0)), 0.0)
    ell = w.sum(axis=-1)
    u = np.matmul(w[..., None, :], vals)[..., 0, :]
    shape = np.broadcast_shapes(m.shape, u.shape[:-1])
    return SoftmaxState(
        m=np.broadcast_to(m, shape).copy(),
        l=np.broadcast_to(ell, shape).copy(),
        u=np.broadcast_to(u, (*shape, u.shape[-1])).copy(),
        empty=np.broadcast_to(empty, shape).copy(),
    )


def merge(a: SoftmaxState, b: SoftmaxState) -> SoftmaxState:
    """The state of the union of two disjoint key sets:
    ``m = max(m_A, m_B)``, ``ℓ = e^{m_A-m}ℓ_A + e^{m_B-m}ℓ_B``, ``u = e^{m_A-m}u_A + e^{m_B-m}u_B``.

    An EMPTY side contributes nothing (its factor is 0 and the other side's is exactly 1);
    both empty stays EMPTY. Commutative, and associative up to rounding.
    """
    if a.u.shape[-1] != b.u.shape[-1]:
        raise InvalidInput(
            "state", f"d_v {a.u.shape[-1]} vs {b.u.shape[-1]}", "states must have the same d_v"
        )
    m = np.where(a.empty, b.m, np.where(b.empty, a.m, np.maximum(a.m, b.m)))
    # placeholders are finite, so these differences are finite; np.where then drops them
    scale_a = np.where(a.empty, 0.0, np.exp(np.where(a.empty, 0.0, a.m - m)))
    scale_b = np.where(b.empty, 0.0, np.exp(np.where(b.empty, 0.0, b.m - m)))
    empty = a.empty & b.empty
    return SoftmaxState(
        m=np.where(empty, 0.0, m),
        l=scale_a * a.l + scale_b * b.l,
        u=scale_a[..., None] * a.u + scale_b[..., None] * b.u,
        empty=empty,
    )


def merge_all(states: Iterable[SoftmaxState]) -> SoftmaxState:
    """Left fold of :func:`merge` over ``states`` (at least one)."""
    items = iter(states)
    try:
        out = next(items)
    except StopIteration:
        raise InvalidInput("states", "none", "need at least one state to merge") from None
    for state in items:
        out = merge(out, state)
    return out


def finalize(state: SoftmaxState, empty_rows: EmptyRows = "raise") -> np.ndarray:
    """The attention output ``o = u/ℓ``, shape (..., d_v).

    Rows still EMPTY (no visible key anywhere): ``empty_rows="raise"`` (default) raises
    :class:`EmptyRowError`; ``empty_rows="zero"`` returns zeros for them. Never NaN.
    """
    if empty_rows not in EMPTY_ROW_MODES:
        raise InvalidInput("empty_rows", empty_rows, "must be 'raise' or 'zero'")
    if state.empty.any():
        if empty_rows == "raise":
            first = tuple(int(i) for i in np.argwhere(state.empty)[0])
            raise EmptyRowError(int(state.empty.sum()), first)
        denom = np.where(state.empty, 1.0, state.l)
        return np.where(state.empty[..., None], 0.0, state.u / denom[..., None])
    return state.u / state.l[..., None]
