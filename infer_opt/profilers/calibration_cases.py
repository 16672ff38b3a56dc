"""The operator calibration suite's cases: what ``infer-opt calibrate`` measures (docs/prediction.md).

Each *group* is a set of cases (one operator call on seeded inputs at one shape) timed together
(see :mod:`infer_opt.profilers.calibration`). The shapes are a generic log-spaced grid — the
same for every model, never tuned to one — and every shape measured lands in the calibration
file. What a case measures is whatever aten calls it makes: ``F.linear`` yields points for
``gemm.nt`` *and* for the ``t`` view inside it; the family of each call comes from
:func:`infer_opt.profilers.op_families.signature`, the same function the predictor uses.

Groups (``standard`` grid on a CPU; ``tiny`` is a handful of shapes per group, for tests):

* ``linear`` — ``F.linear`` (``gemm.nt``), M (tokens) 1, 2, 3, 4, 6, 8, 12, 16 (small-M BLAS
  paths change every few rows), then 24 … 2048; N 64…8192 and K 64…4096 log₂-spaced (N 32768
  with K 256 and 1024 for lm-head-like shapes); at most 10⁹ FLOPs and 32 MiB of weight a call;
  hot, warm (weights in the last-level cache) up to M = 256 and, for M ≤ 32, cold (weights in
  memory).
* ``addmm_nn`` — ``addmm`` with a row-major weight (``gemm.nn``, ``transformers``' ``Conv1D``).
* ``bmm`` — batched matmuls of the explicit attention path, ``QKᵀ`` (``nt``) and ``PV`` (``nn``).
* ``sdpa`` — ``scaled_dot_product_attention``: causal and unmasked square (prefill), one query
  over a long cache (decode, warm and cold), an explicit mask (several queries over a cache);
  (B·H, T, d) log-spaced.
* ``norms`` — layer norm, RMS norm (``F.rms_norm``: its pointwise parts), softmax; (rows,
  hidden) log-spaced.
* ``elementwise`` — add, mul, sub, div (same-size, broadcast row, scalar), gelu (erf and
  tanh), silu, neg, rsqrt, pow, exp, tanh; strided operands (rotary embeddings); reductions
  (mean, sum, amax, argmax); sizes 2⁴…2²² elements.
* ``memory`` — copies (contiguous, into a KV-cache slice, from a transposed view), transposes
  made contiguous, ``cat``, embedding gathers.
* ``views`` — view, transpose, t, expand, slice, select, unsqueeze, split, … (no data moves:
  the dispatch cost).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F

from infer_opt.errors import InvalidInput
from infer_opt.profilers.op_families import cpu_vector_lanes

GRIDS = ("standard", "tiny")
#: a matmul's output is checked on this many rows and columns (float64 reference)
CHECK_ROWS = 4
CHECK_COLUMNS = 256
#: the cache states a case with a main operand (weights, a KV cache, a table) is measured in:
#: small-M matmuls (bandwidth-bound) in all three, larger ones (compute-bound) not cold
ALL_STATES = ("hot", "warm", "cold")
NOT_COLD = ("hot", "warm")
#: the groups whose cases are also measured in context (after a read that pushes the
#: dispatcher's code and data out of the caches, as a step's matmuls do) when a call reads at
#: most CONTEXT_MAX_BYTES: beyond that an op's time is its data's, and the read would move the
#: data too. Small ops without a main operand are then measured hot and in context; an
#: embedding of few rows in context as well as in its three cache states
CONTEXT_GROUPS = ("norms", "elementwise", "memory", "views")
CONTEXT_MAX_BYTES = 2**19
#: ... and the smallest of those (a decode step's norms, products, views: batch × hidden) also
#: after a flush of the last-level cache ("far"), where a step's small ops run after a layer's
#: weights have streamed through
FAR_MAX_BYTES = 2**16

Inputs = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """One call at one shape: ``inputs(generator, dtype)`` builds seeded inputs, ``run`` makes the
    call, ``reference`` computes the expected output another way (in float64), checked before
    the case is timed."""

    group: str
    label: str
    inputs: Callable[[torch.Generator, torch.dtype], Inputs]
    run: Callable[[Inputs], Any]
    reference: Callable[[Inputs], torch.Tensor]
    #: bytes the inputs take (to keep a chunk of cases within memory)
    input_bytes: int = 0
    #: cache states measured: "hot" (inputs just touched), "warm" (main operand in the last-level
    #: cache, not in L2), "cold" (in memory) — only cases with a main operand have those two —,
    #: "context" (small ops without one: after a read of several L2s, :func:`with_context`)
    states: tuple[str, ...] = ("hot",)
    #: the part of the output the reference covers (a large matmul is checked on a sample of
    #: rows and columns: a float64 reference of all of it would cost more than timing it)
    sample: Callable[[Any], torch.Tensor] | None = None
    #: bytes one call reads when far fewer than its inputs (an embedding's rows, not its table);
    #: None: all of its inputs
    touched_bytes: int | None = None

    @property
    def reads(self) -> int:
        """Bytes one call reads."""
        return self.input_bytes if self.touched_bytes is None else self.touched_bytes


@dataclass(frozen=True)
class Group:
    name: str
    cases: tuple[Case, ...]


#: inputs larger than this many elements are tiled from a pool of normal samples (:func:`_randn`)
POOL_ELEMENTS = 2**21


@functools.cache
def _normal_pool() -> torch.Tensor:
    return torch.randn(2 * POOL_ELEMENTS, generator=torch.Generator().manual_seed(0x5EED))


def _randn(g: torch.Generator, dtype: torch.dtype, *shape: int) -> torch.Tensor:
    """Standard normal inputs. A large one is a window of a shared pool of samples, at an offset
    drawn from ``g``, tiled: drawing gigabytes of normals is most of a calibration's set-up
    time, and a timing does not depend on the values (the check compares with the float64
    reference of these same inputs)."""
    n = math.prod(shape)
    if n <= POOL_ELEMENTS:
        return torch.randn(*shape, generator=g).to(dtype)
    offset = int(torch.randint(POOL_ELEMENTS, (1,), generator=g))
    window = _normal_pool()[offset : offset + POOL_ELEMENTS]
    out = torch.empty(n, dtype=dtype)
    for start in range(0, n, POOL_ELEMENTS):
        piece = out[start : start + POOL_ELEMENTS]
        piece.copy_(window[: piece.numel()])
    return out.view(shape)


def _first(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, (tuple, list)) else out


def _d(t: torch.Tensor) -> torch.Tensor:
    return t.double()


# ---------------------------------------------------------------------------- grids


_M_SMALL = tuple(range(1, 17))
_SPEC: dict[str, dict[str, Any]] = {
    "standard": {
        "linear_m": (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256, 512, 1024, 2048),
        "linear_n": (64, 128, 256, 512, 1024, 2048, 4096, 8192),
        "linear_k": (64, 128, 256, 512, 1024, 2048, 4096),
        "linear_wide": ((32768, 256), (32768, 1024), (65536, 256), (65536, 1024)),
        "linear_flops": 1e9,
        "max_weight": 2**23,
        "large_m": (128, 256, 512, 1024, 2048),
        "large_nk": (1024, 2048, 4096),
        "large_flops": 9e9,
        "cold_m": (1, 4, 8, 16, 32),
        "warm_max_m": 256,
        "coarse_m": (1, 2, 4, 8, 16, 32, 64, 256, 1024),
        "coarse_nk": (64, 256, 1024, 4096),
        "bmm_batch": (1, 12, 48),
        "bmm_flops": 2.5e8,
        "bmm_m": (1, 16, 64, 256, 1024),
        "bmm_long": (16, 64, 256, 1024, 4096),
        "bmm_d": (32, 64, 128),
        "sdpa_bh": (1, 4, 16, 64),
        "sdpa_t": (16, 32, 64, 128, 256, 512, 1024, 2048),
        "sdpa_decode_bh": (1, 4, 16, 64, 256),
        "sdpa_decode_t": (16, 64, 256, 1024, 4096, 16384),
        "sdpa_d": (32, 64, 128),
        "gqa_bh": (8, 32, 128),
        "gqa_groups": (2, 4, 8),
        "sdpa_flops": 2e9,
        "rows": (1, 2, 4, 8, 16, 32, 64, 256, 1024, 4096),
        "hidden": (64, 128, 256, 512, 1024, 2048, 4096),
        "sizes": tuple(4**k for k in range(2, 12)),
        "max_elements": 2**24,
        "embed_n": (1, 4, 16, 64, 256, 1024, 4096),
        "embed_d": (64, 256, 1024, 4096),
    },
    "tiny": {
        "linear_m": (1, 4, 16),
        "linear_n": (64, 256),
        "linear_k": (64, 256),
        "linear_wide": (),
        "linear_flops": 5e8,
        "max_weight": 2**24,
        "large_m": (),
        "large_nk": (),
        "large_flops": 0.0,
        "cold_m": (1, 4),
        "warm_max_m": 4,
        "coarse_m": (1, 16),
        "coarse_nk": (64, 256),
        "bmm_batch": (2,),
        "bmm_flops": 5e8,
        "bmm_m": (1, 16),
        "bmm_long": (16, 64),
        "bmm_d": (32,),
        "sdpa_bh": (1, 4),
        "sdpa_t": (16, 64),
        "sdpa_decode_bh": (1, 4),
        "sdpa_decode_t": (16, 64),
        "sdpa_d": (32,),
        "gqa_bh": (4,),
        "gqa_groups": (2,),
        "sdpa_flops": 2e9,
        "rows": (1, 16),
        "hidden": (64, 256),
        "sizes": (64, 4096),
        "max_elements": 2**16,
        "embed_n": (1, 16),
        "embed_d": (64,),
    },
}


def grid_spec(grid: str, kind: str) -> dict[str, Any]:
    """The grid's sizes for a device kind (CUDA: every dimension 4× larger and work caps 64×)."""
    if grid not in _SPEC:
        raise InvalidInput("grid", grid, f"expected one of {', '.join(GRIDS)}")
    spec = dict(_SPEC[grid])
    # prefill attention is measured again at lengths half a CPU vector off the grid's (T + 8 with
    # AVX-512: the `.tail` families); a GPU's kernels tile otherwise
    spec["sdpa_tail"] = 0 if kind == "cuda" else cpu_vector_lanes() // 2
    if kind == "cuda" and grid == "standard":
        scaled = ("linear_n", "linear_k", "large_nk", "coarse_nk", "bmm_long", "sdpa_t", "hidden", "embed_d")
        for key in scaled:
            spec[key] = tuple(4 * v for v in spec[key])
        spec["linear_flops"] *= 64
        spec["large_flops"] *= 64
        spec["max_weight"] *= 16
        spec["sdpa_flops"] *= 64
        spec["max_elements"] *= 16
        spec["sizes"] = tuple(v * 16 for v in spec["sizes"])
    return spec


# ---------------------------------------------------------------------------- matmuls


def _matmul_case(
    group: str, label: str, m: int, n: int, k: int, bias: bool, transposed: bool, states: tuple[str, ...]
) -> Case:
    """``F.linear`` (weight N×K, used transposed) or ``addmm``/``mm`` with a K×N weight (row-major,
    as ``transformers``' ``Conv1D``), checked on a sample of the output."""
    rows, cols = min(m, CHECK_ROWS), min(n, CHECK_COLUMNS)

    def inputs(g: torch.Generator, dtype: torch.dtype) -> Inputs:
        w = _randn(g, dtype, n, k) if transposed else _randn(g, dtype, k, n)
        return {
            "x": _randn(g, dtype, m, k),
            "w": w.div_(math.sqrt(k)),
            "b": _randn(g, dtype, n) if bias else None,
        }

    def run(x: Inputs) -> torch.Tensor:
        if transposed:
            return F.linear(x["x"], x["w"], x["b"])
        return torch.addmm(x["b"], x["x"], x["w"]) if bias else torch.mm(x["x"], x["w"])

    def reference(x: Inputs) -> torch.Tensor:
        w = x["w"][:cols].T if transposed else x["w"][:, :cols]
        ref = _d(x["x"][:rows]) @ _d(w)
        return ref + _d(x["b"][:cols]) if bias else ref

    return Case(
        group,
        label,
        inputs,
        run,
        reference,
        4 * (m * k + n * k + n),
        states,
        lambda out: out[:rows, :cols],
    )


def matmul_states(spec: dict[str, Any], m: int) -> tuple[str, ...]:
    """The cache states a matmul with ``m`` rows is measured in: all three for the skinny,
    bandwidth-bound ones, not cold up to ``warm_max_m``, hot only beyond (compute-bound)."""
    if m in spec["cold_m"]:
        return ALL_STATES
    return NOT_COLD if m <= spec["warm_max_m"] else ("hot",)


def _fits(spec: dict[str, Any], m: int, n: int, k: int) -> bool:
    return 2.0 * m * n * k <= spec["linear_flops"] and n * k <= spec["max_weight"]


def linear_cases(spec: dict[str, Any]) -> Iterator[Case]:
    """``F.linear`` (with a bias: ``mm`` and ``addmm`` share the ``gemm`` family) on the full grid,
    then the large, compute-bound shapes (:func:`large_linear_shapes`), hot only."""
    shapes = [
        (m, n, k) for m, n, k in itertools.product(spec["linear_m"], spec["linear_n"], spec["linear_k"])
    ]
    shapes += [(m, n, k) for m in spec["linear_m"] for n, k in spec["linear_wide"] if m <= 64]
    for m, n, k in shapes:
        if 2.0 * m * n * k <= spec["linear_flops"] and (
            n * k <= spec["max_weight"] or (n, k) in spec["linear_wide"]
        ):
            yield _matmul_case(
                "linear", f"linear M={m} N={n} K={k}", m, n, k, True, True, matmul_states(spec, m)
            )
    for m, n, k in large_linear_shapes(spec):
        yield _matmul_case("linear", f"linear M={m} N={n} K={k}", m, n, k, True, True, ("hot",))


def large_linear_shapes(spec: dict[str, Any]) -> list[tuple[int, int, int]]:
    """The prefill-sized matmuls the dense grid's work cap leaves out: ``M`` of ``large_m`` times
    ``N, K`` of ``large_nk`` (and the wide lm-head-like ``N × K``), with ``linear_flops < 2MNK ≤
    large_flops``. Matmul efficiency keeps rising with size well past the dense cap (on one CPU
    core from ~110 GFLOP/s at 10⁹ FLOPs to ~150 beyond), so a prefill's matmuls are interpolated
    against shapes of their own size instead of extrapolated from smaller ones."""
    nk = [*itertools.product(spec["large_nk"], spec["large_nk"]), *spec["linear_wide"]]
    return [
        (m, n, k)
        for m in spec["large_m"]
        for n, k in nk
        if spec["linear_flops"] < 2.0 * m * n * k <= spec["large_flops"]
    ]


def conv1d_cases(spec: dict[str, Any]) -> Iterator[Case]:
    """``addmm`` with a row-major weight (``gemm.nn``) on the coarse grid."""
    for m, n, k in itertools.product(spec["coarse_m"], spec["coarse_nk"], spec["coarse_nk"]):
        if _fits(spec, m, n, k):
            yield _matmul_case(
                "addmm_nn", f"addmm M={m} N={n} K={k}", m, n, k, True, False, matmul_states(spec, m)
            )


def _bmm_case(batch: int, m: int, n: int, k: int, transposed: bool) -> Case:
    def inputs(g: torch.Generator, dtype: torch.dtype) -> Inputs:
        b = _randn(g, dtype, batch, n, k) if transposed else _randn(g, dtype, batch, k, n)
        return {"a": _randn(g, dtype, batch, m, k), "b": b}

    def operand(x: Inputs) -> torch.Tensor:
        return x["b"].transpose(1, 2) if transposed else x["b"]

    return Case(
        "bmm",
        f"bmm.{'nt' if transposed else 'nn'} B={batch} M={m} N={n} K={k}",
        inputs,
        lambda x: torch.bmm(x["a"], operand(x)),
        lambda x: _d(x["a"]) @ _d(operand(x)),
        4 * batch * (m * k + n * k),
    )


def bmm_cases(spec: dict[str, Any]) -> Iterator[Case]:
    for batch, m, long, d in itertools.product(
        spec["bmm_batch"], spec["bmm_m"], spec["bmm_long"], spec["bmm_d"]
    ):
        if 2.0 * batch * m * long * d <= spec["bmm_flops"]:
            yield _bmm_case(batch, m, long, d, True)  # scores: Q·Kᵀ
            yield _bmm_case(batch, m, d, long, False)  # outputs: P·V


# ---------------------------------------------------------------------------- attention


def _attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    scores = (_d(q) @ _d(k).transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    return torch.softmax(scores, dim=-1) @ _d(v)


def _sdpa_case(kind: str, bh: int, tq: int, tk: int, d: int, group: int = 1) -> Case:
    """Fused attention over ``bh`` query heads (at most 8 per batch row); with ``group`` > 1 every
    ``group`` query heads share one key/value head (grouped-query attention)."""
    heads = min(bh, 8)
    batch = bh // heads
    kv_heads = heads // group

    def inputs(g: torch.Generator, dtype: torch.dtype) -> Inputs:
        x = {
            "q": _randn(g, dtype, batch, heads, tq, d),
            "k": _randn(g, dtype, batch, kv_heads, tk, d),
            "v": _randn(g, dtype, batch, kv_heads, tk, d),
        }
        x["mask"] = None
        if kind == "masked":  # the mask lives where the tensors do (a CPU mask fails on CUDA)
            x["mask"] = torch.ones(tq, tk, dtype=torch.bool, device=x["q"].device).tril(tk - tq)
        return x

    gqa = {"enable_gqa": True} if group > 1 else {}

    def run(x: Inputs) -> torch.Tensor:
        return F.scaled_dot_product_attention(
            x["q"], x["k"], x["v"], attn_mask=x["mask"], is_causal=kind == "causal", **gqa
        )

    def reference(x: Inputs) -> torch.Tensor:
        """The first batch row's heads (:func:`_first_row`): a float64 copy of every head of a
        long cache cost more than timing the case (half of the group's time went to checks)."""
        causal = torch.ones(tq, tk, dtype=torch.bool, device=x["q"].device).tril()
        mask = causal if kind == "causal" else x["mask"]
        k, v = (_first_row(x[n]).repeat_interleave(group, dim=1) for n in ("k", "v"))
        return _attention_reference(_first_row(x["q"]), k, v, mask)

    return Case(
        "sdpa",
        f"sdpa.{kind} BH={bh} Tq={tq} Tk={tk} d={d}" + (f" g={group}" if group > 1 else ""),
        inputs,
        run,
        reference,
        4 * bh * tq * d + 8 * (bh // group) * tk * d,
        ALL_STATES if kind == "decode" else ("hot",),
        sample=_first_row,
    )


def _first_row(t: torch.Tensor) -> torch.Tensor:
    """The first batch row of a (batch, heads, …) attention tensor: the heads a check covers."""
    return t[:1]


def sdpa_cases(spec: dict[str, Any]) -> Iterator[Case]:
    tails = sorted({0, spec.get("sdpa_tail", 0)})
    for bh, t, d, tail in itertools.product(spec["sdpa_bh"], spec["sdpa_t"], spec["sdpa_d"], tails):
        if 4.0 * bh * (t + tail) ** 2 * d <= spec["sdpa_flops"]:
            yield _sdpa_case("causal", bh, t + tail, t + tail, d)
            yield _sdpa_case("full", bh, t + tail, t + tail, d)
    for bh, t, d in itertools.product(spec["sdpa_decode_bh"], spec["sdpa_decode_t"], spec["sdpa_d"]):
        if 2.0 * bh * t * d <= spec["max_elements"] * 4:
            yield _sdpa_case("decode", bh, 1, t, d)
    for bh, group, t, d in itertools.product(
        spec["gqa_bh"], spec["gqa_groups"], spec["sdpa_decode_t"], spec["sdpa_d"][-2:]
    ):
        if 2.0 * bh * t * d <= spec["max_elements"] * 4:
            yield _sdpa_case("decode", bh, 1, t, d, group)
    for bh, t, d in itertools.product(spec["sdpa_bh"][1:3], spec["sdpa_t"][2::2], spec["sdpa_d"][1:2]):
        for tq in (4, 16):
            if tq < t:
                yield _sdpa_case("masked", bh, tq, t, d)


# ---------------------------------------------------------------------------- norms


def _rows_case(name: str, rows: int, hidden: int) -> Case:
    def inputs(g: torch.Generator, dtype: torch.dtype) -> Inputs:
        return {
            "x": _randn(g, dtype, rows, hidden),
            "w": _randn(g, dtype, hidden),
            "b": _randn(g, dtype, hidden),
        }

    def layer_norm_ref(x: Inputs) -> torch.Tensor:
        v = _d(x["x"])
        mean, var = v.mean(-1, keepdim=True), v.var(-1, unbiased=False, keepdim=True)
        return (v - mean) / torch.sqrt(var + 1e-5) * _d(x["w"]) + _d(x["b"])

    def rms_ref(x: Inputs) -> torch.Tensor:
        v = _d(x["x"])
        return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-6) * _d(x["w"])

    def softmax_ref(x: Inputs) -> torch.Tensor:
        v = _d(x["x"])
        e = torch.exp(v - v.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)

    runs: dict[str, tuple[Callable[[Inputs], Any], Callable[[Inputs], torch.Tensor]]] = {
        "layer_norm": (lambda x: F.layer_norm(x["x"], (hidden,), x["w"], x["b"]), layer_norm_ref),
        "rms_norm": (lambda x: F.rms_norm(x["x"], (hidden,), x["w"], 1e-6), rms_ref),
        "softmax": (lambda x: torch.softmax(x["x"], dim=-1), softmax_ref),
    }
    run, ref = runs[name]
    return Case("norms", f"{name} {rows}×{hidden}", inputs, run, ref, 4 * rows * hidden)


def norm_cases(spec: dict[str, Any]) -> Iterator[Case]:
    for name in ("layer_norm", "rms_norm", "softmax"):
        for rows, hidden in itertools.product(spec["rows"], spec["hidden"]):
            if rows * hidden <= spec["max_elements"]:
                yield _rows_case(name, rows, hidden)


# ---------------------------------------------------------------------------- elementwise


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": torch.add,
    "mul": torch.mul,
    "sub": torch.sub,
    "div": torch.div,
}
_UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "neg": torch.neg,
    "rsqrt": lambda x: torch.rsqrt(x.abs() + 1),
    "pow": lambda x: x.pow(2),
    "exp": torch.exp,
    "tanh": torch.tanh,
}
_REDUCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "mean": lambda x: x.mean(-1, keepdim=True),
    "sum": lambda x: x.sum(-1, keepdim=True),
    "amax": lambda x: x.amax(-1, keepdim=True),
    "argmax": lambda x: x.argmax(-1),
}


def _columns(n: int) -> int:
    return min(n, 512)


def _binary_case(op: str, pattern: str, n: int) -> Case:
    cols = _columns(n)

    def inputs(g: torch.Generator, dtype: torch.dtype) -> Inputs:
        x = _randn(g, dtype, n // cols, cols)
        y: Any = {"t": lambda: _randn(g, dtype, n // cols, cols), "b": lambda: _randn(g, dtype, cols)}.get(
            pattern, lambda: 1.5
        )()
        if op == "div" and isinstance(y, torch.Tensor):
            y = y.abs() + 1
        return {"x": x, "y": y}

    def reference(x: Inputs) -> torch.Tensor:
        y = _d(x["y"]) if isinstance(x["y"], torch.Tensor) else x["y"]
        return _BINARY[op](_d(x["x"]), y)

    return Case(
        "elementwise",
        f"{op}.{pattern} N={n}",
        inputs,
        lambda x: _BINARY[op](x["x"], x["y"]),
        reference,
        8 * n,
    )


def _strided(n: int, g: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """A (1, 8, n/256, 32) transposed view of a (1, n/256, 8, 32) tensor: q or k of a layer."""
    return _randn(g, dtype, 1, n // 256, 8, 32).transpose(1, 2)


def _rotary_case(n: int) -> Case:
    """``x · cos`` on a transposed (non-contiguous) head view, the rotary-embedding product."""

    def inputs(g: torch.Generator, dtype: torch.dtype) -> Inputs:
        return {"x": _strided(n, g, dtype), "y": _randn(g, dtype, n // 256, 32)}

    return Case(
        "elementwise",
        f"mul.b.nc N={n}",
        inputs,
        lambda x: x["x"] * x["y"],
        lambda x: _d(x["x"]) * _d(x["y"]),
        8 * n,
    )


def _strided_binary_case(op: str, n: int) -> Case:
    """A same-size ``op`` of a transposed head view and a contiguous tensor: rotary embedding's
    ``q·cos + rotate_half(q)·sin``, whose first product keeps the view's layout."""

    def inputs(g: torch.Generator, dtype: torch.dtype) -> Inputs:
        x = _strided(n, g, dtype)
        return {"x": x, "y": _randn(g, dtype, *x.shape)}

    return Case(
        "elementwise",
        f"{op}.t.nc N={n}",
        inputs,
        lambda x: _BINARY[op](x["x"], x["y"]),
        lambda x: _BINARY[op](_d(x["x"]), _d(x["y"])),
        8 * n,
    )


def _unary_case(op: str, n: int, strided: bool) -> Case:
    fn = _UNARY[op]

    def inputs(g: torch.Generator, dtype: torch.dtype) -> Inputs:
        return {
            "x": _strided(n, g, dtype)[..., :16]
            if strided
            else _randn(g, dtype, n // _columns(n), _columns(n))
        }

    return Case(
        "elementwise",
        f"{op}.s{'.nc' if strided else ''} N={n // 2 if strided else n}",
        inputs,
        lambda x: fn(x["x"]),
        lambda x: fn(_d(x["x"])),
        8 * n,
    )


def _reduction_case(op: str, rows: int, cols: int) -> Case:
    fn = _REDUCTIONS[op]

    def inputs(g: torch.Generator, dtype: torch.dtype) -> Inputs:
        return {"x": _randn(g, dtype, rows, cols)}

    def reference(x: Inputs) -> torch.Tensor:
        return fn(_d(x["x"])).to(torch.float64)

    return Case(
        "elementwise", f"{op}.r {rows}×{cols}", inputs, lambda x: fn(x["x"]), reference, 4 * rows * cols
    )


def elementwise_cases(spec: dict[str, Any]) -> Iterator[Case]:
    sizes = [n for n in spec["sizes"] if n <= spec["max_elements"]]
    for op, pattern, n in itertools.product(_BINARY, ("t", "b", "s"), sizes):
        yield _binary_case(op, pattern, n)
    for op, n in itertools.product(_UNARY, sizes):
        yield _unary_case(op, n, False)
    for n in sizes:
        if n >= 256:
            yield _rotary_case(n)
            yield _unary_case("neg", n, True)
            yield _strided_binary_case("add", n)
            yield _strided_binary_case("mul", n)
    for op, rows, cols in itertools.product(_REDUCTIONS, spec["rows"], spec["hidden"]):
        if rows * cols <= spec["max_elements"]:
            yield _reduction_case(op, rows, cols)


# ---------------------------------------------------------------------------- memory and views


def _memory_case(kind: str, n: int) -> Case:
    t = max(n // 256, 1)

    def inputs(g: torch.Generator, dtype: torch.dtype) -> Inputs:
        return {
            "x": _randn(g, dtype, 1, t, 8, 32),
            "y": _randn(g, dtype, 1, 8, t, 32),
            "out": torch.zeros(1, 8, t, 32, dtype=dtype),
            "cache": torch.zeros(1, 8, t + 16, 32, dtype=dtype),
        }

    runs: dict[str, tuple[Callable[[Inputs], Any], Callable[[Inputs], torch.Tensor]]] = {
        "copy.cc": (lambda x: x["out"].copy_(x["y"]), lambda x: x["y"]),
        "copy.ss": (
            lambda x: x["cache"][:, :, 8 : 8 + t].copy_(x["x"].transpose(1, 2)),
            lambda x: x["x"].transpose(1, 2),
        ),
        "copy.cs": (lambda x: x["cache"][:, :, 8 : 8 + t].copy_(x["y"]), lambda x: x["y"]),
        "clone.s": (lambda x: x["x"].transpose(1, 2).contiguous(), lambda x: x["x"].transpose(1, 2)),
        "clone.c": (lambda x: x["y"].clone(), lambda x: x["y"]),
        "cat.c": (
            lambda x: torch.cat([x["y"], x["y"]], dim=-1),
            lambda x: torch.cat([x["y"], x["y"]], dim=-1),
        ),
        "cat.s": (
            lambda x: torch.cat([x["y"][..., 16:], x["y"][..., :16]], dim=-1),
            lambda x: x["y"].roll(16, dims=-1),
        ),
    }
    run, ref = runs[kind]
    return Case("memory", f"{kind} N={8 * t * 32}", inputs, run, lambda x: _d(ref(x)), 12 * n)


def _embedding_case(n_idx: int, dim: int) -> Case:
    vocab = 8192

    def inputs(g: torch.Generator, dtype: torch.dtype) -> Inputs:
        return {"w": _randn(g, dtype, vocab, dim), "i": torch.randint(0, vocab, (n_idx,), generator=g)}

    rows = 4 * n_idx * dim
    return Case(
        "memory",
        f"embedding n={n_idx} d={dim}",
        inputs,
        lambda x: F.embedding(x["i"], x["w"]),
        lambda x: _d(x["w"])[x["i"]],
        4 * vocab * dim,
        ALL_STATES,
        touched_bytes=rows + 8 * n_idx,
    )


def memory_cases(spec: dict[str, Any]) -> Iterator[Case]:
    sizes = [n for n in spec["sizes"] if 256 <= n <= spec["max_elements"]]
    for kind in ("copy.cc", "copy.ss", "copy.cs", "clone.s", "clone.c", "cat.c", "cat.s"):
        for n in sizes:
            yield _memory_case(kind, n)
    for n_idx, dim in itertools.product(spec["embed_n"], spec["embed_d"]):
        yield _embedding_case(n_idx, dim)


_VIEWS: dict[str, Callable[[torch.Tensor], Any]] = {
    "view": lambda x: x.view(8, 16, 4),
    "reshape": lambda x: x.reshape(32, 16),
    "t": lambda x: x[0].t(),
    "transpose": lambda x: x.transpose(0, 1),
    "permute": lambda x: x.permute(2, 0, 1),
    "expand": lambda x: x[:, :1].expand(4, 8, 16),
    "slice": lambda x: x[:, 2:6],
    "select": lambda x: x[1],
    "unsqueeze": lambda x: x.unsqueeze(0),
    "squeeze": lambda x: x[:, :1].squeeze(1),
    "split": lambda x: x.split(8, dim=-1),
    "chunk": lambda x: x.chunk(2, dim=-1),
    "unbind": lambda x: x.unbind(0),
    "alias": lambda x: torch.ops.aten.alias.default(x),
    "unsafe_view": lambda x: torch.ops.aten._unsafe_view.default(x, [32, 16]),
    "as_strided": lambda x: x.as_strided((4, 4), (16, 1)),
    "detach": lambda x: x.detach(),
}


def view_cases(_spec: dict[str, Any]) -> Iterator[Case]:
    for name, fn in _VIEWS.items():
        yield Case(
            "views",
            name,
            lambda g, dtype: {"x": _randn(g, dtype, 4, 8, 16)},
            lambda x, fn=fn: _first(fn(x["x"])),
            lambda x, fn=fn: _d(_first(fn(x["x"]))),
            512,
        )


# ---------------------------------------------------------------------------- the suite

GROUPS: dict[str, Callable[[dict[str, Any]], Iterator[Case]]] = {
    "linear": linear_cases,
    "addmm_nn": conv1d_cases,
    "bmm": bmm_cases,
    "sdpa": sdpa_cases,
    "norms": norm_cases,
    "elementwise": elementwise_cases,
    "memory": memory_cases,
    "views": view_cases,
}


def with_context(case: Case) -> Case:
    """``case`` measured in context too when it is of a :data:`CONTEXT_GROUPS` group and one call
    reads little (a small op; an embedding of few rows, the first op of a step), and far as well
    when it has no main operand and reads at most :data:`FAR_MAX_BYTES`."""
    if case.group not in CONTEXT_GROUPS or case.reads > CONTEXT_MAX_BYTES:
        return case
    far = ("far",) if case.reads <= FAR_MAX_BYTES and "warm" not in case.states else ()
    return replace(case, states=(*case.states, "context", *far))


def groups(grid: str, kind: str, only: Sequence[str] | None = None) -> list[Group]:
    """The suite's groups for a grid and device kind (``only``: a subset, by name)."""
    spec = grid_spec(grid, kind)
    names = list(GROUPS)
    if only:
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise InvalidInput("only", ",".join(unknown), f"unknown group; known: {', '.join(names)}")
        names = [n for n in names if n in only]
    return [Group(name, tuple(with_context(c) for c in GROUPS[name](spec))) for name in names]
