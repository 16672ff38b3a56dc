"""``infer-opt report``: saved results -> one markdown report with plots beside it (and HTML)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from infer_opt.results import save_result
from tests.helpers import assert_one_line_error, invoke
from tests.reports.fixtures import fixture

KINDS = ("profile", "roofline", "amdahl", "attention-check", "attention-window")


@pytest.fixture
def saved(tmp_path):
    paths = []
    for kind in KINDS:
        result = fixture(kind)
        if kind == "attention-check":  # one failed exactness check, to be flagged at the top
            cases = (replace(result.cases[0], passed=False, max_abs_error=0.5), *result.cases[1:])
            result = replace(result, cases=cases, passed=False)
        path = tmp_path / f"{kind}.json"
        save_result(path, result, command=f"infer-opt {kind} --out {path.name}")
        paths.append(str(path))
    return paths


def test_markdown_report_with_highlights_environment_sections_and_plots(saved, tmp_path):
    out = tmp_path / "docs" / "report.md"
    out.parent.mkdir()
    run = invoke("report", *saved, "-o", str(out), "--title", "Tiny on CPU")
    assert run.exit_code == 0, run.stderr
    text = out.read_text()
    assert text.startswith("# Tiny on CPU\n\n## What matters\n\n- ❌ **Attention exactness check:** FAIL")
    assert "- **Profile of tiny (prefill)**\n  - step 1.63 ms median" in text
    assert "best Amdahl opportunity: matmul" in text and "compute-bound" in text
    assert "**Roofline (Example CPU, float32):** fitted R = " in text
    assert (
        "## Environment" in text and "| # | Result | Device | dtype | torch | CUDA | Created (UTC) |" in text
    )
    assert (
        "```console\n$ infer-opt profile --out profile.json\n$ infer-opt roofline --out roofline.json\n"
        in text
    )
    headings = re.findall(r"^## (\d+)\. (.*)$", text, flags=re.M)
    assert [n for n, _ in headings] == ["1", "2", "3", "4", "5"]
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert links == [
        "report_assets/01-profile.png",
        "report_assets/01-profile-roofline.png",
        "report_assets/02-roofline.png",
        "report_assets/02-roofline-pred.png",
        "report_assets/03-amdahl.png",
    ]
    for link in links:
        assert (out.parent / link).read_bytes()[:4] == b"\x89PNG"
    assert "FAIL" in run.stdout and "What matters" in run.stdout
    assert "wrote" in run.stderr and "5 results, 5 plots" in run.stderr


def test_html_is_one_self_contained_file(saved, tmp_path):
    out = tmp_path / "r.md"
    run = invoke("report", *saved[2:4], "-o", str(out), "--html")
    assert run.exit_code == 0, run.stderr
    html = (tmp_path / "r.html").read_text()
    assert html.count('src="data:image/png;base64,') == 1
    assert "r_assets" not in html and "<table>" in html and "❌" in html


def test_html_only_report_leaves_no_assets(saved, tmp_path):
    out = tmp_path / "only.html"
    assert invoke("report", *saved[2:3], "-o", str(out)).exit_code == 0
    assert "data:image/png;base64," in out.read_text()
    assert not (tmp_path / "only_assets").exists()


def test_stdout_report_has_no_plots(saved):
    run = invoke("report", *saved[2:3], "-o", "-")
    assert run.exit_code == 0
    assert run.stdout.startswith("# infer-opt report\n") and "![" not in run.stdout


@pytest.mark.parametrize(
    ("args", "needle"), [(["-o", "r.txt"], "FILE.md or FILE.html"), (["-o", "-", "--html"], "--html")]
)
def test_bad_output_options(saved, args, needle):
    assert_one_line_error(invoke("report", saved[2], *args), needle)


def test_unreadable_result_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert_one_line_error(invoke("report", str(bad), "-o", str(tmp_path / "r.md")), "not an infer-opt result")
