"""The ``amortize-measure`` result kind: compile cost and per-call savings measured per bucket,
and the break-even call count they give (built by :mod:`infer_opt.profilers.amortize_measure`,
read by :mod:`infer_opt.reports.amortize_measure`)."""

from __future__ import annotations

from dataclasses import dataclass

from infer_opt.notices import Notice
from infer_opt.results import Result
from infer_opt.stats import Summary


@dataclass(frozen=True)
class BucketSpec:
    batch: int
    seq_len: int

    @property
    def name(self) -> str:
        return f"{self.batch}x{self.seq_len}"


@dataclass(frozen=True)
class MeasuredBucket:
    """One bucket: what was measured and (after :func:`decide`) what it means."""

    bucket: str
    batch: int
    seq_len: int
    #: eager steady-state median t_e
    eager_s: float
    eager: Summary
    eager_cold_s: float | None = None
    #: the per-call time compiling buys: compiled median t_c, or the CUDA graph replay's
    compiled_s: float | None = None
    compiled: Summary | None = None
    #: wall time of the first compiled call (compile + one run)
    first_call_s: float | None = None
    #: C = first compiled call - t_e (+ CUDA graph capture)
    compile_s: float | None = None
    graph_capture_s: float | None = None
    #: compiled (no graph) median, when a CUDA graph replay is what compiled_s holds
    compiled_no_graph_s: float | None = None
    #: ‖compiled - eager‖ / ‖eager‖ of the outputs
    output_rel_error: float | None = None
    eager_peak_bytes: int | None = None
    compiled_peak_bytes: int | None = None
    #: wall time spent measuring this bucket
    measure_s: float = 0.0
    #: why the bucket could not be compiled (it is then treated as not compiled)
    error: str | None = None
    warnings: tuple[Notice, ...] = ()
    calls: float | None = None
    break_even_calls: float | None = None
    net_gain_s: float | None = None
    #: compile this bucket? None: depends on a call count that was not given
    compile: bool | None = None
    reason: str | None = None

    @property
    def failed(self) -> bool:
        return self.compile_s is None or self.compiled_s is None


@dataclass(frozen=True)
class AmortizeMeasureResult(Result):
    KIND = "amortize-measure"

    model: str
    device: str
    device_name: str
    dtype: str
    backend: str
    cuda_graphs: bool
    warmup: int
    reps: int
    #: e.g. "disabled: every compile is cold"
    compile_caches: str
    buckets: tuple[MeasuredBucket, ...]
    #: requested buckets not measured yet (a partial, resumable file)
    pending: tuple[str, ...] = ()
    calls_source: str | None = None
    #: Σ net gain over the buckets worth compiling (None without call counts)
    total_net_gain_s: float | None = None
    compile_all_net_gain_s: float | None = None
    compiled_count: int = 0
    failed_count: int = 0
    total_calls: float | None = None
    #: wall time spent measuring the buckets (this run and resumed ones)
    measured_s: float = 0.0
    #: the compiler's one-time start-up in this run's process (a tiny compile before the
    #: first bucket), kept out of every bucket's C; None when nothing was compiled
    compiler_startup_s: float | None = None

    @property
    def complete(self) -> bool:
        return not self.pending
