"""``infer-opt ab`` end to end: real processes alternate (a small script stands in for
``infer-opt kernels``, so nothing is timed), the comparison and its files, and the errors."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.helpers import assert_one_line_error, invoke

KERNELS = Path(__file__).parents[1] / "reports" / "fixtures" / "kernels.json"

#: writes the kernels fixture to --out, the matmuls --speed times faster; exits 1 with --fail
FAKE = f"""
import json, sys
args = sys.argv[1:]
if "--fail" in args:
    sys.exit("fake: out of memory")
speed = float(args[args.index("--speed") + 1]) if "--speed" in args else 1.0
data = json.loads(open({str(KERNELS)!r}, encoding="utf-8").read())
for row in data["rows"]:
    f = 1 / speed if row["family"] == "matmul" else 1.0
    row["samples_s"] = [v * f for v in row["samples_s"]]
    row["time_s"] *= f
    for k in ("median_s", "q1_s", "q3_s", "min_s", "max_s", "mean_s", "iqr_s", "std_s"):
        row["summary"][k] *= f
out = args[args.index("--out") + 1]
json.dump({{"schema": "infer-opt/kernels", "version": 1, "result": data}}, open(out, "w"))
"""


@pytest.fixture
def fake(tmp_path) -> str:
    script = tmp_path / "fake_kernels.py"
    script.write_text(FAKE, encoding="utf-8")
    return shlex.join([sys.executable, str(script)])


def test_alternates_two_commands_and_compares_them(fake, tmp_path):
    folder = tmp_path / "rounds"
    run = invoke("ab", "--base", fake, "--new", f"{fake} --speed 2", "--rounds", "2", "--dir", str(folder),
                 "--json")  # fmt: skip
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/ab"
    result = data["result"]
    assert [r["file"] for r in result["runs"]] == [
        str(folder / name) for name in ("base-1.json", "new-1.json", "base-2.json", "new-2.json")
    ]
    comparison = result["comparison"]
    rows = {r["key"]: r for r in comparison["rows"]}
    assert rows["matmul [n=256]"]["verdict"] == "faster" and rows["matmul [n=256]"]["runs_new"] == 2
    assert rows["copy [N=2^16]"]["verdict"] == "within noise"
    assert result["noise_floor"] is None
    assert (folder / "new-2.json").exists()


def test_console_shows_the_runs_in_order_and_the_comparison(fake, tmp_path):
    run = invoke(
        "ab", "--base", fake, "--new", f"{fake} --speed 2", "--rounds", "2", "--dir", str(tmp_path / "r")
    )
    assert run.exit_code == 0, run.stderr
    text = " ".join(run.stdout.split())
    assert "A/B:" in text and "Runs, in the order they ran" in text and "2× faster" in text


def test_a_failing_side_exits_1_naming_side_and_round(fake, tmp_path):
    run = invoke(
        "ab", "--base", fake, "--new", f"{fake} --fail", "--rounds", "2", "--dir", str(tmp_path / "r")
    )
    assert run.exit_code == 1
    lines = [line for line in run.stderr.splitlines() if line.startswith("Error:")]
    assert lines and "the new command failed in round 1: exit status 1: fake: out of memory" in lines[0]
    assert "base-1.json" in lines[0] and (tmp_path / "r" / "base-1.json").exists()


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--base", "", "--new", "x"], ["--base", "give a command line"]),
        (["--base", "x", "--new", "x", "--new-env", "NOPE"], ["--new-env", "KEY=VALUE"]),
        (["--base", "x", "--new", "'x"], ["--new", "cannot split"]),
        (["--base", "x", "--new", "x", "--rounds", "0"], ["--rounds"]),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needles):
    assert_one_line_error(invoke("ab", *args), *needles)


def test_dir_that_is_a_file_is_refused(tmp_path, fake):
    path = tmp_path / "file"
    path.write_text("x")
    assert_one_line_error(
        invoke("ab", "--base", fake, "--new", fake, "--dir", str(path)), "--dir", "is a file"
    )
