"""``scripts/gpu_check.sh`` runs once, on a lent GPU with minutes of budget: every infer-opt
command line in it must parse (an option typo would cost a whole step), the values the CPU can
check must be valid, and ``--dry-run`` must show the plan without running anything."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infer_opt.cli._click import UsageError
from infer_opt.profilers.models import BUILTIN_CONFIGS
from tests.helpers import invoke, parse_command_line

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def _steps() -> list[tuple[str, str | None, list[str]]]:
    """(step name, the subcommand a ``step_if`` needs or None, argv after ``python -m
    infer_opt``) for every infer-opt step."""
    text = SCRIPT.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        words = shlex.split(line.strip()) if line.strip().startswith(("step ", "step_if ")) else []
        if "${IO[@]}" not in words:
            continue
        guard = words[1] if words[0] == "step_if" else None
        name = words[2] if guard else words[1]
        out.append((name, guard, words[words.index("${IO[@]}") + 1 :]))
    return out


def _dry_run(**env: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("bash") is None:  # pragma: no cover - every CI image has bash
        pytest.skip("needs bash")
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return subprocess.run(
        ["bash", str(SCRIPT), "--dry-run"],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path, "PYTHONPATH": str(ROOT), **env},
        timeout=120,
        check=False,
    )


def test_the_script_has_infer_opt_steps():
    names = {name for name, _, _ in _steps()}
    assert {
        "kernels-bf16-flush",
        "roofline-bf16",
        "profile-decode",
        "spec-measure",
        "amortize-measure",
        "calibrate-bf16",
        "validate-prefill",
        "validate-decode",
        "comm",
        "spec-run",
    } <= names


@pytest.mark.parametrize(("name", "guard", "argv"), _steps(), ids=[name for name, _, _ in _steps()])
def test_every_infer_opt_command_line_parses(name, guard, argv, tmp_path):
    if guard is not None and invoke(*guard.split(), "--help").exit_code != 0:
        pytest.skip(f"infer-opt {guard} is not in this tree yet (the script skips the step too)")
    # the script's folder $W: a step's input files were written there by the steps before it
    argv = [word.replace("$W", str(tmp_path)) for word in argv]
    for word in argv:
        if word.startswith(str(tmp_path)):
            Path(word).touch()
    ctx = parse_command_line(argv)
    assert ctx.command.name == argv[1 if argv[0] in ("speculative", "amortize") else 0], name


def test_the_parse_check_refuses_what_help_would_hide():
    # `--help` exits before click looks at extra arguments; parsing for real does not
    stray = ["kernels", "--device", "cuda", "stray"]
    assert invoke(*stray, "--help").exit_code == 0
    with pytest.raises(UsageError, match="stray"):
        parse_command_line(stray)
    with pytest.raises(UsageError, match="--no-such-option"):
        parse_command_line(["roofline", "--no-such-option"])
    with pytest.raises(UsageError, match="--reps"):
        parse_command_line(["kernels", "--reps", "many"])


def test_decode_and_speculative_contexts_fit_the_models():
    for name, _, argv in _steps():
        if "--context" not in argv:
            continue
        context = int(argv[argv.index("--context") + 1])
        if argv[0] in ("profile", "validate"):
            model = BUILTIN_CONFIGS[argv[1]]
            assert context + 1 <= model.max_seq_len, name  # decode adds one token
        else:
            k_max = int(argv[argv.index("--k-max") + 1])
            for option in ("--target", "--draft"):
                model = BUILTIN_CONFIGS[argv[argv.index(option) + 1]]
                assert context + k_max + 1 <= model.max_seq_len, (name, option)
    assert re.search(r"--context 10\d\d", SCRIPT.read_text())  # the decode step is in there


def test_dry_run_prints_every_step_with_its_budget_and_runs_nothing(tmp_path):
    run = _dry_run(OUT=str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    for name in [*(n for n, _, _ in _steps()), "env", "pytest-gpu", "agreement"]:
        (line,) = [ln for ln in lines if ln.split()[:1] == [name]]
        assert re.search(r"\d+s\s+\(cumulative", line) or "(not in this tree" in line, line
    assert re.search(r"worst case \d+s of steps; .* after 420s", run.stdout)
    assert not (tmp_path / "out").exists()  # nothing written, nothing run


def test_the_most_valuable_steps_come_first_and_fit_the_budget():
    """amortize measure (the only torch.compile + CUDA graph step) once ran 13th of 14 and fell
    past the budget: it must start within the budget even if every step before it takes its
    whole limit."""
    budgets = {}
    for line in _dry_run().stdout.splitlines():
        match = re.match(r"(\S+)\s+(\d+)s\s+\(cumulative\s+(\d+)s\)", line)
        if match:
            budgets[match.group(1)] = (int(match.group(2)), int(match.group(3)))
    order = list(budgets)
    value_first = [
        "kernels-bf16-flush",
        "roofline-bf16",
        "profile-prefill",
        "profile-decode",
        "amortize-measure",
    ]
    assert [order.index(s) for s in value_first] == sorted(order.index(s) for s in value_first)
    assert order.index("amortize-measure") < order.index("spec-measure") < order.index("kernels-bf16-graphs")
    assert budgets["amortize-measure"][1] <= 420
    repeats = [
        name
        for name in order
        if name in ("kernels-bf16-graphs", "kernels-fp32-flush", "kernels-bf16-noflush")
    ]
    assert repeats and all(order.index(r) > order.index("agreement") for r in repeats)
    for name, _, argv in _steps():
        if name in repeats:
            assert "--only" in argv, name  # repeats are shrunk


def test_steps_selects_a_rerun():
    run = _dry_run(STEPS="profile-decode,roofline-bf16")
    names = [line.split()[0] for line in run.stdout.splitlines() if "cumulative" in line]
    assert names == ["roofline-bf16", "profile-decode"]


def test_flushed_steps_do_not_ask_for_several_calls_per_graph():
    for name, _, argv in _steps():
        if argv[0] == "kernels" and "--cuda-graphs" in argv:
            assert "--l2-flush" not in argv, name


def test_conftest_imports_without_hypothesis():
    """The GPU image may lack hypothesis: the conftest must still import (else pytest exits 4
    before any GPU test runs)."""
    code = "import sys; sys.modules['hypothesis'] = None; import tests.conftest; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.stdout.strip() == "ok", out.stderr


def test_unknown_arguments_are_refused():
    if shutil.which("bash") is None:  # pragma: no cover
        pytest.skip("needs bash")
    run = subprocess.run(["bash", str(SCRIPT), "--bogus"], capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "usage:" in run.stderr
