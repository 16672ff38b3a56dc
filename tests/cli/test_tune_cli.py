from __future__ import annotations

import pytest

from tests.helpers import assert_one_line_error, invoke


@pytest.fixture
def files(tmp_path):
    (tmp_path / "batches.csv").write_text("batch_size,count\n1,50\n3,30\n7,20\n13,15\n30,10\n64,5\n100,3\n")
    (tmp_path / "cost.csv").write_text("batch_size,time_ms\n1,2\n4,2.2\n16,2.8\n64,4.5\n128,7\n")
    (tmp_path / "worked.csv").write_text("batch_size,count\n1,1\n3,1\n")
    (tmp_path / "worked_cost.csv").write_text("batch_size,time_ms\n1,2\n3,4\n")
    (tmp_path / "target.csv").write_text("tokens,time_ms\n1,10\n64,12\n512,40\n4096,300\n")
    (tmp_path / "draft.csv").write_text("batch_size,time_ms\n1,1\n4096,20\n")
    return tmp_path


def _prom(path, counts, edges=("1.0", "8.0", "64.0", "+Inf")):
    lines = ["# TYPE vllm:iteration_tokens_total histogram"]
    lines += [
        f'vllm:iteration_tokens_total_bucket{{le="{e}"}} {c}' for e, c in zip(edges, counts, strict=True)
    ]
    lines += [f"vllm:iteration_tokens_total_count {counts[-1]}", "vllm:iteration_tokens_total_sum 1"]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_worked_check_json_keys(files):
    run = invoke(
        "tune", "capture-sizes", "--batches", str(files / "worked.csv"),
        "--cost-file", str(files / "worked_cost.csv"),
        "--max-captures", "1", "--eager-overhead", "10ms", "--current", "1", "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    r = run.json()["result"]
    assert r["capture_sizes"] == [3]
    assert r["expected_step_s"] == pytest.approx(0.004)
    assert r["current"]["capture_sizes"] == [1] and r["current"]["expected_step_s"] == pytest.approx(0.008)
    assert r["gain"] == pytest.approx(2.0)
    assert {"memory_bytes", "uncaptured", "buckets", "flags"} <= set(r)
    assert r["flags"]["vllm"] == "--compilation-config '{\"cudagraph_capture_sizes\": [3]}'"
    assert r["flags"]["sglang"] == "--cuda-graph-bs 3"
    assert {"bound", "share", "padding_waste_s"} <= set(r["buckets"][0])


def test_engine_default_and_memory(files):
    run = invoke(
        "tune", "capture-sizes", "--batches", str(files / "batches.csv"),
        "--cost-file", str(files / "cost.csv"),
        "--memory-per-capture", "10MiB", "--memory-budget", "35MiB", "--eager-overhead", "2ms", "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    r = run.json()["result"]
    assert len(r["capture_sizes"]) <= 3 and r["memory_bytes"] <= 35 * 2**20
    assert len(r["current"]["capture_sizes"]) == 51  # vLLM's default up to 512


def test_prometheus_range(files):
    a = _prom(files / "a.prom", (10, 40, 60, 60))
    b = _prom(files / "b.prom", (20, 90, 130, 130))
    run = invoke(
        "tune", "capture-sizes", "--prometheus", b, "--before", a, "--cost-file", str(files / "cost.csv"),
        "--max-captures", "2", "--eager-overhead", "1ms", "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    r = run.json()["result"]
    lo, hi = r["proposed"]["expected_step_range_s"]
    assert lo <= r["expected_step_s"] <= hi and lo < hi


def test_bad_inputs(files):
    base = ["tune", "capture-sizes", "--cost-file", str(files / "cost.csv"), "--eager-overhead", "1ms"]
    empty = _prom(files / "e.prom", (0, 0, 0, 0))
    assert_one_line_error(invoke(*base, "--prometheus", empty), "no decode steps")
    a = _prom(files / "a.prom", (10, 40, 60, 60))
    b = _prom(files / "b.prom", (5, 40, 60, 60))
    assert_one_line_error(invoke(*base, "--prometheus", b, "--before", a), "went down")
    batches = ["--batches", str(files / "batches.csv")]
    assert_one_line_error(invoke(*base, *batches, "--current", "1,2,2"), "twice")
    assert_one_line_error(invoke(*base, *batches, "--current", "0,8"), "0 is not")
    run = invoke(*base, *batches, "--memory-per-capture", "10MiB", "--memory-budget", "1MiB")
    assert_one_line_error(run, "no list fits")


def test_decreasing_cost_warns(files):
    (files / "down.csv").write_text("batch_size,time_ms\n1,3\n8,2\n64,5\n")
    run = invoke(
        "tune", "capture-sizes", "--batches", str(files / "batches.csv"),
        "--cost-file", str(files / "down.csv"),
        "--eager-overhead", "1ms", "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    codes = [w["code"] for w in run.json()["warnings"]]
    assert "cost_decreasing" in codes and "cost_extrapolated" in codes


def test_speculative_keys(files):
    run = invoke(
        "tune", "speculative", "--alphas", "0.8,0.7,0.6", "--target-cost-file", str(files / "target.csv"),
        "--draft-cost-file", str(files / "draft.csv"), "--batch-sizes", "1,8,64,512,2048",
        "--overhead", "0.5ms", "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    r = run.json()["result"]
    assert {"batch_size", "k", "speedup", "expected_tokens"} <= set(r["table"][0])
    assert r["table"][0]["k"] > 0 and r["table"][-1]["k"] == 0 and r["table"][-1]["speedup"] == 1.0
    assert r["stop_above_batch"] is not None and "expected_gain" in r
    assert "num_speculative_tokens_per_batch_size" in r["flags"]["vllm"]


def test_speculative_needs_one_rate_source(files):
    run = invoke(
        "tune", "speculative", "--target-cost-file", str(files / "target.csv"),
        "--draft-cost-file", str(files / "draft.csv"), "--batch-sizes", "1,8",
    )  # fmt: skip
    assert_one_line_error(run, "--alphas")


def _spec_prom(path, drafts, a0, a1):
    head = 'model_name="m",engine="0"'
    lines = [
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f"vllm:spec_decode_num_drafts_total{{{head}}} {drafts}",
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        f"vllm:spec_decode_num_draft_tokens_total{{{head}}} {2 * drafts}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        f"vllm:spec_decode_num_accepted_tokens_total{{{head}}} {a0 + a1}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{head},position="0"}} {a0}',
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{head},position="1"}} {a1}',
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_speculative_from_prometheus_interval(files):
    a = _spec_prom(files / "sa.prom", 100, 80, 50)
    b = _spec_prom(files / "sb.prom", 300, 240, 160)
    base = [
        "tune",
        "speculative",
        "--target-cost-file",
        str(files / "target.csv"),
        "--draft-cost-file",
        str(files / "draft.csv"),
    ]
    run = invoke(*base, "--prometheus", b, "--before", a, "--batch-sizes", "1,16", "--json")
    assert run.exit_code == 0, run.stderr
    assert run.json()["result"]["alphas"] == pytest.approx([0.8, 110 / 160])
    backwards = invoke(*base, "--prometheus", a, "--before", b, "--batch-sizes", "1,16")
    assert_one_line_error(backwards, "--before", "went down")


def test_spread_values():
    from infer_opt.cli.tune import spread_values

    assert spread_values(["--prometheus", "a", "b", "--cost-file", "c"]) == [
        "--prometheus", "a", "--prometheus", "b", "--cost-file", "c",
    ]  # fmt: skip
    assert spread_values(["--prometheus=a", "b"]) == ["--prometheus=a", "--prometheus", "b"]
    assert spread_values(["--prometheus", "a", "--prometheus", "b"]) == [
        "--prometheus", "a", "--prometheus", "b",
    ]  # fmt: skip
    # after "--" nothing is rewritten; other options' values are left alone
    assert spread_values(["--cost-file", "c", "--", "--prometheus", "a", "b"]) == [
        "--cost-file", "c", "--", "--prometheus", "a", "b",
    ]  # fmt: skip


def _capture_json(files, *prometheus):
    run = invoke(
        "tune", "capture-sizes", *prometheus, "--cost-file", str(files / "cost.csv"),
        "--max-captures", "2", "--eager-overhead", "1ms", "--json",
    )  # fmt: skip
    return run


def test_prometheus_snapshot_forms(files):
    a = _prom(files / "a.prom", (10, 40, 60, 60))
    b = _prom(files / "b.prom", (20, 90, 130, 130))
    one = _capture_json(files, "--prometheus", a)
    assert one.exit_code == 0, one.stderr
    window = _capture_json(files, "--prometheus", b, "--before", a)  # as speculative from-metrics
    assert window.exit_code == 0 and "is now" not in window.stderr, window.stderr
    # the window (b − a: 10, 50, 70 steps) is not the last snapshot alone (20, 90, 130)
    assert window.json()["result"]["expected_step_s"] != one.json()["result"]["expected_step_s"]
    # the old spellings (BEFORE AFTER after one flag, or the flag twice) still work, saying so
    spaced = _capture_json(files, "--prometheus", a, b)
    repeated = _capture_json(files, "--prometheus", a, "--prometheus", b)
    for old in (spaced, repeated):
        assert old.exit_code == 0, old.stderr
        assert old.json()["result"] == window.json()["result"]
        assert (
            "`tune capture-sizes --prometheus BEFORE AFTER` is now `--prometheus AFTER --before BEFORE`"
            in (old.stderr)
        )
    three = _capture_json(files, "--prometheus", a, b, a)
    assert_one_line_error(three, "--prometheus", "give one snapshot")
    mixed = _capture_json(files, "--prometheus", a, b, "--before", a)
    assert_one_line_error(mixed, "--prometheus", "give one snapshot")
    alone = _capture_json(files, "--before", a, "--batches", str(files / "batches.csv"))
    assert_one_line_error(alone, "--before", "--prometheus files only")


def test_speculative_prometheus_pair_forms(files):
    a = _spec_prom(files / "sa.prom", 100, 80, 50)
    b = _spec_prom(files / "sb.prom", 300, 240, 160)
    base = ["tune", "speculative", "--target-cost-file", str(files / "target.csv")]
    base += ["--draft-cost-file", str(files / "draft.csv"), "--batch-sizes", "1,16"]
    run = invoke(*base, "--prometheus", a, b, "--json")  # the old spelling, said on stderr
    assert run.exit_code == 0, run.stderr
    assert run.json()["result"]["alphas"] == pytest.approx([0.8, 110 / 160])
    assert "is now `--prometheus AFTER --before BEFORE`" in run.stderr
    assert_one_line_error(invoke(*base, "--prometheus", a), "--before", "give two")
    assert_one_line_error(invoke(*base, "--prometheus", a, b, a), "--prometheus", "give one snapshot")


def test_an_absurd_capture_time_is_refused_not_a_traceback(files):
    """Issue 42: --capture-time 1e308 overflowed the break-even's exact arithmetic."""
    run = invoke(
        "tune", "capture-sizes", "--batches", str(files / "batches.csv"),
        "--cost-file", str(files / "cost.csv"),
        "--eager-overhead", "1", "--capture-time", "1e308",
    )  # fmt: skip
    assert_one_line_error(run, "--capture-time", "1e308")


def test_eager_overhead_with_an_eager_cost_is_refused_not_ignored(files):
    """Issue 42: --eager-overhead was silently ignored when --eager-cost was given."""
    run = invoke(
        "tune", "capture-sizes", "--batches", str(files / "batches.csv"),
        "--cost-file", str(files / "cost.csv"),
        "--eager-cost-file", str(files / "cost.csv"), "--eager-overhead", "1",
    )  # fmt: skip
    assert_one_line_error(run, "--eager-overhead", "not both")


def test_two_models_histograms_are_refused_not_summed(files, tmp_path):
    """Issue 42: two models' ``iteration_tokens`` histograms were summed by ``tune``."""
    lines = ["# TYPE vllm:iteration_tokens_total histogram"]
    for model in ("llama", "qwen"):
        lines += [
            f'vllm:iteration_tokens_total_bucket{{le="{e}",model_name="{model}"}} {c}'
            for e, c in zip(("1.0", "8.0", "64.0", "+Inf"), (5, 9, 12, 12), strict=True)
        ]
    path = tmp_path / "two.prom"
    path.write_text("\n".join(lines) + "\n")
    run = invoke(
        "tune", "capture-sizes", "--prometheus", str(path), "--cost-file", str(files / "cost.csv"),
        "--eager-overhead", "1",
    )  # fmt: skip
    assert_one_line_error(run, "several models", "llama", "qwen")


@pytest.mark.parametrize("count", ["1e308", "9223372036854775808"])
def test_absurd_counts_and_sizes_are_refused(files, tmp_path, count):
    """Issue 42: counts of 1e308 gave "Expected step 0 s"; a batch size past 2**63 wrapped."""
    (tmp_path / "b.csv").write_text(f"batch_size,count\n1,{count}\n3,30\n")
    run = invoke(
        "tune", "capture-sizes", "--batches", str(tmp_path / "b.csv"), "--cost-file", str(files / "cost.csv"),
        "--eager-overhead", "1",
    )  # fmt: skip
    assert_one_line_error(run, "count")
    prom = _prom(tmp_path / "p.prom", (5, 9, float(count), float(count)))
    run = invoke("tune", "capture-sizes", "--prometheus", prom, "--cost-file", str(files / "cost.csv"),
                 "--eager-overhead", "1")  # fmt: skip
    assert_one_line_error(run, "counts must be in")
