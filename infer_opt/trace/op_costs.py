"""FLOPs and bytes of one aten op from what ``torch.profiler`` recorded (``record_shapes=True``).

A ``cpu_op``'s ``args`` hold ``Input Dims`` (one entry per argument: a shape, ``[]`` for a
scalar, a list of shapes for a ``TensorList``), ``Input type`` (``c10::BFloat16``, ``float``,
``Scalar``, ``ScalarList``, ``TensorList``, ``''`` for None), ``Input Strides`` and ``Concrete
Inputs`` (the scalars' values as text). Outputs are not recorded: they are derived from the op
(matmul, broadcasting, reductions' ``dim``/``keepdim``, conv's geometry).

Formulas (the same counts as :mod:`infer_opt.profilers.flops`, which ``profile``
uses on live tensors):

* matmul family: ``F = 2·B·M·N·K`` (``mm``, ``bmm``, ``matmul`` with broadcast batch dims,
  ``linear``); ``addmm``/``baddbmm``/``linear`` with a bias add ``M·N`` per batch (torch's
  registry, and so ``profile``, leaves the bias out);
* conv: ``2·N·C_out·Π(out spatial)·(C_in/groups)·Π(kernel)`` (torch's ``conv_flop``; transposed
  convs count over the input's spatial size), when stride/padding/dilation/groups are recorded;
  its features are the implicit GEMM's ``M, N, K`` per group and ``groups`` (:func:`conv_gemm`);
* fused attention (flash / efficient / cuDNN / math entry points, and the
  ``_flash_attention_forward``/``_efficient_attention_forward`` kernels' own ops):
  ``2·B·H·Tq·Tk·(d_qk + d_v)`` (= ``4·B·H·Tq·Tk·d``), halved for a causal mask under the
  ``causal="half"`` convention, dense under ``"full"``;
* nominal counts for the bandwidth-bound rest (:data:`NOMINAL_FLOPS_PER_ELEMENT` for norms and
  softmax; 1 per output element for pointwise ops, 1 per input element for reductions); zero for
  embeddings, copies and concatenations.

Bytes: each tensor input read once at the size of the memory it spans (a stride-0 dimension
once), the output written once; an ``out=`` tensor is the output, not an input; ``copy_``/
``fill_`` do not read their destination; views and allocations move nothing. A ``TensorList``'s
dtype is not recorded: the op's other tensors' dtype, else ``list_dtype``, else fp32 (said in
``OpCost.assumed``). Families are the operator model's (:mod:`infer_opt.profilers.op_families`):
``gemm.<ab>``, ``bmm.<ab>``, ``layer_norm``, ``softmax``, ``embedding``, ``<op>.<s|t|b>[.nc][.mixed]``,
``<op>.r``, ``copy.<src><dst>``, ``cat.<c|s>`` ..., and ``attention_flash``/``_efficient``/
``_cudnn``/``_math`` for GPU attention. Pure: no torch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infer_opt.trace.devices import DTYPE_BYTES, normalize_dtype

CAUSAL_CONVENTIONS = ("half", "full")
#: **the one causal-attention convention** of ``trace``, ``profile`` and ``predict``: a call
#: with ``is_causal=True`` counts half the dense QKᵀ and PV FLOPs (the work a kernel that skips
#: masked blocks does); ``trace --causal-flops full`` counts it dense, as torch's FlopCounterMode
CAUSAL_CONVENTION = "half"

#: nominal FLOPs per input element (profilers/flops.py NOMINAL_FLOPS_PER_ELEMENT)
NOMINAL_FLOPS_PER_ELEMENT = {
    "layer_norm": 7,
    "native_layer_norm": 7,
    "_fused_rms_norm": 4,
    "rms_norm": 4,
    "native_group_norm": 7,
    "group_norm": 7,
    "native_batch_norm": 7,
    "batch_norm": 7,
    "_native_batch_norm_legit_no_training": 7,
    "_softmax": 5,
    "softmax": 5,
    "_safe_softmax": 5,
    "_log_softmax": 5,
    "log_softmax": 5,
}
_NORM_FAMILY = {"layer_norm": "layer_norm", "native_layer_norm": "layer_norm", "_fused_rms_norm": "rms_norm"}
_NORM_FAMILY |= {"rms_norm": "rms_norm", "native_group_norm": "group_norm", "group_norm": "group_norm"}
_NORM_FAMILY |= {"native_batch_norm": "batch_norm", "batch_norm": "batch_norm"}
_NORM_FAMILY |= {"_native_batch_norm_legit_no_training": "batch_norm"}

ALIAS_OPS = frozenset(
    [
        "view",
        "_unsafe_view",
        "_reshape_alias",
        "view_as",
        "transpose",
        "permute",
        "expand",
        "expand_as",
        "slice",
        "select",
        "narrow",
        "unsqueeze",
        "squeeze",
        "as_strided",
        "t",
        "alias",
        "detach",
        "detach_",
        "lift_fresh",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "unflatten",
        "diagonal",
        "unfold",
        "view_as_real",
        "view_as_complex",
        "_conj",
        "_neg_view",
        "resolve_conj",
        "resolve_neg",
        "movedim",
        "swapaxes",
        "reshape",
        "flatten",
        "numpy_T",
    ]
)
EMPTY_OPS = frozenset(["empty", "empty_like", "empty_strided", "new_empty", "resize_", "zeros_like_meta"])
POINTWISE_OPS = frozenset(
    [
        "add",
        "sub",
        "rsub",
        "mul",
        "div",
        "true_divide",
        "floor_divide",
        "remainder",
        "pow",
        "neg",
        "abs",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log1p",
        "log2",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "sin",
        "cos",
        "tanh",
        "sigmoid",
        "relu",
        "relu6",
        "gelu",
        "silu",
        "mish",
        "hardswish",
        "hardsigmoid",
        "leaky_relu",
        "elu",
        "softplus",
        "clamp",
        "clamp_min",
        "clamp_max",
        "where",
        "masked_fill",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "logical_not",
        "bitwise_and",
        "bitwise_or",
        "bitwise_not",
        "maximum",
        "minimum",
        "erf",
        "erfc",
        "sign",
        "round",
        "floor",
        "ceil",
        "trunc",
        "lerp",
        "addcmul",
        "addcdiv",
        "fmod",
        "dropout",
        "native_dropout",
        "square",
        "threshold",
        "nan_to_num",
        "isnan",
        "isinf",
        "sgn",
    ]
)
REDUCTION_OPS = frozenset(
    [
        "sum",
        "mean",
        "amax",
        "amin",
        "max",
        "min",
        "argmax",
        "argmin",
        "prod",
        "norm",
        "linalg_vector_norm",
        "var",
        "std",
        "all",
        "any",
        "cumsum",
        "logsumexp",
        "count_nonzero",
    ]
)
_COPIES = {"clone": "clone", "contiguous": "clone", "_to_copy": "to_copy", "to": "to_copy"}
_COPIES |= {"cat": "cat", "stack": "cat", "_cat": "cat"}
#: positional arity without ``out`` (an extra trailing tensor is an ``out=`` argument)
_ARITY = {"mm": 2, "bmm": 2, "addmm": 5, "baddbmm": 5, "matmul": 2, "add": 3, "sub": 3, "mul": 2}
_ARITY |= {"div": 2, "cat": 2, "neg": 1, "exp": 1, "silu": 1, "relu": 1, "tanh": 1, "sigmoid": 1}
_ARITY |= {"rsqrt": 1, "sqrt": 1, "gelu": 2, "pow": 2, "abs": 1, "reciprocal": 1, "sin": 1, "cos": 1}
#: ScalarType codes as ``Concrete Inputs`` record a dtype argument
SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "fp16", 6: "fp32", 7: "fp64"}
SCALAR_TYPES |= {11: "bool", 15: "bf16", 23: "fp8", 24: "fp8", 25: "fp8", 26: "fp8"}

#: attention entry points: family, (q, k, v) layout ("bhtd" / "bthd"), is_causal position
SDPA_OPS: dict[str, tuple[str, str, int | None]] = {
    "_scaled_dot_product_flash_attention": ("attention_flash", "bhtd", 4),
    "_flash_attention_forward": ("attention_flash", "bthd", 8),
    "_scaled_dot_product_flash_attention_for_cpu": ("attention_flash_cpu", "bhtd", 4),
    "_scaled_dot_product_efficient_attention": ("attention_efficient", "bhtd", 6),
    "_efficient_attention_forward": ("attention_efficient", "bthd", 9),
    "_scaled_dot_product_cudnn_attention": ("attention_cudnn", "bhtd", 6),
    "_scaled_dot_product_fused_attention_overrideable": ("attention_fused", "bhtd", 5),
    "scaled_dot_product_attention": ("attention_math", "bhtd", 5),
    "_scaled_dot_product_attention_math": ("attention_math", "bhtd", 5),
}


@dataclass(frozen=True)
class OpCost:
    """FLOPs and bytes of one op call (module docstring)."""

    flops: float
    bytes: float
    family: str
    dtype: str  # short name (bf16, fp32, ...): the first floating tensor's, else the first tensor's
    shapes: str  # shapes_key of the call
    causal: bool | None = None  # attention only
    features: tuple[int, ...] = ()  # the operator model's features of this family (op_families)
    assumed: str = ""  # what was assumed (a TensorList's dtype), '' when nothing


@dataclass(frozen=True)
class _Arg:
    kind: str  # tensor, list, scalar, none
    shape: tuple[int, ...] = ()
    dtype: str = ""
    strides: tuple[int, ...] | None = None
    shapes: tuple[tuple[int, ...], ...] = ()  # a TensorList's
    value: str = ""  # Concrete Inputs text


#: a recorded dimension beyond this is not a real tensor's (a corrupt or hand-edited trace)
MAX_DIM = 1 << 40


def _is_shape(x: Any) -> bool:
    return isinstance(x, (list, tuple)) and all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_DIM for v in x
    )


def _listed(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else []


#: ``Input type`` s that name no tensor (their ``Input Dims`` entry is ``[]``)
_NOT_TENSORS = ("Scalar", "ScalarList", "GenericList", "Device", "Layout", "str")
_NOT_TENSORS += ("ScalarType", "MemoryFormat")


def parse_args(args: Mapping) -> list[_Arg]:
    """The recorded arguments, one :class:`_Arg` each (a field of the wrong type counts as not
    recorded; a dimension that is negative, not an int or absurd makes its argument no tensor)."""
    dims = _listed(args.get("Input Dims"))
    types = _listed(args.get("Input type"))
    strides = _listed(args.get("Input Strides"))
    concrete = _listed(args.get("Concrete Inputs"))
    out = []
    for i, d in enumerate(dims):
        t = str(types[i]) if i < len(types) else ""
        value = str(concrete[i]) if i < len(concrete) else ""
        s = strides[i] if i < len(strides) else None
        if t == "TensorList" or (
            isinstance(d, list) and d and all(_is_shape(x) for x in d) and not _is_shape(d)
        ):
            out.append(_Arg("list", shapes=tuple(tuple(x) for x in d if _is_shape(x)), value=value))
        elif t and t not in _NOT_TENSORS and _is_shape(d):
            out.append(
                _Arg("tensor", tuple(d), normalize_dtype(t), tuple(s) if _is_shape(s) else None, value=value)
            )
        elif t:
            out.append(_Arg("scalar", value=value))
        else:
            out.append(_Arg("none", value=value))
    return out


def _numel(shape: Sequence[int]) -> int:
    return math.prod(int(s) for s in shape)


def _span(a: _Arg) -> int:
    """Elements of the memory a tensor spans (a stride-0 dimension once)."""
    if _numel(a.shape) == 0:
        return 0
    if a.strides is None or len(a.strides) != len(a.shape):
        return _numel(a.shape)
    return math.prod(s for s, st in zip(a.shape, a.strides, strict=True) if st != 0)


def _esize(dtype: str) -> int:
    return DTYPE_BYTES.get(dtype, 4)


def _tbytes(a: _Arg) -> int:
    return _span(a) * _esize(a.dtype)


def _contiguous(a: _Arg) -> bool:
    if a.strides is None:
        return True
    expected = 1
    for size, stride in zip(reversed(a.shape), reversed(a.strides), strict=True):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _layout(a: _Arg) -> str:
    """op_families.layout on recorded strides: n (row-major), t (transposed) or s."""
    if len(a.shape) < 2 or a.strides is None:
        return "n"
    rows, cols = a.shape[-2], a.shape[-1]
    s_row, s_col = a.strides[-2], a.strides[-1]
    if s_col == 1 or cols == 1:
        return "n" if s_row == cols or rows == 1 or s_row >= cols else "s"
    if s_row == 1 or rows == 1:
        return "t"
    return "s"


def _tensors(parsed: Sequence[_Arg]) -> list[_Arg]:
    return [a for a in parsed if a.kind == "tensor"]


def dtype_key(args: Mapping) -> str:
    """The call's dtype: the first floating tensor's short name, else the first tensor's."""
    return _dtype_of(parse_args(args))


def _dtype_of(parsed: Sequence[_Arg]) -> str:
    ts = _tensors(parsed)
    for a in ts:
        if a.dtype.startswith(("fp", "bf")):
            return a.dtype
    return ts[0].dtype if ts else ""


def shape_dims(args: Mapping) -> tuple[tuple[int, ...], ...]:
    """The call's tensor shapes as dimension lists (a TensorList's members in order): what
    ``trace --json`` gives per op group, as ``profile`` does."""
    out: list[tuple[int, ...]] = []
    for a in parse_args(args):
        if a.kind == "tensor":
            out.append(a.shape)
        elif a.kind == "list":
            out.extend(a.shapes)
    return tuple(out)


def shapes_key(args: Mapping) -> str:
    """The call's tensor shapes as text, TensorLists nested: ``(1, 141, 512), (512, 512)``."""
    parts = []
    for a in parse_args(args):
        if a.kind == "tensor":
            parts.append(str(a.shape).replace(",)", ")"))
        elif a.kind == "list":
            parts.append("[" + ", ".join(str(s).replace(",)", ")") for s in a.shapes) + "]")
    return ", ".join(parts)


def _broadcast(shapes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = [s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0]
        out.append(max(sizes) if sizes and min(sizes) != 0 else 0)
    return tuple(out)


def _literal(text: str) -> Any:
    t = text.strip()
    if t in ("True", "False"):
        return t == "True"
    if re.fullmatch(r"-?\d+", t):
        return int(t)
    if t.startswith("[") and t.endswith("]"):
        return [int(x) for x in re.findall(r"-?\d+", t)]
    try:
        return float(t)
    except ValueError:
        return t


# ---------------------------------------------------------------------------- formulas

_Formula = Callable[[str, list[_Arg], str], tuple[float, float, str, tuple[int, ...], bool | None] | None]


def _matmul_dims(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int, tuple[int, ...]] | None:
    """(batch, M, N, K, output shape) of torch.matmul(a, b) with broadcasting."""
    if not a or not b:
        return None
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    m, k = a2[-2], a2[-1]
    n = b2[-1]
    batch = _broadcast([a2[:-2], b2[:-2]])
    out = (*batch, *((m,) if len(a) > 1 else ()), *((n,) if len(b) > 1 else ()))
    return _numel(batch), m, n, k, out


def _matmul(name: str, p: list[_Arg], causal: str) -> Any:
    ts = _tensors(p)
    bias = None
    if name in ("addmm", "baddbmm") and len(ts) >= 3:
        bias, a, b = ts[0], ts[1], ts[2]
    elif name == "linear" and len(ts) >= 2:
        a, w = ts[0], ts[1]
        b = _Arg(
            "tensor", tuple(reversed(w.shape)), w.dtype, tuple(reversed(w.strides)) if w.strides else None
        )
        bias = ts[2] if len(ts) > 2 else None
    elif len(ts) >= 2:
        a, b = ts[0], ts[1]
    else:
        return None
    dims = _matmul_dims(a.shape, b.shape)
    if dims is None:
        return None
    batch, m, n, k, out_shape = dims
    flops = 2.0 * batch * m * n * k + (batch * m * n if bias is not None else 0)
    read = _tbytes(a) + (_numel(w.shape) * _esize(w.dtype) if name == "linear" else _tbytes(b))
    read += _tbytes(bias) if bias is not None else 0
    nbytes = read + _numel(out_shape) * _esize(a.dtype)
    if name in ("bmm", "baddbmm"):
        return flops, nbytes, f"bmm.{_layout(a)}{_layout(b)}", (batch, m, n, k), None
    if name in ("mm", "addmm") or (name == "linear" and len(a.shape) == 2):
        return flops, nbytes, f"gemm.{_layout(a)}{_layout(b)}", (m, n, k), None
    if batch == 1 or name == "linear":  # folded into one GEMM over the rows
        return flops, nbytes, f"gemm.{_layout(a)}{_layout(b)}", (batch * m, n, k), None
    return flops, nbytes, f"bmm.{_layout(a)}{_layout(b)}", (batch, m, n, k), None


def _attention(name: str, p: list[_Arg], causal: str) -> Any:
    family, layout, causal_at = SDPA_OPS[name]
    ts = _tensors(p[:3])
    if len(ts) < 3 or any(len(t.shape) < 3 for t in ts):
        return None
    q, k, v = ts
    if layout == "bthd":  # (B, T, H, d): move T next to d
        qs, ks, vs = ((*t.shape[:-3], t.shape[-2], t.shape[-3], t.shape[-1]) for t in (q, k, v))
    else:
        qs, ks, vs = q.shape, k.shape, v.shape
    bh = _numel(qs[:-2])
    tq, d_qk, tk, d_v = qs[-2], qs[-1], ks[-2], vs[-1]
    is_causal = None
    if causal_at is not None and causal_at < len(p):
        value = _literal(p[causal_at].value)
        is_causal = bool(value) if isinstance(value, (bool, int)) else None
    flops = 2.0 * bh * tq * tk * (d_qk + d_v)
    if is_causal and causal == "half":
        flops /= 2
    mask = [t for t in _tensors(p[3:]) if len(t.shape) >= 2]
    nbytes = sum(_tbytes(t) for t in (q, k, v, *mask)) + bh * tq * d_v * _esize(q.dtype)
    return flops, nbytes, family, (bh, tq, tk, d_qk), is_causal


def _conv(name: str, p: list[_Arg], causal: str) -> Any:
    ts = _tensors(p[:3])
    if len(ts) < 2:
        return None
    x, w = ts[0], ts[1]
    lists = [_literal(a.value) for a in p]
    if name == "cudnn_convolution":  # (input, weight, padding, stride, dilation, groups, ...)
        padding, stride, dilation, transposed, out_pad, groups = (
            lists[2],
            lists[3],
            lists[4],
            False,
            None,
            lists[5],
        )
    elif name == "conv2d" or name in (
        "conv1d",
        "conv3d",
    ):  # (input, weight, bias, stride, padding, dilation, groups)
        stride, padding, dilation, transposed, out_pad, groups = *lists[3:6], False, None, lists[6]
    else:  # convolution / _convolution: (..., stride, padding, dilation, transposed, output_padding, groups)
        stride, padding, dilation, transposed, out_pad, groups = lists[3:9]
    if not all(isinstance(v, list) for v in (stride, padding, dilation)) or not isinstance(groups, int):
        return None
    # an unbatched input (conv2d of a C×H×W image) is one batch of it
    xs = tuple(x.shape) if len(x.shape) == len(w.shape) else (1, *x.shape)
    spatial_in, kernel = xs[2:], w.shape[2:]
    n, nd = xs[0], len(kernel)
    stride, padding, dilation = ((v * nd)[:nd] if len(v) == 1 else v for v in (stride, padding, dilation))
    if transposed:
        out_pad = out_pad if isinstance(out_pad, list) and len(out_pad) == nd else [0] * nd
        c_out = w.shape[1] * groups
        out_sp = [(i - 1) * s - 2 * pd + dl * (kk - 1) + op + 1 for i, s, pd, dl, kk, op in
                  zip(spatial_in, stride, padding, dilation, kernel, out_pad, strict=True)]  # fmt: skip
        flops = 2.0 * n * _numel(spatial_in) * _numel(w.shape)
    else:
        c_out = w.shape[0]
        out_sp = [(i + 2 * pd - dl * (kk - 1) - 1) // s + 1 for i, s, pd, dl, kk in
                  zip(spatial_in, stride, padding, dilation, kernel, strict=True)]  # fmt: skip
        flops = 2.0 * n * c_out * _numel(out_sp) * w.shape[1] * _numel(kernel)
    if min(out_sp, default=1) < 1 or min(stride, default=1) < 1:
        return None  # a geometry torch would refuse: no output to count
    out_elems = n * c_out * _numel(out_sp)
    nbytes = sum(_tbytes(t) for t in ts) + out_elems * _esize(x.dtype)
    return flops, nbytes, f"conv{nd}d", conv_gemm(n, xs[1], c_out, spatial_in, out_sp, kernel,
                                                  groups, bool(transposed)), None  # fmt: skip


def conv_gemm(
    n: int,
    c_in: int,
    c_out: int,
    spatial_in: Sequence[int],
    spatial_out: Sequence[int],
    kernel: Sequence[int],
    groups: int,
    transposed: bool,
) -> tuple[int, int, int, int]:
    """A convolution's features: the implicit GEMM it runs as, per group, ``(M, N, K, groups)``
    with ``2·groups·M·N·K`` its FLOPs — ``M = N_batch·Π(out spatial)``, ``N = C_out/groups``,
    ``K = (C_in/groups)·Π(kernel)``; a transposed one over the input's positions, ``M =
    N_batch·Π(in spatial)``, ``N = (C_out/groups)·Π(kernel)``, ``K = C_in/groups``. cuDNN and
    MIOpen run a convolution as that GEMM, so convolutions are near each other when their GEMMs
    are: by batch, channels, image and kernel size one at a time, timesformer's patch embedding
    (128 images at 224²) was nearest a ViT's of 4 images (a GEMM 32× shorter, at a third of its
    rate), not owlv2's (one 1008² image, M = 5184 against 25088, at the same rate)."""
    g = max(int(groups), 1)
    if transposed:
        return n * _numel(spatial_in), c_out // g * _numel(kernel), c_in // g, g
    return n * _numel(spatial_out), c_out // g, c_in // g * _numel(kernel), g


def _norm_softmax(name: str, p: list[_Arg], causal: str) -> Any:
    ts = _tensors(p)
    if not ts:
        return None
    x = ts[0]
    n = _numel(x.shape)
    nbytes = sum(_tbytes(t) for t in ts) + n * _esize(x.dtype)
    if name in _NORM_FAMILY:
        hidden_arg = _literal(p[1].value) if len(p) > 1 else None
        hidden = (
            _numel(hidden_arg)
            if isinstance(hidden_arg, list) and hidden_arg
            else (x.shape[-1] if x.shape else 1)
        )
        return (
            NOMINAL_FLOPS_PER_ELEMENT[name] * float(n),
            nbytes,
            _NORM_FAMILY[name],
            (n // max(hidden, 1), hidden),
            None,
        )
    dim = _literal(p[1].value) if len(p) > 1 else -1
    cols = x.shape[dim] if isinstance(dim, int) and x.shape and -len(x.shape) <= dim < len(x.shape) else 1
    return NOMINAL_FLOPS_PER_ELEMENT[name] * float(n), nbytes, "softmax", (n // max(cols, 1), cols), None


def _pointwise(name: str, p: list[_Arg], causal: str) -> Any:
    ts = _tensors(p)
    if not ts:
        return None
    out_shape = _broadcast([t.shape for t in ts]) if name not in ("where", "masked_fill") or ts else ()
    n = _numel(out_shape)
    dtype = _dtype_of(p) or ts[0].dtype
    if name in (
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "isnan",
        "isinf",
        "logical_not",
        "logical_and",
        "logical_or",
    ):
        dtype = "bool"
    nbytes = sum(_tbytes(t) for t in ts) + n * _esize(dtype)  # an in-place op writes self back
    operands = [t for t in ts if len(t.shape) > 0]
    pattern = "s" if len(operands) <= 1 else ("t" if all(_numel(t.shape) == n for t in operands) else "b")
    strided = any(not _contiguous(t) for t in operands if _numel(t.shape) == n)
    short = name.rstrip("_")
    if short == "gelu" and any(a.value.strip("'\"") == "tanh" for a in p):
        short = "gelu_tanh"
    mixed = len({t.dtype for t in operands if t.dtype in FLOAT_DTYPES}) > 1
    return float(n), nbytes, pointwise_family(short, pattern, strided, mixed), (n,), None


#: floating-point dtypes (short names): operands of two of them make a pointwise op ``.mixed``
FLOAT_DTYPES = frozenset({"fp8", "bf16", "fp16", "fp32", "fp64"})


def pointwise_family(op: str, pattern: str, strided: bool, mixed: bool) -> str:
    """``<op>.<s|t|b>[.nc][.mixed]``: ``.nc`` for a non-contiguous full-size operand, ``.mixed``
    for tensor operands (not 0-dim) of two floating dtypes — ATen's casting loop (CUDA's
    ``unrolled_elementwise_kernel``), not the vectorized one: an in-place bf16 ``add_`` of an
    fp32 tensor over 20736 elements took 4.4 µs on the H100, the same add of bf16 over 72192
    1.6 µs."""
    return f"{op}.{pattern}{'.nc' if strided else ''}{'.mixed' if mixed else ''}"


def _reduction(name: str, p: list[_Arg], causal: str) -> Any:
    ts = _tensors(p)
    if not ts:
        return None
    x = ts[0]
    n = _numel(x.shape)
    dims = next(
        (v for v in (_literal(a.value) for a in p[1:3]) if isinstance(v, (list, int)) and v is not True), None
    )
    if isinstance(dims, bool):
        dims = None
    if dims is None or dims == []:
        n_out = 1
    else:
        axes = {d % max(len(x.shape), 1) for d in ([dims] if isinstance(dims, int) else dims)}
        n_out = _numel([s for i, s in enumerate(x.shape) if i not in axes])
    if name == "cumsum":
        n_out = n
    out_dtype = "int64" if name in ("argmax", "argmin", "count_nonzero") else x.dtype
    nbytes = _tbytes(x) + n_out * _esize(out_dtype)
    return float(n), nbytes, f"{name}.r", (n_out, max(n // max(n_out, 1), 1)), None


def _gather_dim(p: list[_Arg], at: int, ndim: int) -> int | None:
    """The ``dim`` argument at position ``at``, normalised; a 1-D tensor's is 0 whatever was
    recorded; None when it was not recorded for an N-D tensor (no formula can say which rows)."""
    value = _literal(p[at].value) if at < len(p) else None
    if isinstance(value, int) and not isinstance(value, bool) and -ndim <= value < ndim:
        return value % ndim
    return 0 if ndim == 1 else None


def _sliced(shape: tuple[int, ...], dim: int, n: int) -> int:
    """Elements of ``shape`` with its ``dim`` replaced by ``n`` (the rows an index picks)."""
    return _numel(shape[:dim] + shape[dim + 1 :]) * n


def _gather(name: str, p: list[_Arg], causal: str) -> Any:
    """Gather, scatter and index ops, **by their dim**: ``embedding(weight, indices)`` picks
    rows of ``weight`` (dim 0); ``index_select(x, dim, index)`` picks ``len(index)`` slices of
    ``x`` along ``dim``; ``gather(x, dim, index)`` one element per index element;
    ``scatter(_add)_(self, dim, index, src)`` writes one per index element (``_add`` reads it
    too); ``index_add_``/``index_copy_(self, dim, index, source)`` write ``source`` 's slices.
    Bytes: the index read, the picked elements read, the output (or the written slices)
    written; an accumulating write also reads its destination. FLOPs: one add per element added."""
    ts = _tensors(p)
    if len(ts) < 2:
        return None
    if name == "embedding":
        weight, index = ts[0], ts[1]
        dim: int | None = 0
    else:
        weight, index = ts[0], ts[1]
        dim = _gather_dim(p, 1, len(weight.shape)) if weight.shape else None
    if dim is None or not weight.shape:
        return None
    esize = _esize(weight.dtype)
    picked = _numel(index.shape)
    if name in ("embedding", "index_select"):
        moved = _sliced(weight.shape, dim, picked)
        flops, nbytes = 0.0, _tbytes(index) + 2.0 * moved * esize
    elif name == "gather":
        moved = picked
        flops, nbytes = 0.0, _tbytes(index) + 2.0 * moved * esize
    else:  # scatter / index_add / index_copy: the source's elements into self
        source = ts[2] if len(ts) > 2 else None
        moved = _numel(source.shape) if source is not None else picked
        accumulate = "add" in name or "reduce" in name
        nbytes = _tbytes(index) + moved * esize * (3.0 if accumulate else 2.0)
        flops = float(moved) if accumulate else 0.0
    return flops, float(nbytes), "embedding", (picked, max(moved // max(picked, 1), 1)), None


#: the ops :func:`_gather` counts (their in-place and out= forms share the formula)
GATHER_OPS = ("embedding", "index_select", "gather", "scatter", "scatter_add", "scatter_reduce")
GATHER_OPS += ("index_add", "index_copy")


def _copy(name: str, p: list[_Arg], causal: str, list_dtype: str = "fp32") -> Any:
    ts = _tensors(p)
    lists = [a for a in p if a.kind == "list"]
    if name == "copy_" and len(ts) >= 2:
        dst, src = ts[0], ts[1]
        tag = "".join("c" if _contiguous(t) else "s" for t in (src, dst))
        return (
            0.0,
            _tbytes(src) + _numel(dst.shape) * _esize(dst.dtype),
            f"copy.{tag}",
            (_numel(dst.shape),),
            None,
        )
    if name in ("fill_", "zero_") and ts:
        return (
            0.0,
            _numel(ts[0].shape) * _esize(ts[0].dtype),
            f"{name.rstrip('_')}.s",
            (_numel(ts[0].shape),),
            None,
        )
    family = _COPIES.get(name)
    if family is None:
        return None
    if lists:
        esize = _esize(_dtype_of(p) or list_dtype)
        n = sum(_numel(s) for a in lists for s in a.shapes)
        return 0.0, 2.0 * n * esize, f"{family}.c", (n,), None
    if not ts:
        return None
    x = ts[0]
    out_dtype = x.dtype
    if family == "to_copy":
        code = next(
            (
                v
                for v in (_literal(a.value) for a in p[1:3])
                if isinstance(v, int) and not isinstance(v, bool)
            ),
            None,
        )
        out_dtype = SCALAR_TYPES.get(code, x.dtype) if code is not None else x.dtype
    n = _numel(x.shape)
    tag = "c" if all(_contiguous(t) for t in ts) else "s"
    return 0.0, _tbytes(x) + n * _esize(out_dtype), f"{family}.{tag}", (n,), None


def _foreach(name: str, p: list[_Arg], causal: str, list_dtype: str = "fp32") -> Any:
    lists = [a for a in p if a.kind == "list"]
    if not lists:
        return None
    esize = _esize(list_dtype)
    n = sum(_numel(s) for s in lists[0].shapes)
    read = sum(_numel(s) for a in lists for s in a.shapes) * esize
    short = name.removeprefix("_foreach_")
    reads_dest = short.rstrip("_") != "copy"
    nbytes = (read if reads_dest else read - n * esize) + n * esize
    return float(n) if reads_dest else 0.0, float(nbytes), f"foreach.{short.rstrip('_')}", (n,), None


_STRUCTURED: dict[str, _Formula] = {n: _matmul for n in ("mm", "bmm", "addmm", "baddbmm", "matmul", "linear")}
_STRUCTURED |= dict.fromkeys(SDPA_OPS, _attention)
_STRUCTURED |= dict.fromkeys(
    ("convolution", "_convolution", "cudnn_convolution", "conv2d", "conv1d", "conv3d"), _conv
)
_STRUCTURED |= dict.fromkeys(NOMINAL_FLOPS_PER_ELEMENT, _norm_softmax)
_STRUCTURED |= dict.fromkeys(GATHER_OPS, _gather)


def _formula(name: str) -> _Formula | None:
    if name in _STRUCTURED:
        return _STRUCTURED[name]
    base = name.rstrip("_")
    if base in GATHER_OPS:
        return lambda _n, p, causal: _gather(base, p, causal)
    if base in POINTWISE_OPS:
        return _pointwise
    if base in REDUCTION_OPS:
        return _reduction
    return None


def _drop_out_arg(name: str, parsed: list[_Arg]) -> list[_Arg]:
    """Without a trailing ``out=`` tensor (one argument more than the op's arity)."""
    arity = _ARITY.get(name.rstrip("_"))
    if arity is not None and len(parsed) == arity + 1 and parsed[-1].kind in ("tensor", "list"):
        return parsed[:-1]
    return parsed


def op_cost(
    name: str, args: Mapping, *, causal: str = "half", list_dtype: str | None = None
) -> OpCost | None:
    """FLOPs, bytes and family of one recorded call (module docstring); None when no formula
    applies or the arguments were not recorded (``Input Dims`` absent)."""
    if causal not in CAUSAL_CONVENTIONS:
        from infer_opt.errors import InvalidInput

        raise InvalidInput("causal", causal, "one of: half, full")
    if not args or "Input Dims" not in args or not isinstance(name, str):
        return None
    try:
        return _op_cost(name, args, causal, list_dtype)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError, IndexError, KeyError):
        return None  # recorded arguments no formula can read (corrupt, or a new op's layout)


def _op_cost(name: str, args: Mapping, causal: str, list_dtype: str | None) -> OpCost | None:
    short = name.split("::", 1)[-1]
    parsed = _drop_out_arg(short, parse_args(args))
    dtype = _dtype_of(parsed)
    shapes = shapes_key(args)
    assumed = ""
    if any(a.kind == "list" for a in parsed) and not dtype:
        assumed = f"TensorList dtype {list_dtype or 'fp32'} (not recorded)"
    engine = _engine_formula(name)
    if engine is not None:  # an engine's custom op (vLLM, SGLang, AITER): engine_op_costs
        got = engine[2](engine[1], engine[0], parse_args(args))
    elif short in ALIAS_OPS or short in EMPTY_OPS:
        return OpCost(0.0, 0.0, f"view.{short}", dtype, shapes)
    elif short.startswith("_foreach_"):
        got = _foreach(short, parsed, causal, list_dtype or dtype or "fp32")
    elif short in _COPIES or short in ("copy_", "fill_", "zero_"):
        got = _copy(short, parsed, causal, list_dtype or "fp32")
    else:
        formula = _formula(short)
        got = formula(short, parsed, causal) if formula is not None else None
    if got is None:
        return None
    flops, nbytes, family, features, is_causal = got
    if not (0 <= float(flops) < math.inf and 0 <= float(nbytes) < math.inf):
        return None
    return OpCost(
        float(flops), float(nbytes), family, dtype or (list_dtype or ""), shapes, is_causal, features, assumed
    )


def _engine_formula(name: str) -> Any:
    from infer_opt.trace.engine_op_costs import engine_formula  # it imports this module's helpers

    return engine_formula(name)
