"""The calibrated operator model: predicted time of one aten call and of a whole step (docs/prediction.md).

A step's predicted time is

    t̂(step) = Σ_ops t̂(op) + h,    h = c_op · Σ_i φ_i + c_mod · n_module_calls · mean φ

* **Per operator** ``t̂(op)`` comes from the device's calibration of the op's *family* (an aten
  op with its operand layout, e.g. ``gemm.nt`` = ``mm``/``addmm`` with a transposed weight as
  ``nn.Linear`` calls it), measured with its main operand hot, warm and cold; the op's own
  reuse distance (bytes touched since its main operand was last used, :func:`reuse_distances`)
  places it between those states (log-linear in the distance). An op without a main operand
  is measured hot and in *context* (after a read that pushes its code and the dispatcher's
  data out of the caches) and placed between them by its context distance (bytes touched since
  the same op last ran, :func:`context_distances`).
  Each family has a grid of measured shapes (features such as ``M, N, K``) and a fitted base
  roofline ``b(F, Q) = t0_f + max(F/R_f, Q/b_f)`` (the device roofline with per-family
  efficiencies ``R_f = η_f·R``, ``b_f = β_f·b``). What is interpolated is the residual
  ``ρ = log t − log b(F, Q)``, linearly over the log₂ features (Delaunay simplices; exact at
  every measured point), so ``t̂ = b(F, Q) · exp(ρ̂)``. A shape outside the grid's hull takes
  the residual of the nearest measured shape and is flagged *extrapolated*; a family with no
  calibration borrows a related one (:func:`fallbacks`), and an op no family covers gets the
  device roofline ``t0 + max(F/R, Q/b)`` — both flagged.
* **Host term** ``h``: what a step costs outside its operators (Python, ``nn.Module`` calls, the
  dispatcher, composite wrappers), calibrated per dispatched op and per module call in a hot
  loop; ``φ_i = Φ^{w_i}`` scales each call's share by its context (:meth:`OpModel.host_time`).
* **Uncertainty**: every family carries its cross-validated error (median |t̂ − t|/t of its
  grid points predicted with the point left out, an upper estimate for a shape between grid
  points); a step's relative band is the time-weighted mean of its ops' errors (errors of one
  family are correlated, so they are not averaged down).

Accuracy is reported, never assumed: :func:`error_stats` gives MAPE and the p90 of
``|t̂ − t| / t``.

Pure: stdlib and numpy at import; scipy inside the functions that interpolate and fit.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from infer_opt.cost_models.step_replay import StepReplay, replay
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results.calibration import (  # noqa: F401 (the state order is the op model's too)
    ORDER_TOLERANCE,
    STATE_CHAINS,
    STATES,
    CalibrationResult,
    DeviceRoofline,
    FamilyCalibration,
    GridPoint,
    HostCalibration,
    StateOrder,
    _div,
    state_order,
)
from infer_opt.results.validate import ErrorSummary
from infer_opt.stats import VARIANCE_THRESHOLD

#: a calibration whose colder states came out faster at more than this share of the shapes
#: measured in two neighbouring states is flagged (``calibration_noisy``)
ORDER_WARNING = 0.10
#: grid points held out for the cross-validated error, at most (seeded choice)
CV_POINTS = 48
#: outside a grid the residual is the median of this many nearest measured shapes ...
NEAREST_POINTS = 4
#: ... shrunk to 0 (the family's roofline alone) at this distance, in log₂ units (8× beyond)
EXTRAPOLATION_REACH = 3.0
#: relative uncertainty of an op predicted by the device roofline alone (no family)
ROOFLINE_UNCERTAINTY = 0.5
SOURCE_GRID = "grid"
SOURCE_NEAREST = "nearest"
SOURCE_FALLBACK = "fallback"
SOURCE_ROOFLINE = "roofline"


# ---------------------------------------------------------------------------- calibration data


def noise_notices(calibration: CalibrationResult) -> list[Notice]:
    """``calibration_noisy`` when the calibration's shapes repeat worse than
    :data:`~infer_opt.stats.VARIANCE_THRESHOLD` (median IQR/median) or its colder states came out
    faster at more than :data:`ORDER_WARNING` of the shapes measured in two of them: the
    machine's speed moved while it was measured, and whatever is predicted from it carries that.
    Its values hold the figures over their thresholds (None for one within it)."""
    spread, order = calibration.point_spread, calibration.out_of_order_share
    values = {
        "spread": spread if spread is not None and spread > VARIANCE_THRESHOLD else None,
        "out_of_order": order if order is not None and order > ORDER_WARNING else None,
        "tolerance": ORDER_TOLERANCE,
    }
    if values["spread"] is None and values["out_of_order"] is None:
        return []
    return [Notice("calibration_noisy", values)]


# ---------------------------------------------------------------------------- fitting a family


def fit_base(points: Sequence[GridPoint]) -> tuple[float, float, float]:
    """``(t0, R, b)`` of ``t ≈ t0 + max(F/R, Q/b)`` over a family's grid, with
    :func:`infer_opt.cost_models.roofline.fit_roofline` (robust, log space). Fewer than 3
    points (or no work at all): ``t0`` = the median time, ``R = b = ∞``."""
    from infer_opt.cost_models.roofline import KernelPoint, fit_roofline

    usable = [p for p in points if p.flops > 0 or p.bytes > 0]
    if len(usable) < 3:
        return float(np.median([p.time_s for p in points])), math.inf, math.inf
    fit = fit_roofline(
        [KernelPoint(str(i), "family", p.flops, p.bytes, p.time_s) for i, p in enumerate(usable)],
        bootstrap=0,
    )
    return fit.launch_overhead_s, fit.compute_rate_flops, fit.bandwidth_bytes_per_s


def fit_family(
    family: str,
    state: str,
    feature_names: Sequence[str],
    points: Sequence[GridPoint],
    skipped: Sequence[str] = (),
    seed: int = 0,
) -> FamilyCalibration:
    """A family's calibration from its measured points: base roofline and cross-validated error."""
    if state not in STATES:
        raise InvalidInput("state", state, f"expected one of {', '.join(STATES)}")
    if not points:
        raise InvalidInput("points", family, "a family needs at least one measured shape")
    for p in points:
        if len(p.features) != len(feature_names):
            raise InvalidInput("points", family, f"every point needs {len(feature_names)} features")
        if not (math.isfinite(p.time_s) and p.time_s > 0):
            raise InvalidInput("points", f"{family} time_s={p.time_s}", "times must be finite and > 0")
    t0, rate, bandwidth = fit_base(points)
    draft = FamilyCalibration(
        family, state, tuple(feature_names), tuple(points), t0, rate, bandwidth, None, tuple(skipped)
    )
    return replace(draft, cv_rel_error=cross_validated_error(draft, seed=seed))


def cross_validated_error(family: FamilyCalibration, *, seed: int = 0) -> float | None:
    """Median ``|t̂ − t|/t`` over a held-out set: up to :data:`CV_POINTS` grid points (at most a
    quarter of them, seeded choice), each predicted by an interpolator built on the others. Points
    held out together leave wider gaps than a shape between grid points faces, so this errs on the
    high side. ``None`` with fewer than 4 points."""
    n = len(family.points)
    if n < 4:
        return None
    rng = np.random.default_rng(seed)
    held = set(int(i) for i in rng.choice(n, size=max(1, min(CV_POINTS, n // 4)), replace=False))
    rest = replace(family, points=tuple(p for j, p in enumerate(family.points) if j not in held))
    interpolator = FamilyInterpolator(rest)
    errors = []
    for i in sorted(held):
        point = family.points[i]
        predicted, _ = interpolator.time(point.features, point.flops, point.bytes)
        errors.append(abs(predicted - point.time_s) / point.time_s)
    return float(np.median(errors))


# ---------------------------------------------------------------------------- interpolation


class FamilyInterpolator:
    """``t̂ = b(F, Q) · exp(ρ̂(log₂ features))`` for one family (module docstring). Feature
    dimensions with a single value on the grid are dropped (an op differing there is
    extrapolated)."""

    def __init__(self, family: FamilyCalibration) -> None:
        self.family = family
        raw = np.array([p.features for p in family.points], dtype=float).reshape(len(family.points), -1)
        x = np.log2(np.maximum(raw, 1e-300))
        self.varying = [j for j in range(x.shape[1]) if np.ptp(x[:, j]) > 1e-9]
        self.constant = {j: x[0, j] for j in range(x.shape[1]) if j not in self.varying}
        self.x = x[:, self.varying]
        self.residual = np.array(
            [math.log(p.time_s / family.base_time(p.flops, p.bytes)) for p in family.points]
        )
        self._linear: Callable[[np.ndarray], np.ndarray] | None = None
        self._nearest: Any = None
        self.measured = {tuple(float(v) for v in p.features) for p in family.points}

    def on_grid(self, features: Sequence[float]) -> bool:
        """Whether ``features`` is a measured shape (never for a family without features)."""
        return bool(features) and tuple(float(v) for v in features) in self.measured

    def _build(self) -> None:
        from scipy.interpolate import LinearNDInterpolator
        from scipy.spatial import cKDTree

        dims = self.x.shape[1]
        if dims == 0:
            value = float(np.median(self.residual))
            self._linear = lambda q: np.full(len(q), value)
            return
        if dims == 1:
            order = np.argsort(self.x[:, 0])
            xs, ys = self.x[order, 0], self.residual[order]
            lo, hi = xs[0], xs[-1]

            def line(q: np.ndarray) -> np.ndarray:
                out = np.interp(q[:, 0], xs, ys)
                return np.where((q[:, 0] < lo - 1e-9) | (q[:, 0] > hi + 1e-9), np.nan, out)

            self._linear = line
        else:
            try:
                self._linear = LinearNDInterpolator(self.x, self.residual)
            except Exception:  # a degenerate grid (points on a lower-dimensional plane)
                self._linear = lambda q: np.full(len(q), np.nan)
        self._nearest = cKDTree(self.x)

    def residual_at(self, features: Sequence[float]) -> tuple[float, bool]:
        """``(ρ̂, extrapolated)`` at ``features``."""
        if self._linear is None:
            self._build()
        assert self._linear is not None
        q = np.log2(np.maximum(np.asarray(features, dtype=float), 1e-300))
        off_plane = any(abs(q[j] - v) > 1e-9 for j, v in self.constant.items())
        point = q[self.varying].reshape(1, -1)
        value = float(np.asarray(self._linear(point)).reshape(-1)[0])
        if math.isfinite(value) and not off_plane:
            return value, False
        if self._nearest is None:
            return float(np.median(self.residual)), True
        return self._extrapolated(point[0], q), True

    def _extrapolated(self, point: np.ndarray, q: np.ndarray) -> float:
        """Outside the grid: the median residual of the :data:`NEAREST_POINTS` nearest measured
        shapes (log₂ space), shrunk toward 0 — the family's own roofline — with the distance
        ``d`` to the nearest one, by ``max(0, 1 − d/EXTRAPOLATION_REACH)`` (off-plane features
        count in ``d``): near the grid the neighbours' efficiency holds, far beyond it only the
        family's fitted rates do."""
        k = min(NEAREST_POINTS, len(self.residual))
        distances, indices = self._nearest.query(point, k=k)
        distances, indices = np.atleast_1d(distances), np.atleast_1d(indices)
        off = sum((q[j] - v) ** 2 for j, v in self.constant.items())
        nearest = math.sqrt(float(distances[0]) ** 2 + off)
        shrink = max(0.0, 1.0 - nearest / EXTRAPOLATION_REACH)
        return float(np.median(self.residual[indices])) * shrink

    def time(self, features: Sequence[float], flops: float, nbytes: float) -> tuple[float, bool]:
        """``(t̂, extrapolated)``."""
        rho, extrapolated = self.residual_at(features)
        return self.family.base_time(flops, nbytes) * math.exp(rho), extrapolated


# ---------------------------------------------------------------------------- one op, one step


@dataclass(frozen=True)
class OpQuery:
    """What the model needs to know about one aten call (recorded without running it)."""

    name: str
    family: str
    features: tuple[float, ...]
    flops: float
    #: bytes for the base roofline (see GridPoint.bytes)
    work_bytes: float
    #: bytes touched since the main operand was last used (:func:`reuse_distances`); None: the op
    #: has no main operand (it reads what the op before it wrote: hot)
    reuse_bytes: float | None = None
    #: bytes of the main operand(s) read
    main_bytes: float = 0.0
    #: distinct bytes touched since the previous call of the same aten op
    #: (:func:`context_distances`): where an op without a main operand sits between its hot and
    #: context states; None: unknown (hot)
    context_bytes: float | None = None
    #: ``(Python calls, aten ops)`` a real run makes from the previous recorded call to this
    #: one, its own included, as the profiler counts them
    #: (:class:`~infer_opt.profilers.op_recorder.HostCounter`); None: not counted
    host_counts: tuple[int, int] | None = None


@dataclass(frozen=True)
class OpEstimate:
    time_s: float
    #: "grid", "nearest" (outside the grid), "fallback" (a related family), "roofline"
    source: str
    #: the family (and state) that predicted it, "" for the device roofline
    used: str
    extrapolated: bool
    #: relative uncertainty (the family's cross-validated error, larger when extrapolated)
    rel_uncertainty: float
    #: which term of the base roofline is largest: compute, bandwidth or launch
    bound: str
    #: the shape is one the calibration measured (a validation shape should not be)
    on_grid: bool = False
    #: the calibrated cache state nearest the op's reuse distance
    state: str = "hot"


def fallbacks(family: str) -> list[str]:
    """Related families to borrow from, best first: the same op in one dtype (without
    ``.mixed``), without the non-contiguous marker; ``baddbmm`` → ``bmm``; for pointwise ops the
    ``add`` (binary patterns) or ``mul`` (scalar/unary pattern) family of the same pattern;
    grouped-query decode attention → plain decode attention (its first three features); attention
    over a length off the CPU's vector width (``.tail``) → the same over aligned lengths."""
    if family == "sdpa.decode.gqa":
        return ["sdpa.decode"]
    if family.endswith(".tail"):
        return [family.removesuffix(".tail")]
    out: list[str] = []
    if family.endswith(".mixed"):  # the same op in one dtype (the vectorized kernel)
        family = family.removesuffix(".mixed")
        out.append(family)
    base = family.removesuffix(".nc")
    if base != family:
        out.append(base)
    op, _, rest = base.partition(".")
    swaps = {"baddbmm": "bmm"}
    if op in swaps and rest:
        out.append(f"{swaps[op]}.{rest}")
    if rest in ("t", "b") and op != "add":
        out.append(f"add.{rest}")
    if rest == "s" and op != "mul":
        out.append("mul.s")
    return out


def _bound(t0: float, rate: float, bandwidth: float, flops: float, nbytes: float) -> str:
    """Which term of ``t0 + max(F/R, Q/b)`` is largest: launch, compute or bandwidth."""
    compute, memory = _div(flops, rate), _div(nbytes, bandwidth)
    if t0 > max(compute, memory):
        return "launch"
    return "compute" if compute >= memory else "bandwidth"


class OpModel:
    """Predicts op and step times from a :class:`CalibrationResult` (module docstring)."""

    def __init__(self, calibration: CalibrationResult) -> None:
        self.calibration = calibration
        self.families = calibration.family_map()
        self._interpolators: dict[str, FamilyInterpolator] = {}
        self._cache: dict[tuple[Any, ...], OpEstimate] = {}
        self._slowdown: float | None = None

    def _states(self, name: str, query: OpQuery) -> dict[str, tuple[FamilyCalibration, float, bool]]:
        """``state -> (family, t̂, extrapolated)`` for each state the family ``name`` was measured
        in; states whose grid does not reach the shape are dropped when another one does (a
        cold grid covers only the small, bandwidth-bound matmuls)."""
        found = {}
        for state in STATES:
            family = self.families.get(f"{name}@{state}")
            # a family keyed by more features than the call has is another keying (a calibration
            # saved before its features changed): not this call's shapes
            if family is not None and len(family.feature_names) <= len(query.features):
                # a borrowed family may key fewer features (grouped-query decode → plain decode)
                features = query.features[: len(family.feature_names)]
                t, extrapolated = self._interpolator(family).time(features, query.flops, query.work_bytes)
                found[state] = (family, t, extrapolated)
        inside = {s: v for s, v in found.items() if not v[2]}
        if inside or not found:
            return inside
        # outside every grid: the grid of the most shapes (the hot one: warm and cold grids stop
        # at smaller shapes, where the cache state matters) extrapolates best
        widest = max(found, key=lambda s: len(found[s][0].points))
        return {widest: found[widest]}

    def _interpolator(self, family: FamilyCalibration) -> FamilyInterpolator:
        if family.key not in self._interpolators:
            self._interpolators[family.key] = FamilyInterpolator(family)
        return self._interpolators[family.key]

    def estimate(self, query: OpQuery) -> OpEstimate:
        """Predicted time of one call (module docstring)."""
        key = (
            query.family,
            query.features,
            query.flops,
            query.work_bytes,
            query.reuse_bytes,
            query.main_bytes,
            query.context_bytes,
        )
        if key not in self._cache:
            self._cache[key] = self._estimate(query)
        return self._cache[key]

    def anchor_bytes(self, state: str, query: OpQuery) -> float:
        """Where a state sits on the distance axis for this op: hot = its own main bytes (touched
        just before) or, if larger, the L2 (half the warm read, which is twice the L2): an operand
        whose reuse footprint still fits in the L2 is still there; warm, cold, context and far =
        the calibration's reads plus the operand's bytes."""
        if state == "hot" and query.reuse_bytes is None:
            return self.near_bytes(query.family)
        return self._anchor(state, max(query.main_bytes, 1.0))

    def near_bytes(self, family: str | None = None) -> float:
        """The hot anchor of the dispatch context (:meth:`context_weight`): the L1 caches
        (:attr:`CalibrationResult.context_near_bytes`) for an op that runs a kernel of its own —
        a hot loop keeps its code there, a step's other ops between two of its calls push it
        out —, the L2 for what every op shares (the dispatcher, the Python around each call, a
        view's metadata: ``family`` None or ``view.*``) and for a calibration without the field."""
        near = self.calibration.context_near_bytes
        shared = family is None or family.startswith("view.")
        return self._anchor("hot", 1.0) if shared or near <= 0 else float(near)

    def _anchor(self, state: str, own: float) -> float:
        reads = {
            "warm": self.calibration.warm_reuse_bytes,
            "cold": self.calibration.cold_reuse_bytes,
            "context": self.calibration.context_reuse_bytes,
            "far": self.calibration.far_reuse_bytes,
        }
        if state == "hot":
            return max(own, self.calibration.warm_reuse_bytes / 2)
        return own + reads[state]

    def _at_distance(
        self, found: dict[str, tuple[FamilyCalibration, float, bool]], query: OpQuery
    ) -> tuple[FamilyCalibration, float, bool, str]:
        """Interpolate log t̂ linearly in log distance between the measured states' anchors
        (clamped at both ends): the main operand's reuse distance, or for an op without one the
        bytes touched since the same op last ran (its dispatch context); unknown: the hottest
        state. An op with a main operand and a context state (an embedding of few rows) adds
        the context's cost over the hot state, ``w · (t_context − t_hot)``, at its own context
        weight (:meth:`context_weight`): where its data is and how cold its code is are apart."""
        context = None
        if query.reuse_bytes is not None and len(found) > 1:
            # where its data is decides; how cold its code is, is added below
            context = found.pop("context", None)
            found.pop("far", None)
        distance = query.reuse_bytes if query.reuse_bytes is not None else query.context_bytes
        if distance is None:
            state = next(s for s in STATES if s in found)
            family, t, extrapolated = found[state]
            return family, t, extrapolated, state
        points = sorted((math.log(self.anchor_bytes(s, query)), math.log(v[1]), s) for s, v in found.items())
        x = math.log(max(distance, 1.0))
        t = math.exp(float(np.interp(x, [p[0] for p in points], [p[1] for p in points])))
        state = min(points, key=lambda p: abs(p[0] - x))[2]
        if context is not None and "hot" in found:
            weight = self.context_weight(query.context_bytes, query.family)
            t += weight * max(0.0, context[1] - found["hot"][1])
        family, _, _ = found[state]
        return family, t, any(v[2] for v in found.values()), state

    def _estimate(self, query: OpQuery) -> OpEstimate:
        for i, name in enumerate([query.family, *fallbacks(query.family)]):
            found = self._states(name, query)
            if not found:
                continue
            family, t, extrapolated, state = self._at_distance(found, query)
            cv = family.cv_rel_error if family.cv_rel_error is not None else ROOFLINE_UNCERTAINTY
            borrowed = i > 0
            source = SOURCE_FALLBACK if borrowed else (SOURCE_NEAREST if extrapolated else SOURCE_GRID)
            return OpEstimate(
                time_s=t,
                source=source,
                used=family.key,
                extrapolated=extrapolated or borrowed,
                rel_uncertainty=cv * (2.0 if extrapolated or borrowed else 1.0),
                bound=_bound(
                    family.launch_s,
                    family.rate_flops,
                    family.bandwidth_bytes_per_s,
                    query.flops,
                    query.work_bytes,
                ),
                on_grid=i == 0 and self._interpolator(family).on_grid(query.features),
                state=state,
            )
        roof = self.calibration.roofline
        if roof is None:
            raise InvalidInput("calibration", self.calibration.device_key, "has no device roofline")
        return OpEstimate(
            time_s=roof.time(query.flops, query.work_bytes),
            source=SOURCE_ROOFLINE,
            used="",
            extrapolated=True,
            rel_uncertainty=ROOFLINE_UNCERTAINTY,
            bound=_bound(
                roof.launch_overhead_s,
                roof.compute_rate_flops,
                roof.bandwidth_bytes_per_s,
                query.flops,
                query.work_bytes,
            ),
        )

    def dispatch_slowdown(self) -> float:
        """``Φ ≥ 1``: how much slower the calibration found small ops in context than hot — the
        median over the families measured in both states of their median ratio at shared shapes
        (1 without context states: a GPU, an older calibration)."""
        if self._slowdown is None:
            ratios = []
            for key, hot in self.families.items():
                name, _, state = key.rpartition("@")
                context = self.families.get(f"{name}@context")
                if state != "hot" or context is None:
                    continue
                times = {p.features: p.time_s for p in hot.points}
                shared = [p.time_s / times[p.features] for p in context.points if p.features in times]
                if shared:
                    ratios.append(float(np.median(shared)))
            self._slowdown = max(1.0, float(np.median(ratios))) if ratios else 1.0
        return self._slowdown

    def context_weight(self, distance: float | None, family: str | None = None) -> float:
        """Where ``distance`` bytes touched since an op last ran lie between the hot and the
        context anchors of an op without a main operand (:meth:`near_bytes`, 0; the context
        read, 1), in log bytes, clamped; 0 when unknown or when the calibration has no context
        state. ``family`` None: the host's share of a call (code every op shares)."""
        near, far = self.near_bytes(family), self._anchor("context", 1.0)
        if distance is None or far <= near:
            return 0.0
        return min(1.0, max(0.0, math.log(max(distance, 1.0) / near) / math.log(far / near)))

    def replay_inputs(
        self, queries: Sequence[OpQuery], estimates: Sequence[OpEstimate]
    ) -> tuple[list[float], list[float], list[bool]] | None:
        """Per call its host cost, device time and whether the host waits for the device after
        it, for a step replayed as a graph; None here: on the CPU the host runs the operators
        itself, so the step is the serial sum."""
        return None

    def host_time(self, queries: Sequence[OpQuery], n_module_calls: int) -> float:
        """``h = c_op · Σ_i φ_i + c_mod · n_module_calls · mean φ`` (0 without a host
        calibration): the chains are timed in a hot loop, and the Python and dispatcher work
        around a call slows down in a step as the small ops themselves do —
        ``φ_i = Φ^{w_i}`` with Φ the calibration's context slowdown
        (:meth:`dispatch_slowdown`) and ``w_i`` the op's context weight (:meth:`context_weight`)."""
        host = self.calibration.host
        if host is None:
            return 0.0
        slowdown = math.log(self.dispatch_slowdown())
        factors = [math.exp(slowdown * self.context_weight(q.context_bytes)) for q in queries]
        total = math.fsum(factors)
        mean = total / len(factors) if factors else 1.0
        return host.per_op_s * total + host.per_module_call_s * n_module_calls * mean


@dataclass(frozen=True)
class StepEstimate:
    """A step's prediction: per op, the operators' sum, the host term, and the total."""

    ops: tuple[OpEstimate, ...]
    op_time_s: float
    host_s: float
    step_time_s: float
    #: time-weighted relative uncertainty of the step (module docstring)
    rel_uncertainty: float
    extrapolated_share: float = 0.0
    n_module_calls: int = 0
    #: the step replayed as a graph (host issuing, kernels queued on a stream:
    #: :mod:`infer_opt.cost_models.step_replay`) when the model gives its inputs, else None —
    #: then ``step_time_s`` is the serial sum ``op_time_s + host_s``
    replay: StepReplay | None = None

    @property
    def serial_s(self) -> float:
        """``Σ t̂(op) + h``: the step if host and device never overlapped."""
        return self.op_time_s + self.host_s

    @property
    def band_s(self) -> tuple[float, float]:
        return self.step_time_s * (1 - self.rel_uncertainty), self.step_time_s * (1 + self.rel_uncertainty)


def predict_step(model: OpModel, queries: Sequence[OpQuery], n_module_calls: int) -> StepEstimate:
    """``Σ t̂(op) + h(n_ops, n_module_calls)`` over a recorded op list: one rank's step (a
    tensor-parallel prediction applies it per rank and adds communication); for a model that
    gives the replay's inputs (a GPU's: :meth:`OpModel.replay_inputs`), the step replayed as a
    graph (:mod:`infer_opt.cost_models.step_replay`) and ``host_s`` its host work."""
    estimates = tuple(model.estimate(q) for q in queries)
    op_time = math.fsum(e.time_s for e in estimates)
    inputs = model.replay_inputs(queries, estimates)
    replayed = replay(*inputs) if inputs is not None else None
    host = replayed.host_s if replayed is not None else model.host_time(queries, n_module_calls)
    host_spread = model.calibration.host.rel_spread if model.calibration.host is not None else 0.0
    total = replayed.step_s if replayed is not None else op_time + host
    weighted = math.fsum(e.time_s * e.rel_uncertainty for e in estimates) + host * max(host_spread, 0.1)
    extrapolated = math.fsum(e.time_s for e in estimates if e.extrapolated)
    return StepEstimate(
        ops=estimates,
        op_time_s=op_time,
        host_s=host,
        step_time_s=total,
        rel_uncertainty=weighted / total if total > 0 else 0.0,
        extrapolated_share=extrapolated / op_time if op_time > 0 else 0.0,
        n_module_calls=n_module_calls,
        replay=replayed,
    )


# ---------------------------------------------------------------------------- cache state


@dataclass(frozen=True)
class Touches:
    """The memory one call touches: ``reads`` and ``writes`` as (storage, bytes); ``main`` are
    the indices into ``reads`` of the operand(s) whose cache state picks the family state (a
    matmul's weight, attention's keys and values)."""

    reads: tuple[tuple[int, int], ...] = ()
    writes: tuple[tuple[int, int], ...] = ()
    main: tuple[int, ...] = ()


def reuse_distances(touches: Sequence[Touches]) -> list[tuple[float | None, float]]:
    """Per call, ``(d, q)``: the bytes of its main operand plus the distinct bytes touched since
    the operand was last used — the sizes of the storages read or written in between, each once
    (a cache holds a footprint: an activation read ten times takes its room once) — and the
    bytes of that operand, in the steady state of a repeated step (two passes over the calls; the second is
    reported). ``d`` is None for a call without a main operand.

    The operand's *last use* is its storage's latest touch of at least half the bytes read now:
    a KV cache whose new row was just written counts from its last full read, a step ago. With
    several main operands the largest decides."""
    n = len(touches)
    footprint = _Footprint(2 * n)
    full: dict[int, tuple[int, float]] = {}
    out: list[tuple[float | None, float]] = []
    for index in range(2 * n):
        call = touches[index % n]
        best: tuple[float, float] | None = None
        for i, (storage, nbytes) in enumerate(call.reads):
            if i in call.main and (best is None or nbytes > best[1]):
                seen = full.get(storage)
                used = seen is not None and seen[1] >= 0.5 * nbytes
                # in between, plus the operand itself (the hot anchor: touched just before)
                between = footprint.between(seen[0] + 1, index) if used else math.inf
                best = (between + nbytes, float(nbytes))
        for storage, nbytes in footprint.touch(index, call):
            seen = full.get(storage)
            if seen is None or nbytes >= 0.5 * seen[1]:
                full[storage] = (index, float(nbytes))
        if index >= n:
            everything = footprint.between(0, index + 1)
            out.append((None, 0.0) if best is None else (min(best[0], everything), best[1]))
    return out


def context_distances(names: Sequence[str], touches: Sequence[Touches]) -> list[float]:
    """Per call, the distinct bytes touched since the previous call of the same op name (each
    storage once, at its latest size: a cache holds a footprint), in the steady state of a
    repeated step (two passes; the second is reported): how far the step has pushed that op's
    code and data down the caches since it last ran. A small op after a few megabytes of matmuls
    costs several times its hot-loop time (``docs/notebook/scripts/bench_dispatch_context.py``)."""
    n = len(names)
    footprint = _Footprint(2 * n)
    last_call: dict[str, int] = {}
    out: list[float] = []
    for index in range(2 * n):
        name = names[index % n]
        if index >= n:
            out.append(footprint.between(last_call[name] + 1, index))
        last_call[name] = index
        footprint.touch(index, touches[index % n])
    return out


class _Footprint:
    """The distinct bytes touched between two calls: every storage counted once, at its latest
    touch and size, on a Fenwick tree over the call indices (O(log n) per touch and query)."""

    def __init__(self, size: int) -> None:
        self.tree = _Fenwick(size)
        self.latest: dict[int, tuple[int, float]] = {}

    def touch(self, index: int, call: Touches) -> list[tuple[int, int]]:
        """Record call ``index``'s reads and writes; returns the (storage, bytes) it touched."""
        touched = [(storage, nbytes) for storage, nbytes in (*call.reads, *call.writes) if nbytes > 0]
        for storage, nbytes in touched:
            if storage in self.latest:
                self.tree.add(self.latest[storage][0], -self.latest[storage][1])
            self.latest[storage] = (index, float(nbytes))
            self.tree.add(index, float(nbytes))
        return touched

    def between(self, start: int, end: int) -> float:
        """Bytes of the storages whose latest touch is in calls ``start .. end − 1``."""
        return self.tree.total(start, end)


class _Fenwick:
    """Prefix sums with point updates in O(log n) (a binary indexed tree)."""

    def __init__(self, size: int) -> None:
        self.tree = [0.0] * (size + 1)

    def add(self, index: int, value: float) -> None:
        i = index + 1
        while i < len(self.tree):
            self.tree[i] += value
            i += i & -i

    def _prefix(self, end: int) -> float:
        """Σ of positions < end."""
        total, i = 0.0, end
        while i > 0:
            total += self.tree[i]
            i -= i & -i
        return total

    def total(self, start: int, end: int) -> float:
        """Σ of positions start..end−1."""
        return max(0.0, self._prefix(end) - self._prefix(start))


# ---------------------------------------------------------------------------- accuracy


def relative_errors(predicted: Sequence[float], measured: Sequence[float]) -> np.ndarray:
    """``(t̂ − t)/t`` element-wise; measured times must be > 0."""
    p = np.asarray(predicted, dtype=float)
    m = np.asarray(measured, dtype=float)
    if p.shape != m.shape:
        raise InvalidInput("predicted", len(p), f"needs as many values as measured ({len(m)})")
    if np.any(~np.isfinite(m)) or np.any(m <= 0):
        raise InvalidInput("measured", "non-positive time", "measured times must be finite and > 0")
    if np.any(~np.isfinite(p)) or np.any(p < 0):
        raise InvalidInput("predicted", "non-finite time", "predicted times must be finite and >= 0")
    return (p - m) / m


def error_stats(predicted: Sequence[float], measured: Sequence[float]) -> ErrorSummary:
    """MAPE, p90, max and bias of the relative errors (all None for an empty sample)."""
    rel = relative_errors(predicted, measured)
    if rel.size == 0:
        return ErrorSummary(0, None, None, None, None)
    absolute = np.abs(rel)
    return ErrorSummary(
        n=int(rel.size),
        mape=float(absolute.mean()),
        p90_abs_rel_error=float(np.percentile(absolute, 90)),
        max_abs_rel_error=float(absolute.max()),
        mean_signed_rel_error=float(rel.mean()),
    )


# ---------------------------------------------------------------------------- sweeps


def ridge_crossing(xs: Sequence[float], intensities: Sequence[float], ridge: float) -> float | None:
    """The sweep value where the arithmetic intensity ``F/Q`` first reaches the ridge ``R/b``
    (interpolated linearly in log x and log intensity between the two sweep points around it);
    ``xs[0]`` when it starts above, ``None`` when it never gets there. Decode at batch B reads the
    weights once for all B sequences, so its intensity grows about linearly with B (docs/prediction.md)."""
    if len(xs) != len(intensities):
        raise InvalidInput("intensities", len(intensities), f"needs one value per sweep point ({len(xs)})")
    if not (ridge > 0 and math.isfinite(ridge)):
        raise InvalidInput("ridge", ridge, "must be finite and > 0")
    pairs = [(float(x), float(i)) for x, i in zip(xs, intensities, strict=True) if x > 0 and i > 0]
    if not pairs:
        return None
    if pairs[0][1] >= ridge:
        return pairs[0][0]
    for (x0, i0), (x1, i1) in itertools.pairwise(pairs):
        if i0 < ridge <= i1:
            frac = (math.log(ridge) - math.log(i0)) / (math.log(i1) - math.log(i0))
            return math.exp(math.log(x0) + frac * (math.log(x1) - math.log(x0)))
    return None


@dataclass(frozen=True)
class CategoryPrediction:
    category: str
    time_s: float
    calls: int
    flops: float
    bytes: float


def categories(
    names: Sequence[str], times_s: Sequence[float], flops: Sequence[float], nbytes: Sequence[float]
) -> list[CategoryPrediction]:
    """Predicted time, calls, FLOPs and bytes per category (``names`` are the calls' categories),
    largest time first."""
    by: dict[str, list[float]] = {}
    for name, t, f, q in zip(names, times_s, flops, nbytes, strict=True):
        acc = by.setdefault(name, [0.0, 0.0, 0.0, 0.0])
        acc[0] += t
        acc[1] += 1
        acc[2] += f
        acc[3] += q
    out = [CategoryPrediction(c, v[0], int(v[1]), v[2], v[3]) for c, v in by.items()]
    return sorted(out, key=lambda c: (-c.time_s, c.category))


__all__ = [
    "CalibrationResult",
    "DeviceRoofline",
    "FamilyCalibration",
    "FamilyInterpolator",
    "GridPoint",
    "HostCalibration",
    "OpEstimate",
    "OpModel",
    "OpQuery",
    "StepEstimate",
    "Touches",
    "categories",
    "context_distances",
    "error_stats",
    "fallbacks",
    "fit_family",
    "predict_step",
    "reuse_distances",
    "ridge_crossing",
]
