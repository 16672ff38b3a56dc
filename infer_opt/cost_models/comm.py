"""Collective communication and tensor parallelism: the α-β model.

A collective moving a message of ``S`` bytes takes

    t(S) ≈ α + S/β

with ``α`` the latency (s) and ``β`` the bandwidth (bytes/s); latency dominates below the
crossover ``S* = α·β``. A collective completes when its slowest rank does, so the time of
one message size is the maximum over ranks of each rank's median.

Bandwidths, as nccl-tests reports them (``S`` is the whole buffer: the gathered output of
all_gather, the input of reduce_scatter, the whole send buffer of all_to_all):

* algorithm bandwidth ``algbw = S / t``;
* bus bandwidth ``busbw = algbw · factor(n)``: ``2(n−1)/n`` for all_reduce, ``(n−1)/n`` for
  all_gather, reduce_scatter and all_to_all, ``1`` for broadcast, reduce and send/recv — the
  rate the links themselves run at, comparable across collectives and world sizes.

The fit is robust and in log space, as the roofline's: the residual of size i is
``log t̂_i − log t_i`` (a relative error), minimised with
``scipy.optimize.least_squares(loss="soft_l1", f_scale=0.1)`` over ``log α, log β`` (so both
stay positive); intervals come from a seeded bootstrap over sizes (2.5–97.5 percentiles).

Megatron-style tensor parallelism over ``N`` ranks issues, per transformer layer, two
all_reduces of the ``B·T·d`` activations (after attention-out and after MLP-down); the
predicted step is ``max_r compute_r + Σ t(S)`` less any measured overlap, and the skew of a
measured run is ``max/median`` of the per-rank step times.

Pure: numpy at import, scipy inside the fit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results import Result, number_problems

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv")
#: what one rank alone can measure: a device-local copy of S bytes (not a collective)
LOCAL_COPY = "local_copy"
#: busbw / algbw per collective, as a function of the world size n (nccl-tests' factors)
_BUS_FACTORS = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
    LOCAL_COPY: lambda n: 1.0,
}
#: residual scale of the soft-L1 loss, in log units: ~10% relative error counts as an inlier
LOSS_SCALE = 0.1
#: how far (×/÷) the fitted bandwidth may wander from the best measured S/t
BANDWIDTH_RANGE = 100.0
#: fewest message sizes a fit of two parameters takes
MIN_FIT_POINTS = 3


def bus_factor(collective: str, world_size: int) -> float:
    """busbw / algbw for ``collective`` over ``world_size`` ranks (module docstring)."""
    if collective not in _BUS_FACTORS:
        raise InvalidInput("collective", collective, f"expected one of {', '.join(_BUS_FACTORS)}")
    if not isinstance(world_size, int) or world_size < 1:
        raise InvalidInput("world_size", world_size, "must be an integer >= 1")
    return float(_BUS_FACTORS[collective](world_size))


def algbw(n_bytes: float, time_s: float) -> float:
    """Algorithm bandwidth ``S / t`` (bytes/s)."""
    if not time_s > 0:
        raise InvalidInput("time_s", time_s, "must be > 0")
    return n_bytes / time_s


def busbw(collective: str, n_bytes: float, time_s: float, world_size: int) -> float:
    """Bus bandwidth ``algbw · factor(n)`` (bytes/s)."""
    return algbw(n_bytes, time_s) * bus_factor(collective, world_size)


# ---------------------------------------------------------------------------- one message size


@dataclass(frozen=True)
class CommPoint:
    """One message size of one collective, over all ranks."""

    bytes: int
    #: the slowest rank's median: max over ranks of each rank's median time
    time_s: float
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    #: each rank's median, in rank order
    rank_median_s: tuple[float, ...]
    #: the slowest rank's quartiles (the spread behind ``time_s``)
    q1_s: float
    q3_s: float
    slowest_rank: int
    #: samples per rank
    reps: int

    def loaded_problems(self) -> list[tuple[str, object, str]]:
        """A saved point's size and times are finite and > 0 (a file read back)."""
        out = number_problems(self, finite_positive=("bytes", "time_s", "rank_median_s"))
        return out + number_problems(self, non_negative=("q1_s", "q3_s"))


def comm_point(collective: str, n_bytes: int, rank_samples_s: Sequence[Sequence[float]]) -> CommPoint:
    """A message size's point from every rank's timing samples (outer index: rank):
    ``t = max_r median_r``, with the slowest rank's quartiles as its spread."""
    if not rank_samples_s or any(len(s) == 0 for s in rank_samples_s):
        raise InvalidInput("rank_samples_s", len(rank_samples_s), "need samples from every rank")
    medians = [float(np.median(s)) for s in rank_samples_s]
    slowest = int(np.argmax(medians))
    time_s = medians[slowest]
    q1, q3 = np.percentile(np.asarray(rank_samples_s[slowest], dtype=float), [25.0, 75.0])
    world = len(rank_samples_s)
    return CommPoint(
        bytes=int(n_bytes),
        time_s=time_s,
        algbw_bytes_per_s=algbw(n_bytes, time_s),
        busbw_bytes_per_s=busbw(collective, n_bytes, time_s, world),
        rank_median_s=tuple(medians),
        q1_s=float(q1),
        q3_s=float(q3),
        slowest_rank=slowest,
        reps=min(len(s) for s in rank_samples_s),
    )


# ---------------------------------------------------------------------------- the α-β fit


@dataclass(frozen=True)
class AlphaBetaFit:
    """Fitted ``t ≈ α + S/β`` over one collective's message sizes."""

    alpha_s: float
    beta_bytes_per_s: float
    #: S* = α·β: below it latency dominates
    crossover_bytes: float
    #: median and largest |t̂ − t|/t over the sizes
    median_abs_rel_error: float
    max_abs_rel_error: float
    n_points: int
    #: bootstrap 95% intervals (low, high); None when too few resamples succeeded
    alpha_interval: tuple[float, float] | None = None
    beta_interval: tuple[float, float] | None = None
    #: parameters that ended on the edge of their search range: the sizes do not pin them
    parameters_at_bound: tuple[str, ...] = ()
    bootstrap: int = 0
    seed: int = 0


def predict_time(alpha_s: float, beta_bytes_per_s: float, n_bytes: float) -> float:
    """``α + S/β``."""
    return alpha_s + n_bytes / beta_bytes_per_s


def _validate_points(sizes: Sequence[float], times_s: Sequence[float]) -> None:
    if len(sizes) != len(times_s):
        raise InvalidInput("times_s", len(times_s), f"need one time per size ({len(sizes)} sizes)")
    if len(sizes) < MIN_FIT_POINTS:
        raise InvalidInput(
            "sizes", len(sizes), f"need at least {MIN_FIT_POINTS} message sizes to fit α and β"
        )
    for s, t in zip(sizes, times_s, strict=True):
        if not math.isfinite(s) or s <= 0:
            raise InvalidInput("sizes", s, "message sizes must be finite and > 0 bytes")
        if not math.isfinite(t) or t <= 0:
            raise InvalidInput("times_s", t, "times must be finite and > 0")


def _residuals(theta: np.ndarray, sizes: np.ndarray, log_t: np.ndarray, weights: np.ndarray) -> np.ndarray:
    predicted = math.exp(theta[0]) + sizes * math.exp(-theta[1])
    return weights * (np.log(predicted) - log_t)


def _jacobian(theta: np.ndarray, sizes: np.ndarray, log_t: np.ndarray, weights: np.ndarray) -> np.ndarray:
    alpha = math.exp(theta[0])
    transfer = sizes * math.exp(-theta[1])
    predicted = alpha + transfer
    return (weights / predicted)[:, None] * np.stack([np.full_like(sizes, alpha), -transfer], axis=1)


def _solve(
    sizes: np.ndarray,
    log_t: np.ndarray,
    starts: Sequence[np.ndarray],
    bounds: tuple[np.ndarray, np.ndarray],
    weights: np.ndarray,
):
    from scipy.optimize import least_squares

    best = None
    for x0 in starts:
        sol = least_squares(
            _residuals,
            np.clip(x0, bounds[0] + 1e-9, bounds[1] - 1e-9),
            jac=_jacobian,
            bounds=bounds,
            loss="soft_l1",
            f_scale=LOSS_SCALE,
            args=(sizes, log_t, weights),
        )
        if best is None or sol.cost < best.cost:
            best = sol
    return best


def _bootstrap_intervals(
    sizes: np.ndarray,
    log_t: np.ndarray,
    theta: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    resamples: int,
    seed: int,
) -> tuple[list[tuple[float, float] | None], int]:
    """Percentile 2.5–97.5% intervals of α and β over ``resamples`` resamples of the sizes
    (as multinomial weights), each refitted from the full fit."""
    if resamples <= 0:
        return [None, None], 0
    rng = np.random.default_rng(seed)
    n = len(sizes)
    draws = []
    for counts in rng.multinomial(n, np.full(n, 1.0 / n), size=resamples):
        sol = _solve(sizes, log_t, [theta], bounds, np.sqrt(counts.astype(float)))
        if sol is not None and sol.success:
            draws.append(sol.x)
    if len(draws) < 10:
        return [None, None], len(draws)
    values = np.exp(np.array(draws, dtype=float))
    out: list[tuple[float, float] | None] = []
    for i in range(2):
        lo, hi = np.percentile(values[:, i], [2.5, 97.5])
        out.append((float(lo), float(hi)))
    return out, len(draws)


def fit_alpha_beta(
    sizes: Sequence[float], times_s: Sequence[float], *, bootstrap: int = 200, seed: int = 0
) -> AlphaBetaFit:
    """Fit ``t ≈ α + S/β`` to measured (size, time) pairs (module docstring). The search
    starts from α = half (and a twentieth) of the smallest time and β = the best measured
    ``S/t``; α stays within [1e-6, 2]× the smallest time and β within ×/÷100 of its start."""
    _validate_points(sizes, times_s)
    s = np.asarray(sizes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    log_t = np.log(t)
    t_min = float(t.min())
    beta0 = float(np.max(s / t))
    bounds = (
        np.array([math.log(t_min * 1e-6), math.log(beta0 / BANDWIDTH_RANGE)]),
        np.array([math.log(t_min * 2.0), math.log(beta0 * BANDWIDTH_RANGE)]),
    )
    starts = [np.array([math.log(t_min * frac), math.log(beta0)]) for frac in (0.5, 0.05)]
    sol = _solve(s, log_t, starts, bounds, np.ones_like(t))
    theta = sol.x
    at_bound = tuple(
        name
        for name, value, lo, hi in zip(("alpha", "beta"), theta, bounds[0], bounds[1], strict=True)
        if min(value - lo, hi - value) < 1e-3
    )
    intervals, done = _bootstrap_intervals(s, log_t, theta, bounds, bootstrap, seed)
    alpha, beta = math.exp(theta[0]), math.exp(theta[1])
    errors = np.abs((alpha + s / beta) - t) / t
    return AlphaBetaFit(
        alpha_s=alpha,
        beta_bytes_per_s=beta,
        crossover_bytes=alpha * beta,
        median_abs_rel_error=float(np.median(errors)),
        max_abs_rel_error=float(np.max(errors)),
        n_points=len(s),
        alpha_interval=intervals[0],
        beta_interval=intervals[1],
        parameters_at_bound=at_bound,
        bootstrap=done,
        seed=seed,
    )


# ---------------------------------------------------------------------------- the result


@dataclass(frozen=True)
class CollectiveSweep:
    """One collective over its message sizes, and its α-β fit (the fit fields are ``None``
    with fewer than :data:`MIN_FIT_POINTS` sizes)."""

    collective: str
    #: busbw / algbw at this world size
    bus_factor: float
    points: tuple[CommPoint, ...]
    alpha_s: float | None = None
    beta_bytes_per_s: float | None = None
    #: S* = α·β: below it latency dominates
    crossover_bytes: float | None = None
    alpha_interval: tuple[float, float] | None = None
    beta_interval: tuple[float, float] | None = None
    #: median and largest |t̂ − t|/t over the sizes
    fit_median_abs_rel_error: float | None = None
    fit_max_abs_rel_error: float | None = None
    #: fit parameters on the edge of their search range (the sizes do not pin them)
    parameters_at_bound: tuple[str, ...] = ()

    def loaded_problems(self) -> list[tuple[str, object, str]]:
        """What a saved sweep may not hold: α < 0 or β <= 0, or a fit its own points contradict
        — α above twice the smallest measured time, β beyond ×/÷:data:`BANDWIDTH_RANGE` of the
        best measured S/t (the fit's own search range: :func:`fit_alpha_beta`)."""
        out = number_problems(self, non_negative=("alpha_s",), finite_positive=("beta_bytes_per_s",))
        points = [p for p in self.points if p.time_s > 0 and math.isfinite(p.time_s)]
        if out or not points:
            return out
        t_min = min(p.time_s for p in points)
        best = max(p.bytes / p.time_s for p in points)
        slack = 1 + 1e-6
        if self.alpha_s is not None and self.alpha_s > 2 * t_min * slack:
            allowed = f"must be at most twice the sweep's smallest time ({t_min:.3g} s)"
            out.append(("alpha_s", self.alpha_s, allowed))
        beta = self.beta_bytes_per_s
        if beta is not None and not best / BANDWIDTH_RANGE / slack <= beta <= best * BANDWIDTH_RANGE * slack:
            allowed = f"must be within ×/÷{BANDWIDTH_RANGE:g} of the best measured S/t ({best:.3g} B/s)"
            out.append(("beta_bytes_per_s", beta, allowed))
        return out

    def predict_s(self, n_bytes: float) -> float | None:
        """``α + S/β`` from this sweep's fit (None without one)."""
        if self.alpha_s is None or self.beta_bytes_per_s is None:
            return None
        return predict_time(self.alpha_s, self.beta_bytes_per_s, n_bytes)


def sweep(
    collective: str, world_size: int, points: Sequence[CommPoint], *, bootstrap: int = 200
) -> CollectiveSweep:
    """A collective's points with their α-β fit (none below :data:`MIN_FIT_POINTS` sizes)."""
    factor = bus_factor(collective, world_size)
    if len(points) < MIN_FIT_POINTS:
        return CollectiveSweep(collective, factor, tuple(points))
    fit = fit_alpha_beta([p.bytes for p in points], [p.time_s for p in points], bootstrap=bootstrap)
    return CollectiveSweep(
        collective=collective,
        bus_factor=factor,
        points=tuple(points),
        alpha_s=fit.alpha_s,
        beta_bytes_per_s=fit.beta_bytes_per_s,
        crossover_bytes=fit.crossover_bytes,
        alpha_interval=fit.alpha_interval,
        beta_interval=fit.beta_interval,
        fit_median_abs_rel_error=fit.median_abs_rel_error,
        fit_max_abs_rel_error=fit.max_abs_rel_error,
        parameters_at_bound=fit.parameters_at_bound,
    )


@dataclass(frozen=True)
class CommResult(Result):
    """Collective times over message sizes, per collective, with their α-β fits."""

    KIND = "comm"

    world_size: int
    backend: str
    device: str
    device_name: str
    dtype: str
    collectives: tuple[CollectiveSweep, ...]
    #: nodes taking part (from torchrun's environment; 1 when unknown)
    nnodes: int = 1
    #: the cache key of the device model and dtype (profilers.device.device_key)
    device_key: str = ""
    warmup: int = 0
    reps: int = 0
    #: False when the sweep stopped early (interrupted or a rank failed): what was measured
    complete: bool = True
    warnings: tuple[Notice, ...] = field(default_factory=tuple)
    #: the points measured over every collective, derived when built
    point_count: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "point_count", sum(len(s.points) for s in self.collectives))

    def collective(self, name: str) -> CollectiveSweep | None:
        """The sweep of collective ``name``, if measured."""
        return next((c for c in self.collectives if c.collective == name), None)


# ---------------------------------------------------------------------------- tensor parallelism


@dataclass(frozen=True)
class CollectiveCall:
    """``count`` calls of ``collective`` on messages of ``bytes`` bytes in one step."""

    collective: str
    bytes: int
    count: int


def tp_collectives(
    *, n_layers: int, d_model: int, batch: int, q_len: int, dtype_bytes: int, tp: int
) -> tuple[CollectiveCall, ...]:
    """The collectives one step of a Megatron-sharded decoder issues per rank: two
    all_reduces per layer of ``B·Tq·d·elem`` bytes (``Tq`` = 1 in a decode step); none at
    ``tp = 1``."""
    for name, value in (
        ("n_layers", n_layers),
        ("d_model", d_model),
        ("batch", batch),
        ("q_len", q_len),
        ("dtype_bytes", dtype_bytes),
        ("tp", tp),
    ):
        if not isinstance(value, int) or value < 1:
            raise InvalidInput(name, value, "must be an integer >= 1")
    if tp == 1:
        return ()
    return (CollectiveCall("all_reduce", batch * q_len * d_model * dtype_bytes, 2 * n_layers),)


def step_collectives(
    *,
    n_layers: int,
    d_model: int,
    batch: int,
    mode: str,
    seq_len: int,
    new_tokens: int,
    dtype_bytes: int,
    tp: int,
) -> tuple[CollectiveCall, ...]:
    """The collectives of one profiled step (:func:`tp_collectives` per forward): a prefill of
    ``seq_len`` tokens, one decode token, or a generation — the prompt's prefill and
    ``new_tokens − 1`` decode steps."""
    shape = {"n_layers": n_layers, "d_model": d_model, "batch": batch, "dtype_bytes": dtype_bytes, "tp": tp}
    if mode == "prefill":
        return tp_collectives(q_len=seq_len, **shape)
    if mode == "decode":
        return tp_collectives(q_len=1, **shape)
    if mode != "generate":
        raise InvalidInput("mode", mode, "expected prefill, decode or generate")
    if not isinstance(new_tokens, int) or new_tokens < 1:
        raise InvalidInput("new_tokens", new_tokens, "must be an integer >= 1")
    calls = list(tp_collectives(q_len=seq_len, **shape))
    calls += [
        CollectiveCall(c.collective, c.bytes, c.count * (new_tokens - 1))
        for c in tp_collectives(q_len=1, **shape)
        if new_tokens > 1
    ]
    return tuple(calls)


def fits_of(result: CommResult) -> dict[str, tuple[float, float]]:
    """``{collective: (α, β)}`` for every collective of ``result`` with a fit."""
    return {
        c.collective: (c.alpha_s, c.beta_bytes_per_s)
        for c in result.collectives
        if c.alpha_s is not None and c.beta_bytes_per_s is not None
    }


@dataclass(frozen=True)
class PredictedCollective:
    collective: str
    bytes: int
    count: int
    #: α + S/β for one call
    time_each_s: float
    total_s: float


@dataclass(frozen=True)
class TPPrediction:
    """Predicted tensor-parallel step: ``max_r compute_r + Σ t(S) − overlap``."""

    world_size: int
    step_s: float
    #: max over ranks of the predicted compute
    compute_s: float
    compute_per_rank_s: tuple[float, ...]
    #: the rank with the most compute: the one every collective waits for
    straggler_rank: int
    communication_s: float
    overlap_s: float
    collectives: tuple[PredictedCollective, ...]
    #: the single-device step the speedup is taken against (None: not given)
    baseline_step_s: float | None = None
    #: baseline / step
    speedup: float | None = None


def predict_tp_step(
    compute_per_rank_s: Sequence[float],
    calls: Sequence[CollectiveCall],
    fits: Mapping[str, tuple[float, float]],
    *,
    baseline_step_s: float | None = None,
    overlap_s: float = 0.0,
) -> TPPrediction:
    """``max_r compute_r + Σ_calls count·(α + S/β) − overlap``. ``fits`` maps a
    collective to its ``(α, β)``; ``baseline_step_s`` (the step on one device) gives the
    speedup ``baseline / step``."""
    if not compute_per_rank_s:
        raise InvalidInput("compute_per_rank_s", 0, "need the predicted compute of at least one rank")
    for value in compute_per_rank_s:
        if not math.isfinite(value) or value < 0:
            raise InvalidInput("compute_per_rank_s", value, "must be finite and >= 0")
    if not math.isfinite(overlap_s) or overlap_s < 0:
        raise InvalidInput("overlap_s", overlap_s, "must be finite and >= 0")
    predicted = []
    for call in calls:
        if call.collective not in fits:
            raise InvalidInput(
                "fits", call.collective, f"no α-β fit for {call.collective}; measure it with infer-opt comm"
            )
        alpha, beta = fits[call.collective]
        each = predict_time(alpha, beta, call.bytes)
        total = each * call.count
        predicted.append(PredictedCollective(call.collective, call.bytes, call.count, each, total))
    compute = max(compute_per_rank_s)
    communication = math.fsum(p.total_s for p in predicted)
    step = max(compute, compute + communication - overlap_s)
    if baseline_step_s is not None and (not math.isfinite(baseline_step_s) or baseline_step_s <= 0):
        raise InvalidInput("baseline_step_s", baseline_step_s, "must be finite and > 0")
    return TPPrediction(
        world_size=len(compute_per_rank_s),
        step_s=step,
        compute_s=compute,
        compute_per_rank_s=tuple(float(c) for c in compute_per_rank_s),
        straggler_rank=int(np.argmax(compute_per_rank_s)),
        communication_s=communication,
        overlap_s=overlap_s,
        collectives=tuple(predicted),
        baseline_step_s=baseline_step_s,
        speedup=baseline_step_s / step if baseline_step_s is not None and step > 0 else None,
    )


def skew(step_times_s: Sequence[float]) -> float:
    """``max / median`` of the per-rank step times (1 = perfectly balanced)."""
    if not step_times_s:
        raise InvalidInput("step_times_s", 0, "need at least one rank's step time")
    values = np.asarray(step_times_s, dtype=float)
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise InvalidInput("step_times_s", list(step_times_s), "step times must be finite and > 0")
    return float(values.max() / np.median(values))


def straggler(times_s: Sequence[float]) -> int:
    """The rank with the largest time (the lowest such rank on a tie)."""
    if not times_s:
        raise InvalidInput("times_s", 0, "need at least one rank's time")
    return int(np.argmax(np.asarray(times_s, dtype=float)))


def fit_curve(sweep: CollectiveSweep, n: int = 128) -> tuple[np.ndarray, np.ndarray] | None:
    """``(sizes, α + S/β)`` over the sweep's size range on a log grid, for plotting (None
    without a fit)."""
    if sweep.alpha_s is None or sweep.beta_bytes_per_s is None or not sweep.points:
        return None
    sizes = np.geomspace(min(p.bytes for p in sweep.points), max(p.bytes for p in sweep.points), n)
    return sizes, sweep.alpha_s + sizes / sweep.beta_bytes_per_s
