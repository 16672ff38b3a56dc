"""The ``roofline`` kind: the fitted device roofline and each kernel's point on it."""

from __future__ import annotations

from dataclasses import dataclass, field

from infer_opt.notices import Notice
from infer_opt.results import Result


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
