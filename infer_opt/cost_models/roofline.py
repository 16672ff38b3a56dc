"""The device's empirical roofline, fitted from measured kernels.

Model: a kernel doing ``F`` FLOPs and moving at least ``Q`` bytes takes

    t ≈ t0 + max(F/R, Q/b)

with ``R`` the effective compute rate (FLOP/s), ``b`` the effective bandwidth (bytes/s)
and ``t0`` the launch/dispatch floor (s). ``max(F/R, Q/b)`` alone is a simplified lower
bound, not a latency prediction; ``t0`` is what a launch, the host and synchronisation add
to every kernel.

The fit is robust and in log space: the residual of kernel i is
``log t̂_i - log t_i`` (a relative error, so a 2 µs kernel counts as much as a 2 s one),
minimised with ``scipy.optimize.least_squares(loss="soft_l1", f_scale=0.1)`` so a few
noisy or odd kernels (a cache-resident copy, a slow fallback) don't drag the ceilings.
The parameters are ``log R, log b, log t0`` so they stay positive; the starting point is
the envelope (best achieved FLOP/s and bytes/s) and half the smallest time. Intervals
come from a seeded bootstrap over kernels (percentile 2.5–97.5%).

Pure: numpy at import, scipy inside the functions that need it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results import Result
from infer_opt.run_key import RunKey

#: residual scale of the soft-L1 loss, in log units: ~10% relative error counts as an inlier
LOSS_SCALE = 0.1
#: how far (×/÷) the fitted ceilings may wander from the envelope
CEILING_RANGE = 100.0
#: the kernel-suite families that define the ceilings (the best a device does on plain
#: matmuls, streaming copies and empty launches); other kernels are measured against them
CEILING_FAMILIES = ("matmul", "elementwise", "launch")
#: a fit whose median |t̂ − t|/t over its fitted kernels exceeds this is neither cached nor used
MAX_MEDIAN_FIT_ERROR = 0.35
#: a fitted kernel may beat the fitted R or b by this much (timing noise) before the fit
#: contradicts its own data: t = t0 + max(F/R, Q/b) allows no kernel above R or b at all
CONTRADICTION_SLACK = 1.5
#: a fit needs at least this many fitted kernels to be cached or used (an interrupted sweep has fewer)
MIN_FIT_KERNELS = 6
#: tick-quantized timings (a loaded machine's scheduler quantum; :func:`tick_plateaus`)
TICK_MIN_S = 1e-3
TICK_REL_TOL = 0.05
TICK_MIN_KERNELS = 3
TICK_WORK_SPAN = 4.0
TICK_MAX_MULTIPLE = 4
#: fitted kernels a suite-made fit needs per ceiling family (R from matmuls, b from streaming
#: kernels, t0 from launch-bound ones)
FAMILY_MINIMUM = {"matmul": 2, "elementwise": 2, "launch": 1}
#: the timings a fit may have for ``profile`` to place operators against it, per device kind.
#: CPU op times are wall time with warm caches. CUDA op times are kernel durations (CUPTI), so
#: the fit must time the device without the host's launch gaps: a flush enqueued before each
#: sample keeps the GPU busy while the sample is enqueued, and a graph replay has no launches;
#: unflushed eager events time tiny kernels at the host's launch rate (t0 ≈ 5 µs against
#: kernels of 1-2 µs, efficiencies above 100%). The first is what a calibration uses.
PROFILE_TIMINGS = {
    "cpu": ("cpu-clock",),
    "cuda": ("cuda-graph-flushed", "cuda-events-flushed", "cuda-graph"),
}
BOUND_COMPUTE = "compute"
BOUND_BANDWIDTH = "bandwidth"
BOUND_LAUNCH = "launch"


@dataclass(frozen=True)
class KernelPoint:
    """One measured kernel: FLOPs, minimum bytes moved and the measured (median) time."""

    name: str
    family: str
    flops: float
    bytes: float
    time_s: float


@dataclass(frozen=True)
class KernelFit:
    """A kernel against the fitted roofline."""

    name: str
    family: str
    flops: float
    bytes: float
    time_s: float
    predicted_s: float
    #: measured / predicted (above 1: slower than the model says)
    ratio: float
    bound: str
    #: predicted / measured — how close the kernel runs to its roofline time
    efficiency: float
    #: F/Q in FLOP/byte (None when Q = 0)
    intensity: float | None
    achieved_flops_per_s: float
    achieved_bytes_per_s: float
    #: whether this kernel was one of the points the parameters were fitted to
    fitted: bool = True


@dataclass(frozen=True)
class RooflineFit(Result):
    """Fitted ``t ≈ t0 + max(F/R, Q/b)`` for one device and dtype."""

    KIND = "roofline"

    compute_rate_flops: float
    bandwidth_bytes_per_s: float
    launch_overhead_s: float
    median_abs_rel_error: float
    #: bootstrap 95% intervals (low, high); None when too few resamples succeeded
    compute_rate_interval: tuple[float, float] | None = None
    bandwidth_interval: tuple[float, float] | None = None
    launch_overhead_interval: tuple[float, float] | None = None
    #: best achieved FLOP/s and bytes/s over the kernels (measured, no model)
    envelope_flops: float = 0.0
    envelope_bytes_per_s: float = 0.0
    #: R / b in FLOP/byte: kernels above it are compute-bound
    ridge_point: float = 0.0
    max_abs_rel_error: float = 0.0
    #: median |t̂ − t|/t over every kernel, fitted or not
    median_abs_rel_error_all: float = 0.0
    #: families the parameters were fitted to (empty: every kernel)
    fit_families: tuple[str, ...] = ()
    n_points: int = 0
    n_fitted: int = 0
    #: parameters that ended on the edge of their search range: the data do not pin them
    parameters_at_bound: tuple[str, ...] = ()
    bootstrap: int = 0
    seed: int = 0
    device: str = ""
    dtype: str = ""
    device_name: str = ""
    #: the cache key of the device model and dtype (see profilers.device.device_key)
    device_key: str = ""
    #: where the points came from (a file, or "measured now")
    source: str = ""
    #: datasheet peaks given by the user, shown beside the fit — not measured
    datasheet_flops: float | None = None
    datasheet_bytes_per_s: float | None = None
    kernels: tuple[KernelFit, ...] = field(default_factory=tuple)
    #: CPU intra-op threads of the measurements (None on CUDA, or not recorded)
    threads: int | None = None
    #: what float32 matmuls computed in ("ieee", "tf32", "bf16"); "" for other dtypes or not recorded
    matmul_precision: str = ""
    #: how the kernels were timed (profilers.timing.timing_name, e.g. "cuda-graph-flushed"); "" not recorded
    timing: str = ""
    #: :func:`fit_quality`'s findings when fitted (any makes the fit unusable: neither cached nor
    #: used), and a ceiling above its datasheet figure (:func:`with_datasheet`)
    warnings: tuple[Notice, ...] = ()
    #: fitted R and b over their datasheet figures (None: no datasheet figure), derived when built
    compute_of_datasheet: float | None = field(default=None, init=False)
    bandwidth_of_datasheet: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        for name, fitted, sheet in (
            ("compute_of_datasheet", self.compute_rate_flops, self.datasheet_flops),
            ("bandwidth_of_datasheet", self.bandwidth_bytes_per_s, self.datasheet_bytes_per_s),
        ):
            object.__setattr__(self, name, None if sheet is None else fitted / sheet)


def predict_time(fit: RooflineFit, flops: float, bytes: float) -> float:
    """``t0 + max(F/R, Q/b)``."""
    return fit.launch_overhead_s + lower_bound_time(fit, flops, bytes)


def lower_bound_time(fit: RooflineFit, flops: float, bytes: float) -> float:
    """``max(F/R, Q/b)``: the roofline bound without the launch floor."""
    return max(_div(flops, fit.compute_rate_flops), _div(bytes, fit.bandwidth_bytes_per_s))


def _div(work: float, rate: float) -> float:
    return 0.0 if work == 0 else work / rate


def classify(fit: RooflineFit, flops: float, bytes: float, time_s: float) -> tuple[str, float, float]:
    """``(bound, efficiency, predicted_s)``. The bound is whichever term of the prediction
    is largest: ``launch`` when ``t0`` exceeds both ``F/R`` and ``Q/b``, else ``compute`` or
    ``bandwidth``. Efficiency is predicted / measured."""
    compute = _div(flops, fit.compute_rate_flops)
    memory = _div(bytes, fit.bandwidth_bytes_per_s)
    predicted = fit.launch_overhead_s + max(compute, memory)
    if fit.launch_overhead_s > max(compute, memory):
        bound = BOUND_LAUNCH
    elif compute >= memory:
        bound = BOUND_COMPUTE
    else:
        bound = BOUND_BANDWIDTH
    efficiency = predicted / time_s if time_s > 0 else math.inf
    return bound, efficiency, predicted


# ---------------------------------------------------------------------------- fitting


@dataclass(frozen=True)
class _Data:
    flops: np.ndarray
    bytes: np.ndarray
    log_t: np.ndarray
    fit_r: bool
    fit_b: bool


def _validate(points: Sequence[KernelPoint]) -> None:
    if len(points) < 3:
        raise InvalidInput("measurements", len(points), "need at least 3 kernels to fit R, b and t0")
    for p in points:
        for what, value in (("flops", p.flops), ("bytes", p.bytes)):
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise InvalidInput(
                    "measurements", f"{p.name} {what}={value}", f"{what} must be finite and >= 0"
                )
        if not isinstance(p.time_s, (int, float)) or not math.isfinite(p.time_s) or p.time_s <= 0:
            raise InvalidInput("measurements", f"{p.name} time_s={p.time_s}", "times must be finite and > 0")
        if p.flops == 0 and p.bytes == 0:
            raise InvalidInput("measurements", p.name, "a kernel needs flops > 0 or bytes > 0")


def _unpack(theta: np.ndarray, data: _Data) -> tuple[float, float, float]:
    i = 0
    log_r = log_b = math.inf
    if data.fit_r:
        log_r = theta[i]
        i += 1
    if data.fit_b:
        log_b = theta[i]
        i += 1
    return log_r, log_b, theta[i]


def _terms(theta: np.ndarray, data: _Data) -> tuple[np.ndarray, np.ndarray, float]:
    log_r, log_b, log_t0 = _unpack(theta, data)
    compute = data.flops * math.exp(-log_r) if data.fit_r else np.zeros_like(data.flops)
    memory = data.bytes * math.exp(-log_b) if data.fit_b else np.zeros_like(data.bytes)
    return compute, memory, math.exp(log_t0)


def _residuals(theta: np.ndarray, data: _Data, weights: np.ndarray) -> np.ndarray:
    compute, memory, t0 = _terms(theta, data)
    return weights * (np.log(t0 + np.maximum(compute, memory)) - data.log_t)


def _jacobian(theta: np.ndarray, data: _Data, weights: np.ndarray) -> np.ndarray:
    compute, memory, t0 = _terms(theta, data)
    predicted = t0 + np.maximum(compute, memory)
    compute_wins = compute >= memory
    columns = []
    if data.fit_r:
        columns.append(np.where(compute_wins, -compute, 0.0))
    if data.fit_b:
        columns.append(np.where(compute_wins, 0.0, -memory))
    columns.append(np.full_like(predicted, t0))
    return (weights / predicted)[:, None] * np.stack(columns, axis=1)


def _solve(data: _Data, starts: list[np.ndarray], bounds: tuple[np.ndarray, np.ndarray], weights: np.ndarray):
    from scipy.optimize import least_squares

    best = None
    for x0 in starts:
        x0 = np.clip(x0, bounds[0] + 1e-9, bounds[1] - 1e-9)
        sol = least_squares(
            _residuals,
            x0,
            jac=_jacobian,
            bounds=bounds,
            loss="soft_l1",
            f_scale=LOSS_SCALE,
            args=(data, weights),
            x_scale=1.0,
        )
        if best is None or sol.cost < best.cost:
            best = sol
    return best


def fit_roofline(
    points: Sequence[KernelPoint],
    *,
    bootstrap: int = 200,
    seed: int = 0,
    device: str = "",
    dtype: str = "",
    device_name: str = "",
    device_key: str = "",
    source: str = "",
    fit_families: Sequence[str] | None = None,
    threads: int | None = None,
    matmul_precision: str = "",
    timing: str = "",
) -> RooflineFit:
    """Fit ``t ≈ t0 + max(F/R, Q/b)`` to measured kernels (see the module docstring).

    ``fit_families`` restricts the points the parameters are fitted to (e.g.
    :data:`CEILING_FAMILIES`, so a slow softmax measures its distance to the roofline instead
    of dragging R down); every kernel is still predicted, labelled and in the table.
    ``median_abs_rel_error`` is over the fitted kernels, ``median_abs_rel_error_all`` over
    all. ``R`` is left out (infinite) when no fitted kernel does FLOPs, ``b`` when none moves
    bytes. ``bootstrap`` resamples (0 to skip) give the intervals; the same ``seed`` gives
    the same intervals. The fit's ``warnings`` are :func:`fit_quality`'s findings.
    ``threads``, ``matmul_precision`` and ``timing`` record how the points were measured
    (its :class:`RunKey`)."""
    _validate(points)
    families = tuple(dict.fromkeys(fit_families)) if fit_families else ()
    chosen = [p for p in points if not families or p.family in families]
    if len(chosen) < 3:
        raise InvalidInput(
            "fit_on", ",".join(families), f"only {len(chosen)} kernels in these families; need at least 3"
        )
    data = _data(chosen)
    bounds, starts = _search_space(data, chosen)
    theta = _solve(data, starts, bounds, np.ones(len(chosen))).x
    log_r, log_b, log_t0 = _unpack(theta, data)
    rate, bandwidth = math.exp(log_r), math.exp(log_b)
    names = [n for n, free in (("R", data.fit_r), ("b", data.fit_b), ("t0", True)) if free]
    at_bound = tuple(
        name
        for name, value, lo, hi in zip(names, theta, bounds[0], bounds[1], strict=True)
        if min(value - lo, hi - value) < 1e-3
    )
    intervals, done = _bootstrap(data, theta, bounds, bootstrap, seed)
    fit = RooflineFit(
        compute_rate_flops=rate,
        bandwidth_bytes_per_s=bandwidth,
        launch_overhead_s=math.exp(log_t0),
        median_abs_rel_error=0.0,
        compute_rate_interval=intervals[0],
        bandwidth_interval=intervals[1],
        launch_overhead_interval=intervals[2],
        envelope_flops=float(max(p.flops / p.time_s for p in points)),
        envelope_bytes_per_s=float(max(p.bytes / p.time_s for p in points)),
        ridge_point=rate / bandwidth if math.isfinite(rate) and math.isfinite(bandwidth) else math.inf,
        n_points=len(points),
        n_fitted=len(chosen),
        parameters_at_bound=at_bound,
        fit_families=families,
        bootstrap=done,
        seed=seed,
        device=device,
        dtype=dtype,
        device_name=device_name,
        device_key=device_key,
        source=source,
        threads=threads,
        matmul_precision=matmul_precision,
        timing=timing,
    )
    fit = _with_kernels(fit, points, families)
    return replace(fit, warnings=fit_quality(fit))


def _data(chosen: Sequence[KernelPoint]) -> _Data:
    flops = np.array([p.flops for p in chosen], dtype=float)
    nbytes = np.array([p.bytes for p in chosen], dtype=float)
    times = np.array([p.time_s for p in chosen], dtype=float)
    return _Data(flops, nbytes, np.log(times), bool(np.any(flops > 0)), bool(np.any(nbytes > 0)))


def _search_space(
    data: _Data, chosen: Sequence[KernelPoint]
) -> tuple[tuple[np.ndarray, np.ndarray], list[np.ndarray]]:
    """Bounds of ``(log R, log b, log t0)`` — the ceilings within :data:`CEILING_RANGE` of
    the best achieved rates, t0 between 1e-6 and 2 times the shortest time — and the starts
    (the envelope and t0 at half or a twentieth of the shortest time)."""
    times = np.exp(data.log_t)
    low, high, base = [], [], []
    for free, work in ((data.fit_r, data.flops), (data.fit_b, data.bytes)):
        if free:
            base.append(math.log(float(np.max(work / times))))
            low.append(base[-1] - math.log(CEILING_RANGE))
            high.append(base[-1] + math.log(CEILING_RANGE))
    t_min = float(np.min(times))
    low.append(math.log(t_min * 1e-6))
    high.append(math.log(t_min * 2.0))
    starts = [np.array([*base, math.log(t_min * frac)]) for frac in (0.5, 0.05)]
    return (np.array(low), np.array(high)), starts


def _bootstrap(
    data: _Data, theta: np.ndarray, bounds: tuple[np.ndarray, np.ndarray], resamples: int, seed: int
) -> tuple[list[tuple[float, float] | None], int]:
    """Percentile 2.5–97.5% intervals of R, b, t0 over ``resamples`` seeded resamples of
    the kernels (None where fewer than 10 succeeded, or the parameter is left out), and the
    number that succeeded."""
    intervals: list[tuple[float, float] | None] = [None, None, None]
    if resamples <= 0:
        return intervals, 0
    rng = np.random.default_rng(seed)
    n = len(data.log_t)
    draws = []
    for counts in rng.multinomial(n, np.full(n, 1.0 / n), size=resamples):
        boot = _solve(data, [theta], bounds, np.sqrt(counts.astype(float)))
        if boot is not None and boot.success:
            draws.append(_unpack(boot.x, data))
    if len(draws) >= 10:
        arr = np.exp(np.array(draws, dtype=float))
        for i, free in enumerate((data.fit_r, data.fit_b, True)):
            if free:
                lo, hi = np.percentile(arr[:, i], [2.5, 97.5])
                intervals[i] = (float(lo), float(hi))
    return intervals, len(draws)


def _with_kernels(fit: RooflineFit, points: Sequence[KernelPoint], families: tuple[str, ...]) -> RooflineFit:
    """Every kernel against the fit, and the fit errors over the fitted ones and over all."""
    kernels = tuple(replace(kernel_fit(fit, p), fitted=not families or p.family in families) for p in points)
    errors = np.array([abs(k.time_s - k.predicted_s) / k.time_s for k in kernels])
    in_fit = np.array([k.fitted for k in kernels])
    return replace(
        fit,
        kernels=kernels,
        median_abs_rel_error=float(np.median(errors[in_fit])),
        max_abs_rel_error=float(np.max(errors[in_fit])),
        median_abs_rel_error_all=float(np.median(errors)),
    )


# ---------------------------------------------------------------------------- validation


def fit_quality(fit: RooflineFit, *, max_median_error: float = MAX_MEDIAN_FIT_ERROR) -> tuple[Notice, ...]:
    """What makes a fit unfit to be cached or to judge a profile's operators, as notices:

    * ``fit_not_finite`` — R, b or t0 is not a finite number > 0 (no kernel pinned it, or a
      hand-edited file);
    * ``fit_at_search_edge`` — a parameter ended on the edge of its search range, so the data
      do not determine it (no launch-bound kernel: t0 runs to 10⁻⁶ of the shortest time);
    * ``fit_error_high`` — the median |t̂ − t|/t of the fitted kernels exceeds ``max_median_error``;
    * ``fit_too_few_kernels`` — fewer than :data:`MIN_FIT_KERNELS` fitted kernels (an
      interrupted sweep);
    * ``fit_missing_families`` — a suite-made fit without the kernels that pin R, b or t0;
    * ``fit_tick_quantized`` — :func:`tick_plateaus` found kernels stuck at one time;
    * ``fit_below_its_kernels`` — a fitted kernel achieved well above the fitted R or b.
    An empty tuple: the fit may be used."""
    out = []
    for name, value in (
        ("R", fit.compute_rate_flops),
        ("b", fit.bandwidth_bytes_per_s),
        ("t0", fit.launch_overhead_s),
    ):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            out.append(Notice("fit_not_finite", {"parameter": name, "value": value}))
    out.extend(Notice("fit_at_search_edge", {"parameter": name}) for name in fit.parameters_at_bound)
    if not fit.median_abs_rel_error <= max_median_error:
        out.append(
            Notice(
                "fit_error_high",
                {"median_abs_rel_error": fit.median_abs_rel_error, "threshold": max_median_error},
            )
        )
    if fit.n_fitted < MIN_FIT_KERNELS:
        out.append(Notice("fit_too_few_kernels", {"n_fitted": fit.n_fitted, "minimum": MIN_FIT_KERNELS}))
    missing = _missing_families(fit)
    if missing:
        out.append(Notice("fit_missing_families", {"families": missing}))
    for tick, count in tick_plateaus(fit.kernels, fit.envelope_flops, fit.envelope_bytes_per_s):
        out.append(Notice("fit_tick_quantized", {"tick_s": tick, "kernels": count}))
    out.extend(_contradictions(fit))
    return tuple(out)


def _contradictions(fit: RooflineFit) -> list[Notice]:
    """``fit_below_its_kernels``: a fitted kernel ran above :data:`CONTRADICTION_SLACK` × the
    fitted R or b (a fit made while another process loaded the machine: its slow points pulled
    the ceiling below what the fast ones achieved)."""
    fitted = [k for k in fit.kernels if k.fitted and k.time_s > 0]
    out = []
    for name, fitted_rate, achieved in (
        ("R", fit.compute_rate_flops, max((k.flops / k.time_s for k in fitted), default=0.0)),
        ("b", fit.bandwidth_bytes_per_s, max((k.bytes / k.time_s for k in fitted), default=0.0)),
    ):
        usable = isinstance(fitted_rate, (int, float)) and fitted_rate > 0
        if usable and achieved > CONTRADICTION_SLACK * fitted_rate:
            values = {"parameter": name, "fitted": float(fitted_rate), "achieved": achieved}
            out.append(Notice("fit_below_its_kernels", values))
    return out


def tick_plateaus(
    kernels: Sequence[KernelFit | KernelPoint], envelope_flops: float, envelope_bytes_per_s: float
) -> list[tuple[float, int]]:
    """``(tick, count)`` of the largest group of at least :data:`TICK_MIN_KERNELS` kernels
    taking :data:`TICK_MIN_S` and twice the fastest kernel's time or more (kernels near the
    launch floor take one time by right) whose times sit within ±:data:`TICK_REL_TOL` of 1 to
    :data:`TICK_MAX_MULTIPLE` times one tick although their work — ``max(F/R_env, Q/b_env)``
    over the best achieved rates — spans :data:`TICK_WORK_SPAN` times more than their times
    do (empty when there is none). Work that should scale but lands on multiples of a few
    milliseconds is the scheduler's time slice showing through (a loaded machine stalls
    multi-threaded kernels at 8 or 16 ms), not the device."""

    def work(k: KernelFit | KernelPoint) -> float:
        return max(_div(k.flops, envelope_flops or math.inf), _div(k.bytes, envelope_bytes_per_s or math.inf))

    # at twice the fastest kernel or more, the launch floor cannot make equal times (t0 < work)
    floor = 2 * min((k.time_s for k in kernels), default=0.0)
    slow = [(k.time_s, work(k)) for k in kernels if k.time_s >= max(TICK_MIN_S, floor) and work(k) > 0]
    ticks = {t / m for t, _ in slow for m in range(1, TICK_MAX_MULTIPLE + 1) if t / m >= TICK_MIN_S}
    best: tuple[float, int] | None = None
    for tick in sorted(ticks, reverse=True):  # equal groups: the longest tick
        members = [
            (t, w) for t, w in slow if abs(t / tick - round(t / tick)) <= TICK_REL_TOL * round(t / tick)
        ]
        members = [(t, w) for t, w in members if 1 <= round(t / tick) <= TICK_MAX_MULTIPLE]
        if len(members) < TICK_MIN_KERNELS or (best is not None and len(members) <= best[1]):
            continue
        times, works = [t for t, _ in members], [w for _, w in members]
        if max(works) / min(works) >= TICK_WORK_SPAN * max(times) / min(times):
            best = (tick, len(members))
    return [best] if best is not None else []


def _missing_families(fit: RooflineFit) -> list[str]:
    """The ceiling families a suite-made fit lacks: R needs matmuls, b streaming kernels, t0
    launch-bound ones (:data:`FAMILY_MINIMUM` fitted kernels of each). A fit of kernels with
    no suite family (a hand-made CSV) is not checked."""
    counts = Counter(k.family for k in fit.kernels if k.fitted)
    if not any(family in counts for family in CEILING_FAMILIES):
        return []
    return [family for family in CEILING_FAMILIES if counts[family] < FAMILY_MINIMUM[family]]


def key_problems(
    fit: RooflineFit, expected: RunKey, *, timings: Sequence[str] | None = None
) -> tuple[Notice, ...]:
    """``fit_mismatch`` notices for each way the fit's :class:`RunKey` differs from the run's:
    device model, dtype, CPU threads, float32 matmul precision, and a timing outside
    ``timings`` (default: the expected key's own). A fit that records neither its device nor
    its timing (an older infer-opt's) gets one ``fit_not_keyed``."""
    mine = RunKey.of(fit)
    if not mine.device_kind and not mine.timing:
        return (Notice("fit_not_keyed", {}),)
    out = [
        Notice("fit_mismatch", {"field": name, "fit": ours, "run": theirs})
        for name, ours, theirs in mine.differences(expected, ignore=("timing",))
    ]
    accepted = tuple(timings) if timings is not None else (expected.timing,)
    if mine.timing not in accepted:
        out.append(
            Notice("fit_mismatch", {"field": "timing", "fit": mine.timing, "run": " or ".join(accepted)})
        )
    return tuple(out)


def fit_problems(
    fit: RooflineFit, expected: RunKey | None = None, *, timings: Sequence[str] | None = None
) -> tuple[Notice, ...]:
    """Everything that stops ``fit`` from being saved to the cache or used for a run with key
    ``expected``: :func:`fit_quality` (recomputed: a file's own warnings are not trusted) and,
    with ``expected``, :func:`key_problems`. Empty: the fit may be used."""
    quality = fit_quality(fit)
    return quality if expected is None else quality + key_problems(fit, expected, timings=timings)


def precision_label(dtype: str, matmul_precision: str) -> str:
    """The dtype results are labelled with: ``"tf32"`` for float32 with TF32 matmuls,
    ``"float32 (bf16 matmuls)"`` where float32 matmuls may run in bfloat16, else the dtype."""
    if dtype == "float32" and matmul_precision == "tf32":
        return "tf32"
    if dtype == "float32" and matmul_precision == "bf16":
        return "float32 (bf16 matmuls)"
    return dtype


def default_fit_families(points: Sequence[KernelPoint]) -> tuple[str, ...] | None:
    """:data:`CEILING_FAMILIES` when the points include at least 3 of those kernels and
    some others (a kernel-suite run); ``None`` (fit every kernel) otherwise."""
    inside = [p for p in points if p.family in CEILING_FAMILIES]
    if len(inside) >= 3 and len(inside) < len(points):
        return tuple(f for f in CEILING_FAMILIES if any(p.family == f for p in inside))
    return None


def kernel_fit(fit: RooflineFit, point: KernelPoint) -> KernelFit:
    """One kernel against the fitted roofline: prediction, bound, efficiency."""
    bound, efficiency, predicted = classify(fit, point.flops, point.bytes, point.time_s)
    return KernelFit(
        name=point.name,
        family=point.family,
        flops=point.flops,
        bytes=point.bytes,
        time_s=point.time_s,
        predicted_s=predicted,
        ratio=point.time_s / predicted,
        bound=bound,
        efficiency=efficiency,
        intensity=point.flops / point.bytes if point.bytes > 0 else None,
        achieved_flops_per_s=point.flops / point.time_s,
        achieved_bytes_per_s=point.bytes / point.time_s,
    )


#: **the one rule for rates above a peak**, every command: a measured or fitted rate more than
#: this many times its peak is warned about (clocks above base, boost and rounding in the
#: datasheet stay within it); ``trace`` 's per-op rates, a fit against its datasheet
RATE_SLACK = 1.1
#: a fitted ceiling this far above its datasheet figure is warned about (:data:`RATE_SLACK`)
DATASHEET_SLACK = RATE_SLACK


def above_peak(rate: float, peak: float) -> bool:
    """Whether ``rate`` is above ``peak`` by more than :data:`RATE_SLACK` (the one rule); never
    for an unknown peak (0) or a rate that is not finite."""
    return peak > 0 and math.isfinite(rate) and rate > RATE_SLACK * peak


def with_datasheet(
    fit: RooflineFit, *, flops: float | None = None, bytes_per_s: float | None = None
) -> RooflineFit:
    """The fit with datasheet peaks attached for display (they are never fitted). A fitted
    ceiling more than 10% above its datasheet figure adds a ``fit_above_datasheet`` warning:
    the figure is for another precision (a float32 fit with TF32 matmuls runs far above the
    plain-fp32 peak; give the TF32 one) or the measurement is off. The margin is
    :data:`RATE_SLACK` (:func:`above_peak`, the rule every command uses)."""
    extra = [
        Notice(
            "fit_above_datasheet",
            {
                "parameter": name,
                "fitted": fitted,
                "datasheet": sheet,
                "precision": precision_label(fit.dtype, fit.matmul_precision),
            },
        )
        for name, fitted, sheet in (
            ("R", fit.compute_rate_flops, flops),
            ("b", fit.bandwidth_bytes_per_s, bytes_per_s),
        )
        if sheet and above_peak(fitted, sheet)
    ]
    return replace(
        fit, datasheet_flops=flops, datasheet_bytes_per_s=bytes_per_s, warnings=fit.warnings + tuple(extra)
    )


# ---------------------------------------------------------------------------- plot data


@dataclass(frozen=True)
class RooflineCurve:
    """What the roofline plot draws, precomputed: the attainable FLOP/s ``min(R, b·I)``
    over a grid of arithmetic intensities, and each kernel with F > 0 and Q > 0."""

    intensity: np.ndarray
    attainable: np.ndarray
    ridge_point: float
    points: tuple[KernelFit, ...]
    #: kernels that cannot sit on a FLOP/s axis (F = 0: copies) — shown elsewhere
    zero_flop: tuple[KernelFit, ...]
    datasheet_attainable: np.ndarray | None = None


def roofline_curve(fit: RooflineFit, n: int = 256) -> RooflineCurve:
    """Curve data for the classic roofline plot, spanning the kernels and the ridge."""
    points = tuple(k for k in fit.kernels if k.flops > 0 and k.bytes > 0)
    zero = tuple(k for k in fit.kernels if k.flops == 0)
    intensities = [k.intensity for k in points if k.intensity]
    ridge = fit.ridge_point if math.isfinite(fit.ridge_point) and fit.ridge_point > 0 else 1.0
    lo = min([ridge, *intensities]) / 4
    hi = max([ridge, *intensities]) * 4
    grid = np.geomspace(lo, hi, n)
    attainable = np.minimum(fit.compute_rate_flops, fit.bandwidth_bytes_per_s * grid)
    sheet = None
    if fit.datasheet_flops or fit.datasheet_bytes_per_s:
        peak_r = fit.datasheet_flops or math.inf
        peak_b = fit.datasheet_bytes_per_s or math.inf
        sheet = np.minimum(peak_r, peak_b * grid)
    return RooflineCurve(grid, attainable, fit.ridge_point, points, zero, sheet)
