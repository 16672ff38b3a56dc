"""Traces nobody has seen: any field of any event may hold any JSON value, and the analysis
either works or refuses in one line (InvalidInput), never a traceback — through every stage
and renderer. Hypothesis mutates the hand-made model step; named cases pin what it found."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infer_opt.errors import InvalidInput
from infer_opt.reports.render import render
from infer_opt.trace.analyze import analyze

MODEL = Path(__file__).resolve().parent / "fixtures" / "model_step.json"
BASE = json.loads(MODEL.read_text())
ODD = [0, -1, 1.5, "7", "x", None, [], {}, 1e308, -1e308, True, [1, 2], [[2, 3], [3, 4]], [[-2, 3]],
       [[1 << 70]], [[1e9, 1e9]], "c10::BFloat16", [None], [[None]], ["", ""], "True", [[1] * 12],
       1 << 70, -(1 << 70), "1" * 30]  # fmt: skip
ARG_KEYS = ["Input Dims", "Input type", "Input Strides", "Concrete Inputs", "correlation", "stream",
            "device", "In msg nelems", "Out msg nelems", "Group size", "dtype", "Collective name",
            "External id"]  # fmt: skip
EVENT_KEYS = ["ts", "dur", "name", "cat", "ph", "pid", "tid", "args"]


def _analyze_all_ways(doc: dict, tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    for hta in (False, True):
        try:
            result = analyze([path], hta_compat=hta).result
        except InvalidInput:
            return
        for fmt in ("markdown", "csv", "json", "console"):
            render(result, fmt)


_MUTATION = st.tuples(
    st.integers(0, len(BASE["traceEvents"]) - 1),
    st.sampled_from(["args", "event"]),
    st.sampled_from(ARG_KEYS + EVENT_KEYS),
    st.sampled_from(ODD),
)


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(_MUTATION, min_size=1, max_size=12))
def test_any_value_in_any_field_is_analyzed_or_refused_in_one_line(tmp_path, mutations):
    doc = copy.deepcopy(BASE)
    for index, where, key, value in mutations:
        event = doc["traceEvents"][index]
        if where == "args" and isinstance(event.get("args"), dict):
            event["args"][key] = value
        else:
            event[key if key in EVENT_KEYS else "args"] = value
    _analyze_all_ways(doc, tmp_path)


@pytest.mark.parametrize(
    ("index", "key", "value"),
    [
        (None, "cat", ["kernel"]),  # an unhashable category
        ("gemm", "stream", 1 << 70),  # ids beyond int64
        ("gemm", "device", "gpu-a"),  # a string device id
        ("addmm", "Input Dims", 2.5),  # shapes that are not lists
        ("addmm", "Input Dims", [[-4, 4096], [4096, 4096]]),  # a negative dimension
        ("nccl", "In msg nelems", 1 << 70),  # a message beyond any memory
        ("add", "Input type", 7),
    ],
)
def test_found_cases(tmp_path, index, key, value):
    doc = copy.deepcopy(BASE)
    names = {"gemm": "sm90_", "addmm": "aten::addmm", "nccl": "ncclDevKernel", "add": "aten::add"}
    for e in doc["traceEvents"]:
        if index is None:
            e[key] = value
            break
        if e["name"].startswith(names[index]):
            e["args"][key] = value
    _analyze_all_ways(doc, tmp_path)
