from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from infer_opt.checks import mask_alignment
from tests.helpers import assert_one_line_error, invoke

SMALL = ["--tq", "3", "--tk", "24", "--heads", "2", "--head-dim", "8", "--block-size", "5", "--window", "7"]


def test_table_shows_every_case_and_the_detected_bug():
    run = invoke("attention", "check", *SMALL)
    assert run.exit_code == 0, run.stderr
    for needle in ("prefill", "decode 1 token", "decode 3 tokens", "window 7", "wrong, detected", "PASS"):
        assert needle in run.stdout, needle
    assert "NOT detected" not in run.stdout and "MISMATCH" not in run.stdout


def test_json_shape():
    run = invoke("attention", "check", *SMALL, "--dtype", "float64", "--json")
    assert run.exit_code == 0
    data = run.json()
    assert data["schema"] == "infer-opt/attention-check"
    result = data["result"]
    assert result["passed"] is True and result["dtype"] == "float64"
    assert result["sdpa_is_causal_top_left"] is True
    case = result["cases"][0]
    assert set(case) >= {
        "case",
        "path",
        "tq",
        "tk",
        "max_abs_error",
        "tolerance",
        "passed",
        "expected_to_fail",
    }
    bugs = [c for c in result["cases"] if c["expected_to_fail"]]
    assert bugs and all(c["passed"] and c["max_abs_error"] > 1e-3 for c in bugs)
    assert all(c["max_abs_error"] < 1e-12 for c in result["cases"] if not c["expected_to_fail"])


def test_a_wrong_kernel_fails_with_exit_1_after_printing_the_table(monkeypatch):
    real = mask_alignment.blocked_attention_torch

    def ignores_offset(q, k, v, *, block_size, causal_offset=None, **kw):
        return real(
            q, k, v, block_size=block_size, causal_offset=0 if causal_offset is not None else None, **kw
        )

    monkeypatch.setattr(mask_alignment, "blocked_attention_torch", ignores_offset)
    run = invoke("attention", "check", *SMALL)
    assert run.exit_code == 1
    assert "MISMATCH" in run.stdout and "FAIL" in run.stdout
    # with the window and padding, offset 0 leaves rows with no visible key: that path raises
    assert "RAISED" in run.stdout and "EmptyRowError" in run.stdout
    assert run.stderr.strip().startswith("Error: attention check failed")


def test_an_undetected_bug_fails(monkeypatch):
    monkeypatch.setattr(mask_alignment, "causal_mask_top_left", mask_alignment.causal_mask_bottom_right)
    run = invoke("attention", "check", *SMALL, "--json")
    assert run.exit_code == 1
    rows = [c for c in run.json()["result"]["cases"] if c["expected_to_fail"] and not c["passed"]]
    assert rows and all(r["mask"] == "top-left bool" for r in rows)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--tq", "0"], ["--tq", "[1, 8192]"]),
        (["--tq", "9", "--tk", "8"], ["--tq", "<= --tk"]),
        (["--tk", "0"], ["--tk"]),
        (["--block-size", "0"], ["--block-size"]),
        (["--window", "0"], ["--window"]),
        (["--heads", "0"], ["--heads"]),
        (["--head-dim", "2.5"], ["--head-dim", "whole number"]),
        (["--seed", "-1"], ["--seed"]),
        (["--dtype", "int8"], ["--dtype", "float32, float64"]),
        (["--tq", "abc"], ["--tq", "abc"]),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needles):
    assert_one_line_error(invoke("attention", "check", *args), *needles)


def test_writes_markdown_and_csv(tmp_path):
    md, csv = tmp_path / "a.md", tmp_path / "a.csv"
    run = invoke("attention", "check", *SMALL, "--markdown", str(md), "--csv", str(csv))
    assert run.exit_code == 0
    assert "wrong, detected" in md.read_text()
    header = csv.read_text().splitlines()[0]
    assert header.startswith("case,path,mask,tq,tk,causal_offset,max_abs_error")
    errors = [float(line.split(",")[6]) for line in csv.read_text().splitlines()[1:]]
    assert np.isfinite(errors).all()


def test_cli_modules_import_no_torch_or_scipy_at_startup():
    code = (
        "import sys\n"
        "import infer_opt.cli.app\n"
        "import infer_opt.cli.attention_check, infer_opt.cli.speculative_verify\n"
        "print(','.join(m for m in ('torch', 'scipy') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""
