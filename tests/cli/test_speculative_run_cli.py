from __future__ import annotations

from pathlib import Path

import pytest

from infer_opt.profilers import speculative_run
from tests.helpers import assert_one_line_error, invoke

FAST = (
    "--target", "tiny", "--draft", "self:1", "--new-tokens", "8", "--prompt-len", "3",
    "--reps", "1", "--warmup", "0", "--cost-reps", "1", "--device", "cpu",
)  # fmt: skip
PROMETHEUS = Path(__file__).parents[1] / "cost_models" / "fixtures"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


pytestmark = pytest.mark.usefixtures("one_thread")


def _run(*args: str):
    return invoke("speculative", "run", *FAST, *args)


def test_json_has_the_documented_keys():
    run = _run("--k", "2", "--json")
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/speculative-run"
    result = data["result"]
    for key in (
        "tokens_identical", "plain_tokens_per_s", "speculative_tokens_per_s", "measured_speedup",
        "predicted_speedup", "expected_tokens_measured", "alpha_per_position", "k", "points",
    ):  # fmt: skip
        assert key in result, key
    assert result["k"] == 2 and result["tokens_identical"] is True
    assert len(result["alpha_per_position"]) == 2 and len(result["points"]) == 1


def test_a_sweep_gives_a_point_per_k_and_a_plot(tmp_path):
    plot = tmp_path / "run.png"
    run = _run("--sweep-k", "1..3", "--json", "--plot", str(plot))
    assert run.exit_code == 0, run.stderr
    result = run.json()["result"]
    assert [p["k"] for p in result["points"]] == [1, 2, 3]
    assert result["k"] in (1, 2, 3)
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_sampling_reports_no_token_comparison():
    run = _run("--temperature", "0.7", "--json")
    assert run.exit_code == 0, run.stderr
    result = run.json()["result"]
    assert result["tokens_identical"] is None and result["temperature"] == 0.7


def test_a_greedy_mismatch_is_a_run_failure_that_keeps_the_result(monkeypatch):
    decode = speculative_run.decode_speculative

    def broken(*args, **kwargs):
        trace = decode(*args, **kwargs)
        trace.tokens[-1] += 1
        return trace

    monkeypatch.setattr(speculative_run, "decode_speculative", broken)
    run = _run("--k", "2", "--json")
    assert run.exit_code == 1
    assert run.json()["result"]["tokens_identical"] is False
    assert "Error: greedy speculative output differs" in run.stderr


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--k", "2", "--sweep-k", "1..3"), ("--sweep-k", "--k")),
        (("--greedy", "--temperature", "1"), ("--temperature", "--greedy")),
        (("--sweep-k", "3..1"), ("--sweep-k", "A <= B")),
        (("--k", "8"), ("--new-tokens", "k + 1 = 9")),
        (("--draft", "self:2"), ("--draft", "1 <= N < 2")),
        (("--temperature", "0"), ("--temperature",)),
        (("--target", "nope"), ("--target", "unknown built-in")),
    ],
)
def test_bad_options_are_one_line_errors(args, needles):
    assert_one_line_error(_run(*args), *needles)


def _metrics(*args: str):
    return invoke("speculative", "from-metrics", *args)


def test_prometheus_interval_of_one_model():
    run = _metrics(
        "--prometheus", str(PROMETHEUS / "vllm_two_models_after.prom"),
        "--before", str(PROMETHEUS / "vllm_two_models_before.prom"),
        "--model-name", LLAMA, "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    result = run.json()["result"]
    assert result["drafts"] == 1200 and result["accepted_per_position"] == [980, 730, 500]
    assert result["expected_tokens"] == pytest.approx(1 + 2210 / 1200)
    assert result["source"]["model_name"] == LLAMA and result["source"]["engines"] == ["0", "1"]


def test_prometheus_with_costs_gives_the_speedup():
    run = _metrics(
        "--prometheus", str(PROMETHEUS / "vllm_one_model.prom"), "--target-cost", "10ms",
        "--draft-cost", "1ms", "--verify-cost", "12ms", "--overhead", "1ms", "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    assert run.json()["result"]["speedup"] == pytest.approx(10 * (1 + 4940 / 2700) / 16)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--prometheus", str(PROMETHEUS / "vllm_two_models_after.prom")), ("--model-name", LLAMA, "Qwen")),
        (
            (
                "--prometheus", str(PROMETHEUS / "vllm_restarted.prom"),
                "--before", str(PROMETHEUS / "vllm_two_models_after.prom"), "--model-name", LLAMA,
            ),
            ("--before", "restarted"),
        ),
        (
            ("--before", str(PROMETHEUS / "vllm_one_model.prom"), "--drafts", "10"),
            ("--before", "--prometheus"),
        ),
        (
            ("--prometheus", str(PROMETHEUS / "vllm_one_model.prom"), "--drafts", "10"),
            ("--drafts", "--prometheus"),
        ),
        (("--prometheus", str(PROMETHEUS / "nope.prom")), ("--prometheus",)),
    ],
)  # fmt: skip
def test_prometheus_errors_are_one_line(args, needles):
    assert_one_line_error(_metrics(*args), *needles)


def test_a_file_without_the_counters_names_them(tmp_path):
    path = tmp_path / "v0.prom"
    path.write_text('vllm:num_requests_running{model_name="m"} 3.0\n')
    assert_one_line_error(
        _metrics("--prometheus", str(path)), "--prometheus", str(path), "vllm:spec_decode_num_drafts_total"
    )


@pytest.mark.parametrize(
    ("text", "expected"), [("1..8", tuple(range(1, 9))), ("3..3", (3,)), ("1,2,4", (1, 2, 4)), ("2", (2,))]
)
def test_a_range_of_draft_lengths_reads_both_forms(text, expected):
    from infer_opt.cli.types import CountRange

    assert CountRange(1, 64).parse(text, "--sweep-k") == expected


@pytest.mark.parametrize("text", ["0..3", "1..65", "2..1", "1..x", "..3", "4,1,2,4", "3,2", "2,2"])
def test_a_bad_range_of_draft_lengths_is_refused(text):
    from infer_opt.cli.types import CountRange
    from infer_opt.errors import InvalidInput

    with pytest.raises(InvalidInput):
        CountRange(1, 64).parse(text, "--sweep-k")
