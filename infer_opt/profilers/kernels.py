"""The kernel suite: real kernels with known FLOPs ``F`` and minimum bytes ``Q``.

Families (sizes depend on the device kind and on the suite, ``quick`` or ``full``):

* ``matmul`` — ``C = A·B``, all n×n (label ``n=…``): ``F = 2n³``, ``Q = 3n²·s`` (s = bytes per element).
  The compute-bound end.
* ``elementwise`` — ``copy`` (``F = 0``, ``Q = 2N·s``), ``add`` (``F = N``, ``Q = 3N·s``),
  ``scale`` (``F = N``, ``Q = 2N·s``) over a size sweep. The bandwidth-bound end.
  On the CPU the quick sweep stays inside the last-level cache (≤ 4 MiB per tensor in
  float32), like every other quick case, so one bandwidth ``b`` describes them all; the
  full sweep adds DRAM-sized vectors, which run well below that ``b``. On a GPU the sweep
  reaches 1 GiB per tensor, far beyond L2, so ``b`` is HBM bandwidth.
* ``launch`` — ``tiny_add`` on 1–16 elements: nothing but the launch/dispatch floor.
* ``softmax`` over rows (``F ≈ 5`` per element: max, subtract, exp, sum, divide;
  ``Q = 2N·s``) and ``layer_norm`` (``F ≈ 8`` per element; ``Q = 2N·s + 2h·s``).
* ``attention`` — ``attention_explicit`` materialises ``softmax(QKᵀ/√d)V`` (the reference)
  ``attention_blocked`` runs the online-softmax loop over key blocks of 128 with its matmuls
  in the input dtype and its softmax statistics in float32 (:func:`blocked_attention_native`),
  and ``attention_sdpa`` calls ``scaled_dot_product_attention``. Both have
  ``F = 4·B·H·T²·d + 6·B·H·T²`` and the same minimum ``Q = 4·B·H·T·d·s`` (read Q, K, V,
  write O): the explicit path moves more bytes than Q, which is why it runs further from
  the roofline.
* ``bias_gelu`` — ``gelu(x + b)`` eager (two kernels, the sum materialised; reference)
  and through ``torch.compile`` (fused). ``F ≈ 9`` per element (1 add + GELU counted as 8),
  ``Q = 2N·s + h·s``. A compile that fails or exceeds its time budget is skipped with the
  reason, never fatal.

Every optimized variant (a case with ``reference``) is run on the same seeded inputs as its
reference and its output compared (norm-wise relative error, tolerance 1e-4 in float32,
2e-2 in bfloat16/float16) before it is timed; a mismatch is reported and not timed.

Other modules add cases with :func:`register_case` or whole families with
:func:`register_family`; e.g. a blocked-attention variant::

    from infer_opt.profilers import kernels

    def _blocked(kind, suite):
        for shape in kernels.attention_shapes(kind, suite):
            yield kernels.attention_case("attention_blocked", shape, build=my_blocked_attention)

    kernels.register_family(_blocked)

where ``my_blocked_attention(inputs) -> callable`` uses ``inputs["q"], ["k"], ["v"]``.
"""

from __future__ import annotations

import gc
import math
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from infer_opt.errors import InvalidInput, UnsupportedOnDevice
from infer_opt.notices import Notice
from infer_opt.profilers import device as devices
from infer_opt.profilers.timing import CaptureFailed, Measurement, measure
from infer_opt.results.kernels import KernelRow, KernelSuiteResult, SuiteSettings
from infer_opt.stats import Summary

if TYPE_CHECKING:
    from infer_opt.requests import KernelsRequest

SUITES = ("quick", "full")
#: relative error (norm-wise) an optimized variant may have against its reference
TOLERANCE = {"float32": 1e-4, "bfloat16": 2e-2, "float16": 2e-2}
#: calls captured per CUDA graph so the graph's own launch is amortised (one when flushing)
GRAPH_CALLS_PER_SAMPLE = 10
#: on the CPU, short calls are batched until one sample lasts about this long
CPU_MIN_SAMPLE_S = 20e-6
GELU_FLOPS = 8
SOFTMAX_FLOPS = 5
LAYER_NORM_FLOPS = 8

Progress = Callable[[int, int, str], None]


# ---------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class KernelContext:
    """Where a case's inputs live; ``randn`` is seeded per (family, label) so a variant and
    its reference see the same numbers."""

    device: Any
    dtype: Any
    seed: int

    def generator(self) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed(self.seed)

    def randn(self, *shape: int, generator: torch.Generator) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, device=self.device, dtype=self.dtype)

    def empty(self, *shape: int) -> torch.Tensor:
        return torch.empty(*shape, device=self.device, dtype=self.dtype)


@dataclass(frozen=True)
class KernelCase:
    """One kernel at one size.

    ``cost(itemsize) -> (F, Q)``; ``inputs(ctx) -> dict`` builds seeded inputs;
    ``build(inputs) -> fn`` returns the zero-argument callable that is timed (it may
    compile, see ``compiles``). ``reference`` names the case (same family and label) whose
    output this one must reproduce."""

    name: str
    family: str
    label: str
    size: float
    cost: Callable[[int], tuple[float, float]]
    inputs: Callable[[KernelContext], dict[str, Any]]
    build: Callable[[dict[str, Any]], Callable[[], Any]]
    reference: str | None = None
    compiles: bool = False

    @property
    def key(self) -> str:
        return f"{self.name}[{self.label}]"

    def seed(self) -> int:
        return zlib.crc32(f"{self.family}/{self.label}".encode())


FamilyProvider = Callable[[str, str], Iterable[KernelCase]]
_FAMILIES: list[FamilyProvider] = []


def register_family(provider: FamilyProvider) -> FamilyProvider:
    """Add a family: ``provider(kind, suite)`` yields cases for ``kind`` in {"cpu", "cuda"}
    and ``suite`` in {"quick", "full"}. Usable as a decorator."""
    if provider not in _FAMILIES:
        _FAMILIES.append(provider)
    return provider


def register_case(
    case: KernelCase, *, kinds: Sequence[str] = ("cpu", "cuda"), suites: Sequence[str] = SUITES
):
    """Add one fixed case to the given device kinds and suites."""

    def provider(kind: str, suite: str) -> Iterable[KernelCase]:
        return [case] if kind in kinds and suite in suites else []

    return register_family(provider)


def all_cases(kind: str, suite: str) -> list[KernelCase]:
    """Every registered case for a device kind and suite; compiling cases last (so a
    compile still running after its timeout cannot disturb other timings)."""
    if suite not in SUITES:
        raise InvalidInput("--suite", suite, "expected quick or full")
    cases = [case for provider in _FAMILIES for case in provider(kind, suite)]
    return [c for c in cases if not c.compiles] + [c for c in cases if c.compiles]


def select(cases: Sequence[KernelCase], only: Sequence[str] | None) -> list[KernelCase]:
    """Cases whose name or family is in ``only`` (all when None); an empty name (``--only ''``,
    ``a,,b``) is an error, not "everything"."""
    if only is None:
        return list(cases)
    items = [w.strip() for item in only for w in str(item).split(",")]
    if not items or any(w == "" for w in items):
        raise InvalidInput(
            "only",
            ",".join(only),
            "empty item in the list; expected kernel or family names separated by commas",
        )
    wanted = set(items)
    known = {c.name for c in cases} | {c.family for c in cases}
    unknown = sorted(wanted - known)
    if unknown:
        raise InvalidInput(
            "only", ",".join(unknown), f"unknown kernel or family; known: {', '.join(sorted(known))}"
        )
    return [c for c in cases if c.name in wanted or c.family in wanted]


def _pow2_label(n: int) -> str:
    exponent = int(math.log2(n)) if n > 0 else 0
    return f"N=2^{exponent}" if 2**exponent == n and n >= 1024 else f"N={n}"


_SIZES: dict[str, dict[tuple[str, str], tuple]] = {
    "matmul": {
        ("cpu", "quick"): (64, 128, 256, 512, 1024),
        ("cpu", "full"): (32, 64, 128, 256, 512, 768, 1024, 1536, 2048),
        ("cuda", "quick"): (256, 1024, 2048, 4096, 8192),
        ("cuda", "full"): (128, 256, 512, 1024, 2048, 4096, 6144, 8192, 16384),
    },
    "elementwise": {
        # CPU quick: every working set fits the last-level cache (see the module docstring)
        ("cpu", "quick"): (2**12, 2**14, 2**16, 2**18, 2**20),
        ("cpu", "full"): (2**10, 2**12, 2**14, 2**16, 2**18, 2**20, 2**22, 2**24, 2**25),
        ("cuda", "quick"): (2**16, 2**20, 2**24, 2**26, 2**28),
        ("cuda", "full"): (2**12, 2**14, 2**16, 2**18, 2**20, 2**22, 2**24, 2**26, 2**28, 2**29),
    },
    "launch": {
        ("cpu", "quick"): (1, 4, 16),
        ("cpu", "full"): (1, 2, 4, 8, 16),
        ("cuda", "quick"): (1, 4, 16),
        ("cuda", "full"): (1, 2, 4, 8, 16),
    },
    # (rows, columns)
    "softmax": {
        ("cpu", "quick"): ((1024, 1024),),
        ("cpu", "full"): ((256, 512), (1024, 1024), (4096, 1024), (1024, 8192)),
        ("cuda", "quick"): ((8192, 8192),),
        ("cuda", "full"): ((1024, 1024), (8192, 8192), (32768, 4096), (4096, 32768)),
    },
    "layer_norm": {
        ("cpu", "quick"): ((4096, 512),),
        ("cpu", "full"): ((1024, 768), (4096, 1024), (16384, 1024)),
        ("cuda", "quick"): ((16384, 4096),),
        ("cuda", "full"): ((4096, 1024), (16384, 4096), (65536, 4096)),
    },
    # (batch, heads, tokens, head dim)
    "attention": {
        ("cpu", "quick"): ((1, 8, 256, 64), (1, 8, 1024, 64)),
        ("cpu", "full"): ((1, 8, 128, 64), (1, 8, 512, 64), (1, 8, 1024, 64), (1, 8, 2048, 64)),
        ("cuda", "quick"): ((4, 16, 1024, 128), (4, 16, 4096, 128)),
        ("cuda", "full"): ((4, 16, 512, 128), (4, 16, 1024, 128), (4, 16, 4096, 128), (2, 16, 8192, 128)),
    },
    # (rows, hidden)
    "bias_gelu": {
        ("cpu", "quick"): ((4096, 1024),),
        ("cpu", "full"): ((1024, 1024), (4096, 1024), (8192, 4096)),
        ("cuda", "quick"): ((16384, 4096),),
        ("cuda", "full"): ((4096, 4096), (16384, 4096), (65536, 4096)),
    },
}


def sizes(family: str, kind: str, suite: str) -> tuple:
    return _SIZES[family][(kind, suite)]


@register_family
def _matmul(kind: str, suite: str) -> Iterable[KernelCase]:
    for n in sizes("matmul", kind, suite):

        def inputs(ctx: KernelContext, n: int = n) -> dict[str, Any]:
            g = ctx.generator()
            return {
                "a": ctx.randn(n, n, generator=g),
                "b": ctx.randn(n, n, generator=g),
                "out": ctx.empty(n, n),
            }

        yield KernelCase(
            "matmul",
            "matmul",
            f"n={n}",
            n,
            cost=lambda s, n=n: (2.0 * n**3, 3.0 * n * n * s),
            inputs=inputs,
            build=lambda x: lambda: torch.mm(x["a"], x["b"], out=x["out"]),
        )


def _vector_inputs(count: int, with_out: bool = True) -> Callable[[KernelContext], dict[str, Any]]:
    def inputs(ctx: KernelContext) -> dict[str, Any]:
        g = ctx.generator()
        out = {"x": ctx.randn(count, generator=g), "y": ctx.randn(count, generator=g)}
        if with_out:
            out["out"] = ctx.empty(count)
        return out

    return inputs


@register_family
def _elementwise(kind: str, suite: str) -> Iterable[KernelCase]:
    ops: list[tuple[str, int, int, Callable[[dict[str, Any]], Callable[[], Any]]]] = [
        ("copy", 0, 2, lambda x: lambda: x["out"].copy_(x["x"])),
        ("add", 1, 3, lambda x: lambda: torch.add(x["x"], x["y"], out=x["out"])),
        ("scale", 1, 2, lambda x: lambda: torch.mul(x["x"], 1.5, out=x["out"])),
    ]
    for name, flops_per, tensors, build in ops:
        for n in sizes("elementwise", kind, suite):
            yield KernelCase(
                name,
                "elementwise",
                _pow2_label(n),
                n,
                cost=lambda s, n=n, f=flops_per, k=tensors: (float(f * n), float(k * n * s)),
                inputs=_vector_inputs(n),
                build=build,
            )


@register_family
def _launch(kind: str, suite: str) -> Iterable[KernelCase]:
    for n in sizes("launch", kind, suite):
        yield KernelCase(
            "tiny_add",
            "launch",
            _pow2_label(n),
            n,
            cost=lambda s, n=n: (float(n), 3.0 * n * s),
            inputs=_vector_inputs(n),
            build=lambda x: lambda: torch.add(x["x"], x["y"], out=x["out"]),
        )


@register_family
def _normalization(kind: str, suite: str) -> Iterable[KernelCase]:
    for rows, cols in sizes("softmax", kind, suite):

        def inputs(ctx: KernelContext, rows: int = rows, cols: int = cols) -> dict[str, Any]:
            return {"x": ctx.randn(rows, cols, generator=ctx.generator())}

        n = rows * cols
        yield KernelCase(
            "softmax",
            "softmax",
            f"{rows}×{cols}",
            n,
            cost=lambda s, n=n: (float(SOFTMAX_FLOPS * n), 2.0 * n * s),
            inputs=inputs,
            build=lambda x: lambda: torch.softmax(x["x"], dim=-1),
        )
    for rows, hidden in sizes("layer_norm", kind, suite):

        def ln_inputs(ctx: KernelContext, rows: int = rows, hidden: int = hidden) -> dict[str, Any]:
            g = ctx.generator()
            return {
                "x": ctx.randn(rows, hidden, generator=g),
                "w": ctx.randn(hidden, generator=g),
                "b": ctx.randn(hidden, generator=g),
            }

        n = rows * hidden
        yield KernelCase(
            "layer_norm",
            "layer_norm",
            f"{rows}×{hidden}",
            n,
            cost=lambda s, n=n, h=hidden: (float(LAYER_NORM_FLOPS * n), 2.0 * n * s + 2.0 * h * s),
            inputs=ln_inputs,
            build=lambda x: lambda: F.layer_norm(x["x"], x["x"].shape[-1:], x["w"], x["b"]),
        )


def attention_shapes(kind: str, suite: str) -> tuple[tuple[int, int, int, int], ...]:
    """(batch, heads, tokens, head dim) of the attention family."""
    return sizes("attention", kind, suite)


def attention_label(shape: tuple[int, int, int, int]) -> str:
    b, h, t, d = shape
    return f"{b}×{h}×{t}×{d}"


def attention_cost(shape: tuple[int, int, int, int], itemsize: int) -> tuple[float, float]:
    """``F = 4·B·H·T²·d + 6·B·H·T²`` (two matmuls; scale and softmax per score),
    ``Q = 4·B·H·T·d·s`` (read Q, K, V and write O once: the tiled minimum)."""
    b, h, t, d = shape
    return 4.0 * b * h * t * t * d + 6.0 * b * h * t * t, 4.0 * b * h * t * d * itemsize


def attention_inputs(shape: tuple[int, int, int, int]) -> Callable[[KernelContext], dict[str, Any]]:
    """Seeded ``q``, ``k``, ``v`` of shape (B, H, T, d)."""

    def inputs(ctx: KernelContext) -> dict[str, Any]:
        g = ctx.generator()
        return {
            "q": ctx.randn(*shape, generator=g),
            "k": ctx.randn(*shape, generator=g),
            "v": ctx.randn(*shape, generator=g),
        }

    return inputs


def attention_case(
    name: str,
    shape: tuple[int, int, int, int],
    build: Callable[[dict[str, Any]], Callable[[], Any]],
    *,
    reference: str | None = "attention_explicit",
    compiles: bool = False,
) -> KernelCase:
    """An attention variant on the family's shapes and inputs, checked against the
    explicit reference unless ``reference=None``."""
    return KernelCase(
        name,
        "attention",
        attention_label(shape),
        shape[2],
        cost=lambda s: attention_cost(shape, s),
        inputs=attention_inputs(shape),
        build=build,
        reference=reference,
        compiles=compiles,
    )


def _explicit_attention(x: dict[str, Any]) -> Callable[[], Any]:
    q, k, v = x["q"], x["k"], x["v"]
    scale = 1.0 / math.sqrt(q.shape[-1])
    return lambda: torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v


def _sdpa(x: dict[str, Any]) -> Callable[[], Any]:
    q, k, v = x["q"], x["k"], x["v"]
    return lambda: F.scaled_dot_product_attention(q, k, v)


#: key block of the blocked (online-softmax) variant: the tile FlashAttention keeps on chip
BLOCKED_ATTENTION_BLOCK = 128


def _blocked(x: dict[str, Any]) -> Callable[[], Any]:
    q, k, v = x["q"], x["k"], x["v"]
    return lambda: blocked_attention_native(q, k, v, block_size=BLOCKED_ATTENTION_BLOCK)


def blocked_attention_native(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, block_size: int
) -> torch.Tensor:
    """Unmasked online-softmax attention over key blocks, computed as FlashAttention does:
    both matmuls (``Q·Kᵀ`` and ``P·V``) in the inputs' dtype — bfloat16 tensor-core work that
    accumulates in float32 — and the running max, sum and output accumulator in float32.
    This is the kernel the suite times for ``attention_blocked``, so its work and its bytes
    (2 per bfloat16 element) are what the row says; the exactness reference,
    :func:`infer_opt.checks.blocked_attention.blocked_attention_torch`, computes everything in
    float32. No host read-back, so it can be captured in a CUDA graph."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    qs = q * scale
    rows = q.shape[:-1]
    m = torch.full(rows, float("-inf"), dtype=torch.float32, device=q.device)
    ell = torch.zeros(rows, dtype=torch.float32, device=q.device)
    acc = torch.zeros((*rows, v.shape[-1]), dtype=torch.float32, device=q.device)
    for j0 in range(0, k.shape[-2], block_size):
        s = (qs @ k[..., j0 : j0 + block_size, :].transpose(-1, -2)).float()
        m_new = torch.maximum(m, s.amax(dim=-1))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new[..., None])
        ell = alpha * ell + p.sum(dim=-1)
        acc = alpha[..., None] * acc + (p.to(v.dtype) @ v[..., j0 : j0 + block_size, :]).float()
        m = m_new
    return (acc / ell[..., None]).to(q.dtype)


@register_family
def _attention(kind: str, suite: str) -> Iterable[KernelCase]:
    for shape in attention_shapes(kind, suite):
        yield attention_case("attention_explicit", shape, _explicit_attention, reference=None)
        yield attention_case("attention_blocked", shape, _blocked)
        yield attention_case("attention_sdpa", shape, _sdpa)


def _bias_gelu(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.gelu(x + b)


@register_family
def _fusion(kind: str, suite: str) -> Iterable[KernelCase]:
    for rows, hidden in sizes("bias_gelu", kind, suite):

        def inputs(ctx: KernelContext, rows: int = rows, hidden: int = hidden) -> dict[str, Any]:
            g = ctx.generator()
            return {"x": ctx.randn(rows, hidden, generator=g), "b": ctx.randn(hidden, generator=g)}

        def compiled(x: dict[str, Any]) -> Callable[[], Any]:
            fused = torch.compile(_bias_gelu, dynamic=False)
            return lambda: fused(x["x"], x["b"])

        n = rows * hidden

        def cost(s: int, n: int = n, h: int = hidden) -> tuple[float, float]:
            return float((1 + GELU_FLOPS) * n), 2.0 * n * s + h * s

        label = f"{rows}×{hidden}"
        yield KernelCase(
            "bias_gelu_eager",
            "bias_gelu",
            label,
            n,
            cost,
            inputs,
            lambda x: lambda: _bias_gelu(x["x"], x["b"]),
        )
        yield KernelCase(
            "bias_gelu_compiled",
            "bias_gelu",
            label,
            n,
            cost,
            inputs,
            compiled,
            reference="bias_gelu_eager",
            compiles=True,
        )


# ---------------------------------------------------------------------------- running


def relative_error(out: Any, ref: Any) -> float:
    """``‖out − ref‖₂ / ‖ref‖₂`` computed in float32."""
    a, b = out.detach().float(), ref.detach().float()
    if a.shape != b.shape:
        return math.inf
    denom = torch.linalg.vector_norm(b).item()
    diff = torch.linalg.vector_norm(a - b).item()
    return diff / denom if denom > 0 else (0.0 if diff == 0 else math.inf)


def _is_oom(exc: BaseException) -> bool:
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
    )


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]


class _Skip(Exception):
    """A case that cannot be timed, with the reason for its row."""


def _first_call(
    case: KernelCase, inputs: dict[str, Any], dev: Any, timeout_s: float
) -> tuple[Callable[[], Any], Any, float]:
    """Build the case and make its first (cold) call; compiling cases do this in a
    worker thread bounded by ``timeout_s``. Returns (fn, output, cold seconds)."""

    def work() -> tuple[Callable[[], Any], Any, float]:
        # CUDA's current device is per thread: a compile thread starts on cuda:0
        with devices.activate(dev):
            devices.synchronize(dev)
            start = time.perf_counter_ns()
            fn = case.build(inputs)
            out = fn()
            devices.synchronize(dev)
        return fn, out, (time.perf_counter_ns() - start) * 1e-9

    if not case.compiles:
        return work()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"compile-{case.name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise _Skip(f"torch.compile took longer than {timeout_s:g} s; skipped")
    if "error" in box:
        err = box["error"]
        if _is_oom(err):
            raise err
        raise _Skip(f"torch.compile failed: {_short(err)}")
    return box["value"]


def _measure(fn: Callable[[], Any], dev: Any, settings: SuiteSettings, *, graph: bool) -> Measurement:
    cpu = not devices.is_cuda(dev)
    return measure(
        fn,
        device=dev,
        warmup=settings.warmup,
        warmup_time_s=settings.warmup_time_s,
        reps=settings.reps,
        max_time_s=settings.max_time_s,
        target_rel_iqr=settings.target_rel_iqr,
        flush_cache=settings.flush_cache,
        cuda_graph=graph,
        # a flush runs once per replay: a flushed graph holds one call, or nine in ten would be warm
        calls_per_sample=GRAPH_CALLS_PER_SAMPLE if graph and not settings.flush_cache else 1,
        time_cold=False,
        min_sample_time_s=CPU_MIN_SAMPLE_S if cpu and not settings.flush_cache else None,
    )


def run_case(
    case: KernelCase,
    dev: Any,
    dtype: Any,
    settings: SuiteSettings,
    lookup: dict[tuple[str, str, str], KernelCase],
) -> KernelRow:
    """Check (if a variant) and time one case. OOM and other failures become a skipped row;
    KeyboardInterrupt propagates."""
    dtype_key = devices.dtype_name(dtype)
    itemsize = torch.empty((), dtype=dtype).element_size()
    flops, nbytes = case.cost(itemsize)
    row = KernelRow(
        case.name,
        case.family,
        case.label,
        float(case.size),
        dtype_key,
        flops,
        nbytes,
        reference=case.reference,
    )
    try:
        inputs = case.inputs(KernelContext(dev, dtype, case.seed()))
        fn, out, cold_s = _first_call(case, inputs, dev, settings.compile_timeout_s)
        row = replace(row, cold_s=cold_s)
        if case.reference is not None:
            ref_case = lookup.get((case.family, case.label, case.reference))
            if ref_case is None:
                raise _Skip(f"reference {case.reference!r} not registered for {case.label}")
            ref_out = ref_case.build(inputs)()
            tol = TOLERANCE.get(dtype_key, 2e-2)
            error = relative_error(out, ref_out)
            passed = error <= tol
            row = replace(row, error=error, tolerance=tol, passed=passed)
            del ref_out
            if not passed:
                raise _Skip(
                    f"output differs from {case.reference} (rel. error {error:.2g} > {tol:g}); not timed"
                )
        del out
        m = _measure(fn, dev, settings, graph=settings.cuda_graphs)
        eager = _measure(fn, dev, settings, graph=False).summary.median_s if settings.cuda_graphs else None
    except _Skip as skip:
        return replace(row, skipped_reason=str(skip))
    except CaptureFailed as exc:
        if not exc.device_usable:
            raise
        return replace(row, skipped_reason=f"failed: {exc}")
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        reason = f"out of memory: {_short(exc)}" if _is_oom(exc) else f"failed: {_short(exc)}"
        return replace(row, skipped_reason=reason)
    t = m.summary.median_s
    return replace(
        row,
        time_s=t,
        summary=m.summary,
        samples_s=m.samples_s,
        mode=m.mode,
        calls_per_sample=m.calls_per_sample,
        achieved_flops_per_s=flops / t if t > 0 else None,
        achieved_bytes_per_s=nbytes / t if t > 0 else None,
        warnings=m.warnings,
        eager_time_s=eager,
    )


def empty_result(dev: Any, dtype: Any, settings: SuiteSettings, suite: str) -> KernelSuiteResult:
    """A result for this device, dtype and settings with no rows yet."""
    return KernelSuiteResult(
        device=str(dev),
        device_name=devices.device_name(dev),
        device_key=devices.device_key(dev, dtype),
        dtype=devices.dtype_name(dtype),
        suite=suite,
        settings=settings,
        device_info=devices.device_info(dev),
        complete=False,
    )


def run_suite(
    cases: Sequence[KernelCase],
    dev: Any,
    dtype: Any,
    settings: SuiteSettings,
    *,
    suite: str = "quick",
    all_known: Sequence[KernelCase] | None = None,
    progress: Progress | None = None,
    on_row: Callable[[KernelSuiteResult], None] | None = None,
) -> KernelSuiteResult:
    """Time ``cases`` one after another, with ``dev`` the current CUDA device. After each case
    ``on_row`` receives the result so far (to save it); Ctrl-C, or a CUDA graph capture that
    left the device unusable (a ``sweep_stopped`` warning), stops the sweep and returns what
    finished with ``complete=False``. ``all_known`` supplies references not in ``cases``."""
    if settings.cuda_graphs and not devices.is_cuda(dev):
        raise UnsupportedOnDevice(
            f"--cuda-graphs: CUDA graphs need a CUDA device; this run is on {dev} (drop --cuda-graphs)"
        )
    lookup = {(c.family, c.label, c.name): c for c in [*(all_known or ()), *cases]}
    result = empty_result(dev, dtype, settings, suite)
    start = time.perf_counter()
    rows: list[KernelRow] = []
    total = len(cases)
    try:
        with devices.activate(dev):
            for i, case in enumerate(cases):
                if progress is not None:
                    progress(i, total, case.key)
                rows.append(run_case(case, dev, dtype, settings, lookup))
                if devices.is_cuda(dev):
                    # the case's tensors are gone with its frame: hand the memory back so the
                    # next case (and an OOM's aftermath) starts from a clean pool
                    gc.collect()
                    torch.cuda.empty_cache()
                if on_row is not None:
                    on_row(replace(result, rows=tuple(rows), wall_s=time.perf_counter() - start))
        if progress is not None:
            progress(total, total, "done")
    except KeyboardInterrupt:
        return replace(result, rows=tuple(rows), wall_s=time.perf_counter() - start, complete=False)
    except CaptureFailed as exc:
        stopped = Notice("sweep_stopped", {"case": cases[len(rows)].key, "reason": str(exc)})
        return replace(
            result, rows=tuple(rows), wall_s=time.perf_counter() - start, complete=False, warnings=(stopped,)
        )
    return replace(result, rows=tuple(rows), wall_s=time.perf_counter() - start, complete=True)


# ---------------------------------------------------------------------------- several runs


def pass_order(cases: Sequence[KernelCase], index: int, runs: int) -> list[KernelCase]:
    """The case order of pass ``index`` of ``runs``: rotated by ``index·n/runs`` places, so
    each case meets a different moment of the run and a burst of load lands on one pass of
    several cases rather than on every pass of one. Compiling cases stay last (rotated among
    themselves)."""

    def rotate(items: list[KernelCase]) -> list[KernelCase]:
        k = index * len(items) // max(runs, 1) if items else 0
        return items[k:] + items[:k]

    return rotate([c for c in cases if not c.compiles]) + rotate([c for c in cases if c.compiles])


def merge_row(old: KernelRow | None, new: KernelRow) -> KernelRow:
    """``old`` (a case's runs so far) with one more run: samples pooled, the run's median
    appended to ``run_medians_s``, rates from the pooled median. A pass that could not time
    the case leaves the timed runs alone; a failed output check in any pass fails the row."""
    if old is None or old.time_s is None:
        return new
    checks: dict[str, Any] = {}
    if old.passed is not None and new.passed is not None:
        checks = {"passed": old.passed and new.passed, "error": max(old.error or 0.0, new.error or 0.0)}
    if new.time_s is None:
        return replace(old, **checks)
    samples = old.samples_s + new.samples_s
    summary = Summary.from_samples(samples)
    t = summary.median_s
    warnings = list(old.warnings)
    warnings += [w for w in new.warnings if w not in warnings]
    return replace(
        old,
        time_s=t,
        summary=summary,
        samples_s=samples,
        run_medians_s=(old.run_medians_s or (old.time_s,)) + (new.time_s,),
        achieved_flops_per_s=old.flops / t if t > 0 else None,
        achieved_bytes_per_s=old.bytes / t if t > 0 else None,
        warnings=tuple(warnings),
        **checks,
    )


def resume_differences(previous: KernelSuiteResult, current: KernelSuiteResult) -> list[str]:
    """What makes a saved result another setup than this run: device (with threads), dtype,
    suite or timing settings, e.g. ``suite (full vs quick)``."""
    out = [
        f"{name.replace('_', ' ')} ({getattr(previous, name)} vs {getattr(current, name)})"
        for name in ("device_key", "dtype", "suite")
        if getattr(previous, name) != getattr(current, name)
    ]
    for name in SuiteSettings.__dataclass_fields__:
        theirs, ours = getattr(previous.settings, name), getattr(current.settings, name)
        if theirs != ours:
            out.append(f"{name.replace('_', ' ')} ({theirs} vs {ours})")
    return out


def check_resumable(
    previous: KernelSuiteResult, dev: Any, dtype: Any, settings: SuiteSettings, suite: str
) -> None:
    """Refuse (naming ``resume``) a saved result of another device, threads, dtype, suite or
    timing settings: its rows cannot be pooled with this run's."""
    diff = resume_differences(previous, empty_result(dev, dtype, settings, suite))
    if diff:
        raise InvalidInput(
            "resume",
            f"{previous.suite} suite, {previous.device_key}",
            f"the file was measured with another setup: {', '.join(diff)} (use a new --out file)",
        )


def _needs_pass(row: KernelRow | None, index: int) -> bool:
    """Whether a case is timed in pass ``index``: never measured, or timed in at most
    ``index`` runs so far (a case that could not be timed is not retried)."""
    if row is None:
        return True
    return row.time_s is not None and row.runs <= index


def run(
    request: KernelsRequest,
    *,
    progress: Progress | None = None,
    on_row: Callable[[KernelSuiteResult], None] | None = None,
    said: Callable[[str], None] = lambda line: None,
) -> KernelSuiteResult:
    """``infer-opt kernels``: the request's device and dtype resolved, its cases selected and
    :func:`run_passes` over them (going on from ``request.resume``, which ``said`` reports)."""
    dev = devices.resolve_device(request.device)
    dtype = devices.parse_dtype(request.dtype, dev)
    if request.threads is not None:
        devices.set_threads(request.threads)
    settings = request.settings()
    if settings.cuda_graphs and not devices.is_cuda(dev):
        raise UnsupportedOnDevice(
            f"--cuda-graphs: CUDA graphs need a CUDA device; this run is on {dev} (drop --cuda-graphs)"
        )
    known = all_cases("cuda" if devices.is_cuda(dev) else "cpu", request.suite)
    cases = select(known, request.only)
    previous = request.resume
    if previous is not None:
        check_resumable(previous, dev, dtype, settings, request.suite)
        held = sum(1 for r in previous.rows if r.runs >= max(request.runs, previous.runs) or r.time_s is None)
        said(f"resuming: {held} case(s) already measured in every run")
    return run_passes(
        cases, dev, dtype, settings, runs=request.runs, suite=request.suite, all_known=known,
        previous=previous, progress=progress, on_row=on_row,
    )  # fmt: skip


def run_passes(
    cases: Sequence[KernelCase],
    dev: Any,
    dtype: Any,
    settings: SuiteSettings,
    *,
    runs: int = 1,
    suite: str = "quick",
    all_known: Sequence[KernelCase] | None = None,
    previous: KernelSuiteResult | None = None,
    progress: Progress | None = None,
    on_row: Callable[[KernelSuiteResult], None] | None = None,
) -> KernelSuiteResult:
    """``runs`` independent passes of :func:`run_suite` over ``cases``, each case with its own
    warm-up in every pass, in the order :func:`pass_order` gives (rows merged with
    :func:`merge_row`). ``previous`` — a saved, possibly interrupted result of the same setup
    (else :class:`InvalidInput` naming ``resume``) — supplies what was measured: a case is
    timed in pass p only while it holds at most p runs, and the passes go to
    ``max(runs, previous.runs)``. ``on_row`` gets the merged result after every case; Ctrl-C
    (or a pass :func:`run_suite` stops) returns what finished with ``complete=False`` and the
    pass's warnings."""
    if runs < 1:
        raise InvalidInput("runs", runs, "must be at least 1")
    skeleton = replace(empty_result(dev, dtype, settings, suite), runs=runs)
    order = [c.key for c in cases]
    merged: dict[str, KernelRow] = {}
    wall = [0.0]
    if previous is not None:
        check_resumable(previous, dev, dtype, settings, suite)
        merged = {r.key: r for r in previous.rows if r.key in set(order)}
        skeleton = replace(skeleton, runs=max(runs, previous.runs))
        wall[0] = previous.wall_s

    probes = [p for p in (_speed_probe(dev),) if p is not None]

    def snapshot(complete: bool) -> KernelSuiteResult:
        rows = tuple(merged[k] for k in order if k in merged)
        return replace(skeleton, rows=rows, wall_s=wall[0], complete=complete, speed_probe_s=tuple(probes))

    def add(part: KernelSuiteResult) -> None:
        row = part.rows[-1]
        merged[row.key] = merge_row(merged.get(row.key), row)
        if on_row is not None:
            on_row(replace(snapshot(False), wall_s=wall[0] + part.wall_s))

    total = skeleton.runs
    planned = sum(_needs_pass(merged.get(k), p) for p in range(total) for k in order)
    done = 0
    for p in range(total):
        todo = [c for c in pass_order(cases, p, total) if _needs_pass(merged.get(c.key), p)]
        if not todo:
            continue
        part = run_suite(
            todo, dev, dtype, settings, suite=suite, all_known=all_known or cases, on_row=add,
            progress=_pass_progress(progress, done, planned, p, total),
        )  # fmt: skip
        wall[0] += part.wall_s
        done += len(todo)
        if not part.complete:
            return replace(snapshot(False), warnings=part.warnings)
    probes.extend(p for p in (_speed_probe(dev),) if p is not None)
    return snapshot(True)


def _speed_probe(dev: Any) -> float | None:
    """The machine's speed now (a fixed matmul; :mod:`infer_opt.profilers.speed_probe`), a label
    for ``compare``; None when the probe itself fails."""
    from infer_opt.profilers import speed_probe

    try:
        with devices.activate(dev):
            return speed_probe.probe_s(dev)
    except (RuntimeError, ValueError):
        return None


def _pass_progress(
    progress: Progress | None, done: int, planned: int, index: int, runs: int
) -> Progress | None:
    """The progress of one pass as a part of all passes."""
    if progress is None:
        return None
    prefix = f"run {index + 1}/{runs}: " if runs > 1 else ""
    return lambda i, _n, text: progress(done + i, max(planned, 1), prefix + text)
