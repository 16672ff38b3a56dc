"""The ``amdahl`` kind: the end-to-end speedup of several parts and each part's share."""

from __future__ import annotations

from dataclasses import dataclass, field

from infer_opt.notices import Notice
from infer_opt.results import Result


@dataclass(frozen=True)
class PartResult:
    name: str
    fraction: float
    speedup: float
    #: this part's time after the change, as a fraction of the original total time: f/s
    time_after: float
    #: this part's share of the new total time
    share_after: float
    #: speedup of this part alone (others as given) that reaches the target, if one was set
    required_speedup: float | None = None
    slowdown: bool = False


@dataclass(frozen=True)
class AmdahlResult(Result):
    KIND = "amdahl"

    parts: tuple[PartResult, ...]
    added: float
    #: fraction of the original time no part touches: 1 - Σf
    untouched_fraction: float
    #: new total time as a fraction of the original: (1 - Σf) + Σf/s + a
    new_time: float
    speedup: float
    #: the parts made free (s -> ∞), overhead kept: 1 / ((1 - Σf) + a)
    ceiling: float
    target: float | None = None
    #: the one speedup that, applied to every part, reaches the target (None: see reason)
    required_speedup: float | None = None
    #: why no required speedup is given: ``target_above_ceiling`` or ``part_takes_no_time``
    reason: Notice | None = None
    #: False when only a target was given: the parts were evaluated at s = 1 (unchanged)
    speedup_given: bool = True
    #: ``parts_slower`` (a part's s < 1), ``slower_overall`` (S < 1)
    warnings: tuple[Notice, ...] = ()
    #: the untouched rest's and the added overhead's shares of the new total time, derived when
    #: the result is built (so ``--json`` carries them; an older file gets them on load)
    untouched_share_after: float = field(default=0.0, init=False)
    added_share_after: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        for name, part in (
            ("untouched_share_after", self.untouched_fraction),
            ("added_share_after", self.added),
        ):
            object.__setattr__(self, name, part / self.new_time if self.new_time else 0.0)
