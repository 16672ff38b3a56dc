"""docs/ARCHITECTURE.md stays true: every module it names exists, and the layer rules it
states hold for the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ARCHITECTURE.md"


def test_every_module_the_architecture_names_exists():
    named = set(re.findall(r"infer_opt/[A-Za-z0-9_/]+\.py", DOC.read_text()))
    assert named, "ARCHITECTURE.md names no modules"
    missing = sorted(m for m in named if not (ROOT / m).exists())
    assert not missing, missing


def test_no_module_in_the_calculator_layers_imports_a_heavy_package_at_top_level():
    heavy = {"torch", "pandas", "matplotlib", "scipy"}
    layers = ["cost_models", "checks", "cli"]
    offenders = []
    for layer in layers:
        for path in (ROOT / "infer_opt" / layer).glob("*.py"):
            for node in ast.parse(path.read_text()).body:
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in heavy]
    assert not offenders, offenders
