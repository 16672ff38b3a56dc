"""The ``buckets`` kind: padding waste of a bucket ladder and the optimized one."""

from __future__ import annotations

from dataclasses import dataclass

from infer_opt.notices import Notice
from infer_opt.results import Result


@dataclass(frozen=True)
class BucketStats:
    """One bucket: lengths ``lower..bound`` are padded to ``bound``."""

    bound: int
    lower: int
    count: int
    share: float
    mean_length: float | None
    #: E[b - T | bucket], tokens per request
    expected_padding: float | None
    #: Σ(b - T) / Σb over the bucket: the share of its padded tokens that are padding
    padding_fraction: float | None
    #: E[b² - T² | bucket], tokens² per request
    expected_quadratic_padding: float | None


@dataclass(frozen=True)
class BatchPadding:
    """A batch of ``batch_size`` requests drawn with replacement from the sample, padded to
    the bucket of its longest member: ``P(M <= x) = F(x)^n``."""

    batch_size: int
    #: n·E[b(M)]
    expected_padded_tokens: float
    #: n·E[T]
    expected_tokens: float
    expected_padding: float
    relative_padding: float
    #: n·E[b(M)²]
    expected_padded_quadratic: float
    #: n·E[T²]
    expected_quadratic: float
    expected_quadratic_padding: float
    relative_quadratic_padding: float
    #: n·E[b(T) - T]: the padding if each request were bucketed alone
    per_request_padding: float
    per_request_quadratic_padding: float


@dataclass(frozen=True)
class LadderRow:
    """A bound set compared on the optimised cost."""

    name: str
    bounds: tuple[int, ...]
    buckets_used: int
    #: expected waste per request: E[b(T)^p - T^p]
    expected_waste: float
    relative_waste: float
    #: the optimum with the same number of used buckets (None if not computed)
    optimal_waste_same_k: float | None
    #: expected_waste / optimal_waste_same_k (1 when both are 0)
    ratio_to_optimal: float | None = None


@dataclass(frozen=True)
class KChoice:
    """``total = requests·token_cost·W_K + K·compile_cost`` for the optimal K bounds."""

    k: int
    expected_waste: float
    waste_cost_s: float
    compile_cost_s: float
    total_cost_s: float


@dataclass(frozen=True)
class Optimization:
    cost: str
    k_max: int
    k: int
    ladders: tuple[LadderRow, ...]
    k_choices: tuple[KChoice, ...] = ()
    compile_cost_s: float | None = None
    token_cost_s: float | None = None
    requests: int | None = None
    objective: str | None = None


@dataclass(frozen=True)
class BucketsResult(Result):
    KIND = "buckets"

    source: str
    sample_size: int
    distinct_lengths: int
    bounds: tuple[int, ...]
    bucketed_count: int
    mean_length: float
    mean_square_length: float
    mean_padded_length: float
    expected_padding: float
    expected_quadratic_padding: float
    relative_padding: float
    relative_quadratic_padding: float
    per_bucket: tuple[BucketStats, ...]
    unbucketed_count: int = 0
    unbucketed_max: int | None = None
    batch: BatchPadding | None = None
    optimization: Optimization | None = None
    #: ``lengths_unbucketed`` (lengths above the largest bound, left out of every expectation)
    warnings: tuple[Notice, ...] = ()
