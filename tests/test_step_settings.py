"""The one settings object of a model step (:class:`infer_opt.steps.StepSettings`): carried by
the result through its JSON, older results rebuilt from their fields, the run key read from it,
every place that profiles a step building it through ``model_profile.load``, and the one shape
option group of ``profile``, ``predict`` and ``validate``."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.results import dumps, parse_envelope
from infer_opt.results.profile import ProfileResult
from infer_opt.run_key import RunKey
from infer_opt.steps import MODES, Shape, StepSettings
from tests.helpers import invoke
from tests.reports.fixtures import fixture

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "infer_opt"

counts = st.integers(min_value=0, max_value=1 << 20)
shapes = st.builds(
    Shape, batch=counts, seq_len=counts, mode=st.sampled_from(MODES), context=counts, new_tokens=counts
)
settings_strategy = st.builds(
    StepSettings,
    model=st.sampled_from(["tiny", "hf:llama", "examples/my_model.py:make_model"]),
    device=st.sampled_from(["cpu", "cuda:0", "auto"]),
    dtype=st.sampled_from(["float32", "bfloat16", "auto"]),
    shape=shapes,
    warmup=counts,
    reps=counts,
    runs=st.integers(min_value=1, max_value=10),
    threads=st.none() | st.integers(min_value=1, max_value=256),
    hf_config=st.lists(st.sampled_from(["n_layer=2", "hidden_size=64", "attn_implementation=eager"])).map(
        tuple
    ),
)


def _through_json(result: ProfileResult) -> ProfileResult:
    loaded = parse_envelope(json.loads(dumps(result, command="test", environment={})))
    assert isinstance(loaded.result, ProfileResult)
    return loaded.result


@given(settings_strategy)
def test_the_settings_round_trip_through_the_results_json(settings):
    result = dataclasses.replace(fixture("profile"), settings=settings)
    back = _through_json(result)
    assert back.settings == settings
    assert isinstance(back.settings.hf_config, tuple) and isinstance(back.settings.shape, Shape)
    assert back == result


def test_the_saved_json_holds_the_settings_nested():
    settings = StepSettings("tiny", "cpu", "float32", Shape(2, 64, "decode", 100, 8), 1, 5, 3, 2, ("a=1",))
    saved = json.loads(dumps(dataclasses.replace(fixture("profile"), settings=settings)))["result"]
    assert saved["settings"] == {
        "model": "tiny", "device": "cpu", "dtype": "float32",
        "shape": {"batch": 2, "seq_len": 64, "mode": "decode", "context": 100, "new_tokens": 8},
        "warmup": 1, "reps": 5, "runs": 3, "threads": 2, "hf_config": ["a=1"],
    }  # fmt: skip


def test_a_result_saved_before_the_settings_gets_them_from_its_fields():
    data = fixture("profile").to_dict()
    data.pop("settings")
    old = ProfileResult.from_dict(data)
    settings = old.settings
    assert settings is not None
    assert (settings.model, settings.device, settings.dtype) == (old.model, old.device, old.dtype)
    assert (settings.warmup, settings.reps, settings.runs, settings.threads) == (
        old.warmup, old.reps, old.runs, old.threads,
    )  # fmt: skip
    assert settings.mode == old.mode and settings.shape.batch == old.batch
    assert settings.shape.seq_len == old.seq_len and settings.hf_config == ()
    # a step without token inputs (a factory's) or a mode without a context: the defaults
    none = ProfileResult.from_dict({**data, "batch": None, "seq_len": None, "context": None})
    assert none.settings is not None and none.settings.shape == dataclasses.replace(Shape(), mode=old.mode)


def test_the_run_key_is_read_from_the_settings():
    result = dataclasses.replace(
        fixture("profile"),
        device_name="AMD EPYC 7B13",
        matmul_precision="ieee",
        settings=StepSettings("tiny", "cpu", "bfloat16", threads=3),
    )
    key = RunKey.of(result)
    assert key == result.run_key()
    assert key == RunKey("cpu", "AMD EPYC 7B13", "bfloat16", 3, "ieee")
    assert key.device_slug() == "cpu-amd-epyc-7b13-3t-bfloat16"
    gpu = dataclasses.replace(result, settings=StepSettings("tiny", "cuda:0", "float32"))
    assert RunKey.of(gpu).device_kind == "cuda" and RunKey.of(gpu).threads is None


def test_at_changes_the_shape_only():
    base = StepSettings("tiny", "cpu", "float32", Shape(new_tokens=8), warmup=1, reps=2, threads=1)
    point = base.at(mode="decode", batch=4, context=300)
    assert point.shape == Shape(4, 128, "decode", 300, 8)
    assert dataclasses.replace(point, shape=base.shape) == base
    assert point.mode == "decode"
    with pytest.raises(TypeError):
        base.at(depth=3)


# ----------------------------------------------------------------------------- one load


#: the places that profile a model step; each makes one StepSettings and calls load(settings)
#: (``profile``'s, for the CLI and the API alike, is model_profile.run of its request)
STEP_SITES = {
    "infer_opt/profilers/model_profile.py",
    "infer_opt/profilers/validate.py",
    "infer_opt/profilers/profile_tp.py",
}


def _calls(name: str) -> dict[str, list[ast.Call]]:
    out: dict[str, list[ast.Call]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if called == name:
                    out.setdefault(str(path.relative_to(ROOT)), []).append(node)
    return out


def test_every_profiled_step_is_built_by_load_from_one_settings_object():
    profiled = _calls("profile_model")
    assert set(profiled) == STEP_SITES
    for path, calls in profiled.items():
        for call in calls:
            # the step and its fit; no shape, timing or device spelled out at the call
            assert len(call.args) == 2, path
            assert {k.arg for k in call.keywords} <= {"trace_path", "progress"}, path
    # each builds its step with model_profile.load (a rank: in load_shard, then splits it)
    loads = {
        path
        for path, calls in _calls("load").items()
        if any(ast.unparse(c.func) in ("model_profile.load", "mp.load") for c in calls)
    }
    others = STEP_SITES - {"infer_opt/profilers/model_profile.py"}  # whose run calls its own load
    assert loads >= others
    # the model of a profiled step is built in one place: model_profile.load
    built = _calls("load_model")
    assert "infer_opt/profilers/model_profile.py" in built
    assert not set(built) & others
    assert not [path for path in built if path.startswith("infer_opt/cli/")]
    # and no settings travel as a (reps, warmup, runs) tuple
    source = (PACKAGE / "profilers" / "model_profile.py").read_text()
    assert "settings=(reps" not in source and "reps, warmup, runs = settings" not in source


# ----------------------------------------------------------------------------- the option group

SHAPE_FLAGS = ("--batch", "--seq-len", "--mode", "--context", "--new-tokens")


def _options(command: str) -> dict[str, object]:
    from infer_opt.cli.app import _load_command

    params = _load_command(command).params
    return {opt: p for p in params for opt in p.opts if opt in SHAPE_FLAGS}


@pytest.mark.parametrize("command", ["predict", "validate"])
def test_profile_predict_and_validate_take_the_same_shape_options(command):
    profile, other = _options("profile"), _options(command)
    assert set(profile) == set(other) == set(SHAPE_FLAGS)
    for flag in SHAPE_FLAGS:
        a, b = profile[flag], other[flag]
        if flag == "--mode" and command == "validate":
            assert b.multiple and a.type.choices == b.type.choices  # repeatable, the same modes
            continue
        assert (a.help, repr(a.type)) == (b.help, repr(b.type)), flag
    help_text = invoke(command, "--help").stdout
    assert all(flag in help_text for flag in SHAPE_FLAGS)


def test_validate_keeps_its_own_defaults():
    options = _options("validate")
    assert options["--new-tokens"].default == 8 and options["--mode"].default is None
    assert _options("profile")["--new-tokens"].default == 32
