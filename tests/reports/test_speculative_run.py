from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from infer_opt import messages
from infer_opt.inputs import prometheus as pm
from infer_opt.reports.speculative import build_metrics_view
from infer_opt.reports.speculative_run import build_view
from tests.reports.fixtures import fixture

PROMETHEUS = Path(__file__).parents[1] / "cost_models" / "fixtures"


def _summary(view) -> dict[str, str]:
    return dict(view.summary)


def test_a_greedy_run_whose_outputs_differ_fails_and_says_where():
    result = fixture("speculative-run")
    bad = replace(result.points[1], tokens_identical=False, first_difference=5)
    view = build_view(replace(result, points=(result.points[0], bad, result.points[2])))
    assert not view.verdict_ok
    assert "k = 2 from token 5" in view.verdict
    assert _summary(view)["Greedy output = plain greedy output"] == "NO"
    assert view.tables[0].highlight[1] == "bad"


def test_a_greedy_run_that_matches_reports_measured_and_predicted():
    view = build_view(fixture("speculative-run"))
    assert view.verdict_ok and "measured 1.02×" in view.verdict
    assert _summary(view)["Greedy output = plain greedy output"] == "yes, for every k"
    assert [c.key for c in view.tables[0].columns][-1] == "identical"
    assert any("c_v(2): high variance" in messages.text(w) for w in view.warnings)


def test_a_sampled_run_has_nothing_to_compare_token_for_token():
    result = fixture("speculative-run")
    points = tuple(replace(p, tokens_identical=None) for p in result.points)
    view = build_view(replace(result, temperature=0.8, points=points))
    assert "Greedy output = plain greedy output" not in _summary(view)
    assert "identical" not in [c.key for c in view.tables[0].columns]
    assert "sampling at T = 0.8" in _summary(view)["Run"]
    assert any(note.startswith("Sampling:") for note in view.notes)


def test_the_metrics_view_names_the_prometheus_source(tmp_path):
    text = (PROMETHEUS / "vllm_one_model.prom").read_text().replace(" 4940.0", " 4941.0")
    text = text.replace("} 3270.0", "} 3271.0")
    path = tmp_path / "metrics.prom"
    path.write_text(text)
    view = build_metrics_view(pm.metrics_from_prometheus(path))
    summary = _summary(view)
    assert summary["Counters"] == f"vLLM Prometheus metrics: {path}"
    assert summary["Model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert summary["Engines summed"] == "0, 1"
    assert any("per-position counters sum to 4940" in messages.text(w) for w in view.warnings)
