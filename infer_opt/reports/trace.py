"""View of ``infer-opt trace``: where a real GPU's time went, what bounds each op, and what an
optimization would buy. Every figure's origin is in its table's title or caption: measured
(from the trace), datasheet, fitted or predicted."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from infer_opt.cost_models.roofline import RATE_SLACK
from infer_opt.registry import TRACE_OPS
from infer_opt.reports.profile import short_name
from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.trace import OpGroup, RankTrace, TraceResult, as_shapes, shapes_text
from infer_opt.units import (
    format_bandwidth,
    format_bytes,
    format_duration,
    format_flop_rate,
    format_flops,
    format_number,
    format_percent,
    format_ratio,
)

SHAPES_WIDTH = 22
_REASONS = {
    "modelled": "modelled (FLOP/byte formula)",
    "no_shapes": "no shapes (compile region, graph replay, no record_shapes)",
    "unlinked": "unlinked (no launch or op found)",
    "communication": "communication",
    "memcpy": "memcpy / memset",
    "sync": "synchronisation",
    "no_formula": "op with no formula",
}


def _source(text: str) -> str:
    """A peak's source without its citations (every parenthesis; kept whole in the JSON)."""
    while True:
        shorter = re.sub(r"\s*\([^()]*\)", "", text)
        if shorter == text:
            return text
        text = shorter


def _shapes(shapes: Any, width: int = SHAPES_WIDTH) -> str:
    """A terminal's shapes: ``16×5185×64, 16×64×5185`` (or the dimension lists), whole shapes
    only up to ``width`` then ``…+N`` (never cut mid-number; a narrow table wraps between
    shapes)."""
    pieces = shapes.split(", ") if isinstance(shapes, str) else _shapes_full(shapes).split(", ")
    shown: list[str] = []
    for i, text in enumerate(pieces):
        rest = len(pieces) - i - 1
        if shown and len(", ".join([*shown, text])) + (len(f", …+{rest}") if rest else 0) > width:
            return ", ".join(shown) + f", …+{len(pieces) - i}"
        shown.append(text)
    return ", ".join(shown)


def _shapes_full(shapes: Any) -> str:
    """Every shape (markdown, HTML, CSV have no width): ``16×5185×64, 16×64×5185``."""
    return shapes if isinstance(shapes, str) else shapes_text(as_shapes(shapes))


def _step_label(step: int | None) -> str:
    return "whole trace" if step is None else f"#{step}"


def _summary(r: TraceResult) -> list[tuple[str, str]]:
    files = ", ".join(os.path.basename(f) for f in r.files[:3]) + (
        f" (+{len(r.files) - 3} more)" if len(r.files) > 3 else ""
    )
    device = r.device_name or "unknown"
    out = [("Trace", files), ("Device", f"{device} ({r.device_source})")]
    if r.peaks.flops_per_s or r.peaks.bytes_per_s:
        out.append(("Peaks", f"{_peak_text(r)} ({_source(r.peaks.source)})"))
    if not r.ranks or not any(rank.steps for rank in r.ranks):
        if r.cpu_ops:
            out.append(("Analysis", "CPU ops only (no GPU events)"))
        return out
    steps = r.ranks[0].steps
    numbered = [s.step for s in steps if s.step is not None]
    if numbered:
        chosen = "" if r.steps_selected == "all" else f" (--steps {r.steps_selected})"
        out.append(("Steps", f"{len(numbered)}: #{numbered[0]}–#{numbered[-1]}{chosen}"))
    else:
        out.append(("Steps", "none: the whole trace as one window"))
    label = "Step time (median)" if numbered else "Window"
    out.append(
        (
            label,
            format_duration(r.step_time_median_s, 4)
            + (f" (spread {format_duration(r.step_time_spread_s)})" if len(steps) > 1 else ""),
        )
    )
    rank = r.ranks[0] if len(r.ranks) == 1 else None
    if rank is not None:
        out.append(("GPU time (measured)", _gpu_time(rank)))
    else:
        out.append(
            ("Ranks", f"{len(r.ranks)}; slowest rank {r.slowest_rank}, skew {format_ratio(r.step_skew)}")
        )
    in_groups = f"{format_duration(r.kernel_time_s, 4)} in {len(r.ops)} (op, shapes, dtype) groups"
    if r.gpu_time_s > r.kernel_time_s * 1.001:
        in_groups = (
            f"{format_duration(r.gpu_time_s, 4)} summed; {in_groups} (the rest has no op: see Coverage)"
        )
    out.append(("GPU kernel time", in_groups))
    out.append(("Covered by a formula", format_percent(r.modelled_fraction)))
    out += _family_lines(r)
    out += _bound_lines(r)
    replayed = [w for w in r.what_if if w.replayed_speedup > 0 and w.scenario != "user"]
    best = max(replayed, key=lambda w: w.replayed_speedup, default=None)
    if best is not None:
        out.append(
            (
                "Largest what-if (predicted)",
                f"{best.description}: {format_ratio(best.replayed_speedup)} replayed (dependencies kept), "
                f"Amdahl {format_ratio(best.amdahl_speedup)} (no dependencies"
                f"{'; an upper bound' if best.amdahl_speedup >= best.replayed_speedup else ''})",
            )
        )
    else:
        best = next((w for w in r.what_if if w.saved_s > 0), None)
        if best is not None:
            out.append(("Largest what-if (predicted)", f"{best.description}: {format_ratio(best.speedup)}"))
    if r.hta_compat:
        out.append(("Conventions", "--hta-compat: HTA 0.5's timeline rules (not exact)"))
    return out


def _bound_lines(r: TraceResult) -> list[tuple[str, str]]:
    """What bounds the steps (the critical path of the replay) and the top causes of idle time."""
    out = []
    if len(r.bounds) == 1 and r.bounds[0].of_steps == 1:
        (b,) = r.bounds
        out.append(
            ("Bound (replayed)", f"{b.bound}-bound: {format_percent(b.median_share)} of the critical path")
        )
    elif r.bounds:
        parts = [
            f"{b.bound} in {b.steps} of {b.of_steps} steps "
            f"(median {format_percent(b.median_share)} of the path)"
            for b in r.bounds
        ]
        out.append(("Bound (replayed)", "; ".join(parts)))
    if r.idle_causes:
        top = ", ".join(
            f"{c.cause} {format_duration(c.time_s)} ({format_percent(c.fraction)})" for c in r.idle_causes[:3]
        )
        out.append(("Idle time by cause (per step)", top))
    return out


def _peak_text(r: TraceResult) -> str:
    rates = ", ".join(
        f"{p} {format_flop_rate(v)}"
        for p, v in r.peaks.flops_per_s.items()
        if p in ("bf16", "fp16", "tf32", "fp32", "*")
    )
    return (
        f"{rates}; {format_bandwidth(r.peaks.bytes_per_s)}"
        if rates
        else format_bandwidth(r.peaks.bytes_per_s)
    )


def _gpu_time(rank: RankTrace) -> str:
    """The rank's shares of its steps' time, each instant counted once (they sum to 100%)."""
    devices = rank.steps[0].devices if rank.steps else ()
    return (
        f"idle {format_percent(rank.idle_fraction)}, compute {format_percent(rank.compute_fraction)}, "
        f"non-compute {format_percent(rank.non_compute_fraction)} "
        f"(comm {format_percent(rank.comm_fraction)} of it)"
        + (
            f"; comm under compute {format_percent(rank.comm_overlapped_fraction)} (counted once, as compute)"
            if rank.comm_overlapped_fraction
            else ""
        )
        + (f"; the mean of {len(devices)} GPUs, each on its own streams" if devices else "")
    )


def _timeline_table(r: TraceResult) -> Table | None:
    several = len(r.ranks) > 1
    columns = [
        *([Column("rank", "Rank", csv_header="rank", is_key=True)] if several else []),
        Column("step", "Step", _step_label, align="left", csv_header="step", is_key=True),
        Column("span_s", "Span", format_duration, csv_header="span_s", importance=2),
        Column("busy_s", "Busy", format_duration, csv_header="busy_s"),
        Column("idle_s", "Idle", format_duration, csv_header="idle_s", importance=2),
        Column("compute_s", "Compute", format_duration, csv_header="compute_s", importance=2),
        Column("comm_s", "Comm", format_duration, csv_header="comm_s"),
        Column("memcpy_s", "Memcpy", format_duration, csv_header="memcpy_s", importance=-1),
        Column("sync_s", "Sync", format_duration, csv_header="sync_s", importance=-1),
        Column("overlap_fraction", "Overlap", format_percent, csv_header="overlap_fraction", importance=-1),
        *(
            [Column("bound", "Bound (replayed)", align="left", csv_header="bound", importance=1)]
            if any(s.bound for rank in r.ranks for s in rank.steps)
            else []
        ),
    ]
    rows = [{"rank": rank.rank, **s.__dict__} for rank in r.ranks for s in rank.steps]
    if not rows:
        return None
    return Table(
        "GPU timeline per step (measured)",
        columns,
        [{c.key: row.get(c.key) for c in columns} for row in rows],
        caption="On the union of all streams: busy = time any stream ran; idle = span − busy; overlap = "
        "compute ∩ comm / comm (compute, comm, memcpy and sync each on their own, so they may overlap)."
        + (
            " Two or more GPUs in a file: each figure is the mean over its GPUs, each on its own streams."
            if any(s.devices for rank in r.ranks for s in rank.steps)
            else ""
        ),
    )


def _ranks_table(r: TraceResult) -> Table | None:
    if len(r.ranks) < 2:
        return None
    columns = [
        Column("rank", "Rank", csv_header="rank", is_key=True),
        Column("step_time_median_s", "Step (median)", format_duration, csv_header="step_time_median_s"),
        Column("idle_fraction", "Idle", format_percent, csv_header="idle_fraction", importance=2),
        Column("compute_fraction", "Compute", format_percent, csv_header="compute_fraction", importance=2),
        Column("non_compute_fraction", "Non-compute", format_percent, csv_header="non_compute_fraction"),
        Column("comm_fraction", "Comm", format_percent, csv_header="comm_fraction", importance=2),
        Column("overlap_fraction", "Overlap", format_percent, csv_header="overlap_fraction"),
    ]
    return Table(
        "Ranks (measured)",
        columns,
        rows_of(r.ranks, columns),
        caption=f"Over each rank's analyzed window. Slowest rank {r.slowest_rank}; skew (max / median "
        f"step) {format_ratio(r.step_skew)}.",
        highlight={i: "bad" for i, rank in enumerate(r.ranks) if rank.rank == r.slowest_rank},
    )


def _ops_table(r: TraceResult, top: int) -> Table | None:
    if not r.ops:
        return None
    shown: Sequence[OpGroup] = r.ops[:top]
    judged = bool(r.peaks.flops_per_s or r.peaks.bytes_per_s)
    columns = [
        Column("index", "#", csv_header="index", importance=1),
        Column("name", "Op", short_name, align="left", csv_header="name", is_key=True),
        Column(
            "shapes", "Shapes", _shapes_full, "left", "shapes", is_key=True, importance=1, terminal=_shapes
        ),
        Column("calls", "Calls", csv_header="calls"),
        Column("time_s", "Kernel time", format_duration, csv_header="time_s", importance=2),
        Column("share", "Share", format_percent, csv_header="share", importance=2),
        *(
            [
                Column("bound", "Bound", align="left", csv_header="bound", importance=1),
                Column("peak_fraction", "Of peak", format_percent, csv_header="peak_fraction", importance=1),
            ]
            if judged
            else []
        ),
    ]
    rows = rows_of(
        shown,
        columns,
        index=_counter(),
        peak_fraction=lambda g: None if g.bound == "unknown" else g.peak_fraction,
        shapes=lambda g: shapes_text(g.shapes),  # CSV and frames: the text, as the console shows
    )
    return Table(
        TRACE_OPS,
        columns,
        rows,
        caption=f"Top {len(shown)} of {len(r.ops)} (op, shapes, dtype) groups, summed over the analyzed steps"
        + (" and ranks" if len(r.ranks) > 1 else "")
        + (
            ". Bound and 'of peak' (achieved over the bound resource's peak) against "
            f"{_source(r.peaks.source)}"
            + (
                "; host↔device copies against the host link."
                if any(g.family == "transfer" for g in shown)
                else "."
            )
            if judged
            else ". No roofline: no bound."
        )
        + (
            f" Above 100% within the {RATE_SLACK:g}× margin is not warned (boost clocks, the datasheet's "
            "rounding); beyond it, a warning names the op and the likely cause."
            if any((g.peak_fraction or 0) > 1 for g in shown)
            else ""
        ),
    )


def _counter():
    count = iter(range(1, 1 << 30))
    return lambda _item: next(count)


def _work_table(r: TraceResult, top: int) -> Table | None:
    shown = [(i, g) for i, g in enumerate(r.ops[:top], 1) if g.flops > 0 or g.bytes > 0]
    if not shown:
        return None
    columns = [
        Column("index", "#", csv_header="index"),
        Column("name", "Op", short_name, align="left", csv_header="name", is_key=True),
        Column("precision", "Precision", align="left", csv_header="precision", importance=-1),
        Column("flops", "FLOPs", format_flops, csv_header="flops", importance=1),
        Column("bytes", "Bytes", format_bytes, csv_header="bytes", importance=1),
        Column(
            "achieved_flops_per_s",
            "FLOP/s",
            format_flop_rate,
            csv_header="achieved_flops_per_s",
            importance=2,
        ),
        Column(
            "achieved_bytes_per_s", "B/s", format_bandwidth, csv_header="achieved_bytes_per_s", importance=2
        ),
        Column("kernels", "Kernels", csv_header="kernels", importance=-2),
    ]
    rows = [{"index": i, **{c.key: getattr(g, c.key) for c in columns if c.key != "index"}} for i, g in shown]
    return Table(
        "Top ops: work and achieved rates",
        columns,
        rows,
        caption="# as in the table above. FLOPs and bytes (from the recorded shapes) are totals over "
        "the calls, with the formulas "
        "`profile` uses; precision from the dtype and the kernel names; causal attention counted "
        + (
            "half (the convention of profile, predict and trace)."
            if r.causal_flops == "half"
            else "in full (--causal-flops full; profile and predict count it half)."
        ),
    )


def _coverage_table(r: TraceResult) -> Table | None:
    if not r.coverage:
        return None
    columns = [
        Column(
            "reason", "GPU time", lambda v: _REASONS.get(v, v), align="left", csv_header="reason", is_key=True
        ),
        Column("time_s", "Time", format_duration, csv_header="time_s"),
        Column("fraction", "Share", format_percent, csv_header="fraction", importance=2),
    ]
    return Table(
        "Coverage: GPU time with a formula",
        columns,
        rows_of(r.coverage, columns),
        caption="Summed kernel, memcpy and memset time over the analyzed steps.",
    )


_FAMILY_SOURCES = {"op": "from its op's formula", "name": "from the kernel's name", "none": "no family"}


def _family_lines(r: TraceResult) -> list[tuple[str, str]]:
    """The family coverage and the capture links, as summary lines."""
    out = []
    if r.family_coverage:
        by = {c.reason: c.fraction for c in r.family_coverage}
        out.append(
            (
                "With a family",
                f"{format_percent(r.family_fraction)} (ops {format_percent(by.get('op', 0.0))}, "
                f"kernel names {format_percent(by.get('name', 0.0))})",
            )
        )
    for c in r.captures:
        out.append(
            (
                "Graph replays linked",
                f"{c.replays_linked} of {c.replays} launches, {c.kernels_linked} of {c.kernels} GPU events, "
                f"to {os.path.basename(c.path)}" + (f" ({', '.join(c.labels)})" if c.labels else ""),
            )
        )
    return out


KERNEL_WIDTH = 28


#: characters of a long kernel name's start kept before the part that tells it from another's
KERNEL_HEAD = 12


def _kernel_label(name: str, width: int = KERNEL_WIDTH, differs_at: int = 0) -> str:
    """A kernel name without ``void`` and cut at ``width`` (whole in the JSON and CSV); where
    its first ``differs_at`` characters are another shown name's too (ROCm's Tensile GEMMs share
    40), its start, then from just before where it differs."""
    text = name.removeprefix("void ")
    if len(text) <= width:
        return text
    if differs_at < width - 1:
        return text[: width - 1] + "…"
    rest = text[max(differs_at - 4, KERNEL_HEAD) :]
    tail = width - KERNEL_HEAD - 1
    return text[:KERNEL_HEAD] + "…" + (rest if len(rest) <= tail else rest[: tail - 1] + "…")


def _kernel_labels(names: Sequence[str], width: int = KERNEL_WIDTH) -> dict[str, str]:
    """Each shown kernel name's label (:func:`_kernel_label`), told apart from the others': a
    name a plain cut would show like another's is cut where it parts from the nearest of them."""
    groups: dict[str, list[str]] = {}
    for n in dict.fromkeys(names):
        groups.setdefault(_kernel_label(n, width), []).append(n)
    out = {}
    for members in groups.values():
        texts = {m: m.removeprefix("void ") for m in members}
        for m, t in texts.items():
            others = (o for k, o in texts.items() if k != m)  # characters shared: not paths
            shared = max((len(os.path.commonprefix([t, o])) for o in others), default=0)  # noqa: RUF071
            out[m] = _kernel_label(m, width, shared)
    return out


def _kernels_table(r: TraceResult, top: int) -> Table | None:
    if not r.kernels:
        return None
    shown = r.kernels[:top]
    labels = _kernel_labels([k.name for k in shown])
    columns = [
        Column("name", "Kernel", labels.__getitem__, align="left", csv_header="name", is_key=True),
        Column("calls", "Calls", csv_header="calls"),
        Column("time_s", "Time", format_duration, csv_header="time_s", importance=2),
        Column("fraction", "Share", format_percent, csv_header="fraction", importance=2),
        Column("family", "Family", lambda v: v or "—", align="left", csv_header="family", importance=1),
        Column(
            "family_source",
            "From",
            lambda v: {"op": "op", "name": "name"}.get(v, "—") if v else "—",
            align="left",
            csv_header="family_source",
            importance=1,
        ),
    ]
    return Table(
        "Top kernels by GPU time (measured)",
        columns,
        rows_of(shown, columns),
        caption=f"Top {len(shown)} of {len(r.kernels)} kernel names over the analyzed steps"
        + (" and ranks" if len(r.ranks) > 1 else "")
        + "; share of the kernel, memcpy and memset time. Family from the op group's formula (op) "
        "or from the kernel's name (name); — where neither says.",
    )


def _family_table(r: TraceResult) -> Table | None:
    if not r.family_coverage:
        return None
    columns = [
        Column(
            "reason",
            "Family",
            lambda v: _FAMILY_SOURCES.get(v, v),
            align="left",
            csv_header="source",
            is_key=True,
        ),
        Column("time_s", "Time", format_duration, csv_header="time_s"),
        Column("fraction", "Share", format_percent, csv_header="fraction", importance=2),
    ]
    return Table(
        "Coverage: GPU time with a family",
        columns,
        rows_of(r.family_coverage, columns),
        caption="Summed kernel, memcpy and memset time over the analyzed steps, by where its family "
        "came from.",
    )


def _what_if_table(r: TraceResult) -> Table | None:
    rows = [w for w in r.what_if if w.saved_s > 0 or w.replayed_speedup > 1 or w.scenario == "user"]
    if not rows:
        return None
    replayed = any(w.replayed_speedup > 0 for w in rows)
    columns = [
        Column("description", "What if (predicted)", align="left", csv_header="description", is_key=True),
        Column("saved_s", "Saved / step", format_duration, csv_header="saved_s", importance=2),
        *(
            [
                Column(
                    "replayed_speedup",
                    "Replayed (dependencies kept)",
                    format_ratio,
                    csv_header="replayed_speedup",
                    importance=2,
                )
            ]
            if replayed
            else []
        ),
        Column(
            "speedup",
            "Amdahl (no dependencies; an upper bound)" if replayed else "Speed-up",
            format_ratio,
            csv_header="speedup",
            importance=2,
        ),
        Column("scenario", "Scenario", align="left", csv_header="scenario", importance=-2),
    ]
    where = f" on rank {r.slowest_rank}" if len(r.ranks) > 1 else ""
    return Table(
        "What would it buy (predicted)",
        columns,
        rows_of(rows, columns),
        caption=(
            "Replayed: the edited dependency graph replayed (launches, streams and syncs kept); "
            "Amdahl bounds it for work made faster, not for CUDA graphs, which also remove the host "
            "work between launches that Amdahl over the kernel gaps does not count; "
            if replayed
            else ""
        )
        + "Amdahl over the measured timeline, held against the median step"
        f"{where} ({format_duration(rows[0].step_s, 4)}). "
        "Assumptions are in the JSON (what_if[].assumption).",
    )


def _syncs_table(r: TraceResult) -> Table | None:
    if not r.host_syncs:
        return None
    columns = [
        Column("name", "Host sync", align="left", csv_header="name", is_key=True),
        Column("under_op", "Under", lambda v: v or "(top level)", align="left", csv_header="under_op"),
        Column("calls", "Calls", csv_header="calls"),
        Column("time_s", "Host time", format_duration, csv_header="time_s"),
    ]
    return Table(
        "Host syncs (break graph capture)",
        columns,
        rows_of(r.host_syncs[:10], columns),
        caption="Host calls that wait for the device, and the op they occur in (measured).",
    )


def _collectives_table(r: TraceResult) -> Table | None:
    if not r.collectives:
        return None
    several = len(r.ranks) > 1
    columns = [
        Column("collective", "Collective", align="left", csv_header="collective", is_key=True),
        Column("bytes", "Size", format_bytes, csv_header="bytes", is_key=True),
        Column("group_size", "Ranks", csv_header="group_size", importance=-1),
        Column("calls", "Calls", csv_header="calls"),
        Column("time_s", "Time (median)", format_duration, csv_header="time_s", importance=2),
        Column("algbw_bytes_per_s", "algbw", format_bandwidth, csv_header="algbw_bytes_per_s"),
        Column("busbw_bytes_per_s", "busbw", format_bandwidth, csv_header="busbw_bytes_per_s", importance=2),
        *(
            [
                Column("wait_s", "Wait", format_duration, csv_header="wait_s"),
                Column("transfer_s", "Transfer", format_duration, csv_header="transfer_s"),
            ]
            if several
            else []
        ),
    ]
    caption = "nccl-tests' definitions: algbw = size / time, busbw = algbw × the collective's factor. "
    caption += (
        "Wait: the early ranks' median wait for the last one to arrive (matched by order)."
        if several
        else "A kernel's time includes waiting for its peers (one rank: the wait cannot be split off)."
    )
    return Table("Collectives (measured)", columns, rows_of(r.collectives[:15], columns), caption=caption)


def _alpha_beta_table(r: TraceResult) -> Table | None:
    if not r.alpha_beta:
        return None
    columns = [
        Column("collective", "Collective", align="left", csv_header="collective", is_key=True),
        Column("alpha_s", "α", format_duration, csv_header="alpha_s"),
        Column("beta_bytes_per_s", "β", format_bandwidth, csv_header="beta_bytes_per_s"),
        Column("sizes", "Sizes", csv_header="sizes"),
        Column("median_abs_rel_error", "Median error", format_percent, csv_header="median_abs_rel_error"),
    ]
    return Table(
        "α-β per collective (fitted)",
        columns,
        rows_of(r.alpha_beta, columns),
        caption="t ≈ α + S/β over the trace's own calls; times include waits: α is an upper bound, "
        "β a lower bound.",
    )


def _peaks_table(r: TraceResult) -> Table | None:
    rows = [
        {"what": f"peak {p}", "value": format_flop_rate(v), "source": _source(r.peaks.source)}
        for p, v in r.peaks.flops_per_s.items()
    ]
    if r.peaks.bytes_per_s > 0:
        rows.append(
            {
                "what": "memory bandwidth",
                "value": format_bandwidth(r.peaks.bytes_per_s),
                "source": _source(r.peaks.source),
            }
        )
    if r.peaks.host_link_bytes_per_s > 0 and any(g.family == "transfer" for g in r.ops):
        rows.append(
            {
                "what": "host link (one way)",
                "value": format_bandwidth(r.peaks.host_link_bytes_per_s),
                "source": _source(r.peaks.source),
            }
        )
    if r.trace_fit is not None:
        rows.append(
            {
                "what": "bandwidth (trace fit)",
                "value": format_bandwidth(r.trace_fit.bytes_per_s),
                "source": "fitted",
            }
        )
        rows.append(
            {
                "what": "launch floor (trace fit)",
                "value": format_duration(r.trace_fit.launch_s),
                "source": "fitted",
            }
        )
    if not rows:
        return None
    columns = [
        Column("what", "Roofline", align="left", csv_header="what", is_key=True),
        Column("value", "Value", align="left", csv_header="value"),
        Column("source", "Source", align="left", csv_header="source", importance=-1),
    ]
    notes = list(r.trace_fit.notes) if r.trace_fit is not None else []
    return Table(
        "The device's roofline",
        columns,
        rows,
        caption="; ".join(["datasheet or overrides, and a fit on the trace's own ops", *notes]),
    )


def _streams_table(r: TraceResult) -> Table | None:
    rows = [{"rank": rank.rank, **s.__dict__} for rank in r.ranks for s in rank.streams]
    if len(rows) < 2:
        return None
    columns = [
        *([Column("rank", "Rank", csv_header="rank", is_key=True)] if len(r.ranks) > 1 else []),
        Column("stream", "Stream", csv_header="stream", is_key=True),
        Column("events", "Events", csv_header="events"),
        Column("busy_s", "Busy", format_duration, csv_header="busy_s"),
        Column("fraction", "Of window", format_percent, csv_header="fraction"),
    ]
    return Table("Streams (measured)", columns, [{c.key: row[c.key] for c in columns} for row in rows[:12]])


def _queue_table(r: TraceResult) -> Table | None:
    rows = [(rank.rank, rank.launch_queue) for rank in r.ranks if rank.launch_queue is not None]
    if not rows:
        return None
    columns = [
        *([Column("rank", "Rank", csv_header="rank", is_key=True)] if len(r.ranks) > 1 else []),
        Column("kernels", "Kernels", csv_header="kernels"),
        Column("median_delay_s", "Launch→start (median)", format_duration, csv_header="median_delay_s"),
        Column("p90_delay_s", "p90", format_duration, csv_header="p90_delay_s"),
        Column("max_depth", "Max queue depth", format_number, csv_header="max_depth"),
    ]
    table_rows = [
        {"rank": rank, **{c.key: getattr(q, c.key) for c in columns if c.key != "rank"}} for rank, q in rows
    ]
    return Table(
        "Launch queue (measured)",
        columns,
        [{c.key: row[c.key] for c in columns} for row in table_rows],
        caption="Delay from a kernel's launch call to its start on the GPU; a deep queue means queueing.",
    )


def _cpu_table(r: TraceResult, top: int) -> Table | None:
    if not r.cpu_ops:
        return None
    columns = [
        Column("name", "CPU op", short_name, align="left", csv_header="name", is_key=True),
        Column("calls", "Calls", csv_header="calls"),
        Column("self_s", "Self time", format_duration, csv_header="self_s", importance=2),
        Column("time_s", "Total time", format_duration, csv_header="time_s"),
    ]
    return Table(
        "CPU ops by self time (measured)",
        columns,
        rows_of(r.cpu_ops[:top], columns),
        caption="On the host. A CPU-only trace: the host's ops alone; self time excludes the ops "
        "nested inside.",
    )


def _cross_rank_tables(result: TraceResult) -> tuple[Table | None, ...]:
    from infer_opt.reports import cross_rank as xr

    return xr.straggler_table(result), xr.imbalance_table(result), xr.skew_table(result)


def build_view(result: TraceResult, *, top: int = 15) -> View:
    builders = (
        _timeline_table(result),
        _ranks_table(result),
        _ops_table(result, top),
        _work_table(result, top),
        _coverage_table(result),
        _kernels_table(result, top),
        _family_table(result),
        _what_if_table(result),
        _peaks_table(result),
        _collectives_table(result),
        _alpha_beta_table(result),
        _syncs_table(result),
        _streams_table(result),
        _queue_table(result),
        _cpu_table(result, top),
        *_cross_rank_tables(result),
    )
    notes = [
        "Measured: kernel times and spans read from the trace. Datasheet: peaks from the device table. "
        "Fitted: the trace's own roofline and α-β. Predicted: the what-ifs."
    ]
    if result.hta_compat:
        notes.append(
            "--hta-compat: timestamps rounded as HTA 0.5 does, its last step dropped, syncs counted busy, "
            "its kernel-type patterns; for checking against HTA, not exact."
        )
    return View(
        title="GPU trace analysis",
        summary=_summary(result),
        tables=[t for t in builders if t is not None],
        notes=notes,
        warnings=list(result.warnings),
    )
