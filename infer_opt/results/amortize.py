"""The ``amortize`` and ``amortize-buckets`` kinds: when a compile pays for itself, for one
shape and per bucket."""

from __future__ import annotations

from dataclasses import dataclass

from infer_opt.results import Result


@dataclass(frozen=True)
class Checkpoint:
    """Both totals at one call count: eager ``n·t_e``, compiled ``C + n·t_c``."""

    label: str
    calls: float
    eager_total_s: float
    compiled_total_s: float
    net_gain_s: float


@dataclass(frozen=True)
class AmortizeResult(Result):
    """One shape."""

    KIND = "amortize"

    compile_cost_s: float
    eager_s: float
    compiled_s: float
    #: t_e - t_c per call
    saving_s: float
    break_even_calls: float | None
    min_gaining_calls: int | None
    calls: int | None = None
    #: n·(t_e - t_c) - C at ``calls``
    net_gain_s: float | None = None
    #: compile? (None: depends on the call count, which was not given)
    compile: bool | None = None
    reason: str | None = None
    checkpoints: tuple[Checkpoint, ...] = ()


@dataclass(frozen=True)
class BucketAmortization:
    bucket: str
    compile_s: float
    saving_s: float
    calls: float
    break_even_calls: float | None
    min_gaining_calls: int | None
    #: n_i·(t_e,i - t_c,i) - C_i
    net_gain_s: float
    compile: bool
    eager_s: float | None = None
    compiled_s: float | None = None
    bound: int | None = None
    reason: str | None = None


@dataclass(frozen=True)
class AmortizeBucketsResult(Result):
    KIND = "amortize-buckets"

    source: str
    buckets: tuple[BucketAmortization, ...]
    #: Σ net_i over the buckets worth compiling (net_i > 0)
    total_net_gain_s: float
    #: Σ net_i over every bucket
    compile_all_net_gain_s: float
    compiled_count: int
    total_calls: float
    #: where the call counts came from
    calls_source: str
    #: compile time spent on the chosen set
    compile_cost_chosen_s: float
    compile_none_net_gain_s: float = 0.0
    unbucketed_count: int = 0
