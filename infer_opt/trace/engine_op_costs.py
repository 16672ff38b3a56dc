"""FLOPs and bytes of inference engines' custom ops (vLLM, SGLang, AITER, sgl-kernel) from
their recorded input shapes, as :mod:`infer_opt.trace.op_costs` does for aten ops.

A capture trace (:mod:`infer_opt.trace.capture`) gives a replayed graph the ``cpu_op`` s that
launched its kernels; many of them are the engines' own ops, registered with
``TORCH_LIBRARY`` (``_C::``, ``_C_cache_ops::``, ``sgl_kernel::``, ``aiter::``) or as Python
custom ops (``vllm::``, ``sglang::``). Their ``Input Dims``/``Input type`` hold every tensor
the kernel touches when the op writes into an ``out`` argument or in place, so the work is
in the shapes. Each formula below reads the op's arguments by their position in the op's
registered schema (checked against the engines' sources):

* **RMSNorm** (:data:`NORMS`), ``4`` FLOPs per element (``op_costs.NOMINAL_FLOPS_PER_ELEMENT``
  of ``rms_norm``), ``5`` with the fused residual add. Bytes: every tensor argument read or
  written once at its size, plus the outputs a functional form returns (``aiter::rms_norm(input,
  weight, eps, flag) -> out``: one more ``rows×hidden``) or an in-place form writes back
  (``_C::fused_add_rms_norm(input!, residual!, weight, eps)``: input and residual, two more).
  ``aiter::add_rmsnorm(out, input, residual_in, residual_out, weight, eps)``: ``4·n + h``
  elements, the same as the in-place form. Family ``rms_norm`` / ``rms_norm.add``, features
  ``(rows, hidden)``.
* **Gated activations** ``silu_and_mul``/``gelu_and_mul``/``gelu_tanh_and_mul``/``mul_and_silu``
  ``(out, input)``: ``out = act(x[..., :d]) · x[..., d:]``, 2 FLOPs per output element (the
  activation and the product, one each as every pointwise op counts); bytes the input read and
  the output written. Family ``activation.<op>``, features ``(rows, d)``.
* **Rotary embedding** ``rotary_embedding(positions, query!, key!?, head_size, cos_sin_cache,
  is_neox)`` (vLLM ``_C``, sgl-kernel, AITER): per token, ``(H_q + H_k)·rot_dim`` elements
  rotated in place (``rot_dim`` = the cache's last dim; a head's other elements untouched),
  ``3`` FLOPs each (a pair takes 4 products and 2 adds); bytes those elements read and written,
  the positions read and one cache row of ``rot_dim`` per token. Needs ``head_size`` recorded
  (``Concrete Inputs``). Family ``rotary``, features ``(tokens, heads, rot_dim)``.
* **KV-cache store** ``reshape_and_cache[_flash](key, value, key_cache!, value_cache!,
  slot_mapping, kv_cache_dtype, k_scale, v_scale)`` (vLLM) and ``sglang::store_cache(k, v,
  k_cache!, v_cache!, indices, row_bytes, num_split)``: each token's key and value rows read
  and written into the cache at the cache's dtype (an fp8 cache writes one byte an element),
  the slots read; the caches themselves are not read. Every row of the captured (padded) batch
  counts: a padded slot of ``-1`` that the kernel skips cannot be told from the shapes. Family
  ``kv_cache``, features ``(tokens, row elements)``.
* **Inductor pointwise kernels** ``triton_poi_*`` (``torch.compile``'s Triton kernels, recorded
  with their buffers and ``xnumel``/``ynumel``): the iteration size ``n`` is the last integer
  argument (``xnumel``), else the product of the last two (``ynumel·xnumel``), whichever is the
  size of one of its buffers (the output it writes); each buffer read or written once, at most
  ``n`` elements of it (a broadcast buffer at its size, a gathered one at the elements picked);
  ``n`` FLOPs. Without the recorded sizes (some kernels record none) there is no formula.
  Family ``triton_poi``.

**No formula** (their work is not in the shapes): ``vllm::moe_forward`` (the expert weights
are module state, not inputs, and which experts a batch's tokens reach — so the weight bytes —
are tensor values), ``vllm::unified_attention_with_output`` and SGLang's paged decode attention
(the context lengths are tensor values: ``kv_indptr`` holds them, its shape only the batch),
``SortTokens`` (its outputs are not recorded). Pure: no torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from infer_opt.trace.op_costs import _Arg, _esize, _literal, _numel, _tbytes, _tensors

#: the namespaces of the engines' custom ops (an ``aten::`` op of the same short name is not one)
ENGINE_NAMESPACES = frozenset({"_C", "_C_cache_ops", "_rocm_C", "sgl_kernel", "aiter", "vllm", "sglang"})

#: RMSNorm ops: short name -> (outputs written beyond the tensor arguments, fused residual add)
NORMS: dict[str, tuple[int, bool]] = {
    "rms_norm": (0, False),  # _C::rms_norm(out!, input, weight, eps)
    "rmsnorm": (0, False),  # aiter / sgl_kernel rmsnorm(out!, input, weight, eps, ...)
    "gemma_rmsnorm": (0, False),  # sgl_kernel::gemma_rmsnorm(out!, input, weight, eps, pdl)
    "rmsnorm2d_fwd": (1, False),  # aiter::rmsnorm2d_fwd(input, weight, eps, flag) -> out
    "rocm_aiter_rms_norm": (1, False),  # vllm::rocm_aiter_rms_norm(x, weight, eps) -> out
    "add_rmsnorm": (0, True),  # aiter::add_rmsnorm(out!, input, res_in, res_out!, weight, eps)
    "rmsnorm2d_fwd_with_add": (0, True),  # aiter, the same arguments (+ flag)
    "rmsnorm2d_fwd_with_add_ck": (0, True),
    "fused_add_rms_norm": (2, True),  # _C::fused_add_rms_norm(input!, residual!, weight, eps)
    "fused_add_rmsnorm": (2, True),  # sgl_kernel::fused_add_rmsnorm(input!, residual!, weight, eps, pdl)
    "gemma_fused_add_rmsnorm": (2, True),
    "rocm_aiter_rmsnorm2d_fwd_with_add": (2, True),  # vllm: (x, residual, weight, eps) -> (out, res_out)
}
#: ``aiter::rms_norm(input, weight, eps, flag)`` returns its output; ``_C::rms_norm`` writes ``out``
_FUNCTIONAL_RMS_NORM = frozenset({"aiter"})
#: FLOPs per normalised element (op_costs.NOMINAL_FLOPS_PER_ELEMENT["rms_norm"]), +1 for the add
RMS_NORM_FLOPS = 4
#: gated activations ``(out, input)`` with ``input`` twice ``out``'s last dim
ACTIVATIONS = frozenset({"silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul", "mul_and_silu"})
#: FLOPs per output element of a gated activation: the activation and the product
GATED_FLOPS = 2
#: FLOPs per rotated element (a pair: x1·cos − x2·sin, x2·cos + x1·sin)
ROTARY_FLOPS = 3
KV_STORES = frozenset({"reshape_and_cache", "reshape_and_cache_flash", "store_cache"})
TRITON_POINTWISE = "triton_poi_"

_Got = tuple[float, float, str, tuple[int, ...], None]


def _norm(name: str, namespace: str, p: Sequence[_Arg]) -> _Got | None:
    extra, fused = NORMS[name]
    if name == "rms_norm" and namespace in _FUNCTIONAL_RMS_NORM:
        extra = 1
    ts = _tensors(p)
    if len(ts) < 2:
        return None
    x = max(ts, key=lambda t: _numel(t.shape))
    if not x.shape:
        return None
    n, hidden = _numel(x.shape), x.shape[-1]
    nbytes = sum(_tbytes(t) for t in ts) + extra * n * _esize(x.dtype)
    flops = (RMS_NORM_FLOPS + (1 if fused else 0)) * float(n)
    return flops, float(nbytes), "rms_norm.add" if fused else "rms_norm", (n // max(hidden, 1), hidden), None


def _gated(name: str, namespace: str, p: Sequence[_Arg]) -> _Got | None:
    ts = _tensors(p)
    if len(ts) < 2 or not ts[0].shape or not ts[1].shape:
        return None
    out, x = ts[0], ts[1]
    if _numel(x.shape) != 2 * _numel(out.shape):
        return None  # not (out, input) with input = [gate | up]
    n = _numel(out.shape)
    d = out.shape[-1]
    return GATED_FLOPS * float(n), float(_tbytes(x) + _tbytes(out)), f"activation.{name}", (n // d, d), None


def _rotary(name: str, namespace: str, p: Sequence[_Arg]) -> _Got | None:
    if len(p) < 5:
        return None
    positions, query, key, cache = p[0], p[1], p[2], p[4]
    head_size = _literal(p[3].value)
    if any(a.kind != "tensor" for a in (positions, query, cache)) or not cache.shape:
        return None
    if not isinstance(head_size, int) or isinstance(head_size, bool) or head_size <= 0:
        return None
    tokens, rot_dim = _numel(positions.shape), cache.shape[-1]
    if tokens == 0 or rot_dim > head_size:
        return None
    heads = [_numel(t.shape) // (tokens * head_size) for t in (query, key) if t.kind == "tensor"]
    rotated = tokens * sum(heads) * rot_dim
    esize = _esize(query.dtype)
    nbytes = 2 * rotated * esize + _tbytes(positions) + tokens * rot_dim * _esize(cache.dtype)
    return ROTARY_FLOPS * float(rotated), float(nbytes), "rotary", (tokens, sum(heads), rot_dim), None


def _kv_store(name: str, namespace: str, p: Sequence[_Arg]) -> _Got | None:
    ts = _tensors(p)
    if len(ts) < 5:
        return None
    k, v, k_cache, v_cache, slots = ts[:5]
    tokens = _numel(slots.shape)
    if tokens == 0 or not k.shape:
        return None
    written = _numel(k.shape) * _esize(k_cache.dtype) + _numel(v.shape) * _esize(v_cache.dtype)
    nbytes = _tbytes(k) + _tbytes(v) + _tbytes(slots) + written
    return 0.0, float(nbytes), "kv_cache", (tokens, _numel(k.shape) // tokens), None


def _triton_pointwise(name: str, namespace: str, p: Sequence[_Arg]) -> _Got | None:
    ints: list[int] = []
    for a in reversed(p):  # the trailing integers: xnumel, after it ynumel (a 2-D kernel)
        value = _literal(a.value) if a.kind == "scalar" else None
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0 or len(ints) == 2:
            break
        ints.append(value)
    ts = _tensors(p)
    sizes = {_numel(t.shape) for t in ts}
    # the iteration size is the size of a buffer it writes: xnumel, else ynumel·xnumel (other
    # integer arguments, a vocabulary's bounds, are not sizes)
    n = next((c for c in (ints[:1], ints[:2]) if c and math.prod(c) in sizes), None)
    if n is None:
        return None
    total = math.prod(n)
    nbytes = sum(min(_numel(t.shape), total) * _esize(t.dtype) for t in ts)
    return float(total), float(nbytes), "triton_poi", (total,), None


_Formula = Callable[[str, str, Sequence[_Arg]], "_Got | None"]


def engine_formula(name: str) -> tuple[str, str, _Formula] | None:
    """``(namespace, short name, formula)`` of an engine op the module docstring lists; None
    for any other op (an ``aten::`` op keeps :mod:`op_costs`' formulas)."""
    if name.startswith(TRITON_POINTWISE):
        return "", name, _triton_pointwise
    namespace, sep, short = name.partition("::")
    if not sep or namespace not in ENGINE_NAMESPACES:
        return None
    if short in NORMS:
        return namespace, short, _norm
    if short in ACTIVATIONS:
        return namespace, short, _gated
    if short == "rotary_embedding":
        return namespace, short, _rotary
    if short in KV_STORES:
        return namespace, short, _kv_store
    return None


__all__ = ["ENGINE_NAMESPACES", "NORMS", "engine_formula"]
