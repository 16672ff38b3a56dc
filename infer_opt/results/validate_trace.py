"""The ``validate-trace`` result kind: an operator calibration's predictions against the kernel
times of a held-out GPU trace (built by :mod:`infer_opt.trace.validate`, read by
:mod:`infer_opt.reports.validate_trace`). Its error keys are ``validate``'s (``op_mape``,
``op_p90_abs_rel_error``, ``small_op_mape``, ``step_mape``)."""

from __future__ import annotations

from dataclasses import dataclass

from infer_opt.notices import Notice
from infer_opt.results import Result
from infer_opt.results.predict import CalibrationRef
from infer_opt.results.validate import ErrorSummary

#: calibration and trace of the same GPU model
TIER_TARGET = "target-calibrated"
#: a calibration of another GPU, scaled by the datasheets' peaks
TIER_UNSEEN = "unseen-device"
TIERS = (TIER_TARGET, TIER_UNSEEN)


@dataclass(frozen=True)
class TraceOp:
    """One op of the trace with one set of shapes and dtype: per call, the median measured
    kernel time over its instances and the predicted one."""

    name: str
    shapes: str
    dtype: str
    family: str
    calls: int
    measured_s: float
    predicted_s: float
    rel_error: float
    #: how it was predicted: grid (inside its family's shapes), nearest (outside), fallback (a
    #: related family), roofline (the device roofline: no family)
    source: str
    #: the family that predicted it ("" for the device roofline)
    used: str
    extrapolated: bool


@dataclass(frozen=True)
class TraceStep:
    """One ``ProfilerStep`` (or the whole trace without steps): summed GPU kernel time."""

    mode: str
    step: int
    measured_s: float
    predicted_s: float
    rel_error: float
    #: the share of the measured time in ops with a formula (the rest is predicted at the
    #: calibration's launch floor per event)
    modelled_share: float
    kernels: int


@dataclass(frozen=True)
class FamilyError:
    """Per family, over its ops of at least 10 µs per call."""

    family: str
    n: int
    mape: float | None
    measured_s: float
    predicted_s: float


@dataclass(frozen=True)
class TraceValidateResult(Result):
    """Predicted against measured kernel time, per op and per step, on one trace."""

    KIND = "validate-trace"

    #: the trace's file name (``model`` for the parity plot's title)
    model: str
    trace: str
    device_name: str
    dtype: str
    tier: str
    calibration: CalibrationRef
    #: per step (``points``: the parity plot's name for them)
    points: tuple[TraceStep, ...]
    step_mape: float | None
    op_mape: float | None
    op_p90_abs_rel_error: float | None
    op_count: int
    small_op_mape: float | None
    small_op_count: int
    ops_summary: ErrorSummary
    families: tuple[FamilyError, ...]
    worst_ops: tuple[TraceOp, ...]
    ops: tuple[TraceOp, ...] = ()
    #: measured kernel time weighted: Σ|t̂ − t| / Σ t over the ops of at least 10 µs
    op_weighted_error: float | None = None
    #: the share of the trace's GPU time in ops with a formula
    modelled_share: float = 0.0
    #: the calibration's median gap between kernels, times the kernels of a step (not in the
    #: kernel time compared; what a step adds on top when its kernels run back to back)
    predicted_gap_s: float = 0.0
    wall_s: float = 0.0
    warnings: tuple[Notice, ...] = ()
    #: a trace of this file's name is among those the calibration was built from: the errors
    #: say how well the model fits it, not how well it predicts a held-out trace
    in_calibration: bool = False
