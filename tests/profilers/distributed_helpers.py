"""Starting small torchrun jobs from the tests: 2 gloo ranks, one thread each, a free port
(``--standalone``), a hard timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: a job that has not finished by then has hung: the test fails instead of the suite
JOB_TIMEOUT_S = 120


def job_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def torchrun(
    *args: str, nproc: int = 2, timeout_s: float = JOB_TIMEOUT_S, **env: str
) -> subprocess.CompletedProcess:
    """``python -m torch.distributed.run --standalone --nproc-per-node N ARGS``."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *args]
    return subprocess.run(
        cmd, cwd=ROOT, env=job_env(**env), capture_output=True, text=True, timeout=timeout_s, check=False
    )


def infer_opt(*args: str, timeout_s: float = JOB_TIMEOUT_S, **env: str) -> subprocess.CompletedProcess:
    """``python -m infer_opt ARGS`` in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "infer_opt", *args],
        cwd=ROOT,
        env=job_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def json_lines(stdout: str) -> list[Any]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith(("{", "["))]


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Error:")]
