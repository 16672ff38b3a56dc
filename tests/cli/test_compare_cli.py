"""``infer-opt compare``: headline, per-row verdicts, output files, and refusals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from infer_opt.results import save_result
from tests.helpers import assert_one_line_error, invoke
from tests.reports.fixtures import fixture, kernels_new, kernels_runs, kernels_runs_new


@pytest.fixture
def kernel_files(tmp_path):
    """Two single-run kernel results (the matmuls 1.5× faster in NEW)."""
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    save_result(base, fixture("kernels"), command="infer-opt kernels --out base.json")
    save_result(new, kernels_new(), command="infer-opt kernels --out new.json")
    return base, new


@pytest.fixture
def run_files(tmp_path):
    """The same in three runs a side."""
    base, new = tmp_path / "base3.json", tmp_path / "new3.json"
    save_result(base, kernels_runs(), command="infer-opt kernels --runs 3 --out base3.json")
    save_result(new, kernels_runs_new(), command="infer-opt kernels --runs 3 --out new3.json")
    return base, new


def test_runs_on_both_sides_give_a_run_level_headline(run_files):
    base, new = run_files
    run = invoke("compare", str(base), str(new))
    assert run.exit_code == 0, run.stderr
    text = " ".join(run.stdout.split())
    assert (
        "new3.json ran 1.16 ± 0.031 times faster than base3.json (geometric mean over 5 cases, 3 + 3 runs)"
        in text
    )
    assert "t test on 3 + 3 runs" in text and "1.48× faster" in text and "α = 0.05" in text
    assert "one run" not in run.stderr and "1 case appears on one side only" in run.stderr


def test_single_runs_give_no_verdict_under_the_floor_and_say_how_to_get_one(kernel_files):
    base, new = kernel_files
    run = invoke("compare", str(base), str(new))
    assert run.exit_code == 0, run.stderr
    text = " ".join(run.stdout.split())
    assert "no significant difference between new.json and base.json (within ±" in text
    assert "changes under 40% are not distinguishable on this machine from one run per side" in text
    assert "1.5× faster" in text  # matmul n=256 (180 µs) clears the 40% floor; n=64 (7 µs) does not
    errors = " ".join(run.stderr.split())
    assert "BASE and NEW hold one run" in errors
    assert "infer-opt kernels --out base.json --runs 3" in errors
    assert "infer-opt ab --base 'infer-opt kernels' --new 'infer-opt kernels'" in errors
    assert "no noise floor measured on this machine" in errors


def test_noise_floor_option_and_a_measured_floor(kernel_files, tmp_path, monkeypatch):
    base, new = kernel_files
    given = invoke("compare", str(base), str(new), "--noise-floor", "10%", "--json").json()["result"]
    assert given["noise_source"] == "given" and given["noise_floor"] == pytest.approx(0.10)
    assert {r["key"]: r["verdict"] for r in given["rows"]}["matmul [n=64]"] == "faster"
    monkeypatch.setenv("INFER_OPT_CACHE", str(tmp_path / "cache"))
    from infer_opt.store import save_floor

    saved = save_floor(fixture("noise-floor")).path
    run = invoke("compare", str(base), str(new))
    assert run.exit_code == 0, run.stderr
    assert f"measured by an A/A on this machine, {saved}" in " ".join(run.stdout.split())
    assert "no noise floor measured" not in run.stderr


def test_json_keeps_verdicts_p_values_intervals_and_runs(run_files):
    base, new = run_files
    data = invoke("compare", str(base), str(new), "--json", "--threshold", "10%").json()
    assert data["schema"] == "infer-opt/compare"
    result = data["result"]
    assert result["threshold"] == pytest.approx(0.1) and result["compared"] == "kernels"
    rows = {r["key"]: r for r in result["rows"]}
    matmul = rows["matmul [n=256]"]
    assert matmul["verdict"] == "faster" and matmul["p_value"] < 0.05
    assert matmul["ratio_low"] < matmul["ratio"] < matmul["ratio_high"]
    assert (matmul["runs_base"], matmul["runs_new"]) == (3, 3) and matmul["between_run_cv"] > 0
    assert rows["attention_sdpa [1×8×256×64]"]["verdict"] == "only in base"
    headline = result["headline"]
    assert headline["verdict"] == "faster" and headline["low"] < headline["speedup"] < headline["high"]
    assert {w["code"] for w in data["warnings"]} == {"rows_in_one_run"}


def test_markdown_csv_and_plot_files(kernel_files, tmp_path):
    base, new = kernel_files
    md, csv, png = tmp_path / "d.md", tmp_path / "d.csv", tmp_path / "d.png"
    run = invoke("compare", str(base), str(new), "--markdown", str(md), "--out", str(csv), "--plot", str(png))
    assert run.exit_code == 0, run.stderr
    assert md.read_text().startswith("## Compare: ")
    assert csv.read_text().startswith("name,detail,group,base_median_s,new_median_s,ratio_new_over_base,")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_refuses_different_dtype_in_one_line(tmp_path):
    base, new = tmp_path / "a.json", tmp_path / "b.json"
    save_result(base, fixture("profile"))
    save_result(new, replace(fixture("profile"), dtype="bfloat16"))
    run = invoke("compare", str(base), str(new))
    assert_one_line_error(run, "differs from BASE in dtype (float32 vs bfloat16)", "--force")
    assert invoke("compare", str(base), str(new), "--force", "--json").exit_code == 0


def test_files_with_the_same_name_are_named_by_path(kernel_files, tmp_path):
    base, _ = kernel_files
    (tmp_path / "other").mkdir()
    save_result(tmp_path / "other" / "base.json", kernels_new())
    result = invoke("compare", str(base), str(tmp_path / "other" / "base.json"), "--json").json()["result"]
    assert result["base_name"] == str(base) and result["new_name"] == str(tmp_path / "other" / "base.json")


def test_refuses_different_kinds(tmp_path, kernel_files):
    base, _ = kernel_files
    other = tmp_path / "p.json"
    save_result(other, fixture("profile"))
    assert_one_line_error(invoke("compare", str(base), str(other)), "profile result but BASE is a kernels")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--threshold", "-5%"], "--threshold"),
        (["--significance", "1.5"], "--significance"),
        (["--threshold", "abc"], "--threshold"),
    ],
)
def test_bad_options_are_one_line_errors(kernel_files, args, needle):
    base, new = kernel_files
    assert_one_line_error(invoke("compare", str(base), str(new), *args), needle)


def test_missing_file_is_one_line_error(tmp_path):
    assert_one_line_error(
        invoke("compare", str(tmp_path / "no.json"), str(tmp_path / "x.json")), "does not exist"
    )


@pytest.mark.parametrize("kind", ["directory", "binary"])
def test_unreadable_result_file_one_line_error(tmp_path, kind):
    bad = tmp_path / "bad.json"
    if kind == "directory":
        bad.mkdir()
    else:
        bad.write_bytes(b"\xff\xfe\x00\x81")
    assert_one_line_error(invoke("compare", str(bad), str(bad)), "bad.json")
