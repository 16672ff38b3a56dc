"""Models to profile: built-in decoder-only transformers, a user's factory, or a Hugging Face
architecture built from its config.

Built-ins (random weights from a fixed seed, no download):

* ``tiny`` (the default): 2 layers, d = 128, 4 heads, vocabulary 1024, GPT-2 style. Profiles in
  seconds on a laptop CPU.
* ``gpt2-small``: 12 layers, d = 768, 12 heads, vocabulary 50257, learned positions, LayerNorm,
  GELU MLP (124 M parameters with the tied embedding).
* ``llama-tiny`` / ``llama-small``: Llama style — RMSNorm, SwiGLU MLP, rotary positions,
  grouped-query attention (fewer key/value heads than query heads), no biases.

Attention runs through ``torch.nn.functional.scaled_dot_product_attention``. The KV cache is
preallocated per layer (:class:`KVCache`); the mask rule (checked by :mod:`infer_opt.checks.mask_alignment`):

* ``Tq == Tk`` (prefill over an empty cache): ``is_causal=True`` is right.
* ``Tq == 1`` (decode of one token): no mask — the new token sees every cached key.
* ``1 < Tq < Tk`` (several new positions over a cache: speculative verification, chunked
  prefill): an explicit boolean mask aligned to the bottom right, ``key j visible to query i
  iff j <= i + (Tk - Tq)``. ``is_causal=True`` would align top-left in PyTorch and let the
  first new query see only key 0 — the bug the mask-alignment check exists to catch.

A user's model is ``package.module:factory`` or ``path/to/file.py:factory``; see
``examples/my_model.py`` for the contract. ``hf:<model_type>`` builds
``AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **overrides))``;
``hf:<model_type>:base`` the model without its head (``AutoModel``: what an embedding or encoder
forward runs, and what traces of ``AutoModel`` record — no LM head over every token); an image or
video model (``vit``, ``timesformer``: its input is ``pixel_values``) takes random pixels at its
config's image size.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from infer_opt.errors import InvalidInput, RunFailure, out_of_memory
from infer_opt.profilers.device import ensure_fits

#: weights are drawn from this seed so every run profiles the same numbers
DEFAULT_SEED = 0
HF_EXTRA_MESSAGE = "hf: models need the optional extra: pip install 'infer-opt[hf]'"


@dataclass(frozen=True)
class TransformerConfig:
    """Shape of a built-in decoder-only transformer."""

    name: str
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    max_seq_len: int
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    mlp: Literal["gelu", "swiglu"] = "gelu"
    positions: Literal["learned", "rotary"] = "learned"
    bias: bool = True
    tie_embeddings: bool = True
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    description: str = ""

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def matmul_params(self) -> int:
        """Weights that take part in a matrix multiply per token (the LM head included,
        tied or not; embeddings and norms excluded): forward FLOPs ≈ 2 × this × tokens."""
        d, kv = self.d_model, self.n_kv_heads * self.head_dim
        attn = d * d + 2 * d * kv + d * d
        mlp = (3 if self.mlp == "swiglu" else 2) * d * self.d_ff
        return self.n_layers * (attn + mlp) + d * self.vocab_size

    def attention_flops(self, batch: int, q_len: int, k_len: int) -> int:
        """``4·B·H·Tq·Tk·d`` per layer (QKᵀ and PV), summed over layers, halved where the model
        calls SDPA with ``is_causal=True`` (``Tq == Tk``, :func:`attention`): the one causal
        convention of ``profile``, ``predict`` and ``trace`` (the work a kernel that skips masked
        blocks does). Over a cache (``Tq < Tk``) the explicit mask is counted dense, as a
        masked SDPA is everywhere."""
        dense = 4 * batch * self.n_heads * q_len * k_len * self.head_dim * self.n_layers
        return dense // 2 if q_len == k_len and q_len > 1 else dense

    def forward_flops(self, batch: int, q_len: int, k_len: int | None = None) -> int:
        """Analytic forward FLOPs: ``2·P_matmul·B·Tq + 4·B·H·Tq·Tk·d·L``."""
        k_len = q_len if k_len is None else k_len
        return 2 * self.matmul_params() * batch * q_len + self.attention_flops(batch, q_len, k_len)


#: what makes a decoder Llama style (RMSNorm, SwiGLU, rotary positions, no biases, untied embeddings)
LLAMA_STYLE: dict[str, Any] = {
    "norm": "rmsnorm",
    "mlp": "swiglu",
    "positions": "rotary",
    "bias": False,
    "tie_embeddings": False,
    "norm_eps": 1e-6,
}

BUILTIN_CONFIGS: dict[str, TransformerConfig] = {
    c.name: c
    for c in (
        TransformerConfig(
            "tiny", 1024, 128, 2, 4, 4, 512, 2048, description="GPT-2 style, 2 layers, d=128, 4 heads"
        ),
        TransformerConfig(
            "gpt2-small",
            50257,
            768,
            12,
            12,
            12,
            3072,
            1024,
            description="GPT-2 small shape: 12 layers, d=768, 12 heads, vocab 50257",
        ),
        TransformerConfig(
            "llama-tiny",
            1024,
            128,
            2,
            4,
            2,
            352,
            2048,
            description="Llama style (RMSNorm, SwiGLU, rotary, GQA 4q/2kv), 2 layers, d=128",
            **LLAMA_STYLE,
        ),
        TransformerConfig(
            "llama-small",
            32000,
            768,
            12,
            12,
            4,
            2048,
            2048,
            description="Llama style (RMSNorm, SwiGLU, rotary, GQA 12q/4kv), 12 layers, d=768",
            **LLAMA_STYLE,
        ),
    )
}
ALIASES = {"llama": "llama-tiny", "gpt2": "gpt2-small"}


def builtin_names() -> list[str]:
    return list(BUILTIN_CONFIGS)


# ---------------------------------------------------------------------------- KV cache


def working_set_bytes(config: TransformerConfig, batch: int, length: int, itemsize: int) -> float:
    """About what a forward over ``batch × length`` tokens holds at once: the KV cache
    (2 · layers · B · H_kv · T · d_head) and one layer's activations plus the logits
    (B · T · (4·d_model + d_ff + vocab))."""
    c = config
    kv = 2.0 * c.n_layers * batch * c.n_kv_heads * length * c.head_dim
    activations = float(batch) * length * (4 * c.d_model + c.d_ff + c.vocab_size)
    return (kv + activations) * itemsize


class KVCache:
    """Preallocated keys and values per layer, ``[B, H_kv, max_len, head_dim]``, and the number
    of positions filled. :meth:`update` writes the new positions in place and returns views of
    the filled part; ``length`` advances once per forward (:meth:`advance`). Setting ``length``
    back (:meth:`reset`) makes the next step overwrite the same slots, so a decode step can be
    repeated without copying the cache."""

    def __init__(
        self,
        n_layers: int,
        batch: int,
        n_kv_heads: int,
        max_len: int,
        head_dim: int,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        shape = (batch, n_kv_heads, max_len, head_dim)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layers)]
        self.max_len = max_len
        self.length = 0
        #: the cache whose storage this one views (:meth:`sharing`), else None
        self.shares: KVCache | None = None

    @classmethod
    def sharing(cls, other: KVCache, n_layers: int) -> KVCache:
        """A cache over the first ``n_layers`` layers of ``other``'s tensors (no copy) with a
        length of its own: an early-exit draft reads the keys and values the target wrote for
        the layers they share, and its own writes past the target's length are overwritten by
        the target's next pass over the same tokens (LayerSkip's shared cache)."""
        batch, n_kv_heads, max_len, head_dim = other.keys[0].shape
        cache = cls(0, batch, n_kv_heads, max_len, head_dim, device=other.keys[0].device)
        cache.keys, cache.values = other.keys[:n_layers], other.values[:n_layers]
        cache.length, cache.shares = other.length, other
        return cache

    def update(
        self, layer: int, k_new: torch.Tensor, v_new: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        start, end = self.length, self.length + k_new.shape[2]
        if end > self.max_len:
            raise InvalidInput(
                "--context", end, f"the KV cache holds at most {self.max_len} positions for this model"
            )
        self.keys[layer][:, :, start:end] = k_new
        self.values[layer][:, :, start:end] = v_new
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, n_tokens: int) -> None:
        self.length += n_tokens

    def reset(self, length: int = 0) -> None:
        self.length = length

    def crop(self, length: int) -> None:
        """Truncate to the first ``length`` positions (a speculative round's rollback of its
        rejected drafts): later positions are no longer attended to, and the next forward
        overwrites their slots. Only shrinks: ``0 <= length <= self.length``."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot crop a KV cache of {self.length} positions to {length}")
        self.length = length


def causal_mask_lower_right(q_len: int, k_len: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Boolean ``[Tq, Tk]`` mask, True = visible: query i (logical position ``Tk - Tq + i``)
    sees keys ``0 .. Tk - Tq + i``."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(diagonal=k_len - q_len)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, gqa: bool) -> torch.Tensor:
    """SDPA with the mask the shapes call for (module docstring): causal when ``Tq == Tk``,
    none for one query, bottom-right aligned for several queries over a longer cache."""
    q_len, k_len = q.shape[2], k.shape[2]
    kwargs: dict[str, Any] = {"enable_gqa": True} if gqa else {}
    if q_len == k_len and q_len > 1:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, **kwargs)
    if q_len == 1:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    mask = causal_mask_lower_right(q_len, k_len, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)


# ---------------------------------------------------------------------------- the transformer


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _norm(config: TransformerConfig) -> nn.Module:
    if config.norm == "rmsnorm":
        return RMSNorm(config.d_model, config.norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps)


def rotary_tables(config: TransformerConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin, ``[max_seq_len, head_dim]``, for the rotate-half form of RoPE."""
    half = config.head_dim // 2
    inv_freq = 1.0 / (config.rope_theta ** (torch.arange(half, dtype=torch.float64) / half))
    angles = torch.outer(torch.arange(config.max_seq_len, dtype=torch.float64), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + _rotate_half(x) * sin


class Attention(nn.Module):
    """Multi-head (grouped-query) attention over ``heads`` query heads and ``kv_heads``
    key/value heads — all of the config's, or one tensor-parallel rank's share."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.heads, self.kv_heads = config.n_heads, config.n_kv_heads
        kv_dim = config.n_kv_heads * config.head_dim
        self.q_proj = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.k_proj = nn.Linear(config.d_model, kv_dim, bias=config.bias)
        self.v_proj = nn.Linear(config.d_model, kv_dim, bias=config.bias)
        self.o_proj = nn.Linear(config.d_model, config.d_model, bias=config.bias)

    def forward(
        self,
        x: torch.Tensor,
        layer: int,
        cache: KVCache | None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> torch.Tensor:
        head_dim = self.config.head_dim
        batch, q_len, _ = x.shape
        q = self.q_proj(x).view(batch, q_len, self.heads, head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, q_len, self.kv_heads, head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, q_len, self.kv_heads, head_dim).transpose(1, 2)
        if rotary is not None:
            cos, sin = rotary
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if cache is not None:
            k, v = cache.update(layer, k, v)
        out = attention(q, k, v, gqa=self.kv_heads != self.heads)
        return self.o_proj(out.transpose(1, 2).reshape(batch, q_len, self.heads * head_dim))


class MLP(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.swiglu = config.mlp == "swiglu"
        if self.swiglu:
            self.gate_proj = nn.Linear(config.d_model, config.d_ff, bias=config.bias)
        self.up_proj = nn.Linear(config.d_model, config.d_ff, bias=config.bias)
        self.down_proj = nn.Linear(config.d_ff, config.d_model, bias=config.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.swiglu:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(F.gelu(self.up_proj(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.attn_norm = _norm(config)
        self.attn = Attention(config)
        self.mlp_norm = _norm(config)
        self.mlp = MLP(config)

    def forward(
        self,
        x: torch.Tensor,
        layer: int,
        cache: KVCache | None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), layer, cache, rotary)
        return x + self.mlp(self.mlp_norm(x))


class DecoderLM(nn.Module):
    """Decoder-only transformer: ``forward(input_ids [B, T], cache=None) -> logits [B, T, V]``.

    With a cache the new tokens take positions ``cache.length ..``; the cache is updated and
    advanced. Without one the sequence starts at position 0."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        if config.positions == "learned":
            self.pos_embed = nn.Embedding(config.max_seq_len, config.d_model)
        else:
            cos, sin = rotary_tables(config)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.final_norm = _norm(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed.weight

    def new_cache(self, batch: int, max_len: int | None = None) -> KVCache:
        c = self.config
        p = self.lm_head.weight
        ensure_fits(
            working_set_bytes(c, batch, max_len or c.max_seq_len, p.element_size()),
            p.device,
            f"a batch of {batch} × {max_len or c.max_seq_len} tokens (KV cache and activations)",
            "Lower --batch, --seq-len or --context, or use a smaller --dtype.",
        )
        return KVCache(
            c.n_layers,
            batch,
            c.n_kv_heads,
            max_len or c.max_seq_len,
            c.head_dim,
            device=p.device,
            dtype=p.dtype,
        )

    def forward(self, input_ids: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        q_len = input_ids.shape[1]
        start = cache.length if cache is not None else 0
        if start + q_len > self.config.max_seq_len:
            raise InvalidInput(
                "--seq-len/--context",
                start + q_len,
                f"model {self.config.name!r} has {self.config.max_seq_len} positions",
            )
        x = self.embed(input_ids)
        rotary = None
        if self.config.positions == "learned":
            x = x + self.pos_embed.weight[start : start + q_len]
        else:
            rotary = (
                self.rope_cos[start : start + q_len].to(x.dtype),
                self.rope_sin[start : start + q_len].to(x.dtype),
            )
        for i, block in enumerate(self.blocks):
            x = block(x, i, cache, rotary)
        if cache is not None:
            cache.advance(q_len)
        return self.lm_head(self.final_norm(x))


def build_builtin(
    name: str,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    seed: int = DEFAULT_SEED,
    vocab_size: int | None = None,
) -> DecoderLM:
    """A built-in model with weights ~ N(0, 0.02²) (norms 1, biases 0) from ``seed``.
    ``vocab_size`` replaces the built-in's vocabulary (a draft model must share its target's)."""
    key = ALIASES.get(name, name)
    if key not in BUILTIN_CONFIGS:
        raise InvalidInput("MODEL", name, f"unknown built-in model; known: {', '.join(builtin_names())}")
    config = BUILTIN_CONFIGS[key]
    if vocab_size is not None and vocab_size != config.vocab_size:
        config = replace(config, vocab_size=vocab_size)
    generator = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        model = DecoderLM(config)
    model = model.to_empty(device="cpu")
    with torch.no_grad():
        for pname, param in model.named_parameters():
            if pname.endswith("bias"):
                param.zero_()
            elif param.ndim == 1:
                param.fill_(1.0)
            else:
                param.normal_(0.0, 0.02, generator=generator)
        if config.positions == "rotary":
            model.rope_cos, model.rope_sin = rotary_tables(config)
    if config.tie_embeddings:
        model.lm_head.weight = model.embed.weight
    return model.to(device=device, dtype=dtype).eval()


# ---------------------------------------------------------------------------- loaded models


@dataclass
class LoadedModel:
    """A model ready to profile and how to call it for a prefill step."""

    name: str
    #: "builtin", "factory" or "hf"
    source: str
    model: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    config: TransformerConfig | None = None
    #: tokens one prefill step processes (B·T) when known
    tokens: int | None = None
    description: str = ""
    #: batch and sequence length of the token inputs, when the inputs are tokens
    batch: int | None = None
    seq_len: int | None = None
    #: analytic prefill FLOPs when the architecture gives them (dense hf: models,
    #: :func:`hf_prefill_flops`); built-ins compute theirs per mode from ``config``
    flops_analytic: float | None = None

    def inputs(self) -> str:
        """The example inputs in one line: ``input_ids 4×128 int64``."""
        parts = []
        for name, value in [*((f"arg{i}", a) for i, a in enumerate(self.args)), *self.kwargs.items()]:
            if isinstance(value, torch.Tensor):
                shape = "×".join(str(s) for s in value.shape) or "scalar"
                parts.append(f"{name} {shape} {str(value.dtype).removeprefix('torch.')}")
        return ", ".join(parts) or "no tensor inputs"

    @property
    def supports_decode(self) -> bool:
        return isinstance(self.model, DecoderLM)

    def n_params(self) -> int:
        if not isinstance(self.model, nn.Module):
            return 0
        seen: set[int] = set()
        total = 0
        for p in self.model.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                total += p.numel()
        return total

    def prefill(self) -> Any:
        return self.model(*self.args, **self.kwargs)


def random_tokens(
    batch: int, seq_len: int, vocab: int, *, device: torch.device | str = "cpu", seed: int = DEFAULT_SEED
) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed + 1)
    return torch.randint(0, vocab, (batch, seq_len), generator=generator).to(device)


def load_model(
    spec: str,
    *,
    batch_size: int = 1,
    seq_len: int = 128,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    hf_overrides: Mapping[str, Any] | None = None,
) -> LoadedModel:
    """Resolve ``MODEL``: a built-in name, ``hf:<model_type>[:base]``, or a factory spec."""
    if spec.startswith("hf:"):
        model_type, base = hf_spec(spec)
        return load_hf(
            model_type, hf_overrides or {}, batch_size=batch_size, seq_len=seq_len, device=device,
            dtype=dtype, base=base,
        )  # fmt: skip
    if hf_overrides:
        raise InvalidInput("--hf-config", ",".join(hf_overrides), "only applies to hf:<model_type> models")
    if ":" in spec:
        return load_factory(spec, batch_size=batch_size, seq_len=seq_len, device=device, dtype=dtype)
    key = ALIASES.get(spec, spec)
    if key not in BUILTIN_CONFIGS:
        raise InvalidInput(
            "MODEL",
            spec,
            f"unknown built-in model; known: {', '.join(builtin_names())} "
            "(or module:factory, path/to/file.py:factory, hf:<model_type>[:base])",
        )
    config = BUILTIN_CONFIGS[key]
    if seq_len > config.max_seq_len:
        raise InvalidInput("seq_len", seq_len, f"model {key!r} has {config.max_seq_len} positions")
    model = build_builtin(key, device=device, dtype=dtype)
    tokens = random_tokens(batch_size, seq_len, config.vocab_size, device=device)
    return LoadedModel(
        key,
        "builtin",
        model,
        (tokens,),
        config=config,
        tokens=batch_size * seq_len,
        description=config.description,
        batch=batch_size,
        seq_len=seq_len,
    )


def _import_factory(spec: str) -> Callable[..., Any]:
    target, _, attr = spec.rpartition(":")
    if not target or not attr.isidentifier():
        raise InvalidInput("MODEL", spec, "expected module:factory or path/to/file.py:factory")
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target).expanduser()
        if not path.is_file():
            raise InvalidInput("MODEL", spec, f"file {target} does not exist")
        mod_name = f"_infer_opt_user_{abs(hash(str(path.resolve())))}"
        loader_spec = importlib.util.spec_from_file_location(mod_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise InvalidInput("MODEL", spec, f"cannot load {target} as a Python file")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[mod_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(mod_name, None)
            raise InvalidInput("MODEL", spec, f"importing {target} failed: {_describe(exc)}") from exc
        except KeyboardInterrupt:  # Ctrl-C while importing: an interrupt (exit 130), not a failure
            sys.modules.pop(mod_name, None)
            raise
        except BaseException as exc:  # sys.exit, or another BaseException subclass
            sys.modules.pop(mod_name, None)
            raise RunFailure(f"importing {target} for the model factory {spec} {_stopped(exc)}") from None
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            raise InvalidInput("MODEL", spec, f"cannot import module {target!r}: {exc}") from exc
        except Exception as exc:
            raise InvalidInput("MODEL", spec, f"importing {target} failed: {_describe(exc)}") from exc
        except KeyboardInterrupt:  # Ctrl-C goes on: an interrupt, exit 130
            raise
        except BaseException as exc:  # sys.exit, or another BaseException subclass
            raise RunFailure(f"importing {target} for the model factory {spec} {_stopped(exc)}") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise InvalidInput("MODEL", spec, f"{target} has no attribute {attr!r}")
    if not callable(factory):
        raise InvalidInput("MODEL", spec, f"{target}:{attr} is not callable")
    return factory


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _stopped(exc: BaseException) -> str:
    """How user code stopped: ``called sys.exit(3)``, ``raised KeyboardInterrupt``, ``raised X: …``."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    return f"raised {_describe(exc)}"


#: a step's shape parameter -> the keyword a factory takes it by (context reaches no factory)
FACTORY_KEYWORDS = {"batch": "batch_size", "seq_len": "seq_len"}


def factory_ignores(spec: str, params: Sequence[str]) -> list[tuple[str, str]]:
    """The shape ``params`` (``batch``, ``seq_len``) a factory ``spec`` cannot be given — its
    signature takes no such keyword (and no ``**kwargs``) — as ``(param, keyword)``; empty for
    a built-in or an ``hf:`` model, which take every shape."""
    if spec.startswith("hf:") or ":" not in spec:
        return []
    factory = _import_factory(spec)
    offered = {FACTORY_KEYWORDS[p]: 1 for p in params if p in FACTORY_KEYWORDS}
    taken = factory_kwargs(factory, offered)
    return [(p, FACTORY_KEYWORDS[p]) for p in params if FACTORY_KEYWORDS.get(p, "") in offered.keys() - taken]


def factory_kwargs(factory: Callable[..., Any], available: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of ``available`` the factory's signature accepts (all with ``**kwargs``)."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(available)
    return {k: v for k, v in available.items() if k in params}


def _move(value: Any, device: torch.device | str, dtype: torch.dtype | None) -> Any:
    if isinstance(value, torch.Tensor):
        if dtype is not None and value.is_floating_point():
            return value.to(device=device, dtype=dtype)
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(_move(v, device, dtype) for v in value)
    if isinstance(value, list):
        return [_move(v, device, dtype) for v in value]
    if isinstance(value, dict):
        return {k: _move(v, device, dtype) for k, v in value.items()}
    return value


def split_inputs(example_inputs: Any, where: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A tensor -> one argument; a tuple/list -> positional arguments; a dict -> keywords."""
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,), {}
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs), {}
    if isinstance(example_inputs, Mapping):
        if not all(isinstance(k, str) for k in example_inputs):
            raise InvalidInput("MODEL", where, "example_inputs dict keys must be argument names (str)")
        return (), dict(example_inputs)
    raise InvalidInput(
        "MODEL",
        where,
        f"example_inputs must be a tensor, a tuple of arguments or a dict of keyword arguments, "
        f"not {type(example_inputs).__name__}",
    )


def _token_shape(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[int, int] | None:
    """(batch, length) when the first input (or ``input_ids``) is a 2-D integer tensor."""
    first = kwargs.get("input_ids", args[0] if args else None)
    if isinstance(first, torch.Tensor) and first.ndim == 2 and not first.is_floating_point():
        return int(first.shape[0]), int(first.shape[1])
    return None


def load_factory(
    spec: str,
    *,
    batch_size: int,
    seq_len: int,
    device: torch.device | str,
    dtype: torch.dtype,
) -> LoadedModel:
    """Call a user factory; it returns ``(model, example_inputs)``. ``batch_size``,
    ``seq_len``, ``device`` and ``dtype`` are passed when its signature accepts them; when it
    takes no ``device`` (``dtype``) the model and tensor inputs are moved (floating ones cast)."""
    factory = _import_factory(spec)
    offered = {"batch_size": batch_size, "seq_len": seq_len, "device": device, "dtype": dtype}
    kwargs = factory_kwargs(factory, offered)
    threads = torch.get_num_threads()
    try:
        returned = factory(**kwargs)
    except torch.cuda.OutOfMemoryError:
        raise
    except KeyboardInterrupt:  # Ctrl-C inside the factory: an interrupt (exit 130), not its failure
        raise
    except BaseException as exc:  # user code (a BaseException subclass too): never a silent exit
        if isinstance(exc, GeneratorExit):
            raise
        raise RunFailure(f"the model factory {spec} {_stopped(exc)}") from exc
    if torch.get_num_threads() != threads:  # --threads (or the calibration's) wins over the factory's
        torch.set_num_threads(threads)
    if not isinstance(returned, (tuple, list)) or len(returned) != 2:
        raise InvalidInput(
            "MODEL", spec, f"the factory must return (model, example_inputs), got {type(returned).__name__}"
        )
    model, example_inputs = returned
    if not callable(model):
        raise InvalidInput("MODEL", spec, f"the factory's model is not callable ({type(model).__name__})")
    cast = None if "dtype" in kwargs else dtype
    if isinstance(model, nn.Module):
        if "device" not in kwargs:
            model = model.to(device)
        if cast is not None:
            model = model.to(cast)
        model.eval()
    args, kw = split_inputs(example_inputs, spec)
    if "device" not in kwargs or cast is not None:
        args, kw = _move(args, device, cast), _move(kw, device, cast)
    target, _, attr = spec.rpartition(":")
    name = f"{Path(target).name}:{attr}" if target.endswith(".py") else spec
    doc = (inspect.getdoc(factory) or "").splitlines()
    shape = _token_shape(args, kw)
    return LoadedModel(
        name,
        "factory",
        model,
        args,
        kw,
        tokens=shape[0] * shape[1] if shape else None,
        description=doc[0] if doc else spec,
        batch=shape[0] if shape else None,
        seq_len=shape[1] if shape else None,
    )


def parse_hf_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``key=value`` -> {key: value}; values become int, float, bool or None when they read so.
    A key given twice is refused (the last would win silently)."""
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise InvalidInput("--hf-config", item, "expected KEY=VALUE, e.g. n_layer=2")
        key = key.strip()
        if key in given:
            twice = f"{key} is given twice; give each key once"
            raise InvalidInput("--hf-config", f"{given[key]} {item}", twice)
        given[key] = item
        out[key] = _literal(raw.strip())
    return out


def _literal(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


HF_SPEC = "hf:<model_type> (its causal LM) or hf:<model_type>:base (the model without its head)"


def hf_spec(spec: str) -> tuple[str, bool]:
    """``hf:<model_type>[:base]`` -> (model type, whether the base model without its head)."""
    model_type, sep, kind = spec.removeprefix("hf:").partition(":")
    if not model_type or (sep and kind != "base"):
        raise InvalidInput("MODEL", spec, f"expected {HF_SPEC}, e.g. hf:gpt2, hf:llama or hf:bert:base")
    return model_type, bool(sep)


def load_hf(
    model_type: str,
    overrides: Mapping[str, Any],
    *,
    batch_size: int,
    seq_len: int,
    device: torch.device | str,
    dtype: torch.dtype | None = None,
    base: bool = False,
) -> LoadedModel:
    """``AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **overrides))`` —
    ``AutoModel`` with ``base``: random weights, nothing downloaded. A forward on random
    ``input_ids`` (decode: :mod:`infer_opt.profilers.model_profile`)."""
    name = f"hf:{model_type}" + (":base" if base else "")
    try:
        import transformers
    except ImportError:
        raise InvalidInput("MODEL", name, HF_EXTRA_MESSAGE) from None
    if not model_type:
        raise InvalidInput("MODEL", "hf:", f"expected {HF_SPEC}, e.g. hf:gpt2 or hf:llama")
    # what the config refuses is the user's input: the model type, or --hf-config's values (a
    # ValueError, or huggingface_hub's StrictDataclassError in newer transformers)
    option, given = ("hf_config", _overrides_text(overrides)) if overrides else ("MODEL", name)
    config = _hf_config(transformers, model_type, overrides, option, given)
    auto = transformers.AutoModel if base else transformers.AutoModelForCausalLM
    torch.manual_seed(DEFAULT_SEED)
    if str(device) != "meta":
        _check_hf_weights(auto, config, dtype, device, given)
    try:
        model = auto.from_config(config)
    except Exception as exc:
        if out_of_memory(exc) is not None:
            raise
        what = "model" if base else "causal LM"
        hint = "" if base else f" (hf:{model_type}:base builds the model without a head)"
        raise InvalidInput(
            option, given, f"transformers built no {what} from this config{hint}: {_exception_text(exc)}"
        ) from None
    model = model.to(device=device, dtype=dtype).eval() if dtype else model.to(device).eval()
    attention = f"{getattr(model.config, '_attn_implementation', None) or 'default'} attention"
    main = getattr(model, "main_input_name", "input_ids")
    if main == "pixel_values":
        pixels = hf_pixels(config, batch_size, device=device, dtype=dtype)
        shape = "×".join(map(str, pixels.shape[1:]))
        return LoadedModel(
            name, "hf", model, (), {"pixel_values": pixels},
            description=f"transformers {type(model).__name__} from its config (random weights), {attention}, "
            f"{batch_size} input(s) of {shape} pixels (the config's image size; --seq-len is unused)",
            batch=batch_size,
        )  # fmt: skip
    if main != "input_ids":
        takes = "hf: models take input_ids (text) or pixel_values (images, video)"
        raise InvalidInput("MODEL", name, f"its input is {main}: {takes}")
    vocab = int(getattr(config, "vocab_size", 1000) or 1000)
    max_pos = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if max_pos is not None and seq_len > int(max_pos):
        raise InvalidInput("seq_len", seq_len, f"{name} has {max_pos} positions")
    ids = random_tokens(batch_size, seq_len, vocab, device=device)
    analytic = hf_prefill_flops(model, config, batch_size, seq_len)
    return LoadedModel(
        name,
        "hf",
        model,
        (),
        # no KV cache: every call is the same prefill over the same tokens (the recording and the
        # profiler pass must run the same ops)
        {"input_ids": ids, "use_cache": False},
        tokens=batch_size * seq_len,
        description=f"transformers {type(model).__name__} from its config (random weights), {attention}",
        batch=batch_size,
        seq_len=seq_len,
        flops_analytic=float(analytic) if analytic is not None else None,
    )


def hf_pixels(config: Any, batch: int, *, device: Any, dtype: Any, seed: int = DEFAULT_SEED) -> torch.Tensor:
    """Random ``pixel_values`` for an image (or video) model: ``(batch, [num_frames,] channels,
    H, W)`` at the config's ``image_size`` (224 where it has none), ``num_channels`` (3) and
    ``num_frames`` (a video model's)."""
    size = getattr(config, "image_size", None) or 224
    h, w = (int(size[0]), int(size[1])) if isinstance(size, (list, tuple)) else (int(size), int(size))
    channels = int(getattr(config, "num_channels", None) or 3)
    frames = getattr(config, "num_frames", None)
    shape = (batch, int(frames), channels, h, w) if frames else (batch, channels, h, w)
    generator = torch.Generator().manual_seed(seed + 2)
    return torch.randn(shape, generator=generator, dtype=dtype or torch.float32).to(device)


def _hf_config(
    transformers: Any, model_type: str, overrides: Mapping[str, Any], option: str, given: str
) -> Any:
    """The model type's config with ``overrides``, each checked first (known keys, types,
    counts and sizes in range, a head split that divides: :mod:`infer_opt.profilers.hf_config`)."""
    from infer_opt.profilers import hf_config

    try:
        if overrides:
            hf_config.check_keys(model_type, overrides, transformers.AutoConfig.for_model(model_type))
        config = transformers.AutoConfig.for_model(model_type, **overrides)
    except InvalidInput:
        raise
    except Exception as exc:
        raise InvalidInput(option, given, f"transformers: {_exception_text(exc)}") from None
    if overrides:
        hf_config.check_head_split(config, overrides)
    return config


def _check_hf_weights(auto: Any, config: Any, dtype: Any, device: Any, given: str) -> None:
    """A model built with real weights must fit in memory: counted on the meta device first."""
    from infer_opt.profilers import hf_config
    from infer_opt.profilers.distributed import available_memory

    if str(device) != "cpu":
        return
    try:
        with torch.device("meta"):
            meta = auto.from_config(config)
    except Exception:  # what cannot be built is reported by the real build
        return
    n_params = sum(p.numel() for p in meta.parameters())
    itemsize = (dtype or torch.float32).itemsize if isinstance(dtype, torch.dtype) or dtype is None else 4
    hf_config.check_weights_fit(n_params, itemsize, device, given, available_memory())


def _overrides_text(overrides: Mapping[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in overrides.items())


def _exception_text(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


#: config attributes that make a model a mixture of experts (only some weights run per token)
_MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


def matmul_weight_count(model: nn.Module, *, pooler: bool | None = None) -> int:
    """Weights that multiply activations: the 2-D parameters of every module that is not an
    embedding (``Linear``, transformers' ``Conv1D``, the LM head; a tied head counted once).
    ``pooler``: only those inside a transformers ``*Pooler`` (True) or only those outside (False);
    every one by default."""
    inside = {id(p) for m in model.modules() if type(m).__name__.endswith("Pooler") for p in m.parameters()}
    seen: set[int] = set()
    total = 0
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            continue
        for param in module.parameters(recurse=False):
            wanted = pooler is None or (id(param) in inside) == pooler
            if param.ndim == 2 and id(param) not in seen and wanted:
                seen.add(id(param))
                total += param.numel()
    return total


def _config_int(config: Any, name: str) -> int | None:
    value = getattr(config, name, None)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def hf_prefill_flops(model: nn.Module, config: Any, batch: int, seq_len: int) -> int | None:
    """Analytic prefill FLOPs of a dense transformers model, as for the built-ins:
    ``2·P_matmul·B·T + 2·P_pooler·B + 4·B·H·T²·d·L / 2`` (:func:`matmul_weight_count`; causal
    attention halved, the one convention of ``profile``, ``predict`` and ``trace``; dense for
    ``eager`` attention, which multiplies the whole score matrix, and for an encoder's; a pooler
    reads one token a sequence). ``None`` for a mixture of experts or when the config does not
    name heads and layers."""
    if any((_config_int(config, key) or 0) > 1 for key in _MOE_KEYS):
        return None
    heads = _config_int(config, "num_attention_heads")
    layers = _config_int(config, "num_hidden_layers")
    hidden = _config_int(config, "hidden_size")
    if heads is None or layers is None:
        return None
    head_dim = _config_int(config, "head_dim") or (hidden // heads if hidden else None)
    if head_dim is None:
        return None
    tokens = batch * seq_len
    attention = 4 * batch * heads * seq_len * seq_len * head_dim * layers
    # eager attention multiplies the whole T×T score matrix: dense, the work it does; so does an
    # encoder's (bert, ViT: its attention modules say is_causal=False), causal or not
    eager = getattr(config, "_attn_implementation", "sdpa") == "eager"
    causal_kernel = seq_len > 1 and not eager and _causal_attention(model)
    # a pooler (bert's, ViT's) reads one token of each sequence
    pooled = matmul_weight_count(model, pooler=True)
    matmuls = 2 * matmul_weight_count(model, pooler=False) * tokens + 2 * pooled * batch
    return matmuls + (attention // 2 if causal_kernel else attention)


def _causal_attention(model: nn.Module) -> bool:
    """Whether the model's self-attention is causal: what its attention modules' ``is_causal``
    say (transformers sets it: True in a decoder's, False in an encoder's); causal where none
    says (an older transformers)."""
    said = [m.is_causal for m in model.modules() if isinstance(getattr(m, "is_causal", None), bool)]
    return any(said) if said else True


def param_count_analytic(config: TransformerConfig) -> int:
    """Parameters of a built-in, counted from the config (tied embeddings counted once)."""
    d, kv = config.d_model, config.n_kv_heads * config.head_dim
    norm = (2 if config.norm == "layernorm" else 1) * d
    attn = 2 * d * d + 2 * d * kv + (2 * d + 2 * kv if config.bias else 0)
    n_mlp = 3 if config.mlp == "swiglu" else 2
    mlp = n_mlp * d * config.d_ff + ((n_mlp - 1) * config.d_ff + d if config.bias else 0)
    pos = config.max_seq_len * d if config.positions == "learned" else 0
    head = 0 if config.tie_embeddings else d * config.vocab_size
    return config.vocab_size * d + pos + config.n_layers * (2 * norm + attn + mlp) + norm + head
