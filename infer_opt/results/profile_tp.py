"""The ``profile-tp`` result kind: a tensor-parallel step profiled on every rank (built by
:mod:`infer_opt.profilers.profile_tp`, read by :mod:`infer_opt.reports.profile_tp`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from infer_opt.results.profile import ProfileResult


@dataclass(frozen=True)
class RankStep:
    """One rank's step."""

    rank: int
    #: the uninstrumented step's median on this rank
    step_time_s: float
    #: per step, in collectives (enqueue and wait), from this rank's profiler trace
    communication_s: float
    #: per step, in every other operator, from the same trace
    compute_s: float
    #: the step under the profiler (the trace's own step time), median
    profiled_step_s: float
    #: time in collectives over the larger of the step and the operators' total (as the profile's
    #: fractions are taken: never past 100%; None for an empty step), derived when built
    communication_share: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        whole = max(self.step_time_s, self.communication_s + self.compute_s)
        object.__setattr__(self, "communication_share", self.communication_s / whole if whole > 0 else None)


@dataclass(frozen=True)
class CollectiveSeen:
    """A collective of one message size as rank 0's trace saw it, per step."""

    collective: str
    #: message size of one call
    bytes: int
    calls: int
    #: time per step in it (its op and the wait for it)
    time_s: float
    #: time / step time
    share: float


@dataclass(frozen=True)
class TPProfileResult(ProfileResult):
    """A tensor-parallel profile: rank 0's profile of its shard, plus every rank's step."""

    KIND = "profile-tp"

    world_size: int = 1
    backend: str = ""
    ranks: tuple[RankStep, ...] = ()
    #: max / median of the per-rank step times
    skew: float = 1.0
    #: the rank with the most time in operators other than collectives
    straggler: int = 0
    collectives_seen: tuple[CollectiveSeen, ...] = ()
    trace_dir: str | None = None
