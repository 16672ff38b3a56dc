from __future__ import annotations

import json

import pytest
import torch

from infer_opt.profilers import kernels as K
from tests.helpers import assert_one_line_error, invoke

FAST = ("--device", "cpu", "--reps", "3", "--warmup", "1")


def test_only_smoke_run_json():
    run = invoke("kernels", *FAST, "--only", "tiny_add", "--json")
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/kernels"
    rows = data["result"]["rows"]
    assert [r["name"] for r in rows] == ["tiny_add"] * 3
    row = rows[0]
    assert row["time_s"] > 0 and len(row["samples_s"]) == 3
    assert {"median_s", "q1_s", "q3_s", "iqr_s"} <= set(row["summary"])
    assert row["flops"] == 1.0 and row["bytes"] == 12.0
    assert data["result"]["device_info"]["threads"] == torch.get_num_threads()
    assert data["result"]["complete"] is True


def test_table_per_family_and_check_column():
    run = invoke("kernels", *FAST, "--only", "tiny_add,attention_sdpa", "--suite", "quick")
    assert run.exit_code == 0, run.stderr
    assert "launch" in run.stdout and "attention" in run.stdout
    assert "Median ± IQR/2" in run.stdout and "Check" in run.stdout and " ok " in run.stdout
    assert "matches its reference" in run.stdout


def test_out_files_json_csv_markdown(tmp_path):
    js, cs, md = tmp_path / "k.json", tmp_path / "k.csv", tmp_path / "k.md"
    run = invoke(
        "kernels", *FAST, "--only", "copy", "--out", str(js), "--out", str(cs), "--markdown", str(md)
    )
    assert run.exit_code == 0, run.stderr
    from infer_opt.results import load_result

    loaded = load_result(js)
    assert loaded.kind == "kernels" and len(loaded.result.rows) == 5
    header = cs.read_text().splitlines()[0]
    assert header.startswith("name,size,time_s")
    assert "| copy |" in md.read_text()


def test_warmup_by_time_and_adaptive_reps():
    run = invoke(
        "kernels", "--device", "cpu", "--only", "tiny_add", "--warmup", "5ms", "--reps", "auto", "--json"
    )
    assert run.exit_code == 0, run.stderr
    settings = run.json()["result"]["settings"]
    assert settings["warmup"] is None and settings["warmup_time_s"] == pytest.approx(0.005)
    assert settings["reps"] is None and settings["max_time_s"] == 2.0


def test_threads_option_sets_torch_threads():
    before = torch.get_num_threads()
    try:
        run = invoke("kernels", *FAST, "--only", "tiny_add", "--threads", "1", "--json")
        assert run.exit_code == 0, run.stderr
        assert run.json()["result"]["device_info"]["threads"] == 1
        assert "-1t-" in run.json()["result"]["device_key"]
    finally:
        torch.set_num_threads(before)


def test_cuda_without_cuda_is_one_line_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert_one_line_error(invoke("kernels", "--device", "cuda"), "--device", "CUDA is not available")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--device", "cpu", "--cuda-graphs"], ["--cuda-graphs", "CUDA device"]),
        (["--device", "cpu", "--dtype", "float64"], ["--dtype", "float64", "float32, bfloat16, float16"]),
        (["--device", "tpu"], ["--device", "tpu"]),
        (["--device", "cpu", "--only", "nope"], ["--only", "nope"]),
        (["--device", "cpu", "--reps", "0"], ["--reps"]),
        (["--device", "cpu", "--warmup", "abc"], ["--warmup", "abc"]),
        (["--device", "cpu", "--suite", "medium"], ["--suite", "medium"]),
        (["--device", "cpu", "--threads", "0"], ["--threads"]),
        (["--device", "cpu", "--only", "tiny_add", "--out", "no-such-format.xyz"], ["--out", ".json"]),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needles):
    assert_one_line_error(invoke("kernels", *args), *needles)


def test_interrupt_exits_130_and_keeps_finished_rows(tmp_path, monkeypatch):
    real = K.run_case
    calls = []

    def flaky(case, *args, **kwargs):
        calls.append(case.key)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(case, *args, **kwargs)

    monkeypatch.setattr(K, "run_case", flaky)
    target = tmp_path / "partial.json"
    run = invoke("kernels", *FAST, "--only", "tiny_add", "--out", str(target))
    assert run.exit_code == 130
    data = json.loads(target.read_text())
    assert len(data["result"]["rows"]) == 2
    assert data["result"]["complete"] is False
    assert "interrupted" in run.stderr


def test_failed_reference_check_exits_1(monkeypatch):
    def provider(kind, suite):
        def inputs(ctx):
            return {"x": ctx.randn(16, generator=ctx.generator())}

        yield K.KernelCase(
            "toy_ref", "toy", "n=16", 16, lambda s: (16.0, 32.0 * s), inputs, lambda x: lambda: x["x"] * 2
        )
        yield K.KernelCase(
            "toy_wrong",
            "toy",
            "n=16",
            16,
            lambda s: (16.0, 32.0 * s),
            inputs,
            lambda x: lambda: x["x"] * 3,
            "toy_ref",
        )

    K.register_family(provider)
    try:
        run = invoke("kernels", *FAST, "--only", "toy")
    finally:
        K._FAMILIES.remove(provider)
    assert run.exit_code == 1
    assert "FAIL" in run.stdout
    assert "Error: output check failed for toy_wrong[n=16]" in run.stderr


def test_runs_keep_every_runs_median():
    run = invoke("kernels", *FAST, "--only", "tiny_add", "--runs", "2", "--json")
    assert run.exit_code == 0, run.stderr
    result = run.json()["result"]
    assert result["runs"] == 2 and result["complete"] is True
    for row in result["rows"]:
        assert len(row["run_medians_s"]) == 2 and len(row["samples_s"]) == 6


def _interrupt_at(monkeypatch, call: int) -> list[str]:
    """Make the ``call``-th case timing raise KeyboardInterrupt; returns the cases timed."""
    real = K.run_case
    calls: list[str] = []

    def flaky(case, *args, **kwargs):
        if len(calls) + 1 == call:
            calls.append("interrupted")
            raise KeyboardInterrupt
        calls.append(case.key)
        return real(case, *args, **kwargs)

    monkeypatch.setattr(K, "run_case", flaky)
    return calls


def test_interrupt_names_the_file_and_the_resume_command_which_goes_on(tmp_path, monkeypatch):
    target = tmp_path / "partial.json"
    args = ["kernels", *FAST, "--only", "tiny_add", "--runs", "2", "--out", str(target)]
    monkeypatch.setattr("sys.argv", ["infer-opt", *args])
    calls = _interrupt_at(monkeypatch, 5)
    run = invoke(*args)
    assert run.exit_code == 130
    message = " ".join(run.stderr.split())
    expected = f"infer-opt kernels {' '.join(FAST)} --only tiny_add --runs 2 --resume {target}"
    assert f"saved to {target}; go on with: {expected}" in message
    saved = json.loads(target.read_text())["result"]
    # the second pass starts one case later (rotated): N=4 finished both runs, the others one
    assert saved["complete"] is False and [len(r["run_medians_s"]) or 1 for r in saved["rows"]] == [1, 2, 1]
    calls.clear()
    monkeypatch.setattr(K, "run_case", K.run_case)
    resumed = invoke(*args[:-2], "--resume", str(target))
    assert resumed.exit_code == 0, resumed.stderr
    assert "resuming" in resumed.stderr and "1 case(s) already measured in every run" in resumed.stderr
    final = json.loads(target.read_text())["result"]
    assert final["complete"] is True and [len(r["run_medians_s"]) for r in final["rows"]] == [2, 2, 2]
    assert final["rows"][1]["run_medians_s"] == saved["rows"][1]["run_medians_s"]
    assert final["rows"][0]["run_medians_s"][0] == saved["rows"][0]["time_s"]


def test_interrupt_without_out_says_nothing_was_saved(monkeypatch):
    _interrupt_at(monkeypatch, 2)
    run = invoke("kernels", *FAST, "--only", "tiny_add")
    assert run.exit_code == 130 and "not saved (give --out FILE.json" in run.stderr


def test_resume_refuses_another_setup_or_kind(tmp_path):
    saved = tmp_path / "k.json"
    assert invoke("kernels", *FAST, "--only", "tiny_add", "--out", str(saved)).exit_code == 0
    run = invoke("kernels", "--device", "cpu", "--reps", "4", "--warmup", "1", "--only", "tiny_add",
                 "--resume", str(saved))  # fmt: skip
    assert_one_line_error(run, "--resume", "another setup", "reps (3 vs 4)")
    from infer_opt.results import save_result
    from tests.reports.fixtures import fixture

    other = save_result(tmp_path / "p.json", fixture("profile"))
    assert_one_line_error(
        invoke("kernels", *FAST, "--resume", str(other)), "--resume", "expected a kernels result"
    )
