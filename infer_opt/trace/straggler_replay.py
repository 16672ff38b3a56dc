"""The straggler's cost, replayed: the ranks replayed jointly (:mod:`.replay_ranks`), then again
with the straggler of a step as fast as the median rank, and the job's step read off both
(pure; numpy only).

**The job's step.** A step ends when its last rank ends it: per rank, the replayed end of the
step's window (:func:`.replay.window_replays`); the job's measured step is the longest of the
ranks' measured spans, its replayed step that plus the move of the last rank's end. Unedited,
the joint replay's error per step is |replayed − measured| / measured (the ranks' own replay
errors, and none from the collectives: the fixed point is each kernel's measured end).

**On time.** The straggler's own work in the step — its host calls and the host work between
them inside the step's CPU range, its GPU events of the step but its collective kernels — is
scaled by ``k = median over the other ranks of (span − communication) / its own``, at most 1:
its step as long as the median rank's outside communication. The collectives keep their
transfers and wait only for their last peer (the joint replay's fixed point). The saving is the
unedited step less the edited one: never negative (max-plus is monotone), 0 when no rank is
slower than the median (k = 1, nothing edited).

**Against the waits.** ``cost_s`` (:mod:`.cross_rank`) sums what the others waited for the
straggler alone: an Amdahl bound. The replay differs where the dependencies say so: less when
the straggler's own late work still sets the step's end or other ranks' waits were hidden under
their own work, more when its lateness cascaded through several collectives, or when it was late
for every peer at once (the blame counts only the gap to the next-latest).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from infer_opt.results.cross_rank import JointReplayCheck, Straggler
from infer_opt.results.trace import RankTrace
from infer_opt.trace import replay as trp
from infer_opt.trace.replay_ranks import (
    RankInput,
    collective_summary,
    fixed_point,
    match_summaries,
    replay_assigned,
    starts_of,
)

#: a replayed saving within this of the waits' cost (relative) is "the same"
SAME = 0.05


def job_steps(windows: Mapping[int, Sequence[tuple[trp.StepReplay, float]]]) -> dict[int | None, tuple]:
    """Per step: (measured job step s, replayed job step s, the last rank's replayed end µs), from
    each rank's windows (its replay and measured end, :func:`rank_call`'s "windows")."""
    found: dict[int | None, list[tuple[trp.StepReplay, float]]] = {}
    for ws in windows.values():
        for w, hi in ws:
            found.setdefault(w.step, []).append((w, hi))
    out = {}
    for step, ws in found.items():
        end = max(w.hi_us for w, _ in ws)
        measured = max(w.measured_s for w, _ in ws)
        out[step] = (measured, measured + (end - max(hi for _, hi in ws)) * 1e-6, end)
    return out


def scale(ranks: Sequence[RankTrace], rank: int, step: int | None) -> float:
    """k: the median other rank's (span − comm) in ``step`` over ``rank``'s, at most 1."""
    own, others = None, []
    for r in ranks:
        s = next((s for s in r.steps if s.step == step), None)
        if s is None:
            continue
        if r.rank == rank:
            own = s.span_s - s.comm_s
        else:
            others.append(s.span_s - s.comm_s)
    if own is None or own <= 0 or not others:
        return 1.0
    return float(min(1.0, max(0.0, float(np.median(others)) / own)))


def edited(inp: RankInput, step: int | None, k: float) -> tuple[np.ndarray, np.ndarray]:
    """The rank's durations and host gaps with its own work in ``step`` × ``k`` (module docstring)."""
    g, h = inp.graph, inp.graph.n_host
    dur, l2 = g.dur.copy(), g.l2.copy()
    window = next((w for w in inp.windows if w[0] == step), None)
    if window is None:
        return dur, l2
    _, idx, _, _, c_lo, c_hi = window
    comm = np.array([j for _, j in inp.collectives], dtype=np.int64)
    gpu = h + np.setdiff1d(idx, comm)
    t = g.start[:h] + g.t0_us
    host = (t >= c_lo) & (t < c_hi) & ~g.is_sync[:h]
    dur[gpu] *= k
    dur[:h][host] *= k
    pred = g.a2[:h]
    inside = np.flatnonzero(host & g.host_gap[:h] & (pred >= 0) & (pred < h))
    inside = inside[(t[pred[inside]] >= c_lo) & (t[pred[inside]] < c_hi)]  # both ends in the step
    l2[inside] *= k
    return dur, l2


def _versus(cost_s: float, saving_s: float) -> str:
    if abs(saving_s - cost_s) <= SAME * max(cost_s, saving_s, 1e-12):
        return "same"
    if saving_s < cost_s:
        return "less: waits overlapped work, or its own work sets the end"
    return "more: its lateness cascaded through later collectives"


def rank_call(
    inp: RankInput, what: str, assign: Mapping[int, float], edit: tuple[int | None, float] | None = None
) -> Any:
    """One rank's part of a joint replay, run where its input is (here, or on the Dask worker that
    made it: only this small answer crosses the cluster). ``what``: "collectives" (its
    :class:`~.replay_ranks.CollectiveSummary`), "starts" (its matched collectives' replayed starts,
    replayed with their durations ``assign``) or "windows" (each analyzed window's replay and
    measured end); ``edit`` = (step, k): its own work in that step × k (:func:`edited`)."""
    dur, l2 = edited(inp, *edit) if edit is not None else (inp.graph.dur, None)
    if what == "collectives":
        return collective_summary(inp, dur)
    rep = replay_assigned(inp.graph, dur, assign, l2)
    if what == "starts":
        return starts_of(rep, assign)
    s_obs, e_obs = inp.gpu_obs_us()
    windows = [(n, idx, lo, hi) for n, idx, lo, hi, _, _ in inp.windows]
    replayed = trp.window_replays(windows, s_obs, e_obs, rep)
    return [(w, hi) for w, (_, _, _, hi) in zip(replayed, windows, strict=True)]


#: a straggler's edit: (its rank, the step, k)
Edit = tuple[int, int | None, float]


class Ranks:
    """The ranks of a joint replay wherever their inputs are: a :class:`RankInput` here, or a Dask
    future of one, left on the worker that made it (the driver then holds no rank's graph: each
    round sends a rank its collectives' durations and gets their starts back)."""

    def __init__(self, inputs: Mapping[int, Any]) -> None:
        self.inputs = dict(inputs)

    def ask(
        self,
        what: str,
        assign: Mapping[int, Mapping[int, float]],
        edit: Edit | None,
        ranks: Sequence[int] | None = None,
    ) -> dict[int, Any]:
        """:func:`rank_call` on each of ``ranks`` (every one by default); ``edit`` = (rank, step, k)."""
        out, remote = {}, {}
        for r in self.inputs if ranks is None else ranks:
            mine = (edit[1], edit[2]) if edit is not None and edit[0] == r else None
            inp = self.inputs[r]
            if isinstance(inp, RankInput):
                out[r] = rank_call(inp, what, dict(assign.get(r, {})), mine)
            else:  # a distributed Future: run where the input is
                remote[r] = inp.client.submit(rank_call, inp, what, dict(assign.get(r, {})), mine, pure=False)
        if remote:
            client = next(iter(remote.values())).client
            out.update(zip(remote, client.gather(list(remote.values())), strict=True))
        return out


def joint(ranks: Ranks, edit: Edit | None = None) -> tuple:
    """The ranks replayed jointly (:mod:`.replay_ranks`), ``edit`` = (rank, step, k) applied:
    (collectives, left out, iterations, converged, each rank's windows)."""
    colls, inconsistent = match_summaries(ranks.ask("collectives", {}, edit))
    assign, _, iterations, converged = fixed_point(colls, lambda a: ranks.ask("starts", a, edit, list(a)))
    return colls, inconsistent, iterations, converged, ranks.ask("windows", assign, edit)


def on_time(
    inputs: Mapping[int, Any], ranks: Sequence[RankTrace], found: Sequence[Straggler]
) -> tuple[tuple[Straggler, ...], JointReplayCheck]:
    """Each straggler with its replayed step, unedited and on time, and the unedited joint
    replay's check against the trace (module docstring). ``inputs``: each rank's
    :class:`RankInput`, or a Dask future of one (:class:`Ranks`)."""
    where = Ranks(inputs)
    colls, inconsistent, iterations, converged, windows = joint(where)
    steps = job_steps(windows)
    errors = [abs(r - m) / m for m, r, _ in steps.values() if m > 0]
    check = JointReplayCheck(
        steps=len(steps),
        error_median=float(np.median(errors)) if errors else 0.0,
        error_max=max(errors, default=0.0),
        matched=len(colls),
        left_out=inconsistent,
        iterations=iterations,
        converged=converged,
    )
    out = []
    for s in found:
        if s.step not in steps or s.rank not in inputs:
            out.append(s)
            continue
        _, replayed, end = steps[s.step]
        k = scale(ranks, s.rank, s.step)
        saving = 0.0
        if k < 1.0:
            faster = job_steps(joint(where, (s.rank, s.step, k))[4])
            saving = (end - faster[s.step][2]) * 1e-6
        out.append(
            replace(
                s, replayed_step_s=replayed, replayed_step_s_if_on_time=replayed - saving,
                replayed_saving_s=saving, on_time_scale=k, replayed_vs_waits=_versus(s.cost_s, saving),
            )
        )  # fmt: skip
    return tuple(out), check


__all__ = ["Ranks", "edited", "job_steps", "joint", "on_time", "rank_call", "scale"]
