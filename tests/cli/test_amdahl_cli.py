from __future__ import annotations

import pytest

from tests.helpers import assert_one_line_error, invoke


def test_worked_example_json():
    run = invoke("amdahl", "-f", "0.4", "-s", "4", "--json")
    assert run.exit_code == 0
    data = run.json()
    assert data["schema"] == "infer-opt/amdahl"
    assert data["result"]["speedup"] == pytest.approx(1.4285714, rel=1e-6)
    assert data["result"]["ceiling"] == pytest.approx(1 / 0.6)
    assert data["result"]["required_speedup"] is None


def test_table_output_mentions_speedup_and_ceiling():
    run = invoke("amdahl", "-f", "0.4", "-s", "4")
    assert run.exit_code == 0
    assert "1.429×" in run.stdout and "1.667×" in run.stdout


def test_impossible_target_has_null_and_reason():
    data = invoke("amdahl", "-f", "0.6", "--target-speedup", "2.5", "--json").json()["result"]
    assert data["required_speedup"] is None
    assert data["reason"]["code"] == "target_above_ceiling"
    assert data["reason"]["values"] == {"target": 2.5, "ceiling": 2.5}


def test_reachable_target():
    data = invoke("amdahl", "-f", "0.6", "--target-speedup", "2", "--json").json()["result"]
    assert data["required_speedup"] == pytest.approx(6.0)


def test_parts_and_infinite_speedup():
    data = invoke("amdahl", "--part", "attn=0.3:inf", "--part", "mlp=0.5:2", "--json").json()["result"]
    assert data["speedup"] == pytest.approx(1 / (0.2 + 0.25))
    assert data["parts"][0]["speedup"] == "inf"


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["-f", "1.5", "-s", "2"], ["--fraction", "1.5", "[0, 1]"]),
        (["-f", "-0.1", "-s", "2"], ["--fraction"]),
        (["-f", "0.5", "-s", "0"], ["--speedup", "[1e-09, inf]"]),
        (["-f", "0.5", "-s", "1e-320"], ["--speedup", "[1e-09, inf]"]),
        (["--part", "a=0.5:1e-12"], ["--part", "[1e-09, inf]"]),
        (["-f", "0.5", "-s", "-3"], ["--speedup"]),
        (["-f", "nan", "-s", "2"], ["--fraction", "NaN"]),
        (["-f", "0.5", "-s", "abc"], ["--speedup", "abc"]),
        (["-f", "0.5"], ["--speedup"]),
        (["--part", "a=0.7:2", "--part", "b=0.6:2"], ["--part", "sum to <= 1"]),
        (["--part", "a0.7:2"], ["--part", "NAME=FRACTION:SPEEDUP"]),
        (["-f", "0.5", "-s", "2", "--added", "-1"], ["--added"]),
        (["-f", "0.5", "-s", "2", "--target-speedup", "0"], ["--target-speedup"]),
        (["-f", "0.5", "-s", "2", "--plot", "x.svg"], ["--plot", ".png"]),
        (["--bogus"], ["--bogus"]),
        ([], ["--fraction"]),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needles):
    assert_one_line_error(invoke("amdahl", *args), *needles)


def test_writes_markdown_csv_and_plot(tmp_path):
    md, csv, png = tmp_path / "a.md", tmp_path / "a.csv", tmp_path / "a.png"
    run = invoke(
        "amdahl",
        "-f",
        "0.4",
        "-s",
        "4",
        "--markdown",
        str(md),
        "--csv",
        str(csv),
        "--plot",
        str(png),
    )
    assert run.exit_code == 0
    assert "| part | 40.0% | 4× |" in md.read_text()
    assert csv.read_text().splitlines()[0] == "name,fraction,speedup,time_after_fraction,share_after"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_out_picks_format_from_extension(tmp_path):
    target = tmp_path / "r.json"
    assert invoke("amdahl", "-f", "0.4", "-s", "4", "--out", str(target)).exit_code == 0
    from infer_opt.results import load_result

    loaded = load_result(target)
    assert loaded.kind == "amdahl"
    assert loaded.result.speedup == pytest.approx(1 / 0.7)


def test_target_alone_does_not_print_a_speedup_as_if_given():
    run = invoke("amdahl", "-f", "0.6", "--target-speedup", "2")
    assert run.exit_code == 0
    assert "no --speedup given" in run.stdout
    assert (
        invoke("amdahl", "-f", "0.6", "--target-speedup", "2", "--json").json()["result"]["speedup_given"]
        is False
    )
