"""The requests of traces and engine settings (trace, tune, report):
:mod:`infer_opt.requests`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_opt.requests import (
    SCHEDULER,
    Bandwidth,
    Choice,
    CostSource,
    Count,
    CountList,
    Duration,
    Each,
    Edits,
    Flag,
    FlopRate,
    Fraction,
    InputFile,
    NumberList,
    Request,
    Size,
    Steps,
    TraceInput,
    option,
)


@dataclass(frozen=True)
class TraceRequest(Request):
    """``infer-opt trace`` and ``load_trace``: the traces (files, or folders of ranks) and how
    they are analyzed (``--augment`` and the display are the command line's)."""

    paths: tuple[Path, ...] = option(check=Each(TraceInput()), positional=True)
    steps: tuple[int, int] | None = option(None, Steps())
    device: str | None = option(None)
    peak_flops: float | None = option(None, FlopRate())
    peak_bandwidth: float | None = option(None, Bandwidth())
    hta_compat: bool = option(False, Flag())
    causal_flops: str = option("half", Choice(("half", "full")))
    matmul_fraction: float = option(0.7, Fraction(low=0.01))
    capture: tuple[Path, ...] | None = option(None, Each(InputFile()))
    scheduler: Any = option(None, SCHEDULER)
    workers: int | None = option(None, Count(1, 1024))
    strict: bool = option(False, Flag())
    roofline: Path | None = option(None, InputFile())
    joint_replay: bool = option(False, Flag())
    what_if: tuple[str, ...] = option((), Edits())
    kernels_from: Path | None = option(None, InputFile())


@dataclass(frozen=True)
class TuneCaptureSizesRequest(Request):
    """``infer-opt tune capture-sizes``: the batch sizes seen (a table, or Prometheus snapshots),
    the step cost, the limits (count, memory) and the current list."""

    cost_file: tuple[Any, ...] | None = option(None, Each(CostSource()))
    batches: Path | None = option(None, InputFile())
    prometheus: Path | None = option(None, InputFile())
    before: Path | None = option(None, InputFile())
    max_captures: int | None = option(None, Count(1, 1 << 16))
    memory_per_capture: float | None = option(None, Size())
    memory: Path | None = option(None, InputFile())
    memory_budget: float | None = option(None, Size())
    current: tuple[int, ...] | None = option(None, CountList(0))
    engine: str = option("vllm")
    engine_max_size: int | None = option(None, Count(1, 1 << 20))
    eager_cost_file: tuple[Any, ...] | None = option(None, Each(CostSource()))
    eager_overhead: float | None = option(None, Duration("ms"))
    capture_time: float | None = option(None, Duration("s"))


@dataclass(frozen=True)
class TuneSpeculativeRequest(Request):
    """``infer-opt tune speculative``: the acceptance rates (given, or from Prometheus snapshots),
    the target's and the draft's step cost, and the batch sizes."""

    target_cost_file: tuple[Any, ...] = option(check=Each(CostSource()))
    draft_cost_file: tuple[Any, ...] = option(check=Each(CostSource()))
    alphas: tuple[float, ...] | None = option(None, NumberList(low=0, high=1))
    prometheus: Path | None = option(None, InputFile())
    before: Path | None = option(None, InputFile())
    overhead: float = option(0.0, Duration("ms"))
    batches: Path | None = option(None, InputFile())
    batch_sizes: tuple[int, ...] | None = option(None, CountList(1, 1 << 20, increasing=True))
    k_max: int | None = option(None, Count(1, 64))


@dataclass(frozen=True)
class ReportRequest(Request):
    """``infer-opt report``: the saved results, in order, and the report's title (where it is
    written, with its plots and an HTML copy, is the command line's)."""

    results: tuple[Path, ...] = option(check=Each(InputFile()), positional=True)
    title: str = option("infer-opt report")
