"""Views of compile-amortization results (one shape, and per bucket)."""

from __future__ import annotations

from operator import attrgetter

from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.amortize import AmortizeBucketsResult, AmortizeResult
from infer_opt.units import format_duration, format_number

PREDICTION_NOTE = (
    "Times and call counts are the inputs as given; totals and net gains are the model's "
    "prediction n·(t_e − t_c) − C, not measurements."
)


def _signed(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return ("+" if seconds > 0 else "") + format_duration(seconds)


def _total(seconds: float) -> str:
    # enough digits to tell the two totals apart near the break-even
    return format_duration(seconds, 6)


def _calls(value: float | None) -> str:
    if value is None:
        return "—"
    if value != int(value) and abs(value) >= 1000:
        return f"{value:,.1f}"
    return format_number(value, 6)


def build_view(result: AmortizeResult) -> View:
    per_call = (
        f"{format_duration(result.eager_s)} eager → {format_duration(result.compiled_s)} compiled "
        f"(saves {format_duration(result.saving_s)} per call)"
    )
    summary = [("Compile cost C", format_duration(result.compile_cost_s)), ("Per call", per_call)]
    if result.break_even_calls is None:
        summary.append(("Break-even n* = C/(t_e − t_c)", f"never — {result.reason}"))
    else:
        summary.append(
            (
                "Break-even n* = C/(t_e − t_c)",
                f"{_calls(result.break_even_calls)} calls; a net gain needs more: "
                f"from {_calls(result.min_gaining_calls)} calls",
            )
        )
    if result.calls is not None:
        summary.append((f"Net gain at {_calls(result.calls)} calls", _signed(result.net_gain_s)))

    columns = [
        Column("label", "At", align="left"),
        Column("calls", "Calls n", _calls, csv_header="calls"),
        Column("eager", "Eager n·t_e", _total, csv_header="eager_total_s"),
        Column("compiled", "Compiled C + n·t_c", _total, csv_header="compiled_total_s"),
        Column("net", "Net gain", _signed, csv_header="net_gain_s"),
    ]
    rows = rows_of(
        result.checkpoints,
        columns,
        eager=attrgetter("eager_total_s"),
        compiled=attrgetter("compiled_total_s"),
        net=attrgetter("net_gain_s"),
    )
    highlight = {i: ("best" if r["net"] > 0 else "muted") for i, r in enumerate(rows) if r["net"] != 0}
    table = Table("Total time by call count (predicted)", columns, rows, highlight=highlight)

    if result.break_even_calls is None:
        verdict, ok = "Don't compile: the compiled version is not faster, so C is never recovered.", False
    elif result.compile is None:
        verdict = f"Compile if this shape will run more than {_calls(result.break_even_calls)} times."
        ok = True
    elif result.compile:
        verdict = f"Compile: it gains {format_duration(result.net_gain_s)} over {_calls(result.calls)} calls."
        ok = True
    else:
        verdict = (
            f"Don't compile: {_calls(result.calls)} calls do not exceed the break-even "
            f"({_calls(result.break_even_calls)}); net {format_duration(result.net_gain_s)}."
        )
        ok = False
    return View(
        title="Compile amortization (one shape)",
        summary=summary,
        tables=[table],
        notes=[PREDICTION_NOTE],
        verdict=verdict,
        verdict_ok=ok,
    )


def build_buckets_view(result: AmortizeBucketsResult) -> View:
    has_times = any(b.eager_s is not None for b in result.buckets)
    columns = [Column("bucket", "Bucket", align="left", csv_header="bucket")]
    columns.append(Column("calls", "Calls", _calls, csv_header="calls"))
    columns.append(Column("compile_s", "Compile", format_duration, csv_header="compile_s"))
    if has_times:
        columns.append(Column("eager_s", "Eager", format_duration, csv_header="eager_s"))
        columns.append(Column("compiled_s", "Compiled", format_duration, csv_header="compiled_s"))
    columns += [
        Column("saving_s", "Saving/call", _signed, csv_header="saving_s"),
        Column("break_even", "Break-even", _calls, csv_header="break_even_calls"),
        Column("net", "Net gain", _signed, csv_header="net_gain_s", importance=2),
        Column("decision", "Compile?", align="left", csv_header="compile", importance=2),
    ]
    rows = []
    highlight = {}
    for i, b in enumerate(result.buckets):
        rows.append(
            {
                "bucket": b.bucket,
                "calls": b.calls,
                "compile_s": b.compile_s,
                "eager_s": b.eager_s,
                "compiled_s": b.compiled_s,
                "saving_s": b.saving_s,
                "break_even": b.break_even_calls,
                "net": b.net_gain_s,
                "decision": b.compile,
            }
        )
        highlight[i] = "best" if b.compile else "muted"
    caption = "Break-even = C_i/Δt_i calls; net gain = n_i·Δt_i − C_i; compile iff net gain > 0."
    if any(b.break_even_calls is None for b in result.buckets):
        caption += " Break-even —: compiled is not faster, never pays."
    table = Table("Per bucket (predicted)", columns, rows, caption=caption, highlight=highlight)
    n = len(result.buckets)
    summary = [
        ("Buckets", f"{n} from {result.source}; calls from {result.calls_source}"),
        ("Total calls", _calls(result.total_calls)),
        ("Compile", f"{result.compiled_count} of {n} buckets (net gain > 0)"),
        ("Net gain, chosen set", _signed(result.total_net_gain_s)),
        ("Net gain, compile every bucket", _signed(result.compile_all_net_gain_s)),
        ("Net gain, compile none", _signed(result.compile_none_net_gain_s)),
        ("Compile time spent (chosen)", format_duration(result.compile_cost_chosen_s)),
    ]
    if result.compiled_count:
        verdict = (
            f"Compile {result.compiled_count} of {n} buckets: net {_signed(result.total_net_gain_s)}"
            f" (vs {_signed(result.compile_all_net_gain_s)} compiling all)."
        )
    else:
        verdict = "Compile no bucket: none recovers its compile cost at these call counts."
    return View(
        title="Compile amortization per bucket",
        summary=summary,
        tables=[table],
        notes=[PREDICTION_NOTE.replace("n·(t_e − t_c) − C", "n_i·Δt_i − C_i")],
        verdict=verdict,
        verdict_ok=result.compiled_count > 0,
    )
