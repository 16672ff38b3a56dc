"""The requests of a model step (profile, predict, validate, calibrate):
:mod:`infer_opt.requests`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_opt.requests import (
    MAX_REPS,
    MAX_RUNS,
    MAX_SIZE,
    MAX_TP,
    MODES,
    THREADS,
    Choice,
    Count,
    Each,
    Fit,
    Flag,
    InputFile,
    Request,
    Strings,
    Sweep,
    TracePath,
    option,
)


@dataclass(frozen=True)
class StepRequest(Request):
    """A model step (``profile``, ``predict``): the model, where it runs and its shape."""

    model: str = option("tiny", positional=True)
    batch: int = option(1, Count(1, MAX_SIZE))
    seq_len: int = option(128, Count(1, MAX_SIZE))
    mode: str = option("prefill", Choice(MODES))
    context: int = option(128, Count(0, MAX_SIZE))
    new_tokens: int = option(32, Count(1, MAX_SIZE))
    device: str = option("auto")
    dtype: str = option("auto")
    threads: int | None = option(None, THREADS)
    hf_config: tuple[str, ...] = option((), Strings())

    def shape(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("batch", "seq_len", "mode", "context", "new_tokens")}


@dataclass(frozen=True)
class ProfileRequest(StepRequest):
    """``infer-opt profile`` on one rank (``--tp`` starts ranks: the command line's)."""

    warmup: int = option(3, Count(0, MAX_REPS))
    reps: int = option(20, Count(1, MAX_REPS))
    runs: int = option(1, Count(1, MAX_RUNS))
    roofline: Path | None = option(None, Fit())
    trace: Path | None = option(None, TracePath())

    def settings(self) -> Any:
        from infer_opt.steps import Shape, StepSettings

        return StepSettings(
            self.model, self.device, self.dtype, Shape(**self.shape()), warmup=self.warmup, reps=self.reps,
            runs=self.runs, threads=self.threads, hf_config=self.hf_config,
        )  # fmt: skip


@dataclass(frozen=True)
class PredictRequest(StepRequest):
    """``infer-opt predict``: a step's time from a calibration, without running it."""

    calibration: Path | None = option(None, InputFile())
    sweep: tuple[str, tuple[int, ...]] | None = option(None, Sweep())
    tp: int = option(1, Count(1, MAX_TP))
    comm: Path | None = option(None, InputFile())


@dataclass(frozen=True)
class ValidateRequest(StepRequest):
    """``infer-opt validate`` over a shape grid (``--against`` a trace: the command line's)."""

    mode: tuple[str, ...] | None = option(None, Each(Choice(MODES)))
    new_tokens: int = option(8, Count(1, MAX_SIZE))
    grid: tuple[tuple[str, tuple[int, ...]], ...] | None = option(None, Each(Sweep()))
    calibration: Path | None = option(None, InputFile())
    warmup: int = option(3, Count(0, MAX_REPS))
    reps: int = option(10, Count(1, MAX_REPS))
    passes: int = option(1, Count(1, 10))


@dataclass(frozen=True)
class CalibrateRequest(Request):
    """``infer-opt calibrate``: the operator calibration (``--from-trace``: the command line's)."""

    device: str = option("auto")
    dtype: str = option("auto")
    threads: int | None = option(None, THREADS)
    only: tuple[str, ...] | None = option(None, Strings())
    shapes: str = option("standard", Choice(("standard", "tiny")))
    reps: int = option(5, Count(3, 1000))
    continue_: bool = option(False, Flag())
