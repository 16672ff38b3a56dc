"""View of a speculative-decoding run: measured against the cost model's prediction."""

from __future__ import annotations

from typing import Any

from infer_opt.reports.speculative_measure import cost_columns
from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.speculative_run import RunPoint, SpecRunResult, measured_speedup_range
from infer_opt.units import format_duration, format_number, format_ratio

MEASURED_NOTE = (
    "Measured: tokens/s of plain and speculative decoding of the same N tokens (prefill excluded), "
    "timed alike in interleaved repetitions; measured speedup = plain time / speculative time."
)
PREDICTED_NOTE = (
    "Predicted: S = c_t·E[N] / (k·c_d + c_v(k) + c_m) with c_t, c_d, c_v(k), c_m measured in this run "
    "(over a cache of prompt + N/2 positions) and E[N] = 1 + Σ_i Π_{j≤i} α_j from the realised α_i "
    "(rounds that drafted all k tokens). The model leaves out sampling and the acceptance test, Python "
    "between the forwards, a separate draft's catch-up forward after a fully accepted round, the growth "
    "of the cache over the run and the shorter last rounds: the relative error is what they add up to."
)
SAMPLING_NOTE = (
    "Sampling: the output is distributed as the target's by the exact rule (checked by a statistical "
    "test in the test suite); outputs of plain and speculative decoding differ token by token."
)


def _alphas(point: RunPoint) -> str:
    return ", ".join("—" if a is None else f"{a:.2f}" for a in point.alpha_per_position)


def _speedup_text(result: SpecRunResult, point: RunPoint) -> str:
    low, high = measured_speedup_range(result.plain_time, point.time)
    return f"{format_ratio(point.measured_speedup)} (quartiles {low:.3f}–{high:.3f})"


def _summary(result: SpecRunResult) -> list[tuple[str, str]]:
    h = result.headline
    threads = f", {result.threads} thread(s)" if result.threads else ""
    models = f"target {result.target}, draft {result.draft}, vocabulary {result.vocab_size}"
    if result.draft_note:
        models += f" ({result.draft_note})"
    decoding = "greedy" if result.greedy else f"sampling at T = {result.temperature:g}"
    plain = result.plain_time
    summary = [
        ("Models", models),
        ("Device", f"{result.device_name} ({result.device}), {result.dtype}{threads}"),
        (
            "Run",
            f"{decoding}; {result.new_tokens} new tokens after a random {result.prompt_len}-token prompt "
            f"(seed {result.seed}), batch 1; {result.reps} reps after {result.warmup} warm-up",
        ),
        (
            "Plain decoding (measured)",
            f"{format_number(result.plain_tokens_per_s)} tokens/s "
            f"({format_duration(result.plain_per_token_s)} per token, IQR/median "
            f"{plain.rel_iqr:.0%})",
        ),
        ("Draft length k", f"{h.k}" + (" (the best measured of the sweep)" if result.sweep else "")),
        ("Speculative decoding (measured)", f"{format_number(h.tokens_per_s)} tokens/s"),
        ("Speedup (measured)", _speedup_text(result, h)),
        (
            "Speedup (predicted)",
            f"{format_ratio(h.predicted_speedup)}; relative error {h.relative_error:+.1%}",
        ),
        (
            "Committed tokens per round",
            f"{h.expected_tokens_measured:.3f} measured over {h.rounds} rounds; "
            f"E[N] = {h.expected_tokens_predicted:.3f} from α_i = {_alphas(h)}",
        ),
        (
            "Costs (measured)",
            f"c_t {format_duration(result.target_step_s)}, c_d {format_duration(result.draft_step_s)}, "
            f"c_v({h.k}) {format_duration(h.verify_s)}, c_m {format_duration(result.bookkeeping_s)} "
            f"over {result.cost_context} cached positions",
        ),
    ]
    if result.greedy:
        same = "yes, for every k" if result.tokens_identical else "NO"
        summary.append(("Greedy output = plain greedy output", same))
    return summary


def _point_rows(result: SpecRunResult) -> list[dict[str, Any]]:
    return [
        {
            "k": p.k,
            "alphas": _alphas(p),
            "rounds": p.rounds,
            "tokens_measured": p.expected_tokens_measured,
            "tokens_predicted": p.expected_tokens_predicted,
            "measured": p.measured_speedup,
            "predicted": p.predicted_speedup,
            "error": p.relative_error,
            "round_predicted_s": p.round_time_predicted_s,
            "round_measured_s": p.round_time_measured_s,
            "identical": p.tokens_identical,
        }
        for p in result.points
    ]


def _points_table(result: SpecRunResult) -> Table:
    columns = [
        Column("k", "k", csv_header="k"),
        Column("alphas", "α_1..α_k", align="left", csv_header="alpha_per_position"),
        Column("rounds", "Rounds", csv_header="rounds"),
        Column("tokens_measured", "N/round", lambda v: f"{v:.2f}", csv_header="tokens_per_round"),
        Column("tokens_predicted", "E[N]", lambda v: f"{v:.2f}", csv_header="expected_tokens_predicted"),
        Column("measured", "S meas.", format_ratio, csv_header="measured_speedup"),
        Column("predicted", "S pred.", format_ratio, csv_header="predicted_speedup"),
        Column("error", "Error", lambda v: f"{v:+.1%}", csv_header="relative_error"),
        Column("round_predicted_s", "Round pred.", format_duration, csv_header="round_time_predicted_s"),
        Column("round_measured_s", "Round meas.", format_duration, csv_header="round_time_measured_s"),
    ]
    if result.greedy:
        columns.append(Column("identical", "= plain", csv_header="tokens_identical"))
    rows = _point_rows(result)
    highlight = {i: "best" for i, p in enumerate(result.points) if p.k == result.headline_k}
    highlight.update({i: "bad" for i, p in enumerate(result.points) if p.tokens_identical is False})
    return Table(
        "Per draft length: measured and predicted",
        columns,
        rows,
        caption=(
            "Error = (S pred. − S meas.) / S meas.; N/round = N / rounds; "
            "round pred. = k·c_d + c_v(k) + c_m; "
            "round meas. = speculative time / rounds."
        ),
        highlight=highlight,
    )


def _costs_table(result: SpecRunResult) -> Table:
    columns = cost_columns()
    rows = rows_of(result.costs, columns, iqr_s=lambda c: c.summary.iqr_s, n=lambda c: c.summary.n)
    return Table("Measured costs", columns, rows)


def _verdict(result: SpecRunResult) -> tuple[str, bool]:
    h = result.headline
    if result.tokens_identical is False:
        bad = ", ".join(
            f"k = {p.k} from token {p.first_difference}" for p in result.points if not p.tokens_identical
        )
        return f"Greedy speculative output differs from plain greedy output ({bad}): the run failed.", False
    pace = "faster" if h.measured_speedup >= 1 else "slower"
    return (
        f"k = {h.k}: measured {format_ratio(h.measured_speedup)} ({pace} than plain decoding), predicted "
        f"{format_ratio(h.predicted_speedup)} ({h.relative_error:+.1%}).",
        h.measured_speedup >= 1,
    )


def build_view(result: SpecRunResult) -> View:
    verdict, ok = _verdict(result)
    notes = [MEASURED_NOTE, PREDICTED_NOTE]
    if not result.greedy:
        notes.append(SAMPLING_NOTE)
    return View(
        title="Speculative decoding run: measured against predicted",
        summary=_summary(result),
        tables=[_points_table(result), _costs_table(result)],
        notes=notes,
        warnings=list(result.warnings),
        verdict=verdict,
        verdict_ok=ok,
    )
