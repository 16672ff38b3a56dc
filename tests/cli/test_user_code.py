"""The user's code inside a command (issue 33, classes 2 and 5): Ctrl-C while a model factory
runs is an interrupt (exit 130), never "the model factory raised KeyboardInterrupt" (exit 1);
whatever the factory or its model prints goes to stderr, so stdout holds the tool's output
alone (``--json`` parses)."""

from __future__ import annotations

import json

import pytest

from infer_opt.results import save_result
from tests.helpers import invoke
from tests.profilers.synthetic_calibration import synthetic_calibration

pytestmark = pytest.mark.usefixtures("one_thread")

FACTORIES = """
import torch
from infer_opt.profilers import models


def chatty(**kwargs):
    print("hello from the factory")
    config = models.TransformerConfig("mini", 256, 32, 1, 2, 2, 64, 64)
    return models.DecoderLM(config).eval(), torch.zeros(1, 4, dtype=torch.long)


class Loud(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        print("hello from forward")
        return self.lin(x)


def loud(**kwargs):
    return Loud(), torch.randn(1, 8)


def ctrl_c(**kwargs):
    raise KeyboardInterrupt
"""


@pytest.fixture
def factories(tmp_path):
    path = tmp_path / "user.py"
    path.write_text(FACTORIES)
    return path


@pytest.fixture
def calibration(tmp_path):
    return save_result(tmp_path / "cal.json", synthetic_calibration(families=True))


def _commands(factories, calibration, name: str) -> list[list[str]]:
    model = f"{factories}:{name}"
    return [
        ["profile", model, "--reps", "2", "--warmup", "1", "--threads", "1"],
        ["predict", model, "--calibration", str(calibration)],
    ]


@pytest.mark.parametrize("which", [0, 1], ids=["profile", "predict"])
def test_ctrl_c_inside_a_factory_exits_130(factories, calibration, which):
    run = invoke(*_commands(factories, calibration, "ctrl_c")[which])
    assert run.exit_code == 130, (run.exit_code, run.stderr)
    assert "raised KeyboardInterrupt" not in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("which", [0, 1], ids=["profile", "predict"])
def test_a_factorys_print_goes_to_stderr_under_json(factories, calibration, which):
    run = invoke(*_commands(factories, calibration, "chatty")[which], "--json")
    assert run.exit_code == 0, run.stderr
    assert json.loads(run.stdout)["schema"].startswith("infer-opt/")
    assert "hello from the factory" in run.stderr and "hello" not in run.stdout


def test_a_models_print_while_profiled_goes_to_stderr(factories):
    run = invoke("profile", f"{factories}:loud", "--reps", "2", "--warmup", "1", "--threads", "1", "--json")
    assert run.exit_code == 0, run.stderr
    assert json.loads(run.stdout)["schema"] == "infer-opt/profile"
    assert "hello from forward" in run.stderr


def test_the_console_table_still_goes_to_stdout(factories):
    run = invoke("profile", f"{factories}:chatty", "--reps", "2", "--warmup", "1", "--threads", "1")
    assert run.exit_code == 0, run.stderr
    assert "hello" not in run.stdout and "step" in run.stdout.lower()


BASE_EXCEPTIONS = """
import torch


class Stop(BaseException):
    pass


class Model(torch.nn.Module):
    def forward(self, x):
        raise Stop("in forward")


def in_factory(**kwargs):
    raise Stop("in the factory")


def in_forward(**kwargs):
    return Model(), torch.zeros(2)
"""


@pytest.mark.parametrize(
    ("name", "said"),
    [("in_factory", "raised Stop: in the factory"), ("in_forward", "the model raised Stop: in forward")],
)
def test_a_base_exception_subclass_of_user_code_is_one_line_exit_1(tmp_path, name, said):
    """Issue 42: a BaseException subclass (not Exception) raised by a factory or its model."""
    path = tmp_path / "base_user.py"
    path.write_text(BASE_EXCEPTIONS)
    run = invoke("profile", f"{path}:{name}", "--reps", "2", "--warmup", "1")
    assert run.exit_code == 1, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and said in errors[0] and "Traceback" not in run.stderr
