"""Views of the exactness checks: ``attention check`` and ``speculative verify``."""

from __future__ import annotations

import math

from infer_opt.checks.mask_alignment import AttentionCase, AttentionCheckResult
from infer_opt.checks.spec_sampler import SpeculativeVerifyResult
from infer_opt.reports.view import Column, Table, View
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


def build_attention_check_view(result: AttentionCheckResult) -> View:
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
    rows = []
    highlight: dict[int, str] = {}
    for i, case in enumerate(result.cases):
        row = {
            "case": case.case,
            "path": case.path,
            "mask": case.mask,
            "tq": case.tq,
            "tk": case.tk,
            "causal_offset": case.causal_offset,
            "max_abs_error": None if case.error is not None else case.max_abs_error,
            "tolerance": case.tolerance,
            "outcome": _attention_outcome(case),
        }
        rows.append(row)
        if not case.passed:
            highlight[i] = "bad"
        elif case.expected_to_fail:
            highlight[i] = "muted"
    table = Table(
        "Outputs against full softmax attention in float64",
        columns,
        rows,
        caption=(
            "query i sits at position q0 pos + i and must see keys 0..that position; "
            "error = max |output - float64 reference|"
        ),
        highlight=highlight,
    )
    shape = f"batch {result.batch} × {result.heads} heads × head dim {result.head_dim}, {result.dtype}"
    summary = [("Checked", result.subject), ("Inputs", f"{shape}, seed {result.seed}, {result.device}")]
    if result.block_size is not None:
        summary.append(("Key block size", str(result.block_size)))
    if result.window is not None:
        summary.append(("Sliding window", f"{result.window} keys"))
    summary.append(("Reference", result.reference))
    notes: list[str] = []
    if result.sdpa_is_causal_top_left is not None:
        torch_version = result.torch_version or "this torch"
        if result.sdpa_is_causal_top_left:
            observed = "aligns the mask top-left: one query over T_k keys saw key 0 only"
        else:
            observed = "did NOT return v_0 for one query over T_k keys (not top-left aligned here)"
        summary.append((f"SDPA is_causal=True, torch {torch_version}", observed + " (probed)"))
    if any(c.expected_to_fail for c in result.cases):
        notes.append(
            "'wrong, detected' rows use a top-left causal mask on purpose (what is_causal=True does with "
            "a KV cache): the output is finite but wrong, and the check flags it. One new token needs no "
            "mask; several need a bottom-right mask (an explicit boolean mask or causal_lower_right)."
        )
    notes += [f"{c.case} / {c.path} ({c.mask}) raised {c.error}" for c in result.cases if c.error is not None]
    failed = [c for c in result.cases if not c.passed]
    if not failed:
        verdict = "PASS: every path matches the float64 reference"
        if any(c.expected_to_fail for c in result.cases):
            verdict += "; every deliberately misaligned mask was detected"
        verdict += "."
    else:
        names = "; ".join(f"{c.case}: {c.path} ({c.mask})" for c in failed)
        verdict = f"FAIL: {names}"
    return View(
        title="Attention exactness check",
        summary=summary,
        tables=[table],
        notes=notes,
        verdict=verdict,
        verdict_ok=result.passed,
    )


def _rule_name(rule: str) -> str:
    return {"exact": "exact (residual max(p-q,0)/Z)", "resample-p": "wrong (resample from p)"}.get(rule, rule)


def build_speculative_verify_view(result: SpeculativeVerifyResult) -> View:
    rule_rows = []
    for verdict in (result.exact, result.wrong):
        if verdict.rule == "exact":
            ok = not verdict.exact_differs and not verdict.chi2_rejects
            outcome = "matches p" if ok else "DIFFERS from p"
        else:
            ok = verdict.exact_differs and verdict.chi2_rejects
            outcome = "detected" if ok else "NOT detected"
        rule_rows.append(
            {
                "rule": _rule_name(verdict.rule),
                "exact_max_abs_error": verdict.exact_max_abs_error,
                "chi2_p_value": verdict.chi2_p_value,
                "chi2_sequence_p_value": verdict.chi2_sequence_p_value,
                "outcome": outcome,
                "_ok": ok,
            }
        )
    rules = Table(
        "Output distribution against the target p",
        [
            Column("rule", "Correction rule", align="left"),
            Column("exact_max_abs_error", "Exact: max |P - p|", _error, csv_header="exact_max_abs_error"),
            Column("chi2_p_value", "χ² p (first token)", _p_value, csv_header="chi2_p_value"),
            Column("chi2_sequence_p_value", f"χ² p ({result.k + 1}-token seq.)", _p_value),
            Column("outcome", "Verdict", align="left"),
        ],
        rule_rows,
        caption=(
            f"exact: enumeration of every draft/verify outcome, tolerance {result.exact_tolerance:g}; "
            f"χ²: {result.trials:,} seeded rounds, reject p below {result.significance:g}"
        ),
        highlight={i: "bad" for i, r in enumerate(rule_rows) if not r["_ok"]},
    )
    rate_rows = [
        {
            "quantity": r.quantity,
            "measured": r.measured,
            "predicted": r.predicted,
            "standard_error": r.standard_error,
            "z_score": r.z_score,
            "within": r.within,
        }
        for r in result.rates
    ]
    rates = Table(
        "Exact rule: measured against the calculators",
        [
            Column("quantity", "Quantity", align="left"),
            Column("measured", "Measured (Monte-Carlo)", _rate),
            Column("predicted", "Predicted (calculator)", _rate),
            Column("standard_error", "Std. error", _rate),
            Column("z_score", "z", _z),
            Column("within", f"Within {result.sigma_limit:g} SE"),
        ],
        rate_rows,
        caption="predicted: α_i = A(p_i, q_i) = Σ min(p_i, q_i), E[N] = Σ_i Π_{j≤i} α_j",
        highlight={i: "bad" for i, r in enumerate(rate_rows) if not r["within"]},
    )
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
    notes = [
        "A round's output is the start of a target sample: completed by the target to k+1 tokens it must "
        "be distributed exactly as k+1 target steps (that is what 'exact' compares).",
        f"With a fixed seed the outcome is deterministic; over random seeds the exact rule fails by chance "
        f"with probability about {2 * result.significance:g} (two χ² tests) plus ~6e-7 per rate compared.",
        "Emitted tokens exceed the KV positions kept by the correction/bonus token: it was sampled from "
        "the target's output but not yet fed through it (the next round starts with it).",
    ]
    warnings = []
    if result.wrong.exact_differs and not result.wrong.chi2_rejects:
        warnings.append(
            "the Monte-Carlo did not detect the wrong rule (exact enumeration did): raise --trials"
        )
    if result.passed:
        verdict = "PASS: the sampler preserves p; the wrong 'resample from p' rule is detected."
    else:
        problems = []
        if not result.exact_rule_ok:
            problems.append("the exact rule does not reproduce p")
        if not result.wrong_rule_detected:
            problems.append("the wrong rule was not detected")
        if not result.rates_ok:
            problems.append("measured rates disagree with the calculators")
        verdict = "FAIL: " + "; ".join(problems) + "."
    return View(
        title="Speculative sampler exactness check",
        summary=summary,
        tables=[rules, rates],
        notes=notes,
        warnings=warnings,
        verdict=verdict,
        verdict_ok=result.passed,
    )
