"""View of a tensor-parallel profile: the ranks (step time, time in collectives, skew, the
straggler), the collectives seen in rank 0's trace, then rank 0's profile as ``profile`` shows
it (operators, categories with communication, Amdahl)."""

from __future__ import annotations

from infer_opt.reports import profile as single
from infer_opt.reports.view import Column, Table, View
from infer_opt.results.profile_tp import TPProfileResult
from infer_opt.units import format_bytes, format_duration, format_number, format_percent


def ranks_table(result: TPProfileResult) -> Table:
    rows = [
        {
            "rank": s.rank,
            "step_time_s": s.step_time_s,
            "communication_s": s.communication_s,
            "compute_s": s.compute_s,
            "share": s.communication_share,
        }
        for s in result.ranks
    ]
    return Table(
        "Ranks (measured)",
        [
            Column("rank", "Rank", csv_header="rank"),
            Column("step_time_s", "Step time", format_duration, csv_header="step_time_s"),
            Column("communication_s", "In collectives", format_duration, csv_header="communication_s"),
            Column("share", "Share", format_percent, csv_header="communication_share"),
            Column("compute_s", "Other operators", format_duration, csv_header="compute_s"),
        ],
        rows,
        caption="Step time: each rank's uninstrumented median. In collectives and other operators: from "
        "the rank's profiler trace; share of the step as in the categories (over the larger of the step "
        "and the operators' total).",
        highlight={result.straggler: "bad"} if len(result.ranks) > 1 else {},
    )


def collectives_table(result: TPProfileResult) -> Table:
    rows = [
        {"collective": c.collective, "bytes": c.bytes, "calls": c.calls, "time_s": c.time_s, "share": c.share}
        for c in result.collectives_seen
    ]
    return Table(
        "Collectives in rank 0's trace (measured)",
        [
            Column("collective", "Collective", align="left"),
            Column("bytes", "Message", lambda v: format_bytes(v), csv_header="bytes"),
            Column("calls", "Calls", csv_header="calls"),
            Column("time_s", "Time", format_duration, csv_header="time_s"),
            Column("share", "Share of step", format_percent, csv_header="share"),
        ],
        rows,
        caption="Per step. Time spent blocked in them is communication not hidden behind compute.",
    )


def _summary(result: TPProfileResult) -> list[tuple[str, str]]:
    straggler = next((s for s in result.ranks if s.rank == result.straggler), None)
    lines = [
        (
            "Tensor parallel",
            f"{result.world_size} ranks, {result.backend}; Megatron split, rank 0 shown below",
        ),
        ("Skew", f"{format_number(result.skew, 4)} (max/median of the per-rank step times)"),
    ]
    if straggler is not None:
        lines.append(
            (
                "Straggler",
                f"rank {straggler.rank}: {format_duration(straggler.compute_s)} in operators other than "
                "collectives (the others wait for it in each all_reduce)",
            )
        )
    return lines


def build_view(result: TPProfileResult, *, top: int = 15, by: str = "op") -> View:
    view = single.build_view(result, top=top, by=by)
    view.title = f"Tensor-parallel profile of {result.model} — {result.mode}, {result.world_size} ranks"
    view.summary = _summary(result) + view.summary
    view.tables = [ranks_table(result), collectives_table(result), *view.tables]
    if result.trace_dir:
        view.notes.append(
            f"One Chrome trace per rank in {result.trace_dir} (rank0.json, …), for HTA or Perfetto."
        )
    return view
