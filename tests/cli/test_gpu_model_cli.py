"""``infer-opt calibrate --from-trace`` and ``infer-opt validate --against`` on the command line."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.helpers import assert_one_line_error, heavy_modules_imported, invoke
from tests.trace.gpu_traces import MI300X, held_out_ops, training_ops, write_trace


@pytest.fixture
def traces(tmp_path):
    a = write_trace(tmp_path / "a.json", training_ops())
    b = write_trace(tmp_path / "b.json", training_ops(1.1))
    held = write_trace(tmp_path / "held.json", held_out_ops())
    return a, b, held


@pytest.fixture
def calibration(tmp_path, traces):
    a, b, _ = traces
    out = tmp_path / "cal.json"
    run = invoke("calibrate", "--from-trace", str(a), "--from-trace", str(b), "--out", str(out))
    assert run.exit_code == 0, run.stderr
    return out


def test_calibrate_from_traces_writes_a_calibration(calibration):
    data = json.loads(calibration.read_text())
    assert data["schema"] == "infer-opt/calibration"
    result = data["result"]
    assert result["source"] == "from 2 traces of H100 SXM"
    assert result["grid"] == "trace" and result["device_name"] == "H100 SXM"
    assert {f["family"] for f in result["families"]} >= {"gemm.nn", "add.t"}


def test_the_calibration_report_says_where_it_came_from(calibration):
    from infer_opt.reports.render import render
    from infer_opt.results import load_result

    text = render(load_result(calibration).result, "markdown")
    assert "from 2 traces of H100 SXM: a.json, b.json" in text
    assert "cuda — H100 SXM, bfloat16" in text and "thread(s)" not in text


def test_traces_after_from_trace_are_read_too(tmp_path, traces):
    """``--from-trace traces/*.json.gz``: the shell's glob gives the files after the first as
    arguments; they are read with it (typer refused them as extra arguments)."""
    a, b, _ = traces
    out = tmp_path / "glob.json"
    run = invoke("calibrate", "--from-trace", str(a), str(b), "--out", str(out))
    assert run.exit_code == 0, run.stderr
    assert json.loads(out.read_text())["result"]["source"] == "from 2 traces of H100 SXM"
    # a trace without --from-trace, or one missing, is one line naming it
    assert_one_line_error(invoke("calibrate", str(a)), "TRACE", "--from-trace")
    assert_one_line_error(invoke("calibrate", "--from-trace", str(a), str(tmp_path / "nope.json")), "TRACE")


def _unnamed_gpu_trace(path, ops):
    """A trace whose deviceProperties name no GPU, as ROCm writes an MI210's or an MI250 GCD's
    ("AMD Radeon Graphics", 104 CUs, 64 GiB: both fit)."""
    doc = json.loads(write_trace(path, ops).read_text())
    doc["deviceProperties"] = [
        {"id": 0, "name": "AMD Radeon Graphics", "numSms": 104, "warpSize": 64, "totalGlobalMem": 68702699520}
    ]
    path.write_text(json.dumps(doc))
    return path


def test_device_names_the_gpu_of_traces_that_do_not(tmp_path):
    a = _unnamed_gpu_trace(tmp_path / "a.json", training_ops())
    held = _unnamed_gpu_trace(tmp_path / "held.json", held_out_ops())
    # not identified: one line, with what fits and what to give
    assert_one_line_error(invoke("calibrate", "--from-trace", str(a)), "--device", "MI210 and MI250 (1 GCD)")
    out = tmp_path / "mi250.json"
    run = invoke("calibrate", "--from-trace", str(a), "--device", "mi250", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    assert json.loads(out.read_text())["result"]["source"] == "from 1 trace of MI250 (1 GCD)"
    run = invoke("validate", "--against", str(held), "--calibration", str(out), "--device", "mi250", "--json")
    assert run.exit_code == 0, run.stderr
    assert run.json()["result"]["tier"] == "target-calibrated"
    run = invoke("validate", "--against", str(held), "--calibration", str(out))
    assert_one_line_error(run, "--against", "--device")


def test_device_that_a_trace_contradicts_is_refused_naming_both(traces):
    run = invoke("calibrate", "--from-trace", str(traces[0]), "--device", "mi300x")
    assert_one_line_error(run, "--device", "MI300X", "H100 SXM")
    assert_one_line_error(invoke("calibrate", "--from-trace", str(traces[0]), "--device", "tpu9"), "--device")


def test_validate_against_a_trace_has_the_validate_keys(calibration, traces):
    run = invoke("validate", "--against", str(traces[2]), "--calibration", str(calibration), "--json")
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/validate-trace"
    result = data["result"]
    for key in ("op_mape", "op_p90_abs_rel_error", "small_op_mape", "step_mape", "tier", "worst_ops"):
        assert key in result
    assert result["tier"] == "target-calibrated"
    assert "from 2 traces of H100 SXM" in result["calibration"]["source"]


def test_validate_against_writes_a_parity_plot(calibration, traces, tmp_path):
    plot = tmp_path / "parity.png"
    run = invoke(
        "validate", "--against", str(traces[2]), "--calibration", str(calibration), "--plot", str(plot)
    )
    assert run.exit_code == 0, run.stderr
    assert plot.stat().st_size > 1000


def test_unseen_device_tier(calibration, tmp_path):
    mi = write_trace(tmp_path / "mi.json", held_out_ops(), device=MI300X)
    run = invoke(
        "validate", "--against", str(mi), "--calibration", str(calibration), "--unseen-device", "--json"
    )
    assert run.exit_code == 0, run.stderr
    assert run.json()["result"]["tier"] == "unseen-device"


def test_validate_against_loads_no_torch(calibration, traces):
    argv = ["validate", "--against", str(traces[2]), "--calibration", str(calibration), "--json"]
    assert "torch" not in heavy_modules_imported(argv)


# ---------------------------------------------------------------------------- bad input


def test_another_device_is_refused_naming_both(calibration, tmp_path):
    mi = write_trace(tmp_path / "mi.json", held_out_ops(), device=MI300X)
    run = invoke("validate", "--against", str(mi), "--calibration", str(calibration))
    assert_one_line_error(run, "--against", "MI300X", "H100 SXM", "--unseen-device")


def test_a_cpu_calibration_is_refused(tmp_path, traces):
    from infer_opt.profilers import calibration as cal
    from tests.profilers.synthetic_calibration import synthetic_calibration

    path = cal.save_calibration(synthetic_calibration(families=True), tmp_path / "cpu.json")
    run = invoke("validate", "--against", str(traces[2]), "--calibration", str(path))
    assert_one_line_error(run, "--calibration", "H100 SXM", "calibrate --from-trace")


def test_mixed_devices_are_refused(tmp_path, traces):
    mi = write_trace(tmp_path / "mi.json", training_ops(), device=MI300X)
    run = invoke("calibrate", "--from-trace", str(traces[0]), "--from-trace", str(mi))
    assert_one_line_error(run, "--from-trace", "MI300X", "H100 SXM")


def test_a_trace_without_shaped_ops_is_refused(tmp_path):
    path = tmp_path / "noshapes.json"
    doc = json.loads(write_trace(path, training_ops()).read_text())
    for e in doc["traceEvents"]:
        e["args"].pop("Input Dims", None)
    path.write_text(json.dumps(doc))
    run = invoke("calibrate", "--from-trace", str(path))
    assert_one_line_error(run, "--from-trace", "nothing to calibrate from", "record_shapes")


@pytest.mark.parametrize("content", [b"", b"{not json", gzip.compress(b"")[:5]])
def test_empty_or_corrupt_traces_are_refused(tmp_path, content):
    path = tmp_path / ("bad.json.gz" if content[:2] == b"\x1f\x8b" else "bad.json")
    path.write_bytes(content)
    assert_one_line_error(invoke("calibrate", "--from-trace", str(path)), "--from-trace", "bad.json")


def test_corrupt_held_out_trace_is_refused(calibration, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("[1, 2")
    run = invoke("validate", "--against", str(path), "--calibration", str(calibration))
    assert_one_line_error(run, "--against", "bad.json")


def test_a_corrupt_calibration_is_refused(tmp_path, traces):
    path = tmp_path / "cal.json"
    path.write_text("{")
    run = invoke("validate", "--against", str(traces[2]), "--calibration", str(path))
    assert_one_line_error(run, "--calibration", "cal.json")


def test_against_needs_a_calibration(traces):
    assert_one_line_error(invoke("validate", "--against", str(traces[2])), "--calibration", "--from-trace")


def test_unseen_device_needs_against():
    assert_one_line_error(invoke("validate", "--unseen-device"), "--unseen-device", "--against")


def test_options_from_trace_does_not_use_are_refused(traces):
    run = invoke("calibrate", "--from-trace", str(traces[0]), "--only", "linear")
    assert_one_line_error(run, "--only", "--from-trace")
    run = invoke("validate", "--against", str(traces[2]), "--grid", "batch=1,2")
    assert_one_line_error(run, "--grid", "--against")


@pytest.mark.parametrize("command", ["validate"])
def test_a_trace_calibration_is_refused_for_a_model_step(calibration, command):
    run = invoke(command, "tiny", "--calibration", str(calibration))
    assert_one_line_error(run, "--calibration", "built from GPU traces", "validate --against")


def test_predict_a_model_step_from_a_trace_calibration(calibration):
    run = invoke("predict", "tiny", "--calibration", str(calibration), "--json")
    assert run.exit_code == 0, run.stderr
    data = run.json()["result"]
    assert data["calibration"]["device_name"] == "H100 SXM"
    codes = {w["code"] for w in data["warnings"]}
    # a calibration with per-family issue costs replays the step (older ones: the serial sum)
    assert "gpu_trace_replay" in codes and "calibration_no_host_term" not in codes
    assert data["step_time_s"] > 0 and data["bound"] in ("host", "device")


def test_a_gpu_prediction_and_its_calibration_say_no_thread_count(calibration, tmp_path):
    """A GPU's traces have no CPU thread count; and ``validate MODEL`` (which measures this
    machine) is not how such a prediction is checked: ``validate --against`` is."""
    run = invoke("predict", "tiny", "--calibration", str(calibration), "--format", "markdown")
    assert run.exit_code == 0, run.stderr
    assert "thread(s)" not in run.stdout and "H100 SXM, " in run.stdout
    assert "validate --against TRACE" in run.stdout and "docs/gpu_model.md" in run.stdout
    out = tmp_path / "r.md"
    shown = invoke("report", str(calibration), "-o", str(out), "--no-plots")
    assert shown.exit_code == 0, shown.stderr
    text = out.read_text()
    assert "thread(s)" not in text and "bfloat16, grid trace" in text


def test_a_held_out_trace_without_shaped_ops_is_refused(calibration, tmp_path):
    path = tmp_path / "noshapes.json"
    doc = json.loads(write_trace(path, held_out_ops()).read_text())
    for e in doc["traceEvents"]:
        e["args"].pop("Input Dims", None)
    path.write_text(json.dumps(doc))
    run = invoke("validate", "--against", str(path), "--calibration", str(calibration))
    assert_one_line_error(run, "--against", "nothing to validate against", "record_shapes")


@pytest.mark.parametrize(("spelling", "refused"), [("c10::Float8_e4m3fn", True), ("c10::NoSuchType", False)])
def test_a_trace_dtype_predict_cannot_run_is_refused_in_one_line(tmp_path, spelling, refused):
    """Issue 42: an FP8 trace calibrated as ``float8`` made ``predict`` die on ``torch.float8``; an
    unknown ``Input type`` became the calibration's dtype. FP8 is refused by predict, naming the
    calibration; an unknown word is no dtype of the calibration (it stays bfloat16)."""
    paths = []
    for name, scale in (("a", 1.0), ("b", 1.1)):
        path = write_trace(tmp_path / f"{name}.json", training_ops(scale))
        path.write_text(path.read_text().replace("c10::BFloat16", spelling))
        paths.append(path)
    out = tmp_path / "cal.json"
    run = invoke("calibrate", "--from-trace", str(paths[0]), "--from-trace", str(paths[1]), "--out", str(out))
    if run.exit_code != 0:  # no dtype at all: refused in one line is fine too
        assert_one_line_error(run)
        return
    dtype = json.loads(out.read_text())["result"]["dtype"]
    assert dtype in (("float8",) if refused else ("float32", "bfloat16", "float16", ""))
    run = invoke("predict", "tiny", "--calibration", str(out), "--json")
    if refused:
        assert_one_line_error(run, "--calibration", "float8")
    else:
        assert run.exit_code in (0, 2) and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["tiny"], "MODEL"),
        (["--reps", "3"], "--reps"),
        (["--warmup", "1"], "--warmup"),
        (["--batch", "4"], "--batch"),
        (["--dtype", "float32"], "--dtype"),
    ],
)
def test_validate_against_refuses_what_it_would_ignore(calibration, traces, extra, named):
    """Issue 42: ``validate --against``'s MODEL and --reps were accepted and ignored."""
    run = invoke("validate", *extra, "--against", str(traces[2]), "--calibration", str(calibration))
    assert_one_line_error(run, named, "not used with --against")


def test_a_second_against_is_refused_not_dropped(calibration, traces):
    run = invoke(
        "validate",
        "--against",
        str(traces[0]),
        "--against",
        str(traces[2]),
        "--calibration",
        str(calibration),
    )
    assert_one_line_error(run, "--against", "one trace")


def test_unseen_device_with_a_calibration_of_the_same_gpu_is_refused(calibration, traces):
    run = invoke(
        "validate", "--against", str(traces[2]), "--calibration", str(calibration), "--unseen-device"
    )
    assert_one_line_error(run, "--unseen-device", "H100 SXM", "nothing to scale")


def test_validate_against_a_trace_the_calibration_was_built_from_says_so(calibration, traces):
    """Issue 42: "Operators MAPE 0.0%" beside a note that the trace was held out."""
    run = invoke("validate", "--against", str(traces[0]), "--calibration", str(calibration), "--json")
    assert run.exit_code == 0, run.stderr
    result = run.json()["result"]
    assert result["in_calibration"] is True
    assert "validate_trace_in_calibration" in [w["code"] for w in result["warnings"]]
    text = invoke("validate", "--against", str(traces[0]), "--calibration", str(calibration)).stdout
    assert "among those the calibration was built from" in text and "was not among" not in text
    held = invoke("validate", "--against", str(traces[2]), "--calibration", str(calibration), "--json")
    assert held.json()["result"]["in_calibration"] is False


@pytest.mark.parametrize(
    ("extra", "named"), [(["--threads", "2"], "--threads"), (["--device", "cpu"], "--device")]
)
def test_predict_refuses_cpu_options_with_a_gpu_calibration(calibration, extra, named):
    """Issue 42: an H100 step "predicted" for the CPU without a word (--threads, --device cpu)."""
    run = invoke("predict", "tiny", "--calibration", str(calibration), *extra)
    assert_one_line_error(run, named, "H100 SXM")


def test_validate_knows_the_calibrations_own_traces_by_identity(calibration, traces, tmp_path):
    """Issue 42: validating against a trace the calibration was built from said it "was not
    among those the calibration was built from" (names compared). Now by the trace's events:
    a renamed, gzipped copy is known; another trace of the same name is not."""
    import gzip

    a, _, held = traces
    copy = tmp_path / "copy" / "renamed.json.gz"
    copy.parent.mkdir()
    copy.write_bytes(gzip.compress(a.read_bytes()))
    same_name = tmp_path / "other" / "a.json"
    same_name.parent.mkdir()
    same_name.write_bytes(held.read_bytes())
    for path, among in ((copy, True), (same_name, False), (held, False)):
        run = invoke("validate", "--against", str(path), "--calibration", str(calibration), "--json")
        assert run.exit_code == 0, run.stderr
        result = run.json()["result"]
        assert result["in_calibration"] is among, path
        assert any(w["code"] == "validate_trace_in_calibration" for w in result["warnings"]) is among


def test_one_trace_given_twice_to_calibrate_is_refused(traces, tmp_path):
    import gzip

    a, _, _ = traces
    again = tmp_path / "again.json.gz"
    again.write_bytes(gzip.compress(a.read_bytes()))
    run = invoke(
        "calibrate", "--from-trace", str(a), "--from-trace", str(again), "--out", str(tmp_path / "c.json")
    )
    assert_one_line_error(run, "--from-trace", "the same trace as")
    assert not (tmp_path / "c.json").exists()
