"""Issue 33 class 8: the Python API refuses what the CLI refuses, naming the parameter."""

from __future__ import annotations

import pytest

import infer_opt
from infer_opt.errors import InvalidInput

BAD = [
    ("profile", {"batch": 0}, "batch"),
    ("profile", {"batch": -1}, "batch"),
    ("profile", {"batch": "2"}, "batch"),
    ("profile", {"batch": 1.5}, "batch"),
    ("profile", {"batch": True}, "batch"),
    ("profile", {"seq_len": 0}, "seq_len"),
    ("profile", {"context": -1}, "context"),  # 0 is the CLI's least, as every command
    ("profile", {"new_tokens": 0}, "new_tokens"),
    ("profile", {"reps": 0}, "reps"),
    ("profile", {"warmup": -1}, "warmup"),
    ("profile", {"reps": 1 << 40}, "reps"),
    ("kernels", {"reps": 0}, "reps"),
    ("kernels", {"reps": "many"}, "reps"),
    ("kernels", {"warmup": -1}, "warmup"),
    ("amortize_buckets", {"path": "/dev/zero"}, "path"),
    # wrong types: named before any work, never "the model raised TypeError" or AttributeError
    ("profile", {"model": 3}, "model"),
    ("profile", {"mode": "nosuch"}, "mode"),
    ("profile", {"device": 5}, "device"),
    ("profile", {"device": "tpu"}, "device"),
    ("profile", {"dtype": "float99"}, "dtype"),
    ("profile", {"trace": 5}, "trace"),
    ("profile", {"roofline": 3}, "roofline"),
    ("profile", {"model": "nosuch"}, "model"),
    ("profile", {"hf_config": [3]}, "hf_config"),
    ("profile", {"model": "hf:gpt2", "hf_config": ["n_layers=2"]}, "hf_config"),
    ("kernels", {"suite": "nosuch"}, "suite"),
    ("kernels", {"only": [3]}, "only"),
    ("kernels", {"only": "no_such_kernel"}, "only"),
    ("kernels", {"device": "tpu"}, "device"),
    ("kernels", {"l2_flush": "yes"}, "l2_flush"),
    ("fit_roofline", {"measurements": 5}, "measurements"),
    ("fit_roofline", {"peak_flops": "fast"}, "peak_flops"),
    ("fit_roofline", {"measurements": "/no/such.csv"}, "measurements"),
    ("buckets", {"file": 5, "bounds": [8]}, "file"),
    ("buckets", {"file": [1, 2, 3], "bounds": "8,4"}, "bounds"),
    ("buckets", {"file": [1, 2], "bounds": [8], "batch_size": 0}, "batch_size"),
    ("buckets", {"file": [1, 2], "optimize": "2"}, "optimize"),
    ("buckets", {"file": [1, 2], "optimize": 0}, "optimize"),
    ("acceptance", {"p": None, "q": [0.5, 0.5]}, "p"),
    ("acceptance", {"p": "ab", "q": [0.5, 0.5]}, "p"),
    ("amdahl", {"fraction": "0.4", "speedup": 2}, "fraction"),
    ("amdahl", {"fraction": 0.4, "speedup": 2, "target_speedup": "x"}, "target_speedup"),
    ("load", {"path": 5}, "path"),
    ("load", {"path": "/dev/zero"}, "path"),
    ("load", {"path": "/no/such/result.json"}, "path"),
    ("amortize_buckets", {"path": 5}, "path"),
    # predict: the CLI's checks, named as parameters
    ("predict", {"batch": 0}, "batch"),
    ("predict", {"seq_len": "128"}, "seq_len"),
    ("predict", {"new_tokens": 0}, "new_tokens"),
    ("predict", {"mode": 3}, "mode"),
    ("predict", {"threads": 0}, "threads"),
    ("predict", {"threads": 1 << 12}, "threads"),
    ("predict", {"calibration": 5}, "calibration"),
    ("predict", {"calibration": "/no/such/cal.json"}, "calibration"),
    ("predict", {"sweep": "foo=1"}, "sweep"),
    ("predict", {"sweep": "batch=0"}, "sweep"),
    ("predict", {"sweep": ["batch", 1]}, "sweep"),
    ("predict", {"hf_config": ["n_layer"]}, "hf_config"),
    # load_trace (issue 42): wrong types named as parameters, never a TypeError or a CLI flag
    ("load_trace", {"paths": 3}, "paths"),
    ("load_trace", {"paths": None}, "paths"),
    ("load_trace", {"paths": b"tests/trace/fixtures/model_step.json"}, "paths"),
    ("load_trace", {"paths": [b"tests/trace/fixtures/model_step.json"]}, "paths"),
    ("load_trace", {"paths": [3]}, "paths"),
    ("load_trace", {"paths": "/no/such/trace.json"}, "paths"),
    ("load_trace", {"paths": "tests/trace/fixtures/model_step.json", "steps": 3}, "steps"),
    ("load_trace", {"paths": "tests/trace/fixtures/model_step.json", "steps": "x"}, "steps"),
    ("load_trace", {"paths": "tests/trace/fixtures/model_step.json", "device": 3}, "device"),
    ("load_trace", {"paths": "tests/trace/fixtures/model_step.json", "device": "nosuch"}, "device"),
    ("load_trace", {"paths": "tests/trace/fixtures/model_step.json", "hta_compat": "no"}, "hta_compat"),
    ("load_trace", {"paths": "tests/trace/fixtures/model_step.json", "peak_flops": True}, "peak_flops"),
    ("load_trace", {"paths": "tests/trace/fixtures/model_step.json", "peak_bandwidth": -1}, "peak_bandwidth"),
    (
        "load_trace",
        {"paths": "tests/trace/fixtures/model_step.json", "matmul_fraction": True},
        "matmul_fraction",
    ),
    (
        "load_trace",
        {"paths": "tests/trace/fixtures/model_step.json", "causal_flops": ["half"]},
        "causal_flops",
    ),
    ("load_trace", {"paths": "tests/reports/fixtures/profile.json"}, "paths"),
]


@pytest.mark.parametrize(("name", "kwargs", "param"), BAD)
def test_bad_api_input_raises_invalid_input_naming_the_parameter(name, kwargs, param):
    with pytest.raises(InvalidInput) as caught:
        getattr(infer_opt, name)(**kwargs)
    assert caught.value.option == param


def test_the_api_table_mirrors_the_cli_checks():
    """Every API function that runs work is in the table, with a wrong type and a value out of
    range for its parameters."""
    named = {name for name, _, _ in BAD}
    assert {"profile", "predict", "kernels", "fit_roofline", "buckets", "acceptance", "load"} <= named
    assert len(BAD) >= 55


def _calibration_file(tmp_path, **changes):
    import json

    from infer_opt.results import dumps
    from tests.profilers.synthetic_calibration import synthetic_calibration

    data = json.loads(dumps(synthetic_calibration(families=True)))
    data["result"].update(changes)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"families": None}, "families"), ({"threads": 0}, "threads"), ({"device": "tpu"}, "device")],
)
def test_load_refuses_a_calibration_the_cli_refuses(tmp_path, changes, field):
    from infer_opt.errors import BadField

    path = _calibration_file(tmp_path, **changes)
    with pytest.raises(BadField) as caught:
        infer_opt.load(path)
    assert caught.value.field == field and str(path) in str(caught.value)
    with pytest.raises(InvalidInput) as through_predict:
        infer_opt.predict("tiny", calibration=path)
    assert through_predict.value.option == "calibration" and field in str(through_predict.value)


def test_predict_gives_what_the_cli_gives(tmp_path):
    path = _calibration_file(tmp_path)
    result = infer_opt.predict("tiny", calibration=path, seq_len=16)
    assert result.KIND == "predict" and result.seq_len == 16 and result.step_time_s > 0
    assert len(result.to_frame()) == len(result.ops)


def _top_builders() -> list[str]:
    """The kinds whose view cuts a table of their ``ops`` at a display ``top``."""
    from infer_opt.registry import KINDS
    from tests.reports.fixtures import FIXTURES, fixture

    return [k for k in sorted(FIXTURES) if KINDS[k].top and hasattr(fixture(k), "ops")]


@pytest.mark.parametrize("kind", _top_builders())
def test_to_frame_is_the_whole_table_not_the_displays_top(kind):
    """Was 15 of 25 operator groups: every table of the frame holds every row its result holds."""
    from dataclasses import replace

    from infer_opt.reports.frames import whole_view
    from infer_opt.reports.view import build_view
    from tests.reports.fixtures import fixture

    result = fixture(kind)
    many = [replace(op, name=f"{op.name}#{i}") for i in range(20) for op in result.ops]
    result = replace(result, ops=tuple(many))
    shown = build_view(result).tables
    whole = whole_view(result).tables
    cut = [i for i, t in enumerate(shown) if len(t.rows) < len(whole[i].rows)]
    assert cut, "no table was cut at the display's top"
    for i in cut:
        assert len(whole[i].rows) > 15
        assert len(result.to_frame(table=i)) == len(whole[i].rows)
    if kind in ("profile", "trace"):  # their main table: one row per operator group
        assert len(result.to_frame()) == len(many)


def test_to_frame_of_an_acceptance_holds_every_token():
    result = infer_opt.acceptance([1 / 100] * 100, [1 / 100] * 100)
    assert len(result.to_frame()) == 100
