"""Comparing runs of the same model or kernel suite: which changes exceed the noise.

The unit of evidence is a **run**: one pass over the suite or the step with its own warm-up
(``kernels --runs N`` / ``profile --runs N`` make N of them; ``infer-opt ab`` alternates whole
commands). Repetitions inside one run share its machine state (other load, clock speed, cache
and allocator state), so their spread says nothing about how far the next run may land: on a
shared CPU, unchanged code moved 10–40% between runs, and up to 2× for microsecond kernels
(issue 17). Verdicts therefore rest on the spread *between* runs.

For each operator / case (and category) present on both sides, with ``x`` the logs of its
run medians:

* **≥ 2 runs on both sides** (run level): ``d = mean(x_new) − mean(x_base)``, ratio
  ``r = e^d`` (below 1: NEW is faster). The between-run variance ``s²`` is pooled over both
  sides (``df = n_b + n_n − 2``) and raised to at least the median ``s²`` of the row's family
  (the cases of one family, or the operators of one category, share their noise; with three
  runs a side one row's own ``s²`` is a rough guess) and to at least the device's measured
  run-to-run noise ``σ²`` when one is known. ``t = d / (s·√(1/n_b + 1/n_n))``; two-sided
  p from Student's t with the row's own df; the interval is ``d ± t_{df}·se``. With 3 runs a
  side (df = 4) a change must be about 3.5 standard errors to be found at 80% power.
* **one run on a side** (single run): there is no between-run estimate. The log ratio's
  uncertainty is the within-run bootstrap of the two medians plus one run's run-to-run noise
  on each side, ``sd² = sd_boot² + 2σ²``, with ``σ`` from the device's noise floor (an A/A
  ``ab``), else from a stated default; p and the interval from the normal approximation. No
  faster/slower verdict below the noise floor ``X = e^{z·√2·σ} − 1`` (``z = 2.576``: two single
  runs of unchanged code differ by more than X in about 1% of rows).
* **verdict**: ``faster`` / ``slower`` when significant and the change ``max(r, 1/r) − 1``
  reaches ``threshold``; ``within threshold`` when significant but smaller; ``within noise``
  otherwise. Significant: the row's p, adjusted for the other rows of its table
  (Benjamini–Hochberg), is below ``alpha`` — 33 cases tested at α = 5% would otherwise flag
  1.6 of them in every comparison of unchanged code; adjusted, an A/A flags any row at all
  in at most α of comparisons.

Headline (hyperfine's "NEW ran 1.52 ± 0.04 times faster than BASE"): for a profile the step
time, tested like a row; for a kernel suite the geometric mean of the per-case speedups,
tested on the per-run suite levels ``L = mean over cases of log(run median)`` (every case of
a run shares that run's drift, so the runs, not the cases, are the independent units); with a
single run, the cases' within-run variances plus one run's noise. When nothing is
significant, the headline is "no significant difference (within ±X%)".

:func:`noise_floor` turns an A/A (the same command on both sides, alternated) into the
device's run-to-run noise per family: the pooled standard deviation of the log run medians.

Pure: numpy (scipy lazily); results are duck-typed (no torch import).
"""

from __future__ import annotations

import math
import shlex
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from infer_opt import steps
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.requests import CompareRequest
from infer_opt.results.compare import (
    ALPHA,
    BOOTSTRAP,
    CONFIDENCE,
    DEFAULT_FLOOR,
    DEFAULT_FLOOR_SHORT,
    NOISE,
    THRESHOLD,
    CompareResult,
    CompareRow,
    Headline,
    SideStats,
)
from infer_opt.results.noise_floor import NoiseFloor, NoiseGroup
from infer_opt.run_key import RunKey

#: σ ≈ IQR / 1.349 for a normal distribution
IQR_TO_SIGMA = 1.349
#: standard error of a sample median ≈ sqrt(π/2)·σ/√n for a normal distribution
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)
#: the noise floor is the change two single runs of unchanged code exceed this rarely
FLOOR_TAIL = 0.01
FLOOR_Z = NormalDist().inv_cdf(1 - FLOOR_TAIL / 2)
#: rows whose median is below this take DEFAULT_FLOOR_SHORT
SHORT_ROW_S = 20e-6
#: the runs the notices suggest for a comparison
SUGGESTED_RUNS = 3
#: noise key of a kernel suite's headline (its per-run level) and of a profile's step
OVERALL = "overall"
STEP = "step"

FASTER = "faster"
SLOWER = "slower"
BELOW_THRESHOLD = "within threshold"
#: a change the test would call, not called: the machine's speed moved between the two sides
WITHHELD = "withheld"
ONLY_BASE = "only in base"
ONLY_NEW = "only in new"


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Measured:
    """One row of one side: its repetition samples (may be empty), its summary, the medians
    of its runs (``()``: one run, whose median is ``median_s``), the family it pools its
    noise with (``group``) and the key of its noise floor (``noise_key``, default ``group``)."""

    key: str
    label: str
    detail: str
    group: str
    samples_s: tuple[float, ...]
    median_s: float
    q1_s: float
    q3_s: float
    n: int
    shapes: tuple[tuple[int, ...], ...] = ()
    run_medians_s: tuple[float, ...] = ()
    noise_key: str = ""

    @property
    def runs(self) -> tuple[float, ...]:
        """The run medians (one run: the median)."""
        return self.run_medians_s or (self.median_s,)

    @property
    def floor_key(self) -> str:
        return self.noise_key or self.group

    @classmethod
    def from_samples(
        cls,
        key: str,
        samples_s: Sequence[float],
        *,
        label: str = "",
        detail: str = "",
        group: str = "",
        shapes: tuple[tuple[int, ...], ...] = (),
        run_medians_s: Sequence[float] = (),
        noise_key: str = "",
    ) -> Measured:
        values = np.asarray(list(samples_s), dtype=float)
        if values.size == 0:
            raise InvalidInput("samples", key, "need at least one sample")
        q1, median, q3 = np.percentile(values, [25.0, 50.0, 75.0])
        return cls(
            key,
            label or key,
            detail,
            group,
            tuple(float(v) for v in values),
            float(median),
            float(q1),
            float(q3),
            int(values.size),
            shapes,
            tuple(float(v) for v in run_medians_s) if len(run_medians_s) > 1 else (),
            noise_key,
        )


def sigma_of_floor(floor: float) -> float:
    """One run's run-to-run noise σ (log scale) whose single-run floor is ``floor``:
    ``σ = ln(1 + X) / (z·√2)``."""
    return math.log1p(floor) / (FLOOR_Z * math.sqrt(2.0))


def floor_of_sigma(sigma: float) -> float:
    """The single-run noise floor of one run's noise σ: ``X = e^{z·√2·σ} − 1``."""
    return math.expm1(FLOOR_Z * math.sqrt(2.0) * sigma)


@dataclass(frozen=True)
class Noise:
    """One run's run-to-run noise σ (the standard deviation of log run medians) per noise
    key, and where it came from: ``measured`` (an A/A saved for this device), ``given``
    (``--noise-floor``) or ``default`` (the stated defaults)."""

    source: str = "default"
    sigmas: Mapping[str, float] = field(default_factory=dict)
    overall: float | None = None
    where: str = ""
    #: what looking the floor up found worth saying (a corrupt or unusable cached floor)
    notices: tuple[Notice, ...] = ()

    @classmethod
    def of_record(cls, record: NoiseFloor, where: str = "") -> Noise:
        """A saved A/A record (``noise-floor``) as the noise a comparison uses."""
        return cls("measured", {g.key: g.between_run_cv for g in record.groups}, where=where)

    @classmethod
    def given(cls, floor: float) -> Noise:
        return cls("given", overall=sigma_of_floor(floor))

    def sigma(self, key: str, median_s: float) -> float:
        """σ of a row: its key's measured σ, else the given one, else the default (from
        :data:`DEFAULT_FLOOR`, or :data:`DEFAULT_FLOOR_SHORT` under :data:`SHORT_ROW_S`)."""
        if self.source == "given" and self.overall is not None:
            return self.overall
        if key in self.sigmas:
            return self.sigmas[key]
        return sigma_of_floor(DEFAULT_FLOOR_SHORT if median_s < SHORT_ROW_S else DEFAULT_FLOOR)

    def headline_sigma(self, key: str = OVERALL) -> float:
        if self.source == "given" and self.overall is not None:
            return self.overall
        return self.sigmas.get(key, sigma_of_floor(DEFAULT_FLOOR))

    def variance_floor(self, key: str) -> float:
        """The least between-run variance a run-level test assumes: a measured or given σ²
        (never the default, which is a guess for single runs)."""
        if self.source == "given" and self.overall is not None:
            return self.overall**2
        return self.sigmas.get(key, 0.0) ** 2 if self.source == "measured" else 0.0


# ----------------------------------------------------------------------------- outputs


# ----------------------------------------------------------------------------- statistics


def _validate(alpha: float, threshold: float, confidence: float, bootstrap: int) -> None:
    if not 0 < alpha < 1:
        raise InvalidInput("alpha", alpha, "must be in (0, 1)")
    if not (threshold >= 0 and math.isfinite(threshold)):
        raise InvalidInput("threshold", threshold, "must be a finite fraction >= 0, e.g. 5%")
    if not 0 < confidence < 1:
        raise InvalidInput("confidence", confidence, "must be in (0, 1)")
    if bootstrap < 100:
        raise InvalidInput("bootstrap", bootstrap, "need at least 100 replicates")


@dataclass(frozen=True)
class Settings:
    """How a pair is judged: significance ``alpha``, the ``threshold`` a change must pass for a
    verdict, the interval's ``confidence``, the bootstrap's resamples and ``seed``, and the
    run-to-run ``noise`` (None: the default floor)."""

    alpha: float = ALPHA
    threshold: float = THRESHOLD
    confidence: float = CONFIDENCE
    bootstrap: int = BOOTSTRAP
    seed: int = 0
    noise: Noise | None = None

    def __post_init__(self) -> None:
        _validate(self.alpha, self.threshold, self.confidence, self.bootstrap)

    @property
    def floor(self) -> Noise:
        return self.noise or Noise()

    def recorded(self) -> dict[str, float]:
        """The settings a result records by name: all but the noise (a result holds its floor)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "noise"}


def _log(value: float) -> float:
    """Medians of 0 s (an op below the clock resolution) would make ratios infinite."""
    return math.log(max(value, 1e-15))


def bootstrap_log_median_variance(
    samples_s: Sequence[float], *, bootstrap: int = BOOTSTRAP, seed: int = 0
) -> float:
    """The variance of ``log(median)`` over ``bootstrap`` resamples of ``samples_s``. The
    generator is seeded by ``seed`` and the samples themselves, so a side gets the same value
    whichever side of a comparison it is on (swapping BASE and NEW swaps nothing else)."""
    values = np.asarray(samples_s, dtype=float)
    if values.size < 2:
        return 0.0
    rng = np.random.default_rng([seed, zlib.crc32(values.tobytes())])
    medians = np.median(values[rng.integers(0, values.size, (bootstrap, values.size))], axis=1)
    return float(np.var(np.log(np.maximum(medians, 1e-15)), ddof=1))


def approx_log_ratio_sd(base: Measured, new: Measured) -> float:
    """Standard error of ``log(median(new)/median(base))`` from the summaries alone:
    ``se(log m) ≈ 1.2533·(IQR/1.349)/(m·√n)`` per side, added in quadrature."""
    total = 0.0
    for side in (base, new):
        sigma = (side.q3_s - side.q1_s) / IQR_TO_SIGMA
        total += (MEDIAN_SE_FACTOR * sigma / (max(side.median_s, 1e-15) * math.sqrt(max(side.n, 1)))) ** 2
    return math.sqrt(total)


def within_run_variance(
    base: Measured, new: Measured, *, bootstrap: int = BOOTSTRAP, seed: int = 0
) -> tuple[float, bool]:
    """The within-run variance of ``log(median(new)/median(base))``: the two sides'
    bootstrap variances added when both have samples, else :func:`approx_log_ratio_sd` squared
    (flagged approximate)."""
    if base.samples_s and new.samples_s:
        variances = (
            bootstrap_log_median_variance(m.samples_s, bootstrap=bootstrap, seed=seed) for m in (base, new)
        )
        return sum(variances), False
    return approx_log_ratio_sd(base, new) ** 2, True


def change(ratio: float) -> float:
    """Size of a change as a fraction, the same both ways: ``max(r, 1/r) - 1``."""
    return max(ratio, 1.0 / ratio) - 1.0


def verdict(ratio: float, *, significant: bool, threshold: float = THRESHOLD) -> str:
    """faster / slower when the difference is significant and at least ``threshold``."""
    if not significant:
        return NOISE
    if change(ratio) < threshold:
        return BELOW_THRESHOLD
    return FASTER if ratio < 1 else SLOWER


@dataclass(frozen=True)
class Test:
    """A difference of logs ``d`` (new − base) with its standard error, two-sided p and
    interval; ``df`` None for the normal approximation. ``spread`` is the own between-run
    standard deviation (run level), ``floor`` the single-run floor."""

    d: float
    se: float
    p_value: float | None
    low: float
    high: float
    df: int | None = None
    spread: float | None = None
    floor: float | None = None

    def significant(self, alpha: float, p_value: float | None = None) -> bool:
        """``p < alpha`` (``p_value``: an adjusted p in its place) and, single run, the change
        at least the floor."""
        p = self.p_value if p_value is None else p_value
        if p is None or p >= alpha:
            return False
        return self.floor is None or change(math.exp(self.d)) >= self.floor


def adjusted_p_values(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini–Hochberg: sorted ``p_(1) ≤ … ≤ p_(m)`` become ``q_(i) = min_{j ≥ i} p_(j)·m/j``
    (at most 1), in the original order. Flagging the rows with ``q < α`` keeps the expected
    share of false flags among the flags at most α; when nothing changed (an A/A) every flag
    is false, so the chance of any flag at all is at most α."""
    p = np.asarray(p_values, dtype=float)
    if p.size == 0:
        return p
    order = np.argsort(p, kind="stable")
    ranked = p[order] * p.size / np.arange(1, p.size + 1)
    q = np.empty_like(p)
    q[order] = np.minimum(np.minimum.accumulate(ranked[::-1])[::-1], 1.0)
    return q


def pooled_variance(base_logs: Sequence[float], new_logs: Sequence[float]) -> tuple[float, int]:
    """``s² = (SS_base + SS_new) / (n_b + n_n − 2)`` and its degrees of freedom."""
    b, n = np.asarray(base_logs, dtype=float), np.asarray(new_logs, dtype=float)
    df = b.size + n.size - 2
    ss = float(np.sum((b - b.mean()) ** 2) + np.sum((n - n.mean()) ** 2))
    return (ss / df if df > 0 else 0.0), df


def run_level_test(
    base_logs: Sequence[float],
    new_logs: Sequence[float],
    *,
    variance_floor: float = 0.0,
    confidence: float = CONFIDENCE,
) -> Test:
    """Student's t on log run medians (≥ 2 a side): pooled ``s²`` raised to
    ``variance_floor``, ``se = s·√(1/n_b + 1/n_n)``, ``df = n_b + n_n − 2``."""
    from scipy.special import stdtr, stdtrit

    nb, nn = len(base_logs), len(new_logs)
    own, df = pooled_variance(base_logs, new_logs)
    d = float(np.mean(new_logs) - np.mean(base_logs))
    se = math.sqrt(max(own, variance_floor) * (1.0 / nb + 1.0 / nn))
    if se == 0.0:
        p = 1.0 if d == 0.0 else 0.0
        return Test(d, 0.0, p, d, d, df, 0.0)
    p = float(2.0 * stdtr(df, -abs(d) / se))
    q = float(stdtrit(df, 0.5 + confidence / 2.0))
    return Test(d, se, p, d - q * se, d + q * se, df, math.sqrt(own))


def normal_test(d: float, sd: float, *, floor: float, confidence: float = CONFIDENCE) -> Test:
    """``d`` with standard deviation ``sd`` (normal approximation): two-sided p and interval."""
    if sd == 0.0:
        return Test(d, 0.0, 1.0 if d == 0.0 else 0.0, d, d, floor=floor)
    q = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = math.erfc(abs(d) / sd / math.sqrt(2.0))
    return Test(d, sd, p, d - q * sd, d + q * sd, floor=floor)


def single_run_test(d: float, within: float, sigma: float, *, confidence: float = CONFIDENCE) -> Test:
    """One run a side: ``sd² = within-run variance + 2σ²``; no verdict below the floor of σ."""
    return normal_test(
        d, math.sqrt(within + 2.0 * sigma**2), floor=floor_of_sigma(sigma), confidence=confidence
    )


def _side(m: Measured) -> SideStats:
    return SideStats(m.median_s, m.q1_s, m.q3_s, m.n)


def _logs(m: Measured) -> list[float]:
    return [_log(v) for v in m.runs]


def assess_pair(
    base: Measured,
    new: Measured,
    settings: Settings,
    family_variance: float = 0.0,
) -> tuple[Test, float, bool]:
    """The test of ``log(new/base)`` for one row, the variance of its estimate that a
    single-run headline adds up (within-run; a run-level row gives its ``se²``) and whether
    that is approximate: run level when both sides hold ≥ 2 runs, else single run (no verdict
    with fewer than two samples on a side: nothing shows their spread)."""
    noise, confidence = settings.floor, settings.confidence
    if len(base.runs) >= 2 and len(new.runs) >= 2:
        floor_var = max(family_variance, noise.variance_floor(base.floor_key))
        test = run_level_test(_logs(base), _logs(new), variance_floor=floor_var, confidence=confidence)
        return test, test.se**2, False
    within, approximate = within_run_variance(base, new, bootstrap=settings.bootstrap, seed=settings.seed)
    sigma = noise.sigma(base.floor_key, min(base.median_s, new.median_s))
    test = single_run_test(_log(new.median_s) - _log(base.median_s), within, sigma, confidence=confidence)
    if min(base.n, new.n) < 2:
        test = replace(test, p_value=None)
    return test, within, approximate


def compare_pair(
    base: Measured,
    new: Measured,
    settings: Settings = Settings(),
    family_variance: float = 0.0,
) -> tuple[CompareRow, float]:
    """One row present on both sides (:func:`assess_pair`) judged on its own p, and the
    variance a single-run headline adds up."""
    test, within, approximate = assess_pair(base, new, settings, family_variance)
    return row_of(base, new, test, approximate, settings), within


def row_of(
    base: Measured,
    new: Measured,
    test: Test,
    approximate: bool,
    settings: Settings,
    q_value: float | None = None,
) -> CompareRow:
    """The row of a tested pair; its verdict from ``q_value`` (the adjusted p) when given."""
    ratio = math.exp(test.d)
    q = test.p_value if q_value is None else q_value
    return CompareRow(
        key=base.key,
        label=base.label,
        detail=base.detail,
        group=base.group,
        base=_side(base),
        new=_side(new),
        ratio=ratio,
        ratio_low=math.exp(test.low),
        ratio_high=math.exp(test.high),
        speedup=1.0 / ratio,
        p_value=test.p_value,
        q_value=q,
        verdict=verdict(ratio, significant=test.significant(settings.alpha, q), threshold=settings.threshold),
        approximate=approximate,
        shapes=base.shapes,
        runs_base=len(base.runs),
        runs_new=len(new.runs),
        between_run_cv=test.spread,
        floor=test.floor,
    )


def _unique(rows: Sequence[Measured]) -> list[Measured]:
    """Repeated keys get ``#2``, ``#3``… in order, so matching never drops a row."""
    seen: dict[str, int] = {}
    out = []
    for m in rows:
        seen[m.key] = seen.get(m.key, 0) + 1
        out.append(m if seen[m.key] == 1 else replace(m, key=f"{m.key} #{seen[m.key]}"))
    return out


def family_variances(pairs: Iterable[tuple[Measured, Measured]]) -> dict[str, float]:
    """Per family (``group``): the median pooled between-run variance of its rows that have
    ≥ 2 runs on both sides."""
    by_group: dict[str, list[float]] = {}
    for b, n in pairs:
        if len(b.runs) >= 2 and len(n.runs) >= 2:
            by_group.setdefault(b.group, []).append(pooled_variance(_logs(b), _logs(n))[0])
    return {g: float(np.median(v)) for g, v in by_group.items()}


def compare_rows(
    base: Sequence[Measured],
    new: Sequence[Measured],
    settings: Settings = Settings(),
) -> tuple[list[CompareRow], dict[str, float]]:
    """Match rows by key: rows on both sides compared (base order, then rows only in NEW),
    each judged on its p adjusted for the rows compared with it (:func:`adjusted_p_values`);
    returns the rows and each matched row's variance for a single-run headline."""
    base, new = _unique(base), _unique(new)
    new_by_key = {m.key: m for m in new}
    pairs = [(i, b, new_by_key[b.key]) for i, b in enumerate(base) if b.key in new_by_key]
    families = family_variances((b, n) for _, b, n in pairs)
    tested = {
        b.key: assess_pair(b, n, replace(settings, seed=settings.seed + i), families.get(b.group, 0.0))
        for i, b, n in pairs
    }
    with_p = [k for k, (t, _, _) in tested.items() if t.p_value is not None]
    q_values = dict(zip(with_p, adjusted_p_values([tested[k][0].p_value for k in with_p]), strict=True))
    rows: list[CompareRow] = []
    for b in base:
        if b.key not in tested:
            rows.append(_only(b, ONLY_BASE))
            continue
        test, _, approximate = tested[b.key]
        q = q_values.get(b.key)
        rows.append(
            row_of(b, new_by_key[b.key], test, approximate, settings, None if q is None else float(q))
        )
    base_keys = {m.key for m in base}
    rows.extend(_only(n, ONLY_NEW) for n in new if n.key not in base_keys)
    return rows, {k: v[1] for k, v in tested.items()}


def _only(m: Measured, where: str) -> CompareRow:
    side = _side(m)
    base, new = (side, None) if where == ONLY_BASE else (None, side)
    runs = len(m.runs)
    return CompareRow(
        m.key, m.label, m.detail, m.group, base, new, verdict=where, shapes=m.shapes,
        runs_base=runs if base else 0, runs_new=runs if new else 0,
    )  # fmt: skip


# ----------------------------------------------------------------------------- headlines


def headline_from_test(
    what: str,
    test: Test,
    settings: Settings,
    *,
    runs: tuple[int, int],
    approximate: bool = False,
    cases: int = 1,
) -> Headline:
    """The headline of a test of ``d = log(new/base)``: speedup ``e^{−d}`` with its standard
    error ``e^{−d}·se`` (delta method) and the interval of ``e^{−d}``."""
    speedup = math.exp(-test.d)
    return Headline(
        what=what,
        speedup=speedup,
        speedup_std=speedup * test.se,
        low=math.exp(-test.high),
        high=math.exp(-test.low),
        verdict=verdict(
            1.0 / speedup, significant=test.significant(settings.alpha), threshold=settings.threshold
        ),
        p_value=test.p_value,
        approximate=approximate,
        cases=cases,
        runs_base=runs[0],
        runs_new=runs[1],
        between_run_cv=test.spread,
        floor=test.floor,
    )


def pair_headline(
    what: str,
    base: Measured,
    new: Measured,
    settings: Settings = Settings(),
) -> Headline:
    """The headline of one timed quantity (a profile's step time), tested like a row."""
    test, _, approximate = assess_pair(base, new, settings)
    headline = headline_from_test(
        what, test, settings, runs=(len(base.runs), len(new.runs)), approximate=approximate
    )
    return replace(headline, base_s=base.median_s, new_s=new.median_s)


def suite_levels(results: Sequence[Sequence[Measured]], keys: Iterable[str]) -> list[float]:
    """Per run of each result: the mean over ``keys`` of the log run medians (the suite's
    level in that run; the geometric mean of its cases)."""
    wanted = sorted(set(keys))
    levels: list[float] = []
    for rows in results:
        by_key = {m.key: m for m in rows}
        count = len(by_key[wanted[0]].runs)
        levels.extend(float(np.mean([_log(by_key[k].runs[j]) for k in wanted])) for j in range(count))
    return levels


def full_keys(rows: Sequence[Measured]) -> set[str]:
    """Keys of the rows that hold every run of their result."""
    most = max((len(m.runs) for m in rows), default=0)
    return {m.key for m in rows if len(m.runs) == most}


def geometric_mean_headline(
    rows: Sequence[CompareRow],
    within: Mapping[str, float],
    settings: Settings = Settings(),
    *,
    levels: tuple[Sequence[float], Sequence[float]] | None = None,
) -> Headline:
    """Geometric mean of the per-case speedups over the cases on both sides. With ≥ 2 suite
    levels a side (:func:`suite_levels`), a run-level t test on them; else single run: the
    cases' within-run variances (independent: ``Σ var_i / n²``) plus one run's noise."""
    noise, confidence = settings.floor, settings.confidence
    matched = [r for r in rows if r.speedup is not None]
    if not matched:
        raise InvalidInput("BASE/NEW", "no common cases", "the two runs share no measured case")
    d = float(np.mean([math.log(r.ratio) for r in matched]))  # type: ignore[arg-type]
    what = f"geometric mean over {len(matched)} cases"
    if levels is not None and len(levels[0]) >= 2 and len(levels[1]) >= 2:
        test = run_level_test(
            levels[0], levels[1], variance_floor=noise.variance_floor(OVERALL), confidence=confidence
        )
        runs = (len(levels[0]), len(levels[1]))
        return headline_from_test(what, test, settings, runs=runs, cases=len(matched))
    variance = math.fsum(within[r.key] for r in matched) / len(matched) ** 2
    test = single_run_test(d, variance, noise.headline_sigma(), confidence=confidence)
    runs = (min(r.runs_base for r in matched), min(r.runs_new for r in matched))
    return headline_from_test(
        what, test, settings, runs=runs, approximate=any(r.approximate for r in matched), cases=len(matched)
    )


# ----------------------------------------------------------------------------- results


PROFILE_IDENTITY = ("model", "mode", "batch", "seq_len", "context", "new_tokens", "dtype", "device_name")
KERNELS_IDENTITY = ("suite", "dtype", "device_name")
COMPARABLE = ("profile", "kernels")


def differences(kind: str, base: Any, new: Any) -> list[str]:
    """What makes two results of ``kind`` not the same experiment, e.g.
    ``dtype (float32 vs bfloat16)``."""
    fields = PROFILE_IDENTITY if kind == "profile" else KERNELS_IDENTITY
    mode = getattr(base, "mode", None) if kind == "profile" else None
    if mode in steps.MODES and getattr(new, "mode", None) == mode:
        # a shape the mode does not read (a decode step's seq_len) is not part of the experiment
        fields = tuple(f for f in fields if f not in steps.SHAPE_MODES or steps.reads(f, (mode,)))
    out = []
    for name in fields:
        a, b = getattr(base, name, None), getattr(new, name, None)
        if a != b:
            out.append(f"{name.replace('_', ' ')} ({a} vs {b})")
    return out


def _shapes(shapes: Sequence[Sequence[int]]) -> str:
    return ", ".join("×".join(str(s) for s in shape) if shape else "scalar" for shape in shapes)


def _measured(
    key: str,
    samples: Sequence[float],
    median_s: float,
    q1_s: float,
    q3_s: float,
    n: int,
    *,
    runs: Sequence[float] = (),
    **names: Any,
) -> Measured:
    if samples:
        return Measured.from_samples(key, samples, run_medians_s=runs, **names)
    names.setdefault("label", key)
    return Measured(
        key, names["label"], names.get("detail", ""), names.get("group", ""), (), median_s, q1_s, q3_s, n,
        names.get("shapes", ()), tuple(runs) if len(runs) > 1 else (), names.get("noise_key", ""),
    )  # fmt: skip


def _summed(key: str, row: Any, reps: int, **names: Any) -> Measured:
    """A profile's operator or category row: its per-repetition totals, or without them its
    summed median alone (no quartiles of a sum of medians)."""
    t = row.time_s
    return _measured(key, row.time_samples_s, t, t, t, reps, runs=getattr(row, "run_medians_s", ()), **names)


def profile_rows(result: Any) -> tuple[Measured, list[Measured], list[Measured]]:
    """(step, operators, categories) of a profile. An operator's samples are its per-step
    totals over the repetitions; without samples its summed median stands alone."""
    step = result.step
    step_m = _measured(
        STEP, step.samples_s, step.median_s, step.q1_s, step.q3_s, len(step.samples_s) or result.reps,
        runs=getattr(step, "run_medians_s", ()), group=STEP,
    )  # fmt: skip
    ops = [
        _summed(
            f"{o.name} [{_shapes(o.shapes)}] {o.dtype}",
            o,
            result.reps,
            label=o.name,
            detail=_shapes(o.shapes),
            group=o.category,
            shapes=tuple(tuple(int(d) for d in shape) for shape in o.shapes),
        )
        for o in result.ops
    ]
    categories = [
        _summed(
            c.category, c, result.reps, label=c.category, group="category", noise_key=f"category:{c.category}"
        )
        for c in result.categories
    ]
    return step_m, ops, categories


def kernel_rows(result: Any) -> list[Measured]:
    """The measured cases of a kernel-suite run (skipped cases left out)."""
    out = []
    for row in result.rows:
        if row.time_s is None:
            continue
        s = row.summary
        out.append(
            _measured(
                f"{row.name} [{row.label}]",
                row.samples_s,
                row.time_s,
                s.q1_s if s else row.time_s,
                s.q3_s if s else row.time_s,
                s.n if s else 1,
                runs=getattr(row, "run_medians_s", ()),
                label=row.name,
                detail=row.label,
                group=row.family,
            )
        )
    return out


def merge_sides(per_result: Sequence[Sequence[Measured]]) -> list[Measured]:
    """The rows of several results of one side (the rounds of an ``ab``) as one: samples and
    run medians concatenated per key, in order of first appearance."""
    if len(per_result) == 1:
        return list(per_result[0])
    merged: dict[str, list[Measured]] = {}
    for rows in per_result:
        for m in _unique(rows):
            merged.setdefault(m.key, []).append(m)
    return [_merge(parts) for parts in merged.values()]


def _merge(parts: list[Measured]) -> Measured:
    first = parts[0]
    if len(parts) == 1:
        return first
    runs = tuple(v for m in parts for v in m.runs)
    samples = tuple(v for m in parts for v in m.samples_s)
    names = {"label": first.label, "detail": first.detail, "group": first.group, "shapes": first.shapes}
    if all(m.samples_s for m in parts):
        return Measured.from_samples(
            first.key, samples, run_medians_s=runs, noise_key=first.noise_key, **names
        )
    median = float(np.median(runs))
    return replace(first, samples_s=(), median_s=median, q1_s=median, q3_s=median, n=sum(m.n for m in parts),
                   run_medians_s=runs)  # fmt: skip


def _profile_subject(r: Any) -> str:
    if r.mode == "decode":
        shape = f"batch {r.batch}, decode over {r.context} cached tokens"
    elif r.mode == "generate":
        shape = f"batch {r.batch}, prompt {r.seq_len}, {r.new_tokens} new tokens"
    else:
        shape = f"batch {r.batch} × {r.seq_len} tokens"
    return f"{r.model} {r.mode} ({shape}), {r.dtype} on {r.device_name}"


def _as_list(results: Any) -> list[Any]:
    return list(results) if isinstance(results, (list, tuple)) else [results]


def _check_kinds(bases: list[Any], news: list[Any], base_name: str, new_name: str) -> str:
    kind = bases[0].KIND
    if kind not in COMPARABLE:
        raise InvalidInput(
            "BASE", base_name, f"is a {kind} result; compare works on two profile or two kernels results"
        )
    for other, name, param in [
        *((b, base_name, "BASE") for b in bases),
        *((n, new_name, "NEW") for n in news),
    ]:
        if kind != other.KIND:
            raise InvalidInput(
                param,
                name,
                f"is a {other.KIND} result but BASE is a {kind} result; compare needs the same kind",
            )
    return kind


def _drop_options(argv: list[str], names: tuple[str, ...]) -> list[str]:
    """``argv`` without the options ``names`` and their values (``--out F`` or ``--out=F``)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in names:
            skip = True
        elif not any(arg.startswith(f"{name}=") for name in names):
            out.append(arg)
    return out


def _split(command: str) -> list[str] | None:
    try:
        return shlex.split(command) if command else None
    except ValueError:
        return None


def rerun_command(command: str, runs: int = SUGGESTED_RUNS) -> str:
    """``command`` (an infer-opt command line as a saved file records it) with ``--runs N``
    set; ``""`` when no command was recorded."""
    argv = _split(command)
    if argv is None:
        return ""
    return shlex.join([*_drop_options(argv, ("--runs",)), "--runs", str(runs)])


def ab_command(base: str, new: str) -> str:
    """The ``infer-opt ab`` line alternating two recorded commands (their ``--out`` files
    dropped: ab writes its own); ``""`` unless both were recorded."""
    argvs = [_split(c) for c in (base, new)]
    if any(a is None for a in argvs):
        return ""
    drop = ("--out", "-o", "--resume", "--runs")
    base_cmd, new_cmd = (shlex.join(_drop_options(a, drop)) for a in argvs)  # type: ignore[arg-type]
    return shlex.join(["infer-opt", "ab", "--base", base_cmd, "--new", new_cmd])


def _sides(kind: str, results: Sequence[Any]) -> tuple[list[list[Measured]], list[Measured], list[Measured]]:
    """Per result its main rows, then (profiles) the merged steps and categories."""
    if kind == "kernels":
        return [kernel_rows(r) for r in results], [], []
    parts = [profile_rows(r) for r in results]
    steps = merge_sides([[p[0]] for p in parts])
    categories = merge_sides([p[2] for p in parts])
    return [p[1] for p in parts], steps, categories


def _kernel_headline(
    rows: list[CompareRow],
    within: Mapping[str, float],
    per_base: list[list[Measured]],
    per_new: list[list[Measured]],
    settings: Settings,
) -> Headline:
    matched = {r.key for r in rows if r.speedup is not None}
    full = [full_keys(rows_) for rows_ in [*per_base, *per_new]]
    common = matched.intersection(*full) if full else set()
    levels = None
    if common:
        levels = (suite_levels(per_base, common), suite_levels(per_new, common))
    return geometric_mean_headline(rows, within, settings, levels=levels)


def _compare_notices(
    kind: str,
    rows: Sequence[CompareRow],
    headline: Headline,
    diff: Sequence[str],
    noise: Noise,
    commands: tuple[str, str],
) -> tuple[Notice, ...]:
    out: list[Notice] = list(noise.notices)
    if diff:
        out.append(Notice("compared_despite_differences", {"differences": list(diff)}))
    only = sum(1 for r in rows if r.verdict in (ONLY_BASE, ONLY_NEW))
    if only:
        out.append(
            Notice("rows_in_one_run", {"count": only, "what": "operator" if kind == "profile" else "case"})
        )
    if headline.floor is not None or any(r.floor is not None for r in rows):
        out.append(
            Notice(
                "single_run",
                {
                    "runs_base": headline.runs_base,
                    "runs_new": headline.runs_new,
                    "base_command": rerun_command(commands[0]),
                    "new_command": rerun_command(commands[1]),
                    "ab_command": ab_command(*commands),
                    "kind": kind,
                },
            )
        )
        if noise.source == "default":
            out.append(
                Notice(
                    "noise_floor_default",
                    {
                        "floor": DEFAULT_FLOOR,
                        "short_floor": DEFAULT_FLOOR_SHORT,
                        "short_s": SHORT_ROW_S,
                        "command": ab_command(commands[0], commands[0]),
                    },
                )
            )
    return tuple(out)


#: the speed probe moving more than this between the sides withholds every verdict of a change
PROBE_MOVE = 0.15


def machine_speed_ratio(bases: Sequence[Any], news: Sequence[Any]) -> float | None:
    """Median speed probe of NEW's runs over BASE's (the fixed matmul each profile and kernel
    suite times before and after its runs); None when either side did not record one."""
    import statistics

    def probes(side: Sequence[Any]) -> list[float]:
        return [p for r in side for p in getattr(r, "speed_probe_s", ()) if p > 0]

    b, n = probes(bases), probes(news)
    return statistics.median(n) / statistics.median(b) if b and n else None


def withhold(rows: Sequence[CompareRow]) -> list[CompareRow]:
    """Each row that calls a change (faster, slower, below threshold) marked :data:`WITHHELD`."""
    called = (FASTER, SLOWER, BELOW_THRESHOLD)
    return [replace(r, verdict=WITHHELD) if r.verdict in called else r for r in rows]


def compare_results(
    base: Any,
    new: Any,
    *,
    base_name: str = "BASE",
    new_name: str = "NEW",
    force: bool = False,
    alpha: float = ALPHA,
    threshold: float = THRESHOLD,
    confidence: float = CONFIDENCE,
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
    noise: Noise | None = None,
    commands: tuple[str, str] = ("", ""),
) -> CompareResult:
    """Compare two profiles or two kernel-suite runs (see the module docstring); ``base`` and
    ``new`` may each be a sequence of results (the rounds of an ``ab``), whose runs are pooled.
    Different kinds are refused; different experiments (model, shapes, dtype, device; or
    suite, dtype, device) unless ``force``. ``commands``: the command lines that made BASE and
    NEW, for the notice that says how to get a run-level test."""
    bases, news = _as_list(base), _as_list(new)
    kind = _check_kinds(bases, news, base_name, new_name)
    settings = Settings(alpha, threshold, confidence, bootstrap, seed, noise)
    diff = differences(kind, bases[0], news[0])
    if diff and not force:
        raise InvalidInput(
            "NEW", new_name, f"differs from BASE in {', '.join(diff)}; pass --force to compare anyway"
        )
    noise = settings.floor
    per_base, steps_b, cats_b = _sides(kind, bases)
    per_new, steps_n, cats_n = _sides(kind, news)
    rows, within = compare_rows(merge_sides(per_base), merge_sides(per_new), replace(settings, seed=seed + 1))
    categories: list[CompareRow] = []
    if kind == "profile":
        categories, _ = compare_rows(cats_b, cats_n, replace(settings, seed=seed + 100_000))
        headline = pair_headline("median step time", steps_b[0], steps_n[0], settings)
        subject = _profile_subject(bases[0])
    else:
        headline = _kernel_headline(rows, within, per_base, per_new, settings)
        subject = f"kernel suite {bases[0].suite}, {bases[0].dtype} on {bases[0].device_name}"
    moved = machine_speed_ratio(bases, news)
    notices = _compare_notices(kind, [*rows, *categories], headline, diff, noise, commands)
    if moved is not None and abs(math.log(moved)) > math.log1p(PROBE_MOVE):
        rows, categories = withhold(rows), withhold(categories)
        (headline,) = withhold([headline])  # type: ignore[list-item]
        notices += (Notice("machine_speed_moved", {"ratio": moved, "limit": PROBE_MOVE}),)
    return CompareResult(
        compared=kind,
        base_name=base_name,
        new_name=new_name,
        subject=subject,
        headline=headline,
        rows=tuple(rows),
        categories=tuple(categories),
        differences=tuple(diff),
        runs_base=headline.runs_base,
        runs_new=headline.runs_new,
        noise_floor=floor_of_sigma(noise.headline_sigma(STEP if kind == "profile" else OVERALL)),
        noise_source=noise.source,
        noise_where=noise.where,
        warnings=notices,
        machine_speed_ratio=moved,
        **settings.recorded(),
    )


# ----------------------------------------------------------------------------- noise floor


def noise_floor_problems(
    record: NoiseFloor, expected: RunKey | None = None, timings: Sequence[str] | None = None
) -> tuple[Notice, ...]:
    """What stops ``record`` from being saved or used for a run with key ``expected``: fewer
    than two runs, no family, a spread that is not a finite number ≥ 0, another key (every
    field, timing included: the noise of CUDA events is not that of graph replays)."""
    out: list[Notice] = []
    if record.runs < 2 or not record.groups:
        out.append(Notice("noise_floor_empty", {"runs": record.runs, "groups": len(record.groups)}))
    bad = [g.key for g in record.groups if not (math.isfinite(g.between_run_cv) and g.between_run_cv >= 0)]
    if bad:
        out.append(Notice("noise_floor_not_finite", {"groups": bad}))
    if expected is not None:
        out += [
            Notice("noise_floor_mismatch", {"field": name, "floor": ours, "run": theirs})
            for name, ours, theirs in record.key.differences(expected)
        ]
    return tuple(out)


def _group(key: str, logs_by_row: Sequence[Sequence[float]]) -> NoiseGroup:
    """Pooled σ² = Σ SS / Σ df over the rows (each with ≥ 2 runs)."""
    ss = sum(float(np.sum((np.asarray(x) - np.mean(x)) ** 2)) for x in logs_by_row)
    df = sum(len(x) - 1 for x in logs_by_row)
    sigma = math.sqrt(ss / df) if df > 0 else 0.0
    return NoiseGroup(key, sigma, floor_of_sigma(sigma), len(logs_by_row), df)


def noise_floor(results: Sequence[Any], *, command: str = "") -> NoiseFloor:
    """The run-to-run noise of an A/A: every result is a run (or several) of the same command.
    Per noise key, the pooled standard deviation of its rows' log run medians."""
    results = list(results)
    kind = _check_kinds(results, results, "A/A", "A/A")
    per_result, steps, categories = _sides(kind, results)
    rows = [*merge_sides(per_result), *steps, *categories]
    runs = max((len(m.runs) for m in rows), default=0)
    if runs < 2:
        raise InvalidInput("rounds", runs, "an A/A needs at least 2 runs of the command in all")
    by_key: dict[str, list[list[float]]] = {}
    for m in rows:
        if len(m.runs) >= 2:
            by_key.setdefault(m.floor_key, []).append(_logs(m))
    if kind == "kernels":
        common = set.intersection(*(full_keys(r) for r in per_result))
        if common:
            by_key[OVERALL] = [suite_levels(per_result, common)]
    first = results[0]
    key = RunKey.of(first)
    return NoiseFloor(
        compared=kind,
        device=first.device,
        device_name=key.device_name,
        dtype=key.dtype,
        subject=_profile_subject(first) if kind == "profile" else f"kernel suite {first.suite}",
        runs=runs,
        groups=tuple(_group(k, v) for k, v in sorted(by_key.items())),
        threads=key.threads,
        matmul_precision=key.matmul_precision,
        timing=key.timing,
        command=command,
    )


def run(request: CompareRequest) -> Any:
    """``infer-opt compare`` and ``infer_opt.compare``: two traces op by op
    (:func:`~infer_opt.trace.compare.compare_traces`), else two profiles or kernel-suite runs
    (:func:`compare_results`); a side given as a file is read first, and names its side."""
    from infer_opt.inputs.sides import side
    from infer_opt.results.trace import TraceResult

    r = request
    sides, commands, kinds = [], [], []
    for x in (r.base, r.new):
        result, command, kind = side(x) if isinstance(x, Path) else (_unwrapped(x), "", type(x).__name__)
        sides.append(result)
        commands.append(command)
        kinds.append(kind)
    named = {}
    if isinstance(r.base, Path) and isinstance(r.new, Path):
        distinct = r.base.name != r.new.name
        named = {"base_name": r.base.name if distinct else str(r.base)}
        named["new_name"] = r.new.name if distinct else str(r.new)
    traces = [isinstance(x, TraceResult) for x in sides]
    if all(traces):
        from infer_opt.trace.compare import compare_traces

        run_level = (("--significance", r.significance, ALPHA), ("--force", r.force, False),
                     ("--seed", r.seed, 0), ("--noise-floor", r.noise_floor, None))  # fmt: skip
        given = [(f, v) for f, v, default in run_level if v != default]
        if given:
            raise InvalidInput(given[0][0], given[0][1], "two traces compare with --threshold only")
        return compare_traces(sides[0], sides[1], threshold=r.threshold, **named)
    if any(traces):
        which = "NEW" if traces[0] else "BASE"
        where, other = (r.new, kinds[1]) if traces[0] else (r.base, kinds[0])
        raise InvalidInput(which, str(where), f"a {other} result; a trace compares with a trace")
    if r.noise_floor is not None:
        noise = Noise.given(r.noise_floor)
    else:
        from infer_opt.store import noise_for

        noise = noise_for(sides)
    return compare_results(
        sides[0], sides[1], force=r.force, alpha=r.significance, threshold=r.threshold, seed=r.seed,
        noise=noise, commands=(commands[0], commands[1]), **named,
    )  # fmt: skip


def _unwrapped(x: Any) -> Any:
    """A :class:`~infer_opt.trace.loaded.LoadedTrace` as its result; anything else as it is."""
    return x.result if type(x).__name__ == "LoadedTrace" else x
