"""The ``ab`` result kind: two command lines run in alternation and compared (built by
:mod:`infer_opt.profilers.ab`, read by :mod:`infer_opt.reports.ab`)."""

from __future__ import annotations

from dataclasses import dataclass

from infer_opt.notices import Notice
from infer_opt.results import Result
from infer_opt.results.compare import CompareResult
from infer_opt.results.noise_floor import NoiseFloor


@dataclass(frozen=True)
class AbRun:
    """One finished command: which side, which round, its result file and wall time."""

    side: str
    round: int
    file: str
    wall_s: float


@dataclass(frozen=True)
class AbResult(Result):
    """The alternated runs of two commands and their comparison."""

    KIND = "ab"

    base_command: str
    new_command: str
    base_env: tuple[str, ...]
    new_env: tuple[str, ...]
    rounds: int
    folder: str
    runs: tuple[AbRun, ...]
    comparison: CompareResult
    #: an A/A (the same command and environment on both sides): the noise it measured
    noise_floor: NoiseFloor | None = None
    noise_saved_to: str | None = None
    warnings: tuple[Notice, ...] = ()

    @property
    def is_aa(self) -> bool:
        return self.base_command == self.new_command and self.base_env == self.new_env
