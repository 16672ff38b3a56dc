"""The requests of the kernel suite (kernels, roofline):
:mod:`infer_opt.requests`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_opt.requests import (
    DTYPES,
    MAX_KERNEL_REPS,
    MAX_RUNS,
    MAX_WARMUP_S,
    THREADS,
    Bandwidth,
    Choice,
    Count,
    Duration,
    Flag,
    FlopRate,
    Measurements,
    OutputFile,
    Reps,
    Request,
    Resume,
    Strings,
    Warmup,
    option,
)


@dataclass(frozen=True)
class SuiteRequest(Request):
    """The kernel suite's device and timing options (``kernels``, ``roofline`` measuring now)."""

    device: str = option("auto")
    dtype: str = option("auto", Choice(DTYPES))
    suite: str = option("quick", Choice(("quick", "full")))
    l2_flush: bool = option(False, Flag())
    warmup: Any = option(5, Warmup(MAX_KERNEL_REPS, MAX_WARMUP_S))
    reps: Any = option(20, Reps(MAX_KERNEL_REPS))
    threads: int | None = option(None, THREADS)

    def settings(self, max_time_s: float | None = None, cuda_graphs: bool = False) -> Any:
        """The timing options as :class:`SuiteSettings` (``reps`` None = adaptive, capped at 2 s)."""
        from infer_opt.results.kernels import SuiteSettings

        calls, seconds = self.warmup
        if self.reps is None and max_time_s is None:
            max_time_s = 2.0
        return SuiteSettings(
            warmup=calls, warmup_time_s=seconds, reps=self.reps, max_time_s=max_time_s,
            flush_cache=self.l2_flush, cuda_graphs=cuda_graphs,
        )  # fmt: skip


@dataclass(frozen=True)
class KernelsRequest(SuiteRequest):
    """``infer-opt kernels``: time the kernel suite."""

    only: tuple[str, ...] | None = option(None, Strings(comma=True))
    cuda_graphs: bool = option(False, Flag())
    max_time: float | None = option(None, Duration(allow_zero=False, most_s=24 * 3600.0))
    runs: int = option(1, Count(1, MAX_RUNS))
    resume: Any = option(None, Resume("kernels", "a kernels result"))

    def settings(self, max_time_s: float | None = None, cuda_graphs: bool = False) -> Any:
        return super().settings(self.max_time, self.cuda_graphs)


@dataclass(frozen=True)
class RooflineRequest(SuiteRequest):
    """``infer-opt roofline``: fit the empirical roofline to measurements, or measure now."""

    measurements: Any = option(None, Measurements(), positional=True)
    bootstrap: int = option(200, Count(0, 100_000))
    seed: int = option(0, Count(0))
    peak_flops: float | None = option(None, FlopRate())
    peak_bandwidth: float | None = option(None, Bandwidth())
    fit_on: str = option("auto")
    save: Path | None = option(None, OutputFile())
    no_save: bool = option(False, Flag())
