"""The ``noise-floor`` kind: the run-to-run noise of repeated identical runs, per metric."""

from __future__ import annotations

from dataclasses import dataclass

from infer_opt.results import Result
from infer_opt.run_key import RunKey


@dataclass(frozen=True)
class NoiseGroup:
    """One family's run-to-run noise: ``between_run_cv`` = σ, the pooled standard deviation
    of the log run medians of its rows (≈ the coefficient of variation of one run's median),
    and its single-run ``floor`` ``e^{z·√2·σ} − 1``."""

    key: str
    between_run_cv: float
    floor: float
    rows: int
    df: int


@dataclass(frozen=True)
class NoiseFloor(Result):
    """A device's run-to-run noise, measured by an A/A (the same command, alternated), per
    family (kernel suites; ``overall`` for the suite's level) or per operator category
    (profiles; ``category:<name>`` for category totals, ``step`` for the step). ``device``,
    ``device_name``, ``dtype``, ``threads``, ``matmul_precision`` and ``timing`` are the
    measured results' :class:`~infer_opt.run_key.RunKey`: a floor serves only
    results with the same key."""

    KIND = "noise-floor"

    compared: str
    device: str
    device_name: str
    dtype: str
    subject: str
    runs: int
    groups: tuple[NoiseGroup, ...]
    threads: int | None = None
    matmul_precision: str = ""
    timing: str = ""
    command: str = ""

    @property
    def key(self) -> RunKey:
        return RunKey.of(self)
