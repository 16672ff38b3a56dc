from __future__ import annotations

import pytest

from tests.helpers import assert_one_line_error, heavy_modules_imported, invoke

WORKED = ["--compile-cost", "3s", "--eager", "2ms", "--compiled", "1.5ms"]

BUCKETS_CSV = """bucket,compile_s,calls,eager_ms,compiled_ms
128,20,50000,2,1.5
256,25,40000,3.5,2.6
512,30,8000,7,5.5
2048,60,200,32,34
"""


@pytest.fixture
def buckets_csv(tmp_path):
    path = tmp_path / "buckets.csv"
    path.write_text(BUCKETS_CSV)
    return path


def test_worked_example_json():
    run = invoke("amortize", *WORKED, "--calls", "10000", "--json")
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/amortize"
    result = data["result"]
    assert result["break_even_calls"] == 6000
    assert result["min_gaining_calls"] == 6001
    assert result["net_gain_s"] == 2.0
    assert result["compile"] is True


def test_bare_numbers_are_seconds_and_milliseconds():
    result = invoke("amortize", "--compile-cost", "3", "--eager", "2", "--compiled", "1.5", "--json").json()
    assert result["result"]["break_even_calls"] == 6000
    assert result["result"]["compile"] is None


def test_at_break_even_does_not_compile():
    result = invoke("amortize", *WORKED, "--calls", "6000", "--json").json()["result"]
    assert result["net_gain_s"] == 0 and result["compile"] is False


def test_never_pays_has_null_break_even_and_reason():
    result = invoke(
        "amortize", "--compile-cost", "3s", "--eager", "1ms", "--compiled", "1.5ms", "--json"
    ).json()["result"]
    assert result["break_even_calls"] is None
    assert result["compile"] is False
    assert "never pays" in result["reason"]


def test_table_output():
    run = invoke("amortize", *WORKED, "--calls", "10000")
    assert run.exit_code == 0
    assert "6,000 calls" in run.stdout and "6,001" in run.stdout
    assert "Compile: it gains 2 s over 10,000 calls." in run.stdout
    assert "prediction" in run.stdout


def test_no_options_shows_help():
    run = invoke("amortize")
    assert run.exit_code == 0
    assert "C/(t_e - t_c)" in run.stdout and "Examples" in run.stdout


def test_help_shows_formula_and_example():
    run = invoke("amortize", "--help")
    assert run.exit_code == 0
    assert "n* = C/(t_e - t_c)" in run.stdout
    assert "infer-opt amortize --compile-cost 3s" in run.stdout


def test_buckets_json(buckets_csv):
    run = invoke("amortize", "--buckets", str(buckets_csv), "--json")
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/amortize-buckets"
    result = data["result"]
    assert [(b["bucket"], b["net_gain_s"], b["compile"]) for b in result["buckets"]] == [
        ("128", 5.0, True),
        ("256", 11.0, True),
        ("512", -18.0, False),
        ("2048", -60.4, False),
    ]
    assert result["buckets"][0]["break_even_calls"] == 40000
    assert result["buckets"][3]["break_even_calls"] is None
    assert result["total_net_gain_s"] == 16.0


def test_buckets_table(buckets_csv):
    run = invoke("amortize", "--buckets", str(buckets_csv))
    assert run.exit_code == 0
    assert "Compile 2 of 4 buckets" in run.stdout
    assert "27,777.8" in run.stdout


def test_buckets_from_a_length_sample(tmp_path):
    bounds = tmp_path / "bounds.csv"
    bounds.write_text("bucket,compile_s,saving_ms\n4,1,1\n8,1,1\n")
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("1\n3\n5\n8\n")
    run = invoke(
        "amortize", "--buckets", str(bounds), "--lengths", str(lengths), "--requests", "4000", "--json"
    )
    assert run.exit_code == 0, run.stderr
    result = run.json()["result"]
    assert [b["calls"] for b in result["buckets"]] == [2000, 2000]
    assert result["buckets"][0]["net_gain_s"] == pytest.approx(1.0)
    assert "lengths.txt" in result["calls_source"]


def test_length_sample_from_stdin(tmp_path):
    bounds = tmp_path / "bounds.csv"
    bounds.write_text("bucket,compile_s,saving_ms\n4,1,1\n8,1,1\n")
    run = invoke("amortize", "--buckets", str(bounds), "--lengths", "-", "--json", input="1\n2\n7\n")
    assert run.exit_code == 0, run.stderr
    assert [b["calls"] for b in run.json()["result"]["buckets"]] == [2, 1]


def test_writes_csv_markdown_and_plots(tmp_path, buckets_csv):
    one, many = tmp_path / "one.png", tmp_path / "many.png"
    csv, md = tmp_path / "a.csv", tmp_path / "a.md"
    run = invoke("amortize", *WORKED, "--calls", "10000", "--plot", str(one), "--csv", str(csv))
    assert run.exit_code == 0, run.stderr
    assert one.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert csv.read_text().splitlines()[0] == "label,calls,eager_total_s,compiled_total_s,net_gain_s"
    run = invoke("amortize", "--buckets", str(buckets_csv), "--plot", str(many), "--markdown", str(md))
    assert run.exit_code == 0, run.stderr
    assert many.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| 128 |" in md.read_text()


def test_saved_result_loads_back(tmp_path):
    target = tmp_path / "r.json"
    assert invoke("amortize", *WORKED, "--out", str(target)).exit_code == 0
    from infer_opt.results import load_result

    loaded = load_result(target)
    assert loaded.kind == "amortize" and loaded.result.break_even_calls == 6000


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--compile-cost", "-3s", "--eager", "2ms", "--compiled", "1ms"], ["--compile-cost", ">= 0"]),
        (["--compile-cost", "nan", "--eager", "2ms", "--compiled", "1ms"], ["--compile-cost", "NaN"]),
        (
            ["--compile-cost", "3s", "--eager", "2parsecs", "--compiled", "1ms"],
            ["--eager", "unknown duration unit"],
        ),
        (["--compile-cost", "3s", "--eager", "2ms", "--compiled", "-1ms"], ["--compiled"]),
        (["--compile-cost", "3s", "--eager", "2ms", "--compiled", "x"], ["--compiled", "'x'"]),
        (["--compile-cost", "3s", "--eager", "2ms"], ["--compiled", "missing"]),
        (["--eager", "2ms", "--compiled", "1ms"], ["--compile-cost", "missing"]),
        ([*WORKED, "--calls", "-5"], ["--calls"]),
        ([*WORKED, "--calls", "2.5"], ["--calls", "whole number"]),
        ([*WORKED, "--lengths", __file__], ["--lengths", "--buckets"]),
        (["--buckets", "does-not-exist.csv"], ["--buckets", "does not exist"]),
        ([*WORKED, "--plot", "x.svg"], ["--plot", ".png"]),
        (["--bogus"], ["--bogus"]),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needles):
    assert_one_line_error(invoke("amortize", *args), *needles)


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("bucket,compile_s,eager_ms,compiled_ms\na,1,2,1\n", ["b.csv", "missing column", "calls"]),
        ("bucket,compile_s,calls,saving_ms\na,1,2,1\nb,-4,2,1\n", ["b.csv line 3, column compile_s", "'-4'"]),
        ("bucket,compile_s,calls,saving_ms\na,1,x,1\n", ["b.csv line 2, column calls", "'x'"]),
        ("bucket,compile_s,calls,saving_ms\na,nan,2,1\n", ["b.csv line 2, column compile_s", "NaN"]),
        ("bucket,compile_s,calls,saving_ms\na,1,2\n", ["b.csv line 2", "expected 4 fields"]),
        ("bucket,compile_s,calls,saving_ms\n", ["b.csv", "no buckets"]),
    ],
)
def test_malformed_bucket_csv_is_one_line_exit_2(tmp_path, text, needles):
    path = tmp_path / "b.csv"
    path.write_text(text)
    assert_one_line_error(invoke("amortize", "--buckets", str(path)), *needles)


def test_bucket_file_with_one_shape_options_is_refused(buckets_csv):
    run = invoke("amortize", "--buckets", str(buckets_csv), "--eager", "2ms")
    assert_one_line_error(run, "--eager", "either --buckets")


def test_length_errors_are_one_line(tmp_path):
    bounds = tmp_path / "bounds.csv"
    bounds.write_text("bucket,compile_s,saving_ms\n4,1,1\n")
    lengths = tmp_path / "l.txt"
    lengths.write_text("1\n9\n12\n")
    assert_one_line_error(
        invoke("amortize", "--buckets", str(bounds), "--lengths", str(lengths)),
        "--lengths",
        "2 of 3 lengths",
        "max length 12",
    )
    lengths.write_text("1\n0\n")
    assert_one_line_error(
        invoke("amortize", "--buckets", str(bounds), "--lengths", str(lengths)), "l.txt line 2"
    )
    lengths.write_text("")
    assert_one_line_error(invoke("amortize", "--buckets", str(bounds), "--lengths", str(lengths)), "empty")
    assert_one_line_error(
        invoke("amortize", "--buckets", str(bounds), "--requests", "10"), "--requests", "--lengths"
    )
    with_calls = tmp_path / "calls.csv"
    with_calls.write_text("bucket,compile_s,calls,saving_ms\n4,1,3,1\n")
    lengths.write_text("1\n")
    assert_one_line_error(
        invoke("amortize", "--buckets", str(with_calls), "--lengths", str(lengths)), "--lengths", "not both"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["amortize", "--compile-cost", "3s", "--eager", "2ms", "--compiled", "1.5ms", "--calls", "10000"],
        ["amortize", "--compile-cost", "3s", "--eager", "2ms", "--compiled", "1.5ms", "--json"],
    ],
)
def test_calculator_does_not_import_heavy_modules(argv):
    assert heavy_modules_imported(argv) == []
