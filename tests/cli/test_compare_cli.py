"""``infer-opt compare``: headline, per-row verdicts, output files, and refusals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from infer_opt.results import save_result
from tests.helpers import assert_one_line_error, invoke
from tests.reports.fixtures import fixture, kernels_new


@pytest.fixture
def kernel_files(tmp_path):
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    save_result(base, fixture("kernels"), command="infer-opt kernels --out base.json")
    save_result(new, kernels_new(), command="infer-opt kernels --out new.json")
    return base, new


def test_console_shows_the_headline_and_the_verdicts(kernel_files):
    base, new = kernel_files
    run = invoke("compare", str(base), str(new))
    assert run.exit_code == 0, run.stderr
    headline = (
        "new.json ran 1.2 ± 0.14 times faster than base.json (geometric mean over 5 cases) — within noise"
    )
    assert headline in " ".join(run.stdout.split())
    assert "1.5× faster" in run.stdout and "only in base" in run.stdout
    assert "Mann-Whitney" in run.stdout and "α = 0.05" in run.stdout
    assert "1 case appears in only one run" in run.stderr


def test_json_envelope_round_trips(kernel_files):
    base, new = kernel_files
    data = invoke("compare", str(base), str(new), "--json", "--threshold", "10%").json()
    assert data["schema"] == "infer-opt/compare"
    result = data["result"]
    assert result["threshold"] == pytest.approx(0.1) and result["compared"] == "kernels"
    verdicts = {r["key"]: r["verdict"] for r in result["rows"]}
    assert (
        verdicts["matmul [n=256]"] == "faster" and verdicts["attention_sdpa [1×8×256×64]"] == "only in base"
    )


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
        (["--alpha", "1.5"], "--alpha"),
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
