"""Views of the exactness checks: ``attention check`` and ``speculative verify``."""

from __future__ import annotations

import math

from infer_opt.kinds.attention_check import AttentionCase, AttentionCheckResult
from infer_opt.kinds.speculative_verify import RuleVerdict, SpeculativeVerifyResult
from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.units import format_number


def _error(value: float | None) -> str:
    if value is None:
        return "—"
    if math.isnan(value):
        return "NaN/inf in output"
    return "0" if value == 0 else f"{value:.2e}"


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


def _attention_outcome(case: AttentionCase) -> str:
    if case.expected_to_fail:
        if case.error is not None:
            return "wrong, raised"
        return "wrong, detected" if case.passed else "wrong, NOT detected"
    if case.passed:
        return "ok"
    if case.error is not None:
        return "RAISED"
    return "NaN/inf" if not case.finite else "MISMATCH"


def _attention_table(result: AttentionCheckResult) -> Table:
    columns = [
        Column("case", "Case", align="left"),
        Column("path", "Path", align="left"),
        Column("mask", "Mask", align="left"),
        Column("tq", "T_q"),
        Column("tk", "T_k"),
        Column("causal_offset", "q0 pos", csv_header="causal_offset"),
        Column("max_abs_error", "Max |err|", _error, csv_header="max_abs_error"),
        Column("tolerance", "Tol.", _error, csv_header="tolerance"),
        Column("outcome", "Result", align="left"),
    ]
    highlight: dict[int, str] = {}
    for i, case in enumerate(result.cases):
        if not case.passed:
            highlight[i] = "bad"
        elif case.expected_to_fail:
            highlight[i] = "muted"
    return Table(
        "Outputs against full softmax attention in float64",
        columns,
        rows_of(
            result.cases,
            columns,
            max_abs_error=lambda c: None if c.error is not None else c.max_abs_error,
            outcome=_attention_outcome,
        ),
        caption=(
            "query i sits at position q0 pos + i and must see keys 0..that position; "
            "error = max |output - float64 reference|"
        ),
        highlight=highlight,
    )


def _attention_summary(result: AttentionCheckResult) -> list[tuple[str, str]]:
    shape = f"batch {result.batch} × {result.heads} heads × head dim {result.head_dim}, {result.dtype}"
    summary = [("Checked", result.subject), ("Inputs", f"{shape}, seed {result.seed}, {result.device}")]
    if result.block_size is not None:
        summary.append(("Key block size", str(result.block_size)))
    if result.window is not None:
        summary.append(("Sliding window", f"{result.window} keys"))
    summary.append(("Reference", result.reference))
    if result.sdpa_is_causal_top_left is not None:
        torch_version = result.torch_version or "this torch"
        if result.sdpa_is_causal_top_left:
            observed = "aligns the mask top-left: one query over T_k keys saw key 0 only"
        else:
            observed = "did NOT return v_0 for one query over T_k keys (not top-left aligned here)"
        summary.append((f"SDPA is_causal=True, torch {torch_version}", observed + " (probed)"))
    return summary


def _attention_notes(result: AttentionCheckResult) -> list[str]:
    notes: list[str] = []
    if any(c.expected_to_fail for c in result.cases):
        notes.append(
            "'wrong, detected' rows use a top-left causal mask on purpose (what is_causal=True does with "
            "a KV cache): the output is finite but wrong, and the check flags it. One new token needs no "
            "mask; several need a bottom-right mask (an explicit boolean mask or causal_lower_right)."
        )
    return notes + [
        f"{c.case} / {c.path} ({c.mask}) raised {c.error}" for c in result.cases if c.error is not None
    ]


def _attention_verdict(result: AttentionCheckResult) -> str:
    failed = [c for c in result.cases if not c.passed]
    if failed:
        return "FAIL: " + "; ".join(f"{c.case}: {c.path} ({c.mask})" for c in failed)
    verdict = "PASS: every path matches the float64 reference"
    if any(c.expected_to_fail for c in result.cases):
        verdict += "; every deliberately misaligned mask was detected"
    return verdict + "."


def build_attention_check_view(result: AttentionCheckResult) -> View:
    return View(
        title="Attention exactness check",
        summary=_attention_summary(result),
        tables=[_attention_table(result)],
        notes=_attention_notes(result),
        verdict=_attention_verdict(result),
        verdict_ok=result.passed,
    )


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
        Column("exact_max_abs_error", "Exact: max |P - p|", _error, csv_header="exact_max_abs_error"),
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


def build_speculative_verify_view(result: SpeculativeVerifyResult) -> View:
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
