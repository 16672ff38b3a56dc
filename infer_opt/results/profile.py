"""The ``profile`` result kind: where one model step's time goes, per operator, category and
module (built by :mod:`infer_opt.profilers.model_profile`, read by :mod:`infer_opt.reports.profile`).

:class:`ModelStep` says which model's step a result is about; ``profile``, ``profile --tp`` and
``predict`` results all carry it. Times are seconds, rates per second, sizes bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from infer_opt.notices import Notice
from infer_opt.results import Result, number_problems
from infer_opt.steps import Shape, StepSettings

if TYPE_CHECKING:
    from infer_opt.run_key import RunKey


@dataclass(frozen=True)
class ModelStep:
    """Which model's step: its name, where it came from, its size, and the step's mode, dtype and
    token shape (``batch``, ``seq_len``: None when the inputs are not tokens)."""

    model: str
    model_source: str
    description: str
    n_params: int
    mode: str
    dtype: str
    batch: int | None
    seq_len: int | None


@dataclass(frozen=True)
class OpGroup:
    """One operator with one set of input shapes, summed over its calls in a step: what a measured
    op (:class:`OpStat`) and a predicted one (:class:`~infer_opt.results.predict.PredictedOp`)
    have in common."""

    name: str
    shapes: tuple[tuple[int, ...], ...]
    category: str
    calls: int
    #: the op's time / the step's time
    share: float
    flops: float
    bytes: float


@dataclass(frozen=True)
class OpStat(OpGroup):
    """A measured op."""

    dtype: str
    #: Σ over calls of the per-call median time over repetitions
    time_s: float
    #: per repetition, the total over calls (for statistics in ``compare``)
    time_samples_s: tuple[float, ...]
    #: "infer-opt", "torch", "nominal" or "none"
    flops_source: str
    #: the module running it most often (layer indices as ``*``)
    module: str
    intensity: float | None
    achieved_flops_per_s: float
    achieved_bytes_per_s: float
    #: roofline prediction t0 + max(F/R, Q/b) per call × calls (a model prediction; None
    #: when the profile has no roofline fit, as are bound and efficiency)
    predicted_s: float | None
    bound: str | None
    #: predicted / measured
    efficiency: float | None
    #: with several runs (--runs): the median of ``time_samples_s`` in each run
    run_medians_s: tuple[float, ...] = ()

    def loaded_problems(self) -> list[tuple[str, object, str]]:
        """Measured times are finite and >= 0 (a file read back)."""
        return number_problems(self, non_negative=("time_s", "time_samples_s", "run_medians_s"))


@dataclass(frozen=True)
class CategoryShare:
    """One op category's time in a step and its Amdahl place: what a measured category
    (:class:`CategoryStat`) and a predicted one (:class:`~infer_opt.results.predict.PredictedCategory`)
    have in common."""

    category: str
    time_s: float
    #: time / step time: the Amdahl fraction f
    fraction: float
    calls: int
    flops: float
    bytes: float
    #: Σ min(time, roofline prediction) over the category's ops (a model prediction;
    #: None in a profile without a roofline fit, as are part_speedup and roofline_speedup)
    bound_time_s: float | None
    #: the category's own speedup at its roofline bound, s = time / bound time
    part_speedup: float | None
    #: 1 / (1 - f): end to end if the category were free
    ceiling_speedup: float
    #: 1 / ((1 - f) + f/s): end to end if every op in it ran at its roofline bound (predicted)
    roofline_speedup: float | None


@dataclass(frozen=True)
class CategoryStat(CategoryShare):
    """A measured category."""

    achieved_flops_per_s: float = 0.0
    achieved_bytes_per_s: float = 0.0
    time_samples_s: tuple[float, ...] = ()
    #: with several runs (--runs): the median of ``time_samples_s`` in each run
    run_medians_s: tuple[float, ...] = ()

    def loaded_problems(self) -> list[tuple[str, object, str]]:
        """Measured times are finite and >= 0 (a file read back)."""
        return number_problems(self, non_negative=("time_s", "time_samples_s", "run_medians_s"))


@dataclass(frozen=True)
class ModuleStat:
    module: str
    time_s: float
    share: float
    calls: int
    flops: float
    bytes: float


@dataclass(frozen=True)
class StepTiming:
    """The uninstrumented step."""

    samples_s: tuple[float, ...]
    median_s: float
    q1_s: float
    q3_s: float
    min_s: float
    max_s: float
    #: the first call in this process (after loading the model), timed apart
    cold_s: float | None
    warmup_calls: int
    #: "cpu-clock" or "cuda-events"
    timer: str
    #: with several runs (--runs): the median of each run's samples, in run order
    run_medians_s: tuple[float, ...] = ()

    def loaded_problems(self) -> list[tuple[str, object, str]]:
        """A step takes time: its samples, median and run medians are finite and > 0 (a file
        read back; a median of 0 would make any comparison with it infinitely fast)."""
        return number_problems(self, finite_positive=("samples_s", "median_s", "run_medians_s"))


@dataclass(frozen=True)
class GenerationStats:
    prompt_tokens: int
    new_tokens: int
    #: time to first token: prefill of the prompt plus the first greedy pick (median)
    ttft_s: float
    ttft_samples_s: tuple[float, ...]
    #: time per output token after the first (median over repetitions of the mean step)
    tpot_s: float | None
    tpot_samples_s: tuple[float, ...]
    #: new tokens / median generation time
    tokens_per_s: float
    cold_ttft_s: float | None
    cold_tpot_s: float | None


@dataclass(frozen=True)
class RooflineRef:
    """The roofline fit the ops were placed against."""

    compute_rate_flops: float
    bandwidth_bytes_per_s: float
    launch_overhead_s: float
    median_abs_rel_error: float
    #: "saved fit", "calibrated now", or the file given with --roofline
    source: str
    device_name: str = ""
    dtype: str = ""


@dataclass(frozen=True)
class ProfileResult(Result, ModelStep):
    """Where one model step's time goes (the procedure: :mod:`infer_opt.profilers.model_profile`);
    which model and step it was: the :class:`ModelStep` fields."""

    KIND = "profile"

    device: str
    device_name: str
    #: the step's tensor inputs, e.g. "arg0 1×128 int64"
    inputs: str
    context: int | None
    new_tokens: int | None
    #: tokens one step processes (prefill B·T, decode B, generate B·N new tokens)
    tokens_per_step: int | None
    step: StepTiming
    tokens_per_s: float | None
    #: Σ per-op time / step time
    coverage: float
    op_time_s: float
    #: step - Σ per-op time: host, launch and framework overhead (negative: ops over-counted)
    unattributed_s: float
    #: max(0, unattributed) / step time
    unattributed_fraction: float
    #: how per-op times were taken
    op_timer: str
    #: profiler cost per nested event subtracted from CPU op times, and the total per step
    profiler_overhead_per_event_s: float
    profiler_overhead_subtracted_s: float
    #: the step under the profiler (CPU: wall time of a profiled repetition; CUDA: kernel time
    #: launched in it), median — compare with step.median_s to see the instrumentation's cost
    profiled_step_s: float
    #: profiled_step_s / step.median_s
    profiled_step_ratio: float
    ops: tuple[OpStat, ...]
    categories: tuple[CategoryStat, ...]
    modules: tuple[ModuleStat, ...]
    #: None: no usable fit (the warnings say why); bounds, efficiencies and at-bound speedups
    #: are then absent
    roofline: RooflineRef | None
    #: every category at its roofline bound together / every op free (predictions)
    all_at_bound_speedup: float | None
    all_free_ceiling: float
    #: Σ per-op time / max(step, Σ per-op time): the Amdahl fraction of all operators together
    attributed_fraction: float
    flops_counted: float
    #: counted FLOPs / step time
    achieved_flops_per_s: float
    #: 2·P_matmul·tokens + 4·B·H·Tq·Tk·d·L for built-ins and dense hf: models (None otherwise)
    flops_analytic: float | None
    #: counted / analytic - 1
    flops_vs_analytic: float | None
    #: op names that count zero FLOPs (no formula) and are not memory/layout ops
    zero_flop_ops: tuple[str, ...]
    unmatched_calls: int
    reps: int
    warmup: int
    warnings: tuple[Notice, ...] = ()
    generation: GenerationStats | None = None
    trace_path: str | None = None
    #: independent passes over the step, each with its own warm-up (--runs)
    runs: int = 1
    #: CPU intra-op threads (None on CUDA) and what float32 matmuls computed in (``""`` for
    #: other dtypes): with device and dtype, the run key a noise floor must share
    threads: int | None = None
    matmul_precision: str = ""
    #: what the step was made from (model, device, dtype, shape, warm-up, repetitions, runs,
    #: threads), resolved; a result saved before it was carried gets it rebuilt from the fields
    settings: StepSettings | None = None
    #: the machine's speed probe (a fixed matmul, median seconds) before and after the timed runs;
    #: compare withholds its verdict when it moved between the two sides (empty: not recorded)
    speed_probe_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.settings is None:
            object.__setattr__(self, "settings", self._settings_from_fields())

    def _settings_from_fields(self) -> StepSettings:
        """The settings of a result saved before they were carried, from its own fields."""
        default = Shape()
        shape = Shape(
            batch=self.batch if self.batch is not None else default.batch,
            seq_len=self.seq_len if self.seq_len is not None else default.seq_len,
            mode=self.mode,
            context=self.context if self.context is not None else default.context,
            new_tokens=self.new_tokens if self.new_tokens is not None else default.new_tokens,
        )
        return StepSettings(
            model=self.model, device=self.device, dtype=self.dtype, shape=shape, warmup=self.warmup,
            reps=self.reps, runs=self.runs, threads=self.threads,
        )  # fmt: skip

    def run_key(self) -> RunKey:
        """The key a noise floor of this profile must share: the settings' device, dtype and
        threads, the device model and the float32 matmul precision it ran at."""
        from infer_opt.run_key import RunKey

        settings = self.settings
        assert settings is not None  # set in __post_init__
        return RunKey(
            device_kind="cuda" if settings.device.startswith("cuda") else ("cpu" if settings.device else ""),
            device_name=self.device_name,
            dtype=settings.dtype,
            threads=settings.threads,
            matmul_precision=self.matmul_precision,
        )

    @property
    def step_time_s(self) -> float:
        """The uninstrumented step's median (``step.median_s``)."""
        return self.step.median_s
