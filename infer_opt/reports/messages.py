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
        + (
            f"(time limit {format_duration(v['max_time_s'])})"
            if v.get("max_time_s")
            else f"(at most {v['max_reps']} repetitions)"
        )
        + "; raise --max-time or quiet the machine"
    ),
    "reps_cut_by_time": lambda v: (
        f"stopped after {v['reps']} of {v['wanted']} repetitions "
        f"(time limit {format_duration(v['max_time_s'])})"
    ),
    # ---- amdahl (cost_models/amdahl.py)
    "parts_slower": lambda v: f"speedup below 1 for {', '.join(v['parts'])}: that part gets slower",
    "slower_overall": lambda v: "the change makes the whole slower (end-to-end speedup below 1)",
    "target_above_ceiling": lambda v: (
        f"impossible: target {v['target']:g}x is at or above the ceiling {v['ceiling']:.4g}x "
        "(the part would have to take no time at all)"
    ),
    "part_takes_no_time": lambda v: (
        "the part takes none of the time: the target holds for any speedup"
        if v["target_holds"]
        else "the part takes none of the time, and the target is above what the rest allows"
    ),
    # ---- input files (infer_opt/tables.py; robustness helper)
    "extra_columns": lambda v: (
        f"{v['file']}: column{'s' if len(v['columns']) > 1 else ''} {', '.join(v['columns'])} not used "
        "(check the spelling if one was meant to be read)"
    ),
}


def text(notice: Notice | str) -> str:
    """``notice`` in words, prefixed with its subject. An unknown code (a result saved by a
    newer infer-opt) is shown as its code and values rather than dropped."""
    if isinstance(notice, str):  # TRANSITION: free-text warnings not yet given a code
        return notice
    words = MESSAGES.get(notice.code)
    if words is None:
        values = ", ".join(f"{k}={v}" for k, v in notice.values.items())
        body = f"{notice.code}" + (f" ({values})" if values else "")
    else:
        body = words(notice.values)
    return body if notice.subject is None else f"{notice.subject}: {body}"


def as_json(notice: Notice | str) -> dict[str, Any]:
    """What the JSON envelope lists for a warning: code, words, subject and values."""
    if isinstance(notice, str):  # TRANSITION
        return {"code": "unclassified", "message": notice}
    out: dict[str, Any] = {"code": notice.code, "message": text(notice)}
    if notice.subject is not None:
        out["subject"] = notice.subject
    if notice.values:
        out["values"] = dict(notice.values)
    return out


__all__ = ["MESSAGES", "as_json", "text"]
