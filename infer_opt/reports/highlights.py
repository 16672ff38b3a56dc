"""The "what matters" lines at the top of a report: a small function per result kind picks
the few numbers a reader should see first (largest category, best Amdahl opportunity, the
bound of the top operators, the fitted roofline, any failed exactness check). They select
and format values the result already holds; nothing is computed here."""

from __future__ import annotations

from typing import Any

from infer_opt.reports.render import Highlight
from infer_opt.reports.view import View
from infer_opt.units import (
    format_bandwidth,
    format_duration,
    format_flop_rate,
    format_number,
    format_percent,
    format_ratio,
)


def _verdict(view: View) -> list[Highlight]:
    if not view.verdict:
        return []
    return [Highlight(view.title, view.verdict, "good" if view.verdict_ok else "bad")]


def profile(r: Any, view: View) -> list[Highlight]:
    from infer_opt.reports.profile import category_label, short_name

    topic = f"Profile of {r.model} ({r.mode})"
    out = [Highlight(topic, f"step {format_duration(r.step.median_s)} median on {r.device_name}, {r.dtype}")]
    if r.categories:
        largest = max(r.categories, key=lambda c: c.time_s)
        label = category_label(largest)
        out.append(
            Highlight(
                topic,
                f"largest category: {label}, {format_percent(largest.fraction)} of the step "
                f"({format_duration(largest.time_s)})",
            )
        )
        if r.roofline is not None:
            best = max(r.categories, key=lambda c: c.roofline_speedup)
            label = category_label(best)
            out.append(
                Highlight(
                    topic,
                    f"best Amdahl opportunity: {label} at its roofline bound → step "
                    f"{format_ratio(best.roofline_speedup)} faster (predicted); "
                    f"{format_ratio(best.ceiling_speedup)} if it took no time",
                )
            )
    top = sorted(r.ops, key=lambda o: -o.time_s)[:3]
    if top:
        ops = "; ".join(
            f"{short_name(o.name)} {format_percent(o.share, 0)}"
            + (f", {o.bound}-bound (efficiency {format_percent(o.efficiency, 0)})" if o.bound else "")
            for o in top
        )
        out.append(Highlight(topic, f"top operators: {ops}"))
    if r.unattributed_fraction > 0.1:
        out.append(
            Highlight(
                topic,
                f"{format_percent(r.unattributed_fraction)} of the step is outside any operator "
                "(host/launch/framework overhead)",
            )
        )
    return out


def roofline(fit: Any, view: View) -> list[Highlight]:
    where = ", ".join(x for x in (fit.device_name or fit.device, fit.dtype) if x)
    return [
        Highlight(
            "Roofline" + (f" ({where})" if where else ""),
            f"fitted R = {format_flop_rate(fit.compute_rate_flops)}, "
            f"b = {format_bandwidth(fit.bandwidth_bytes_per_s)}, "
            f"t0 = {format_duration(fit.launch_overhead_s)}; ridge {fit.ridge_point:.3g} FLOP/byte; "
            f"median fit error {format_percent(fit.median_abs_rel_error, 0)}",
        )
    ]


def kernels(r: Any, view: View) -> list[Highlight]:
    topic = f"Kernel suite {r.suite} ({r.device_name}, {r.dtype})"
    timed = [row for row in r.rows if row.time_s is not None]
    out = []
    failed = [row.name for row in r.rows if row.passed is False]
    if failed:
        out.append(Highlight(topic, f"output check FAILED for {', '.join(failed)}", "bad"))
    with_flops = [row for row in timed if row.flops > 0 and row.achieved_flops_per_s]
    if with_flops:
        best = max(with_flops, key=lambda row: row.achieved_flops_per_s)
        out.append(
            Highlight(
                topic,
                f"best compute rate {format_flop_rate(best.achieved_flops_per_s)} ({best.name} {best.label})",
            )
        )
    with_bytes = [row for row in timed if row.achieved_bytes_per_s]
    if with_bytes:
        best = max(with_bytes, key=lambda row: row.achieved_bytes_per_s)
        out.append(
            Highlight(
                topic,
                f"best bandwidth {format_bandwidth(best.achieved_bytes_per_s)} ({best.name} {best.label})",
            )
        )
    checked = [row for row in r.rows if row.passed is not None]
    if checked and not failed:
        out.append(Highlight(topic, f"all {len(checked)} optimized variants match their reference", "good"))
    return out


def amdahl(r: Any, view: View) -> list[Highlight]:
    parts = [
        f"{p.name} ({format_percent(p.fraction)} of the time) {format_ratio(p.speedup)}" for p in r.parts
    ]
    text = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    return [
        Highlight(
            "Amdahl",
            f"speeding up {text} gives {format_ratio(r.speedup)} end to end (predicted); "
            f"ceiling {format_ratio(r.ceiling)} if they took no time",
        )
    ]


def speculative_speedup(r: Any, view: View) -> list[Highlight]:
    text = (
        f"k = {r.k}: predicted speedup {format_ratio(r.speedup)}, E[N] = {r.expected_tokens:.3g} tokens/round"
    )
    if r.best_k is not None and r.best_speedup is not None:
        text += f"; best k = {r.best_k} ({format_ratio(r.best_speedup)})"
    return [Highlight("Speculative decoding", text, "bad" if r.slowdown else "info")]


def buckets(r: Any, view: View) -> list[Highlight]:
    bounds = ", ".join(str(b) for b in r.bounds[:8]) + (", …" if len(r.bounds) > 8 else "")
    return [
        Highlight(
            "Shape buckets",
            f"bounds {bounds}: padding {format_percent(r.relative_padding)} of the tokens "
            f"(linear), {format_percent(r.relative_quadratic_padding)} of dense-attention work",
        )
    ]


def amortize(r: Any, view: View) -> list[Highlight]:
    if r.break_even_calls is None:
        text = (
            f"compiling never pays (compiled {format_duration(r.compiled_s)} "
            f"≥ eager {format_duration(r.eager_s)})"
        )
    else:
        text = f"compiling pays after {r.break_even_calls:,.6g} calls"
        if r.calls is not None and r.net_gain_s is not None:
            text += f"; at {r.calls:,} calls net {format_duration(r.net_gain_s)}"
    return [Highlight("Compile amortization", text)]


def amortize_buckets(r: Any, view: View) -> list[Highlight]:
    return [
        Highlight(
            "Compile amortization per bucket",
            f"compile {r.compiled_count} of {len(r.buckets)} buckets: net gain "
            f"{format_duration(r.total_net_gain_s)} "
            f"(compiling all: {format_duration(r.compile_all_net_gain_s)})",
        )
    ]


def compare(r: Any, view: View) -> list[Highlight]:
    from infer_opt.reports.compare import headline_text

    slower = [row.label for row in r.rows if row.verdict == "slower"]
    out = [Highlight("Compare", headline_text(r), "bad" if r.headline.verdict == "slower" else "info")]
    if slower:
        shown = ", ".join(slower[:4]) + (f" and {len(slower) - 4} more" if len(slower) > 4 else "")
        out.append(Highlight("Compare", f"slower beyond noise and threshold: {shown}", "bad"))
    return out


def calibration(r: Any, view: View) -> list[Highlight]:
    from infer_opt.cost_models.op_model import ORDER_TOLERANCE

    topic = f"Calibration of {r.device_name}"
    out = [
        Highlight(
            topic,
            f"{r.shape_count:,} shapes in {len(r.families)} operator families, {r.dtype}, "
            f"{'' if r.from_traces else f'{r.threads} thread(s), '}"
            f"grid {r.grid}" + ("" if r.complete else " (incomplete: resume it)"),
            "info" if r.complete else "bad",
        )
    ]
    parts = []
    if r.point_spread is not None:
        parts.append(f"repetitions spread by {format_percent(r.point_spread, 0)}")
    share = r.out_of_order_share
    if share is not None:
        parts.append(
            f"a colder cache state more than {format_percent(ORDER_TOLERANCE, 0)} faster at "
            f"{format_percent(share, 0)} of the shapes measured in two"
        )
    if parts:
        out.append(
            Highlight(
                topic,
                "; ".join(parts),
                "bad" if any(w.code == "calibration_noisy" for w in r.warnings) else "info",
            )
        )
    return out


def predict(r: Any, view: View) -> list[Highlight]:
    topic = f"Prediction for {r.model} ({r.mode})"
    text = (
        f"step {format_duration(r.step_time_s)} predicted (band {format_duration(r.step_low_s)}–"
        f"{format_duration(r.step_high_s)}) on {r.calibration.device_name}, {r.calibration.dtype}"
    )
    if r.tokens_per_s is not None:
        text += f"; {format_number(r.tokens_per_s, 4)} tokens/s"
    return [Highlight(topic, text)]


def validate(r: Any, view: View) -> list[Highlight]:
    from infer_opt.reports.validate import SMALL_OP_S

    topic = f"Validation of the predictor on {r.model}"
    modes = ", ".join(f"{mode} {format_percent(s.mape, 1)}" for mode, s in r.step_by_mode.items())
    out = [
        Highlight(
            topic,
            f"step MAPE {modes} over {len(r.points)} points; operators ≥ {format_duration(SMALL_OP_S)} "
            f"{format_percent(r.op_mape, 1)}",
        )
    ]
    noise = [f"{mode} {format_percent(r.noise[mode].mape, 1)}" for mode in r.step_by_mode if mode in r.noise]
    if noise:
        out.append(Highlight(topic, f"the same steps between {r.passes} passes: {', '.join(noise)}"))
    return out


#: a step whose GPU is idle more than this share measures the host (trace/compare.py's rule)
_HOST_BOUND_IDLE = 0.8


def trace(r: Any, view: View) -> list[Highlight]:
    """A trace: where the step goes (idle or not), the top ops with their bound, the largest
    what-if, and how much of the GPU time has a formula, as the result holds them."""
    from infer_opt.reports.profile import short_name

    topic = "Trace" + (f" ({r.device_name})" if r.device_name else "")
    out: list[Highlight] = []
    timed = [rank for rank in r.ranks if rank.steps]
    if timed:
        slowest = max(timed, key=lambda rank: rank.step_time_median_s)
        idle = slowest.idle_fraction
        text = (
            f"step {format_duration(slowest.step_time_median_s)} median"
            + (f" on {len(r.ranks)} ranks (slowest rank {slowest.rank})" if len(r.ranks) > 1 else "")
            + f"; GPU idle {format_percent(idle)}, compute {format_percent(slowest.compute_fraction)}"
            + (f", communication {format_percent(slowest.comm_fraction)}" if slowest.comm_fraction else "")
        )
        if idle > _HOST_BOUND_IDLE:
            text += ": host-bound, the step time measures the host (launches, Python, syncs)"
        out.append(Highlight(topic, text, "bad" if idle > _HOST_BOUND_IDLE else "info"))
    if r.ops:
        top = "; ".join(
            f"{short_name(g.name)} {format_percent(g.share, 0)}"
            + (f", {g.bound}-bound" if g.bound != "unknown" else "")
            + (f" at {format_percent(g.peak_fraction, 0)} of peak" if g.peak_fraction is not None else "")
            for g in r.ops[:3]
        )
        out.append(Highlight(topic, f"top ops by GPU kernel time: {top}"))
    best = max((w for w in r.what_if if w.saved_s > 0), key=lambda w: w.speedup, default=None)
    if best is not None:
        out.append(
            Highlight(
                topic, f"largest what-if: {best.description} → step {format_ratio(best.speedup)} (predicted)"
            )
        )
    if r.coverage and r.modelled_fraction < 0.9:
        out.append(
            Highlight(
                topic,
                f"only {format_percent(r.modelled_fraction)} of the GPU time has a FLOP/byte formula "
                "(see Coverage)",
                "bad",
            )
        )
    above = [w for w in r.warnings if w.code == "rate_above_peak"]
    if above:
        ops = ", ".join(dict.fromkeys(short_name(w["op"]) for w in above))
        out.append(Highlight(topic, f"rates above their peak (see warnings): {ops}", "bad"))
    return out or _verdict(view)


def trace_compare(r: Any, view: View) -> list[Highlight]:
    out = [Highlight("Trace comparison", r.headline)]
    if r.matched_fraction is not None:
        out.append(
            Highlight(
                "Trace comparison", f"{format_percent(r.matched_fraction)} of the kernel time in ops both ran"
            )
        )
    return out


def highlights(result: Any, view: View) -> list[Highlight]:
    """The highlights of one result: its kind's function (the registry's ``highlights``), else
    its view's verdict, else the first line of its summary."""
    from infer_opt.registry import highlighter

    fn = highlighter(result.KIND)
    if fn is not None:
        return fn(result, view)
    out = _verdict(view)
    if not out and view.summary:
        key, value = view.summary[0]
        out = [Highlight(view.title, f"{key}: {value}")]
    return out
