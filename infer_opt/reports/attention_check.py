"""View of ``attention check``: each mask/path case, its error against the reference and the
outcome."""

from __future__ import annotations

import math

from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.attention_check import AttentionCase, AttentionCheckResult


def error_text(value: float | None) -> str:
    if value is None:
        return "—"
    if math.isnan(value):
        return "NaN/inf in output"
    return "0" if value == 0 else f"{value:.2e}"


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
        Column("max_abs_error", "Max |err|", error_text, csv_header="max_abs_error"),
        Column("tolerance", "Tol.", error_text, csv_header="tolerance"),
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


def build_view(result: AttentionCheckResult) -> View:
    return View(
        title="Attention exactness check",
        summary=_attention_summary(result),
        tables=[_attention_table(result)],
        notes=_attention_notes(result),
        verdict=_attention_verdict(result),
        verdict_ok=result.passed,
    )
