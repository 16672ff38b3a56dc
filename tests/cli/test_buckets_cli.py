from __future__ import annotations

import pytest

from tests.helpers import assert_one_line_error, heavy_modules_imported, invoke


@pytest.fixture
def lengths(tmp_path):
    path = tmp_path / "lengths.txt"
    path.write_text("1\n2\n3\n4\n")
    return path


def test_worked_example_json(lengths):
    run = invoke("buckets", str(lengths), "--bounds", "2,4", "--json")
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/buckets"
    result = data["result"]
    assert result["expected_padding"] == 0.5
    assert result["expected_quadratic_padding"] == 2.5
    assert result["relative_padding"] == 0.2
    assert result["bounds"] == [2, 4]
    assert [b["count"] for b in result["per_bucket"]] == [2, 2]


def test_table_output(lengths):
    run = invoke("buckets", str(lengths), "--bounds", "2,4")
    assert run.exit_code == 0
    assert "0.5 tokens per request = 20.0% of E[T]" in run.stdout
    assert "Mean padding b − T" in run.stdout


def test_csv_sample_with_counts_and_stdin():
    run = invoke("buckets", "-", "--bounds", "2,4", "--json", input="length,count\n1,1\n2,1\n3,1\n4,1\n")
    assert run.exit_code == 0, run.stderr
    assert run.json()["result"]["expected_padding"] == 0.5


def test_batch_size(lengths):
    result = invoke("buckets", str(lengths), "--bounds", "2,4", "--batch-size", "2", "--json").json()[
        "result"
    ]
    # batches of 2 from {1,2,3,4}: P(max ≤ 2) = 1/4 -> b = 2, else 4: E[b(max)] = 3.5
    assert result["batch"]["expected_padded_tokens"] == pytest.approx(7.0)
    assert result["batch"]["expected_padding"] == pytest.approx(2.0)


def test_unbucketed_counted_when_allowed(tmp_path):
    path = tmp_path / "l.txt"
    path.write_text("1\n3\n9\n12\n12\n")
    run = invoke("buckets", str(path), "--bounds", "4", "--allow-unbucketed", "--json")
    assert run.exit_code == 0
    result = run.json()["result"]
    assert result["unbucketed_count"] == 3 and result["unbucketed_max"] == 12
    assert result["expected_padding"] == 2.0
    table = invoke("buckets", str(path), "--bounds", "4", "--allow-unbucketed")
    assert "3 lengths above 4 (max 12)" in table.stdout
    assert "left out of every expectation" in table.stderr


def test_optimize(tmp_path):
    path = tmp_path / "l.txt"
    path.write_text("\n".join(str(x) for x in [1, 2, 9, 10, 10, 30]) + "\n")
    result = invoke("buckets", str(path), "--optimize", "2", "--json").json()["result"]
    assert result["bounds"] == [10, 30]
    names = [row["name"] for row in result["optimization"]["ladders"]]
    assert names[0] == "optimal (K = 2)" and "powers of two" in names


def test_optimize_chooses_k_with_costs(tmp_path):
    path = tmp_path / "l.txt"
    path.write_text("\n".join(str(10 * i) for i in range(1, 9)) + "\n")
    run = invoke(
        "buckets", str(path), "--optimize", "5", "--compile-cost", "1e6", "--token-cost", "1us", "--json"
    )
    assert run.exit_code == 0, run.stderr
    opt = run.json()["result"]["optimization"]
    assert opt["k"] == 1 and len(opt["k_choices"]) == 5
    table = invoke("buckets", str(path), "--optimize", "5", "--compile-cost", "0", "--token-cost", "1")
    assert "Use K = 5 (5 buckets)" in table.stdout
    assert "Objective:" in table.stdout


def test_help_shows_formula_and_example():
    run = invoke("buckets", "--help")
    assert run.exit_code == 0
    assert "E[b(T) - T]" in run.stdout and "infer-opt buckets lengths.txt --bounds" in run.stdout


def test_writes_plot_and_csv(tmp_path, lengths):
    png, csv = tmp_path / "b.png", tmp_path / "b.csv"
    run = invoke("buckets", str(lengths), "--bounds", "2,4", "--plot", str(png), "--csv", str(csv))
    assert run.exit_code == 0, run.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert csv.read_text().splitlines()[0].startswith("lengths,bound,count,share")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--bounds", "2,2"], ["--bounds", "strictly increasing"]),
        (["--bounds", "4,2"], ["--bounds", "2 after 4"]),
        (["--bounds", "0,4"], ["--bounds", "'0'"]),
        (["--bounds", "-4"], ["--bounds"]),
        (["--bounds", "2.5,4"], ["--bounds", "whole number"]),
        (["--bounds", "a,b"], ["--bounds", "'a'"]),
        (["--bounds", ","], ["--bounds", "separated by commas"]),
        (["--bounds", "2,3"], ["--bounds", "1 of 4 lengths", "max length 4", "--allow-unbucketed"]),
        ([], ["--bounds", "missing"]),
        (["--bounds", "4", "--batch-size", "0"], ["--batch-size"]),
        (["--optimize", "0"], ["--optimize", "[1, 2^53]"]),
        (["--optimize", "5"], ["--optimize", "distinct lengths in the sample (4)"]),
        (["--optimize", "2", "--cost", "cubic"], ["--cost", "linear, quadratic"]),
        (["--optimize", "2", "--compile-cost", "1s"], ["--token-cost", "together"]),
        (["--optimize", "2", "--compile-cost", "-1s", "--token-cost", "1us"], ["--compile-cost", ">= 0"]),
        (["--optimize", "2", "--compile-cost", "nan", "--token-cost", "1us"], ["--compile-cost", "NaN"]),
        (["--optimize", "2", "--compile-cost", "1s", "--token-cost", "1furlong"], ["--token-cost", "unit"]),
        (["--bounds", "4", "--compile-cost", "1s"], ["--compile-cost", "only used with --optimize"]),
        (["--bounds", "4", "--plot", "x.jpg"], ["--plot", ".png"]),
    ],
)
def test_bad_input_is_one_line_exit_2(lengths, args, needles):
    assert_one_line_error(invoke("buckets", str(lengths), *args), *needles)


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("", ["l.txt", "empty"]),
        ("3\n0\n", ["l.txt line 2", "'0'"]),
        ("3\n-7\n", ["l.txt line 2", "'-7'"]),
        ("3\nabc\n", ["l.txt line 2", "'abc'"]),
        ("length,count\n3,x\n", ["l.txt line 2, column count", "'x'"]),
        ("size\n3\n", ["l.txt", "'length' column"]),
    ],
)
def test_malformed_samples_are_one_line_exit_2(tmp_path, text, needles):
    path = tmp_path / "l.txt"
    path.write_text(text)
    assert_one_line_error(invoke("buckets", str(path), "--bounds", "8"), *needles)


def test_missing_file_is_one_line_exit_2():
    assert_one_line_error(invoke("buckets", "nope.txt", "--bounds", "8"), "FILE", "does not exist")


def test_missing_file_argument_is_one_line_exit_2():
    assert_one_line_error(invoke("buckets", "--bounds", "8"), "FILE")


@pytest.mark.parametrize(
    "args",
    [["--bounds", "2,4"], ["--bounds", "2,4", "--json"], ["--optimize", "2"]],
)
def test_reading_a_sample_imports_pandas_and_nothing_heavier(lengths, args):
    # tabular input goes through the one pandas reader (infer_opt.inputs.tables); never torch & co
    argv = ["buckets", str(lengths), *args]
    assert heavy_modules_imported(argv) == ["pandas"]


@pytest.mark.parametrize("bounds", ["1e20", "10,1e19", "2147483648"])
def test_huge_bounds_one_line_error(lengths, bounds):
    assert_one_line_error(invoke("buckets", str(lengths), "--bounds", bounds), "--bounds")
