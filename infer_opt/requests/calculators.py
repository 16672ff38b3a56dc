"""The requests of the calculators (amdahl, buckets, attention, amortize, the speculative cost
models): :mod:`infer_opt.requests`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_opt.errors import InvalidInput
from infer_opt.requests import (
    MAX_DRAFT,
    MAX_REPS,
    Bounds,
    Choice,
    Count,
    CountList,
    Duration,
    Each,
    Flag,
    InputFile,
    KMax,
    Lengths,
    Number,
    NumberList,
    PartSpec,
    Request,
    Resume,
    Strings,
    VerifyModel,
    option,
)


@dataclass(frozen=True)
class AmdahlRequest(Request):
    """``infer-opt amdahl``: one part (``fraction``, ``speedup``) or several, added overhead, a
    target to solve for."""

    fraction: float | None = option(None, Number(0, 1), positional=True)
    speedup: float | None = option(None, Number(1e-9, allow_inf=True), positional=True)
    part: tuple[Any, ...] | None = option(None, Each(PartSpec()))
    added: float = option(0.0, Number(0))
    target_speedup: float | None = option(None, Number(0, low_open=True))


@dataclass(frozen=True)
class BucketsRequest(Request):
    """``infer-opt buckets``: padding waste of a length sample under ``bounds``, or the
    ``optimize`` bounds with the least."""

    file: Any = option(check=Lengths(), positional=True)
    bounds: tuple[int, ...] | None = option(None, Bounds(), positional=True)
    batch_size: int = option(1, Count(1, 1 << 20))
    allow_unbucketed: bool = option(False, Flag())
    optimize: int | None = option(None, Count(1))
    cost: str = option("linear", Choice(("linear", "quadratic")))
    compile_cost: float | None = option(None, Duration("s"))
    token_cost: float | None = option(None, Duration("us"))
    requests: int | None = option(None, Count(1))


@dataclass(frozen=True)
class AttentionMemoryRequest(Request):
    """``infer-opt attention memory``: score-matrix memory, HBM traffic and FLOPs of attention."""

    tq: int = option(check=Count(1, 1 << 30))
    tk: int = option(check=Count(1, 1 << 30))
    heads: int = option(check=Count(1, 1 << 30))
    head_dim: int = option(check=Count(1, 1 << 30))
    batch: int = option(1, Count(1, 1 << 30))
    dtype: str = option("float16")
    causal: bool = option(False, Flag())


@dataclass(frozen=True)
class AttentionWindowRequest(Request):
    """``infer-opt attention window``: the output error bound ``2·δ·M`` of dropping keys."""

    dropped_mass: float = option(check=Number(0, 1, high_open=True), positional=True)
    value_norm: float = option(check=Number(0), positional=True)


@dataclass(frozen=True)
class AttentionCheckRequest(Request):
    """``infer-opt attention check``: the attention kernels' exactness over the masks."""

    tq: int = option(4, Count(1, 8192))
    tk: int = option(128, Count(1, 8192))
    heads: int = option(4, Count(1, 128))
    head_dim: int = option(32, Count(1, 1024))
    block_size: int = option(32, Count(1, 8192))
    window: int = option(48, Count(1, 8192))
    seed: int = option(0, Count(0))
    dtype: str = option("float32", Choice(("float32", "float64")))


@dataclass(frozen=True)
class AmortizeRequest(Request):
    """``infer-opt amortize``: one shape (seconds from Python; ``eager``/``compiled`` bare
    numbers are ms on the command line) or a bucket CSV, its calls from a length sample."""

    compile_cost: float | None = option(None, Duration("s"), positional=True)
    eager: float | None = option(None, Duration("ms"), positional=True)
    compiled: float | None = option(None, Duration("ms"), positional=True)
    calls: int | None = option(None, Count(0), positional=True)
    buckets: Path | None = option(None, InputFile(allow_stdin=True))
    lengths: Path | None = option(None, InputFile(allow_stdin=True))
    requests: int | None = option(None, Count(1))


@dataclass(frozen=True)
class SpecCostsRequest(Request):
    """The per-round costs of a speculative calculator (seconds from Python; bare numbers are
    ms on the command line): c_v = c_t (said as assumed) without ``verify_cost(_model)``."""

    target_cost: float | None = option(None, Duration("ms", allow_zero=False))
    draft_cost: float | None = option(None, Duration("ms"))
    verify_cost: float | None = option(None, Duration("ms"))
    verify_cost_model: tuple[float, float] | None = option(None, VerifyModel())
    overhead: float = option(0.0, Duration("ms"))

    def costs(self) -> Any:
        from infer_opt.results.speculative import Costs

        c_t, c_d, c_v, model = self.target_cost, self.draft_cost, self.verify_cost, self.verify_cost_model
        if c_t is None:
            raise InvalidInput(
                "--target-cost", "missing", "give c_t, the cost of one plain target step (e.g. 10ms)"
            )
        if c_d is None:
            raise InvalidInput("--draft-cost", "missing", "give c_d, the cost of one draft token (e.g. 1ms)")
        if c_v is not None and model is not None:
            raise InvalidInput("--verify-cost", c_v, "give --verify-cost or --verify-cost-model, not both")
        if c_v is not None:
            return Costs(c_t, c_d, c_v, 0.0, self.overhead)
        if model is not None:
            return Costs(c_t, c_d, model[0], model[1], self.overhead)
        return Costs(c_t, c_d, c_t, 0.0, self.overhead, verify_assumed=True)


@dataclass(frozen=True)
class SpecSpeedupRequest(SpecCostsRequest):
    """``infer-opt speculative speedup``: E[N] and the speedup of one draft length (or a sweep)."""

    k: int | None = option(None, Count(1, MAX_DRAFT))
    alpha: float | None = option(None, Number(0, 1))
    alphas: tuple[float, ...] | None = option(None, NumberList(low=0, high=1))
    budget: int | None = option(None, Count(1))
    k_max: int | None = option(None, KMax(1, MAX_DRAFT))


@dataclass(frozen=True)
class AcceptanceRequest(Request):
    """``infer-opt speculative acceptance``: draft tokens ``x ~ q`` against the target ``p``."""

    p: tuple[float, ...] | None = option(None, NumberList(allow_inf=True), positional=True)
    q: tuple[float, ...] | None = option(None, NumberList(allow_inf=True), positional=True)
    p_file: Path | None = option(None, InputFile())
    q_file: Path | None = option(None, InputFile())
    logits: bool = option(False, Flag())
    p_temperature: float | None = option(None, Number(0, low_open=True))
    q_temperature: float | None = option(None, Number(0, low_open=True))
    normalize: bool = option(False, Flag())


@dataclass(frozen=True)
class PlansRequest(Request):
    """``infer-opt speculative plans``: the long-run cost per committed token of logged plans."""

    file: Path = option(check=InputFile(), positional=True)


@dataclass(frozen=True)
class FromMetricsRequest(SpecCostsRequest):
    """``infer-opt speculative from-metrics``: per-position acceptance from serving counters
    (given, a JSON ``file`` or a ``prometheus`` snapshot, ``before`` another), with costs the speedup."""

    drafts: int | None = option(None, Count(1))
    accepted_per_position: tuple[int, ...] | None = option(None, CountList(0))
    draft_tokens: int | None = option(None, Count(0))
    file: Path | None = option(None, InputFile())
    prometheus: Path | None = option(None, InputFile())
    before: Path | None = option(None, InputFile())
    model_name: str | None = option(None)


@dataclass(frozen=True)
class AmortizeMeasureRequest(Request):
    """``infer-opt amortize measure``: compile cost and steady times per (batch, bound) bucket of
    a model, the calls per bucket given or from a length sample; ``resume`` a saved sweep."""

    model: str = option("tiny", positional=True)
    bounds: tuple[int, ...] = option((32, 64), Bounds())
    batch_sizes: tuple[int, ...] = option((1,), CountList(1, 1 << 16))
    calls_per_bucket: tuple[int, ...] | None = option(None, CountList(0))
    lengths: Path | None = option(None, InputFile(allow_stdin=True))
    requests: int | None = option(None, Count(1))
    device: str = option("auto")
    dtype: str = option("auto")
    warmup: int = option(3, Count(0, MAX_REPS))
    reps: int = option(20, Count(1, MAX_REPS))
    backend: str = option("inductor", Choice(("inductor", "eager", "aot_eager", "cudagraphs")))
    cuda_graphs: bool | None = option(None, Flag())
    resume: Any = option(None, Resume("amortize-measure", "an amortize measure result"))
    hf_config: tuple[str, ...] = option((), Strings())
