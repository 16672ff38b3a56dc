"""The root app: every command loads lazily, has help, and the error boundary holds."""

from __future__ import annotations

import subprocess
import sys

import pytest

from infer_opt.cli.app import COMMANDS, _load_command
from tests.helpers import assert_one_line_error, invoke, parse_command_line


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_loads_and_has_help(name):
    command = _load_command(name)
    assert command.name == name
    run = invoke(name, "--help")
    assert run.exit_code == 0, run.stderr
    assert "Usage:" in run.stdout
    for sub in getattr(command, "commands", {}):
        sub_run = invoke(name, sub, "--help")
        assert sub_run.exit_code == 0, (sub, sub_run.stderr)


def test_root_help_lists_commands_in_order():
    out = invoke("--help").stdout
    positions = [out.index(f"│ {name} ") for name in COMMANDS]
    assert positions == sorted(positions)


def test_unknown_command_is_one_line_error():
    assert_one_line_error(invoke("frobnicate"), "frobnicate")


def test_version():
    run = invoke("--version")
    assert run.exit_code == 0 and run.stdout.startswith("infer-opt ")


def test_a_calculator_imports_no_other_command():
    code = (
        "import sys\n"
        "from infer_opt.cli.app import app\n"
        "try:\n"
        "    app(['amdahl', '-f', '0.4', '-s', '4', '--json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('LOADED:' + ','.join(sorted(m for m in sys.modules if m.startswith('infer_opt.cli.'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    loaded = proc.stdout.strip().splitlines()[-1].removeprefix("LOADED:").split(",")
    shared = {"infer_opt.cli.app", "infer_opt.cli.common", "infer_opt.cli.output", "infer_opt.cli.types"}
    allowed = {*shared, "infer_opt.cli._click", "infer_opt.cli._starting", "infer_opt.cli.amdahl"}
    assert set(loaded) <= allowed, loaded


def _help_examples() -> list[tuple[str, list[str]]]:
    """(command, argv) for every ``infer-opt ...`` example in a command's help text."""
    import re
    import shlex

    examples = []
    for name in COMMANDS:
        command = _load_command(name)
        helps = [command.help or ""] + [sub.help or "" for sub in getattr(command, "commands", {}).values()]
        lines = [line for text in helps for line in text.splitlines() if line.startswith("  infer-opt ")]
        for line in lines:
            # an example runs up to a shell operator or a parenthesised remark
            for match in re.finditer(r"infer-opt ([^;>()|]+)", line):
                argv = shlex.split(match.group(1))
                if not any(re.search(r"\*\.\w+$", word) for word in argv):  # a shell glob: not ours
                    examples.append((name, argv))
    return examples


@pytest.mark.parametrize(
    ("name", "argv"), _help_examples(), ids=lambda v: " ".join(v) if isinstance(v, list) else v
)
def test_every_example_in_the_help_parses(name, argv, tmp_path, monkeypatch):
    # the files an example names exist (an input must; an output's folder must)
    monkeypatch.chdir(tmp_path)
    for word in argv:
        if "." in word and word.rsplit(".", 1)[1] in ("txt", "csv", "json", "md", "png", "prom", "gz"):
            (tmp_path / word).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / word).touch()
        elif word.endswith("/") and not word.startswith("-"):  # a folder of ranks
            (tmp_path / word).mkdir(parents=True, exist_ok=True)
    assert parse_command_line(argv).command.name in argv[:2]


def test_every_command_shows_an_example_in_its_help():
    assert {name for name, _ in _help_examples()} == set(COMMANDS)


def test_core_errors_name_the_commands_own_flags():
    from infer_opt.cli.app import flag_for

    speedup = _load_command("speculative").commands["speedup"]
    assert flag_for(speedup, "alphas") == "--alphas"  # not --alpha, which comes first
    assert flag_for(speedup, "alpha") == "--alpha"
    assert flag_for(speedup, "target_cost") == "--target-cost"
    assert flag_for(speedup, "seq_len") is None
    assert flag_for(_load_command("amdahl"), "parts") == "--part"


def test_a_groups_own_options_are_named_in_core_errors(tmp_path):
    bounds = tmp_path / "b.csv"
    bounds.write_text("bucket,compile_s,saving_ms\n4,1,1\n")
    lengths = tmp_path / "l.txt"
    lengths.write_text("1\n12\n")
    run = invoke("amortize", "--buckets", str(bounds), "--lengths", str(lengths))
    assert_one_line_error(run, "--lengths", "1 of 2 lengths")


def _command_paths() -> list[list[str]]:
    paths = []
    for name in COMMANDS:
        command = _load_command(name)
        paths.append([name])
        paths += [[name, sub] for sub in getattr(command, "commands", {})]
    return paths


@pytest.mark.parametrize("path", _command_paths(), ids=" ".join)
def test_no_command_offers_shell_completion(path):
    """The root turns completion off; no command or group brings it back in its help."""
    run = invoke(*path, "--help")
    assert run.exit_code == 0, run.stderr
    assert "Usage:" in run.stdout
    assert "--install-completion" not in run.stdout and "--show-completion" not in run.stdout
