"""The step a model runs — its modes, which shape parameters each mode reads, and the one
settings object a measured step is made from (:class:`StepSettings`) — shared by the commands
that run or predict one (``profile``, ``predict``, ``validate``) and the profilers behind them.
Light: imports nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

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


@dataclass(frozen=True)
class Shape:
    """The step's shape: ``batch`` sequences of ``seq_len`` tokens (prefill; generate's prompt),
    one token over a KV cache of ``context`` (decode), ``new_tokens`` made (generate)."""

    batch: int = 1
    seq_len: int = 128
    mode: str = "prefill"
    context: int = 128
    new_tokens: int = 32


@dataclass(frozen=True)
class StepSettings:
    """Everything a measured model step is made from, made once where the user's options come
    in (the CLI, the API, a ``validate`` grid point, every rank of ``profile --tp``) and carried
    by the result (like ``torch.utils.benchmark``'s ``TaskSpec`` inside its ``Measurement``).

    What to load: ``model`` (a built-in, ``module:factory``, ``file.py:factory`` or
    ``hf:<model_type>[:base]``) and ``hf_config`` (``key=value`` overrides of an ``hf:`` config); where:
    ``device`` and ``dtype`` (``"auto"`` until loaded: the result carries them resolved, as
    ``"cpu"``, ``"float32"``) and the CPU's intra-op ``threads`` (None: as torch is set; resolved,
    the count the step ran at, None on CUDA); the step's :class:`Shape`; how it is timed:
    ``warmup`` untimed calls, ``reps`` timed repetitions, ``runs`` independent passes."""

    model: str = "tiny"
    device: str = "auto"
    dtype: str = "auto"
    shape: Shape = field(default_factory=Shape)
    warmup: int = 3
    reps: int = 20
    runs: int = 1
    threads: int | None = None
    hf_config: tuple[str, ...] = ()

    @property
    def mode(self) -> str:
        return self.shape.mode

    def at(self, **shape: Any) -> StepSettings:
        """These settings with some shape parameters changed (a grid point)."""
        return replace(self, shape=replace(self.shape, **shape))
