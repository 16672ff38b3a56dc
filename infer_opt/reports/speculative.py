"""Views of the speculative-decoding results: speedup, acceptance, plans, engine counters."""

from __future__ import annotations

from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.speculative import AcceptanceResult, Costs, MetricsResult, PlansResult, SpeedupResult
from infer_opt.units import format_duration, format_number, format_percent, format_ratio

PREDICTION_NOTE = "Speedup and costs per token are model predictions from the costs given, not measurements."

#: the acceptance table lists every token up to this vocabulary size, else the largest ones
MAX_TOKEN_ROWS = 64


def _prob(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _tokens(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _verify_text(costs: Costs, k: int) -> str:
    c_v = costs.verify_s(k)
    if costs.verify_assumed:
        return f"{format_duration(c_v)} (assumed c_v = c_t: no --verify-cost given)"
    if costs.verify_per_k_s:
        return (
            f"{format_duration(c_v)} = {format_duration(costs.verify_base_s)} + "
            f"{format_duration(costs.verify_per_k_s)}·k"
        )
    return format_duration(c_v)


def _round_text(costs: Costs, k: int, round_time_s: float) -> str:
    return (
        f"{format_duration(round_time_s)} = {k} × {format_duration(costs.draft_s)} draft + "
        f"{format_duration(costs.verify_s(k))} verify + {format_duration(costs.overhead_s)} overhead"
    )


def _acceptance_text(result: SpeedupResult) -> str:
    if result.alpha is not None:
        return f"α = {result.alpha:g} at every position"
    return "α_i = " + ", ".join(f"{a:g}" for a in result.alphas_used) + " (per position)"


def _speedup_summary(result: SpeedupResult) -> list[tuple[str, str]]:
    costs = result.costs
    summary = [
        ("Draft length k", str(result.k)),
        ("Acceptance", _acceptance_text(result)),
        ("Committed tokens per round E[N]", f"{_tokens(result.expected_tokens)} (bonus token included)"),
    ]
    if result.budget is not None:
        summary.append(
            (
                f"Within budget L = {result.budget}",
                f"E[min(N, L)] = {_tokens(result.expected_tokens_within_budget)}",
            )
        )
    summary += [
        ("Target step c_t", format_duration(costs.target_s)),
        ("Verify cost c_v(k)", _verify_text(costs, result.k)),
        ("Round time", _round_text(costs, result.k, result.round_time_s)),
        ("Speedup S (predicted)", format_ratio(result.speedup)),
        (
            "Cost per committed token",
            f"{format_duration(result.cost_per_token_s)} (plain decoding: {format_duration(costs.target_s)})",
        ),
    ]
    if result.best_k is not None:
        summary.append(
            (f"Best k in 1..{result.sweep_kmax}", f"k = {result.best_k}: {format_ratio(result.best_speedup)}")
        )
    return summary


def _position_table(result: SpeedupResult) -> Table:
    rows = [
        {
            "position": i,
            "alpha": None if i == 0 else result.alphas_used[i - 1],
            "survival": result.survival[i],
            "counted": result.budget is None or i < result.budget,
        }
        for i in range(result.k + 1)
    ]
    columns = [
        Column("position", "Draft position i", csv_header="position"),
        Column("alpha", "α_i", _prob, csv_header="alpha"),
        Column("survival", "P(N ≥ i+1) = Π_{j≤i} α_j", _prob, csv_header="p_n_at_least_i_plus_1"),
    ]
    highlight = {}
    if result.budget is not None:
        columns.append(Column("counted", f"counts within L = {result.budget}", csv_header="within_budget"))
        highlight = {i: "muted" for i, r in enumerate(rows) if not r["counted"]}
    caption = "E[N] = Σ P(N ≥ i+1); i = 0: the target's own token"
    return Table("Committed-token distribution", columns, rows, caption=caption, highlight=highlight)


def _curve_table(result: SpeedupResult) -> Table:
    highlight = {i: "bad" for i, p in enumerate(result.curve) if p.speedup < 1}
    highlight.update({i: "best" for i, p in enumerate(result.curve) if p.k == result.best_k})
    per_round = "Tokens per round" + ("" if result.budget is None else f" (≤ L = {result.budget})")
    columns = [
        Column("k", "k", csv_header="k"),
        Column("expected_tokens", per_round, _tokens, csv_header="expected_tokens"),
        Column("round_time_s", "Round time", format_duration, csv_header="round_time_s"),
        Column("speedup", "Speedup", format_ratio, csv_header="speedup", importance=2),
        Column("cost_per_token_s", "Cost per token", format_duration, csv_header="cost_per_token_s"),
    ]
    return Table(
        f"Draft length sweep (k = 1..{result.sweep_kmax})",
        columns,
        rows_of(result.curve, columns),
        caption="best k in green; red: slower than plain decoding",
        highlight=highlight,
    )


def _speedup_notes(result: SpeedupResult) -> list[str]:
    notes = []
    if result.averaged_alpha is not None:
        notes.append(
            f"Averaging the α_i into one ᾱ = {result.averaged_alpha:.4g} would give E[N] = "
            f"{_tokens(result.averaged_alpha_expected_tokens)} instead of {_tokens(result.expected_tokens)}: "
            "wrong, because acceptance at position i needs every earlier position accepted."
        )
    if result.budget is not None:
        notes.append(
            f"Speedup and cost per token use E[min(N, L)] = {_tokens(result.expected_tokens_within_budget)} "
            f"(a round can commit at most L = {result.budget} tokens)."
        )
        if result.budget <= result.k:
            notes.append(
                f"With L = {result.budget} ≤ k, draft positions beyond L - 1 = {result.budget - 1} cannot be "
                "committed; drafting fewer tokens would cost less."
            )
    notes.append(PREDICTION_NOTE)
    return notes


def _speedup_verdict(result: SpeedupResult) -> str | None:
    parts = []
    if result.slowdown:
        parts.append(
            f"Slower than plain decoding: S = {format_ratio(result.speedup)} < 1 (a round costs "
            f"{format_duration(result.round_time_s)}; plain decoding commits the same tokens in "
            f"{format_duration(result.plain_time_s)})."
        )
    if result.best_speedup is not None and result.best_speedup < 1:
        parts.append(f"No draft length in 1..{result.sweep_kmax} beats plain decoding with these costs.")
    return " ".join(parts) or None


def build_speedup_view(result: SpeedupResult) -> View:
    tables = [_position_table(result)]
    if result.curve:
        tables.append(_curve_table(result))
    verdict = _speedup_verdict(result)
    return View(
        title="Speculative decoding: committed tokens and speedup",
        summary=_speedup_summary(result),
        tables=tables,
        notes=_speedup_notes(result),
        warnings=list(result.warnings),
        verdict=verdict,
        verdict_ok=verdict is None,
    )


def build_acceptance_view(result: AcceptanceResult, *, top: int = MAX_TOKEN_ROWS) -> View:
    """The acceptance view: the ``top`` tokens with the largest max(p, q) (``to_frame()``: all)."""
    tokens = list(result.per_token)
    caption = "a(x) is shown only where q(x) > 0 (a token never drafted has no acceptance test)."
    if len(tokens) > top:
        keep = sorted(tokens, key=lambda t: max(t.p, t.q), reverse=True)[:top]
        tokens = sorted(keep, key=lambda t: t.token)
        caption += (
            f" Showing the {top} of {len(result.per_token)} tokens with the largest max(p, q); "
            "--json has every token."
        )
    columns = [
        Column("token", "Token", csv_header="token"),
        Column("p", "p(x)", _prob, csv_header="p"),
        Column("q", "q(x)", _prob, csv_header="q"),
        Column("accept_prob", "a(x) = min(1, p/q)", _prob, csv_header="accept_prob"),
        Column("accepted_mass", "min(p, q)", _prob, csv_header="accepted_mass"),
        Column("residual", "r(x)", _prob, csv_header="residual"),
        Column("output", "Output, exact rule", _prob, csv_header="output_exact"),
        Column("wrong_output", "Output, wrong rule", _prob, csv_header="output_wrong"),
    ]
    summary = [
        ("Acceptance rate A = Σ min(p, q)", f"{result.acceptance_rate:.6g}"),
        ("Rejection mass Z = 1 - A", f"{result.rejection_mass:.6g}"),
        ("Total variation TV(p, q)", f"{result.total_variation:.6g} (A = 1 - TV)"),
        (
            "Exact rule's output",
            f"min(p, q) + Z·r = p (largest difference {result.exact_rule_max_error:.2g})",
        ),
        (
            "Wrong rule (resample from p)",
            f"min(p, q) + Z·p: off from p by up to {result.wrong_rule_max_error:.4g}",
        ),
    ]
    notes = []
    if result.residual is None:
        notes.append("Z = 0 (p ≤ q everywhere, so p = q): rejection cannot happen and no residual is built.")
    if result.from_logits:
        notes.append(
            f"p and q are softmax of the given logits at temperatures T_p = {result.p_temperature:g}, "
            f"T_q = {result.q_temperature:g}; q must be the distribution actually sampled from."
        )
    elif result.normalized:
        notes.append("p and q were rescaled by their sums (--normalize).")
    else:
        notes.append(f"p and q were checked to sum to 1 within {result.tolerance:g} (absolute).")
    return View(
        title="Speculative sampling: acceptance and residual",
        summary=summary,
        tables=[Table("Per token", columns, rows_of(tokens, columns), caption=caption)],
        notes=notes,
    )


def build_plans_view(result: PlansResult) -> View:
    columns = [
        Column("plan", "Plan", align="left", csv_header="plan"),
        Column("rounds", "Rounds", csv_header="rounds"),
        Column("total_tokens", "Tokens", csv_header="total_tokens"),
        Column("total_time_s", "Time", format_duration, csv_header="total_time_s"),
        Column("tokens_per_round", "Tokens/round", lambda v: f"{v:.4g}", csv_header="tokens_per_round"),
        Column("time_per_round_s", "Time/round", format_duration, csv_header="time_per_round_s"),
        Column(
            "cost_per_token_s",
            "Cost/token Σt/Σn",
            format_duration,
            csv_header="cost_per_token_s",
            importance=2,
        ),
        Column("relative_cost", "vs best", format_ratio, csv_header="relative_cost", importance=1),
        Column("mean_of_ratios_s", "Mean of t/n (naive)", format_duration, csv_header="mean_of_ratios_s"),
        Column("naive_rank", "Naive rank", csv_header="naive_rank"),
    ]
    best = result.plans[0]
    return View(
        title="Speculative plans from logged rounds",
        summary=[
            ("Best plan", f"{result.best}: {format_duration(best.cost_per_token_s)} per committed token"),
            ("Plans compared", str(len(result.plans))),
        ],
        tables=[
            Table(
                "Plans, cheapest first",
                columns,
                rows_of(result.plans, columns),
                caption="Cost per token is Σ round time / Σ committed tokens (ranked by it); rank 1 = best.",
                highlight={0: "best"},
            )
        ],
        notes=["Measured from the log: rounds, times and tokens are as recorded."],
        warnings=list(result.warnings),
        verdict=f"Best plan: {result.best}",
    )


def _metrics_source(result: MetricsResult) -> list[tuple[str, str]]:
    """Where Prometheus counters came from: the file(s), the model and the engines summed."""
    src = result.source
    if src is None:
        return []
    where = src.file if src.before is None else f"{src.file} minus {src.before} (the interval between them)"
    out = [("Counters", f"vLLM Prometheus metrics: {where}")]
    if src.model_name:
        out.append(("Model", src.model_name))
    if src.engines:
        out.append(("Engines summed", ", ".join(src.engines)))
    if result.accepted_total is not None:
        out.append(("Accepted draft tokens", format_number(result.accepted_total)))
    return out


def build_metrics_view(result: MetricsResult) -> View:
    columns = [
        Column("position", "Position i", csv_header="position"),
        Column("accepted", "Accepted", csv_header="accepted"),
        Column("unconditional", "u_i = acc_i/drafts", _prob, csv_header="unconditional_rate"),
        Column("conditional", "α_i = acc_i/acc_{i-1}", _prob, csv_header="conditional_rate"),
    ]
    k = len(result.positions)
    summary = [
        *_metrics_source(result),
        ("Drafts", format_number(result.drafts)),
        ("Draft positions k", str(k)),
        (
            "E[N] = 1 + Σ u_i",
            f"{_tokens(result.expected_tokens)} committed tokens per round (bonus included)",
        ),
        ("Accepted draft tokens per round", _tokens(result.mean_accepted)),
        ("Draft acceptance rate", format_percent(result.draft_acceptance_rate)),
    ]
    notes = ["Rates are computed from the counters given (measured)."]
    if any(p.conditional is None for p in result.positions):
        notes.append("α_i is undefined (—) after a position that was never accepted.")
    verdict = None
    verdict_ok = True
    if result.costs is not None and result.speedup is not None:
        summary += [
            ("Verify cost c_v(k)", _verify_text(result.costs, k)),
            ("Round time", _round_text(result.costs, k, result.round_time_s or 0.0)),
            ("Speedup S (predicted)", format_ratio(result.speedup)),
            ("Cost per committed token", format_duration(result.cost_per_token_s)),
        ]
        notes.append(PREDICTION_NOTE)
        if result.speedup < 1:
            verdict = f"Slower than plain decoding: S = {format_ratio(result.speedup)} < 1."
            verdict_ok = False
    return View(
        title="Speculative decoding from engine counters",
        summary=summary,
        tables=[Table("Per draft position", columns, rows_of(result.positions, columns))],
        notes=notes,
        warnings=list(result.warnings),
        verdict=verdict,
        verdict_ok=verdict_ok,
    )
