"""The ``attention-check`` result kind: attention paths against a float64 reference, case by case
(built by :mod:`infer_opt.checks.mask_alignment`, read by :mod:`infer_opt.reports.attention_check`)."""

from __future__ import annotations

from dataclasses import dataclass

from infer_opt.results import Result


@dataclass(frozen=True)
class AttentionCase:
    """One path on one case, compared with the float64 reference."""

    case: str
    path: str
    #: the mask the path used: "bottom-right", "top-left bool", "none", ...
    mask: str
    tq: int
    tk: int
    #: logical position of query 0 (T_k - T_q: bottom-right alignment)
    causal_offset: int
    max_abs_error: float
    tolerance: float
    #: the output has no NaN/inf
    finite: bool
    #: finite and max_abs_error <= tolerance
    matches_reference: bool
    #: this path is wrong on purpose; the check must flag it (not match the reference)
    expected_to_fail: bool
    #: matches the reference, or — for a deliberately wrong path — was detected as wrong
    passed: bool
    #: the path raised instead of returning an output (the exception, one line)
    error: str | None = None


@dataclass(frozen=True)
class AttentionCheckResult(Result):
    KIND = "attention-check"

    dtype: str
    batch: int
    heads: int
    head_dim: int
    seed: int
    device: str
    cases: tuple[AttentionCase, ...]
    #: every path that should match does, and every deliberately wrong path was detected
    passed: bool
    #: what was checked: "built-in paths" or the name of the callable under test
    subject: str = "built-in paths"
    block_size: int | None = None
    window: int | None = None
    #: observed here: SDPA(is_causal=True) with T_q = 1 < T_k returned v_0 (key 0 only)
    sdpa_is_causal_top_left: bool | None = None
    torch_version: str | None = None
    reference: str = "full softmax attention in float64 (numpy) with the bottom-right causal mask"
