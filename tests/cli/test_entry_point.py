"""The installed console script works, and calculators stay light."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.helpers import heavy_modules_imported


@pytest.mark.skipif(shutil.which("infer-opt") is None, reason="package not installed")
def test_installed_entry_point_runs():
    proc = subprocess.run(
        ["infer-opt", "amdahl", "-f", "0.4", "-s", "4", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"]["speedup"] == pytest.approx(1 / 0.7)


def test_python_dash_m_reports_bad_input_with_exit_2():
    proc = subprocess.run(
        [sys.executable, "-m", "infer_opt", "amdahl", "-f", "2", "-s", "4"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("Error: --fraction")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["amdahl", "-f", "0.4", "-s", "4"],
        ["amdahl", "-f", "0.4", "-s", "4", "--json"],
    ],
)
def test_calculators_do_not_import_heavy_modules(argv):
    assert heavy_modules_imported(argv) == []
