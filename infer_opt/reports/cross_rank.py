"""Tables of the cross-rank analysis (``result.cross_rank``): the straggler per step, the rank
imbalance and the most skewed collectives. Every cell is a field of the result."""

from __future__ import annotations

from infer_opt.reports.view import Column, Table, rows_of
from infer_opt.results.trace import TraceResult
from infer_opt.units import format_bandwidth, format_duration

SKEWED_SHOWN = 10


def _step(step: int | None) -> str:
    return "whole trace" if step is None else f"#{step}"


def straggler_table(r: TraceResult) -> Table | None:
    cross = r.cross_rank
    if cross is None or not cross.straggler:
        return None
    columns = [
        Column("step", "Step", _step, csv_header="step", is_key=True),
        Column("rank", "Straggler", csv_header="rank"),
        Column("cost_s", "Others waited", format_duration, csv_header="cost_s"),
        Column("replayed_saving_s", "Replayed saving", format_duration, csv_header="replayed_saving_s"),
        Column("replayed_step_s_if_on_time", "If on time", format_duration, csv_header="step_if_on_time_s"),
        Column("replayed_step_s", "Replayed", format_duration, csv_header="replayed_step_s", importance=-2),
        Column("cause", "Its extra time", lambda c: c or "—", align="left", csv_header="cause"),
        Column("extra_compute_s", "+compute", format_duration, csv_header="extra_compute_s", importance=-1),
        Column("extra_host_s", "+host (idle)", format_duration, csv_header="extra_host_s", importance=-1),
        Column("extra_memcpy_s", "+memcpy", format_duration, csv_header="extra_memcpy_s", importance=-2),
        Column("extra_comm_s", "+comm", format_duration, csv_header="extra_comm_s", importance=-2),
        Column("collectives", "Collectives", csv_header="collectives", importance=-3),
        Column("replayed_vs_waits", "vs waits", align="left", csv_header="replayed_vs_waits", importance=-3),
    ]
    return Table(
        "Straggler per step (measured waits, an Amdahl bound; the saving replayed)",
        columns,
        rows_of(cross.straggler, columns),
        caption="The rank the others waited for longest in each step's collectives: what they waited for it "
        "alone (its start − the next-latest rank's), an upper bound on the step-time saving had it "
        "arrived with them. Its extra time: its step less the median of the other ranks'. " + _joint(r),
    )


def _joint(r: TraceResult) -> str:
    cross = r.cross_rank
    check = cross.joint_replay if cross is not None else None
    if check is None:
        return f"Replayed saving: {cross.joint_replay_note or 'not replayed'}." if cross is not None else ""
    converged = "" if check.converged else f", not converged in {check.iterations} iterations"
    return (
        "Replayed saving: the ranks replayed jointly (a collective ends after its last peer's start + its "
        "transfer), the straggler's own work in the step scaled to the median rank's (on_time_scale in the "
        f"JSON); the job's step ends with its last rank. Unedited joint replay against the trace: error "
        f"median {check.error_median:.2%}, worst {check.error_max:.2%} over {check.steps} step(s); "
        f"{check.matched} collectives matched, {check.left_out} left out (a member ended before its last "
        f"peer started: not one collective){converged}."
    )


def imbalance_table(r: TraceResult) -> Table | None:
    cross = r.cross_rank
    if cross is None or not cross.imbalance:
        return None
    columns = [
        Column("rank", "Rank", csv_header="rank", is_key=True),
        Column("step_time_s", "Step (median)", format_duration, csv_header="step_time_s"),
        Column("compute_s", "Compute", format_duration, csv_header="compute_s"),
        Column("idle_s", "Idle", format_duration, csv_header="idle_s"),
        Column("outlier", "Outlier", lambda o: "yes" if o else "", csv_header="outlier"),
    ]
    spread = "; ".join(
        f"{s.figure}: min {format_duration(s.min_s)}, median {format_duration(s.median_s)}, "
        f"max {format_duration(s.max_s)}"
        for s in cross.spread
    )
    return Table(
        "Rank imbalance (measured)",
        columns,
        rows_of(cross.imbalance, columns),
        caption=f"Median over each rank's steps. {spread}. Outliers: {cross.outlier_rule}.",
        highlight={i: "bad" for i, row in enumerate(cross.imbalance) if row.outlier},
    )


def skew_table(r: TraceResult) -> Table | None:
    cross = r.cross_rank
    if cross is None or not cross.collectives:
        return None
    shown = sorted(cross.collectives, key=lambda m: (-m.skew_s, m.start_s))[:SKEWED_SHOWN]
    columns = [
        Column("name", "Collective", align="left", csv_header="name", is_key=True),
        Column("group", "Group", lambda g: g or "—", align="left", csv_header="group", importance=-1),
        Column("index", "#", csv_header="index"),
        Column("step", "Step", _step, csv_header="step", importance=-1),
        Column("skew_s", "Skew", format_duration, csv_header="skew_s"),
        Column("last_rank", "Last rank", csv_header="last_rank"),
        Column("transfer_s", "Transfer", format_duration, csv_header="transfer_s"),
        Column(
            "busbw_bytes_per_s",
            "busbw",
            lambda b: format_bandwidth(b) if b else "—",
            csv_header="busbw_bytes_per_s",
            importance=-1,
        ),
    ]
    return Table(
        f"Most skewed collectives ({len(shown)} of {len(cross.collectives)} matched across ranks)",
        columns,
        rows_of(shown, columns),
        caption="Matched by process group, collective and order. Skew: last start − first start; transfer: "
        "the median over ranks of kernel time − wait (busbw from it). Every rank's wait is in the JSON.",
    )
