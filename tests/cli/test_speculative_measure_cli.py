from __future__ import annotations

import json

import pytest

from tests.helpers import assert_one_line_error, invoke

FAST = (
    "--target",
    "tiny",
    "--draft",
    "tiny",
    "--k-max",
    "2",
    "--context",
    "8",
    "--reps",
    "2",
    "--warmup",
    "0",
)


pytestmark = pytest.mark.usefixtures("one_thread")


def _measure(*args: str):
    return invoke("speculative", "measure", "--device", "cpu", *FAST, *args)


def test_json_has_the_documented_keys():
    run = _measure("--json")
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/speculative-measure"
    result = data["result"]
    assert result["target_step_s"] > 0 and result["draft_step_s"] > 0 and result["bookkeeping_s"] > 0
    assert [v["k"] for v in result["verify_s"]] == [1, 2]
    assert all(v["time_s"] > 0 and v["iqr_s"] >= 0 for v in result["verify_s"])
    assert {"base_s", "per_k_s", "max_rel_error", "median_rel_error"} <= set(result["fit"])
    assert [b["alpha"] for b in result["best_k_by_alpha"]][:2] == [0.5, 0.55]
    assert all(b["k"] in (1, 2) for b in result["best_k_by_alpha"])
    assert [b["k"] for b in result["break_even_alpha_by_k"]] == [1, 2]
    names = [m["name"] for m in result["measurements"]]
    assert names == ["c_t", "c_d", "c_v(1)", "c_v(2)", "c_m"]
    assert all(m["summary"]["n"] == 2 for m in result["measurements"][:-1])
    assert result["prediction"] is None and result["simulation"] is None


def test_table_output_labels_measurements_and_predictions():
    run = _measure("--alpha", "0.8")
    assert run.exit_code == 0, run.stderr
    out = run.stdout
    for needle in (
        "Measured costs",
        "Predicted speedup S(α, k)",
        "Break-even acceptance",
        "c_m",
        "--alpha 0.8",
    ):
        assert needle in out, needle
    assert "model predictions" in out


def test_alpha_gives_one_prediction_at_the_best_k():
    data = _measure("--alpha", "0.9", "--json").json()["result"]
    prediction = data["prediction"]
    row = next(r for r in data["speedup_by_alpha"] if r["alpha"] == 0.9)
    assert prediction["k"] == row["best_k"] and prediction["speedup"] == pytest.approx(row["best_speedup"])
    fixed = _measure("--alpha", "0.9", "--k", "1", "--json").json()["result"]["prediction"]
    assert fixed["k"] == 1


def test_metrics_file_feeds_per_position_rates(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"drafts": 1000, "accepted_per_position": [800, 600]}))
    data = _measure("--metrics", str(path), "--json").json()["result"]
    assert data["prediction"]["alphas"] == pytest.approx([0.8, 0.75])
    assert data["prediction_source"] == "--metrics metrics.json"


def test_simulated_acceptance_says_it_is_a_plumbing_check():
    run = _measure("--simulate-acceptance", "--rounds", "4")
    assert run.exit_code == 0, run.stderr
    assert "Simulated acceptance" in run.stdout and "plumbing" in run.stdout
    assert "random weights" in run.stdout


def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "spec.png"
    run = _measure("--plot", str(path))
    assert run.exit_code == 0, run.stderr
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--k-max", "0"), ("--k-max", "[1, 64]")),
        (("--target", "nope"), ("--target", "unknown built-in model")),
        (("--draft", "gpt3"), ("--draft", "unknown built-in model")),
        (("--alpha", "1.5"), ("--alpha", "[0, 1]")),
        (("--alpha", "0.8", "--alphas", "0.9,0.8"), ("--alphas", "give one of")),
        (("--k", "3"), ("--k", "[1, 2]")),
        (("--context", "5000"), ("--context", "2048 positions")),
        (("--plot", "x.svg"), ("--plot", "PNG")),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needles):
    assert_one_line_error(_measure(*args), *needles)


def test_mismatched_vocabularies_are_one_line_exit_2(mini_factory):
    path = mini_factory
    run = invoke(
        "speculative",
        "measure",
        "--device",
        "cpu",
        "--target",
        f"{path}:make",
        "--draft",
        f"{path}:make_1024",
    )
    assert_one_line_error(run, "--draft", "vocabulary 1024", "2048")


def test_missing_metrics_file_is_one_line_exit_2(tmp_path):
    assert_one_line_error(_measure("--metrics", str(tmp_path / "none.json")), "--metrics", "does not exist")
