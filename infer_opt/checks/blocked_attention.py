"""Reference attention: full softmax (explicit) and blocked online-softmax (FlashAttention-style).

Shapes follow ``torch.nn.functional.scaled_dot_product_attention``: ``q`` is
``(..., T_q, d)``, ``k`` is ``(..., T_k, d)``, ``v`` is ``(..., T_k, d_v)``; leading axes
(batch, heads) broadcast. ``o_i = Σ_j softmax_j(z_ij)·v_j`` with ``z_ij = scale·q_i·k_j``
(``scale`` defaults to ``1/sqrt(d)``) over the keys query i may see.

Visibility (all given rules are combined with AND; True = the query may see the key):

* ``causal_offset=c``: query i sits at logical position ``c + i`` and sees keys ``0..c+i``.
  ``c = 0`` is prefill (top-left = bottom-right when ``T_q = T_k``); ``c = T_k - T_q`` is the
  bottom-right alignment a cached decode step needs (the newest query sees every key).
* ``window=w`` (needs ``causal_offset``): sliding window, query at position p sees keys
  ``p-w < j ≤ p`` — its own position and the ``w-1`` before it.
* ``key_padding``: boolean ``(..., T_k)``, True for real keys, False for padding.
* ``mask``: any boolean array broadcastable to ``(..., T_q, T_k)`` (SDPA's boolean convention).

The blocked kernels walk the keys in blocks of ``block_size``, keep the online-softmax
state per query row, skip blocks no query can see, and finish with ``u/ℓ``. Rows with no
visible key raise :class:`~infer_opt.checks.online_softmax.EmptyRowError` by default, or
give zeros with ``empty_rows="zero"``.

numpy functions compute in float64. The torch functions (torch imported lazily) keep the
input's device and compute in float64 for float64 inputs and in float32 otherwise (half
and bfloat16 inputs accumulate in float32, as FlashAttention does), then cast back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from infer_opt.checks.online_softmax import (
    EMPTY_ROW_MODES,
    EmptyRowError,
    EmptyRows,
    SoftmaxState,
    block_state,
    empty_state,
    finalize,
    merge,
)
from infer_opt.errors import InvalidInput

if TYPE_CHECKING:
    import torch


# ------------------------------------------------------------------------------ visibility


def _check_int(option: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise InvalidInput(option, value, f"must be an integer >= {low}")
    return int(value)


def visibility(
    tq: int,
    tk: int,
    *,
    causal_offset: int | None = None,
    window: int | None = None,
    key_padding: np.ndarray | None = None,
    mask: np.ndarray | None = None,
) -> np.ndarray | None:
    """Boolean visibility broadcastable to ``(..., T_q, T_k)`` (True = may attend), or None
    when nothing is masked. See the module docstring for the rules."""
    tq = _check_int("tq", tq, 1)
    tk = _check_int("tk", tk, 1)
    out: np.ndarray | None = None
    if causal_offset is not None:
        c = _check_int("causal_offset", causal_offset, 0)
        pos = c + np.arange(tq)[:, None]
        keys = np.arange(tk)[None, :]
        out = keys <= pos
        if window is not None:
            w = _check_int("window", window, 1)
            out = out & (keys > pos - w)
    elif window is not None:
        raise InvalidInput("window", window, "a sliding window needs a causal mask (give causal_offset)")
    if key_padding is not None:
        pad = np.asarray(key_padding, dtype=bool)
        if pad.shape[-1:] != (tk,):
            raise InvalidInput("key_padding", f"shape {pad.shape}", f"expected (..., {tk}) booleans")
        pad = pad[..., None, :]
        out = pad if out is None else out & pad
    if mask is not None:
        user = np.asarray(mask)
        if user.dtype != np.bool_:
            raise InvalidInput("mask", f"dtype {user.dtype}", "expected a boolean mask (True = may attend)")
        try:
            np.broadcast_shapes(user.shape, (tq, tk))
        except ValueError:
            raise InvalidInput(
                "mask", f"shape {user.shape}", f"must broadcast to (..., {tq}, {tk})"
            ) from None
        out = user if out is None else out & user
    return out


def bottom_right_offset(tq: int, tk: int) -> int:
    """The causal offset ``T_k - T_q`` that puts the last query at the last key."""
    if tq > tk:
        raise InvalidInput("tq", tq, f"must be <= T_k = {tk} (queries are the newest keys)")
    return tk - tq


def key_blocks(tk: int, block_size: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` of the key blocks; the last one may be shorter."""
    bs = _check_int("block_size", block_size, 1)
    return [(j0, min(tk, j0 + bs)) for j0 in range(0, tk, bs)]


def visible_blocks(vis: np.ndarray | None, tk: int, block_size: int) -> list[bool]:
    """For each key block, whether any query row sees any of its keys (False: skippable)."""
    blocks = key_blocks(tk, block_size)
    if vis is None:
        return [True] * len(blocks)
    return [bool(np.any(vis[..., j0:j1])) for j0, j1 in blocks]


# ------------------------------------------------------------------------ numpy (float64)


def _prepare(q: Any, k: Any, v: Any, scale: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    qa, ka, va = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    if qa.ndim < 2 or ka.ndim < 2 or va.ndim < 2:
        raise InvalidInput("q/k/v", f"{qa.shape}, {ka.shape}, {va.shape}", "expected (..., T, d) arrays")
    if qa.shape[-1] != ka.shape[-1]:
        raise InvalidInput(
            "k", f"d = {ka.shape[-1]}", f"query and key head dims must match (q has {qa.shape[-1]})"
        )
    if ka.shape[-2] != va.shape[-2]:
        raise InvalidInput(
            "v", f"T_k = {va.shape[-2]}", f"keys and values must have the same T_k ({ka.shape[-2]})"
        )
    if ka.shape[-2] < 1:
        raise InvalidInput("k", "T_k = 0", "need at least one key")
    return qa, ka, va, _scale(scale, qa.shape[-1])


def _scale(scale: float | None, d: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d)
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise InvalidInput("scale", scale, "must be a finite number > 0")
    return float(scale)


def _check_empty_rows(empty_rows: str) -> None:
    if empty_rows not in EMPTY_ROW_MODES:
        raise InvalidInput("empty_rows", empty_rows, "must be 'raise' or 'zero'")


def full_attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    causal_offset: int | None = None,
    window: int | None = None,
    key_padding: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    scale: float | None = None,
    empty_rows: EmptyRows = "raise",
) -> np.ndarray:
    """Full (explicit) softmax attention in float64: the ``T_q × T_k`` scores, a row-wise
    softmax over the visible keys (global max subtracted), then ``P·V``. The reference
    every other path is compared with."""
    _check_empty_rows(empty_rows)
    qa, ka, va, sc = _prepare(q, k, v, scale)
    tq, tk = qa.shape[-2], ka.shape[-2]
    vis = visibility(tq, tk, causal_offset=causal_offset, window=window, key_padding=key_padding, mask=mask)
    z = sc * np.matmul(qa, np.swapaxes(ka, -1, -2))
    if vis is None:
        vis = np.ones((tq, tk), dtype=bool)
    vis = np.broadcast_to(vis, np.broadcast_shapes(vis.shape, z.shape))
    z = np.broadcast_to(z, vis.shape)
    empty = ~vis.any(axis=-1)
    if empty.any() and empty_rows == "raise":
        raise EmptyRowError(int(empty.sum()), tuple(int(i) for i in np.argwhere(empty)[0]))
    row_max = np.where(empty, 0.0, np.max(np.where(vis, z, -np.inf), axis=-1))
    p = np.where(vis, np.exp(np.where(vis, z - row_max[..., None], 0.0)), 0.0)
    denom = np.where(empty, 1.0, p.sum(axis=-1))
    return np.matmul(p / denom[..., None], va)


def blocked_attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    block_size: int,
    causal_offset: int | None = None,
    window: int | None = None,
    key_padding: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    scale: float | None = None,
    block_order: Sequence[int] | None = None,
    empty_rows: EmptyRows = "raise",
) -> np.ndarray:
    """Blocked exact attention in float64 with the online-softmax state (chapter algorithm 33.1):
    for each key block (in ``block_order``, any permutation of the block indices; default
    left to right) compute the block's ``(m, ℓ, u)`` per query row and merge it; blocks no
    query can see are skipped; finally ``o = u/ℓ``. Equals :func:`full_attention` up to
    rounding for every block size and block order."""
    _check_empty_rows(empty_rows)
    qa, ka, va, sc = _prepare(q, k, v, scale)
    tq, tk = qa.shape[-2], ka.shape[-2]
    blocks = key_blocks(tk, block_size)
    order = list(range(len(blocks))) if block_order is None else [int(b) for b in block_order]
    if sorted(order) != list(range(len(blocks))):
        raise InvalidInput("block_order", order, f"must be a permutation of 0..{len(blocks) - 1}")
    vis = visibility(tq, tk, causal_offset=causal_offset, window=window, key_padding=key_padding, mask=mask)
    live = visible_blocks(vis, tk, block_size)
    rows = np.broadcast_shapes(qa.shape[:-1], (*ka.shape[:-2], tq), (*va.shape[:-2], tq))
    if vis is not None:
        rows = np.broadcast_shapes(rows, vis.shape[:-1])
    state = empty_state(rows, va.shape[-1])
    for b in order:
        if not live[b]:
            continue
        j0, j1 = blocks[b]
        z = sc * np.matmul(qa, np.swapaxes(ka[..., j0:j1, :], -1, -2))
        # values gain a size-1 query axis: every query row of the block shares them
        block = block_state(z, va[..., None, j0:j1, :], None if vis is None else vis[..., j0:j1])
        state = merge(state, _broadcast_state(block, rows))
    return finalize(state, empty_rows)


def _broadcast_state(state: SoftmaxState, rows: tuple[int, ...]) -> SoftmaxState:
    if state.m.shape == rows:
        return state
    return SoftmaxState(
        m=np.broadcast_to(state.m, rows),
        l=np.broadcast_to(state.l, rows),
        u=np.broadcast_to(state.u, (*rows, state.u.shape[-1])),
        empty=np.broadcast_to(state.empty, rows),
    )


# ------------------------------------------------------------------------------- torch


def visibility_torch(
    tq: int,
    tk: int,
    *,
    device: Any = "cpu",
    causal_offset: int | None = None,
    window: int | None = None,
    key_padding: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """:func:`visibility` as a boolean tensor on ``device`` (``key_padding``/``mask`` may be
    tensors already there). Usable directly as SDPA's ``attn_mask`` (True = may attend)."""
    import torch

    base = visibility(tq, tk, causal_offset=causal_offset, window=window)
    out = None if base is None else torch.from_numpy(np.ascontiguousarray(base)).to(device)
    if key_padding is not None:
        pad = torch.as_tensor(key_padding, device=device)
        if pad.dtype != torch.bool or pad.shape[-1] != tk:
            raise InvalidInput(
                "key_padding", f"{pad.dtype} {tuple(pad.shape)}", f"expected (..., {tk}) booleans"
            )
        pad = pad[..., None, :]
        out = pad if out is None else out & pad
    if mask is not None:
        user = torch.as_tensor(mask, device=device)
        if user.dtype != torch.bool:
            raise InvalidInput("mask", f"dtype {user.dtype}", "expected a boolean mask (True = may attend)")
        out = user if out is None else out & user
    return out


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    import torch

    return torch.float64 if dtype == torch.float64 else torch.float32


def _torch_empty_rows(empty: torch.Tensor, empty_rows: str) -> None:
    if empty_rows == "raise" and bool(empty.any()):
        first = tuple(int(i) for i in empty.nonzero()[0].tolist())
        raise EmptyRowError(int(empty.sum()), first)


def _torch_setup(
    q: torch.Tensor,
    k: torch.Tensor,
    empty_rows: EmptyRows,
    scale: float | None,
    causal_offset: int | None,
    window: int | None,
    key_padding: torch.Tensor | None,
    mask: torch.Tensor | None,
) -> tuple[float, torch.dtype, torch.Tensor | None]:
    """What the explicit and blocked torch paths share: ``(scale, compute dtype, visibility
    mask or None)``, after checking ``empty_rows``."""
    _check_empty_rows(empty_rows)
    vis = visibility_torch(
        q.shape[-2],
        k.shape[-2],
        device=q.device,
        causal_offset=causal_offset,
        window=window,
        key_padding=key_padding,
        mask=mask,
    )
    return _scale(scale, q.shape[-1]), _compute_dtype(q.dtype), vis


def explicit_attention_torch(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal_offset: int | None = None,
    window: int | None = None,
    key_padding: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
    empty_rows: EmptyRows = "raise",
) -> torch.Tensor:
    """The explicit path in torch: materialise the ``T_q × T_k`` scores ``S``, ``P =
    softmax(S)`` and ``O = P·V`` (what FlashAttention avoids writing to memory). Same
    visibility and empty-row rules as :func:`blocked_attention_torch`."""
    import torch

    sc, cd, vis = _torch_setup(q, k, empty_rows, scale, causal_offset, window, key_padding, mask)
    s = (q.to(cd) * sc) @ k.to(cd).transpose(-1, -2)
    if vis is None:
        return (torch.softmax(s, dim=-1) @ v.to(cd)).to(q.dtype)
    s = s.masked_fill(~vis, float("-inf"))
    empty = ~vis.expand(s.shape).any(dim=-1)
    _torch_empty_rows(empty, empty_rows)
    row_max = s.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    p = torch.exp(s - row_max)
    denom = p.sum(dim=-1, keepdim=True)
    p = p / torch.where(denom > 0, denom, torch.ones_like(denom))
    return (p @ v.to(cd)).to(q.dtype)


def blocked_attention_torch(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    block_size: int,
    mask: torch.Tensor | None = None,
    causal_offset: int | None = None,
    window: int | None = None,
    key_padding: torch.Tensor | None = None,
    scale: float | None = None,
    empty_rows: EmptyRows = "raise",
) -> torch.Tensor:
    """Blocked exact attention in torch (the online-softmax loop FlashAttention runs on-chip,
    written with plain tensor ops): same semantics as :func:`blocked_attention`.

    ``q`` (..., T_q, d), ``k`` (..., T_k, d), ``v`` (..., T_k, d_v), e.g. (B, H, T, d). Key
    blocks no query can see are skipped — decided from ``causal_offset``/``window`` without
    touching the device, or (with ``mask``/``key_padding``) from one reduction of the mask.
    The running max starts at ``-inf`` (the EMPTY marker); each step subtracts a finite
    stand-in for rows still empty, so ``-inf - (-inf)`` never occurs. Rows with no visible
    key: :class:`EmptyRowError` (default, one device sync) or zeros (``empty_rows="zero"``).
    """
    import torch

    tq, tk = q.shape[-2], k.shape[-2]
    if tk < 1:
        raise InvalidInput("k", "T_k = 0", "need at least one key")
    sc, cd, vis = _torch_setup(q, k, empty_rows, scale, causal_offset, window, key_padding, mask)
    blocks = key_blocks(tk, block_size)
    if mask is None and key_padding is None:
        live = visible_blocks(visibility(tq, tk, causal_offset=causal_offset, window=window), tk, block_size)
    else:
        live = _live_blocks_torch(vis, tk, block_size)  # type: ignore[arg-type]

    qs = q.to(cd) * sc
    rows = torch.broadcast_shapes(q.shape[:-1], (*k.shape[:-2], tq), (*v.shape[:-2], tq))
    if vis is not None:
        rows = torch.broadcast_shapes(rows, vis.shape[:-1])
    m = torch.full(rows, float("-inf"), dtype=cd, device=q.device)
    ell = torch.zeros(rows, dtype=cd, device=q.device)
    acc = torch.zeros((*rows, v.shape[-1]), dtype=cd, device=q.device)
    for (j0, j1), is_live in zip(blocks, live, strict=True):
        if not is_live:
            continue
        s = qs @ k[..., j0:j1, :].to(cd).transpose(-1, -2)
        if vis is not None:
            s = s.masked_fill(~vis[..., j0:j1], float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1))
        m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        alpha = torch.exp(m - m_safe)
        p = torch.exp(s - m_safe[..., None])
        ell = alpha * ell + p.sum(dim=-1)
        acc = alpha[..., None] * acc + p @ v[..., j0:j1, :].to(cd)
        m = m_new
    empty = ell == 0  # a non-empty row has ℓ >= exp(0) = 1 from its max
    _torch_empty_rows(empty, empty_rows)
    out = acc / torch.where(empty, torch.ones_like(ell), ell)[..., None]
    return out.to(q.dtype)


def _live_blocks_torch(vis: torch.Tensor, tk: int, block_size: int) -> list[bool]:
    import torch

    # one device -> host transfer for all blocks
    return torch.stack([vis[..., j0:j1].any() for j0, j1 in key_blocks(tk, block_size)]).tolist()
