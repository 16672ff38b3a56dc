"""The ``compare`` kind: two sets of runs, per metric, with the test that tells them apart."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from infer_opt.notices import Notice
from infer_opt.results import Result

ALPHA = 0.05
THRESHOLD = 0.05
CONFIDENCE = 0.95
BOOTSTRAP = 2000
#: the stated default floors, used without a measured one: drift between runs on a shared
#: CPU was 10–40% and up to 2× for microsecond kernels (issue 17)
DEFAULT_FLOOR = 0.40
DEFAULT_FLOOR_SHORT = 1.00
NOISE = "within noise"
#: how a row's or the headline's uncertainty was found
RUN_LEVEL = "runs"
SINGLE_RUN = "single run"


@dataclass(frozen=True)
class SideStats:
    """One side's view of a row (medians over all its samples)."""

    median_s: float
    q1_s: float
    q3_s: float
    n: int


@dataclass(frozen=True)
class CompareRow:
    key: str
    label: str
    detail: str
    group: str
    base: SideStats | None
    new: SideStats | None
    #: e^{mean log run median(new) − mean log run median(base)}: below 1 = NEW faster (one
    #: run a side: median(new) / median(base))
    ratio: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    #: 1/ratio
    speedup: float | None = None
    #: two-sided p of the run-level t test (or, single run, of the normal approximation)
    p_value: float | None = None
    verdict: str = NOISE
    #: the within-run uncertainty comes from the summary (median, IQR), not from samples
    approximate: bool = False
    #: an operator's input shapes (profiles)
    shapes: tuple[tuple[int, ...], ...] = ()
    runs_base: int = 1
    runs_new: int = 1
    #: the row's own between-run spread: standard deviation of its log run medians, pooled
    #: over both sides (None with one run on a side)
    between_run_cv: float | None = None
    #: single run: the noise floor no verdict goes below (None: run-level test)
    floor: float | None = None
    #: p adjusted for the rows compared alongside (Benjamini–Hochberg): the verdict's p
    q_value: float | None = None

    @property
    def method(self) -> str:
        return SINGLE_RUN if self.floor is not None else RUN_LEVEL


@dataclass(frozen=True)
class Headline:
    """The overall comparison: ``speedup`` = base/new (above 1: NEW faster)."""

    what: str
    speedup: float
    #: standard error of the speedup
    speedup_std: float
    low: float
    high: float
    verdict: str
    p_value: float | None = None
    approximate: bool = False
    cases: int = 1
    #: the medians compared, when the headline is one timed quantity (a profile's step)
    base_s: float | None = None
    new_s: float | None = None
    runs_base: int = 1
    runs_new: int = 1
    between_run_cv: float | None = None
    floor: float | None = None
    #: the largest change the interval allows (``max(high, 1/low) − 1``, at least the single-run
    #: floor): "no significant difference (within ±X%)"; and half the interval's width as a factor
    #: (``√(high/low) − 1``): the change these runs can just tell apart. Derived when built.
    within: float = field(default=0.0, init=False)
    resolution: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        x = max(self.high, 1.0 / self.low) - 1.0 if self.low > 0 else math.inf
        object.__setattr__(self, "within", max(x, self.floor or 0.0))
        resolution = math.sqrt(self.high / self.low) - 1.0 if self.low > 0 else math.inf
        object.__setattr__(self, "resolution", resolution)


@dataclass(frozen=True)
class CompareResult(Result):
    KIND = "compare"

    #: the kind of the two results compared ("profile" or "kernels")
    compared: str
    base_name: str
    new_name: str
    subject: str
    headline: Headline
    rows: tuple[CompareRow, ...]
    categories: tuple[CompareRow, ...] = ()
    alpha: float = ALPHA
    threshold: float = THRESHOLD
    confidence: float = CONFIDENCE
    bootstrap: int = BOOTSTRAP
    seed: int = 0
    #: what differs between the runs when compared with --force
    differences: tuple[str, ...] = ()
    #: runs on each side (a kernel suite: its per-run levels; a profile: its step's runs)
    runs_base: int = 1
    runs_new: int = 1
    #: one run's noise floor for the headline, and where the noise came from
    noise_floor: float = DEFAULT_FLOOR
    noise_source: str = "default"
    noise_where: str = ""
    warnings: tuple[Notice, ...] = ()
    #: NEW's speed probe over BASE's (> 1: the machine ran slower for NEW); None: not recorded
    machine_speed_ratio: float | None = None
