"""Compile amortization: when does a compile cost pay for itself?

One shape: compiling costs ``C`` once and turns each call from ``t_e`` (eager) into
``t_c``. After ``n`` calls the net gain is ``n·(t_e - t_c) - C``, positive iff
``n > C/(t_e - t_c)`` (strictly: at exactly the break-even count the two totals are
equal). If ``t_c >= t_e`` compiling never pays.

Per bucket ``i``: ``net_i = n_i·(t_e,i - t_c,i) - C_i``; compile bucket ``i`` iff
``net_i > 0``. Call counts may come from the bucket CSV or from a length sample mapped to
the buckets' upper bounds (``b(T)`` = smallest bound ``>= T``).

The arithmetic is exact rational arithmetic on each input's decimal value (to 15
significant digits, which undoes the binary rounding of what was typed), so a break-even
that lands on a whole number of calls (3 s / 0.5 ms = 6000) is not moved across it.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from infer_opt.cost_models import bucketing
from infer_opt.errors import InvalidInput
from infer_opt.results import Result
from infer_opt.units import parse_duration, parse_float

NEVER_PAYS = "compiled time is not below eager time: compiling never pays"


def _exact(x: float) -> Fraction:
    # 15 significant digits survive any decimal -> binary -> decimal round trip, so this
    # recovers the decimal the user typed ("2.6ms" parses to 0.0026000000000000003).
    return Fraction(f"{float(x):.15g}")


@dataclass(frozen=True)
class BreakEven:
    #: C/(t_e - t_c): at this many calls the totals are equal (None: never pays)
    break_even_calls: float | None
    #: the smallest whole number of calls with a positive net gain: floor(C/Δ) + 1
    min_gaining_calls: int | None
    reason: str | None


def break_even(compile_cost_s: float, eager_s: float, compiled_s: float) -> BreakEven:
    """``n* = C/(t_e - t_c)``; the net gain is positive for ``n > n*``."""
    saving = _exact(eager_s) - _exact(compiled_s)
    if saving <= 0:
        return BreakEven(None, None, NEVER_PAYS)
    exact = _exact(compile_cost_s) / saving
    return BreakEven(float(exact), math.floor(exact) + 1, None)


def net_gain(calls: float, compile_cost_s: float, saving_s: float) -> float:
    """``n·(t_e - t_c) - C``."""
    return float(_exact(calls) * _exact(saving_s) - _exact(compile_cost_s))


def _check_duration(option: str, value: float, *, signed: bool = False) -> None:
    if not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value):
        raise InvalidInput(option, value, "must be a finite duration")
    if value < 0 and not signed:
        raise InvalidInput(option, value, "duration must be >= 0")


@dataclass(frozen=True)
class Checkpoint:
    """Both totals at one call count: eager ``n·t_e``, compiled ``C + n·t_c``."""

    label: str
    calls: float
    eager_total_s: float
    compiled_total_s: float
    net_gain_s: float


def checkpoint(
    label: str, calls: float, compile_cost_s: float, eager_s: float, compiled_s: float
) -> Checkpoint:
    n = _exact(calls)
    eager = n * _exact(eager_s)
    compiled = _exact(compile_cost_s) + n * _exact(compiled_s)
    return Checkpoint(label, float(calls), float(eager), float(compiled), float(eager - compiled))


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


def amortize(
    compile_cost_s: float, eager_s: float, compiled_s: float, calls: int | None = None
) -> AmortizeResult:
    """Break-even calls ``C/(t_e - t_c)``, net gain ``n·(t_e - t_c) - C`` and the decision.

    Worked check: C = 3 s, 2 ms -> 1.5 ms gives 6000 (gain from 6001 calls)."""
    _check_duration("compile_cost", compile_cost_s)
    _check_duration("eager", eager_s)
    _check_duration("compiled", compiled_s)
    if calls is not None and (calls < 0 or int(calls) != calls):
        raise InvalidInput("calls", calls, "must be an integer >= 0")
    be = break_even(compile_cost_s, eager_s, compiled_s)
    saving = float(_exact(eager_s) - _exact(compiled_s))
    gain = None if calls is None else net_gain(calls, compile_cost_s, saving)
    if be.break_even_calls is None:
        decision: bool | None = False
    else:
        decision = None if gain is None else gain > 0
    points = []
    if be.break_even_calls is not None:
        points.append(checkpoint("break-even", be.break_even_calls, compile_cost_s, eager_s, compiled_s))
        if calls != be.min_gaining_calls:
            points.append(
                checkpoint(
                    "first gaining call count", be.min_gaining_calls, compile_cost_s, eager_s, compiled_s
                )
            )
    if calls is not None:
        points.append(checkpoint("given --calls", calls, compile_cost_s, eager_s, compiled_s))
    elif be.break_even_calls is None:
        points.append(checkpoint("one call", 1, compile_cost_s, eager_s, compiled_s))
    points.sort(key=lambda p: p.calls)
    return AmortizeResult(
        compile_cost_s=compile_cost_s,
        eager_s=eager_s,
        compiled_s=compiled_s,
        saving_s=saving,
        break_even_calls=be.break_even_calls,
        min_gaining_calls=be.min_gaining_calls,
        calls=None if calls is None else int(calls),
        net_gain_s=gain,
        compile=decision,
        reason=be.reason,
        checkpoints=tuple(points),
    )


@dataclass(frozen=True)
class TimeCurve:
    """Cumulative time against the number of calls: eager ``n·t_e``, compiled ``C + n·t_c``."""

    calls: tuple[float, ...]
    eager_s: tuple[float, ...]
    compiled_s: tuple[float, ...]


def time_curve(result: AmortizeResult, points: int = 201) -> TimeCurve:
    """Both totals from 0 calls to past the break-even (2×) and the given call count (1.2×)."""
    candidates = [1.0]
    if result.break_even_calls is not None:
        candidates.append(2.0 * result.break_even_calls)
    if result.calls:
        candidates.append(1.2 * result.calls)
    if result.break_even_calls is None and not result.calls and result.eager_s > 0:
        candidates.append(2.0 * result.compile_cost_s / result.eager_s)
    top = max(candidates)
    grid = tuple(top * i / (points - 1) for i in range(points))
    return TimeCurve(
        calls=grid,
        eager_s=tuple(n * result.eager_s for n in grid),
        compiled_s=tuple(result.compile_cost_s + n * result.compiled_s for n in grid),
    )


# ----------------------------------------------------------------------------- buckets


@dataclass(frozen=True)
class BucketInput:
    """One CSV row: compile cost, per-call saving (or eager/compiled times) and calls."""

    bucket: str
    compile_s: float
    saving_s: float
    calls: float | None = None
    eager_s: float | None = None
    compiled_s: float | None = None
    #: the bucket's upper bound in tokens, when calls come from a length sample
    bound: int | None = None


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


def amortize_buckets(
    rows: Sequence[BucketInput], *, source: str = "buckets", calls_source: str = "the bucket file"
) -> AmortizeBucketsResult:
    """Per bucket: break-even ``C_i/Δt_i``, ``net_i = n_i·Δt_i - C_i``, compile iff
    ``net_i > 0``; totals for the chosen set, for compiling every bucket and for none."""
    if not rows:
        raise InvalidInput(source, "no rows", "the bucket file has no buckets")
    out = []
    for row in rows:
        if row.calls is None:
            raise InvalidInput(
                source, row.bucket, "no call count for this bucket (a 'calls' column or --lengths)"
            )
        be = (
            BreakEven(None, None, NEVER_PAYS)
            if row.saving_s <= 0
            else break_even(row.compile_s, row.saving_s, 0.0)
        )
        gain = net_gain(row.calls, row.compile_s, row.saving_s)
        out.append(
            BucketAmortization(
                bucket=row.bucket,
                compile_s=row.compile_s,
                saving_s=row.saving_s,
                calls=row.calls,
                break_even_calls=be.break_even_calls,
                min_gaining_calls=be.min_gaining_calls,
                net_gain_s=gain,
                compile=gain > 0,
                eager_s=row.eager_s,
                compiled_s=row.compiled_s,
                bound=row.bound,
                reason=be.reason,
            )
        )
    chosen = [b for b in out if b.compile]
    return AmortizeBucketsResult(
        source=source,
        buckets=tuple(out),
        total_net_gain_s=float(sum((_exact(b.net_gain_s) for b in chosen), Fraction(0))),
        compile_all_net_gain_s=float(sum((_exact(b.net_gain_s) for b in out), Fraction(0))),
        compiled_count=len(chosen),
        total_calls=float(sum(b.calls for b in out)),
        calls_source=calls_source,
        compile_cost_chosen_s=float(sum((_exact(b.compile_s) for b in chosen), Fraction(0))),
    )


_TIME_COLUMNS = {"compile_s": "s", "eager_ms": "ms", "compiled_ms": "ms", "saving_ms": "ms"}


def read_bucket_csv(text: str, *, source: str, calls_required: bool = True) -> list[BucketInput]:
    """Parse ``bucket, compile_s, calls`` plus ``eager_ms, compiled_ms`` or ``saving_ms``.

    Times are bare numbers in the column's unit (or carry their own: ``3s``, ``800us``).
    ``saving_ms`` may be negative (compiled slower). Every error names the file, the line,
    the column and the value."""
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    rows: list[BucketInput] = []
    seen: set[str] = set()
    for raw in reader:
        if not raw or all(not cell.strip() for cell in raw):
            continue
        if header is None:
            header = [cell.strip().lower() for cell in raw]
            _check_header(header, source, calls_required)
            continue
        line = reader.line_num
        if len(raw) != len(header):
            raise InvalidInput(
                f"{source} line {line}",
                ",".join(raw),
                f"expected {len(header)} fields ({', '.join(header)})",
            )
        cells = {name: cell.strip() for name, cell in zip(header, raw, strict=True)}
        where = f"{source} line {line}, column "
        name = cells["bucket"]
        if not name:
            raise InvalidInput(where + "bucket", name, "bucket name is empty")
        if name in seen:
            raise InvalidInput(where + "bucket", name, "bucket names must be distinct")
        seen.add(name)
        compile_s = parse_duration(cells["compile_s"], option=where + "compile_s", default_unit="s")
        eager = compiled = None
        if "saving_ms" in cells:
            saving = _signed_duration(cells["saving_ms"], where + "saving_ms")
        else:
            eager = parse_duration(cells["eager_ms"], option=where + "eager_ms", default_unit="ms")
            compiled = parse_duration(cells["compiled_ms"], option=where + "compiled_ms", default_unit="ms")
            saving = float(_exact(eager) - _exact(compiled))
        calls = None
        if "calls" in cells:
            calls = parse_float(cells["calls"], option=where + "calls", low=0)
        rows.append(BucketInput(name, compile_s, saving, calls, eager, compiled))
    if header is None or not rows:
        raise InvalidInput(source, "no rows", "the bucket file has no buckets")
    return rows


def _check_header(header: list[str], source: str, calls_required: bool) -> None:
    required = ["bucket", "compile_s"] + (["calls"] if calls_required else [])
    missing = [c for c in required if c not in header]
    has_times = "eager_ms" in header and "compiled_ms" in header
    has_saving = "saving_ms" in header
    if has_times and has_saving:
        raise InvalidInput(
            source, ",".join(header), "give either eager_ms and compiled_ms, or saving_ms, not both"
        )
    if not (has_times or has_saving):
        missing.append("eager_ms and compiled_ms (or saving_ms)")
    if missing:
        raise InvalidInput(
            source,
            ",".join(header),
            f"missing column(s): {', '.join(missing)}; see infer-opt amortize --help",
        )
    if len(set(header)) != len(header):
        raise InvalidInput(source, ",".join(header), "column names must be distinct")


def _signed_duration(text: str, option: str) -> float:
    stripped = text.strip()
    negative = stripped.startswith("-")
    body = stripped[1:] if stripped[:1] in ("-", "+") else stripped
    if body.lstrip()[:1] in ("-", "+"):
        raise InvalidInput(option, text, "expected at most one sign, e.g. -2 or 500us (bare number = ms)")
    value = parse_duration(body, option=option, default_unit="ms")
    return -value if negative else value


def calls_from_lengths(
    rows: Sequence[BucketInput],
    sample: bucketing.LengthSample,
    *,
    requests: int | None = None,
    source: str = "buckets",
) -> tuple[list[BucketInput], int]:
    """Calls per bucket from a length sample: the ``bucket`` column is each bucket's upper
    bound and ``n_i`` = how many lengths map to it (``b(T)`` = smallest bound ``>= T``),
    scaled by ``requests / sample size`` when ``requests`` is given. Returns the rows
    (sorted by bound) and the sample size."""
    if any(row.calls is not None for row in rows):
        raise InvalidInput(
            "lengths",
            source,
            "the bucket file has a 'calls' column; give calls there or via --lengths, not both",
        )
    bounds = []
    for row in rows:
        bound = parse_float(row.bucket, option=f"{source} column bucket", low=1)
        if bound != int(bound):
            raise InvalidInput(
                f"{source} column bucket", row.bucket, "with --lengths, buckets are integer upper bounds"
            )
        bounds.append(int(bound))
    order = sorted(range(len(rows)), key=lambda i: bounds[i])
    sorted_bounds = bucketing.validate_bounds([bounds[i] for i in order], option=f"{source} column bucket")
    assignment = bucketing.assign(sample, sorted_bounds)
    if assignment.unbucketed_count:
        raise bucketing.unbucketed_error(
            "lengths",
            assignment,
            sorted_bounds[-1],
            sample.total,
            f"add a bucket of at least {assignment.unbucketed_max} to {source}",
        )
    if requests is not None and requests < 0:
        raise InvalidInput("requests", requests, "must be an integer >= 0")
    scale = Fraction(1) if requests is None else Fraction(requests, sample.total)
    out = []
    for i, count in zip(order, assignment.counts, strict=True):
        row = rows[i]
        calls = float(count * scale)
        out.append(
            BucketInput(
                row.bucket, row.compile_s, row.saving_s, calls, row.eager_s, row.compiled_s, bounds[i]
            )
        )
    return out, sample.total
