"""Every saved file is validated whole when it is read (issue 33, class 3): each field of its
annotated type (a null only where the field is optional, a number where a number is meant, a
list of the right length), then the values its type allows but its kind does not (a step of
0 s, a calibration family with no points, a thread count of 0, a device torch has no name
for). One :class:`BadField` naming the file, the field and what is allowed."""

from __future__ import annotations

import dataclasses
import json
import types
import typing

import pytest

from infer_opt.errors import BadField, InvalidInput
from infer_opt.results import Result, load_result, parse_envelope, save_result
from tests.profilers.synthetic_calibration import synthetic_calibration
from tests.reports.fixtures import FIXTURES, fixture

KINDS = sorted(FIXTURES)


def _optional(tp: object) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)


def _saved(result: Result) -> dict:
    envelope = {"schema": f"infer-opt/{result.KIND}", "version": 1, "result": result.to_dict()}
    return json.loads(json.dumps(envelope))


def _required_fields(result: Result) -> list[tuple[str, object]]:
    hints = typing.get_type_hints(type(result))
    fields = [f for f in dataclasses.fields(result) if f.init]
    return [(f.name, hints[f.name]) for f in fields if not _optional(hints[f.name])]


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_reads_back_what_it_saved(kind):
    result = fixture(kind)
    assert parse_envelope(_saved(result)).result == result


@pytest.mark.parametrize("kind", KINDS)
def test_a_null_where_a_field_is_required_names_the_field(kind):
    """Every required field of every kind, set to null: refused, naming it (was a traceback in
    compare and report: ``ops: null``, ``step: null``, ``families: null``)."""
    result = fixture(kind)
    fields = [(n, tp) for n, tp in _required_fields(result) if tp is not typing.Any]
    assert fields
    for name, _ in fields:
        data = _saved(result)
        data["result"][name] = None
        with pytest.raises(BadField) as caught:
            parse_envelope(data, source="f.json")
        assert caught.value.field == name and "null" in str(caught.value), (kind, name, str(caught.value))
        assert str(caught.value).startswith("f.json: field ")


@pytest.mark.parametrize("kind", KINDS)
def test_a_word_where_a_number_is_meant_names_the_field(kind):
    result = fixture(kind)
    numeric = [n for n, tp in _required_fields(result) if tp in (int, float)]
    for name in numeric:
        data = _saved(result)
        data["result"][name] = "two"
        with pytest.raises(BadField, match=rf"field {name}: must be (a number|an integer).*\(got \"two\"\)"):
            parse_envelope(data, source="f.json")


def _calibration(**changes: object) -> dict:
    data = _saved(synthetic_calibration(families=True))
    for path, value in changes.items():
        target = data["result"]
        *parents, last = path.split("__")
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value
    return data


@pytest.mark.parametrize(
    ("changes", "field", "allowed"),
    [
        ({"families": None}, "families", "must be a list, not null"),
        ({"families__0__points__0__features": [1, 2]}, "families[0].points[0].features", "must hold 3"),
        ({"families__0__points": []}, "families[0].points", "at least one measured shape"),
        ({"families__0__rate_flops": 0}, "families[0].rate_flops", "must be > 0"),
        ({"families__0__bandwidth_bytes_per_s": -5}, "families[0].bandwidth_bytes_per_s", "must be > 0"),
        ({"families__0__launch_s": "nan"}, "families[0].launch_s", "finite number >= 0"),
        ({"families__0__state": "lukewarm"}, "families[0].state", "must be one of hot"),
        ({"families__0__points__3__time_s": 0}, "families[0].points[3].time_s", "finite number > 0"),
        ({"roofline__compute_rate_flops": 0}, "roofline.compute_rate_flops", "must be > 0"),
        ({"host__per_op_s": -1e-6}, "host.per_op_s", "finite number >= 0"),
        ({"host__per_module_call_s": "inf"}, "host.per_module_call_s", "finite number >= 0"),
        ({"threads": "two"}, "threads", "must be an integer"),
        ({"threads": 0}, "threads", "must be an integer >= 1"),
        ({"threads": 2.5}, "threads", "must be an integer"),
        ({"threads": True}, "threads", "must be an integer"),
        ({"device": "tpu"}, "device", "must be cpu, cuda or cuda:N"),
        ({"device": 3}, "device", "must be a string"),
        ({"warm_reuse_bytes": None}, "warm_reuse_bytes", "not null"),
    ],
)
def test_a_calibration_is_validated_whole(tmp_path, changes, field, allowed):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(_calibration(**changes)))
    with pytest.raises(BadField) as caught:
        load_result(path)
    line = str(caught.value)
    assert caught.value.field == field and allowed in line and str(path) in line, line
    under = caught.value.under("--calibration", str(path))
    assert isinstance(under, InvalidInput)
    assert str(under).startswith(f"--calibration: {path} field {field}: "), str(under)


def test_the_calibration_reads_back_unchanged(tmp_path):
    calibration = synthetic_calibration(families=True)
    assert load_result(save_result(tmp_path / "c.json", calibration)).result == calibration


@pytest.mark.parametrize(
    ("where", "value", "allowed"),
    [
        (("step", "median_s"), 0.0, "finite number > 0"),
        (("step", "median_s"), -1e-3, "finite number > 0"),
        (("step", "run_medians_s"), [0.0018, 0.0], "finite number > 0"),
        (("step", "samples_s"), [0.001, "nan"], "finite number > 0"),
        (("ops", 0, "time_s"), -1.0, "finite number >= 0"),
        (("ops", 0, "shapes"), None, "not null"),
        (("categories", 0, "run_medians_s"), ["inf"], "finite number >= 0"),
    ],
)
def test_a_profile_with_impossible_times_is_refused(tmp_path, where, value, allowed):
    """A step of 0 s or a run median <= 0 (was "1.81e+12× faster" in compare)."""
    data = _saved(fixture("profile"))
    target = data["result"]
    for part in where[:-1]:
        target = target[part]
    target[where[-1]] = value
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BadField, match=allowed):
        load_result(path)


def test_a_kernel_row_with_a_zero_median_is_refused():
    data = _saved(fixture("kernels"))
    row = next(r for r in data["result"]["rows"] if r["time_s"] is not None)
    row["run_medians_s"] = [row["time_s"], 0]
    with pytest.raises(BadField, match=r"rows\[\d+\]\.run_medians_s\[1\]: must be a finite number > 0"):
        parse_envelope(data, source="k.json")
