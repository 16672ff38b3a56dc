"""Ctrl-C keeps what finished (issue 33, class 6): ``profile --runs N`` keeps its finished runs,
``validate`` its finished points, ``speculative run --sweep-k`` its finished k, as ``kernels``
keeps its cases: shown, written to ``--out``, exit 130."""

from __future__ import annotations

import json

import pytest

from tests.helpers import invoke

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def fit(tmp_path):
    """A roofline fit file for this machine at one thread (no calibration run in the test)."""
    from infer_opt.profilers.roofline_sweep import save_fit
    from tests.helpers import usable_fit

    return str(save_fit(usable_fit(), tmp_path / "fit.json"))


@pytest.fixture
def ctrl_c_in_second_run(monkeypatch):
    """Ctrl-C when the second run starts timing: the first chunk of each run warms up
    ``--warmup 2`` times, the later chunks once, the cold call not at all."""
    from infer_opt.profilers import timing

    real = timing.measure
    starts = []

    def measure(*args, **kwargs):
        if kwargs.get("warmup") == 2:
            starts.append(1)
            if len(starts) == 2:
                raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(timing, "measure", measure)


def test_ctrl_c_in_profile_runs_keeps_the_finished_runs(tmp_path, fit, ctrl_c_in_second_run):
    out = tmp_path / "p.json"
    run = invoke(
        "profile", "tiny", "--runs", "3", "--warmup", "2", "--reps", "4", "--threads", "1",
        "--roofline", fit, "--json", "--out", str(out),
    )  # fmt: skip
    assert run.exit_code == 130, run.stderr
    assert "interrupted after 1 of 3 runs: those runs are kept in" in run.stderr
    shown = json.loads(run.stdout)["result"]
    saved = json.loads(out.read_text())["result"]
    for result in (shown, saved):
        assert result["runs"] == 1 and result["step"]["median_s"] > 0
        assert [w["code"] for w in result["warnings"]].count("runs_interrupted") == 1


def test_ctrl_c_in_the_only_run_is_still_an_interrupt(monkeypatch, fit):
    from infer_opt.profilers import timing

    def measure(*_args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(timing, "measure", measure)
    run = invoke("profile", "tiny", "--reps", "4", "--threads", "1", "--roofline", fit)
    assert run.exit_code == 130 and "Traceback" not in run.stderr


@pytest.fixture
def calibration_file(tmp_path):
    from infer_opt.results import save_result
    from tests.profilers.synthetic_calibration import local_calibration

    return str(save_result(tmp_path / "cal.json", local_calibration()))


def _ctrl_c_at_call(monkeypatch, target: str, call: int) -> None:
    import importlib

    module_name, _, attr = target.rpartition(".")
    module = importlib.import_module(module_name)
    real = getattr(module, attr)
    calls = []

    def wrapped(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(module, attr, wrapped)


def test_ctrl_c_in_validate_keeps_the_points_measured(tmp_path, monkeypatch, calibration_file):
    _ctrl_c_at_call(monkeypatch, "infer_opt.profilers.validate._measure", 3)
    out = tmp_path / "v.json"
    run = invoke(
        "validate", "tiny", "--calibration", calibration_file, "--grid", "batch=1,2,4", "--seq-len", "16",
        "--reps", "3", "--warmup", "1", "--json", "--out", str(out),
    )  # fmt: skip
    assert run.exit_code == 130, run.stderr
    assert "interrupted after 2 of 3 grid points" in run.stderr
    for result in (json.loads(run.stdout)["result"], json.loads(out.read_text())["result"]):
        assert [p["batch"] for p in result["points"]] == [1, 2]
        assert "validate_interrupted" in [w["code"] for w in result["warnings"]]


def test_ctrl_c_in_a_later_validate_pass_keeps_the_passes_done(monkeypatch, calibration_file):
    _ctrl_c_at_call(monkeypatch, "infer_opt.profilers.validate._measure", 4)
    run = invoke(
        "validate", "tiny", "--calibration", calibration_file, "--grid", "batch=1,2", "--seq-len", "16",
        "--reps", "3", "--warmup", "1", "--passes", "3", "--json",
    )  # fmt: skip
    assert run.exit_code == 130, run.stderr
    result = json.loads(run.stdout)["result"]
    assert result["passes"] == 1 and len(result["points"]) == 2


def test_ctrl_c_before_any_validate_point_is_a_plain_interrupt(monkeypatch, calibration_file):
    _ctrl_c_at_call(monkeypatch, "infer_opt.profilers.validate._measure", 1)
    run = invoke("validate", "tiny", "--calibration", calibration_file, "--seq-len", "16", "--reps", "3")
    assert run.exit_code == 130 and run.stdout == ""


def test_ctrl_c_in_speculative_run_sweep_keeps_the_whole_rounds(tmp_path, monkeypatch):
    from infer_opt.profilers import timing

    real = timing.measure
    plain = []

    def measure(fn, *args, **kwargs):
        if getattr(fn, "name", "") == "plain decoding":
            plain.append(1)
            if len(plain) == 3:  # in the third round
                raise KeyboardInterrupt
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(timing, "measure", measure)
    out = tmp_path / "s.json"
    run = invoke(
        "speculative", "run", "--target", "tiny", "--draft", "self:1", "--sweep-k", "1,2", "--reps", "4",
        "--new-tokens", "4", "--prompt-len", "4", "--cost-reps", "4", "--threads", "1", "--json",
        "--out", str(out),
    )  # fmt: skip
    assert run.exit_code == 130, run.stderr
    assert "interrupted after 2 of 4 rounds" in run.stderr
    for result in (json.loads(run.stdout)["result"], json.loads(out.read_text())["result"]):
        assert result["reps"] == 2 and [p["k"] for p in result["points"]] == [1, 2]
        assert result["plain_time"]["n"] == 2
        assert "spec_run_interrupted" in [w["code"] for w in result["warnings"]]


@pytest.mark.parametrize(
    ("target", "args"),
    [
        ("infer_opt.trace.analyze.analyze", ("trace", "tests/trace/fixtures/model_step.json")),
        ("infer_opt.trace.reader.read_trace", ("trace", "tests/trace/fixtures/model_step.json", "--json")),
    ],
)
def test_ctrl_c_in_a_command_without_its_own_handler_says_aborted(monkeypatch, target, args):
    """Issue 42: typer turned the interrupt into a silent exit 130 before the app's handler."""
    import importlib

    module, name = target.rsplit(".", 1)

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module(module), name, interrupted)
    if module == "infer_opt.trace.analyze":
        import infer_opt.cli.trace as cli_trace

        if hasattr(cli_trace, name):
            monkeypatch.setattr(cli_trace, name, interrupted)
    run = invoke(*args)
    assert run.exit_code == 130
    assert run.stderr.strip().splitlines()[-1] == "Aborted." and "Traceback" not in run.stderr


def _ctrl_c_while_showing(monkeypatch) -> None:
    """A real SIGINT while the finished result goes to stdout (before its --out file)."""
    import os
    import signal

    from infer_opt.cli import output

    real = output._stdout

    def stdout(text):
        os.kill(os.getpid(), signal.SIGINT)
        real(text)

    monkeypatch.setattr(output, "_stdout", stdout)


def test_ctrl_c_while_a_finished_result_is_written_loses_nothing(tmp_path, monkeypatch):
    _ctrl_c_while_showing(monkeypatch)
    out = tmp_path / "a.json"
    run = invoke("amdahl", "-f", "0.4", "-s", "4", "--json", "--out", str(out))
    assert run.exit_code == 130, run.stderr
    assert json.loads(run.stdout)["result"] == json.loads(out.read_text())["result"]
    assert run.stderr.strip().splitlines()[-1] == "Aborted."


def test_ctrl_c_while_profile_runs_are_written_keeps_them(tmp_path, monkeypatch, fit):
    _ctrl_c_while_showing(monkeypatch)
    out = tmp_path / "p.json"
    run = invoke(
        "profile", "tiny", "--runs", "2", "--warmup", "1", "--reps", "3", "--threads", "1",
        "--roofline", fit, "--json", "--out", str(out),
    )  # fmt: skip
    assert run.exit_code == 130, run.stderr
    for result in (json.loads(run.stdout)["result"], json.loads(out.read_text())["result"]):
        assert result["runs"] == 2


def test_ctrl_c_in_a_validate_point_leaves_no_probe_of_it(tmp_path, monkeypatch, calibration_file):
    _ctrl_c_at_call(monkeypatch, "infer_opt.profilers.validate._measure", 2)
    run = invoke(
        "validate", "tiny", "--calibration", calibration_file, "--grid", "batch=1,2,4", "--seq-len", "16",
        "--reps", "3", "--warmup", "1", "--json",
    )  # fmt: skip
    assert run.exit_code == 130, run.stderr
    result = json.loads(run.stdout)["result"]
    assert [p["batch"] for p in result["points"]] == [1]


def test_speculative_run_times_the_bookkeeping_before_the_rounds(monkeypatch):
    """c_m is timed before the rounds, so a Ctrl-C after a whole round has no timing left."""
    from infer_opt.profilers import speculative_run as sr

    order = []
    real_rounds, real_cm = sr._rounds, sr._bookkeeping_cost
    monkeypatch.setattr(sr, "_rounds", lambda *a, **k: (order.append("rounds"), real_rounds(*a, **k))[1])
    monkeypatch.setattr(sr, "_bookkeeping_cost", lambda *a: (order.append("c_m"), real_cm(*a))[1])
    run = invoke(
        "speculative", "run", "--target", "tiny", "--draft", "self:1", "--k", "1", "--reps", "2",
        "--new-tokens", "4", "--prompt-len", "4", "--cost-reps", "2", "--threads", "1", "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    assert order == ["c_m", "rounds"]


def test_ctrl_c_while_the_cli_is_imported_is_aborted_not_a_traceback():
    """Issue 42: a SIGINT while infer_opt.cli.app is still being imported (torch, typer)."""
    import os
    import subprocess
    import sys

    code = (
        "import os, signal\n"
        "from infer_opt.cli import _starting\n"
        "assert signal.getsignal(signal.SIGINT) is _starting._abort\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "print('not reached')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 130 and done.stderr == "Aborted.\n" and done.stdout == ""
    after = subprocess.run(
        [sys.executable, "-c", "import signal, infer_opt.cli.app; "
         "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert after.returncode == 0, after.stderr
