"""``scripts/gpu_check.sh`` runs once, on a lent GPU with minutes of budget: every infer-opt
command line in it must parse (an option typo would cost a whole step), and the values the
CPU can check must be valid."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from infer_opt.profilers.models import BUILTIN_CONFIGS
from tests.helpers import invoke

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.sh"


def _steps() -> list[tuple[str, list[str]]]:
    """(step name, argv after ``python -m infer_opt``) for every infer-opt step."""
    text = SCRIPT.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        if not line.startswith("step "):
            continue
        words = shlex.split(line)
        if "${IO[@]}" in words:
            out.append((words[1], words[words.index("${IO[@]}") + 1 :]))
    return out


def test_the_script_has_infer_opt_steps():
    names = [name for name, _ in _steps()]
    assert {
        "kernels-bf16-flush",
        "roofline-bf16",
        "profile-decode",
        "spec-measure",
        "amortize-measure",
    } <= set(names)


@pytest.mark.parametrize(("name", "argv"), _steps(), ids=[name for name, _ in _steps()])
def test_every_infer_opt_command_line_parses(name, argv):
    # click parses every option before it acts on --help: an unknown option is an error here
    run = invoke(*argv, "--help")
    assert run.exit_code == 0, (name, run.stdout, run.stderr)


def test_decode_and_speculative_contexts_fit_the_models():
    for name, argv in _steps():
        if "--context" not in argv:
            continue
        context = int(argv[argv.index("--context") + 1])
        if argv[0] == "profile":
            model = BUILTIN_CONFIGS[argv[1]]
            assert context + 1 <= model.max_seq_len, name  # decode adds one token
        else:
            k_max = int(argv[argv.index("--k-max") + 1])
            for option in ("--target", "--draft"):
                model = BUILTIN_CONFIGS[argv[argv.index(option) + 1]]
                assert context + k_max + 1 <= model.max_seq_len, (name, option)
    assert re.search(r"--context 10\d\d", SCRIPT.read_text())  # the decode step is in there
