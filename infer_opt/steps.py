"""The step a model runs — its modes, and which shape parameters each mode reads — shared by the
commands that run or predict one (``profile``, ``predict``, ``validate``) and the profilers
behind them. Light: imports nothing."""

from __future__ import annotations

from collections.abc import Sequence

MODES = ("prefill", "decode", "generate")
#: the shape parameters each mode reads: every mode its batch; prefill and generate the prompt's
#: length, a decode step the length of its KV cache, generate the tokens it makes
SHAPE_MODES: dict[str, tuple[str, ...]] = {
    "batch": MODES,
    "seq_len": ("prefill", "generate"),
    "context": ("decode",),
    "new_tokens": ("generate",),
}
#: why a mode does not read a shape parameter, and the parameter it reads instead (if any)
NOT_READ = {
    "seq_len": ("a decode step's length is its KV cache", "context"),
    "context": ("a prefill's or generate's length is its prompt", "seq_len"),
    "new_tokens": ("only generate makes new tokens", None),
}


def not_read(param: str, written: str = "--{}") -> str:
    """Why ``param`` is not read, and what to give instead, the other parameter's name
    ``written`` as a flag (``--context``) or as a sweep (``"{}=…"``)."""
    reason, other = NOT_READ[param]
    return reason if other is None else f"{reason}: {written.format(other.replace('_', '-'))}"


def reads(param: str, modes: Sequence[str]) -> bool:
    """Whether any of ``modes`` reads the shape parameter ``param``."""
    return any(mode in SHAPE_MODES[param] for mode in modes)
