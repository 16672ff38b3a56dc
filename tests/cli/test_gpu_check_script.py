"""``scripts/gpu_check.sh`` runs once, on a lent GPU with minutes of budget: every infer-opt
command line in it must parse (an option typo would cost a whole step), and the values the
CPU can check must be valid."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from infer_opt.cli._click import UsageError
from infer_opt.profilers.models import BUILTIN_CONFIGS
from tests.helpers import invoke, parse_command_line

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
def test_every_infer_opt_command_line_parses(name, argv, tmp_path):
    # the script's folder $W: a step's input files were written there by the steps before it
    argv = [word.replace("$W", str(tmp_path)) for word in argv]
    for word in argv:
        if word.startswith(str(tmp_path)):
            Path(word).touch()
    ctx = parse_command_line(argv)
    assert ctx.command.name == argv[1 if argv[0] in ("speculative", "amortize") else 0], name


def test_the_parse_check_refuses_what_help_would_hide(tmp_path):
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
