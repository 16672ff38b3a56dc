"""The requests of the commands that measure collectives, A/B runs and speculative decoding:
:mod:`infer_opt.requests`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infer_opt.requests import (
    COLLECTIVES,
    DIST_BACKENDS,
    MAX_AB_ROUNDS,
    MAX_COMM_REPS,
    MAX_K,
    MAX_REPS,
    MAX_SIZE,
    MAX_TRIALS,
    MAX_VERIFY_K,
    MAX_VOCAB,
    THREADS,
    Choice,
    Count,
    CountRange,
    Duration,
    Each,
    Flag,
    Folder,
    Fraction,
    InputFile,
    Number,
    NumberList,
    Request,
    Size,
    Strings,
    option,
)


@dataclass(frozen=True)
class CommRequest(Request):
    """``infer-opt comm`` on this rank (``--nproc`` starts the ranks: the command line's)."""

    collective: tuple[str, ...] | None = option(None, Each(Choice(COLLECTIVES)))
    min_size: float = option(4.0, Size())
    max_size: float | None = option(None, Size())
    factor: int = option(2, Count(2, 1024))
    warmup: int = option(5, Count(0, MAX_COMM_REPS))
    reps: int = option(20, Count(1, MAX_COMM_REPS))
    device: str = option("auto")
    dtype: str = option("float32", Choice(("float32", "bfloat16", "float16")))
    dist_backend: str = option("auto", Choice(DIST_BACKENDS))
    timeout: float = option(60.0, Duration("s", allow_zero=False, most_s=24 * 3600.0))
    no_save: bool = option(False, Flag())


@dataclass(frozen=True)
class AbRequest(Request):
    """``infer-opt ab``: two command lines (``base``, ``new``: the commands it runs, as text)
    alternated for ``rounds`` rounds, then compared."""

    base: str = option()
    new: str = option()
    rounds: int = option(3, Count(1, MAX_AB_ROUNDS))
    base_env: tuple[str, ...] = option((), Strings())
    new_env: tuple[str, ...] = option((), Strings())
    dir: Path | None = option(None, Folder("the rounds' results"))
    threshold: float = option(0.05, Fraction(0, 1))
    significance: float = option(0.05, Number(0, 1, low_open=True, high_open=True))
    force: bool = option(False, Flag())
    save_floor: bool = option(True, Flag())
    seed: int = option(0, Count(0))


@dataclass(frozen=True)
class SpeculativeVerifyRequest(Request):
    """``infer-opt speculative verify``: the sampler's exactness over random p, q."""

    vocab: int = option(4, Count(2, MAX_VOCAB))
    k: int = option(3, Count(1, MAX_VERIFY_K))
    trials: int = option(20000, Count(1, MAX_TRIALS))
    seed: int = option(0, Count(0))
    alpha_target: float | None = option(None, Number(0, 1, low_open=True, high_open=True))


@dataclass(frozen=True)
class SpeculativeMeasureRequest(Request):
    """``infer-opt speculative measure``: the costs of a target/draft pair, and the decisions
    for one of ``alpha``, ``alphas`` or ``metrics`` (a serving engine's counters)."""

    target: str = option("gpt2-small")
    draft: str = option("tiny")
    k_max: int = option(8, Count(1, MAX_K))
    context: int = option(128, Count(0, MAX_SIZE))
    device: str = option("auto")
    dtype: str = option("auto")
    warmup: int = option(2, Count(0, MAX_REPS))
    reps: int = option(10, Count(1, MAX_REPS))
    alpha: float | None = option(None, Number(0, 1))
    alphas: tuple[float, ...] | None = option(None, NumberList(low=0, high=1))
    metrics: Path | None = option(None, InputFile())
    k: int | None = option(None, Count(1, MAX_K))
    simulate_acceptance: bool = option(False, Flag())
    rounds: int = option(32, Count(1, 100_000))
    seed: int = option(0, Count(0))


@dataclass(frozen=True)
class SpeculativeRunRequest(Request):
    """``infer-opt speculative run``: speculative decoding run and timed against plain decoding."""

    target: str = option("gpt2-small")
    draft: str = option("self:4")
    k: int | None = option(None, Count(1, MAX_K))
    sweep_k: tuple[int, ...] | None = option(None, CountRange(1, MAX_K))
    new_tokens: int = option(64, Count(1, 100_000))
    greedy: bool = option(False, Flag())
    temperature: float | None = option(None, Number(0, low_open=True))
    prompt_len: int = option(32, Count(1, MAX_SIZE))
    seed: int = option(0, Count(0))
    threads: int | None = option(None, THREADS)
    device: str = option("auto")
    dtype: str = option("auto")
    warmup: int = option(1, Count(0, MAX_REPS))
    reps: int = option(5, Count(1, MAX_REPS))
    cost_reps: int = option(20, Count(1, MAX_REPS))
