"""Warnings and verdict reasons are Notices (a code and values) with their words in
infer_opt/messages.py: every code the package emits has words, and the views converted to
Notices pass nothing else."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from infer_opt.messages import MESSAGES, as_json, text
from infer_opt.notices import Notice
from infer_opt.registry import KINDS
from infer_opt.reports.render import render
from infer_opt.reports.view import build_view
from tests.reports.fixtures import fixture

PACKAGE = Path(__file__).resolve().parents[2] / "infer_opt"

#: every result kind's view holds only Notices (words come from infer_opt/messages.py)
NOTICE_ONLY_KINDS = sorted(KINDS)


def _emitted_codes() -> dict[str, str]:
    """code -> the file that builds ``Notice("code", ...)`` with a literal code."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "Notice"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                found[node.args[0].value] = str(path.relative_to(PACKAGE))
    return found


def test_every_code_the_package_emits_has_words():
    codes = _emitted_codes()
    assert {"parts_slower", "lengths_unbucketed", "verify_cost_assumed"} <= set(codes)
    missing = {code: where for code, where in codes.items() if code not in MESSAGES}
    assert not missing, missing


@pytest.mark.parametrize("kind", NOTICE_ONLY_KINDS)
def test_converted_kinds_pass_only_notices(kind):
    warnings = build_view(fixture(kind)).warnings
    assert all(isinstance(w, Notice) for w in warnings), warnings


def test_a_bucket_that_failed_to_compile_is_a_notice_about_that_bucket():
    (failed,) = [
        w for w in build_view(fixture("amortize-measure")).warnings if w.code == "bucket_not_compiled"
    ]
    assert failed.subject == "bucket 1x2048"
    assert text(failed) == "bucket 1x2048: not compiled: backend raised: out of memory"


def _buckets_with_lengths_above_the_bound():
    from infer_opt.cost_models import bucketing

    sample = bucketing.sample_from_lengths([3, 5, 9, 12, 12])
    return bucketing.analyze(sample, (4, 8), allow_unbucketed=True)


def _speedup_without_a_verify_cost():
    from infer_opt.cost_models import speculative as calc
    from infer_opt.results.speculative import Costs

    costs = Costs(10e-3, 1e-3, 10e-3, 0.0, 0.0, verify_assumed=True)
    return calc.speculative_speedup(3, costs, alpha=0.8)


def _plans_ranked_otherwise_by_the_naive_mean():
    from infer_opt.cost_models import speculative as calc
    from infer_opt.cost_models.speculative import PlanRound

    rounds = [PlanRound("a", 10e-3, 1), PlanRound("a", 100e-3, 20), PlanRound("b", 24e-3, 4)]
    return calc.compare_plans(rounds)


def _metrics_with_short_drafts():
    from infer_opt.cost_models import speculative as calc
    from infer_opt.results.speculative import Costs

    costs = Costs(10e-3, 1e-3, 10e-3, 0.0, 0.0, verify_assumed=True)
    return calc.rates_from_counts(100, [80, 60], draft_tokens=150, costs=costs)


def _verify_with_too_few_trials():
    import infer_opt

    return infer_opt.speculative_verify(vocab=3, k=2, trials=3, seed=0)


def _amdahl_with_a_slower_part():
    from infer_opt.cost_models.amdahl import Part, combined

    return combined([Part("a", 0.5, 0.5)])


@pytest.mark.parametrize(
    ("make", "codes"),
    [
        (_amdahl_with_a_slower_part, ["parts_slower", "slower_overall"]),
        (_buckets_with_lengths_above_the_bound, ["lengths_unbucketed"]),
        (_speedup_without_a_verify_cost, ["verify_cost_assumed"]),
        (_plans_ranked_otherwise_by_the_naive_mean, ["naive_ranking_differs"]),
        (_metrics_with_short_drafts, ["short_drafts", "verify_cost_assumed"]),
        (_verify_with_too_few_trials, ["wrong_rule_missed_by_sampling"]),
    ],
    ids=lambda v: v.__name__.strip("_") if callable(v) else None,
)
def test_the_core_emits_the_notice_and_the_envelope_carries_its_code(make, codes):
    result = make()
    assert [n.code for n in result.warnings] == codes
    view = build_view(result)
    assert view.warnings == list(result.warnings)
    for notice in view.warnings:
        words = text(notice)
        assert words and "{" not in words and words != notice.code
    envelope = json.loads(render(result, "json"))
    assert [w["code"] for w in envelope["warnings"]] == codes
    assert envelope["warnings"][0] == as_json(result.warnings[0])


def test_words_use_the_values():
    unbucketed = _buckets_with_lengths_above_the_bound().warnings[0]
    assert text(unbucketed) == (
        "3 of 5 lengths exceed the largest bound 8 (max 12); they are left out of every "
        "expectation and count above"
    )
    plans = _plans_ranked_otherwise_by_the_naive_mean()
    assert f"it would pick {plans.naive_best}" in text(plans.warnings[0])
    assert "(150) < drafts × k (200)" in text(_metrics_with_short_drafts().warnings[0])
