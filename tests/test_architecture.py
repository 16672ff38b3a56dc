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


#: the longest a function in infer_opt/ may be (docs/ARCHITECTURE.md, "Long functions")
MAX_FUNCTION_LINES = 80


def _long_functions(package: Path) -> dict[str, int]:
    """``path:function`` (relative to the package's parent) -> lines, for every function in
    ``package`` longer than the limit."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found[f"{path.relative_to(package.parent).as_posix()}:{node.name}"] = lines
    return found


def _flat_tables() -> set[str]:
    """The functions ARCHITECTURE.md allows to be longer (flat tables of data), named there as
    ``infer_opt/module.py:function`` under "Long functions"."""
    section = DOC.read_text().split("## Long functions", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(infer_opt/[\w/]+\.py:\w+)`", section))


# The other helpers split their files on their branches; the lead removes this mark after merging.
def test_no_function_in_the_package_is_longer_than_80_lines():
    allowed = _flat_tables()
    too_long = {name: n for name, n in _long_functions(ROOT / "infer_opt").items() if name not in allowed}
    assert not too_long, too_long


def test_the_length_check_counts_every_line_of_a_function(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    at_limit = "def at_limit():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 1)
    over = "    def over(self):\n" + "        x = 1\n" * MAX_FUNCTION_LINES
    (package / "sub" / "m.py").write_text(f"{at_limit}\n\nclass C:\n{over}")
    assert _long_functions(package) == {"pkg/sub/m.py:over": MAX_FUNCTION_LINES + 1}


def test_every_excepted_flat_table_is_a_function_of_its_module():
    for name in _flat_tables():
        module, function = name.split(":")
        tree = ast.parse((ROOT / module).read_text())
        assert any(isinstance(n, ast.FunctionDef) and n.name == function for n in ast.walk(tree)), name


def test_docstrings_cite_no_document_outside_the_repository():
    # "SPEC §3.1" pointed at a design document that is not in the repository: a docstring
    # writes its formula, or names a module or a file under docs/
    cites = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "infer_opt").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if re.search(r"\bSPEC\s*§", line)
    ]
    assert not cites, cites


def test_no_module_of_the_report_layer_imports_the_profilers():
    """A result kind's schema lives in ``infer_opt/kinds/``: views and plots read it there, so
    rendering a saved result never loads the modules that measure (and import torch)."""
    offenders = []
    for path in sorted((ROOT / "infer_opt" / "reports").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            if any(m == "infer_opt.profilers" or m.startswith("infer_opt.profilers.") for m in modules):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders


def _torch_loaded_after(code: str) -> bool:
    import subprocess
    import sys

    script = f"import sys\n{code}\nprint('TORCH:' + str('torch' in sys.modules))\n"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1] == "TORCH:True"


def test_the_view_of_every_saved_kind_loads_no_torch(tmp_path):
    from infer_opt.registry import KINDS
    from infer_opt.results import save_result
    from tests.reports.fixtures import FIXTURES

    paths = []
    for kind in sorted(KINDS):
        if kind in FIXTURES:  # tests/reports checks every kind has one
            paths.append(str(save_result(tmp_path / f"{kind}.json", FIXTURES[kind]())))
    assert len(paths) >= 25, paths
    code = (
        "from infer_opt.reports.view import build_view\n"
        "from infer_opt.results import load_result\n"
        f"for path in {paths!r}:\n"
        "    build_view(load_result(path).result)\n"
    )
    assert not _torch_loaded_after(code)


def test_a_report_of_a_saved_profile_loads_no_torch(tmp_path):
    from infer_opt.results import save_result
    from tests.reports.fixtures import FIXTURES

    saved = save_result(tmp_path / "p.json", FIXTURES["profile"]())
    code = (
        "from infer_opt.cli.app import app\n"
        "try:\n"
        f"    app(['report', {str(saved)!r}, '-o', {str(tmp_path / 'r.md')!r}])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
    )
    assert not _torch_loaded_after(code)
    assert (tmp_path / "r.md").read_text().strip()


def test_the_torch_check_sees_torch():
    """The two checks above can fail: loading a profiler module is seen."""
    assert _torch_loaded_after("import infer_opt.profilers.model_profile")


def test_every_command_option_is_declared_one_way():
    """Issue 29 §5: options are declared with ``cli.common.option`` (an ``Annotated[...]`` alias),
    never inline as ``Annotated[T, typer.Option(...)]`` or as a ``typer.Option`` default."""
    import ast

    offenders = []
    for path in sorted((ROOT / "infer_opt" / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            is_call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            if is_call and node.func.attr == "Option" and getattr(node.func.value, "id", "") == "typer":
                inside = path.name == "common.py" and any(isinstance(a, ast.Starred) for a in node.args)
                if not inside:  # option() itself builds the one typer.Option
                    offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == [], offenders


#: the cost-model functions a plot may call: each evaluates the result's own model at the result's
#: own parameters over a range (docs/ARCHITECTURE.md, "What a view and a plot may compute"),
#: and precision_label, which names a precision
PLOT_CURVES = {
    "infer_opt.cost_models.amdahl:part_curves",
    "infer_opt.cost_models.amortization:time_curve",
    "infer_opt.cost_models.bucketing:plot_data",
    "infer_opt.cost_models.comm:fit_curve",
    "infer_opt.cost_models.profile_amdahl:roofline_line",
    "infer_opt.cost_models.roofline:roofline_curve",
    "infer_opt.cost_models.roofline:precision_label",
    "infer_opt.cost_models.speculative:speedup_curves",
    "infer_opt.cost_models.speculative:speedup_grid",
    "infer_opt.cost_models.speculative_measure:plot_data",
}


def test_the_report_layer_calls_no_cost_model_but_the_curves_and_no_trace_analysis():
    """Views compute nothing that ``--json`` lacks: from ``infer_opt.cost_models`` a view or plot
    imports classes, constants and the curve functions the architecture allows; from
    ``infer_opt.trace``, nothing."""
    import importlib
    import inspect

    offenders = []
    for path in sorted((ROOT / "infer_opt" / "reports").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
                if any(m.startswith(("infer_opt.cost_models", "infer_opt.trace")) for m in modules):
                    offenders.append(where)
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "infer_opt.trace" or node.module.startswith("infer_opt.trace."):
                    offenders.append(f"{where} {node.module}")
                elif node.module.startswith("infer_opt.cost_models"):
                    module = importlib.import_module(node.module)
                    for a in node.names:
                        obj = getattr(module, a.name)
                        if inspect.isroutine(obj) and f"{node.module}:{a.name}" not in PLOT_CURVES:
                            offenders.append(f"{where} {node.module}:{a.name}")
    assert not offenders, offenders
