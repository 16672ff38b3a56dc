"""View of ``speculative measure``: the measured costs c_t, c_d(k), c_v(k), c_m, the speedup grid
and break-even α they predict."""

from __future__ import annotations

from typing import Any

from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.speculative_measure import SpecMeasureResult
from infer_opt.units import (
    format_duration,
    format_percent,
    format_ratio,
)

SPEC_NOTE = (
    "Costs are measurements on this device (median and IQR over the repetitions); speedups, best k "
    "and break-even α are model predictions from them, with c_v(k) taken from the fit."
)


BOOKKEEPING_NOTE = (
    "c_m is the KV-cache rollback/commit of a round: the built-in cache is preallocated and already "
    "holds the accepted positions, so it is a length reset on each model's cache (host time, no copy). "
    "Sampling and the accept/reject arithmetic are not in c_t, c_d or c_m."
)


def _ratio(value: float | None) -> str:
    return "—" if value is None else format_ratio(value)


def _alpha(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else format_percent(value)


def fit_formula(base_s: float, per_k_s: float) -> str:
    """``74.4 ms + 1.2 ms·k`` (``74.4 ms, constant`` without a slope)."""
    if per_k_s == 0:
        return f"{format_duration(base_s)}, constant in k"
    if base_s == 0:
        return f"{format_duration(per_k_s)}·k"
    return f"{format_duration(base_s)} + {format_duration(per_k_s)}·k"


def _fit_text(result: SpecMeasureResult) -> str:
    fit = result.fit
    text = f"c_v(k) ≈ {fit_formula(fit.base_s, fit.per_k_s)} " + (
        f"(max error {format_percent(fit.max_rel_error)}, median {format_percent(fit.median_rel_error)})"
    )
    if fit.constrained == "single point":
        text += "; one k measured: c_v taken as constant"
    elif fit.constrained:
        text += f"; {fit.constrained} held at 0 to keep both coefficients >= 0"
    return text


def _cost_rows(result: SpecMeasureResult) -> list[dict[str, Any]]:
    fitted = {f"c_v({v.k})": v for v in result.verify_s}
    rows = []
    for m in result.measurements:
        point = fitted.get(m.name)
        rows.append(
            {
                "name": m.name,
                "what": m.what,
                "median_s": m.summary.median_s,
                "iqr_s": m.summary.iqr_s,
                "n": m.summary.n,
                "fit_s": None if point is None else point.fit_s,
                "fit_error": None if point is None else point.fit_rel_error,
            }
        )
    return rows


def _prediction_summary(result: SpecMeasureResult) -> list[tuple[str, str]]:
    p = result.prediction
    if p is None:
        return []
    if p.alpha is not None:
        acceptance = f"α = {p.alpha:g}"
    else:
        acceptance = "α_i = " + ", ".join(f"{a:.3g}" for a in p.alphas_used)
    slower = " — a slowdown" if p.slowdown else ""
    return [
        ("Prediction from", result.prediction_source or "—"),
        (
            "Predicted speedup",
            f"{format_ratio(p.speedup)} at k = {p.k} ({acceptance}; E[N] = {p.expected_tokens:.3f}){slower}",
        ),
    ]


def _spec_summary(result: SpecMeasureResult) -> list[tuple[str, str]]:
    threads = f", {result.threads} threads" if result.threads else ""
    models = f"target {result.target}, draft {result.draft}, vocabulary {result.vocab_size}"
    if result.draft_note:
        models += f" ({result.draft_note})"
    return [
        ("Models", models),
        ("Device", f"{result.device_name} ({result.device}), {result.dtype}{threads}"),
        (
            "KV cache",
            f"{result.context} cached tokens, batch 1; {result.reps} reps after {result.warmup} warm-up",
        ),
        ("Target step c_t", format_duration(result.target_step_s)),
        (
            "Draft step c_d",
            f"{format_duration(result.draft_step_s)} (c_d/c_t = {result.draft_to_target:.3g})",
        ),
        ("Bookkeeping c_m", format_duration(result.bookkeeping_s)),
        ("Verification fit", _fit_text(result)),
        *_prediction_summary(result),
    ]


def cost_columns() -> list[Column]:
    """The columns of a table of measured costs (``speculative measure`` and ``run``): name,
    what was timed, median, IQR, repetitions."""
    return [
        Column("name", "Cost", align="left", csv_header="cost"),
        Column("what", "What was timed", align="left", csv_header="what"),
        Column("median_s", "Median", format_duration, csv_header="median_s"),
        Column("iqr_s", "IQR", format_duration, csv_header="iqr_s"),
        Column("n", "Reps", csv_header="reps"),
    ]


def _costs_table(result: SpecMeasureResult) -> Table:
    return Table(
        "Measured costs",
        [
            *cost_columns(),
            Column("fit_s", "Fit a + b·k", format_duration, csv_header="fit_s"),
            Column("fit_error", "Fit error", _pct, csv_header="fit_rel_error"),
        ],
        _cost_rows(result),
    )


def _grid_table(result: SpecMeasureResult) -> Table:
    ks = range(1, result.k_max + 1)
    columns = [Column("alpha", "α", lambda v: f"{v:.2f}", align="left", csv_header="alpha")]
    columns += [Column(f"k{k}", f"k={k}", _ratio, csv_header=f"speedup_k{k}") for k in ks]
    columns += [
        Column("best_k", "Best k", csv_header="best_k"),
        Column("best", "Best S", _ratio, csv_header="best_speedup"),
    ]
    rows = []
    for row in result.speedup_by_alpha:
        cells: dict[str, Any] = {"alpha": row.alpha, "best_k": row.best_k, "best": row.best_speedup}
        cells.update({f"k{k}": s for k, s in zip(ks, row.speedups, strict=True)})
        rows.append(cells)
    return Table(
        "Predicted speedup S(α, k) from the measured costs",
        columns,
        rows,
        caption="S = c_t·E[N] / (k·c_d + c_v(k) + c_m), E[N] = (1 − α^(k+1))/(1 − α); S < 1 is a slowdown.",
        highlight={i: "best" if r.best_speedup > 1 else "bad" for i, r in enumerate(result.speedup_by_alpha)},
    )


def _break_even_meaning(alpha: float | None) -> str:
    if alpha is None:
        return "never wins: even α = 1 is slower"
    if alpha == 0:
        return "never loses: a round costs at most one target step"
    return f"wins for α > {alpha:.3f}"


def _break_even_table(result: SpecMeasureResult) -> Table:
    columns = [
        Column("k", "k", csv_header="k"),
        Column("round_time_s", "Round k·c_d + c_v + c_m", format_duration, csv_header="round_time_s"),
        Column("required_tokens", "E[N] needed", lambda v: f"{v:.3f}", csv_header="required_tokens"),
        Column("alpha", "Break-even α", _alpha, csv_header="break_even_alpha"),
        Column("meaning", "Meaning", align="left", csv_header="meaning"),
    ]
    points = result.break_even_alpha_by_k
    return Table(
        "Break-even acceptance per draft length (predicted)",
        columns,
        rows_of(points, columns, meaning=lambda b: _break_even_meaning(b.alpha)),
        caption="Solves E[N](α) = round time / c_t (brentq on the monotone E[N]); below it S < 1.",
        highlight={i: "bad" if b.alpha is None else "muted" for i, b in enumerate(points)},
    )


def _simulation_table(sim: Any) -> Table:
    rows = [
        {"position": i + 1, "accepted": acc, "alpha": a}
        for i, (acc, a) in enumerate(zip(sim.accepted_per_position, sim.alphas, strict=True))
    ]
    return Table(
        f"Simulated acceptance: {sim.rounds} rounds of k = {sim.k} over {sim.prompts} random prompts "
        f"(seed {sim.seed})",
        [
            Column("position", "Draft position i", csv_header="position"),
            Column("accepted", "Rounds accepting i", csv_header="accepted"),
            Column("alpha", "α_i (conditional)", _alpha, csv_header="alpha"),
        ],
        rows,
        caption=(
            f"Mean committed tokens per round {sim.mean_tokens:.3f}; mean Σ min(p, q) over "
            f"{sim.positions_compared} drafted positions {sim.mean_overlap:.3f} "
            f"({format_duration(sim.elapsed_s)})."
        ),
    )


def _spec_verdict(result: SpecMeasureResult) -> tuple[str, bool]:
    p = result.prediction
    if p is not None:
        how = ": a slowdown." if p.slowdown else "."
        return (
            f"Predicted speedup {format_ratio(p.speedup)} at k = {p.k}, from {result.prediction_source}{how}",
            not p.slowdown,
        )
    best = list(result.best_k_by_alpha)
    wins = [b for b in best if b.speedup > 1]
    if not wins:
        return (
            f"Speculation loses at every α in {best[0].alpha:g}–{best[-1].alpha:g} with these costs "
            "(predicted): the draft or the verification pass is too expensive.",
            False,
        )
    first = wins[0]
    return (
        f"Speculation pays from α ≈ {first.alpha:g} (best k = {first.k}, {format_ratio(first.speedup)}); "
        f"at α = {best[-1].alpha:g}: best k = {best[-1].k}, {format_ratio(best[-1].speedup)} (predicted).",
        True,
    )


def build_view(result: SpecMeasureResult) -> View:
    tables = [_costs_table(result), _grid_table(result), _break_even_table(result)]
    notes = [SPEC_NOTE, BOOKKEEPING_NOTE]
    if result.simulation is not None:
        tables.append(_simulation_table(result.simulation))
        notes.append(f"Simulated α: {result.simulation.note}.")
    verdict, ok = _spec_verdict(result)
    return View(
        title=f"Speculative decoding from measured costs: {result.target} + {result.draft} draft",
        summary=_spec_summary(result),
        tables=tables,
        notes=notes,
        warnings=list(result.warnings),
        verdict=verdict,
        verdict_ok=ok,
    )
