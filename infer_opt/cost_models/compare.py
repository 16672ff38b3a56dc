"""Comparing two runs of the same model or kernel suite: which changes exceed the noise.

For each operator / case (and category) present in both runs:

* the ratio of medians ``r = median(new) / median(base)`` (below 1: NEW is faster), with a
  percentile bootstrap confidence interval (each side resampled with replacement,
  ``bootstrap`` replicates, seeded);
* a two-sided Mann-Whitney U test on the repetition samples (``scipy.stats.mannwhitneyu``,
  imported lazily) at significance ``alpha``;
* a verdict: ``faster`` / ``slower`` when the test rejects and the change
  ``max(r, 1/r) - 1`` reaches ``threshold``; ``within threshold`` when it rejects but the
  change is smaller; ``within noise`` when it does not reject.

Without repetition samples (a result saved without them) the uncertainty falls back to the
summary: the median's standard error ``≈ 1.2533·σ/√n`` with ``σ ≈ IQR/1.349`` (normal
approximation), propagated in log space, and the verdict uses the interval instead of the
test; such rows are marked approximate.

The headline follows hyperfine: "NEW ran 1.52 ± 0.04 times faster than BASE" with the
speedup ``median(base)/median(new)`` of the step time (profiles) or the geometric mean of
the per-case speedups (kernel suites), ± its bootstrap standard error.

Pure: numpy (scipy lazily); results are duck-typed (no torch import).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from infer_opt.errors import InvalidInput
from infer_opt.results import Result

ALPHA = 0.05
THRESHOLD = 0.05
CONFIDENCE = 0.95
BOOTSTRAP = 2000
#: σ ≈ IQR / 1.349 for a normal distribution
IQR_TO_SIGMA = 1.349
#: standard error of a sample median ≈ sqrt(π/2)·σ/√n for a normal distribution
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)

FASTER = "faster"
SLOWER = "slower"
NOISE = "within noise"
BELOW_THRESHOLD = "within threshold"
ONLY_BASE = "only in base"
ONLY_NEW = "only in new"


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Measured:
    """One row of one run: its repetition samples (may be empty) and its summary."""

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
        )


# ----------------------------------------------------------------------------- outputs


@dataclass(frozen=True)
class SideStats:
    """One run's view of a row."""

    median_s: float
    q1_s: float
    q3_s: float
    n: int


@dataclass(frozen=True)
class CompareRow:
    key: str
    label: str
    detail: str
    group: str
    base: SideStats | None
    new: SideStats | None
    #: median(new) / median(base): below 1 = NEW faster
    ratio: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    #: median(base) / median(new) = 1/ratio
    speedup: float | None = None
    #: two-sided Mann-Whitney U p-value (None: no samples, or a side with one sample)
    p_value: float | None = None
    verdict: str = NOISE
    #: the uncertainty comes from the summary (median, IQR), not from samples
    approximate: bool = False
    #: an operator's input shapes (profiles)
    shapes: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class Headline:
    """The overall comparison: ``speedup`` = base/new (above 1: NEW faster)."""

    what: str
    speedup: float
    #: bootstrap standard error of the speedup
    speedup_std: float
    low: float
    high: float
    verdict: str
    p_value: float | None = None
    approximate: bool = False
    cases: int = 1
    #: the medians compared, when the headline is one timed quantity (a profile's step)
    base_s: float | None = None
    new_s: float | None = None


@dataclass(frozen=True)
class CompareResult(Result):
    KIND = "compare"

    #: the kind of the two results compared ("profile" or "kernels")
    compared: str
    base_name: str
    new_name: str
    subject: str
    headline: Headline
    rows: tuple[CompareRow, ...]
    categories: tuple[CompareRow, ...] = ()
    alpha: float = ALPHA
    threshold: float = THRESHOLD
    confidence: float = CONFIDENCE
    bootstrap: int = BOOTSTRAP
    seed: int = 0
    #: what differs between the runs when compared with --force
    differences: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- statistics


def _validate(alpha: float, threshold: float, confidence: float, bootstrap: int) -> None:
    if not 0 < alpha < 1:
        raise InvalidInput("--alpha", alpha, "must be in (0, 1)")
    if not (threshold >= 0 and math.isfinite(threshold)):
        raise InvalidInput("--threshold", threshold, "must be a finite fraction >= 0, e.g. 5%")
    if not 0 < confidence < 1:
        raise InvalidInput("confidence", confidence, "must be in (0, 1)")
    if bootstrap < 100:
        raise InvalidInput("bootstrap", bootstrap, "need at least 100 replicates")


def _positive(values: np.ndarray) -> np.ndarray:
    """Medians of 0 s (an op below the clock resolution) would make ratios infinite."""
    return np.maximum(values, 1e-15)


def bootstrap_log_ratios(
    base_s: Sequence[float], new_s: Sequence[float], *, bootstrap: int = BOOTSTRAP, seed: int = 0
) -> np.ndarray:
    """``log(median(new*)/median(base*))`` over ``bootstrap`` resamples of each side."""
    base = np.asarray(base_s, dtype=float)
    new = np.asarray(new_s, dtype=float)
    rng_base, rng_new = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    med_base = np.median(base[rng_base.integers(0, base.size, (bootstrap, base.size))], axis=1)
    med_new = np.median(new[rng_new.integers(0, new.size, (bootstrap, new.size))], axis=1)
    return np.log(_positive(med_new)) - np.log(_positive(med_base))


def approx_log_ratio_sd(base: Measured, new: Measured) -> float:
    """Standard error of ``log(median(new)/median(base))`` from the summaries alone:
    ``se(log m) ≈ 1.2533·(IQR/1.349)/(m·√n)`` per side, added in quadrature."""
    total = 0.0
    for side in (base, new):
        sigma = (side.q3_s - side.q1_s) / IQR_TO_SIGMA
        total += (MEDIAN_SE_FACTOR * sigma / (max(side.median_s, 1e-15) * math.sqrt(max(side.n, 1)))) ** 2
    return math.sqrt(total)


def log_ratio_draws(
    base: Measured, new: Measured, *, bootstrap: int = BOOTSTRAP, seed: int = 0
) -> tuple[np.ndarray, bool]:
    """Draws of ``log(new/base)`` for intervals and for combining rows: the bootstrap when
    both sides have samples, else normal draws from :func:`approx_log_ratio_sd` (flagged)."""
    if base.samples_s and new.samples_s:
        return bootstrap_log_ratios(base.samples_s, new.samples_s, bootstrap=bootstrap, seed=seed), False
    center = math.log(max(new.median_s, 1e-15) / max(base.median_s, 1e-15))
    rng = np.random.default_rng(seed)
    return center + approx_log_ratio_sd(base, new) * rng.standard_normal(bootstrap), True


def mann_whitney_p(base_s: Sequence[float], new_s: Sequence[float]) -> float | None:
    """Two-sided Mann-Whitney U p-value; None with fewer than two samples on a side.
    Identical samples on both sides give 1."""
    if len(base_s) < 2 or len(new_s) < 2:
        return None
    base = np.asarray(base_s, dtype=float)
    new = np.asarray(new_s, dtype=float)
    if np.all(base == base[0]) and np.all(new == base[0]):
        return 1.0
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(new, base, alternative="two-sided").pvalue)


def change(ratio: float) -> float:
    """Size of a change as a fraction, the same both ways: ``max(r, 1/r) - 1``."""
    return max(ratio, 1.0 / ratio) - 1.0


def verdict(
    ratio: float,
    *,
    significant: bool,
    threshold: float = THRESHOLD,
) -> str:
    """faster / slower when the difference is significant and at least ``threshold``."""
    if not significant:
        return NOISE
    if change(ratio) < threshold:
        return BELOW_THRESHOLD
    return FASTER if ratio < 1 else SLOWER


def _interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(draws, [tail, 100.0 - tail])
    return float(low), float(high)


def _side(m: Measured) -> SideStats:
    return SideStats(m.median_s, m.q1_s, m.q3_s, m.n)


def compare_pair(
    base: Measured,
    new: Measured,
    *,
    alpha: float = ALPHA,
    threshold: float = THRESHOLD,
    confidence: float = CONFIDENCE,
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
) -> tuple[CompareRow, np.ndarray]:
    """One row present in both runs, and its draws of ``log(new/base)``."""
    draws, approximate = log_ratio_draws(base, new, bootstrap=bootstrap, seed=seed)
    log_ratio = math.log(max(new.median_s, 1e-15) / max(base.median_s, 1e-15))
    low, high = _interval(draws, confidence)
    p = None if approximate else mann_whitney_p(base.samples_s, new.samples_s)
    # one sample on a side says nothing about the noise: never "significant" then
    significant = (p < alpha) if p is not None else (approximate and (low > 0 or high < 0))
    ratio = math.exp(log_ratio)
    row = CompareRow(
        key=base.key,
        label=base.label,
        detail=base.detail,
        group=base.group,
        base=_side(base),
        new=_side(new),
        ratio=ratio,
        ratio_low=math.exp(low),
        ratio_high=math.exp(high),
        speedup=1.0 / ratio,
        p_value=p,
        verdict=verdict(ratio, significant=significant, threshold=threshold),
        approximate=approximate,
        shapes=base.shapes,
    )
    return row, draws


def _unique(rows: Sequence[Measured]) -> list[Measured]:
    """Repeated keys get ``#2``, ``#3``… in order, so matching never drops a row."""
    seen: dict[str, int] = {}
    out = []
    for m in rows:
        seen[m.key] = seen.get(m.key, 0) + 1
        out.append(m if seen[m.key] == 1 else replace(m, key=f"{m.key} #{seen[m.key]}"))
    return out


def compare_rows(
    base: Sequence[Measured],
    new: Sequence[Measured],
    *,
    alpha: float = ALPHA,
    threshold: float = THRESHOLD,
    confidence: float = CONFIDENCE,
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
) -> tuple[list[CompareRow], dict[str, np.ndarray]]:
    """Match rows by key: rows in both runs compared (base order, then rows only in NEW);
    returns the rows and each matched row's draws of ``log(new/base)``."""
    _validate(alpha, threshold, confidence, bootstrap)
    base, new = _unique(base), _unique(new)
    new_by_key = {m.key: m for m in new}
    base_keys = {m.key for m in base}
    rows: list[CompareRow] = []
    draws: dict[str, np.ndarray] = {}
    for i, b in enumerate(base):
        n = new_by_key.get(b.key)
        if n is None:
            rows.append(
                CompareRow(
                    b.key, b.label, b.detail, b.group, _side(b), None, verdict=ONLY_BASE, shapes=b.shapes
                )
            )
            continue
        row, d = compare_pair(
            b, n, alpha=alpha, threshold=threshold, confidence=confidence, bootstrap=bootstrap, seed=seed + i
        )
        rows.append(row)
        draws[b.key] = d
    for n in new:
        if n.key not in base_keys:
            rows.append(
                CompareRow(
                    n.key, n.label, n.detail, n.group, None, _side(n), verdict=ONLY_NEW, shapes=n.shapes
                )
            )
    return rows, draws


def headline_from_draws(
    what: str,
    log_speedup: float,
    draws_log_speedup: np.ndarray,
    *,
    threshold: float,
    confidence: float,
    p_value: float | None,
    alpha: float,
    approximate: bool,
    cases: int = 1,
) -> Headline:
    """Speedup ``exp(log_speedup)`` with the standard error and interval of its draws."""
    speedups = np.exp(draws_log_speedup)
    low, high = _interval(draws_log_speedup, confidence)
    significant = (p_value < alpha) if p_value is not None else (low > 0 or high < 0)
    speedup = math.exp(log_speedup)
    return Headline(
        what=what,
        speedup=speedup,
        speedup_std=float(np.std(speedups, ddof=1)),
        low=math.exp(low),
        high=math.exp(high),
        verdict=verdict(1.0 / speedup, significant=significant, threshold=threshold),
        p_value=p_value,
        approximate=approximate,
        cases=cases,
    )


def geometric_mean_headline(
    rows: Sequence[CompareRow],
    draws: dict[str, np.ndarray],
    *,
    alpha: float = ALPHA,
    threshold: float = THRESHOLD,
    confidence: float = CONFIDENCE,
) -> Headline:
    """Geometric mean of the per-case speedups over the cases in both runs; its draws are
    the per-replicate means of the cases' independent bootstrap draws."""
    matched = [r for r in rows if r.speedup is not None]
    if not matched:
        raise InvalidInput("BASE/NEW", "no common cases", "the two runs share no measured case")
    log_speedup = float(np.mean([math.log(r.speedup) for r in matched]))  # type: ignore[arg-type]
    stacked = -np.mean(np.stack([draws[r.key] for r in matched]), axis=0)
    return headline_from_draws(
        f"geometric mean over {len(matched)} cases",
        log_speedup,
        stacked,
        threshold=threshold,
        confidence=confidence,
        p_value=None,
        alpha=alpha,
        approximate=any(r.approximate for r in matched),
        cases=len(matched),
    )


def pair_headline(
    what: str,
    base: Measured,
    new: Measured,
    *,
    alpha: float = ALPHA,
    threshold: float = THRESHOLD,
    confidence: float = CONFIDENCE,
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
) -> Headline:
    """The headline of one timed quantity (a profile's step time)."""
    row, draws = compare_pair(
        base, new, alpha=alpha, threshold=threshold, confidence=confidence, bootstrap=bootstrap, seed=seed
    )
    headline = headline_from_draws(
        what,
        -math.log(row.ratio),  # type: ignore[arg-type]
        -draws,
        threshold=threshold,
        confidence=confidence,
        p_value=row.p_value,
        alpha=alpha,
        approximate=row.approximate,
    )
    return replace(headline, base_s=base.median_s, new_s=new.median_s)


# ----------------------------------------------------------------------------- results


PROFILE_IDENTITY = ("model", "mode", "batch", "seq_len", "context", "new_tokens", "dtype", "device_name")
KERNELS_IDENTITY = ("suite", "dtype", "device_name")
COMPARABLE = ("profile", "kernels")


def differences(kind: str, base: Any, new: Any) -> list[str]:
    """What makes two results of ``kind`` not the same experiment, e.g.
    ``dtype (float32 vs bfloat16)``."""
    fields = PROFILE_IDENTITY if kind == "profile" else KERNELS_IDENTITY
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
    label: str = "",
    detail: str = "",
    group: str = "",
    shapes: tuple[tuple[int, ...], ...] = (),
) -> Measured:
    if samples:
        return Measured.from_samples(key, samples, label=label, detail=detail, group=group, shapes=shapes)
    return Measured(key, label or key, detail, group, (), median_s, q1_s, q3_s, n, shapes)


def profile_rows(result: Any) -> tuple[Measured, list[Measured], list[Measured]]:
    """(step, operators, categories) of a profile. An operator's samples are its per-step
    totals over the repetitions; without samples its summed median stands alone."""
    step = result.step
    step_m = _measured(
        "step", step.samples_s, step.median_s, step.q1_s, step.q3_s, len(step.samples_s) or result.reps
    )
    ops = [
        _measured(
            f"{o.name} [{_shapes(o.shapes)}] {o.dtype}",
            o.time_samples_s,
            o.time_s,
            o.time_s,
            o.time_s,
            result.reps,
            label=o.name,
            detail=_shapes(o.shapes),
            group=o.category,
            shapes=tuple(tuple(int(d) for d in shape) for shape in o.shapes),
        )
        for o in result.ops
    ]
    categories = [
        _measured(
            c.category,
            c.time_samples_s,
            c.time_s,
            c.time_s,
            c.time_s,
            result.reps,
            label=c.category,
            group="category",
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
                label=row.name,
                detail=row.label,
                group=row.family,
            )
        )
    return out


def _profile_subject(r: Any) -> str:
    if r.mode == "decode":
        shape = f"batch {r.batch}, decode over {r.context} cached tokens"
    elif r.mode == "generate":
        shape = f"batch {r.batch}, prompt {r.seq_len}, {r.new_tokens} new tokens"
    else:
        shape = f"batch {r.batch} × {r.seq_len} tokens"
    return f"{r.model} {r.mode} ({shape}), {r.dtype} on {r.device_name}"


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
) -> CompareResult:
    """Compare two profiles or two kernel-suite runs (see the module docstring). Different
    kinds are refused; different experiments (model, shapes, dtype, device; or suite,
    dtype, device) unless ``force``."""
    kind_base, kind_new = base.KIND, new.KIND
    if kind_base not in COMPARABLE:
        raise InvalidInput(
            "BASE", base_name, f"is a {kind_base} result; compare works on two profile or two kernels results"
        )
    if kind_base != kind_new:
        raise InvalidInput(
            "NEW",
            new_name,
            f"is a {kind_new} result but BASE is a {kind_base} result; compare needs the same kind",
        )
    _validate(alpha, threshold, confidence, bootstrap)
    diff = differences(kind_base, base, new)
    if diff and not force:
        raise InvalidInput(
            "NEW", new_name, f"differs from BASE in {', '.join(diff)}; pass --force to compare anyway"
        )
    opts = {"alpha": alpha, "threshold": threshold, "confidence": confidence, "bootstrap": bootstrap}
    notes: list[str] = []
    categories: list[CompareRow] = []
    if kind_base == "profile":
        step_b, ops_b, cats_b = profile_rows(base)
        step_n, ops_n, cats_n = profile_rows(new)
        rows, _ = compare_rows(ops_b, ops_n, seed=seed + 1, **opts)
        categories, _ = compare_rows(cats_b, cats_n, seed=seed + 100_000, **opts)
        headline = pair_headline("median step time", step_b, step_n, seed=seed, **opts)
        subject = _profile_subject(base)
        notes.append(
            "Operator rows: the per-step total of each operator/shape group over the repetitions "
            "(sum over its calls), so medians can differ slightly from the profile's sum of per-call medians."
        )
    else:
        rows, draws = compare_rows(kernel_rows(base), kernel_rows(new), seed=seed + 1, **opts)
        headline = geometric_mean_headline(
            rows, draws, alpha=alpha, threshold=threshold, confidence=confidence
        )
        subject = f"kernel suite {base.suite}, {base.dtype} on {base.device_name}"
    if any(r.approximate for r in [*rows, *categories]) or headline.approximate:
        notes.append(
            "Rows marked ~ have no repetition samples: their interval is approximate (normal "
            "approximation from the median and IQR; none when no spread was saved) and their verdict "
            "uses it instead of the U test."
        )
    return CompareResult(
        compared=kind_base,
        base_name=base_name,
        new_name=new_name,
        subject=subject,
        headline=headline,
        rows=tuple(rows),
        categories=tuple(categories),
        seed=seed,
        differences=tuple(diff),
        notes=tuple(notes),
        **opts,
    )
