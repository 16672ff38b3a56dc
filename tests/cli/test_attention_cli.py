from __future__ import annotations

import pytest

from infer_opt.results import load_result
from tests.helpers import assert_one_line_error, heavy_modules_imported, invoke

SHAPE = ["--tq", "8192", "--tk", "8192", "--heads", "32", "--batch", "1", "--head-dim", "128"]


def test_memory_worked_example_json():
    run = invoke("attention", "memory", *SHAPE, "--dtype", "float16", "--json")
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/attention-memory"
    r = data["result"]
    assert r["score_elements"] == 67_108_864
    assert r["score_bytes_per_head"] == 128 * 2**20
    assert r["score_bytes_total"] == 4 * 2**30
    qkvo = 4 * 32 * 8192 * 128 * 2
    assert r["traffic_tiled_bytes"] == qkvo
    assert r["traffic_explicit_bytes"] == qkvo + 4 * 4 * 2**30
    assert r["flops"] == 4 * 32 * 8192 * 8192 * 128


def test_memory_table_output():
    run = invoke("attention", "memory", *SHAPE)
    assert run.exit_code == 0
    assert "67,108,864" in run.stdout
    assert "128 MiB" in run.stdout and "4 GiB" in run.stdout
    assert "softmax not included" in run.stdout


def test_memory_causal_states_its_assumption():
    run = invoke("attention", "memory", *SHAPE, "--causal")
    assert run.exit_code == 0
    assert "skips fully masked blocks" in run.stdout
    assert "still materialises" in run.stdout
    full = invoke("attention", "memory", *SHAPE, "--json").json()["result"]
    causal = invoke("attention", "memory", *SHAPE, "--causal", "--json").json()["result"]
    assert causal["flops"] == pytest.approx(full["flops"] / 2, rel=1e-3)
    assert causal["score_bytes_total"] == full["score_bytes_total"]


@pytest.mark.parametrize(
    ("dtype", "per_head"), [("float32", 256), ("bfloat16", 128), ("fp8", 64), ("4", 256)]
)
def test_memory_dtypes(dtype, per_head):
    r = invoke("attention", "memory", *SHAPE, "--dtype", dtype, "--json").json()["result"]
    assert r["score_bytes_per_head"] == per_head * 2**20


def test_memory_round_trips_through_a_file(tmp_path):
    out = tmp_path / "m.json"
    assert invoke("attention", "memory", *SHAPE, "--out", str(out)).exit_code == 0
    loaded = load_result(out)
    assert loaded.kind == "attention-memory"
    assert loaded.result.traffic[0].tiled_bytes is None
    assert loaded.result.score_elements == 67_108_864


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--tq", "0", "--tk", "8", "--heads", "2", "--head-dim", "4"], ["--tq", "[1, 1073741824]"]),
        (["--tq", "8", "--tk", "8", "--heads", "2.5", "--head-dim", "4"], ["--heads", "whole number"]),
        (["--tq", "8", "--tk", "8", "--heads", "2", "--head-dim", "-4"], ["--head-dim"]),
        (["--tq", "8", "--tk", "8", "--heads", "2", "--head-dim", "4", "--batch", "0"], ["--batch"]),
        (
            ["--tq", "8", "--tk", "8", "--heads", "2", "--head-dim", "4", "--dtype", "int3"],
            ["--dtype", "float16"],
        ),
        (["--tq", "8", "--tk", "8", "--heads", "2", "--head-dim", "4", "--dtype", "-2"], ["--dtype"]),
        (
            ["--tq", "16", "--tk", "8", "--heads", "2", "--head-dim", "4", "--causal"],
            ["--tq", "T_q must be <="],
        ),
        (["--tk", "8", "--heads", "2", "--head-dim", "4"], ["--tq"]),
    ],
)
def test_memory_bad_input(args, needles):
    assert_one_line_error(invoke("attention", "memory", *args), *needles)


def test_window_bound():
    run = invoke("attention", "window", "--dropped-mass", "0.01", "--value-norm", "4", "--json")
    assert run.exit_code == 0
    r = run.json()["result"]
    assert r["bound"] == pytest.approx(0.08)
    table = invoke("attention", "window", "--dropped-mass", "0.01", "--value-norm", "4")
    assert "0.08" in table.stdout and "upper bound" in table.stdout


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--dropped-mass", "1", "--value-norm", "4"], ["--dropped-mass", "[0, 1)"]),
        (["--dropped-mass", "1.5", "--value-norm", "4"], ["--dropped-mass"]),
        (["--dropped-mass", "-0.1", "--value-norm", "4"], ["--dropped-mass"]),
        (["--dropped-mass", "0.1", "--value-norm", "-4"], ["--value-norm"]),
        (["--dropped-mass", "0.1", "--value-norm", "inf"], ["--value-norm"]),
        (["--dropped-mass", "0.1"], ["--value-norm"]),
    ],
)
def test_window_bad_input(args, needles):
    assert_one_line_error(invoke("attention", "window", *args), *needles)


def test_attention_commands_do_not_import_heavy_modules():
    argvs = [
        ["attention", "memory", *SHAPE, "--causal"],
        ["attention", "memory", *SHAPE, "--json"],
        ["attention", "window", "--dropped-mass", "0.01", "--value-norm", "4"],
    ]
    assert heavy_modules_imported(*argvs) == []
