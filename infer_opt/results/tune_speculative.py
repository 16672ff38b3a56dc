"""The ``tune-speculative`` result kind: the draft length per batch size (``infer-opt tune speculative``)."""

from __future__ import annotations

from dataclasses import dataclass

from infer_opt.notices import Notice
from infer_opt.results import Result


@dataclass(frozen=True)
class KRow:
    """The best draft length at one batch size: S(k, b) = t(b)·E[N](k) / (k·t_d(b) + t(b·(k+1)) + c_m)."""

    batch_size: int
    k: int
    speedup: float
    expected_tokens: float
    share: float | None = None


@dataclass(frozen=True)
class TuneSpeculativeResult(Result):
    KIND = "tune-speculative"

    table: tuple[KRow, ...]
    #: the smallest batch size from which k = 0 (None: speculation pays at every size given)
    stop_above_batch: int | None
    #: the time ratio over the distribution (uniform over --batch-sizes): the plain time of its
    #: steps over their speculative time, Σ p(b)·t(b) / Σ p(b)·t(b)/S(k*(b), b) (never the mean of
    #: per-batch speed-ups: a 3x at batch 1 and 1x at batch 512 is ~1.01x of the time, not 2x)
    expected_gain: float
    alphas: tuple[float, ...]
    k_max: int
    overhead_s: float
    #: S(k, b) for k = 0..k_max at each batch size (rows follow ``table``)
    speedups: tuple[tuple[float, ...], ...]
    #: {"vllm": "--speculative-config '...'"}
    flags: dict[str, str]
    num_speculative_tokens: int
    #: the per-batch-size table as vLLM's speculative_config key takes it
    vllm_key: str
    vllm_key_source: str
    inputs: dict[str, str]
    warnings: tuple[Notice, ...] = ()
