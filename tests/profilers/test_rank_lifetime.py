"""Ranks started by ``--nproc`` end with their launcher, and a rank that dies is named:
small 2-rank gloo runs, one thread each, a long sweep interrupted from outside."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.profilers.distributed_helpers import ROOT, error_lines, job_env

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process tree from /proc")

LONG_SWEEP = ("comm", "--nproc", "2", "--collective", "all_reduce", "--max-size", "16MiB",
              "--reps", "400", "--no-save", "--timeout", "30s")  # fmt: skip


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _start(tmp_path: Path) -> tuple[subprocess.Popen, list[int]]:
    out = tmp_path / "sweep.json"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "infer_opt", *LONG_SWEEP, "--out", str(out)],
        cwd=ROOT, env=job_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        ranks = _children(launcher.pid)
        if len(ranks) == 2 and out.exists():  # both ranks up, rank 0 has saved a first point
            return launcher, sorted(ranks)
        time.sleep(0.3)
    launcher.kill()
    pytest.fail("the ranks did not start within 90 s")


def _wait_gone(pids: list[int], within_s: float) -> list[int]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


def test_no_rank_outlives_a_killed_launcher(tmp_path):
    launcher, ranks = _start(tmp_path)
    launcher.kill()
    launcher.wait(timeout=10)
    survivors = _wait_gone(ranks, 20)
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert survivors == []


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_a_rank_that_dies_is_named_with_how_it_ended_and_the_sweep_is_kept(tmp_path, sig):
    launcher, ranks = _start(tmp_path)
    rank_one = _rank_of(ranks, 1)
    os.kill(rank_one, sig)
    _, stderr = launcher.communicate(timeout=60)
    assert launcher.returncode == 1, stderr
    assert f"rank 1 was killed by {signal.Signals(sig).name}" in error_lines(stderr)[-1]
    assert (tmp_path / "sweep.json").stat().st_size > 0  # the partial sweep rank 0 had


def _rank_of(pids: list[int], rank: int) -> int:
    for pid in pids:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        if f"RANK={rank}".encode() in env:
            return pid
    pytest.fail(f"no process with RANK={rank}")
