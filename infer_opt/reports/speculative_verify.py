"""View of ``speculative verify``: each rule of the sampler, its test and verdict, and the
acceptance rates measured against the formula."""

from __future__ import annotations

import math

from infer_opt.reports.attention_check import error_text
from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.speculative_verify import RuleVerdict, SpeculativeVerifyResult
from infer_opt.units import format_number


def _p_value(value: float | None) -> str:
    if value is None:
        return "— (too few trials)"
    if value == 0:
        return "< 1e-300"
    return f"{value:.2e}" if value < 1e-3 else f"{value:.3g}"


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def _z(value: float | None) -> str:
    if value is None:
        return "—"
    return "∞" if math.isinf(value) else f"{value:+.2f}"


def _rule_name(rule: str) -> str:
    return {"exact": "exact (residual max(p-q,0)/Z)", "resample-p": "wrong (resample from p)"}.get(rule, rule)


def _rule_ok(verdict: RuleVerdict) -> bool:
    """The exact rule must match p; the wrong rule must be detected (by both tests)."""
    if verdict.rule == "exact":
        return not verdict.exact_differs and not verdict.chi2_rejects
    return verdict.exact_differs and verdict.chi2_rejects


def _rule_outcome(verdict: RuleVerdict) -> str:
    ok = _rule_ok(verdict)
    if verdict.rule == "exact":
        return "matches p" if ok else "DIFFERS from p"
    return "detected" if ok else "NOT detected"


def _rules_table(result: SpeculativeVerifyResult) -> Table:
    verdicts = (result.exact, result.wrong)
    columns = [
        Column("rule", "Correction rule", align="left"),
        Column("exact_max_abs_error", "Exact: max |P - p|", error_text, csv_header="exact_max_abs_error"),
        Column("chi2_p_value", "χ² p (first token)", _p_value, csv_header="chi2_p_value"),
        Column("chi2_sequence_p_value", f"χ² p ({result.k + 1}-token seq.)", _p_value),
        Column("outcome", "Verdict", align="left"),
    ]
    return Table(
        "Output distribution against the target p",
        columns,
        rows_of(verdicts, columns, rule=lambda v: _rule_name(v.rule), outcome=_rule_outcome),
        caption=(
            f"exact: enumeration of every draft/verify outcome, tolerance {result.exact_tolerance:g}; "
            f"χ²: {result.trials:,} seeded rounds, reject p below {result.significance:g}"
        ),
        highlight={i: "bad" for i, v in enumerate(verdicts) if not _rule_ok(v)},
    )


def _rates_table(result: SpeculativeVerifyResult) -> Table:
    columns = [
        Column("quantity", "Quantity", align="left"),
        Column("measured", "Measured (Monte-Carlo)", _rate),
        Column("predicted", "Predicted (calculator)", _rate),
        Column("standard_error", "Std. error", _rate),
        Column("z_score", "z", _z),
        Column("within", f"Within {result.sigma_limit:g} SE"),
    ]
    return Table(
        "Exact rule: measured against the calculators",
        columns,
        rows_of(result.rates, columns),
        caption="predicted: α_i = A(p_i, q_i) = Σ min(p_i, q_i), E[N] = Σ_i Π_{j≤i} α_j",
        highlight={i: "bad" for i, r in enumerate(result.rates) if not r.within},
    )


def _verify_summary(result: SpeculativeVerifyResult) -> list[tuple[str, str]]:
    summary = [
        ("Vocabulary, draft length", f"V = {result.vocab}, k = {result.k}"),
        ("Distributions", "random per position (seeded Dirichlet(1)): p_1..p_{k+1}, q_1..q_k"),
        ("Trials, seed", f"{result.trials:,} rounds per rule, seed {result.seed}"),
    ]
    if result.alpha_target is not None:
        summary.append(("Draft tuned to acceptance", f"{result.alpha_target:g} per position"))
    summary.append(
        (
            "Per round (exact rule, mean)",
            f"{format_number(result.mean_drafted)} KV positions written, "
            f"{format_number(result.mean_kv_kept)} kept, {format_number(result.mean_emitted)} tokens emitted",
        )
    )
    return summary


def _verify_verdict(result: SpeculativeVerifyResult) -> str:
    if result.passed:
        return "PASS: the sampler preserves p; the wrong 'resample from p' rule is detected."
    problems = []
    if not result.exact_rule_ok:
        problems.append("the exact rule does not reproduce p")
    if not result.wrong_rule_detected:
        problems.append("the wrong rule was not detected")
    if not result.rates_ok:
        problems.append("measured rates disagree with the calculators")
    return "FAIL: " + "; ".join(problems) + "."


def build_view(result: SpeculativeVerifyResult) -> View:
    notes = [
        "A round's output is the start of a target sample: completed by the target to k+1 tokens it must "
        "be distributed exactly as k+1 target steps (that is what 'exact' compares).",
        f"With a fixed seed the outcome is deterministic; over random seeds the exact rule fails by chance "
        f"with probability about {2 * result.significance:g} (two χ² tests) plus ~6e-7 per rate compared.",
        "Emitted tokens exceed the KV positions kept by the correction/bonus token: it was sampled from "
        "the target's output but not yet fed through it (the next round starts with it).",
    ]
    return View(
        title="Speculative sampler exactness check",
        summary=_verify_summary(result),
        tables=[_rules_table(result), _rates_table(result)],
        notes=notes,
        warnings=list(result.warnings),
        verdict=_verify_verdict(result),
        verdict_ok=result.passed,
    )
