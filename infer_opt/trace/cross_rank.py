"""Across the ranks of one job: collectives matched, the straggler per step and its cost, the
rank imbalance.

**Matching.** Each rank's NCCL/RCCL kernels (:func:`collective_records`, in the map) carry their
process group (Kineto's ``Process Group Name``; '' when the trace has none), their collective
(``Collective name``, else the kernel name) and their position among the rank's calls of that
group and collective, in start order. The calls with the same (group, collective, position) on
two or more ranks are one collective.

**Per collective.** skew = last start − first start; a rank's wait = the last peer's start − its
own start (it sat in the kernel waiting); transfer = the median over ranks of duration − wait
(clipped at 0): the time the data moved, from which busbw is the honest one (nccl-tests'
factor, the ranks matched as the group size when the trace does not say).

**Straggler per step.** Each collective blames its last arriver for (its start − the next-latest
start): what every other rank waited for it alone. Per step (the ProfilerStep the collective
starts in on the first rank) the straggler is the rank with the most blame, ``cost_s`` that sum
— an Amdahl bound on the step-time saving had it arrived with the others (the waits may overlap
other work; no replay is made here). Its extra time is its step's compute, host (GPU idle),
memcpy and communication less the median of the other ranks' for the same step.

**Imbalance.** Per rank the median over its steps of the step time, compute and idle;
min/median/max over the ranks, and outliers by a robust rule: a step time outside
median ± 3·MAD (MAD scaled by 1.4826 to estimate σ; with MAD = 0, any rank off the median).

Rank clocks are taken as comparable (as they are on one host, and as Kineto's are with
synchronised clocks across hosts). Pure: numpy only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infer_opt.cost_models import comm
from infer_opt.errors import InvalidInput
from infer_opt.results.cross_rank import CrossRank, MatchedCollective, RankImbalance, Spread, Straggler
from infer_opt.results.trace import RankTrace, StepTimeline
from infer_opt.trace import collectives as tc
from infer_opt.trace import timeline as tt
from infer_opt.trace.events import TraceEvents

#: a robust outlier: |x − median| > OUTLIER_MADS · MAD_SIGMA · MAD
OUTLIER_MADS = 3.0
MAD_SIGMA = 1.4826


@dataclass(frozen=True)
class CollectiveRecord:
    """One rank's collective kernel, as the matching needs it (µs, trace time)."""

    group: str
    name: str
    step: int | None
    ts_us: float
    dur_us: float
    bytes: int | None  # None: the trace does not say
    group_size: int | None


def collective_records(ev: TraceEvents, mask: np.ndarray) -> tuple[CollectiveRecord, ...]:
    """The rank's collective kernels in the analyzed windows, in start order."""
    g = ev.gpu
    comm_kernels = np.flatnonzero(mask & (tt.classify(ev) == tt.COMM))
    out = []
    for i in comm_kernels[np.argsort(g.ts_us[comm_kernels], kind="stable")].tolist():
        call = tc.collective_call(ev.name_of(g.name[i]), g.args[i], 0, float(g.ts_us[i]), float(g.dur_us[i]))
        if call is None:
            continue
        step = ev.steps[int(g.step[i])].number if g.step[i] >= 0 and ev.steps else None
        group = str(g.args[i].get("Process Group Name", ""))
        out.append(CollectiveRecord(group, call.collective, step, call.ts_us, call.dur_us, call.bytes,
                                    call.group_size))  # fmt: skip
    return tuple(out)


def _busbw(name: str, nbytes: int | None, group_size: int, transfer_s: float) -> float | None:
    """nccl-tests' bus bandwidth, None where the size, the time or the factor is unknown."""
    if not nbytes or nbytes <= 0 or transfer_s <= 0:
        return None
    try:
        return comm.busbw(name, nbytes, transfer_s, max(group_size, 1))
    except InvalidInput:  # a collective nccl-tests has no factor for
        return None


def match(records: dict[int, Sequence[CollectiveRecord]]) -> tuple[MatchedCollective, ...]:
    """The collectives found on two or more ranks (module docstring), in start order."""
    found: dict[tuple[str, str, int], list[tuple[int, CollectiveRecord]]] = defaultdict(list)
    for rank in sorted(records):
        seen: dict[tuple[str, str], int] = defaultdict(int)
        for r in records[rank]:
            index = seen[(r.group, r.name)]
            seen[(r.group, r.name)] += 1
            found[(r.group, r.name, index)].append((rank, r))
    out = []
    for (group, name, index), calls in found.items():
        if len(calls) < 2:
            continue
        starts = np.array([r.ts_us for _, r in calls])
        last = float(starts.max())
        waits = last - starts
        transfer_us = float(np.median(np.maximum(np.array([r.dur_us for _, r in calls]) - waits, 0.0)))
        first = calls[int(np.argmin(starts))][1]
        size = max((r.group_size or 0) for _, r in calls) or len(calls)
        out.append(
            MatchedCollective(
                name=name,
                group=group,
                index=index,
                step=calls[0][1].step,
                bytes=first.bytes,
                ranks=tuple(rank for rank, _ in calls),
                start_s=float(starts.min()) * 1e-6,
                skew_s=(last - float(starts.min())) * 1e-6,
                wait_s=tuple(float(w) * 1e-6 for w in waits),
                last_rank=calls[int(np.argmax(starts))][0],
                transfer_s=transfer_us * 1e-6,
                busbw_bytes_per_s=_busbw(name, first.bytes, size, transfer_us * 1e-6),
            )
        )
    return tuple(sorted(out, key=lambda m: (m.start_s, m.group, m.name, m.index)))


def blame(m: MatchedCollective) -> float:
    """What the others waited for ``m.last_rank`` alone: its start − the next-latest start (s)."""
    if len(m.wait_s) < 2:
        return 0.0
    # wait = last − start, so the next-latest start is the second-smallest wait
    return float(sorted(m.wait_s)[1])


def _step_of(rank: RankTrace, step: int | None) -> StepTimeline | None:
    return next((s for s in rank.steps if s.step == step), None)


_CAUSES = (("compute", "compute_s"), ("host", "idle_s"), ("memcpy", "memcpy_s"), ("communication", "comm_s"))


def _extra(ranks: Sequence[RankTrace], rank: int, step: int | None) -> dict[str, float]:
    """The straggler's step figures less the median of the other ranks' (0 when unknown)."""
    own = next((_step_of(r, step) for r in ranks if r.rank == rank), None)
    others = [s for r in ranks if r.rank != rank and (s := _step_of(r, step)) is not None]
    if own is None or not others:
        return {cause: 0.0 for cause, _ in _CAUSES}
    return {
        cause: getattr(own, f) - float(np.median([getattr(s, f) for s in others])) for cause, f in _CAUSES
    }


def stragglers(matched: Sequence[MatchedCollective], ranks: Sequence[RankTrace]) -> tuple[Straggler, ...]:
    """Per step, the rank blamed most (module docstring); steps without matched collectives have none."""
    by_step: dict[int | None, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[int | None, int] = defaultdict(int)
    for m in matched:
        by_step[m.step][m.last_rank] += blame(m)
        counts[m.step] += 1
    out = []
    for step in sorted(by_step, key=lambda s: (s is None, s if s is not None else 0)):
        blamed = by_step[step]
        rank = min(blamed, key=lambda r: (-blamed[r], r))
        extra = _extra(ranks, rank, step)
        cause = max(extra, key=lambda c: extra[c])
        out.append(
            Straggler(
                step=step,
                rank=rank,
                cost_s=blamed[rank],
                cause=cause if extra[cause] > 0 else "",
                extra_compute_s=extra["compute"],
                extra_host_s=extra["host"],
                extra_memcpy_s=extra["memcpy"],
                extra_comm_s=extra["communication"],
                collectives=counts[step],
            )
        )
    return tuple(out)


def outliers(values: Sequence[float]) -> list[bool]:
    """Which values are outside median ± 3·MAD (scaled to σ); MAD = 0: any value off the median."""
    x = np.asarray(values, dtype=float)
    if len(x) < 3:
        return [False] * len(x)
    mid = float(np.median(x))
    mad = float(np.median(np.abs(x - mid)))
    if mad == 0:
        return [bool(v != mid) for v in x]
    return [bool(abs(v - mid) > OUTLIER_MADS * MAD_SIGMA * mad) for v in x]


def imbalance(ranks: Sequence[RankTrace]) -> tuple[tuple[RankImbalance, ...], tuple[Spread, ...]]:
    """Per rank the median step time, compute and idle over its steps; their spread; outliers."""
    rows = []
    for r in ranks:
        steps = r.steps or ()
        compute = float(np.median([s.compute_s for s in steps])) if steps else 0.0
        idle = float(np.median([s.idle_s for s in steps])) if steps else 0.0
        rows.append(RankImbalance(r.rank, r.step_time_median_s, compute, idle))
    flags = outliers([row.step_time_s for row in rows])
    rows = [
        RankImbalance(r.rank, r.step_time_s, r.compute_s, r.idle_s, f)
        for r, f in zip(rows, flags, strict=True)
    ]
    spread = []
    for figure in ("step_time_s", "compute_s", "idle_s"):
        x = np.array([getattr(r, figure) for r in rows])
        spread.append(Spread(figure, float(x.min()), float(np.median(x)), float(x.max())))
    return tuple(rows), tuple(spread)


def analyze_ranks(ranks: Sequence[RankTrace], records: dict[int, Sequence[CollectiveRecord]]) -> CrossRank:
    """The cross-rank analysis of ``ranks`` (two or more, distinct rank ids)."""
    matched = match(records)
    rows, spread = imbalance(ranks)
    return CrossRank(
        ranks=len(ranks),
        straggler=stragglers(matched, ranks),
        collectives=matched,
        imbalance=rows,
        spread=spread,
    )


__all__ = ["CollectiveRecord", "analyze_ranks", "blame", "collective_records", "imbalance", "match",
           "outliers", "stragglers"]  # fmt: skip
