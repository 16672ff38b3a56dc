"""``infer-opt calibrate``, ``predict`` and ``validate`` on the command line."""

from __future__ import annotations

import pytest
import torch

from infer_opt.profilers import calibration as cal
from tests.helpers import assert_one_line_error, invoke
from tests.profilers.synthetic_calibration import local_calibration, synthetic_calibration


@pytest.fixture(autouse=True)
def _one_thread_and_private_cache(tmp_path, monkeypatch):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setenv("INFER_OPT_CACHE", str(tmp_path / "cache"))
    yield
    torch.set_num_threads(before)


@pytest.fixture
def calibration_file(tmp_path):
    return str(cal.save_calibration(synthetic_calibration(families=True), tmp_path / "cal.json"))


def test_predict_json_has_the_issue_keys(calibration_file):
    run = invoke(
        "predict",
        "tiny",
        "--mode",
        "generate",
        "--new-tokens",
        "3",
        "--calibration",
        calibration_file,
        "--json",
    )
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/predict"
    result = data["result"]
    for key in (
        "step_time_s",
        "tokens_per_s",
        "flops",
        "bytes",
        "ops",
        "categories",
        "calibration",
        "ttft_s",
        "tpot_s",
    ):
        assert key in result
    assert result["calibration"]["source"] == calibration_file
    assert result["ttft_s"] > result["tpot_s"] > 0
    assert {w["code"] for w in data["warnings"]} == {"prediction_extrapolated"}


def test_predict_sweep_table_and_plot(calibration_file, tmp_path):
    png = tmp_path / "sweep.png"
    args = ("predict", "tiny", "--mode", "decode", "--context", "40", "--sweep", "batch=1,4,16")
    run = invoke(*args, "--calibration", calibration_file, "--plot", str(png))
    assert run.exit_code == 0, run.stderr
    assert "Sweep over batch (predicted)" in run.stdout and "compute-bound" in run.stdout
    assert png.exists() and png.stat().st_size > 0


def test_predict_uses_the_cached_calibration_and_says_how_to_make_one(tmp_path):
    assert_one_line_error(invoke("predict", "tiny", "--threads", "1"), "run infer-opt calibrate")
    assert cal.cache_calibration(local_calibration()).saved
    run = invoke("predict", "tiny", "--threads", "1", "--json")
    assert run.exit_code == 0, run.stderr
    assert run.json()["result"]["calibration"]["source"].endswith(".json")


def test_predict_bad_input_is_one_line(calibration_file):
    assert_one_line_error(
        invoke("predict", "tiny", "--calibration", calibration_file, "--sweep", "width=1,2"), "--sweep"
    )
    assert_one_line_error(
        invoke("predict", "tiny", "--calibration", calibration_file, "--dtype", "bfloat16"),
        "--dtype",
        "calibration is for float32",
    )
    assert_one_line_error(invoke("predict", "tiny", "--calibration", "/no/such/file.json"), "--calibration")
    # a parameter that does not change the step: every value would predict (measure) the same
    decode = invoke(
        "predict", "tiny", "--calibration", calibration_file, "--mode", "decode", "--sweep", "seq-len=4,8"
    )
    assert_one_line_error(decode, "--sweep", "seq-len does not change a decode step", "context=")
    grid = ("--mode", "decode", "--grid", "seq-len=4", "--grid", "batch=1,,2")
    assert_one_line_error(invoke("validate", "tiny", "--calibration", calibration_file, *grid[:4]), "--grid")
    assert_one_line_error(
        invoke("validate", "tiny", "--calibration", calibration_file, *grid[4:]), "empty item"
    )
    # one swept parameter: a second --sweep (another parameter or the same) is refused, not dropped
    for second in ("batch=8", "seq-len=16,32"):
        args = ("--sweep", "batch=1,2", "--sweep", second)
        twice = invoke("predict", "tiny", "--calibration", calibration_file, *args)
        assert_one_line_error(twice, "--sweep", "given more than once")


def test_validate_reports_errors_and_writes_the_parity_plot(calibration_file, tmp_path):
    png = tmp_path / "parity.png"
    run = invoke(
        "validate", "tiny", "--calibration", calibration_file, "--grid", "seq-len=24", "--reps", "2",
        "--warmup", "1", "--json", "--plot", str(png),
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    result = run.json()["result"]
    for key in (
        "points",
        "step_mape",
        "step_p90_abs_rel_error",
        "op_mape",
        "op_p90_abs_rel_error",
        "small_op_mape",
    ):
        assert key in result
    (point,) = result["points"]
    assert {"batch", "seq_len", "context", "mode", "measured_s", "predicted_s", "rel_error"} <= set(point)
    assert point["rel_error"] == pytest.approx(
        (point["predicted_s"] - point["measured_s"]) / point["measured_s"]
    )
    assert png.exists()


@pytest.mark.parametrize(
    ("mode", "given", "ignored"),
    [
        ("decode", ("--seq-len", "64", "--new-tokens", "3"), ["--seq-len", "--new-tokens"]),
        ("generate", ("--context", "64", "--seq-len", "16"), ["--context"]),
        ("prefill", ("--context", "64", "--new-tokens", "3"), ["--context", "--new-tokens"]),
        ("prefill", ("--seq-len", "64", "--batch", "2"), []),
        ("decode", (), []),  # the defaults are not the user's
    ],
)
def test_a_shape_option_the_mode_does_not_read_is_said_to_be_ignored(calibration_file, mode, given, ignored):
    run = invoke("predict", "tiny", "--calibration", calibration_file, "--mode", mode, *given, "--json")
    assert run.exit_code == 0, run.stderr
    said = [w["values"]["option"] for w in run.json()["warnings"] if w["code"] == "option_ignored"]
    assert said == ignored


def test_validate_says_a_shape_option_its_grid_replaces_is_ignored(calibration_file):
    args = ("validate", "tiny", "--calibration", calibration_file, "--grid", "seq-len=24", "--reps", "2")
    run = invoke(*args, "--warmup", "1", "--seq-len", "99", "--batch", "1", "--json")
    assert run.exit_code == 0, run.stderr
    said = [w for w in run.json()["warnings"] if w["code"] == "option_overridden"]
    assert [w["values"]["option"] for w in said] == ["--seq-len"] and "--grid seq-len=" in said[0]["message"]
    assert [p["seq_len"] for p in run.json()["result"]["points"]] == [24]


def test_validate_measures_at_the_calibrations_thread_count_unless_told(calibration_file):
    """The calibration was made at one thread: validate measures at one, and says so when
    --threads asks for another count."""
    from infer_opt.profilers.device import available_cpus

    args = ("validate", "tiny", "--calibration", calibration_file, "--grid", "seq-len=24", "--reps", "2")
    run = invoke(*args, "--warmup", "1", "--json")
    assert run.exit_code == 0, run.stderr
    assert run.json()["result"]["threads"] == 1
    assert "validation_threads_differ" not in [w["code"] for w in run.json()["warnings"]]
    if available_cpus() >= 2:
        other = invoke(*args, "--warmup", "1", "--threads", "2", "--json")
        assert other.json()["result"]["threads"] == 2
        (said,) = [w for w in other.json()["warnings"] if w["code"] == "validation_threads_differ"]
        assert said["values"] == {"threads": 2, "calibrated": 1} and "--threads 1" in said["message"]


def test_validate_passes_put_the_noise_floor_beside_the_errors(calibration_file):
    run = invoke(
        "validate", "tiny", "--calibration", calibration_file, "--grid", "seq-len=24", "--reps", "2",
        "--warmup", "1", "--passes", "2", "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    result = run.json()["result"]
    assert result["passes"] == 2
    (point,) = result["points"]
    assert len(point["pass_measured_s"]) == 2
    assert point["measured_s"] == pytest.approx(sum(point["pass_measured_s"]) / 2)
    assert {"prefill", "operators", "small operators", "host term"} <= set(result["noise"])
    assert result["noise"]["prefill"]["n"] == 1
    shown = invoke(
        "validate", "tiny", "--calibration", calibration_file, "--grid", "seq-len=24", "--reps", "2",
        "--warmup", "1", "--passes", "2",
    )  # fmt: skip
    assert "Noise floor" in shown.stdout and "Between" in shown.stdout


def test_validate_refuses_a_grid_parameter_twice(calibration_file):
    run = invoke(
        "validate", "tiny", "--calibration", calibration_file, "--grid", "batch=1", "--grid", "batch=2"
    )
    assert_one_line_error(run, "--grid")


def test_calibrate_smoke_run_saves_to_the_cache_and_out(tmp_path):
    out = tmp_path / "c.json"
    run = invoke(
        "calibrate", "--threads", "1", "--shapes", "tiny", "--only", "views", "--reps", "3", "--out", str(out)
    )
    assert run.exit_code == 0, run.stderr
    assert out.exists() and cal.cache_path("cpu", torch.float32).exists()
    assert "Operator families" in run.stdout
    resumed = invoke(
        "calibrate", "--threads", "1", "--shapes", "tiny", "--only", "views", "--continue", "--json"
    )
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.json()["result"]["groups_done"] == ["views"]
    assert "calibration_nothing_to_resume" not in [w["code"] for w in resumed.json()["warnings"]]
    # continuing the saved tiny run as a standard one would mix two grids in one file
    mixed = invoke("calibrate", "--threads", "1", "--only", "views", "--continue")
    assert_one_line_error(mixed, "--continue", "tiny grid", "--shapes tiny")


def test_calibrate_resume_with_nothing_saved_says_it_starts_anew(tmp_path):
    out = tmp_path / "new.json"
    args = ("calibrate", "--threads", "1", "--shapes", "tiny", "--only", "views", "--reps", "3", "--continue")
    run = invoke(*args, "--out", str(out), "--json")
    assert run.exit_code == 0, run.stderr
    (said,) = [w for w in run.json()["warnings"] if w["code"] == "calibration_nothing_to_resume"]
    assert "new calibration" in said["message"] and out.exists()


def test_calibrate_only_measures_groups_again_in_the_cached_calibration_of_the_same_grid(tmp_path):
    """--only without --continue must not replace a complete cached calibration by a partial one:
    the named groups are measured again inside it, and a run of another grid is not cached."""
    from dataclasses import replace

    from infer_opt.cost_models import op_model
    from infer_opt.results.calibration import GridPoint

    path = cal.cache_path("cpu", torch.float32)
    path.parent.mkdir(parents=True)
    base = replace(
        local_calibration(), grid="tiny", groups_done=(*cal.calibration_cases.GROUPS, "host"), complete=True
    )
    view = op_model.fit_family("view.view", "hot", (), [GridPoint((), 1.0, 0.0, 0.0, 0.0)])
    cal.save_calibration(replace(base, families=(*base.families, view)), path)
    run = invoke(
        "calibrate", "--threads", "1", "--shapes", "tiny", "--only", "views", "--reps", "3", "--json"
    )
    assert run.exit_code == 0, run.stderr
    cached = cal.load_calibration(path)
    assert cached.complete and set(cached.groups_done) == {*cal.calibration_cases.GROUPS, "host"}
    families = cached.family_map()
    assert {f.key for f in base.families} <= set(families)  # the other groups' families are kept
    assert families["view.view@hot"].points[0].time_s < 1e-3  # measured again: replaced, not merged
    other = invoke("calibrate", "--threads", "1", "--shapes", "standard", "--only", "views", "--reps", "3")
    assert other.exit_code == 0, other.stderr
    assert "not cached" in other.stderr and cal.load_calibration(path).grid == "tiny"


def test_calibrate_unknown_group_is_one_line():
    assert_one_line_error(invoke("calibrate", "--only", "everything"), "--only")


# ---------------------------------------------------------------------------- --tp N


@pytest.fixture
def comm_file(tmp_path):
    from infer_opt.results import save_result
    from tests.reports.fixtures import fixture

    comm = fixture("comm")
    assert comm.world_size == 2
    return str(save_result(tmp_path / "comm.json", comm))


def test_predict_tp_is_one_rank_compute_plus_the_collectives_of_the_split(calibration_file, comm_file):
    from infer_opt.profilers.models import BUILTIN_CONFIGS

    args = ["predict", "tiny", "--seq-len", "16", "--calibration", calibration_file, "--json"]
    single = invoke(*args).json()["result"]
    run = invoke(*args, "--tp", "2", "--comm", comm_file)
    assert run.exit_code == 0, run.stderr
    result = run.json()["result"]
    assert result["step_time_s"] == pytest.approx(single["step_time_s"])  # the single-device step as before
    tp = result["tensor_parallel"]
    config = BUILTIN_CONFIGS["tiny"]
    (all_reduce,) = tp["collectives"]
    # Megatron: two all_reduces of B·T·d activations per layer (after attention-out, after MLP-down)
    assert all_reduce["collective"] == "all_reduce" and all_reduce["count"] == 2 * config.n_layers
    assert all_reduce["bytes"] == 1 * 16 * config.d_model * 4
    assert tp["step_s"] == pytest.approx(tp["compute_s"] + tp["communication_s"])
    assert 0 < tp["compute_s"] < single["step_time_s"]  # half the heads and MLP width per rank
    assert tp["speedup"] == pytest.approx(single["step_time_s"] / tp["step_s"])
    table = invoke(*args[:-1], "--tp", "2", "--comm", comm_file)
    assert "Tensor-parallel (2 ranks)" in table.stdout and "Collectives of the 2-rank split" in table.stdout


def test_predict_tp_refuses_a_missing_or_mismatched_comm_sweep(calibration_file, comm_file):
    base = ["predict", "tiny", "--calibration", calibration_file]
    assert_one_line_error(invoke(*base, "--tp", "2"), "--tp", "infer-opt comm --nproc 2")
    assert_one_line_error(invoke(*base, "--tp", "3", "--comm", comm_file), "--comm", "over 2 ranks")
    wrong_kind = invoke(*base, "--tp", "2", "--comm", calibration_file)
    assert_one_line_error(wrong_kind, "--comm", "expected a comm sweep")
