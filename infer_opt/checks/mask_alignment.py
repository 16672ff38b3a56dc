"""Causal-mask alignment for cached decode, and the ``attention check`` exactness check.

With a KV cache, ``T_q`` new queries attend over ``T_k ≥ T_q`` keys; query i sits at logical
position ``T_k - T_q + i`` and must see keys ``0..T_k-T_q+i`` (a *bottom-right* aligned causal
mask). Aligning the mask from the top-left (query i sees keys ``0..i``) is a bug: a single
decode query then sees only key 0. Its output is finite — no NaN warns anyone — but wrong.

``torch.nn.functional.scaled_dot_product_attention(..., is_causal=True)`` builds exactly that
top-left mask (``torch.ones(T_q, T_k).tril()``): with ``T_q = 1 < T_k`` the query sees key 0
only (:func:`sdpa_is_causal_top_left` probes this on the installed torch). One new token needs
no mask at all; several new positions (speculative verification, chunked prefill) need a
bottom-right mask: an explicit boolean mask or ``torch.nn.attention.bias.causal_lower_right``.

:func:`check_attention` runs the blocked kernels and SDPA on prefill and on cached decode and
compares each with full softmax attention in float64; deliberately wrong (top-left) paths are
included and must be *detected*. :func:`check_attention_fn` runs the same cases on any
attention callable (e.g. a model's attention module).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from infer_opt.checks.blocked_attention import (
    blocked_attention,
    blocked_attention_torch,
    bottom_right_offset,
    full_attention,
    visibility,
    visibility_torch,
)
from infer_opt.errors import InvalidInput
from infer_opt.results.attention_check import AttentionCase, AttentionCheckResult

if TYPE_CHECKING:
    from infer_opt.requests import AttentionCheckRequest

#: max |output - float64 reference| allowed per dtype, for unit-variance random q, k, v
TOLERANCES: dict[str, float] = {"float64": 1e-10, "float32": 1e-4, "float16": 5e-3, "bfloat16": 3e-2}

#: signature of an attention under test: (q, k, v, causal_offset) -> output, torch tensors of
#: shape (B, H, T, d); query i sits at logical position ``causal_offset + i``
AttentionFn = Callable[[Any, Any, Any, int], Any]


# ----------------------------------------------------------------------------- masks


def causal_mask_bottom_right(tq: int, tk: int) -> np.ndarray:
    """The correct cached-decode mask, (T_q, T_k) booleans: query i sees keys ``j ≤ T_k - T_q + i``."""
    mask = visibility(tq, tk, causal_offset=bottom_right_offset(tq, tk))
    assert mask is not None
    return mask


def causal_mask_top_left(tq: int, tk: int) -> np.ndarray:
    """The buggy alignment, (T_q, T_k) booleans: query i sees keys ``j ≤ i`` (what
    ``is_causal=True`` builds). Equal to the correct mask only when ``T_q = T_k``."""
    bottom_right_offset(tq, tk)
    return visibility(tq, tk, causal_offset=0)  # type: ignore[return-value]


def sdpa_is_causal_top_left(device: Any = "cpu", dtype: str = "float64") -> bool:
    """Probe the installed torch: does ``scaled_dot_product_attention(q, k, v, is_causal=True)``
    with one query over four keys return ``v_0`` (it saw key 0 only: top-left alignment)?
    Probed with the device and dtype of the check, since SDPA picks its backend from them."""
    import torch
    import torch.nn.functional as F

    tol = _tolerance(dtype, None)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(1, 1, t, 8, generator=gen, dtype=torch.float64).to(getattr(torch, dtype)).to(device)
        for t in (1, 4, 4)
    )
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return bool((out[0, 0, 0].double() - v[0, 0, 0].double()).abs().max() <= tol)


# ------------------------------------------------------------------------------ checking


def _tolerance(dtype: str, tolerance: float | None) -> float:
    if dtype not in TOLERANCES:
        raise InvalidInput("dtype", dtype, f"must be one of {', '.join(TOLERANCES)}")
    if tolerance is None:
        return TOLERANCES[dtype]
    if not (isinstance(tolerance, (int, float)) and np.isfinite(tolerance) and tolerance > 0):
        raise InvalidInput("tolerance", tolerance, "must be a finite number > 0")
    return float(tolerance)


def _validate_sizes(tq: int, tk: int, batch: int, heads: int, head_dim: int) -> None:
    for option, value in (
        ("tq", tq),
        ("tk", tk),
        ("batch", batch),
        ("heads", heads),
        ("head_dim", head_dim),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InvalidInput(option, value, "must be an integer >= 1")
    if tq > tk:
        raise InvalidInput("tq", tq, f"must be <= --tk = {tk} (new queries cannot outnumber the keys)")


@dataclass
class _Inputs:
    """Random q, k, v of one case: torch tensors in the dtype under test and their float64
    numpy copies (the reference sees exactly the rounded values the paths see)."""

    q: Any
    k: Any
    v: Any
    q64: np.ndarray
    k64: np.ndarray
    v64: np.ndarray


def _inputs(gen: Any, batch: int, heads: int, tq: int, tk: int, d: int, dtype: Any, device: Any) -> _Inputs:
    import torch

    q, k, v = (torch.randn(batch, heads, t, d, generator=gen, dtype=torch.float64) for t in (tq, tk, tk))
    q, k, v = (x.to(dtype) for x in (q, k, v))
    q64, k64, v64 = (x.to(torch.float64).numpy() for x in (q, k, v))
    return _Inputs(q.to(device), k.to(device), v.to(device), q64, k64, v64)


def _compare(
    run: Callable[[], Any],
    *,
    case: str,
    path: str,
    mask: str,
    reference: np.ndarray,
    tq: int,
    tk: int,
    offset: int,
    tolerance: float,
    expected_to_fail: bool = False,
) -> AttentionCase:
    """Run one path and compare its output with the reference. A path that raises (or
    returns the wrong shape) fails its row instead of aborting the whole check."""
    error = None
    try:
        out = run()
        got = np.asarray(
            out.detach().to("cpu").double().numpy() if hasattr(out, "detach") else out, dtype=np.float64
        )
        if got.shape != reference.shape:
            raise ValueError(f"output shape {got.shape}, expected {reference.shape}")
    except Exception as exc:  # the path under test may be anyone's code; its failure is the finding
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        got = np.full(reference.shape, np.nan)
    finite = bool(np.isfinite(got).all())
    err = float(np.max(np.abs(got - reference))) if finite else float("nan")
    matches = finite and err <= tolerance
    return AttentionCase(
        case=case,
        path=path,
        mask=mask,
        tq=tq,
        tk=tk,
        causal_offset=offset,
        max_abs_error=err,
        tolerance=tolerance,
        finite=finite,
        matches_reference=matches,
        expected_to_fail=expected_to_fail,
        passed=(not matches) if expected_to_fail else matches,
        error=error,
    )


def _no_grad(fn: AttentionFn, q: Any, k: Any, v: Any, offset: int) -> Any:
    import torch

    with torch.no_grad():
        return fn(q, k, v, offset)


def _short(dtype: str) -> str:
    return {"float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16"}.get(dtype, dtype)


def _cases(tq: int, tk: int) -> list[tuple[str, int]]:
    """(name, T_q) of the cases: prefill, one new token, and several new tokens when 1 < T_q < T_k."""
    out = [("prefill", tk), ("decode 1 token", 1)]
    if 1 < tq < tk:
        out.append((f"decode {tq} tokens", tq))
    return out


def check_attention_fn(
    attn_fn: AttentionFn,
    *,
    name: str = "attention",
    tq: int = 4,
    tk: int = 64,
    batch: int = 1,
    heads: int = 2,
    head_dim: int = 16,
    seed: int = 0,
    dtype: str = "float32",
    device: Any = "cpu",
    tolerance: float | None = None,
) -> AttentionCheckResult:
    """Check an attention callable ``attn_fn(q, k, v, causal_offset) -> output`` (torch
    tensors (B, H, T, d); query i at logical position ``causal_offset + i``, seeing keys
    ``0..causal_offset+i``) against float64 full attention on prefill (``T_q = T_k``,
    offset 0), one-token decode (offset ``T_k - 1``) and, when ``1 < T_q < T_k``, ``T_q``-token
    decode (offset ``T_k - T_q``). A callable that aligns its causal mask top-left fails
    both decode cases; one that raises fails the case it raised in (``AttentionCase.error``).
    ``result.passed`` says whether every case matched."""
    import torch

    _validate_sizes(tq, tk, batch, heads, head_dim)
    tol = _tolerance(dtype, tolerance)
    gen = torch.Generator().manual_seed(int(seed))
    rows: list[AttentionCase] = []
    for case, n in _cases(tq, tk):
        offset = tk - n
        x = _inputs(gen, batch, heads, n, tk, head_dim, getattr(torch, dtype), device)
        ref = full_attention(x.q64, x.k64, x.v64, causal_offset=offset)
        run = partial(_no_grad, attn_fn, x.q, x.k, x.v, offset)
        rows.append(
            _compare(
                run,
                case=case,
                path=name,
                mask="its own",
                reference=ref,
                tq=n,
                tk=tk,
                offset=offset,
                tolerance=tol,
            )
        )
    return _result(rows, dtype, batch, heads, head_dim, seed, device, subject=name)


def check_attention(
    *,
    tq: int = 4,
    tk: int = 128,
    heads: int = 4,
    head_dim: int = 32,
    block_size: int = 32,
    window: int = 48,
    seed: int = 0,
    dtype: str = "float32",
    batch: int = 2,
    device: Any = "cpu",
) -> AttentionCheckResult:
    """The built-in exactness check behind ``infer-opt attention check``.

    Cases: prefill (``T_q = T_k``), decode of 1 new token, decode of ``T_q`` new tokens
    (when ``1 < T_q < T_k``), and ``T_q`` new tokens with a sliding ``window`` plus left
    padding of the second batch element. Paths: the blocked kernel in numpy float64 and
    in torch (``dtype``), SDPA with an explicit boolean mask (or none for one token),
    SDPA with ``causal_lower_right``, and SDPA with ``is_causal=True`` — correct for
    prefill, the top-left bug for decode (expected to fail and required to be detected, as
    long as :func:`sdpa_is_causal_top_left` sees this torch align it top-left, as
    documented). In every decode case the blocked kernel is also given a top-left mask on
    purpose, which must be detected. Every output is compared with float64 full attention
    under the correct bottom-right mask.
    """
    import torch

    _validate_sizes(tq, tk, batch, heads, head_dim)
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)) or block_size < 1:
        raise InvalidInput("block_size", block_size, "must be an integer >= 1")
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise InvalidInput("window", window, "must be an integer >= 1")
    run = _Run(
        torch.Generator().manual_seed(int(seed)), batch, heads, head_dim, getattr(torch, dtype), dtype,
        device, _tolerance(dtype, None), int(block_size),
    )  # fmt: skip
    top_left_sdpa = sdpa_is_causal_top_left(device, dtype) if tk > 1 else None
    rows: list[AttentionCase] = []
    for case, n in _cases(tq, tk):
        # the expectation follows what the probe saw this torch do (top-left, as documented)
        rows += _case_rows(run, case, n, tk, sdpa_top_left=bool(top_left_sdpa))
    rows += _window_rows(run, tq, tk, int(window))
    return _result(
        rows, dtype, batch, heads, head_dim, seed, device, block_size=int(block_size), window=int(window),
        sdpa_is_causal_top_left=top_left_sdpa,
    )  # fmt: skip


def _result(
    rows: list[AttentionCase],
    dtype: str,
    batch: int,
    heads: int,
    head_dim: int,
    seed: int,
    device: Any,
    **extra: Any,
) -> AttentionCheckResult:
    import torch

    return AttentionCheckResult(
        dtype=dtype,
        batch=batch,
        heads=heads,
        head_dim=head_dim,
        seed=int(seed),
        device=str(device),
        cases=tuple(rows),
        passed=all(r.passed for r in rows),
        torch_version=torch.__version__,
        **extra,
    )


@dataclass(frozen=True)
class _Run:
    """What every case of the built-in check shares: the generator its inputs come from,
    their shape, dtype and device, the tolerance and the key block size."""

    gen: Any
    batch: int
    heads: int
    head_dim: int
    torch_dtype: Any
    dtype: str
    device: Any
    tolerance: float
    block_size: int

    @property
    def blocked_torch(self) -> str:
        return f"blocked torch {_short(self.dtype)}"

    def inputs(self, tq: int, tk: int) -> _Inputs:
        return _inputs(self.gen, self.batch, self.heads, tq, tk, self.head_dim, self.torch_dtype, self.device)


def _case_rows(run: _Run, case: str, n: int, tk: int, *, sdpa_top_left: bool) -> list[AttentionCase]:
    """One case (``n`` queries over ``tk`` keys, bottom-right aligned) on every path: the
    blocked kernel in numpy float64 and in torch, SDPA with the right mask (none for one
    query), ``causal_lower_right`` for several queries over a cache, ``is_causal=True``
    (wrong for decode where the probe saw top-left alignment) and, for decode, the blocked
    kernel given a top-left mask on purpose."""
    import torch.nn.functional as F
    from torch.nn.attention.bias import causal_lower_right

    sdpa = F.scaled_dot_product_attention
    offset = tk - n
    decode = n < tk
    x = run.inputs(n, tk)
    ref = full_attention(x.q64, x.k64, x.v64, causal_offset=offset)
    row = partial(_compare, case=case, reference=ref, tq=n, tk=tk, offset=offset, tolerance=run.tolerance)
    numpy_run = partial(
        blocked_attention, x.q64, x.k64, x.v64, block_size=run.block_size, causal_offset=offset
    )
    blocked = partial(blocked_attention_torch, x.q, x.k, x.v, block_size=run.block_size)
    rows = [
        row(numpy_run, path="blocked numpy f64", mask="bottom-right", tolerance=TOLERANCES["float64"]),
        row(partial(blocked, causal_offset=offset), path=run.blocked_torch, mask="bottom-right"),
    ]
    if n == 1:
        rows.append(row(partial(sdpa, x.q, x.k, x.v), path="SDPA", mask="none (1 query)"))
    else:
        mask = visibility_torch(n, tk, device=run.device, causal_offset=offset)
        rows.append(row(partial(sdpa, x.q, x.k, x.v, attn_mask=mask), path="SDPA", mask="bottom-right bool"))
    if 1 < n < tk:
        lower_right = partial(sdpa, x.q, x.k, x.v, attn_mask=causal_lower_right(n, tk))
        rows.append(row(lower_right, path="SDPA", mask="causal_lower_right"))
    is_causal = partial(sdpa, x.q, x.k, x.v, is_causal=True)
    rows.append(row(is_causal, path="SDPA", mask="is_causal=True", expected_to_fail=decode and sdpa_top_left))
    if decode:
        top_left = partial(blocked, mask=_top_left_mask(n, tk, run.device))
        rows.append(row(top_left, path=run.blocked_torch, mask="top-left bool", expected_to_fail=True))
    return rows


def _top_left_mask(tq: int, tk: int, device: Any) -> Any:
    import torch

    return torch.from_numpy(causal_mask_top_left(tq, tk)).to(device)


def _window_rows(run: _Run, tq: int, tk: int, window: int) -> list[AttentionCase]:
    """``tq`` queries over a sliding ``window`` with left padding of batch element 1 reaching
    into the first query's window; every query still sees its own key (pad <= offset), so
    no row is empty. Paths: the blocked kernel (numpy f64 and torch) and SDPA with the mask."""
    import torch
    import torch.nn.functional as F

    offset = tk - tq
    pad = offset - min(window, offset) // 2
    x = run.inputs(tq, tk)
    padding = np.ones((run.batch, 1, tk), dtype=bool)
    padding[1:, :, :pad] = False
    padding_t = torch.from_numpy(padding).to(run.device)
    rules = {"causal_offset": offset, "window": window}
    ref = full_attention(x.q64, x.k64, x.v64, key_padding=padding, **rules)
    row = partial(
        _compare,
        case=f"window {window}, pad {pad}",
        mask="causal+window+pad",
        reference=ref,
        tq=tq,
        tk=tk,
        offset=offset,
        tolerance=run.tolerance,
    )
    numpy_run = partial(
        blocked_attention, x.q64, x.k64, x.v64, block_size=run.block_size, key_padding=padding, **rules
    )
    torch_run = partial(
        blocked_attention_torch, x.q, x.k, x.v, block_size=run.block_size, key_padding=padding_t, **rules
    )
    mask = visibility_torch(tq, tk, device=run.device, key_padding=padding_t, **rules)
    return [
        row(numpy_run, path="blocked numpy f64", tolerance=TOLERANCES["float64"]),
        row(torch_run, path=run.blocked_torch),
        row(partial(F.scaled_dot_product_attention, x.q, x.k, x.v, attn_mask=mask), path="SDPA"),
    ]


def run(request: AttentionCheckRequest) -> AttentionCheckResult:
    """``infer-opt attention check``: :func:`check_attention` of the request (no more new
    queries than keys)."""
    if request.tq > request.tk:
        raise InvalidInput(
            "--tq", request.tq, f"must be <= --tk = {request.tk} (new queries cannot outnumber the keys)"
        )
    return check_attention(**{f: getattr(request, f) for f in request.__dataclass_fields__})
