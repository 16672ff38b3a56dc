"""Shared test helpers: run the CLI in-process and read its JSON result."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from typer.testing import CliRunner

from infer_opt.cli.app import app


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def invoke(*args: str, input: str | None = None) -> Run:
    """Run ``infer-opt ARGS`` in-process; stdout and stderr kept apart."""
    runner = CliRunner()
    result = runner.invoke(app, list(args), input=input, env={"COLUMNS": "200"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Run(result.exit_code, result.stdout, result.stderr)


def assert_one_line_error(run: Run, *needles: str) -> None:
    """Exit code 2, a single 'Error: ...' line naming what was wrong, no traceback."""
    assert run.exit_code == 2, (run.exit_code, run.stdout, run.stderr)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("Error: "), lines[0]
    assert "Traceback" not in run.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
