from __future__ import annotations

import pytest

from tests.helpers import assert_one_line_error, invoke


def test_default_run_passes_and_prints_the_verdict_table():
    run = invoke("speculative", "verify")
    assert run.exit_code == 0, run.stderr
    for needle in (
        "exact (residual",
        "wrong (resample from p)",
        "matches p",
        "detected",
        "E[N]",
        "α_1",
        "PASS",
    ):
        assert needle in run.stdout, needle


def test_json_keys():
    run = invoke(
        "speculative", "verify", "--vocab", "3", "--k", "2", "--trials", "20000", "--seed", "1", "--json"
    )
    assert run.exit_code == 0
    data = run.json()
    assert data["schema"] == "infer-opt/speculative-verify"
    r = data["result"]
    assert r["exact"]["exact_max_abs_error"] < 1e-12
    assert r["exact"]["chi2_p_value"] > 1e-3
    assert r["wrong_rule_detected"] is True and r["passed"] is True
    assert r["wrong"]["chi2_p_value"] < 1e-3
    # each quantity once: the rule verdicts are not repeated as flat copies
    assert not {"exact_max_abs_error", "chi2_p_value", "wrong_rule_chi2_p_value"} & set(r)
    assert len(r["p"]) == 3 and len(r["q"]) == 2
    assert [x["within"] for x in r["rates"]] == [True, True, True]


def test_alpha_target_option():
    run = invoke("speculative", "verify", "--alpha-target", "0.7", "--json")
    assert run.exit_code == 0
    rates = run.json()["result"]["rates"]
    assert [x["predicted"] for x in rates[:3]] == pytest.approx([0.7] * 3, abs=1e-9)


def test_too_few_trials_to_detect_the_wrong_rule_exits_1_after_the_table():
    run = invoke("speculative", "verify", "--trials", "5")
    assert run.exit_code == 1
    assert "NOT detected" in run.stdout and "FAIL" in run.stdout
    assert "raise --trials" in run.stderr
    assert "Error: speculative verify failed" in run.stderr


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--vocab", "1"], ["--vocab", "[2, 4096]"]),
        (["--k", "0"], ["--k"]),
        (["--trials", "0"], ["--trials"]),
        (["--trials", "2.5"], ["--trials", "whole number"]),
        (["--trials", "1e9"], ["--trials"]),
        (["--seed", "-3"], ["--seed"]),
        (["--alpha-target", "1"], ["--alpha-target", "(0, 1)"]),
        (["--alpha-target", "0"], ["--alpha-target"]),
        (["--vocab", "abc"], ["--vocab", "abc"]),
        (["--vocab", "50", "--k", "5"], ["--k", "exact enumeration"]),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needles):
    assert_one_line_error(invoke("speculative", "verify", *args), *needles)


def test_writes_markdown(tmp_path):
    md = tmp_path / "v.md"
    assert invoke("speculative", "verify", "--trials", "3000", "--markdown", str(md)).exit_code == 0
    text = md.read_text()
    assert "Output distribution against the target p" in text and "measured against the calculators" in text
