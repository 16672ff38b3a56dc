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
        Column("cause", "Its extra time", lambda c: c or "—", align="left", csv_header="cause"),
        Column("extra_compute_s", "+compute", format_duration, csv_header="extra_compute_s", importance=-1),
        Column("extra_host_s", "+host (idle)", format_duration, csv_header="extra_host_s", importance=-1),
        Column("extra_memcpy_s", "+memcpy", format_duration, csv_header="extra_memcpy_s", importance=-2),
        Column("extra_comm_s", "+comm", format_duration, csv_header="extra_comm_s", importance=-2),
        Column("collectives", "Collectives", csv_header="collectives", importance=-3),
    ]
    return Table(
        "Straggler per step (measured; cost an Amdahl bound)",
        columns,
        rows_of(cross.straggler, columns),
        caption="The rank the others waited for longest in each step's collectives: what they waited for it "
        "alone (its start − the next-latest rank's), an upper bound on the step-time saving had it "
        "arrived with them. Its extra time: its step less the median of the other ranks'.",
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
