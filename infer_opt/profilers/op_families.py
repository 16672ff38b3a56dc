"""Which calibration family an aten call belongs to, and its features (docs/prediction.md).

One function, :func:`signature`, reads a call's arguments and names its family and features;
the calibration suite (what was measured) and the predictor (what a model will run) both go
through it, so a measured shape and a predicted one are keyed alike:

===================  ==========================================  ==========================
family               calls                                        features
===================  ==========================================  ==========================
``gemm.<ab>``        ``mm(A, B)``, ``addmm(bias, A, B)``;           ``M, N, K``
                     ``<ab>`` = each operand's layout, ``n``
                     row-major, ``t`` transposed (``nn.Linear``
                     runs ``gemm.nt``)
``bmm.<ab>``         ``bmm``, ``baddbmm`` (explicit attention)     ``batch, M, N, K``
``sdpa.causal``      fused attention, causal, ``Tq = Tk``          ``B·H, T, d``
``sdpa.full``        fused attention, no mask, ``Tq = Tk``         ``B·H, T, d``
``sdpa.<…>.tail``    the two above on a CPU with ``T`` not a           ``B·H, T, d``
                     multiple of the vector width
                     (:func:`cpu_vector_lanes`)
``sdpa.decode``      fused attention, one query, no mask           ``B·H, Tk, d``
``sdpa.decode.gqa``  the same with grouped keys/values (``g``      ``B·H, Tk, d, g``
                     query heads share one; ``H`` counts queries)
``sdpa.masked``      fused attention with an explicit mask         ``B·H, Tq, Tk, d``
``layer_norm``       ``native_layer_norm``                         ``rows, hidden``
``rms_norm``         ``_fused_rms_norm``                           ``rows, hidden``
``softmax``          ``_softmax``, ``_safe_softmax`` (last dim)    ``rows, columns``
``embedding``        ``embedding``, ``index_select`` (rows)        ``indices, dim``
``conv<n>d``         ``convolution`` (the implicit GEMM it runs     ``M, N, K, groups``
                     as, per group; ``trace.op_costs.conv_gemm``)
``<op>.<p>[.nc]``    pointwise ops; ``p``: ``s`` one tensor         ``elements``
                     operand, ``t`` same-size tensors, ``b``
                     broadcast; ``.nc`` a non-contiguous operand;
                     then ``.mixed`` for two floating dtypes (a
                     casting kernel)
``<op>.r``           reductions (``mean``, ``sum``, ``amax`` …)    ``outputs, reduced``
``copy.<src><dst>``  ``copy_``; ``c`` contiguous, ``s`` strided     ``elements``
``clone.<c|s>``,     ``clone``, ``cat``, ``_to_copy``              ``elements``
``cat.<c|s>``, …
``view.<op>``        views and aliases (no data moves)             —
``other.<op>``       anything else (predicted by the roofline)     —
===================  ==========================================  ==========================

:class:`FamilyRecorder` is the op recorder of :mod:`infer_opt.profilers.op_recorder` that also
keeps each call's signature and the storages it touches (for the cache-state rule of
:func:`infer_opt.cost_models.op_model.reuse_distances`). It leaves out ``prim::`` calls (tensor
metadata queries that fake tensors route through the dispatcher) and answers a boolean
``.item()`` on a fake tensor with ``True``, after recording it (models check "no padding" /
"no packed sequences" that way; on real data the answer is the same for the inputs used here).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from infer_opt.cost_models.op_model import Touches
from infer_opt.errors import RunFailure
from infer_opt.profilers import flops as fl
from infer_opt.profilers import op_recorder
from infer_opt.trace.op_costs import conv_gemm, pointwise_family

#: ``mm`` and ``addmm`` share one family: the same GEMM (``addmm`` starts from the bias, a few
#: percent at most, which its bytes in the base roofline carry)
_MATMULS = {"aten::mm": "gemm", "aten::addmm": "gemm"}
_BATCHED = {"aten::bmm": "bmm", "aten::baddbmm": "bmm"}
_NORMS = {"aten::native_layer_norm": "layer_norm", "aten::_fused_rms_norm": "rms_norm"}
_SOFTMAX = frozenset({"aten::_softmax", "aten::_safe_softmax", "aten::softmax"})
_GATHERS = frozenset({"aten::embedding", "aten::index_select"})
#: convolutions, keyed by the implicit GEMM they run as (as the GPU traces key them)
_CONVS = frozenset({"aten::convolution", "aten::_convolution"})
_COPIES = {
    "aten::clone": "clone",
    "aten::cat": "cat",
    "aten::_to_copy": "to_copy",
    "aten::contiguous": "clone",
}


@dataclass(frozen=True)
class Signature:
    """A call's family, features and the bytes its base roofline sees."""

    family: str
    features: tuple[int, ...]
    work_bytes: float
    touches: Touches


def _bound_args(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for i, arg in enumerate(func._schema.arguments):
        if i < len(args):
            out[arg.name] = args[i]
        elif arg.name in kwargs:
            out[arg.name] = kwargs[arg.name]
    return out


def _tensors(values: Sequence[Any]) -> list[torch.Tensor]:
    out = []
    for value in values:
        if isinstance(value, torch.Tensor):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            out.extend(v for v in value if isinstance(v, torch.Tensor))
    return out


def layout(t: torch.Tensor) -> str:
    """``n`` (row-major in its last two dimensions), ``t`` (column-major: a transposed view) or
    ``s`` (any other strides)."""
    if t.ndim < 2:
        return "n"
    rows, cols = t.shape[-2], t.shape[-1]
    if t.stride(-1) == 1 or cols == 1:
        return "n" if t.stride(-2) == cols or rows == 1 or t.stride(-2) >= cols else "s"
    if t.stride(-2) == 1 or rows == 1:
        return "t"
    return "s"


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _matmul(name: str, bound: dict[str, Any]) -> tuple[str, tuple[int, ...], list[str]]:
    a = bound["self"] if name == "aten::mm" else bound["mat1"]
    b = bound["mat2"]
    m, k = int(a.shape[0]), int(a.shape[1])
    n = int(b.shape[1])
    return f"{_MATMULS[name]}.{layout(a)}{layout(b)}", (m, n, k), ["mat2"]


def _batched(name: str, bound: dict[str, Any]) -> tuple[str, tuple[int, ...], list[str]]:
    a = bound["batch1"] if "batch1" in bound else bound["self"]
    b = bound["batch2"] if "batch2" in bound else bound["mat2"]
    batch, m, k = (int(s) for s in a.shape)
    return (
        f"{_BATCHED[name]}.{layout(a)}{layout(b)}",
        (batch, m, int(b.shape[2]), k),
        ["batch2" if "batch2" in bound else "mat2"],
    )


#: float32 lanes of the CPU's vector unit, by torch's CPU capability (what ATen's kernels were
#: built for); other capabilities (NEON, no vectors) count 4
_CPU_LANES = {"AVX512": 16, "AVX2": 8, "SVE256": 8}


@functools.cache
def cpu_vector_lanes() -> int:
    """How many float32 values one CPU vector holds, as ATen's kernels use it: 16 with AVX-512.
    A fused attention finishes each row's last ``T mod lanes`` keys in scalar code (its softmax's
    exponentials), which costs more than a whole vector: on a 2-core Xeon a causal attention over
    47 tokens takes 1.8× one over 48 (docs/prediction.md)."""
    return _CPU_LANES.get(torch.backends.cpu.get_cpu_capability(), 4)


def _sdpa(bound: dict[str, Any]) -> tuple[str, tuple[int, ...], list[str]]:
    q, k = bound["query"], bound["key"]
    bh = _numel(q.shape[:-2])
    tq, tk, d = int(q.shape[-2]), int(k.shape[-2]), int(q.shape[-1])
    main = ["key", "value"]
    if bound.get("attn_mask") is not None:
        return "sdpa.masked", (bh, tq, tk, d), main
    if tq == 1:
        group = int(q.shape[-3]) // int(k.shape[-3]) if q.ndim >= 3 and k.ndim >= 3 else 1
        if group > 1:
            return "sdpa.decode.gqa", (bh, tk, d, group), main
        return "sdpa.decode", (bh, tk, d), main
    if tq != tk:
        return "sdpa.cross", (bh, tq, tk, d), main
    family = "sdpa.causal" if bound.get("is_causal") else "sdpa.full"
    tail = q.device.type == "cpu" and tq % cpu_vector_lanes() != 0
    return family + (".tail" if tail else ""), (bh, tq, d), main


def _pointwise(short: str, tensors: list[torch.Tensor], out: Any) -> tuple[str, tuple[int, ...]]:
    outs = [t for t in _tensors([out]) if isinstance(t, torch.Tensor)]
    n = int(outs[0].numel()) if outs else (int(tensors[0].numel()) if tensors else 0)
    operands = [t for t in tensors if t.ndim > 0]
    if len(operands) <= 1:
        pattern = "s"
    elif all(t.numel() == n for t in operands):
        pattern = "t"
    else:
        pattern = "b"
    full = [t for t in operands if t.numel() == n]
    strided = any(not t.is_contiguous() for t in full)
    mixed = len({t.dtype for t in operands if t.dtype.is_floating_point}) > 1
    return pointwise_family(short, pattern, strided, mixed), (n,)


_POINTWISE_TAG = getattr(torch.Tag, "pointwise", None)
_REDUCTION_TAG = getattr(torch.Tag, "reduction", None)


def _structured(name: str, bound: dict[str, Any]) -> tuple[str, tuple[int, ...], list[str]] | None:
    """Matmuls, attention, norms, softmax and gathers: families with shape features."""
    if name in _MATMULS:
        return _matmul(name, bound)
    if name in _BATCHED:
        return _batched(name, bound)
    if name in fl.SDPA_KERNELS and name != "aten::scaled_dot_product_attention":
        return _sdpa(bound)
    if name in _NORMS:
        hidden = _numel(bound["normalized_shape"])
        return _NORMS[name], (int(bound["input"].numel()) // max(hidden, 1), hidden), []
    if name in _SOFTMAX:
        x = bound["self"]
        cols = int(x.shape[bound.get("dim", -1)]) if x.ndim else 1
        return "softmax", (int(x.numel()) // max(cols, 1), cols), []
    if name in _GATHERS:
        weight_name = "weight" if "weight" in bound else "self"
        index = bound.get("indices", bound.get("index"))
        weight = bound[weight_name]
        dim = int(bound.get("dim", 0)) % max(weight.ndim, 1)  # embedding's rows: dim 0
        width = int(weight.numel()) // max(int(weight.shape[dim]), 1) if weight.ndim else 1
        return "embedding", (int(index.numel()), width), [weight_name]  # a row: the rest of dim
    return None


def _conv(bound: dict[str, Any], out: Any) -> tuple[str, tuple[int, ...], list[str]]:
    """``conv<n>d`` over :func:`infer_opt.trace.op_costs.conv_gemm`'s ``M, N, K, groups``."""
    x, w = bound["input"], bound["weight"]
    shape = tuple(int(s) for s in (x.shape if x.ndim == w.ndim else (1, *x.shape)))
    groups, transposed = int(bound.get("groups", 1)), bool(bound.get("transposed", False))
    c_out = int(w.shape[1]) * groups if transposed else int(w.shape[0])
    outs = _tensors([out])
    spatial_out = tuple(int(s) for s in outs[0].shape[-(w.ndim - 2) :]) if outs else shape[2:]
    kernel = tuple(int(s) for s in w.shape[2:])
    features = conv_gemm(shape[0], shape[1], c_out, shape[2:], spatial_out, kernel, groups, transposed)
    return f"conv{w.ndim - 2}d", features, ["weight"]


def _data_movement(name: str, bound: dict[str, Any], out: Any) -> tuple[str, tuple[int, ...]] | None:
    """Copies, clones, concatenations and dtype conversions."""
    if name == "aten::copy_":
        src, dst = bound["src"], bound["self"]
        tag = "".join("c" if t.is_contiguous() else "s" for t in (src, dst))
        return f"copy.{tag}", (int(dst.numel()),)
    if name in _COPIES:
        outs = _tensors([out])
        tag = "c" if all(t.is_contiguous() for t in _tensors(list(bound.values()))) else "s"
        return f"{_COPIES[name]}.{tag}", (int(outs[0].numel()) if outs else 0,)
    return None


def family_of(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
) -> tuple[str, tuple[int, ...], list[str]]:
    """``(family, features, main operand names)`` of one call (module docstring)."""
    name = fl.op_name(func)
    bound = _bound_args(func, args, kwargs)
    short = name.removeprefix("aten::")
    if name == "aten::gelu" and bound.get("approximate") == "tanh":
        short = "gelu_tanh"  # another algorithm, another cost
    if name in _CONVS:
        return _conv(bound, out)
    structured = _structured(name, bound)
    if structured is not None:
        return structured
    if name in fl.EMPTY_OPS or fl.is_alias_op(func):
        return f"view.{short}", (), []
    moved = _data_movement(name, bound, out)
    if moved is not None:
        return (*moved, [])
    tags = getattr(func, "tags", ())
    tensors = _tensors(list(bound.values()))
    if _POINTWISE_TAG is not None and _POINTWISE_TAG in tags:
        # an in-place op runs the same kernel (the trace formulas name it alike: add_ → add)
        return (*_pointwise(short.rstrip("_"), tensors, out), [])
    if _REDUCTION_TAG is not None and _REDUCTION_TAG in tags and tensors:
        outs = _tensors([out])
        n_out = max(int(outs[0].numel()), 1) if outs else 1
        return f"{short}.r", (n_out, max(int(tensors[0].numel()) // n_out, 1)), []
    return f"other.{short}", (), []


def _storage(t: torch.Tensor, keep: list[Any] | None) -> int:
    """The identity of ``t``'s memory. Real tensors: the address (memory the allocator hands out
    again is physically the same, and as warm). Fake tensors have no memory: their storage object
    is kept alive in ``keep`` while recording, so a later one cannot take its address and pass
    for it."""
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return id(t)
    if keep is not None and _is_fake(t):
        keep.append(storage)
        return int(storage._cdata)
    return int(storage.data_ptr()) or int(storage._cdata)


def signature(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any, keep: list[Any] | None = None
) -> Signature:
    """The call's :class:`Signature`: family, features, base-roofline bytes, touched memory
    (``keep`` holds fake tensors' storages alive, see :func:`_storage`)."""
    family, features, main_names = family_of(func, args, kwargs, out)
    bound = _bound_args(func, args, kwargs)
    name = fl.op_name(func)
    write_only = name in fl.WRITE_ONLY_DEST
    reads: list[tuple[int, int]] = []
    main: list[int] = []
    for arg_name, value in bound.items():
        if write_only and arg_name == "self":
            continue
        for t in _tensors([value]):
            if arg_name in main_names:
                main.append(len(reads))
            nbytes = fl.tensor_bytes(t)
            if family == "embedding" and arg_name in ("weight", "self"):
                nbytes = sum(fl.tensor_bytes(o) for o in _tensors([out]))  # the rows gathered
            reads.append((_storage(t, keep), nbytes))
    outs = _tensors([bound["self"]]) if write_only or name.endswith("_") else _tensors([out])
    writes = [(_storage(t, keep), fl.tensor_bytes(t)) for t in outs]
    if fl.is_alias_op(func) or name in fl.EMPTY_OPS:
        reads, writes, main = [], [], []
    work = float(sum(b for _, b in reads) + sum(b for _, b in writes))
    return Signature(family, features, work, Touches(tuple(reads), tuple(writes), tuple(main)))


_VIEWS = frozenset({torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default})


def aten_view_strides(
    old_shape: Sequence[int], old_strides: Sequence[int], new_shape: Sequence[int]
) -> tuple[int, ...] | None:
    """The strides ATen's ``computeStride`` gives a view of ``old`` with ``new_shape`` (None when
    no view exists). torch's meta implementation gives size-1 dimensions other strides, and
    ``matmul`` compares strides strictly when it decides to fold a batch into one ``mm``, so a
    fake run would take ``bmm`` where the real one takes ``mm``."""
    if not old_shape:
        return tuple(1 for _ in new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    base = old_strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[d]
        if d == 0 or (old_shape[d - 1] != 1 and old_strides[d - 1] != tensor_numel * base):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * base
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                base, tensor_numel, view_numel = old_strides[d - 1], 1, 1
    return tuple(new_strides) if view_d == -1 else None


def _with_aten_view_strides(source: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out`` restrided as a real run's view would be (:func:`aten_view_strides`)."""
    if source.numel() == 0:
        return out
    strides = aten_view_strides(tuple(source.shape), source.stride(), tuple(out.shape))
    if strides is None or strides == tuple(out.stride()):
        return out
    return torch.ops.aten.as_strided.default(out, tuple(out.shape), strides, out.storage_offset())


def _is_fake(t: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


class FamilyRecorder(op_recorder.OpRecorder):
    """:class:`~infer_opt.profilers.op_recorder.OpRecorder` that also keeps each call's
    :class:`Signature` (``signatures[i]`` belongs to ``calls[i]``) and counts module calls."""

    def __init__(self) -> None:
        super().__init__()
        self.signatures: list[Signature] = []
        #: fake storages seen, kept alive so their identities stay unique
        self.storages: list[Any] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if func.namespace == "prim":
            return func(*args, **kwargs)
        if func is torch.ops.aten._local_scalar_dense.default and args and _is_fake(args[0]):
            return self._fake_item(func, args[0])
        before = len(self.calls)
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if len(self.calls) > before:
            self.signatures.append(signature(func, args, kwargs, out, self.storages))
        if func in _VIEWS and _is_fake(out):
            out = _with_aten_view_strides(args[0], out)
        return out

    def _fake_item(self, func: Any, value: torch.Tensor) -> Any:
        """A fake tensor has no value: a boolean check is answered True (module docstring); any
        other ``.item()`` cannot be recorded without data."""
        if value.dtype != torch.bool:
            raise RunFailure(
                "the model reads a tensor's value (.item()) while recording on fake tensors, which hold no "
                "data"
            )
        module, module_type = self.module_stack[-1] if self.module_stack else ("", "")
        self.calls.append(
            op_recorder.OpCall(
                index=len(self.calls),
                name=fl.op_name(func),
                shapes=((),),
                dtype="bool",
                flops=0,
                flops_source="none",
                bytes=1,
                module=module,
                module_type=module_type,
                category="other",
                match_shapes=(),
            )
        )
        self.signatures.append(Signature("other._local_scalar_dense", (), 1.0, Touches()))
        return True


class ModuleCounter:
    """Counts ``nn.Module`` calls (a global forward pre-hook) while active."""

    def __init__(self) -> None:
        self.count = 0

    def __enter__(self) -> ModuleCounter:
        self._handle = torch.nn.modules.module.register_module_forward_pre_hook(self._hook)
        return self

    def _hook(self, _module: Any, _inputs: Any) -> None:
        self.count += 1

    def __exit__(self, *_exc: object) -> None:
        self._handle.remove()
