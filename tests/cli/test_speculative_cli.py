from __future__ import annotations

import json

import numpy as np
import pytest

from infer_opt.results import load_result
from tests.helpers import assert_one_line_error, heavy_modules_imported, invoke

SPEC = ["--k", "3", "--alpha", "0.8", "--target-cost", "10ms", "--draft-cost", "1ms", "--overhead", "1ms"]
COSTS = ["--target-cost", "10ms", "--draft-cost", "1ms", "--verify-cost", "12ms"]


def _result(*args: str) -> dict:
    run = invoke("speculative", *args, "--json")
    assert run.exit_code == 0, run.stderr
    return run.json()["result"]


# ---------------------------------------------------------------------------------- speedup


def test_speedup_worked_example_json():
    run = invoke("speculative", "speedup", *SPEC, "--verify-cost", "12ms", "--json")
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/speculative-speedup"
    r = data["result"]
    assert r["expected_tokens"] == pytest.approx(2.952)
    assert r["speedup"] == pytest.approx(1.845)
    assert r["round_time_s"] == pytest.approx(0.016)
    assert r["cost_per_token_s"] == pytest.approx(0.016 / 2.952)
    assert "best_k" in r and r["best_k"] is None


def test_speedup_table_and_slowdown_verdict():
    fast = invoke("speculative", "speedup", *SPEC, "--verify-cost", "12ms")
    assert fast.exit_code == 0
    assert "1.845×" in fast.stdout and "2.952" in fast.stdout
    assert "Slower than plain decoding" not in fast.stdout
    slow = invoke("speculative", "speedup", *SPEC, "--verify-cost", "30ms")
    assert slow.exit_code == 0
    assert "Slower than plain decoding" in slow.stdout
    assert "0.8682×" in slow.stdout


def test_bare_numbers_are_milliseconds():
    r = _result("speedup", "--k", "3", "--alpha", "0.8", "--target-cost", "10", "--draft-cost", "1",
                "--verify-cost", "12", "--overhead", "1")  # fmt: skip
    assert r["round_time_s"] == pytest.approx(0.016)


def test_missing_verify_cost_is_assumed_and_said_so():
    run = invoke("speculative", "speedup", *SPEC)
    assert run.exit_code == 0
    assert "assumed c_v = c_t" in run.stdout
    assert "assumed" in run.stderr
    r = _result("speedup", *SPEC)
    assert r["costs"]["verify_assumed"] is True
    assert r["round_time_s"] == pytest.approx(0.014)


@pytest.mark.parametrize(
    "text",
    ["9ms+1ms*k", "9ms + 1ms * k", "9 + 1*k", "1ms*k + 9ms", "k*1ms+9ms", "1ms·k+9ms", "9e+0ms + 1000us*k"],
)
def test_verify_cost_model_forms(text):
    r = _result("speedup", *SPEC, "--verify-cost-model", text)
    assert r["costs"]["verify_base_s"] == pytest.approx(0.009)
    assert r["costs"]["verify_per_k_s"] == pytest.approx(0.001)
    assert r["round_time_s"] == pytest.approx(0.003 + 0.012 + 0.001)


def test_per_position_rates_default_k_and_averaging_note():
    run = invoke("speculative", "speedup", "--alphas", "0.9,0.7,0.5", *COSTS)
    assert run.exit_code == 0
    assert "Averaging the α_i" in run.stdout
    r = _result("speedup", "--alphas", "0.9,0.7,0.5", *COSTS)
    assert r["k"] == 3
    assert r["expected_tokens"] == pytest.approx(2.845)


def test_budget_reports_truncated_tokens():
    r = _result("speedup", "--alphas", "0.9,0.7,0.5", *COSTS, "--budget", "3")
    assert r["expected_tokens"] == pytest.approx(2.845)
    assert r["expected_tokens_within_budget"] == pytest.approx(2.53)
    assert r["speedup"] == pytest.approx(10 * 2.53 / 15)


def test_sweep_json_curve_and_best_k():
    r = _result("speedup", *SPEC, "--verify-cost", "12ms", "--k-max", "12")
    assert r["best_k"] == 7
    assert [p["k"] for p in r["curve"]] == list(range(1, 13))
    assert set(r["curve"][0]) >= {"k", "expected_tokens", "speedup"}
    assert r["curve"][2]["speedup"] == pytest.approx(1.845)


def test_sweep_with_long_per_position_list():
    r = _result("speedup", "--k", "2", "--alphas", "0.9,0.7,0.5,0.3", *COSTS, "--k-max", "4")
    assert r["k"] == 2 and len(r["curve"]) == 4


def test_plots_and_file_outputs(tmp_path):
    png, grid, csv, out = tmp_path / "s.png", tmp_path / "g.png", tmp_path / "s.csv", tmp_path / "s.json"
    files = ["--plot", str(png), "--plot-grid", str(grid), "--csv", str(csv), "--out", str(out)]
    run = invoke("speculative", "speedup", *SPEC, "--verify-cost", "12ms", "--k-max", "8", *files)
    assert run.exit_code == 0, run.stderr
    for path in (png, grid):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "# Draft length sweep" in csv.read_text()
    loaded = load_result(out)
    assert loaded.kind == "speculative-speedup"
    assert loaded.result.costs.verify_base_s == pytest.approx(0.012)
    assert loaded.result.curve[6].k == 7


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--k", "3", "--alpha", "1.5"], ["--alpha", "[0, 1]"]),
        (["--k", "3", "--alpha", "-0.2"], ["--alpha"]),
        (["--k", "0", "--alpha", "0.5"], ["--k"]),
        (["--k", "2.5", "--alpha", "0.5"], ["--k", "whole number"]),
        (["--alpha", "0.5"], ["--k"]),
        (["--k", "3"], ["--alpha"]),
        (["--k", "3", "--alpha", "0.5", "--alphas", "0.5,0.5,0.5"], ["--alpha"]),
        (["--k", "3", "--alphas", "0.9,1.2,0.5"], ["--alphas", "[0, 1]"]),
        (["--k", "3", "--alphas", "0.9,0.5"], ["--alphas", "k = 3"]),
        (["--k", "2", "--alphas", "0.9,0.5,0.3"], ["--alphas", "exactly k = 2"]),
        (["--k", "2", "--alphas", "0.9,0.5,0.3", "--k-max", "5"], ["--k-max", ">= 5"]),
        (["--k", "3", "--alpha", "0.5", "--k-max", "0"], ["--k-max"]),
        # speculative run's range form: here the sweep always starts at k = 1
        (["--k", "3", "--alpha", "0.5", "--k-max", "2..6"], ["--k-max", "k = 1..KMAX", "e.g. 6"]),
        (["--k", "3", "--alpha", "0.5", "--budget", "0"], ["--budget"]),
    ],
)
def test_speedup_bad_acceptance_input(args, needles):
    assert_one_line_error(invoke("speculative", "speedup", *args, *COSTS), *needles)


TD = ["--target-cost", "10ms", "--draft-cost", "1ms"]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--target-cost", "-10ms", "--draft-cost", "1ms"], ["--target-cost", "> 0"]),
        (["--target-cost", "0", "--draft-cost", "1ms"], ["--target-cost", "> 0"]),
        (["--target-cost", "10ms", "--draft-cost", "-1ms"], ["--draft-cost"]),
        ([*TD, "--verify-cost", "-5"], ["--verify-cost"]),
        ([*TD, "--overhead", "-1"], ["--overhead"]),
        (["--target-cost", "10ms", "--draft-cost", "1parsec"], ["--draft-cost"]),
        (["--draft-cost", "1ms"], ["--target-cost"]),
        (["--target-cost", "10ms"], ["--draft-cost"]),
        ([*TD, "--verify-cost-model", "12ms+0.5ms*q"], ["--verify-cost-model", "A + B*k"]),
        ([*TD, "--verify-cost-model", "12ms+"], ["--verify-cost-model"]),
        ([*TD, "--verify-cost-model", "12ms-0.5ms*k"], ["--verify-cost-model"]),
        ([*TD, "--verify-cost-model", "k^2"], ["--verify-cost-model"]),
        ([*TD, "--verify-cost-model", "k"], ["--verify-cost-model"]),
        ([*TD, "--verify-cost", "12", "--verify-cost-model", "1+1*k"], ["--verify-cost", "not both"]),
        ([*TD, "--plot-grid", "g.svg"], ["--plot-grid", ".png"]),
        ([*TD, "--plot", "g.pdf"], ["--plot", ".png"]),
    ],
)
def test_speedup_bad_costs(args, needles):
    assert_one_line_error(invoke("speculative", "speedup", "--k", "3", "--alpha", "0.8", *args), *needles)


# ------------------------------------------------------------------------------- acceptance


def test_acceptance_worked_example_json():
    r = _result("acceptance", "--p", "0.5,0.3,0.2", "--q", "0.2,0.5,0.3")
    assert r["acceptance_rate"] == pytest.approx(0.7)
    assert r["rejection_mass"] == pytest.approx(0.3)
    assert r["residual"] == pytest.approx([1.0, 0.0, 0.0])
    tokens = r["per_token"]
    assert [t["accept_prob"] for t in tokens] == pytest.approx([1.0, 0.6, 2 / 3])
    assert [t["accepted_mass"] for t in tokens] == pytest.approx([0.2, 0.3, 0.2])
    assert [t["output"] for t in tokens] == pytest.approx([0.5, 0.3, 0.2])
    assert [t["wrong_output"] for t in tokens] == pytest.approx([0.35, 0.39, 0.26])


def test_acceptance_table_shows_dash_where_q_is_zero():
    run = invoke("speculative", "acceptance", "--p", "0.5,0.5,0", "--q", "1,0,0")
    assert run.exit_code == 0
    row = next(line for line in run.stdout.splitlines() if line.strip().startswith("│     1 "))
    assert "—" in row
    assert _result("acceptance", "--p", "0.5,0.5,0", "--q", "1,0,0")["per_token"][1]["accept_prob"] is None


def test_acceptance_identical_distributions_say_rejection_cannot_happen():
    run = invoke("speculative", "acceptance", "--p", "0.25,0.75", "--q", "0.25,0.75")
    assert run.exit_code == 0
    assert "rejection cannot happen" in run.stdout
    assert _result("acceptance", "--p", "0.25,0.75", "--q", "0.25,0.75")["residual"] is None


def test_acceptance_from_npy_and_csv_files(tmp_path):
    p_file, q_file = tmp_path / "p.npy", tmp_path / "q.csv"
    np.save(p_file, np.array([0.5, 0.3, 0.2]))
    q_file.write_text("prob\n0.2\n0.5\n0.3\n")
    r = _result("acceptance", "--p-file", str(p_file), "--q-file", str(q_file))
    assert r["acceptance_rate"] == pytest.approx(0.7)


def test_acceptance_logits_with_temperatures():
    r = _result("acceptance", "--logits", "--p", "0,1.0986122886681098", "--q", "0,0",
                "--p-temperature", "0.5")  # fmt: skip
    # softmax((0, log 3)/0.5) = (0.1, 0.9); q uniform
    assert [t["p"] for t in r["per_token"]] == pytest.approx([0.1, 0.9])
    assert r["acceptance_rate"] == pytest.approx(0.1 + 0.5)
    assert r["p_temperature"] == 0.5 and r["q_temperature"] == 1.0


def test_acceptance_normalize():
    r = _result("acceptance", "--p", "5,3,2", "--q", "2,5,3", "--normalize")
    assert r["acceptance_rate"] == pytest.approx(0.7)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--p", "0.5,0.3,0.3", "--q", "0.2,0.5,0.3"], ["--p", "within 1e-06", "--normalize"]),
        (["--p", "0.5,0.5", "--q", "0.2,0.5,0.3"], ["--q", "same length"]),
        (["--p", "0.5,-0.2,0.7", "--q", "0.2,0.5,0.3"], ["--p", ">= 0"]),
        (["--p", "0.5,nan,0.5", "--q", "0.2,0.5,0.3"], ["--p", "NaN"]),
        (["--p", "0.5,inf", "--q", "0.5,0.5"], ["--p"]),
        (["--p", "0.5,0.5"], ["--q"]),
        (["--p", "0.5,0.5", "--q", "0.5,0.5", "--p-temperature", "2"], ["--p-temperature", "--logits"]),
        (["--p", "0,1", "--q", "0,1", "--logits", "--q-temperature", "0"], ["--q-temperature", "(0"]),
        (["--p", "0,1", "--q", "0,1", "--logits", "--p-temperature", "-1"], ["--p-temperature"]),
        (["--p", "0,nan", "--q", "0,1", "--logits"], ["--p"]),
        (["--p-file", "/nonexistent/p.npy", "--q", "0.5,0.5"], ["--p-file", "does not exist"]),
    ],
)
def test_acceptance_bad_input(args, needles):
    assert_one_line_error(invoke("speculative", "acceptance", *args), *needles)


def test_acceptance_bad_file_contents(tmp_path):
    bad = tmp_path / "p.txt"
    bad.write_text("0.5, 0.3, abc\n")
    assert_one_line_error(
        invoke("speculative", "acceptance", "--p-file", str(bad), "--q", "0.2,0.5,0.3"), "--p-file", "entry 3"
    )


# ------------------------------------------------------------------------------------ plans

RANK_FLIP_LOG = "plan,time,tokens\nA,2ms,1\nA,40ms,4\nB,7ms,1\nB,7,1\n"


def test_plans_ratio_of_sums_and_ranking_flag(tmp_path):
    log = tmp_path / "rounds.csv"
    log.write_text(RANK_FLIP_LOG)
    run = invoke("speculative", "plans", str(log), "--json")
    assert run.exit_code == 0, run.stderr
    r = run.json()["result"]
    assert r["best"] == "B"
    plans = {p["plan"]: p for p in r["plans"]}
    assert plans["A"]["cost_per_token_s"] == pytest.approx(0.0084)
    assert plans["A"]["tokens_per_round"] == pytest.approx(2.5)
    assert plans["B"]["cost_per_token_s"] == pytest.approx(0.007)
    assert r["naive_ranking_differs"] is True
    table = invoke("speculative", "plans", str(log))
    assert "Best plan: B" in table.stdout
    assert "ranks the plans differently" in table.stderr


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("plan,time,tokens\nA,2ms,1\nA,0,3\n", ["line 3, column time", "> 0"]),
        ("plan,time,tokens\nA,-2ms,1\n", ["line 2, column time"]),
        ("plan,time,tokens\nA,2ms,1.5\n", ["line 2, column tokens", "whole number"]),
        ("plan,time,tokens\nA,2ms,0\n", ["line 2, column tokens", ">= 1"]),
        ("plan,time,tokens\nA,2 fortnights,1\n", ["line 2, column time"]),
        ("plan,time,tokens\nA,2ms\n", ["line 2", "3 fields"]),
        ("plan,time\nA,2ms\n", ["line 1", "'tokens' column"]),
        ("plan,time,tokens\n", ["no data rows"]),
        ("plan,time,tokens\n,2ms,1\n", ["column plan", "empty"]),
    ],
)
def test_plans_bad_rows(tmp_path, text, needles):
    log = tmp_path / "rounds.csv"
    log.write_text(text)
    assert_one_line_error(invoke("speculative", "plans", str(log)), *needles)


def test_plans_missing_file():
    assert_one_line_error(invoke("speculative", "plans", "/nonexistent/rounds.csv"), "does not exist")


# ----------------------------------------------------------------------------- from-metrics


def test_from_metrics_inline():
    r = _result("from-metrics", "--drafts", "1000", "--accepted-per-position", "820,610,400")
    assert [p["unconditional"] for p in r["positions"]] == pytest.approx([0.82, 0.61, 0.4])
    assert [p["conditional"] for p in r["positions"]] == pytest.approx([0.82, 610 / 820, 400 / 610])
    assert r["expected_tokens"] == pytest.approx(2.83)
    assert r["speedup"] is None


def test_from_metrics_file_with_vllm_names_and_costs(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text(
        json.dumps(
            {
                "vllm:spec_decode_num_drafts": 1000.0,
                "vllm:spec_decode_num_accepted_tokens_per_pos": [820, 610, 400],
                "vllm:spec_decode_num_draft_tokens": 3000,
            }
        )
    )
    r = _result("from-metrics", "--file", str(path), *COSTS)
    assert r["expected_tokens"] == pytest.approx(2.83)
    assert r["speedup"] == pytest.approx(10 * 2.83 / 15)
    assert r["draft_tokens"] == 3000 and r["short_drafts"] is False


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (
            ["--drafts", "1000", "--accepted-per-position", "820,830,400"],
            ["--accepted-per-position", "non-increasing"],
        ),
        (["--drafts", "100", "--accepted-per-position", "820"], ["--accepted-per-position", "drafts"]),
        (["--drafts", "1000", "--accepted-per-position", "820,-1"], ["--accepted-per-position"]),
        (
            ["--drafts", "1000", "--accepted-per-position", "820,1.5"],
            ["--accepted-per-position", "whole number"],
        ),
        (["--drafts", "0", "--accepted-per-position", "0"], ["--drafts"]),
        (["--drafts", "1000"], ["--drafts"]),
        (["--drafts", "1000", "--accepted-per-position", "8,6", "--draft-cost", "1ms"], ["--target-cost"]),
        (["--drafts", "1000", "--accepted-per-position", "8,6", "--target-cost", "10ms"], ["--draft-cost"]),
    ],
)
def test_from_metrics_bad_input(args, needles):
    assert_one_line_error(invoke("speculative", "from-metrics", *args), *needles)


def test_from_metrics_bad_file(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"drafts": 10}')
    assert_one_line_error(invoke("speculative", "from-metrics", "--file", str(path)), "accepted_per_position")
    path.write_text("{not json")
    assert_one_line_error(invoke("speculative", "from-metrics", "--file", str(path)), "not valid JSON")


# ------------------------------------------------------------------------------ import cost


def test_speculative_commands_do_not_import_heavy_modules(tmp_path):
    log = tmp_path / "rounds.csv"
    log.write_text(RANK_FLIP_LOG)
    argvs = [
        ["speculative", "speedup", *SPEC, "--k-max", "8"],
        ["speculative", "speedup", *SPEC, "--json"],
        ["speculative", "acceptance", "--p", "0.5,0.3,0.2", "--q", "0.2,0.5,0.3"],
        ["speculative", "from-metrics", "--drafts", "1000", "--accepted-per-position", "820,610,400"],
    ]
    assert heavy_modules_imported(*argvs) == []
    # a log file goes through the one pandas reader; nothing heavier
    assert heavy_modules_imported(["speculative", "plans", str(log)]) == ["pandas"]


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        (["acceptance", "--p", "0.5,0.5,0", "--q", "1,0,0"], "speculative-acceptance"),
        (
            ["from-metrics", "--drafts", "10", "--accepted-per-position", "8,0,0", *COSTS],
            "speculative-metrics",
        ),
        (["speedup", "--alphas", "0.9,0.7,0.5", *COSTS, "--budget", "2"], "speculative-speedup"),
    ],
)
def test_results_round_trip_through_files(tmp_path, args, kind):
    out = tmp_path / "r.json"
    assert invoke("speculative", *args, "--out", str(out)).exit_code == 0
    loaded = load_result(out)
    assert loaded.kind == kind
    assert loaded.result.to_dict() == json.loads(out.read_text())["result"]


def test_plans_result_round_trips(tmp_path):
    log, out = tmp_path / "rounds.csv", tmp_path / "p.json"
    log.write_text(RANK_FLIP_LOG)
    assert invoke("speculative", "plans", str(log), "--out", str(out)).exit_code == 0
    loaded = load_result(out)
    assert loaded.kind == "speculative-plans" and loaded.result.best == "B"


@pytest.mark.parametrize("kind", ["directory", "binary"])
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["plans", "{path}"], "FILE"),
        (["acceptance", "--p-file", "{path}", "--q", "0.5,0.5"], "--p-file"),
        (["from-metrics", "--file", "{path}"], "--file"),
    ],
)
def test_unreadable_files_give_one_line_error(tmp_path, kind, args, needle):
    if kind == "directory":
        path = tmp_path / "adir.csv"
        path.mkdir()
    else:
        path = tmp_path / "bin.csv"
        path.write_bytes(b"\xff\xfe\x00\x81")
    argv = [a.format(path=path) for a in args]
    assert_one_line_error(invoke("speculative", *argv), needle)
