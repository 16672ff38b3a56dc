"""Numbers a view shows are fields: those a result derives from its own rows when it is built
(``init=False``) are written by ``--json``, and a file saved before they were carried gets them
on load."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from infer_opt.registry import KINDS
from tests.reports.fixtures import fixture


def _older(obj: Any, data: Any) -> Any:
    """``data`` (a saved ``obj``) without the fields ``obj`` derives: as an older file holds it."""
    if dataclasses.is_dataclass(obj):
        fields = [f for f in dataclasses.fields(obj) if f.init and f.name in data]
        return {f.name: _older(getattr(obj, f.name), data[f.name]) for f in fields}
    if isinstance(obj, (list, tuple)) and isinstance(data, list):
        return [_older(o, d) for o, d in zip(obj, data, strict=True)]
    return data


def _derived(obj: Any) -> set[str]:
    if dataclasses.is_dataclass(obj):
        own = {f.name for f in dataclasses.fields(obj) if not f.init}
        return own.union(*(_derived(getattr(obj, f.name)) for f in dataclasses.fields(obj)))
    if isinstance(obj, (list, tuple)):
        return set().union(*(_derived(o) for o in obj))
    return set()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_file_without_the_derived_fields_loads_them(kind):
    result = fixture(kind)
    loaded = type(result).from_dict(_older(result, result.to_dict()))
    assert loaded.to_dict() == result.to_dict()  # (NaN as "nan"; 3 and 3.0 alike)


def test_the_json_of_a_trace_a_calibration_and_amdahl_carries_what_their_views_show():
    assert {"kernel_time_s", "gpu_time_s", "step_time_median_s", "bounds"} <= set(fixture("trace").to_dict())
    assert {"shape_count", "point_spread", "out_of_order_share"} <= _derived(fixture("calibration"))
    amdahl = fixture("amdahl").to_dict()
    assert amdahl["untouched_share_after"] == pytest.approx(amdahl["untouched_fraction"] / amdahl["new_time"])
