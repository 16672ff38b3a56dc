"""Two traces compared (trace/compare.py): ops matched by (name, shapes, dtype), per-step
times, verdicts against the threshold and the spread between steps; and through the CLI."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.errors import InvalidInput
from infer_opt.trace.analyze import analyze
from infer_opt.trace.compare import compare_traces
from tests.helpers import assert_one_line_error, invoke

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MODEL = FIXTURES / "model_step.json"


@pytest.fixture(scope="module")
def base():
    return analyze([MODEL]).result


def _scaled(result, factor, family="matmul", spread=None):
    ops = tuple(
        replace(g, time_s=g.time_s * factor, time_spread_s=g.time_spread_s if spread is None else spread)
        if g.family == family
        else g
        for g in result.ops
    )
    return replace(result, ops=ops)


def test_identical_traces_are_the_same_everywhere(base):
    r = compare_traces(base, base)
    assert r.step_ratio == 1.0
    assert {o.verdict for o in r.ops} == {"same"}
    assert all(o.ratio == 1.0 for o in r.ops)
    assert "no difference" in r.headline
    for c in r.categories:
        assert c.base_share == c.new_share


def test_a_slower_matmul_is_called_with_its_per_step_time(base):
    r = compare_traces(base, _scaled(base, 1.5))
    linear = next(o for o in r.ops if o.name == "aten::linear")
    assert linear.base_per_step_s == pytest.approx(22e-6)  # 44 µs over 2 steps
    assert linear.new_per_step_s == pytest.approx(33e-6)
    assert linear.ratio == pytest.approx(1.5) and linear.verdict == "slower"
    assert r.ops[0] is linear  # the largest absolute change first
    others = [o for o in r.ops if o.name != "aten::linear"]
    assert {o.verdict for o in others} == {"same"}


def test_a_change_within_the_spread_between_steps_is_not_called(base):
    r = compare_traces(base, _scaled(base, 1.5, spread=20e-6))  # |Δ| = 11 µs per step ≤ 20 µs
    assert next(o for o in r.ops if o.name == "aten::linear").verdict == "within_spread"


def test_ops_only_on_one_side_and_categories_sum_to_one(base):
    fewer = replace(base, ops=tuple(g for g in base.ops if g.name != "aten::mul"))
    r = compare_traces(base, fewer)
    mul = next(o for o in r.ops if o.name == "aten::mul")
    assert mul.verdict == "only_base" and mul.new_per_step_s is None and mul.ratio is None
    r = compare_traces(fewer, base)
    assert next(o for o in r.ops if o.name == "aten::mul").verdict == "only_new"
    assert math.fsum(c.base_share for c in r.categories) == pytest.approx(1.0)
    assert math.fsum(c.new_share for c in r.categories) == pytest.approx(1.0)


def test_warnings_for_other_devices_and_single_steps(base):
    other = replace(base, device_name="MI300X")
    assert "trace_compare_devices" in {w.code for w in compare_traces(base, other).warnings}
    one = analyze([MODEL], steps=(1, 1)).result
    assert "trace_compare_one_step" in {w.code for w in compare_traces(one, one).warnings}
    assert "trace_compare_one_step" not in {w.code for w in compare_traces(base, base).warnings}


def test_threshold_is_validated(base):
    with pytest.raises(InvalidInput, match="--threshold"):
        compare_traces(base, base, threshold=math.nan)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.2, 5.0), st.floats(0.0, 0.5))
def test_ratio_and_verdict_follow_the_rule(base, factor, threshold):
    r = compare_traces(base, _scaled(base, factor, spread=0.0), threshold=threshold)
    linear = next(o for o in r.ops if o.name == "aten::linear")
    assert linear.ratio == pytest.approx(factor)
    if abs(factor - 1) < threshold:
        assert linear.verdict == "same"
    else:
        assert linear.verdict == ("slower" if factor > 1 else "faster")
    swapped = compare_traces(_scaled(base, factor, spread=0.0), base, threshold=threshold)
    back = next(o for o in swapped.ops if o.name == "aten::linear")
    assert back.ratio == pytest.approx(1 / factor)


def test_cli_compares_two_trace_files_and_two_saved_trace_results(tmp_path):
    run = invoke("compare", str(MODEL), str(FIXTURES / "two_streams.json"), "--json")
    assert run.exit_code == 0, run.stderr
    assert run.json()["schema"].endswith("trace-compare")
    for name in ("a", "b"):
        assert invoke("trace", str(MODEL), "--out", str(tmp_path / f"{name}.json")).exit_code == 0
    run = invoke("compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert run.exit_code == 0, run.stderr
    assert "Trace comparison" in run.stdout and "no difference" in run.stdout


def test_cli_refuses_a_trace_against_another_kind(tmp_path):
    from infer_opt.results import save_result
    from tests.reports.fixtures import fixture

    profile = save_result(tmp_path / "p.json", fixture("profile"))
    assert_one_line_error(invoke("compare", str(MODEL), str(profile)), "NEW", "profile")
    assert_one_line_error(invoke("compare", str(profile), str(MODEL)), "BASE", "profile")


def test_cli_compares_a_trace_whose_metadata_runs_past_4_kb(tmp_path):
    """Issue 42: an uncompressed trace with long metadata before ``traceEvents`` (the shared bert
    traces, gunzipped) was taken for a saved result and refused."""
    import json

    doc = json.loads(MODEL.read_text())
    padded = {"deviceProperties": doc.get("deviceProperties", []), "padding": "x" * 9000, **doc}
    path = tmp_path / "long_meta.json"
    path.write_text(json.dumps(padded))
    assert path.read_bytes().find(b'"traceEvents"') > 4096
    run = invoke("compare", str(path), str(MODEL), "--json")
    assert run.exit_code == 0, run.stderr
    assert run.json()["schema"].endswith("trace-compare")


def test_the_api_compares_two_trace_results_as_the_cli_does(base):
    """Issue 42: ``infer_opt.compare()`` refused two trace results ``infer-opt compare`` takes."""
    import infer_opt

    got = infer_opt.compare(base, infer_opt.load_trace(MODEL), threshold=0.1)
    assert got == compare_traces(base, base, threshold=0.1)
    with pytest.raises(InvalidInput) as caught:
        infer_opt.compare(base, 3)
    assert caught.value.option == "new"
    with pytest.raises(InvalidInput) as caught:
        infer_opt.compare(base, base, seed=1)
    assert caught.value.option == "seed"
