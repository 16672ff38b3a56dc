"""The ``kernels`` result kind: the kernel suite timed on one device and dtype (built by
:mod:`infer_opt.profilers.kernels`, read by :mod:`infer_opt.reports.kernels`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infer_opt.clocks import MODE_CPU, MODE_EVENTS, MODE_GRAPH, timing_name
from infer_opt.notices import Notice
from infer_opt.results import Result, number_problems
from infer_opt.stats import Summary

#: torch.compile (first call included) gets this long before its case is skipped
COMPILE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class SuiteSettings:
    """How the suite was timed."""

    warmup: int | None = 5
    warmup_time_s: float | None = None
    reps: int | None = 20
    max_time_s: float | None = None
    target_rel_iqr: float | None = None
    flush_cache: bool = False
    cuda_graphs: bool = False
    compile_timeout_s: float = COMPILE_TIMEOUT_S


@dataclass(frozen=True)
class KernelRow:
    """One case's measurement (``time_s`` None when it was skipped)."""

    name: str
    family: str
    label: str
    size: float
    dtype: str
    flops: float
    bytes: float
    time_s: float | None = None
    summary: Summary | None = None
    samples_s: tuple[float, ...] = ()
    cold_s: float | None = None
    mode: str = ""
    calls_per_sample: int = 1
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    reference: str | None = None
    error: float | None = None
    tolerance: float | None = None
    passed: bool | None = None
    skipped_reason: str | None = None
    warnings: tuple[Notice, ...] = ()
    #: with --cuda-graphs: the same kernel timed eagerly (the gap is launch overhead)
    eager_time_s: float | None = None
    #: with several runs (--runs): the median of each run, in run order (``()``: one run,
    #: whose median is ``time_s``); ``samples_s`` and ``summary`` then pool every run
    run_medians_s: tuple[float, ...] = ()

    def loaded_problems(self) -> list[tuple[str, object, str]]:
        """A timed case took time: its time, samples and run medians are finite and > 0 (a file
        read back; a median of 0 makes any comparison with it infinitely fast)."""
        return number_problems(
            self, finite_positive=("time_s", "samples_s", "run_medians_s"), non_negative=("flops", "bytes")
        )

    @property
    def key(self) -> str:
        return f"{self.name}[{self.label}]"

    @property
    def runs(self) -> int:
        """How many runs timed this case (0 when it was skipped)."""
        if self.time_s is None:
            return 0
        return len(self.run_medians_s) or 1


@dataclass(frozen=True)
class KernelSuiteResult(Result):
    """The kernel suite on one device and dtype."""

    KIND = "kernels"

    device: str
    device_name: str
    device_key: str
    dtype: str
    suite: str
    settings: SuiteSettings
    rows: tuple[KernelRow, ...] = ()
    device_info: dict[str, Any] = field(default_factory=dict)
    #: False when the run was interrupted or stopped: ``rows`` holds what finished
    complete: bool = True
    wall_s: float = 0.0
    #: why the sweep stopped early (e.g. a failed CUDA graph capture left the device unusable)
    warnings: tuple[Notice, ...] = ()
    #: independent passes over the suite asked for (--runs); each row says how many it holds
    runs: int = 1
    #: the machine's speed probe (a fixed matmul, median seconds) before the passes and after
    #: (empty: not recorded)
    speed_probe_s: tuple[float, ...] = ()

    @property
    def threads(self) -> int | None:
        """CPU intra-op threads of the run (None on CUDA)."""
        return None if self.device.startswith("cuda") else self.device_info.get("threads")

    @property
    def matmul_precision(self) -> str:
        """What float32 matmuls computed in (``""`` for other dtypes or when not recorded)."""
        return self.device_info.get("float32_matmul_precision", "") if self.dtype == "float32" else ""

    @property
    def timing(self) -> str:
        """How the kernels were timed (:func:`~infer_opt.clocks.timing_name`)."""
        if not self.device.startswith("cuda"):
            mode = MODE_CPU
        else:
            mode = MODE_GRAPH if self.settings.cuda_graphs else MODE_EVENTS
        return timing_name(mode, self.settings.flush_cache)
