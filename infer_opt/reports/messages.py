"""Words for :class:`~infer_opt.notices.Notice` codes: the one place a warning or a
verdict reason is phrased (the core only says which code and which values).

Each entry maps a code to a function of the notice's values returning one sentence that
says what happened and, for a warning, the fix. Group entries by the part of the package
that emits them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from infer_opt.notices import Notice
from infer_opt.units import format_duration

Words = Callable[[Mapping[str, Any]], str]


def _pct(value: float) -> str:
    return f"{100.0 * value:.0f}%"


MESSAGES: dict[str, Words] = {
    # ---- timing (profilers/timing.py), shared by every measurement
    "high_variance": lambda v: (
        f"high variance (IQR/median {_pct(v['rel_iqr'])}): raise --reps or --warmup, close other programs"
    ),
    "variance_not_settled": lambda v: (
        f"IQR/median {_pct(v['rel_iqr'])} did not settle below {_pct(v['target'])} "
        + (f"(time limit {format_duration(v['max_time_s'])})" if v.get("max_time_s") else
           f"(at most {v['max_reps']} repetitions)")
        + "; raise --max-time or quiet the machine"
    ),
    "reps_cut_by_time": lambda v: (
        f"stopped after {v['reps']} of {v['wanted']} repetitions "
        f"(time limit {format_duration(v['max_time_s'])})"
    ),
    # ---- communication and tensor parallelism (profilers/comm.py, profilers/tp_profile.py)
    "comm_single_rank": lambda v: (
        f"a collective needs at least two ranks (devices): this run has one ({v['device']}), so only "
        "the local copy was measured; run it with --nproc 2 or under torchrun --nproc-per-node 2"
    ),
    "comm_partial": lambda v: (
        f"the sweep stopped early: {v['measured']} of {v['planned']} message sizes measured "
        "(kept as they were when it stopped)"
    ),
    "comm_high_variance": lambda v: (
        f"{v['sizes']} message size(s) vary by more than 10% (IQR/median up to {_pct(v['worst_rel_iqr'])}): "
        "raise --reps, quiet the machine, or give each rank its own cores"
    ),
    "comm_fit_unpinned": lambda v: (
        f"the sizes do not pin the fit's {' and '.join(v['parameters'])} (it ended at the edge of "
        "its range): widen --min-size/--max-size around the crossover"
    ),
}


def text(notice: Notice) -> str:
    """``notice`` in words, prefixed with its subject. An unknown code (a result saved by a
    newer infer-opt) is shown as its code and values rather than dropped."""
    words = MESSAGES.get(notice.code)
    if words is None:
        values = ", ".join(f"{k}={v}" for k, v in notice.values.items())
        body = f"{notice.code}" + (f" ({values})" if values else "")
    else:
        body = words(notice.values)
    return body if notice.subject is None else f"{notice.subject}: {body}"


def as_json(notice: Notice) -> dict[str, Any]:
    """What the JSON envelope lists for a warning: code, words, subject and values."""
    out: dict[str, Any] = {"code": notice.code, "message": text(notice)}
    if notice.subject is not None:
        out["subject"] = notice.subject
    if notice.values:
        out["values"] = dict(notice.values)
    return out


__all__ = ["MESSAGES", "as_json", "text"]
