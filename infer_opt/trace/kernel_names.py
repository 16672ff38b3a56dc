"""The family of a GPU kernel from its name alone: what a CUDA-graph replay's kernels still say.

A replayed graph's kernels carry no aten op and no shapes, but their names tell which library
ran and what it did: cuBLAS/cuBLASLt (``sm90_xmma_gemm_*``, ``ampere_*gemm*``, ``nvjet_*``),
CUTLASS, hipBLASLt/Tensile (``Cijk_*``) and Triton matmuls are GEMMs; FlashAttention 2/3
(``flash_fwd*``), FlashInfer (``BatchDecodeWith*``), vLLM's paged and Triton attention
(``paged_attention*``, ``kernel_unified_attention_*``, ``_fwd_kernel``), AITER/CK (``fmha*``,
``Fmha*``) and MLA kernels are attention; and so on for norms, rotary embeddings, activations,
MoE routing and grouped GEMMs, collectives (NCCL/RCCL, custom all-reduce), sampling, KV-cache
writes, quantization, copies and plain elementwise kernels.

:func:`kernel_family` tries :data:`RULES` in order and returns the first family whose pattern
occurs in the name (case-insensitive), or ``None``: an unknown name gets no family, never a
guessed one. The order settles names that match several patterns: a collective or a memcpy
first, a torch.compile (Inductor) kernel by its own naming scheme, MoE before GEMM (its grouped
GEMMs are MoE), KV-cache writes before attention (``reshape_and_cache_flash``), convolutions
before GEMMs (implicit-GEMM convolutions) and activations (cuDNN's ``*_relu_*`` variants), norms
before quantization (a fused ``add_rmsnorm_quant`` is a norm). The families share the op
table's words where they overlap (``matmul``, ``attention``, ``norm``, ``softmax``,
``elementwise``, ``reduction``, ``copy``, ``communication``, ``conv``).

Pure: the standard library only.
"""

from __future__ import annotations

import re
from functools import lru_cache

#: families a kernel's own name gives that its template arguments may refine (an
#: ``elementwise_kernel<..., silu_kernel>`` is an activation, a ``reduce_kernel<ArgMaxOps>`` sampling)
GENERIC = frozenset({"elementwise", "reduction", "index", "copy", "scan_sort"})

#: the families a name can get (in the order of :data:`RULES`, each once)
FAMILIES = (
    "communication",
    "copy",
    "memset",
    "moe",
    "kv_cache",
    "attention",
    "norm",
    "rotary",
    "conv",
    "matmul",
    "quantize",
    "softmax",
    "sampling",
    "activation",
    "index",
    "scan_sort",
    "reduction",
    "pooling",
    "elementwise",
)

_ACTIVATION = r"silu|gelu|swiglu|geglu|swish|act_and_mul|relu|sigmoid|tanh|mish|hardswish"

#: (family, pattern) in the order they are tried
RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (family, re.compile(pattern, re.IGNORECASE))
    for family, pattern in (
        (
            "communication",
            r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce"
            r"|custom_?ar|one_?shot|two_?shot|multimem|sendrecv|msccl|mscclpp|quickreduce",
        ),
        ("copy", r"^memcpy|^\[?memcpy"),
        ("memset", r"^memset"),
        (
            "moe",
            r"moe|_matmul_ogs|topk_?gating|topk_?softmax|_combined_routing|_sum_bitmatrix"
            r"|_finalize_matmul_scatter|routingIndices|expert|grouped_?topk",
        ),
        (
            "kv_cache",
            r"reshape_and_cache|concat_and_cache|store_kvcache|kv_?cache_(write|store|update)"
            r"|kv_indices|copy_page_indices|copy_blocks|swap_blocks",
        ),
        (
            "attention",
            r"flash_?(fwd|bwd|attn|decoding|mla)|flash::|flashattn|fmha|paged_?attention|unified_attention"
            r"|attn_fwd|attn_bwd|^_fwd_kernel|^_attn|attention|BatchDecodeWith|BatchPrefillWith"
            r"|SinglePrefillWith|SingleDecodeWith|(^|_|::)mla(_|\b)|_mla|merge_?(attn_)?states|reduce_segments"
            r"|lean_?atten|decode_?atten",
        ),
        (
            "norm",
            r"rms_?norm|layer_?norm|group_?norm|batch_?norm|instance_?norm|RowwiseMoments"
            r"|GammaBeta|bn_fw|bn_bw|norm2d",
        ),
        ("rotary", r"rotary|rope_|_rope|mrope"),
        (
            "conv",
            r"conv|fprop|dgrad|wgrad|winograd|implicit_?gemm|igemm_|im2col|im2d2col|scudnn|fft2d"
            r"|nchwToNhwc|nhwcToNchw|cask_cudnn",
        ),
        (
            "matmul",
            r"gemm|gemv|^Cijk_|cutlass|cublas|nvjet|xmma|matmul|^bmm_|_bmm|wmma|hipblaslt|splitKreduce"
            r"|^dot_kernel|magma",
        ),
        ("quantize", r"quant|fp8|fp4|mxfp|e4m3|e5m2"),
        ("softmax", r"softmax"),
        ("sampling", r"argmax|argmin|(?<!up)(?<!down)sampl|top_?k|top_?p|min_?p|gumbel|multinomial|penalt"),
        ("activation", _ACTIVATION),
        ("index", r"gather|scatter|index|embedding|take_along"),
        ("scan_sort", r"scan|sort|cumsum|rocprim|cub::|histogram|unique"),
        ("reduction", r"reduce|reduction|_sum_|sum_kernel|mean|norm_kernel"),
        ("pooling", r"pool"),
        ("copy", r"copy|CatArray|transpose|permute|contiguous|cat_"),
        (
            "elementwise",
            r"elementwise|fill|functor|fused_dropout|distribution|multi_tensor_apply|tensorop|upsample"
            r"|arange|pointwise|clamp|where|masked",
        ),
    )
)

#: torch.compile (Inductor) kernels: ``triton_{poi,red,per,tem}_fused_<ops>_<n>``
_INDUCTOR = re.compile(r"^triton_(poi|red|per|tem)_", re.IGNORECASE)


@lru_cache(maxsize=65536)
def kernel_family(name: object) -> str | None:
    """The family of a kernel called ``name`` (see the module docstring), or ``None``."""
    if not isinstance(name, str) or not name:
        return None
    found = _INDUCTOR.match(name)
    if found:
        return _inductor_family(found.group(1).lower(), name)
    head = _first_match(_head(name))
    if head is not None and head not in GENERIC:
        return head
    return _first_match(name) or head


def _head(name: str) -> str:
    """The kernel's own name: no ``void``, template arguments or parameters (a KV-cache type
    among an attention kernel's template arguments does not make it a KV-cache write)."""
    return re.split(r"[<(]", name.removeprefix("void "), maxsplit=1)[0]


def _first_match(text: str) -> str | None:
    for family, pattern in RULES:
        if pattern.search(text):
            return family
    return None


def _inductor_family(kind: str, name: str) -> str:
    """An Inductor kernel's family from the ops fused into it (its name lists them)."""
    lower = name.lower()
    if kind == "tem":
        return "conv" if "conv" in lower else "matmul"
    if "rsqrt" in lower and re.search(r"mean|var|pow", lower):
        return "norm"
    if "softmax" in lower or ("amax" in lower and "exp" in lower):
        return "softmax"
    if re.search(_ACTIVATION, lower):
        return "activation"
    if re.search(r"\bcos\b|_cos_|_sin_|rotary|rope", lower):
        return "rotary"
    return "reduction" if kind in ("red", "per") else "elementwise"


__all__ = ["FAMILIES", "GENERIC", "RULES", "kernel_family"]
