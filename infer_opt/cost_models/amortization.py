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

import gc
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infer_opt.cost_models import bucketing
from infer_opt.errors import InvalidInput
from infer_opt.files import read_input
from infer_opt.inputs.tables import Field
from infer_opt.notices import Notice
from infer_opt.results.amortize import AmortizeBucketsResult, AmortizeResult, BucketAmortization, Checkpoint
from infer_opt.units import parse_float

if TYPE_CHECKING:
    from infer_opt.requests import AmortizeRequest

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


def checkpoint(
    label: str, calls: float, compile_cost_s: float, eager_s: float, compiled_s: float
) -> Checkpoint:
    n = _exact(calls)
    eager = n * _exact(eager_s)
    compiled = _exact(compile_cost_s) + n * _exact(compiled_s)
    return Checkpoint(label, float(calls), float(eager), float(compiled), float(eager - compiled))


def amortize(
    compile_cost_s: float, eager_s: float, compiled_s: float, calls: int | None = None
) -> AmortizeResult:
    """Break-even calls ``C/(t_e - t_c)``, net gain ``n·(t_e - t_c) - C`` and the decision.

    Worked check: C = 3 s, 2 ms -> 1.5 ms gives 6000 (gain from 6001 calls). Numbers whose
    break-even or totals do not fit a float are bad input (one line naming the largest), never
    an overflow or an infinite result. The values are checked ones (:class:`AmortizeRequest`)."""
    try:
        result = _amortize(compile_cost_s, eager_s, compiled_s, calls)
    except OverflowError:
        result = None
    if result is None or not _all_finite(result):
        given = {"compile_cost": compile_cost_s, "eager": eager_s, "compiled": compiled_s}
        if calls is not None:
            given["calls"] = calls * max(eager_s, compiled_s)
        name = max(given, key=lambda k: given[k])
        shown = calls if name == "calls" else given[name]
        raise InvalidInput(
            name, shown, "too large: the break-even C/(t_e − t_c) or a total n·t does not fit a float"
        )
    return result


def _all_finite(result: AmortizeResult) -> bool:
    numbers = [result.saving_s, result.break_even_calls, result.net_gain_s]
    numbers += [
        x for c in result.checkpoints for x in (c.calls, c.eager_total_s, c.compiled_total_s, c.net_gain_s)
    ]
    return all(x is None or math.isfinite(x) for x in numbers)


def _amortize(compile_cost_s: float, eager_s: float, compiled_s: float, calls: int | None) -> AmortizeResult:
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
    top = min(max(candidates), 1e300 / max(result.eager_s, result.compiled_s, 1.0))
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


_INPUT_FIELDS = ("bucket", "compile_s", "saving_s", "calls", "eager_s", "compiled_s", "bound")


@dataclass(frozen=True, eq=False)
class BucketTable(Sequence[BucketInput]):
    """Bucket inputs as columns (numpy arrays), so a 10⁶-row file is read and decided in about
    a second; indexing gives a :class:`BucketInput`. Optional columns are None when absent.
    ``notices`` are what the reader noticed (extra columns)."""

    bucket: np.ndarray
    compile_s: np.ndarray
    saving_s: np.ndarray
    calls: np.ndarray | None = None
    eager_s: np.ndarray | None = None
    compiled_s: np.ndarray | None = None
    bound: np.ndarray | None = None
    notices: tuple[Notice, ...] = ()
    #: file line of each row, for messages (None: not from a file)
    lines: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.bucket)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        values = [getattr(self, name) for name in _INPUT_FIELDS]
        return BucketInput(*(None if v is None else _scalar(v[index]) for v in values))

    @classmethod
    def of(cls, rows: Sequence[BucketInput]) -> BucketTable:
        """Columns from rows (an optional column is None unless every row has it)."""
        if isinstance(rows, BucketTable):
            return rows

        def column(name: str, dtype: Any) -> np.ndarray | None:
            values = [getattr(r, name) for r in rows]
            if not values or any(v is None for v in values):
                return None
            return np.asarray(values, dtype=dtype)

        return cls(
            bucket=np.asarray([r.bucket for r in rows], dtype=object),
            compile_s=np.asarray([r.compile_s for r in rows], dtype=np.float64),
            saving_s=np.asarray([r.saving_s for r in rows], dtype=np.float64),
            calls=column("calls", np.float64),
            eager_s=column("eager_s", np.float64),
            compiled_s=column("compiled_s", np.float64),
            bound=column("bound", np.int64),
        )

    def where(self, row: int, source: str) -> str:
        """How messages name row ``row``: its file line when known, else its bucket."""
        if self.lines is not None:
            return f"{source} line {int(self.lines[row])}"
        return f"{source} bucket {self.bucket[row]}"


def _scalar(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


@dataclass(frozen=True)
class _Decisions:
    """Per bucket, as arrays: break-even calls (NaN: never pays), first gaining call count
    (-1: never), net gain and the decision."""

    break_even: np.ndarray
    min_gaining: np.ndarray
    net_gain: np.ndarray
    compile: np.ndarray


def amortize_buckets(
    rows: Sequence[BucketInput], *, source: str = "buckets", calls_source: str = "the bucket file"
) -> AmortizeBucketsResult:
    """Per bucket: break-even ``C_i/Δt_i``, ``net_i = n_i·Δt_i - C_i``, compile iff
    ``net_i > 0``; totals for the chosen set, for compiling every bucket and for none.

    Vectorised over the buckets in float64; a bucket whose break-even or net gain lands within
    rounding of a whole number of calls or of zero is decided exactly (rational arithmetic on
    the decimal inputs), as :func:`amortize` does for one shape."""
    table = BucketTable.of(rows)
    if len(table) == 0:
        raise InvalidInput(source, "no rows", "the bucket file has no buckets")
    if table.calls is None:
        first = next((i for i, r in enumerate(rows) if r.calls is None), 0)
        raise InvalidInput(
            source, str(table.bucket[first]), "no call count for this bucket (a 'calls' column or --lengths)"
        )
    found = _decide(table, source)
    chosen = found.compile
    return AmortizeBucketsResult(
        source=source,
        buckets=_bucket_rows(table, found),
        total_net_gain_s=math.fsum(found.net_gain[chosen].tolist()),
        compile_all_net_gain_s=math.fsum(found.net_gain.tolist()),
        compiled_count=int(chosen.sum()),
        total_calls=math.fsum(table.calls.tolist()),
        calls_source=calls_source,
        compile_cost_chosen_s=math.fsum(table.compile_s[chosen].tolist()),
    )


#: up to this many buckets every one is decided in exact rational arithmetic (about 0.1 s);
#: above it in float64, with a break-even within 1e-9 (relative) of a whole number of calls
#: taken as that number and a net gain that close to zero as zero (what the decimals typed
#: give: float rounding is ~1e-16, no measurement is that precise)
EXACT_ROWS = 10_000
_SNAP = 1e-9


def _decide(table: BucketTable, source: str) -> _Decisions:
    """Break-even, net gain and decision per bucket (see :func:`amortize_buckets`)."""
    compile_s, saving, calls = table.compile_s, table.saving_s, table.calls
    assert calls is not None
    pays = saving > 0
    with np.errstate(all="ignore"):
        break_even = np.where(pays, compile_s / np.where(pays, saving, 1.0), np.nan)
        gain = calls * saving - compile_s
    _check_finite(table, source, gain, "the net gain n_i·Δt_i − C_i")
    _check_finite(table, source, np.where(pays, break_even, 0.0), "the break-even C_i/Δt_i")
    if len(table) <= EXACT_ROWS:
        for i in range(len(table)):
            gain[i] = net_gain(calls[i], compile_s[i], saving[i])
            if pays[i]:
                break_even[i] = float(_exact(compile_s[i]) / _exact(saving[i]))
    else:
        whole = np.round(break_even)
        snap = pays & (np.abs(break_even - whole) <= _SNAP * np.maximum(break_even, 1.0))
        break_even = np.where(snap, whole, break_even)
        tie = np.abs(gain) <= _SNAP * np.maximum(np.abs(calls * saving), np.abs(compile_s))
        gain = np.where(tie, 0.0, gain)
    min_gaining = np.where(pays, np.floor(np.where(pays, break_even, 0.0)) + 1, -1).astype(np.int64)
    return _Decisions(break_even, min_gaining, gain, gain > 0)


def _check_finite(table: BucketTable, source: str, values: np.ndarray, what: str) -> None:
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(bad.argmax())
        raise InvalidInput(
            table.where(row, source), str(table.bucket[row]), f"{what} overflows a float; use smaller numbers"
        )


def _bucket_rows(table: BucketTable, found: _Decisions) -> tuple[BucketAmortization, ...]:
    """One :class:`BucketAmortization` per bucket, built column-wise (a million rows in about
    a second: the frozen dataclass's ``__init__`` would take several)."""
    n = len(table)

    def optional(values: np.ndarray | None, cast: Any) -> list[Any]:
        return [None] * n if values is None else [cast(v) for v in values.tolist()]

    pays = ~np.isnan(found.break_even)
    columns = {
        "bucket": [str(b) for b in table.bucket.tolist()],
        "compile_s": table.compile_s.tolist(),
        "saving_s": table.saving_s.tolist(),
        "calls": table.calls.tolist() if table.calls is not None else [0.0] * n,
        "break_even_calls": [
            b if p else None for b, p in zip(found.break_even.tolist(), pays.tolist(), strict=True)
        ],
        "min_gaining_calls": [
            m if p else None for m, p in zip(found.min_gaining.tolist(), pays.tolist(), strict=True)
        ],
        "net_gain_s": found.net_gain.tolist(),
        "compile": found.compile.tolist(),
        "eager_s": optional(table.eager_s, float),
        "compiled_s": optional(table.compiled_s, float),
        "bound": optional(table.bound, int),
        "reason": [None if p else NEVER_PAYS for p in pays.tolist()],
    }
    names = tuple(columns)
    new, set_dict = object.__new__, object.__setattr__
    out = []
    collecting = gc.isenabled()
    gc.disable()  # a million acyclic objects: the cycle collector would only rescan them
    try:
        for values in zip(*columns.values(), strict=True):
            row = new(BucketAmortization)
            set_dict(row, "__dict__", dict(zip(names, values, strict=True)))
            out.append(row)
    finally:
        if collecting:
            gc.enable()
    return tuple(out)


#: the bucket file's columns; durations may carry their unit in the header (compile_ms, eager_us)
BUCKET_FIELDS = (
    Field("bucket", "text"),
    Field("compile", "duration", unit="s"),
    Field("calls", "number", required=False),
    Field("eager", "duration", required=False, unit="ms"),
    Field("compiled", "duration", required=False, unit="ms"),
    Field("saving", "duration", required=False, unit="ms", low=None),
)


def read_bucket_csv(text: str, *, source: str, calls_required: bool = True) -> BucketTable:
    """Parse ``bucket, compile_s, calls`` plus ``eager_ms, compiled_ms`` or ``saving_ms`` (CSV
    or TSV, read by :func:`infer_opt.inputs.tables.read_table`).

    Times are bare numbers in the column's unit (``compile_s``: seconds; ``eager_ms``: ms;
    another suffix such as ``eager_us`` changes it) or carry their own (``3s``, ``800us``).
    ``saving_ms`` may be negative (compiled slower). Every error names the file, the line,
    the column and the value."""
    from infer_opt.inputs.tables import read_table

    if not text.strip():
        raise InvalidInput(source, "no rows", "the bucket file has no buckets")
    table = read_table(text, BUCKET_FIELDS, source=source)
    _check_bucket_columns(table, calls_required)
    frame = table.frame
    if len(frame) == 0:
        raise InvalidInput(source, "no rows", "the bucket file has no buckets")
    names = frame["bucket"].to_numpy(dtype=object)
    _check_distinct(table, names)
    compile_s = frame["compile"].to_numpy(dtype=np.float64)
    eager = compiled = None
    if table.has("saving"):
        saving = frame["saving"].to_numpy(dtype=np.float64)
    else:
        eager = frame["eager"].to_numpy(dtype=np.float64)
        compiled = frame["compiled"].to_numpy(dtype=np.float64)
        saving = _savings(eager, compiled)
    calls = frame["calls"].to_numpy(dtype=np.float64) if table.has("calls") else None
    lines = np.asarray([table.line(i) for i in range(len(frame))]) if table.row_lines is not None else None
    if lines is None:
        lines = np.arange(len(frame), dtype=np.int64) + table.header_line + 1
    return BucketTable(names, compile_s, saving, calls, eager, compiled, None, table.notices(), lines)


def _savings(eager: np.ndarray, compiled: np.ndarray) -> np.ndarray:
    """``t_e - t_c``; up to :data:`EXACT_ROWS` buckets the exact difference of the decimals
    typed (3.5 ms - 2.6 ms is 0.9 ms, not 0.8999999999999999 ms)."""
    if len(eager) > EXACT_ROWS:
        return eager - compiled
    return np.array(
        [float(_exact(e) - _exact(c)) for e, c in zip(eager.tolist(), compiled.tolist(), strict=True)]
    )


def _check_bucket_columns(table: Any, calls_required: bool) -> None:
    has_times = table.has("eager") and table.has("compiled")
    header = ",".join(table.headers.values())
    if has_times and table.has("saving"):
        raise InvalidInput(
            table.source, header, "give either eager_ms and compiled_ms, or saving_ms, not both"
        )
    missing = [] if (not calls_required or table.has("calls")) else ["calls"]
    if not (has_times or table.has("saving")):
        missing.append("eager_ms and compiled_ms (or saving_ms)")
    if missing:
        raise InvalidInput(
            table.source, header, f"missing column(s): {', '.join(missing)}; see infer-opt amortize --help"
        )


def _check_distinct(table: Any, names: np.ndarray) -> None:
    import pandas as pd

    repeated = pd.Series(names).duplicated().to_numpy()
    if repeated.any():
        row = int(repeated.argmax())
        raise InvalidInput(table.where(row, "bucket"), str(names[row]), "bucket names must be distinct")


def calls_from_lengths(
    rows: Sequence[BucketInput],
    sample: bucketing.LengthSample,
    *,
    requests: int | None = None,
    source: str = "buckets",
) -> tuple[BucketTable, int]:
    """Calls per bucket from a length sample: the ``bucket`` column is each bucket's upper
    bound and ``n_i`` = how many lengths map to it (``b(T)`` = smallest bound ``>= T``),
    scaled by ``requests / sample size`` when ``requests`` is given. Returns the rows
    (sorted by bound) and the sample size."""
    table = BucketTable.of(rows)
    if (
        any(row.calls is not None for row in rows)
        if not isinstance(rows, BucketTable)
        else rows.calls is not None
    ):
        raise InvalidInput(
            "lengths",
            source,
            "the bucket file has a 'calls' column; give calls there or via --lengths, not both",
        )
    bounds = _bounds(table, source)
    order = np.argsort(bounds, kind="stable")
    sorted_bounds = bucketing.validate_bounds(bounds[order].tolist(), option=f"{source} column bucket")
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
    counts = np.asarray(assignment.counts, dtype=np.float64)
    calls = counts if requests is None else counts * (requests / sample.total)

    def pick(values: np.ndarray | None) -> np.ndarray | None:
        return None if values is None else values[order]

    sorted_table = BucketTable(
        table.bucket[order],
        table.compile_s[order],
        table.saving_s[order],
        calls,
        pick(table.eager_s),
        pick(table.compiled_s),
        bounds[order],
        table.notices,
        pick(table.lines),
    )
    return sorted_table, sample.total


def _bounds(table: BucketTable, source: str) -> np.ndarray:
    """The bucket names as integer upper bounds (with --lengths), each checked."""
    import pandas as pd

    values = pd.to_numeric(pd.Series(table.bucket, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values) | (values < 1)
    if bad.any():
        row = int(bad.argmax())
        parse_float(str(table.bucket[row]), option=f"{source} column bucket", low=1)
        raise InvalidInput(f"{source} column bucket", str(table.bucket[row]), "must be a number >= 1")
    fractional = values != np.floor(values)
    if fractional.any():
        row = int(fractional.argmax())
        raise InvalidInput(
            f"{source} column bucket",
            str(table.bucket[row]),
            "with --lengths, buckets are integer upper bounds",
        )
    return values.astype(np.int64)


def run(request: AmortizeRequest) -> tuple[AmortizeResult | AmortizeBucketsResult, tuple[Notice, ...]]:
    """``infer-opt amortize``: one shape, or the request's bucket CSV (calls from ``lengths``,
    scaled to ``requests``); with the notices of the files read."""
    one_shape = {
        "--compile-cost": request.compile_cost, "--eager": request.eager,
        "--compiled": request.compiled, "--calls": request.calls,
    }  # fmt: skip
    if request.buckets is not None:
        given = [name for name, value in one_shape.items() if value is not None]
        if given:
            raise InvalidInput(
                given[0], one_shape[given[0]], "use either --buckets FILE or the one-shape options"
            )
        return _run_buckets(request.buckets, request.lengths, request.requests)
    for flag, value in (("--lengths", request.lengths), ("--requests", request.requests)):
        if value is not None:
            raise InvalidInput(flag, str(value), "only used with --buckets FILE")
    for flag in ("--compile-cost", "--eager", "--compiled"):
        if one_shape[flag] is None:
            raise InvalidInput(flag, "missing", "give --compile-cost, --eager and --compiled (or --buckets)")
    return amortize(request.compile_cost, request.eager, request.compiled, request.calls), ()  # type: ignore[arg-type]


def _run_buckets(
    path: Path, lengths: Path | None, requests: int | None
) -> tuple[AmortizeBucketsResult, tuple[Notice, ...]]:
    if requests is not None and lengths is None:
        raise InvalidInput("--requests", requests, "only used with --lengths FILE")
    text, source = read_input(path, "--buckets")
    rows = read_bucket_csv(text, source=source, calls_required=lengths is None)
    if lengths is None:
        return amortize_buckets(rows, source=source), rows.notices
    sample_text, sample_source = read_input(lengths, "--lengths")
    sample = bucketing.parse_lengths_text(sample_text, source=sample_source)
    counted, n = calls_from_lengths(rows, sample, requests=requests, source=source)
    how = f"{sample_source} ({n} lengths" + (
        f", scaled to {requests} calls)" if requests is not None else ")"
    )
    return amortize_buckets(counted, source=source, calls_source=how), rows.notices + sample.notices
