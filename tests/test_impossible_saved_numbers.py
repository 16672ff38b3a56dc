"""Impossible numbers in a saved result (issue 42, class 1): any numeric field of any kind set
to NaN, ±inf, a negative or 1e308 is refused when the file is read, naming the field — or, where
the field's name allows it (a gain may be negative, a rate infinite), the result still renders
without a traceback. A time is finite, >= 0 and within 1e10 s; a rate >= 0; a count finite."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.errors import BadField
from infer_opt.reports.render import render
from infer_opt.results import parse_envelope
from infer_opt.results.base import _number_rule
from tests.reports.fixtures import FIXTURES, fixture

KINDS = sorted(FIXTURES)
IMPOSSIBLE = ["nan", "inf", "-inf", -1, -1.5, 1e308]


def _saved(kind: str) -> dict:
    result = fixture(kind)
    return json.loads(json.dumps({"schema": f"infer-opt/{kind}", "version": 1, "result": result.to_dict()}))


def _numbers(node: Any, path: tuple = ()) -> list[tuple]:
    """The path of every number (or saved non-finite word) in a saved result."""
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _numbers(v, (*path, k))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _numbers(v, (*path, i))]
    numeric = isinstance(node, (int, float)) and not isinstance(node, bool)
    return [path] if numeric or node in ("inf", "-inf", "nan") else []


def _field_name(path: tuple) -> str:
    return next(str(p) for p in reversed(path) if isinstance(p, str))


def _set(data: dict, path: tuple, value: Any) -> None:
    node = data["result"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _in_dataclass(kind: str, path: tuple) -> bool:
    """Whether the number at ``path`` is a dataclass field (or an item of one): not a value of
    a free-form mapping (settings, a histogram), which no annotation describes."""
    node: Any = fixture(kind)
    last = max(i for i, p in enumerate(path) if isinstance(p, str))
    for p in path[:last]:
        node = node[p] if isinstance(p, int) or isinstance(node, dict) else getattr(node, p)
    # a field the result derives when built (init=False) is written, never read back
    fields = {f.name for f in dataclasses.fields(node) if f.init} if dataclasses.is_dataclass(node) else set()
    return path[last] in fields  # (not a key to_dict adds for scripts, read back from no field)


PATHS = [
    (kind, path) for kind in KINDS for path in _numbers(_saved(kind)["result"]) if _in_dataclass(kind, path)
]


def _where(path: tuple) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.sampled_from(PATHS), st.sampled_from(IMPOSSIBLE))
def test_an_impossible_number_in_any_field_is_refused_by_name_or_renders(case, value):
    kind, path = case
    data = _saved(kind)
    _set(data, path, value)
    try:
        loaded = parse_envelope(data, source="f.json")
    except BadField as err:
        assert str(err).startswith("f.json: field "), str(err)
        return
    number = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}.get(value, value)
    # accepted: the field's name allows it (or the field is not numeric by its annotation)
    assert _number_rule(_field_name(path), float(number)) is None, (kind, _where(path), value)
    render(loaded.result, "markdown")


@pytest.mark.parametrize(
    ("name", "value", "refused"),
    [
        ("median_s", -1.0, True),
        ("step_median_s", 1e308, True),
        ("time_s", float("nan"), True),
        ("wall_s", float("inf"), True),
        ("net_gain_s", -2.0, False),  # a gain may be negative
        ("measured_host_s", -0.0246, False),  # step less its ops: a difference (validate, under load)
        ("predicted_host_s", -0.0246, True),
        ("bytes_per_s", float("inf"), False),  # a rate of work not done
        ("bytes_per_s", -5.0, True),
        ("bytes_per_s", float("nan"), True),
        ("calls", -1, True),
        ("flops", 1e308, True),
        ("rel_error", -0.3, False),
        ("ratio", 1e308, True),
    ],
)
def test_the_rule_per_field_name(name, value, refused):
    assert (_number_rule(name, value) is not None) == refused


def test_a_step_median_of_minus_one_second_is_refused_naming_it():
    """The example of the issue: a saved trace result whose step median is -1 s compared as
    "Step ratio -4065x"."""
    data = _saved("trace")
    _set(data, ("ranks", 0, "step_time_median_s"), -1.0)
    with pytest.raises(BadField, match=r"field ranks\[0\]\.step_time_median_s: must be a finite time >= 0"):
        parse_envelope(data, source="f.json")


@pytest.mark.parametrize(
    "features", [[-512.0, 64.0, 64.0], [1e400, 64.0, 64.0], [float("nan"), 64.0, 64.0], ["512", 64.0, 64.0]]
)
def test_a_calibration_whose_grid_holds_a_negative_or_absurd_size_is_refused(features):
    """Issue 42's leftover: ``predict`` took a calibration whose shapes' features were negative
    without a word; a grid point's features are sizes (M, N, K, tokens, ...)."""
    data = _saved("calibration")
    _set(data, ("families", 0, "points", 0, "features"), features)
    with pytest.raises(BadField, match=r"families\[0\]\.points\[0\]\.features"):
        parse_envelope(data, source="f.json")
