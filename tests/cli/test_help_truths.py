"""What --help says is true (issue 33, class 9): report names every kind it renders, and
compare's --runs is the measuring commands' option, not one compare has."""

from __future__ import annotations

from infer_opt.registry import KINDS
from tests.helpers import invoke


def _help(*command: str) -> str:
    run = invoke(*command, "--help")
    assert run.exit_code == 0, run.stderr
    return " ".join(run.stdout.replace("│", " ").split())


def test_report_help_names_every_kind_it_renders():
    text = _help("report")
    missing = [kind for kind in KINDS if kind not in text]
    assert not missing, missing


def test_compare_help_speaks_of_runs_only_as_the_measuring_commands_option():
    from infer_opt.cli.app import _load_command

    compare = _load_command("compare")
    assert not any("--runs" in getattr(p, "opts", ()) for p in compare.params)
    text = _help("compare")
    assert "measured with --runs 3 or more (infer-opt profile --runs 3, kernels --runs 3)" in text
    kernels = _load_command("kernels")
    assert any("--runs" in getattr(p, "opts", ()) for p in kernels.params)
