"""docs/ARCHITECTURE.md stays true: every module it names exists, and the layer rules it
states hold for the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

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
    """A result kind's schema lives in ``infer_opt/results/``: views and plots read it there, so
    rendering a saved result never loads the modules that measure (and import torch)."""
    offenders = _profiler_imports(sorted((ROOT / "infer_opt" / "reports").rglob("*.py")))
    assert not offenders, offenders


def _profiler_imports(paths: list[Path]) -> list[str]:
    """``file:line`` of every import of ``infer_opt.profilers`` (at any depth) in ``paths``."""
    offenders = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            modules = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            if any(m == "infer_opt.profilers" or m.startswith("infer_opt.profilers.") for m in modules):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return offenders


#: what a module of infer_opt/results/ may import from the package: the results beside it and
#: the light shared modules (no calculator, profiler, trace analysis, view or command)
RESULT_IMPORTS = (
    *("results", "errors", "notices", "units", "stats", "steps", "run_key", "clocks", "files", "inputs"),
    "registry",  # names of kinds as strings, resolved when a file is loaded
)
#: the base's two conveniences for API users and notebooks (``Result.to_frame``, the markdown a
#: notebook shows), each a lazy import of the report layer inside the method
RESULT_API_IMPORTS = {"base.py:infer_opt.reports.frames", "base.py:infer_opt.reports.render"}


def _package_imports(path: Path) -> list[str]:
    """The ``infer_opt`` modules ``path`` imports, at top level or inside a function."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "infer_opt":
            out += [f"infer_opt.{a.name}" for a in node.names if a.name != "__version__"]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
    return [m for m in out if m.split(".")[0] == "infer_opt"]


def test_results_import_no_calculator_profiler_trace_analysis_view_or_command():
    offenders = [
        f"{path.name}:{module}"
        for path in sorted((ROOT / "infer_opt" / "results").glob("*.py"))
        for module in _package_imports(path)
        if module.split(".")[1] not in RESULT_IMPORTS and f"{path.name}:{module}" not in RESULT_API_IMPORTS
    ]
    assert not offenders, offenders


def test_the_results_check_sees_a_calculator_import(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    from infer_opt.cost_models import op_model\n")
    assert _package_imports(tmp_path / "m.py") == ["infer_opt.cost_models"]


def test_every_result_class_lives_in_the_results_package():
    """No class outside infer_opt/results/ derives from :class:`Result` or from a result there."""
    classes = [
        (path, node, {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases})
        for path in sorted((ROOT / "infer_opt").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    ]
    results, grown = {"Result"}, True
    while grown:  # every class deriving from Result, at any depth, wherever it is
        before = len(results)
        results |= {node.name for _, node, bases in classes if bases & results}
        grown = len(results) > before
    offenders = [
        f"{path.relative_to(ROOT)}:{node.name}"
        for path, node, bases in classes
        if bases & results and path.parent.name != "results"
    ]
    assert len(results) > 30 and not offenders, offenders


def test_every_kind_and_every_row_it_holds_is_a_class_of_the_results_package():
    """A kind's result class and the dataclasses its fields hold (at any depth) are defined in
    infer_opt/results/, or are one of the light shared types (a notice, a summary, a shape)."""
    import dataclasses
    import typing

    from infer_opt.registry import KINDS, result_class

    shared = {"infer_opt.notices", "infer_opt.stats", "infer_opt.steps"}
    seen, outside = set(), []

    def walk(tp: Any) -> None:
        for arg in typing.get_args(tp):
            walk(arg)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp) and tp not in seen:
            seen.add(tp)
            if not tp.__module__.startswith("infer_opt.results.") and tp.__module__ not in shared:
                outside.append(f"{tp.__module__}.{tp.__name__}")
            for hint in typing.get_type_hints(tp).values():
                walk(hint)

    for name in KINDS:
        cls = result_class(name)
        assert cls.__module__.startswith("infer_opt.results."), (name, cls.__module__)
        walk(cls)
    assert len(seen) > 100 and not outside, outside


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


def _is_typer_parameter(node: ast.AST) -> bool:
    """``typer.Option(...)`` or ``typer.Argument(...)``."""
    func = getattr(node, "func", None)
    return (
        isinstance(func, ast.Attribute)
        and func.attr in ("Option", "Argument")
        and (getattr(func.value, "id", "") == "typer")
    )


def _inline_declarations(source: str, name: str) -> list[str]:
    """Where ``source`` declares an option or argument inline (issue 29 §5, issue 43 §5): a call
    in a parameter's annotation (``k: option(int, "--k", ...) = 3``, ``Annotated[int,
    typer.Option(...)]``, a helper's ``_size("--tq", ...)``), in an option group's field
    annotation, or a declaring call as a default (``x: int = typer.Option(...)``); and a
    ``typer.Option``/``typer.Argument`` anywhere but in ``cli.common``'s ``option()`` and
    ``argument()``, the one place that builds them."""
    tree = ast.parse(source)
    builders = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("option", "argument")]
    built_there = {id(c) for b in builders if name == "common.py" for c in ast.walk(b)}
    found = [
        f"{name}:{n.lineno} {ast.unparse(n.func)}(...)"
        for n in ast.walk(tree)
        if _is_typer_parameter(n) and id(n) not in built_there
    ]
    declaring = re.compile(r"(^|\.|_)(option|argument|Option|Argument)$")
    for node in ast.walk(tree):
        parts: list[ast.AST] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            every = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            parts = [arg.annotation for arg in every if arg is not None and arg.annotation is not None]
            defaults = [d for d in [*a.defaults, *a.kw_defaults] if isinstance(d, ast.Call)]
            parts += [d for d in defaults if declaring.search(ast.unparse(d.func))]
        elif isinstance(node, ast.ClassDef):
            parts = [s.annotation for s in node.body if isinstance(s, ast.AnnAssign)]
        found += [
            f"{name}:{n.lineno} {ast.unparse(n.func)}(...)"
            for part in parts
            for n in ast.walk(part)
            if isinstance(n, ast.Call)
        ]
    return sorted(set(found))


def test_every_command_option_is_declared_one_way():
    """Options and arguments are declared once, as module-level aliases built by
    ``cli.common.option``/``argument`` (or a factory such as ``reps_option``), never inline in a
    command's signature or an option group's fields, in any form."""
    offenders = []
    for path in sorted((ROOT / "infer_opt" / "cli").glob("*.py")):
        offenders += _inline_declarations(path.read_text(encoding="utf-8"), path.name)
    assert offenders == [], offenders


def test_the_inline_declaration_check_sees_every_form():
    """The check above can fail: each inline form is caught, a module-level alias is not."""
    forms = {
        "def f(k: option(int, '--k', help='K.') = 3): ...": True,
        "def f(k: Annotated[int, typer.Option('--k')] = 3): ...": True,
        "def f(k: int = typer.Option(3, '--k')): ...": True,
        "def f(*, k: _size('--k', 'K.')): ...": True,
        "def f(path: Annotated[Path, typer.Argument(help='P.')]): ...": True,
        "class Group:\n    k: option(int, '--k', help='K.') = 3": True,
        "class Group:\n    k: int = typer.Option(3, '--k')": True,
        "KOpt = Annotated[int, typer.Option('--k')]": True,
        "KOpt = option(int, '--k', help='K.')\ndef f(k: KOpt = 3): ...": False,
    }
    for source, caught in forms.items():
        assert bool(_inline_declarations(source, "mycmd.py")) == caught, source


#: the modules that may open a file other than through :func:`infer_opt.files.read_text`, and why
OWN_READS = {
    "infer_opt/files.py": "the one reader, after its size and regular-file checks",
    "infer_opt/trace/reader.py": "a trace (up to 8 GiB): its own regular-file and size checks first",
    "infer_opt/inputs/sides.py": "a trace's first bytes, after checking it is a regular file",
    "infer_opt/cli/output.py": "os.devnull, written",
    "infer_opt/store.py": "a lock file, appended to",
    "infer_opt/profilers/device.py": "/proc and /sys: the machine's own files",
    "infer_opt/profilers/distributed.py": "/proc/meminfo",
    "infer_opt/profilers/op_recorder.py": "the trace it exported itself to a private folder",
    "infer_opt/reports/html.py": "the plot it wrote itself",
}


def test_every_file_a_user_hands_in_is_read_through_the_one_checked_reader():
    """``open``, ``read_text`` and ``read_bytes`` only where :data:`OWN_READS` says why: anything
    else reads through :func:`infer_opt.files.read_text` (a FIFO, a device or a 100 GB file is
    one line naming the option, never a hang)."""
    offenders = []
    for path in sorted((ROOT / "infer_opt").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or name in OWN_READS:
                continue
            func = node.func
            if (isinstance(func, ast.Name) and func.id == "open") or (
                isinstance(func, ast.Attribute)
                and func.attr in ("read_text", "read_bytes")
                and ast.unparse(func) != "files.read_text"
            ):
                offenders.append(f"{name}:{node.lineno}")
    assert not offenders, offenders


#: the commands that measure (or build a model with torch): the only ones that import the profilers
MEASURING_COMMANDS = {
    "ab", "amortize_measure", "calibrate", "comm", "distributed", "kernels", "predict", "profile",
    "profile_tp", "roofline", "speculative_measure", "speculative_run", "validate",
}  # fmt: skip


def test_only_the_commands_that_measure_import_the_profilers():
    """Calculators, the store, saved results and user inputs are torch-free: a command that only
    reads them (``compare``, ``report``, ``tune``, ``trace``) never reaches into the profilers."""
    paths = [p for p in sorted((ROOT / "infer_opt" / "cli").glob("*.py")) if p.stem not in MEASURING_COMMANDS]
    offenders = _profiler_imports(paths)
    assert not offenders, offenders


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
    "infer_opt.cost_models.speculative_cost_fit:plot_data",
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
