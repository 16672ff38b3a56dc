"""View of a model profile: header, top operators (or modules), categories, and the Amdahl
opportunities (labelled as roofline predictions)."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.profile import CategoryStat, OpStat, ProfileResult
from infer_opt.units import (
    format_bandwidth,
    format_bytes,
    format_duration,
    format_flop_rate,
    format_flops,
    format_number,
    format_percent,
    format_ratio,
    plural,
)

CATEGORY_LABELS = {
    "matmul": "matmul",
    "attention": "attention",
    "normalization": "normalization",
    "elementwise": "elementwise/activation",
    "memory": "memory/layout",
    "communication": "communication",
    "other": "other",
}


def category_label(item: Any) -> str:
    """The words for ``item.category`` (an operator's or a category's), e.g. memory/layout."""
    return CATEGORY_LABELS.get(item.category, item.category)


def format_shapes(shapes: Sequence[Sequence[int]]) -> str:
    """``((128, 128), (128, 512))`` -> ``128×128, 128×512``; repeats folded (``1×4×128×32 ×3``)."""
    parts: list[str] = []
    counts: list[int] = []
    for shape in shapes:
        text = "×".join(str(s) for s in shape) if shape else "scalar"
        if parts and parts[-1] == text:
            counts[-1] += 1
        else:
            parts.append(text)
            counts.append(1)
    return ", ".join(p if c == 1 else f"{p} ×{c}" for p, c in zip(parts, counts, strict=True))


def _intensity(value: float | None) -> str:
    return "—" if value is None else format_number(value, 3)


def _eff(value: float | None) -> str:
    return "—" if value is None else format_percent(value, 0)


#: display abbreviations of long kernel names (the JSON and CSV keep the full names)
ABBREVIATIONS = (
    ("_scaled_dot_product_flash_attention_for_cpu", "sdpa_flash_cpu"),
    ("_scaled_dot_product_flash_attention", "sdpa_flash"),
    ("_scaled_dot_product_efficient_attention", "sdpa_efficient"),
    ("_scaled_dot_product_cudnn_attention", "sdpa_cudnn"),
    ("_scaled_dot_product_fused_attention_overrideable", "sdpa_fused"),
)


def short_name(name: str) -> str:
    """``aten::addmm`` -> ``addmm``; the fused SDPA kernels -> ``sdpa_*``."""
    text = name.removeprefix("aten::")
    for long, short in ABBREVIATIONS:
        if text == long:
            return short
    return text


def _op_rows(ops: Sequence[OpStat], top: int) -> list[dict[str, object]]:
    return [
        {
            "name": o.name,
            "shapes": format_shapes(o.shapes),
            "category": category_label(o),
            "calls": o.calls,
            "time_s": o.time_s,
            "share": o.share,
            "flops": o.flops,
            "bytes": o.bytes,
            "intensity": o.intensity,
            "flop_rate": o.achieved_flops_per_s,
            "byte_rate": o.achieved_bytes_per_s,
            "predicted_s": o.predicted_s,
            "bound": o.bound,
            "efficiency": o.efficiency,
        }
        for o in ops[:top]
    ]


def op_tables(ops: Sequence[OpStat], top: int, *, has_fit: bool = True) -> list[Table]:
    """Two tables over the same top ops: where the time goes, and the work and rates
    (without a roofline fit: no bound, efficiency or roofline time columns)."""
    rows = _op_rows(ops, top)
    name = Column("name", "Operator", short_name, align="left", csv_header="name")
    judged = [
        Column("bound", "Bound", align="left", csv_header="bound"),
        Column("efficiency", "Eff.", _eff, csv_header="efficiency"),
    ]
    caption = f"Top {len(rows)} of {len(ops)} operator/shape groups; times summed over calls."
    if has_fit:
        caption += (
            " Bound and efficiency (roofline time / measured time) against the fitted roofline "
            "t0 + max(F/R, Q/b)."
        )
    timing = Table(
        "Top operators by time (measured)",
        [
            name,
            Column("shapes", "Input shapes", align="left"),
            Column("category", "Category", align="left"),
            Column("calls", "Calls", csv_header="calls"),
            Column("time_s", "Time", format_duration, csv_header="time_s", importance=2),
            Column("share", "Share", format_percent, csv_header="share", importance=2),
            *(judged if has_fit else []),
        ],
        rows,
        caption=caption,
    )
    predicted = Column("predicted_s", "Roofline time", format_duration, csv_header="roofline_time_s")
    work = Table(
        "Top operators: work and achieved rates",
        [
            name,
            Column("flops", "FLOPs", format_flops, csv_header="flops"),
            Column("bytes", "Bytes", format_bytes, csv_header="bytes"),
            Column("intensity", "FLOP/B", _intensity, csv_header="intensity_flop_per_byte"),
            Column("flop_rate", "FLOP/s", format_flop_rate, csv_header="achieved_flop_per_s"),
            Column("byte_rate", "B/s", format_bandwidth, csv_header="achieved_bytes_per_s"),
            *([predicted] if has_fit else []),
        ],
        rows,
        caption="FLOPs and bytes per step (inputs read once, outputs written once, views 0)."
        + (" Roofline time is a prediction." if has_fit else ""),
    )
    return [timing, work]


def category_table(categories: Sequence[CategoryStat]) -> Table:
    columns = [
        Column("category", "Category", align="left"),
        Column("time_s", "Time", format_duration, csv_header="time_s", importance=2),
        Column("fraction", "Share f", format_percent, csv_header="fraction", importance=2),
        Column("calls", "Calls", csv_header="calls"),
        Column("flops", "FLOPs", format_flops, csv_header="flops"),
        Column("bytes", "Bytes", format_bytes, csv_header="bytes"),
        Column("flop_rate", "FLOP/s", format_flop_rate, csv_header="achieved_flop_per_s"),
        Column("byte_rate", "B/s", format_bandwidth, csv_header="achieved_bytes_per_s"),
    ]
    ordered = sorted(categories, key=lambda c: -c.time_s)
    rows = rows_of(
        ordered,
        columns,
        category=category_label,
        flop_rate=attrgetter("achieved_flops_per_s"),
        byte_rate=attrgetter("achieved_bytes_per_s"),
    )
    return Table("Time by category (measured)", columns, rows)


def amdahl_table(result: ProfileResult) -> Table:
    at_bound = [
        Column("part_speedup", "Category at bound", format_ratio, csv_header="category_speedup_at_bound"),
        Column(
            "roofline_speedup",
            "End to end at bound",
            format_ratio,
            csv_header="roofline_speedup",
            importance=2,
        ),
    ]
    columns = [
        Column("rank", "#", csv_header="rank"),
        Column("category", "Category", align="left", is_key=True),
        Column("fraction", "f", format_percent, csv_header="fraction"),
        *(at_bound if result.roofline is not None else []),
        Column(
            "ceiling_speedup", "End to end if free", format_ratio, csv_header="ceiling_speedup", importance=1
        ),
    ]
    rows: list[dict[str, object]] = [
        {
            "rank": i,
            "category": category_label(c),
            "fraction": c.fraction,
            "part_speedup": c.part_speedup,
            "roofline_speedup": c.roofline_speedup,
            "ceiling_speedup": c.ceiling_speedup,
        }
        for i, c in enumerate(result.categories, start=1)
    ]
    rows.append(
        {
            "rank": None,
            "category": "all operators",
            "fraction": result.attributed_fraction,
            "part_speedup": None,
            "roofline_speedup": result.all_at_bound_speedup,
            "ceiling_speedup": result.all_free_ceiling,
        }
    )
    return Table(
        "Where optimization pays (Amdahl over the profile — predictions, not measurements)",
        columns,
        rows,
        caption=(
            "f = category time / step time. If free: 1/(1-f)."
            + (
                " At bound: every op of the category at its roofline time t0 + max(F/R, Q/b) (never "
                "slower than now), S = 1/((1-f) + f/s)."
                if result.roofline is not None
                else ""
            )
        ),
        highlight={0: "best"} if rows else {},
    )


def module_table(result: ProfileResult, top: int = 15) -> Table:
    columns = [
        Column("module", "Module (layers folded)", align="left"),
        Column("calls", "Op calls", csv_header="calls"),
        Column("time_s", "Time", format_duration, csv_header="time_s", importance=2),
        Column("share", "Share", format_percent, csv_header="share", importance=2),
        Column("flops", "FLOPs", format_flops, csv_header="flops"),
        Column("bytes", "Bytes", format_bytes, csv_header="bytes"),
    ]
    rows = rows_of(result.modules[:top], columns)
    caption = f"Top {len(rows)} of {len(result.modules)} modules by the time of the ops they run directly."
    return Table("Time by module", columns, rows, caption=caption)


def step_shape(r: Any) -> str | None:
    """A decode or generate step's shape in words (a profile's or a prediction's); None for a
    prefill, whose words depend on how the model was given."""
    if r.mode == "decode":
        return f"batch {r.batch}, 1 new token over a KV cache of {plural(r.context, 'token')}"
    if r.mode == "generate":
        made = plural(r.new_tokens, "new token")
        return f"batch {r.batch}, prompt {plural(r.seq_len, 'token')}, {made} (greedy)"
    return None


def _shape_line(r: ProfileResult) -> str:
    if r.mode in ("decode", "generate"):
        return step_shape(r) or ""
    if r.model_source == "factory":
        return f"the factory's example inputs: {r.inputs}"
    if r.seq_len is None:  # an hf: image or video model
        return f"batch {r.batch}: {r.inputs}"
    return f"batch {r.batch} × {r.seq_len} tokens"


def _spread(r: ProfileResult) -> str:
    s = r.step
    runs = f", {r.runs} runs" if r.runs > 1 else ""
    return (
        f"{format_duration(s.median_s)} median (IQR {format_duration(s.q1_s)}–{format_duration(s.q3_s)}, "
        f"n = {len(s.samples_s)}{runs}, {s.timer})"
    )


def _summary(r: ProfileResult) -> list[tuple[str, str]]:
    params = f"{r.n_params / 1e6:.3g} M parameters" if r.n_params else "parameters unknown"
    out = [
        ("Model", f"{r.model} ({r.model_source}, {params})"),
        ("Device", f"{r.device} — {r.device_name}, {r.dtype}"),
        ("Shapes", _shape_line(r)),
        ("Step time (whole generation)" if r.mode == "generate" else "Step time", _spread(r)),
    ]
    if r.step.cold_s is not None:
        out.append(
            ("First call (cold)", f"{format_duration(r.step.cold_s)} (timed apart, not in the median)")
        )
    if r.generation is not None:
        g = r.generation
        out.append(
            (
                "Time to first token",
                f"{format_duration(g.ttft_s)} median (cold {format_duration(g.cold_ttft_s)})",
            )
        )
        if g.tpot_s is not None:
            out.append(
                (
                    "Time per output token",
                    f"{format_duration(g.tpot_s)} median (cold {format_duration(g.cold_tpot_s)})",
                )
            )
        out.append(("Generation throughput", f"{format_number(g.tokens_per_s, 4)} tokens/s"))
    elif r.tokens_per_s is not None:
        out.append(("Throughput", f"{format_number(r.tokens_per_s, 4)} tokens/s"))
    flops = (
        f"{format_flops(r.flops_counted)} counted, {format_flop_rate(r.achieved_flops_per_s)} over the step"
    )
    if r.flops_analytic and r.flops_vs_analytic is not None:
        flops += f" (analytic {format_flops(r.flops_analytic)}, {100 * r.flops_vs_analytic:+.1f}%)"
    out.append(("FLOPs", flops))
    overhead = max(0.0, r.unattributed_s)
    out.append(
        (
            "Coverage",
            f"{format_percent(r.coverage)} of the step is in operators ({format_duration(r.op_time_s)}); "
            f"{format_duration(overhead)} host/launch/framework overhead",
        )
    )
    rf = r.roofline
    if rf is None:
        out.append(("Roofline", "none: no usable fit for this run (see the warnings)"))
        return out
    out.append(
        (
            "Roofline",
            f"R = {format_flop_rate(rf.compute_rate_flops)}, "
            f"b = {format_bandwidth(rf.bandwidth_bytes_per_s)}, "
            f"t0 = {format_duration(rf.launch_overhead_s)} (fitted; median error "
            f"{format_percent(rf.median_abs_rel_error, 0)})",
        )
    )
    return out


def _notes(r: ProfileResult, top: int) -> list[str]:
    notes = [f"Per-op time: {r.op_timer}."]
    if r.roofline is not None:
        notes.append(f"Roofline fit: {r.roofline.source}.")
    if any(o.name.startswith("aten::_scaled_dot_product") for o in r.ops[:top]):
        notes.append("sdpa_* = aten::_scaled_dot_product_*_attention* (the fused attention kernels).")
    if r.profiler_overhead_per_event_s > 0:
        notes.append(
            f"Under the profiler the step took {format_duration(r.profiled_step_s)} "
            f"({format_ratio(r.profiled_step_ratio, 3)} the uninstrumented step); "
            f"{format_duration(r.profiler_overhead_subtracted_s)} of profiler cost inside ops "
            f"({format_duration(r.profiler_overhead_per_event_s)} per nested event) was subtracted, the rest "
            "is outside the ops. The step time itself is measured without any instrumentation."
        )
    notes.append(
        "FLOPs: torch's formulas (matmul/conv), infer-opt's for fused attention (4·B·H·Tq·Tk·d, halved "
        "for a causal call — the convention of profile, predict and trace), 1 per element for pointwise "
        "ops; views move 0 bytes."
    )
    if r.coverage < 1:
        gap = (
            "the GPU idled between kernels"
            if r.device.startswith("cuda")
            else "Python, module calls, dispatch"
        )
        notes.append(f"Not in any operator: {format_percent(r.unattributed_fraction)} of the step ({gap}).")
    if r.trace_path:
        notes.append(f"Raw torch.profiler trace: {r.trace_path} (open in Perfetto or chrome://tracing).")
    return notes


def _verdict(r: ProfileResult) -> str | None:
    if not r.categories:
        return None
    best = r.categories[0]
    label = category_label(best)
    if best.roofline_speedup is None:
        return (
            f"Most time: {label} ({format_percent(best.fraction)} of the step); the step would run "
            f"{format_ratio(best.ceiling_speedup)} faster if it took no time."
        )
    return (
        f"Most to gain: {label} ({format_percent(best.fraction)} of the step). At its roofline bound "
        f"the step would run {format_ratio(best.roofline_speedup)} faster (predicted); "
        f"{format_ratio(best.ceiling_speedup)} if it took no time."
    )


#: what the main table groups by (a display option: ``profile --by``)
GROUPS = ("op", "category", "module")


def build_view(result: ProfileResult, *, top: int = 15, by: str = "op") -> View:
    """The profile's view: the ``top`` rows of the table grouped ``by`` op, module or category."""
    tables: list[Table] = []
    if by == "op":
        tables.extend(op_tables(result.ops, top, has_fit=result.roofline is not None))
    elif by == "module":
        tables.append(module_table(result, top))
    tables.append(category_table(result.categories))
    tables.append(amdahl_table(result))
    return View(
        title=f"Profile of {result.model} — {result.mode} on {result.device}",
        summary=_summary(result),
        tables=tables,
        notes=_notes(result, top),
        warnings=list(result.warnings),
        verdict=_verdict(result),
        verdict_ok=True,
    )
