"""Issue 33 class 5: outputs never replaced or lost, whatever the path names: a FIFO or
device is written in place, a symlink's target is written (the link stays), a FIFO with
no reader is one line (no hang), two outputs on one path are refused before the work."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from infer_opt import files
from tests.helpers import assert_one_line_error, invoke

AMDAHL = ("amdahl", "-f", "0.4", "-s", "4")


def test_a_fifo_is_written_in_place_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    files.write_text(fifo, "hello")
    reader.join(timeout=10)
    assert got == [b"hello"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_fifo_with_no_reader_fails_after_a_wait_instead_of_hanging(tmp_path, monkeypatch):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    monkeypatch.setattr(files, "FIFO_WAIT_S", 0.2)
    monkeypatch.setenv(files.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(OSError):
        files.write_text(fifo, "x")
    result = invoke(*AMDAHL, "--out", str(fifo))
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert list((tmp_path / "cache" / "unsaved").iterdir())  # the result is kept
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="no /dev/null")
def test_a_character_device_is_never_replaced(tmp_path):
    before = os.stat("/dev/null")
    files.write_text("/dev/null", "x")
    link = tmp_path / "null-link.json"
    link.symlink_to("/dev/null")
    assert invoke(*AMDAHL, "--out", str(link)).exit_code == 0
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino
    assert link.is_symlink()


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path):
    target = tmp_path / "real.json"
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert invoke(*AMDAHL, "--out", str(link)).exit_code == 0
    assert link.is_symlink() and target.read_text().startswith("{")


@pytest.mark.parametrize(
    "extra",
    [
        lambda p: ["--out", str(p / "a.json"), "--out", str(p / "a.json")],
        lambda p: ["--out", str(p / "a.md"), "--markdown", str(p / "a.md")],
        lambda p: ["--out", str(p / "a.json"), "--out", str(p / "sub" / ".." / "a.json")],
    ],
)
def test_two_outputs_on_one_path_are_refused_before_the_work(tmp_path, extra):
    (tmp_path / "sub").mkdir()
    result = invoke(*AMDAHL, *extra(tmp_path))
    assert_one_line_error(result, "already writes this file")


def test_profile_trace_on_the_out_path_is_refused_before_the_work(tmp_path):
    out = tmp_path / "x.json"
    result = invoke("profile", "tiny", "--out", str(out), "--trace", str(out))
    assert_one_line_error(result, "--trace", "--out already writes this file")
    assert not out.exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("fmt", [[], ["--json"], ["--format", "markdown"]])
def test_stdout_on_a_full_device_is_one_line_and_the_result_is_kept(tmp_path, fmt):
    import subprocess
    import sys

    from tests.profilers.distributed_helpers import ROOT, job_env

    with open("/dev/full", "w") as full:
        run = subprocess.run(
            [sys.executable, "-m", "infer_opt", *AMDAHL, *fmt], cwd=ROOT, stdout=full, stderr=subprocess.PIPE,
            text=True, env=job_env(INFER_OPT_CACHE=str(tmp_path)), timeout=60, check=False,
        )  # fmt: skip
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert [line for line in run.stderr.splitlines() if line.strip()] == [
        line for line in run.stderr.splitlines() if line.startswith("Error: could not write stdout")
    ]
    assert list((tmp_path / "unsaved").iterdir())


class _FakeProfiler:
    def export_chrome_trace(self, path):
        with open(path, "w") as handle:
            handle.write('{"traceEvents": []}')


def test_a_trace_export_writes_through_a_symlink_and_keeps_the_link(tmp_path):
    from infer_opt.profilers.op_recorder import _export_trace

    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    _export_trace(_FakeProfiler(), link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == '{"traceEvents": []}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]  # no leftovers


def test_a_trace_export_to_dev_null_leaves_the_device(tmp_path):
    from infer_opt.profilers.op_recorder import _export_trace

    if not os.access("/dev/null", os.W_OK):
        pytest.skip("/dev/null not writable here")
    _export_trace(_FakeProfiler(), __import__("pathlib").Path("/dev/null"))
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_profile_trace_to_a_symlink_and_to_dev_null(tmp_path):
    target = tmp_path / "trace-target.json"
    target.write_text("")
    link = tmp_path / "trace.json"
    link.symlink_to(target)
    result = invoke("profile", "tiny", "--trace", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and '"traceEvents"' in target.read_text()
    result = invoke("profile", "tiny", "--trace", "/dev/null")
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
