"""FLOPs and bytes moved by one aten call, from its arguments and outputs.

FLOPs, in this order of preference:

1. **infer-opt's formulas** for the fused scaled-dot-product-attention kernels
   (``_scaled_dot_product_flash_attention_for_cpu``, ``_scaled_dot_product_flash_attention``,
   ``..._efficient_attention``, ``..._cudnn_attention``, ``..._fused_attention_overrideable``,
   and ``scaled_dot_product_attention`` itself when a model runs under ``inference_mode`` and
   composite ops arrive undecomposed; likewise ``linear`` and ``matmul``: 2·K per output):
   ``2·B·Hq·Tq·Tk·d_qk + 2·B·Hq·Tq·Tk·d_v`` (QKᵀ and PV), **halved for a causal call**
   (``is_causal=True``: the work a kernel that skips masked blocks does) — the one convention
   of ``profile``, ``predict`` and ``trace`` (:data:`infer_opt.trace.op_costs.CAUSAL_CONVENTION`;
   torch's own formula counts it dense) — and handles grouped-query attention (fewer
   key/value heads). torch 2.13 has no formula for the CPU kernel and counts it as zero.
2. **torch's registry** ``torch.utils.flop_counter.flop_registry`` (mm, addmm, bmm, baddbmm,
   convolutions, ...), the formulas ``FlopCounterMode`` uses.
3. **A nominal count** for pointwise ops (1 FLOP per output element), reductions (1 per input
   element) and a few fused normalisation/softmax kernels (:data:`NOMINAL_FLOPS_PER_ELEMENT`).
   These ops are bandwidth-bound by a wide margin; the count only keeps them off the
   "zero FLOPs" list.

Everything else counts zero and is reported by name (``flops_source == "none"``).

Bytes: every tensor input is read once and every output written once, at the size of the
memory it spans (a broadcast, stride-0 dimension is read once). Views and other aliasing ops
(view, reshape-as-view, transpose, permute, expand, slice, select, unsqueeze, as_strided, t,
alias, detach, _unsafe_view, ...) and ``empty`` move nothing. A copy into a destination
(``copy_``, ``fill_``, ``zero_``) does not read it; a scatter-like write (``index_put_``)
writes only the values it is given.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

#: ops that return a view of (or an alias to) an input: no data moves
ALIAS_OPS = frozenset(
    {
        "aten::view",
        "aten::_unsafe_view",
        "aten::_reshape_alias",
        "aten::view_as",
        "aten::transpose",
        "aten::permute",
        "aten::expand",
        "aten::expand_as",
        "aten::slice",
        "aten::select",
        "aten::narrow",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::as_strided",
        "aten::t",
        "aten::alias",
        "aten::detach",
        "aten::detach_",
        "aten::lift_fresh",
        "aten::split",
        "aten::split_with_sizes",
        "aten::chunk",
        "aten::unbind",
        "aten::unflatten",
        "aten::diagonal",
        "aten::unfold",
        "aten::view_as_real",
        "aten::view_as_complex",
        "aten::_conj",
        "aten::_neg_view",
        "aten::resolve_conj",
        "aten::resolve_neg",
        "aten::movedim",
        "aten::swapaxes",
    }
)
#: allocations that write nothing
EMPTY_OPS = frozenset({"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty"})
#: in-place writes whose destination is not read
WRITE_ONLY_DEST = frozenset({"aten::copy_", "aten::fill_", "aten::zero_"})
#: in-place scatters: only the values given are written
SCATTER_WRITES = frozenset(
    {"aten::index_put_", "aten::index_copy_", "aten::scatter_", "aten::_index_put_impl_"}
)

#: fused SDPA kernels whose q, k, v are the first three arguments in (B, H, T, d) layout
SDPA_KERNELS = frozenset(
    {
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::_scaled_dot_product_fused_attention_overrideable",
        # the composite op itself, seen undecomposed when a model runs under inference_mode
        "aten::scaled_dot_product_attention",
    }
)
#: composite matmuls seen undecomposed under inference_mode: 2 FLOPs per multiply-add, one
#: dot product of length K (the first input's last dimension) per output element
DOT_PRODUCT_OPS = frozenset({"aten::linear", "aten::matmul"})

#: nominal FLOPs per element of the (first) input for fused kernels that are not tagged
#: pointwise: layer norm ≈ mean, centre, square, sum, scale, affine (2) ≈ 7; softmax ≈ max,
#: subtract, exp, sum, divide = 5
NOMINAL_FLOPS_PER_ELEMENT = {
    "aten::native_layer_norm": 7,
    "aten::_softmax": 5,
    "aten::_log_softmax": 5,
    "aten::_fused_rms_norm": 4,
    "aten::native_group_norm": 7,
    "aten::native_batch_norm": 7,
}


_POINTWISE = getattr(torch.Tag, "pointwise", None)
_REDUCTION = getattr(torch.Tag, "reduction", None)
#: op tags that mark elementwise work (pointwise math and reductions)
ELEMENTWISE_TAGS = tuple(tag for tag in (_POINTWISE, _REDUCTION) if tag is not None)


def op_name(func: Any) -> str:
    """``aten.addmm.default`` -> ``"aten::addmm"`` (the name torch.profiler uses)."""
    return func._schema.name


def is_alias_op(func: Any) -> bool:
    """A view or alias: listed, or its schema returns an alias of an input without writing."""
    if op_name(func) in ALIAS_OPS:
        return True
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of the memory a tensor spans; a stride-0 (broadcast) dimension counts once."""
    elements = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride != 0:
            elements *= size
    if t.numel() == 0:
        elements = 0
    return elements * t.element_size()


def _tensors(tree: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(tree)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def op_bytes(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """Bytes read and written by one call (module docstring)."""
    name = op_name(func)
    if name in EMPTY_OPS or is_alias_op(func):
        return 0
    inputs: Iterable[Any] = args
    if name in WRITE_ONLY_DEST:
        inputs = args[1:]
    read = sum(tensor_bytes(t) for t in _tensors((tuple(inputs), kwargs)))
    if name in SCATTER_WRITES:
        values = args[2] if len(args) > 2 else kwargs.get("values", kwargs.get("source", kwargs.get("src")))
        written = sum(tensor_bytes(t) for t in _tensors(values))
    else:
        written = sum(tensor_bytes(t) for t in _tensors(out))
    return read + written


def sdpa_flops(query: Any, key: Any, value: Any) -> int:
    """``2·B·Hq·Tq·Tk·d_qk + 2·B·Hq·Tq·Tk·d_v`` for (B, H, T, d) shapes (dense; not halved for a
    causal mask). Key/value may have fewer heads (grouped-query attention)."""
    qs, ks, vs = (tuple(getattr(x, "shape", x)) for x in (query, key, value))
    if len(qs) < 3 or len(ks) < 3 or len(vs) < 3:
        raise ValueError(f"sdpa_flops needs (..., T, d) shapes, got {qs}, {ks}, {vs}")
    *lead, q_len, d_qk = qs
    k_len, d_v = ks[-2], vs[-1]
    batch_heads = 1
    for size in lead:
        batch_heads *= int(size)
    return 2 * batch_heads * q_len * k_len * (d_qk + d_v)


def _is_causal(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether an SDPA call was causal (``is_causal`` by keyword, or at its kernel's position:
    :data:`infer_opt.trace.op_costs.SDPA_OPS`, the positions the trace reader uses)."""
    from infer_opt.trace.op_costs import SDPA_OPS

    if "is_causal" in kwargs:
        return bool(kwargs["is_causal"])
    at = SDPA_OPS.get(name.split("::", 1)[-1], ("", "", None))[2]
    return at is not None and at < len(args) and isinstance(args[at], bool) and args[at]


def _registry() -> dict[Any, Any]:
    from torch.utils.flop_counter import flop_registry

    return flop_registry


def op_flops(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> tuple[int, str]:
    """``(flops, source)`` with source ``"infer-opt"``, ``"torch"``, ``"nominal"`` or ``"none"``."""
    name = op_name(func)
    if name in SDPA_KERNELS and len(args) >= 3:
        dense = sdpa_flops(args[0], args[1], args[2])
        return (dense // 2 if _is_causal(name, args, kwargs) else dense), "infer-opt"
    if name in DOT_PRODUCT_OPS and args and isinstance(args[0], torch.Tensor):
        outs = _tensors(out)
        if outs and args[0].ndim >= 1:
            return 2 * outs[0].numel() * int(args[0].shape[-1]), "infer-opt"
    formula = _registry().get(func._overloadpacket)
    if formula is not None:
        try:
            return int(formula(*args, **kwargs, out_val=out)), "torch"
        except Exception:  # a formula that cannot read these arguments: fall through
            pass
    if name in NOMINAL_FLOPS_PER_ELEMENT and args and isinstance(args[0], torch.Tensor):
        return NOMINAL_FLOPS_PER_ELEMENT[name] * args[0].numel(), "nominal"
    tags = getattr(func, "tags", ())
    if _POINTWISE is not None and _POINTWISE in tags:
        outs = _tensors(out)
        return (outs[0].numel() if outs else 0), "nominal"
    if _REDUCTION is not None and _REDUCTION in tags:
        ins = _tensors(args[:1])
        return (ins[0].numel() if ins else 0), "nominal"
    return 0, "none"


def shapes_of(args: tuple[Any, ...]) -> tuple[tuple[int, ...], ...]:
    """Shapes of the tensor arguments (tensor lists flattened), in order."""
    return tuple(tuple(int(s) for s in t.shape) for t in _tensors(args))


def dtype_of(args: tuple[Any, ...], out: Any) -> str:
    """The dtype of the first floating tensor among the inputs, else of the first tensor."""
    tensors = _tensors(args) + _tensors(out)
    for t in tensors:
        if t.is_floating_point():
            return str(t.dtype).removeprefix("torch.")
    return str(tensors[0].dtype).removeprefix("torch.") if tensors else ""
