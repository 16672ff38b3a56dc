"""Rows of the cross-rank analysis (``result.cross_rank`` of a ``trace`` result with two or
more ranks of one job): collectives matched across ranks, the straggler per step, and the
rank-imbalance table. Built by :mod:`infer_opt.trace.cross_rank`. Times are seconds."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MatchedCollective:
    """One collective matched across ranks (same process group, same kind, same position among
    each rank's calls of that group and kind). ``wait_s[i]`` is ``ranks[i]``'s wait for the last
    peer (last start − own start); ``transfer_s`` the median over ranks of duration − wait."""

    name: str  # all_reduce, all_gather, send_recv, ...
    group: str  # the process group ('' when the trace does not name it)
    index: int  # the position among each rank's calls of this group and name
    step: int | None  # the ProfilerStep it starts in (the first rank's)
    bytes: int | None  # nccl-tests' message size (None: the trace does not say)
    ranks: tuple[int, ...]
    start_s: float  # the first start, trace time
    skew_s: float  # last start − first start
    wait_s: tuple[float, ...]  # per rank, aligned with ``ranks``
    last_rank: int  # the rank the others waited for
    transfer_s: float
    busbw_bytes_per_s: float | None = None  # from transfer_s (None when the size or factor is unknown)


@dataclass(frozen=True)
class Straggler:
    """The rank the others waited for longest in a step, and what that cost.

    ``cost_s``: Σ over the step's collectives where it arrived last of (its start − the
    next-latest rank's start): the time every other rank waited for it alone. As a saving of
    the step time it is an Amdahl bound (``cost_basis``): the waits may overlap other work.
    ``extra_*_s``: its step's figures less the median of the other ranks' (what its extra time
    is), ``cause`` the largest of them."""

    step: int | None
    rank: int
    cost_s: float
    cost_basis: str = "amdahl_bound"
    cause: str = ""  # compute / host / memcpy / communication / '' (none larger)
    extra_compute_s: float = 0.0
    extra_host_s: float = 0.0  # idle: the GPU waiting on the host
    extra_memcpy_s: float = 0.0
    extra_comm_s: float = 0.0
    collectives: int = 0  # in the step, matched across ranks
    # replayed (dependencies kept; trace/straggler_replay.py): the ranks replayed jointly, the
    # job's step (its last rank's end) unedited and with this rank's own work in the step (host
    # and kernels, not its collectives) scaled by ``on_time_scale`` (the median other rank's
    # step less communication / its own, ≤ 1): as fast as the median. None: not replayed
    replayed_step_s: float | None = None
    replayed_step_s_if_on_time: float | None = None
    replayed_saving_s: float | None = None  # replayed_step_s − replayed_step_s_if_on_time
    on_time_scale: float | None = None
    replayed_vs_waits: str = ""  # how the replayed saving differs from cost_s, and why


@dataclass(frozen=True)
class RankImbalance:
    """One rank: median over its steps. ``outlier``: its step time is outside median ± 3·MAD
    (MAD scaled to σ, 1.4826 × the median absolute deviation) over the ranks."""

    rank: int
    step_time_s: float
    compute_s: float
    idle_s: float
    outlier: bool = False


@dataclass(frozen=True)
class Spread:
    """min / median / max of one imbalance figure over the ranks."""

    figure: str  # step_time_s, compute_s, idle_s
    min_s: float
    median_s: float
    max_s: float


@dataclass(frozen=True)
class JointReplayCheck:
    """The ranks replayed jointly, unedited, against the trace: the job's step (its last rank's
    end) per step, |replayed − measured| / measured."""

    steps: int
    error_median: float
    error_max: float
    matched: int  # collectives constraining the replay
    left_out: int  # matches that cannot be one collective (a member ended before the last start)
    iterations: int
    converged: bool


@dataclass(frozen=True)
class CrossRank:
    """The cross-rank analysis of two or more ranks of one job."""

    ranks: int
    straggler: tuple[Straggler, ...] = ()
    collectives: tuple[MatchedCollective, ...] = ()
    imbalance: tuple[RankImbalance, ...] = ()
    spread: tuple[Spread, ...] = ()
    outlier_rule: str = "median ± 3·MAD (MAD × 1.4826) of the ranks' median step time"
    matched_by: str = "process group, collective, and order among each rank's calls of both"
    joint_replay: JointReplayCheck | None = None  # None: not replayed (joint_replay_note says why)
    joint_replay_note: str = ""
