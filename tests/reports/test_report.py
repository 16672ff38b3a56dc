"""Report assembly: every kind contributes highlights, failures come first, and the
environment block says where each result came from."""

from __future__ import annotations

from dataclasses import replace

import pytest

from infer_opt.cost_models.op_model import noise_notices
from infer_opt.registry import KINDS
from infer_opt.reports.highlights import highlights
from infer_opt.reports.report import build_report
from infer_opt.reports.view import build_view
from infer_opt.results import envelope, parse_envelope
from tests.reports.fixtures import fixture


def _loaded(result, command="infer-opt x"):
    env = {"python": "3.11.7", "platform": "Linux", "cpu_count": 2, "machine": "x86_64", "infer_opt": "0.1.0"}
    return parse_envelope(envelope(result, command=command, environment=env))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_has_at_least_one_highlight(kind):
    result = fixture(kind)
    found = highlights(result, build_view(result))
    assert found and all(h.text and h.topic for h in found)


def test_failures_come_first_and_the_environment_names_each_result():
    check = fixture("attention-check")
    failed = replace(check, cases=(replace(check.cases[0], passed=False), *check.cases[1:]), passed=False)
    items = [
        _loaded(fixture("amdahl"), "infer-opt amdahl -f 0.4 -s 4"),
        _loaded(fixture("profile")),
        _loaded(failed),
    ]
    doc = build_report(
        items, sources=["a.json", "p.json", "c.json"], figures=[[], [], []], title="T", generated="now"
    )
    assert doc.highlights[0].level == "bad" and doc.highlights[0].text.startswith("FAIL")
    assert doc.commands[0] == "infer-opt amdahl -f 0.4 -s 4"
    rows = doc.about.tables[0].rows
    assert [r["device"] for r in rows] == ["—", "Example CPU (cpu)", "cpu"]
    assert [r["dtype"] for r in rows] == ["—", "float32", "float32"]
    summary = dict(doc.about.summary)
    assert summary["Python"] == "3.11.7" and summary["CPU"] == "x86_64, 2 logical cores"


def test_the_predictor_kinds_lead_with_their_own_figures():
    validation = fixture("validate")
    step, noise = highlights(validation, build_view(validation))
    assert "step MAPE prefill 3.9%, decode 5.7% over 4 points" in step.text
    assert noise.text == "the same steps between 2 passes: prefill 8.3%, decode 8.3%"
    one_pass = replace(validation, passes=1, noise={})
    assert len(highlights(one_pass, build_view(one_pass))) == 1
    (prediction,) = highlights(fixture("predict"), build_view(fixture("predict")))
    assert prediction.text.startswith("step ") and "predicted" in prediction.text
    calibration = fixture("calibration")
    made, repeats = highlights(calibration, build_view(calibration))
    assert made.level == "info" and "operator families" in made.text
    assert repeats.level == "info" and repeats.text == "repetitions spread by 0%"
    partial, _ = highlights(replace(calibration, complete=False), build_view(calibration))
    assert partial.level == "bad" and "incomplete" in partial.text
    # repetitions that spread by 30%: said, as bad news
    families = tuple(
        replace(f, points=tuple(replace(p, rel_spread=0.3) for p in f.points)) for f in calibration.families
    )
    noisy_calibration = replace(calibration, families=families)  # as calibrate builds it: with its notice
    noisy_calibration = replace(noisy_calibration, warnings=tuple(noise_notices(noisy_calibration)))
    _, noisy = highlights(noisy_calibration, build_view(calibration))
    assert noisy.level == "bad" and noisy.text == "repetitions spread by 30%"
