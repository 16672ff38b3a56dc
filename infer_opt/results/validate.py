"""The ``validate`` result kind: predicted against measured step and operator times over a grid of
shapes (built by :mod:`infer_opt.profilers.validate`, read by :mod:`infer_opt.reports.validate`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from infer_opt.notices import Notice
from infer_opt.results import Result
from infer_opt.results.predict import CalibrationRef
from infer_opt.steps import StepSettings

#: operators shorter than this per call (measured) form their own bucket
SMALL_OP_S = 10e-6
#: keys of :attr:`ValidateResult.noise` beside the step modes
NOISE_OPS, NOISE_SMALL_OPS, NOISE_HOST = "operators", "small operators", "host term"


@dataclass(frozen=True)
class ValidatePoint:
    mode: str
    batch: int
    seq_len: int | None
    context: int | None
    measured_s: float
    predicted_s: float
    #: (predicted − measured) / measured
    rel_error: float
    #: measured step − Σ measured op times (profile's unattributed time) and the predicted host term
    measured_host_s: float
    predicted_host_s: float
    #: measured step IQR / median
    measured_rel_iqr: float
    #: share of the predicted op time on shapes the calibration measured
    on_grid_share: float
    extrapolated_share: float
    ttft_measured_s: float | None = None
    ttft_predicted_s: float | None = None
    tpot_measured_s: float | None = None
    tpot_predicted_s: float | None = None
    #: the speed probes' times just before the point was measured (:mod:`speed_probe`; with several
    #: passes the median of theirs)
    probe_s: float | None = None
    dispatch_probe_s: float | None = None
    #: with several passes: the step's median in each pass, in pass order (``measured_s`` is
    #: their median)
    pass_measured_s: tuple[float, ...] = ()
    #: (slowest − fastest) / median of the passes (None: one pass), derived when built
    pass_spread: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        t = self.pass_measured_s
        object.__setattr__(self, "pass_spread", (max(t) - min(t)) / self.measured_s if len(t) > 1 else None)


@dataclass(frozen=True)
class OpComparison:
    """One operator (name and shapes) at one point: per-call time measured and predicted."""

    point: int
    mode: str
    name: str
    shapes: tuple[tuple[int, ...], ...]
    family: str
    calls: int
    measured_s: float
    predicted_s: float
    rel_error: float
    extrapolated: bool


@dataclass(frozen=True)
class ErrorSummary:
    """MAPE, p90, max and mean signed error of ``|t̂ − t|/t`` over ``n`` comparisons (the mean
    signed error is the bias: signed errors may cancel, so it is not the accuracy)."""

    n: int
    mape: float | None
    p90_abs_rel_error: float | None
    max_abs_rel_error: float | None
    mean_signed_rel_error: float | None


@dataclass(frozen=True)
class ValidateResult(Result):
    """Predicted against measured, per step and per operator (docs/prediction.md)."""

    KIND = "validate"

    model: str
    dtype: str
    threads: int
    calibration: CalibrationRef
    points: tuple[ValidatePoint, ...]
    #: over every point; then prefill (and generate's TTFT) and decode (and TPOT) apart
    step_mape: float | None
    step_p90_abs_rel_error: float | None
    step_by_mode: dict[str, ErrorSummary]
    #: ops of at least SMALL_OP_S per call
    op_mape: float | None
    op_p90_abs_rel_error: float | None
    op_count: int
    #: the shorter ops
    small_op_mape: float | None
    small_op_count: int
    host: ErrorSummary
    worst_ops: tuple[OpComparison, ...]
    ops: tuple[OpComparison, ...] = ()
    warmup: int = 0
    reps: int = 0
    #: the matmul probe's median over the points / its median in the calibration (> 1: the
    #: machine ran slower than when calibrated); None for another device's calibration or one
    #: without probes
    probe_slowdown: float | None = None
    #: the same for the dispatch probe (None also for a calibration made before it existed)
    dispatch_probe_slowdown: float | None = None
    #: passes over the grid; with more than one, ``noise`` compares them (:func:`pass_noise`)
    passes: int = 1
    noise: dict[str, ErrorSummary] = field(default_factory=dict)
    warnings: tuple[Notice, ...] = ()
    #: what every point's step was made from (model, device, dtype, timing; the shape where the
    #: grid names nothing, the first mode), resolved; None in a result saved before it was carried
    settings: StepSettings | None = None
