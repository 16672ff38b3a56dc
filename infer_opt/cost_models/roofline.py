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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from infer_opt.errors import InvalidInput
from infer_opt.results import Result

#: residual scale of the soft-L1 loss, in log units: ~10% relative error counts as an inlier
LOSS_SCALE = 0.1
#: how far (×/÷) the fitted ceilings may wander from the envelope
CEILING_RANGE = 100.0
#: the kernel-suite families that define the ceilings (the best a device does on plain
#: matmuls, streaming copies and empty launches); other kernels are measured against them
CEILING_FAMILIES = ("matmul", "elementwise", "launch")
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
) -> RooflineFit:
    """Fit ``t ≈ t0 + max(F/R, Q/b)`` to measured kernels (see the module docstring).

    ``fit_families`` restricts the points the parameters are fitted to (e.g.
    :data:`CEILING_FAMILIES`, so a slow softmax measures its distance to the roofline instead
    of dragging R down); every kernel is still predicted, labelled and in the table.
    ``median_abs_rel_error`` is over the fitted kernels, ``median_abs_rel_error_all`` over
    all. ``R`` is left out (infinite) when no fitted kernel does FLOPs, ``b`` when none moves
    bytes. ``bootstrap`` resamples (0 to skip) give the intervals; the same ``seed`` gives
    the same intervals."""
    _validate(points)
    families = tuple(dict.fromkeys(fit_families)) if fit_families else ()
    chosen = [p for p in points if not families or p.family in families]
    if len(chosen) < 3:
        raise InvalidInput(
            "--fit-on", ",".join(families), f"only {len(chosen)} kernels in these families; need at least 3"
        )
    flops = np.array([p.flops for p in chosen], dtype=float)
    nbytes = np.array([p.bytes for p in chosen], dtype=float)
    times = np.array([p.time_s for p in chosen], dtype=float)
    data = _Data(flops, nbytes, np.log(times), bool(np.any(flops > 0)), bool(np.any(nbytes > 0)))

    envelope_r = float(max(p.flops / p.time_s for p in points))
    envelope_b = float(max(p.bytes / p.time_s for p in points))
    fit_r0 = float(np.max(flops / times))
    fit_b0 = float(np.max(nbytes / times))
    t_min = float(np.min(times))
    low, high, base = [], [], []
    if data.fit_r:
        base.append(math.log(fit_r0))
        low.append(base[-1] - math.log(CEILING_RANGE))
        high.append(base[-1] + math.log(CEILING_RANGE))
    if data.fit_b:
        base.append(math.log(fit_b0))
        low.append(base[-1] - math.log(CEILING_RANGE))
        high.append(base[-1] + math.log(CEILING_RANGE))
    low.append(math.log(t_min * 1e-6))
    high.append(math.log(t_min * 2.0))
    bounds = (np.array(low), np.array(high))
    starts = [np.array([*base, math.log(t_min * frac)]) for frac in (0.5, 0.05)]
    ones = np.ones_like(times)
    sol = _solve(data, starts, bounds, ones)
    theta = sol.x

    log_r, log_b, log_t0 = _unpack(theta, data)
    rate, bandwidth, t0 = math.exp(log_r), math.exp(log_b), math.exp(log_t0)
    names = [n for n, free in (("R", data.fit_r), ("b", data.fit_b), ("t0", True)) if free]
    at_bound = tuple(
        name
        for name, value, lo, hi in zip(names, theta, bounds[0], bounds[1], strict=True)
        if min(value - lo, hi - value) < 1e-3
    )

    intervals: list[tuple[float, float] | None] = [None, None, None]
    done = 0
    if bootstrap > 0:
        rng = np.random.default_rng(seed)
        n = len(chosen)
        draws = []
        for counts in rng.multinomial(n, np.full(n, 1.0 / n), size=bootstrap):
            boot = _solve(data, [theta], bounds, np.sqrt(counts.astype(float)))
            if boot is not None and boot.success:
                draws.append(_unpack(boot.x, data))
        done = len(draws)
        if done >= 10:
            arr = np.exp(np.array(draws, dtype=float))
            free = (data.fit_r, data.fit_b, True)
            for i in range(3):
                if free[i]:
                    lo, hi = np.percentile(arr[:, i], [2.5, 97.5])
                    intervals[i] = (float(lo), float(hi))

    fit = RooflineFit(
        compute_rate_flops=rate,
        bandwidth_bytes_per_s=bandwidth,
        launch_overhead_s=t0,
        median_abs_rel_error=0.0,
        compute_rate_interval=intervals[0],
        bandwidth_interval=intervals[1],
        launch_overhead_interval=intervals[2],
        envelope_flops=envelope_r,
        envelope_bytes_per_s=envelope_b,
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
    )
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


def with_datasheet(
    fit: RooflineFit, *, flops: float | None = None, bytes_per_s: float | None = None
) -> RooflineFit:
    """The fit with datasheet peaks attached for display (they are never fitted)."""
    return replace(fit, datasheet_flops=flops, datasheet_bytes_per_s=bytes_per_s)


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
