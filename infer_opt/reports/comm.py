"""View of a collective sweep: the α-β fit per collective (fitted, with intervals) and every
message size's measured time and bandwidths."""

from __future__ import annotations

from collections.abc import Callable

from infer_opt.cost_models.comm import LOCAL_COPY
from infer_opt.reports.view import Column, Table, View
from infer_opt.results.comm import CollectiveSweep, CommResult
from infer_opt.units import format_bandwidth, format_bytes, format_duration, format_percent


def _interval(fmt: Callable[..., str], sig: int = 2) -> Callable[[tuple[float, float] | None], str]:
    def show(interval: tuple[float, float] | None) -> str:
        return "—" if interval is None else f"{fmt(interval[0], sig)}–{fmt(interval[1], sig)}"

    return show


def _fit_row(s: CollectiveSweep) -> dict[str, object]:
    return {
        "collective": s.collective,
        "alpha_s": s.alpha_s,
        "alpha_interval": s.alpha_interval,
        "beta_bytes_per_s": s.beta_bytes_per_s,
        "beta_interval": s.beta_interval,
        "crossover_bytes": s.crossover_bytes,
        "fit_error": s.fit_median_abs_rel_error,
    }


def fit_table(result: CommResult) -> Table:
    """One row per collective: α and β with their bootstrap 95% intervals, the crossover."""
    columns = [
        Column("collective", "Collective", align="left"),
        Column("alpha_s", "α", format_duration, csv_header="alpha_s"),
        Column("alpha_interval", "α 95% CI", _interval(format_duration), csv_header="alpha_ci_s"),
        Column("beta_bytes_per_s", "β", format_bandwidth, csv_header="beta_bytes_per_s"),
        Column("beta_interval", "β 95% CI", _interval(format_bandwidth), csv_header="beta_ci_bytes_per_s"),
        Column("crossover_bytes", "S* = α·β", lambda v: format_bytes(v), csv_header="crossover_bytes"),
        Column("fit_error", "Fit error", format_percent, csv_header="fit_median_abs_rel_error"),
    ]
    return Table(
        "Fitted t = α + S/β per collective (a model fitted to the measurements)",
        columns,
        [_fit_row(s) for s in result.collectives],
        caption="t = α + S/β fitted robustly in log space (soft-L1); fit error: median |t̂−t|/t over the "
        "sizes; 95% intervals from a bootstrap over the sizes. Below S* latency dominates.",
    )


def points_table(result: CommResult) -> Table:
    """Every collective at every message size: the slowest rank's median and its spread."""
    rows = [
        {
            "collective": s.collective,
            "bytes": p.bytes,
            "time_s": p.time_s,
            "iqr": (p.q1_s, p.q3_s),
            "algbw": p.algbw_bytes_per_s,
            "busbw": p.busbw_bytes_per_s,
            "slowest_rank": p.slowest_rank,
            "predicted_s": s.predict_s(p.bytes),
        }
        for s in result.collectives
        for p in s.points
    ]
    columns = [
        Column("collective", "Collective", align="left"),
        Column("bytes", "Size S", lambda v: format_bytes(v), csv_header="bytes"),
        Column("time_s", "Time", format_duration, csv_header="time_s"),
        Column("iqr", "Q1–Q3", _interval(format_duration, 3), csv_header="q1_q3_s"),
        Column("algbw", "algbw", format_bandwidth, csv_header="algbw_bytes_per_s"),
        Column("busbw", "busbw", format_bandwidth, csv_header="busbw_bytes_per_s"),
        Column("slowest_rank", "Slowest", csv_header="slowest_rank"),
        Column("predicted_s", "Fit α + S/β", format_duration, csv_header="fit_time_s"),
    ]
    return Table(
        "Time per message size (measured)",
        columns,
        rows,
        caption="Time: the slowest rank's median (a collective ends when its slowest rank does), Q1–Q3 "
        "its interquartile range; Slowest: that rank. algbw = S/t; busbw = algbw × the nccl-tests factor.",
    )


def _summary(result: CommResult) -> list[tuple[str, str]]:
    nodes = f" on {result.nnodes} nodes" if result.nnodes > 1 else ""
    return [
        ("Ranks", f"{result.world_size}{nodes}, {result.backend}"),
        ("Device", f"{result.device_name or result.device} ({result.device}), {result.dtype}"),
        (
            "Timing",
            f"{result.warmup} warm-up calls, {result.reps} timed per size and rank; "
            f"{result.point_count} points",
        ),
    ]


def _verdict(result: CommResult) -> str | None:
    fitted = [s for s in result.collectives if s.crossover_bytes is not None]
    if not fitted:
        return None
    s = next((x for x in fitted if x.collective == "all_reduce"), fitted[0])
    what = "a local copy" if s.collective == LOCAL_COPY else s.collective
    return (
        f"{what}: latency α = {format_duration(s.alpha_s)} dominates below "
        f"S* = {format_bytes(s.crossover_bytes)}; above it bandwidth "
        f"β = {format_bandwidth(s.beta_bytes_per_s)} does (fitted)."
    )


def build_view(result: CommResult) -> View:
    where = f"{result.world_size} rank{'s' if result.world_size > 1 else ''}, {result.backend}"
    return View(
        title=f"Collective communication — {where}" + ("" if result.complete else " (stopped early)"),
        summary=_summary(result),
        tables=[fit_table(result), points_table(result)],
        notes=[
            "busbw factors (nccl-tests): all_reduce 2(n−1)/n; all_gather, reduce_scatter, all_to_all "
            "(n−1)/n; broadcast and send/recv 1. Each collective was checked for the right result before "
            "it was timed."
        ],
        warnings=list(result.warnings),
        verdict=_verdict(result),
    )
