"""The ``predict`` result kind: a model step's time predicted from an operator calibration, per
operator and category, and over a sweep (built by :mod:`infer_opt.profilers.predict`, read by
:mod:`infer_opt.reports.predict`). Every time here is a model prediction, not a measurement."""

from __future__ import annotations

from dataclasses import dataclass

from infer_opt.notices import Notice
from infer_opt.results import Result
from infer_opt.results.profile import CategoryShare, ModelStep, OpGroup


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


@dataclass(frozen=True)
class PredictedOp(OpGroup):
    """A predicted op (``share``: predicted_s / the predicted step time)."""

    family: str
    predicted_s: float
    #: the largest term of the family's base roofline: compute, bandwidth or launch
    bound: str
    #: outside the calibrated grid, from a related family, or from the device roofline
    extrapolated: bool
    #: grid, nearest, fallback or roofline
    source: str
    #: the calibrated cache state nearest its main operand's reuse distance: hot, warm or cold
    state: str
    rel_uncertainty: float


@dataclass(frozen=True)
class PredictedCategory(CategoryShare):
    """A predicted category: every field a model prediction, the roofline ones always set (the
    bound at the device roofline: Σ min(t̂, t0 + max(F/R, Q/b)) over its ops)."""


@dataclass(frozen=True)
class CalibrationRef:
    """Which calibration predicted (the device the prediction is for)."""

    source: str
    device_name: str
    dtype: str
    threads: int
    device_key: str
    grid: str = ""
    complete: bool = True

    @property
    def from_traces(self) -> bool:
        """Built from GPU traces (``calibrate --from-trace``): no thread count applies."""
        from infer_opt.results.calibration import TRACE_GRID

        return self.grid == TRACE_GRID


@dataclass(frozen=True)
class SweepPoint:
    value: int
    batch: int | None
    seq_len: int | None
    context: int | None
    step_time_s: float
    tokens_per_s: float | None
    rel_uncertainty: float
    #: F/Q of the step's matmuls
    matmul_intensity: float | None
    #: compute or bandwidth (matmul intensity against the ridge)
    bound: str
    flops: float
    bytes: float


@dataclass(frozen=True)
class PredictResult(Result, ModelStep):
    """A step's predicted time from an operator calibration (docs/prediction.md) — a model prediction,
    not a measurement."""

    KIND = "predict"

    context: int | None
    new_tokens: int | None
    tokens_per_step: int | None
    step_time_s: float
    #: step_time_s × (1 ∓ rel_uncertainty)
    step_low_s: float
    step_high_s: float
    rel_uncertainty: float
    tokens_per_s: float | None
    #: Σ predicted op times, and the predicted host term (per op and per module call)
    op_time_s: float
    host_s: float
    n_ops: int
    module_calls: int
    flops: float
    bytes: float
    flops_analytic: float | None
    flops_vs_analytic: float | None
    #: share of the predicted op time from extrapolated ops
    extrapolated_share: float
    ops: tuple[PredictedOp, ...]
    categories: tuple[PredictedCategory, ...]
    calibration: CalibrationRef
    #: "fake tensors" or "real run"
    recorded_by: str
    record_s: float
    ttft_s: float | None = None
    tpot_s: float | None = None
    sweep: str | None = None
    points: tuple[SweepPoint, ...] = ()
    #: decode sweeps: the sweep value where the matmuls turn compute-bound (None: not in range)
    compute_bound_from: float | None = None
    #: R_f / b_f of the matmul family that runs the step's matmuls (FLOP/byte)
    ridge_point: float | None = None
    warnings: tuple[Notice, ...] = ()
    #: with --tp N: each rank's compute (its shard's ops, predicted as above) plus the
    #: collectives the sharded model issues (the comm fit), against this single-device step
    tensor_parallel: TPPrediction | None = None
    #: a step replayed as a graph (a GPU calibration from traces: host issuing, kernels queued;
    #: cost_models/step_replay.py): which side set its end (``"host"`` or ``"device"``), the
    #: critical path's host and device parts (they sum to ``step_time_s``) and the serial sum
    #: ``op_time_s + host_s`` it replaces; None each for a step that is that serial sum
    bound: str | None = None
    host_critical_s: float | None = None
    device_critical_s: float | None = None
    serial_step_s: float | None = None
