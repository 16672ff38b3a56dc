"""``--hf-config KEY=VALUE`` checked before any model is built (issue 33, class 4).

What is refused, each as one :class:`~infer_opt.errors.InvalidInput` naming ``hf_config``
(the CLI says ``--hf-config``):

* a key given twice (the last would win silently: :func:`~infer_opt.profilers.models.parse_hf_overrides`);
* a key the model type's configuration does not have (``n_layers`` for gpt2's ``n_layer``),
  with the closest keys it has;
* a value of another type than the configuration's default (``n_layer=2.5``, ``n_layer=two``);
* a count or size (layers, heads, hidden and intermediate sizes, vocabulary, positions, head
  dimension, experts) below 1 or above :data:`SIZE_LIMITS` — beyond any model ever trained,
  where recording alone would run for minutes;
* a head split that does not divide: hidden size by attention heads, attention heads by
  key-value heads;
* weights that cannot fit in the machine's memory, for a model built with real weights
  (:func:`check_weights_fit`; a recording on fake tensors holds none).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from infer_opt.errors import InvalidInput

OPTION = "hf_config"

#: the largest value a count or size key may take (by the pattern its name matches)
SIZE_LIMITS: tuple[tuple[str, int], ...] = (
    (r"(^n_layers?$|^num_hidden_layers$|^num_layers$|_layers$)", 1024),
    (r"(^n_heads?$|^num_attention_heads$|^num_key_value_heads$|^n_head_kv$|_heads$)", 4096),
    (r"(experts|^num_experts_per_tok$)", 4096),
    (r"(^vocab_size$)", 1 << 24),
    (r"(positions$|^n_ctx$|^max_position_embeddings$|^seq_length$)", 1 << 24),
    (r"(^head_dim$|_head_dim$)", 1 << 14),
    (r"(^hidden_size$|^n_embd$|^d_model$|^intermediate_size$|^n_inner$|^ffn_dim$|_size$|_dim$)", 1 << 18),
)
#: the configuration's names for the hidden size, attention heads and key-value heads
_HIDDEN = ("hidden_size", "n_embd", "d_model")
_HEADS = ("num_attention_heads", "n_head")
_KV_HEADS = ("num_key_value_heads",)


def size_limit(key: str) -> int | None:
    """The largest value of a count or size key (None: not one)."""
    return next((limit for pattern, limit in SIZE_LIMITS if re.search(pattern, key)), None)


def _known_keys(defaults: Any) -> set[str]:
    keys = set(defaults.to_dict())
    keys |= set(getattr(defaults, "attribute_map", {}) or {})
    keys |= {k.strip("_").removesuffix("_internal") for k in vars(defaults)}
    return keys


def _shown(key: str, value: Any) -> str:
    return f"{key}={value}"


def check_keys(model_type: str, overrides: Mapping[str, Any], defaults: Any) -> None:
    """Each key is one of the configuration's, its value of the default's type, a count or
    size in range (module docstring)."""
    known = _known_keys(defaults)
    for key, value in overrides.items():
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            unknown = f"hf:{model_type}'s config has no key {key!r}{hint}"
            raise InvalidInput(OPTION, _shown(key, value), unknown)
        _check_value(key, value, getattr(defaults, key, None))


def _check_value(key: str, value: Any, default: Any) -> None:
    limit = size_limit(key)
    if value is None:
        return
    if isinstance(default, bool) and not isinstance(value, bool):
        raise InvalidInput(OPTION, _shown(key, value), f"{key} must be true or false")
    whole = isinstance(value, int) and not isinstance(value, bool)
    if limit is not None and (isinstance(default, int) or default is None) and not isinstance(default, bool):
        if not whole:
            raise InvalidInput(OPTION, _shown(key, value), f"{key} must be a whole number")
        low = 0 if default == 0 else 1  # chunk_size_feed_forward: 0 is "off"
        if not low <= value <= limit:
            raise InvalidInput(OPTION, _shown(key, value), f"{key} must be in [{low}, {limit}]")
        return
    if isinstance(default, int) and not isinstance(default, bool) and not whole:
        raise InvalidInput(OPTION, _shown(key, value), f"{key} must be a whole number")
    if isinstance(default, float) and not (isinstance(value, (int, float)) and not isinstance(value, bool)):
        raise InvalidInput(OPTION, _shown(key, value), f"{key} must be a number")
    if isinstance(value, float) and value != value:
        raise InvalidInput(OPTION, _shown(key, value), f"{key} must be a number")


def _first(config: Any, names: Sequence[str]) -> tuple[str, int] | None:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return name, value
    return None


def check_head_split(config: Any, overrides: Mapping[str, Any]) -> None:
    """Hidden size divisible by the attention heads (unless the config sets its own head
    dimension), attention heads by the key-value heads."""
    hidden, heads, kv = _first(config, _HIDDEN), _first(config, _HEADS), _first(config, _KV_HEADS)
    given = " ".join(_shown(k, v) for k, v in overrides.items())
    if heads is not None and hidden is not None and "head_dim" not in overrides and hidden[1] % heads[1]:
        raise InvalidInput(
            OPTION, given, f"{hidden[0]} ({hidden[1]}) must be a multiple of {heads[0]} ({heads[1]})"
        )
    if heads is not None and kv is not None and heads[1] % kv[1]:
        raise InvalidInput(OPTION, given, f"{heads[0]} ({heads[1]}) must be a multiple of {kv[0]} ({kv[1]})")


def check_weights_fit(n_params: int, itemsize: int, device: Any, given: str, memory: int | None) -> None:
    """Weights of ``n_params`` × ``itemsize`` bytes on the CPU must fit in ``memory`` (bytes
    available; None: unknown, not checked): else one line saying what fits."""
    from infer_opt.units import format_bytes

    if str(device) != "cpu" or memory is None:
        return
    need = n_params * itemsize
    if need > memory:
        raise InvalidInput(
            OPTION,
            given,
            f"{n_params / 1e9:.3g} B parameters need {format_bytes(need)} of weights; this machine "
            f"has {format_bytes(memory)} available (predict records on fake tensors, without weights)",
        )
