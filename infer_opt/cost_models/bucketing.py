"""Shape bucketing: padding waste of a length sample under bucket bounds, and the bounds
that minimise it.

Bucketing maps a length ``T`` to ``b(T)``, the smallest bound ``>= T``. Over the empirical
distribution of a length sample it reports the expected padding ``E[b(T) - T]`` and, for
dense attention whose work grows with the square of the length, ``E[b(T)² - T²]`` (which
is not ``E[b(T) - T]²``), each absolute and relative to the unpadded work ``E[T]`` /
``E[T²]``.

With a batch of ``n`` requests padded to its longest member, the padded length is
``b(M)`` with ``M = max(T_1..T_n)``; for ``n`` draws with replacement from the sample
``P(M <= x) = F(x)^n`` (F the empirical CDF), so the padded batch costs ``n·E[b(M)]``
tokens against ``E[ΣT] = n·E[T]`` unpadded.

Bucket design: the ``K`` bounds minimising ``Σ_v c_v·(b(v)^p - v^p)`` (p = 1 linear,
p = 2 quadratic) are found exactly by dynamic programming over the sorted distinct lengths
(see :func:`optimal_waste_table`).
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results.buckets import (
    BatchPadding,
    BucketsResult,
    BucketStats,
    KChoice,
    LadderRow,
    Optimization,
)

if TYPE_CHECKING:
    from infer_opt.inputs.tables import Table
    from infer_opt.requests import BucketsRequest

Cost = Literal["linear", "quadratic"]
#: Largest accepted length (and count): keeps every sum exact in int64 / float64 ranges.
MAX_LENGTH = 2**31 - 1
COST_POWER: dict[str, int] = {"linear": 1, "quadratic": 2}


# ----------------------------------------------------------------------------- the sample


@dataclass(frozen=True, eq=False)
class LengthSample:
    """An empirical length distribution: sorted distinct lengths and how often each occurs."""

    values: np.ndarray  # int64, strictly increasing, > 0
    counts: np.ndarray  # int64, > 0
    source: str = "sample"
    #: what reading the file noticed (extra columns)
    notices: tuple[Notice, ...] = ()

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    @property
    def distinct(self) -> int:
        return len(self.values)

    @property
    def max_length(self) -> int:
        return int(self.values[-1])


def sample_from_lengths(
    lengths: Sequence[int] | np.ndarray,
    counts: Sequence[int] | np.ndarray | None = None,
    *,
    source: str = "sample",
) -> LengthSample:
    """Aggregate raw lengths (each optionally with a count) into distinct values with counts.

    Lengths must be positive integers and counts non-negative integers; an empty sample
    (or one whose counts are all zero) is rejected."""
    arr = np.asarray(lengths).ravel()
    if arr.dtype.kind not in "iu":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise InvalidInput(source, "…", "lengths must be positive integers") from None
    bad = (arr <= 0) | (arr > MAX_LENGTH) | (arr != np.floor(arr)) if arr.size else arr
    if arr.size and bad.any():
        at = int(np.argmax(bad))
        raise InvalidInput(
            source, arr[at].item(), f"lengths must be integers in [1, {MAX_LENGTH}] (entry {at + 1} is not)"
        )
    arr = arr.astype(np.int64, copy=False)
    if counts is None:
        weights = None
    else:
        weights = np.asarray(counts).astype(np.int64, copy=False).ravel()
        if weights.shape != arr.shape:
            raise InvalidInput(
                source, f"{weights.size} counts", f"expected one count per length ({arr.size})"
            )
        if weights.size and weights.min() < 0:
            raise InvalidInput(source, int(weights.min()), "counts must be integers >= 0")
    if arr.size == 0:
        raise InvalidInput(source, "no lengths", "the length sample is empty")
    values, inverse = np.unique(arr, return_inverse=True)
    if weights is None:
        agg = np.bincount(inverse, minlength=len(values)).astype(np.int64)
    else:
        agg = np.zeros(len(values), dtype=np.int64)
        np.add.at(agg, inverse, weights)
        keep = agg > 0
        values, agg = values[keep], agg[keep]
    if agg.sum() == 0:
        raise InvalidInput(source, "all counts 0", "the length sample is empty")
    return LengthSample(values.astype(np.int64), agg, source)


def _looks_like_header(line: str) -> bool:
    return any(sep in line for sep in ",\t") or any(ch.isalpha() for ch in line)


def parse_lengths_text(text: str, *, source: str = "sample") -> LengthSample:
    """Read a length sample: one positive integer per line, or a CSV/TSV with a ``length``
    column and an optional ``count`` column (other columns are reported and ignored), through
    :func:`infer_opt.inputs.tables.read_table`. Errors name the source, the line and the value."""
    return sample_from_table(read_lengths_table(text, source=source), source=source)


def read_lengths_table(text: str, *, source: str = "sample") -> Table:
    """The length sample as a table with ``length`` (and ``count``) columns."""
    from infer_opt.inputs.tables import Field, read_table

    fields = (
        Field("length", "count", low=0, low_open=True, high=MAX_LENGTH, aliases=("lengths", "len_tokens")),
        Field("count", "count", required=False, low=0, high=MAX_LENGTH),
    )
    first = next(
        (line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")), None
    )
    if first is None:
        raise InvalidInput(source, "no lengths", "the length sample is empty")
    names = None if _looks_like_header(first) else ["length"]
    return read_table(text, fields, source=source, names=names)


def sample_from_table(table: Table, *, source: str) -> LengthSample:
    frame = table.frame
    if len(frame) == 0:
        raise InvalidInput(source, "header only", "the length sample is empty")
    counts = frame["count"].to_numpy() if table.has("count") else None
    sample = sample_from_lengths(frame["length"].to_numpy(), counts, source=source)
    return replace(sample, notices=table.notices())


# ----------------------------------------------------------------------------- bounds


def validate_bounds(bounds: Sequence[float], option: str = "bounds") -> tuple[int, ...]:
    """Bounds must be positive integers (at most ``MAX_LENGTH``), strictly increasing."""
    if len(bounds) == 0:
        raise InvalidInput(option, "none", "give at least one bucket bound")
    out: list[int] = []
    for b in bounds:
        if isinstance(b, float) and (not math.isfinite(b) or b != int(b)):
            raise InvalidInput(option, b, "bounds must be positive integers")
        if b <= 0:
            raise InvalidInput(option, b, "bounds must be positive integers")
        if b > MAX_LENGTH:
            raise InvalidInput(option, b, f"bounds must be at most {MAX_LENGTH}")
        out.append(int(b))
    for prev, nxt in itertools.pairwise(out):
        if nxt <= prev:
            shown = ",".join(str(b) for b in out)
            raise InvalidInput(option, shown, f"bounds must be strictly increasing ({nxt} after {prev})")
    return tuple(out)


def bucket_of(values: np.ndarray, bounds: Sequence[int]) -> np.ndarray:
    """Index of ``b(T)`` = the smallest bound ``>= T``; ``len(bounds)`` means above them all."""
    return np.searchsorted(np.asarray(bounds, dtype=np.int64), values, side="left")


@dataclass(frozen=True)
class Assignment:
    """How a sample falls into buckets."""

    counts: tuple[int, ...]  # per bucket
    unbucketed_count: int
    unbucketed_max: int | None


def assign(sample: LengthSample, bounds: Sequence[int]) -> Assignment:
    idx = bucket_of(sample.values, bounds)
    per = np.bincount(idx, weights=sample.counts, minlength=len(bounds) + 1).astype(np.int64)
    above = idx == len(bounds)
    return Assignment(
        counts=tuple(int(c) for c in per[: len(bounds)]),
        unbucketed_count=int(per[len(bounds)]),
        unbucketed_max=int(sample.values[above].max()) if above.any() else None,
    )


def unbucketed_error(
    option: str, assignment: Assignment, largest: int, total: int, hint: str
) -> InvalidInput:
    return InvalidInput(
        option,
        f"largest bound {largest}",
        f"{assignment.unbucketed_count} of {total} lengths are above the largest bound "
        f"(max length {assignment.unbucketed_max}); {hint}",
    )


# ----------------------------------------------------------------------------- results


# ----------------------------------------------------------------------------- analysis


def _bucketed(
    sample: LengthSample, bounds: Sequence[int], allow_unbucketed: bool, option: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Assignment]:
    assignment = assign(sample, bounds)
    if assignment.unbucketed_count and not allow_unbucketed:
        raise unbucketed_error(
            option,
            assignment,
            bounds[-1],
            sample.total,
            "raise the largest bound or pass --allow-unbucketed to report them apart",
        )
    if assignment.unbucketed_count == sample.total:
        raise InvalidInput(option, f"largest bound {bounds[-1]}", "every length is above the largest bound")
    idx = bucket_of(sample.values, bounds)
    keep = idx < len(bounds)
    b = np.asarray(bounds, dtype=np.float64)[idx[keep]]
    return sample.values[keep].astype(np.float64), sample.counts[keep].astype(np.float64), b, assignment


def expected_waste(sample: LengthSample, bounds: Sequence[int], power: int) -> float:
    """``E[b(T)^p - T^p]`` per request over the lengths the bounds cover."""
    v, c, b, _ = _bucketed(sample, bounds, True, "bounds")
    return float(np.dot(c, b**power - v**power) / c.sum())


def batch_padding(v: np.ndarray, c: np.ndarray, b: np.ndarray, batch_size: int) -> BatchPadding:
    """Padding of a batch padded to ``b(max)``: ``P(M = v_k) = F(v_k)^n - F(v_{k-1})^n``
    over the sorted distinct lengths ``v`` with counts ``c`` and buckets ``b``."""
    n = batch_size
    total = c.sum()
    cdf = np.cumsum(c) / total
    cdf[-1] = 1.0
    p_max = np.diff(np.concatenate(([0.0], cdf**n)))
    e_t = float(np.dot(c, v) / total)
    e_t2 = float(np.dot(c, v * v) / total)
    e_bm = float(np.dot(p_max, b))
    e_bm2 = float(np.dot(p_max, b * b))
    per_req = float(np.dot(c, b - v) / total)
    per_req2 = float(np.dot(c, b * b - v * v) / total)
    return BatchPadding(
        batch_size=n,
        expected_padded_tokens=n * e_bm,
        expected_tokens=n * e_t,
        expected_padding=n * (e_bm - e_t),
        relative_padding=(e_bm - e_t) / e_t,
        expected_padded_quadratic=n * e_bm2,
        expected_quadratic=n * e_t2,
        expected_quadratic_padding=n * (e_bm2 - e_t2),
        relative_quadratic_padding=(e_bm2 - e_t2) / e_t2,
        per_request_padding=n * per_req,
        per_request_quadratic_padding=n * per_req2,
    )


def analyze(
    sample: LengthSample,
    bounds: Sequence[int],
    *,
    batch_size: int = 1,
    allow_unbucketed: bool = False,
    option: str = "bounds",
    optimization: Optimization | None = None,
) -> BucketsResult:
    """Expected padding of ``sample`` under ``bounds``: ``E[b(T) - T]``, ``E[b(T)² - T²]``,
    relative to ``E[T]`` and ``E[T²]``, per bucket, and (``batch_size > 1``) for batches
    padded to their longest member. Lengths above the largest bound are an error, or with
    ``allow_unbucketed`` counted apart and left out of every expectation."""
    bounds = validate_bounds(bounds, option)
    if batch_size < 1:
        raise InvalidInput("batch_size", batch_size, "must be an integer >= 1")
    v, c, b, assignment = _bucketed(sample, bounds, allow_unbucketed, option)
    total = c.sum()
    e_t = float(np.dot(c, v) / total)
    e_t2 = float(np.dot(c, v * v) / total)
    e_b = float(np.dot(c, b) / total)
    pad = float(np.dot(c, b - v) / total)
    pad2 = float(np.dot(c, b * b - v * v) / total)

    idx = bucket_of(v.astype(np.int64), bounds)
    k = len(bounds)
    cnt = np.bincount(idx, weights=c, minlength=k)
    sum_v = np.bincount(idx, weights=c * v, minlength=k)
    sum_v2 = np.bincount(idx, weights=c * v * v, minlength=k)
    per_bucket = []
    for i, bound in enumerate(bounds):
        n_i = cnt[i]
        lower = 1 if i == 0 else bounds[i - 1] + 1
        if n_i == 0:
            per_bucket.append(BucketStats(bound, lower, 0, 0.0, None, None, None, None))
            continue
        per_bucket.append(
            BucketStats(
                bound=bound,
                lower=lower,
                count=int(n_i),
                share=float(n_i / total),
                mean_length=float(sum_v[i] / n_i),
                expected_padding=float(bound - sum_v[i] / n_i),
                padding_fraction=float((n_i * bound - sum_v[i]) / (n_i * bound)),
                expected_quadratic_padding=float(bound * bound - sum_v2[i] / n_i),
            )
        )
    return BucketsResult(
        source=sample.source,
        sample_size=sample.total,
        distinct_lengths=sample.distinct,
        bounds=bounds,
        bucketed_count=int(total),
        mean_length=e_t,
        mean_square_length=e_t2,
        mean_padded_length=e_b,
        expected_padding=pad,
        expected_quadratic_padding=pad2,
        relative_padding=pad / e_t,
        relative_quadratic_padding=pad2 / e_t2,
        per_bucket=tuple(per_bucket),
        unbucketed_count=assignment.unbucketed_count,
        unbucketed_max=assignment.unbucketed_max,
        batch=batch_padding(v, c, b, batch_size) if batch_size > 1 else None,
        optimization=optimization,
        warnings=_unbucketed_notice(assignment, bounds[-1], sample.total),
    )


def _unbucketed_notice(assignment: Assignment, largest: int, total: int) -> tuple[Notice, ...]:
    if not assignment.unbucketed_count:
        return ()
    values = {
        "count": assignment.unbucketed_count,
        "total": total,
        "largest_bound": largest,
        "max_length": assignment.unbucketed_max,
    }
    return (Notice("lengths_unbucketed", values),)


# ----------------------------------------------------------------------------- bucket design


@dataclass(frozen=True)
class WasteTable:
    """``total_waste[m]`` = minimal ``Σ_v c_v·(b(v)^p - v^p)`` with exactly ``m`` buckets
    (index 0 unused); ``parents`` lets :meth:`bounds` rebuild the optimal bounds."""

    values: tuple[int, ...]
    total_count: int
    power: int
    total_waste: tuple[int, ...]
    parents: tuple[tuple[int, ...], ...]

    @property
    def k_max(self) -> int:
        return len(self.total_waste) - 1

    def bounds(self, k: int) -> tuple[int, ...]:
        """The optimal ``k`` bounds (the largest is the largest length)."""
        d = len(self.values)
        out = []
        j = d
        for m in range(k, 0, -1):
            out.append(self.values[j - 1])
            j = self.parents[m][j]
        return tuple(reversed(out))

    def expected_waste(self, k: int) -> float:
        """Minimal ``E[b(T)^p - T^p]`` per request with ``k`` buckets."""
        return self.total_waste[k] / self.total_count


def optimal_waste_table(sample: LengthSample, k_max: int, cost: Cost = "linear") -> WasteTable:
    """Exact minimal padding waste for 1..k_max buckets.

    Buckets of an optimal design are runs of consecutive distinct lengths ``v_{i+1}..v_j``
    (0 < i < j <= D) whose bound is the run's largest length ``v_j``; with prefix sums
    ``C_j = Σ_{k<=j} c_k`` and ``P_j = Σ_{k<=j} c_k·v_k^p`` a run costs
    ``w(i, j) = x_j·(C_j - C_i) - (P_j - P_i)``, ``x_j = v_j^p``, in O(1). The recurrence
    ``f_m(j) = min_i f_{m-1}(i) + w(i, j)`` rewrites as
    ``f_m(j) = x_j·C_j - P_j + min_i (f_{m-1}(i) + P_i - C_i·x_j)``: a minimum over lines
    of slope ``-C_i`` (decreasing in i) queried at ``x_j`` (increasing in j), which the
    monotone convex-hull trick answers in amortised O(1). Total O(k_max·D), in exact
    integer arithmetic, so ties and large lengths cannot round."""
    power = COST_POWER[cost]
    d = sample.distinct
    if k_max < 1:
        raise InvalidInput("optimize", k_max, "K must be an integer >= 1")
    if k_max > d:
        raise InvalidInput(
            "optimize",
            k_max,
            f"K must be at most the number of distinct lengths in the sample ({d})",
        )
    values = [int(x) for x in sample.values]
    counts = [int(x) for x in sample.counts]
    xs = [0] + [v**power for v in values]
    prefix_c = [0] * (d + 1)
    prefix_p = [0] * (d + 1)
    for j in range(1, d + 1):
        prefix_c[j] = prefix_c[j - 1] + counts[j - 1]
        prefix_p[j] = prefix_p[j - 1] + counts[j - 1] * xs[j]

    layer = [0] + [xs[j] * prefix_c[j] - prefix_p[j] for j in range(1, d + 1)]
    best = [0, layer[d]]
    parents: list[tuple[int, ...]] = [(), tuple([0] * (d + 1))]
    for m in range(2, k_max + 1):
        layer, parent = _hull_layer(layer, m, xs, prefix_c, prefix_p, d)
        best.append(layer[d])
        parents.append(tuple(parent))
    return WasteTable(tuple(values), prefix_c[d], power, tuple(best), tuple(parents))


def _hull_layer(
    prev: list[int], m: int, xs: list[int], prefix_c: list[int], prefix_p: list[int], d: int
) -> tuple[list[int], list[int]]:
    cur = [0] * (d + 1)
    parent = [0] * (d + 1)
    slopes: list[int] = []
    icepts: list[int] = []
    ids: list[int] = []
    head = 0
    for j in range(m, d + 1):
        i = j - 1
        s, b = -prefix_c[i], prev[i] + prefix_p[i]
        # Drop the last line while the new one overtakes the line before it no later than
        # the last one does: x(l1, new) <= x(l1, last).
        while len(slopes) - head >= 2:
            s1, b1, s2, b2 = slopes[-2], icepts[-2], slopes[-1], icepts[-1]
            if (b - b1) * (s1 - s2) <= (b2 - b1) * (s1 - s):
                slopes.pop()
                icepts.pop()
                ids.pop()
            else:
                break
        slopes.append(s)
        icepts.append(b)
        ids.append(i)
        x = xs[j]
        while (
            len(slopes) - head >= 2
            and slopes[head + 1] * x + icepts[head + 1] <= slopes[head] * x + icepts[head]
        ):
            head += 1
        cur[j] = xs[j] * prefix_c[j] - prefix_p[j] + slopes[head] * x + icepts[head]
        parent[j] = ids[head]
    return cur, parent


def power_of_two_ladder(sample: LengthSample) -> tuple[int, ...]:
    """Powers of two from the smallest one >= the shortest length to the smallest >= the longest."""
    lo = (int(sample.values[0]) - 1).bit_length()
    hi = (sample.max_length - 1).bit_length()
    return tuple(2**a for a in range(lo, hi + 1))


def fixed_step_ladder(max_length: int, k: int) -> tuple[int, ...]:
    """``k`` evenly spaced bounds ``ceil(max·i/k)``, i = 1..k (the largest is the max length)."""
    return tuple(sorted({-(-max_length * i // k) for i in range(1, k + 1)}))


def optimize(
    sample: LengthSample,
    k: int,
    *,
    cost: Cost = "linear",
    compile_cost_s: float | None = None,
    token_cost_s: float | None = None,
    requests: int | None = None,
    batch_size: int = 1,
    given_bounds: Sequence[int] | None = None,
) -> BucketsResult:
    """The bounds minimising expected ``cost`` waste with ``k`` buckets, or, given
    ``compile_cost_s`` and ``token_cost_s``, the K in 1..k minimising
    ``requests·token_cost·W_K + K·compile_cost`` (``W_K`` the minimal expected waste per
    request, in tokens or tokens²; ``requests`` defaults to the sample size). Compared
    against a power-of-two ladder, a fixed-step ladder with the same K, and
    ``given_bounds``."""
    if cost not in COST_POWER:
        raise InvalidInput("cost", cost, "expected linear or quadratic")
    if (compile_cost_s is None) != (token_cost_s is None):
        missing = "token_cost" if token_cost_s is None else "compile_cost"
        raise InvalidInput(missing, "missing", "give --compile-cost and --token-cost together to choose K")
    for option, value in (("compile_cost", compile_cost_s), ("token_cost", token_cost_s)):
        if value is not None and (math.isnan(value) or value < 0 or math.isinf(value)):
            raise InvalidInput(option, value, "must be a finite duration >= 0")
    if requests is not None and requests < 1:
        raise InvalidInput("requests", requests, "must be an integer >= 1")
    if k < 1:
        raise InvalidInput("optimize", k, "K must be an integer >= 1")
    if k > sample.distinct:
        raise InvalidInput(
            "optimize",
            k,
            f"K must be at most the number of distinct lengths in the sample ({sample.distinct})",
        )
    power = COST_POWER[cost]
    pow2 = power_of_two_ladder(sample)
    given = validate_bounds(given_bounds) if given_bounds is not None else None
    ladder_k = [len(pow2), k] + ([len(given)] if given else [])
    table = optimal_waste_table(sample, min(sample.distinct, max(ladder_k)), cost)

    n_requests = sample.total if requests is None else requests
    choices: tuple[KChoice, ...] = ()
    chosen = k
    objective = None
    if compile_cost_s is not None and token_cost_s is not None:
        choices = _k_choices(table, k, n_requests, compile_cost_s, token_cost_s)
        chosen = min(choices, key=lambda ch: (ch.total_cost_s, ch.k)).k
        unit, waste = ("token", "E[b(T) - T]") if power == 1 else ("token²", "E[b(T)² - T²]")
        objective = (
            f"minimise requests·token_cost·{waste} + K·compile_cost over K = 1..{k}, "
            f"with requests = {n_requests} ({'--requests' if requests is not None else 'the sample size'}), "
            f"token_cost per padded {unit}"
        )
    bounds = table.bounds(chosen)
    opt = Optimization(
        cost=cost,
        k_max=k,
        k=chosen,
        ladders=_ladders(sample, table, k, chosen, pow2, given),
        k_choices=choices,
        compile_cost_s=compile_cost_s,
        token_cost_s=token_cost_s,
        requests=n_requests if choices else None,
        objective=objective,
    )
    return analyze(sample, bounds, batch_size=batch_size, optimization=opt)


def _k_choices(
    table: WasteTable, k: int, requests: int, compile_cost_s: float, token_cost_s: float
) -> tuple[KChoice, ...]:
    """``requests·token_cost·W_K + K·compile_cost`` for K = 1..k."""
    choices = []
    for m in range(1, k + 1):
        w = table.expected_waste(m)
        waste_cost = requests * token_cost_s * w
        choices.append(KChoice(m, w, waste_cost, m * compile_cost_s, waste_cost + m * compile_cost_s))
    return tuple(choices)


def _ladders(
    sample: LengthSample,
    table: WasteTable,
    k: int,
    chosen: int,
    pow2: tuple[int, ...],
    given: tuple[int, ...] | None,
) -> tuple[LadderRow, ...]:
    """The optimal bounds (for the chosen K, and for k when they differ) beside a fixed-step
    ladder with k bounds, the powers of two, and the given bounds."""
    power = table.power
    mean_p = float(np.dot(sample.counts.astype(float), sample.values.astype(float) ** power) / sample.total)
    named = [(f"optimal (K = {chosen})", table.bounds(chosen))]
    if chosen != k:
        named.append((f"optimal (K = {k})", table.bounds(k)))
    named.append((f"fixed step (K = {k})", fixed_step_ladder(sample.max_length, k)))
    named.append(("powers of two", pow2))
    if given:
        named.append(("given --bounds", given))
    return tuple(_ladder_row(name, bounds, sample, power, mean_p, table) for name, bounds in named)


def _ladder_row(
    name: str, bounds: Sequence[int], sample: LengthSample, power: int, mean_p: float, table: WasteTable
) -> LadderRow:
    assignment = assign(sample, bounds)
    used = sum(1 for n in assignment.counts if n > 0)
    waste = expected_waste(sample, bounds, power)
    covered = assignment.unbucketed_count == 0
    best = table.expected_waste(used) if covered and used <= table.k_max else None
    if best is None:
        ratio = None
    elif best == 0:
        ratio = 1.0 if waste == 0 else math.inf
    else:
        ratio = waste / best
    return LadderRow(
        name=name + ("" if covered else f" ({assignment.unbucketed_count} above the top bound)"),
        bounds=tuple(bounds),
        buckets_used=used,
        expected_waste=waste,
        relative_waste=waste / mean_p,
        optimal_waste_same_k=best,
        ratio_to_optimal=ratio,
    )


# ----------------------------------------------------------------------------- plot data


@dataclass(frozen=True)
class BucketPlotData:
    """Histogram of the lengths and the sorted-length (quantile) curve with its padded
    version: the area between the two quantile curves is ``E[b(T) - T]``."""

    bin_edges: tuple[float, ...]
    bin_counts: tuple[float, ...]
    unbucketed_bin_counts: tuple[float, ...]
    bounds: tuple[int, ...]
    quantiles: tuple[float, ...]
    lengths: tuple[float, ...]
    padded: tuple[float, ...]


def plot_data(sample: LengthSample, bounds: Sequence[int], bins: int = 80) -> BucketPlotData:
    idx = bucket_of(sample.values, bounds)
    inside = idx < len(bounds)
    top = max(sample.max_length, int(bounds[-1]))
    edges = np.linspace(0.5, top + 0.5, min(bins, top) + 1)
    h_in, _ = np.histogram(sample.values[inside], bins=edges, weights=sample.counts[inside])
    h_out, _ = np.histogram(sample.values[~inside], bins=edges, weights=sample.counts[~inside])
    v, c = sample.values[inside], sample.counts[inside].astype(float)
    b = np.asarray(bounds, dtype=float)[idx[inside]]
    cum = np.concatenate(([0.0], np.cumsum(c) / c.sum()))
    # step curves: each distinct length holds over its share of the (bucketed) requests
    q = np.repeat(cum, 2)[1:-1]
    return BucketPlotData(
        bin_edges=tuple(float(e) for e in edges),
        bin_counts=tuple(float(x) for x in h_in),
        unbucketed_bin_counts=tuple(float(x) for x in h_out),
        bounds=tuple(int(x) for x in bounds),
        quantiles=tuple(float(x) for x in q),
        lengths=tuple(float(x) for x in np.repeat(v, 2)),
        padded=tuple(float(x) for x in np.repeat(b, 2)),
    )


def run(request: BucketsRequest) -> tuple[BucketsResult, LengthSample]:
    """``infer-opt buckets``: the request's sample (its file, ``-`` = stdin, or its lengths)
    under its bounds, or the ``optimize`` bounds designed; with the sample (for its plot)."""
    if request.optimize is None:
        for option, raw in (
            ("--compile-cost", request.compile_cost),
            ("--token-cost", request.token_cost),
            ("--requests", request.requests),
        ):
            if raw is not None:
                raise InvalidInput(option, raw, "only used with --optimize K")
        if request.bounds is None:
            raise InvalidInput("--bounds", "missing", "give --bounds (or --optimize K to design them)")
    if isinstance(request.file, tuple):
        sample = sample_from_lengths(list(request.file))
    elif str(request.file) == "-":
        sample = parse_lengths_text(sys.stdin.read(), source="stdin")
    else:
        from infer_opt.files import read_text

        sample = parse_lengths_text(read_text(request.file, "FILE"), source=request.file.name)
    if request.optimize is None:
        return analyze(
            sample, request.bounds, batch_size=request.batch_size, allow_unbucketed=request.allow_unbucketed
        ), sample
    return optimize(
        sample, request.optimize, cost=request.cost, compile_cost_s=request.compile_cost,  # type: ignore[arg-type]
        token_cost_s=request.token_cost, requests=request.requests, batch_size=request.batch_size,
        given_bounds=request.bounds,
    ), sample  # fmt: skip
