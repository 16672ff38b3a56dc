"""``infer_opt.load_trace``: the trace analysis from Python, its DataFrames whole, and its bad
input refused as the CLI refuses it."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

import infer_opt
from infer_opt.errors import InvalidInput

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MODEL = FIXTURES / "model_step.json"


@pytest.fixture(scope="module")
def loaded():
    return infer_opt.load_trace(MODEL)


def test_frames_are_the_whole_tables(loaded):
    assert len(loaded.ops) == len(loaded.result.ops)
    assert list(loaded.ops["name"]) == [g.name for g in loaded.result.ops]
    assert len(loaded.steps) == 2 and set(loaded.steps["step"]) == {1, 2}
    assert list(loaded.ranks["rank"]) == [0]
    frame = loaded.to_frame()  # the main table, as the result gives it (every row)
    assert frame.equals(loaded.result.to_frame()) and len(frame) == len(loaded.result.ops)


def test_kernels_frame_has_every_gpu_event_of_the_steps_and_sums_to_the_ops(loaded):
    k = loaded.kernels
    assert len(k) == 16  # 8 GPU events per step
    assert math.fsum(k["dur_us"]) / 1e6 == pytest.approx(math.fsum(g.time_s for g in loaded.result.ops))
    assert set(k["kind"]) == {"kernel", "memcpy", "memset"}
    assert set(k[k["name"].str.startswith("nccl")]["category"]) == {"communication"}
    assert set(k[k["name"].str.contains("gemm")]["op"]) == {"aten::addmm"}


def test_more_groups_than_a_display_shows_are_all_in_the_frame(tmp_path):
    import json

    doc = json.loads(MODEL.read_text())
    events = doc["traceEvents"]
    base = next(e for e in events if e["name"] == "aten::add")
    kernel = next(e for e in events if e["name"] == "vectorized_elementwise_kernel<add>")
    for i in range(30):  # 30 more add groups of distinct shapes in step 2, each with its kernel
        ts = 1150 + 1.6 * i
        dims = [[i + 1, 8], [i + 1, 8], []]
        op = {
            **base,
            "ts": ts,
            "dur": 1.5,
            "args": {**base["args"], "External id": 900 + i, "Input Dims": dims},
        }
        launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1,
                  "ts": ts + 0.2, "dur": 0.5, "args": {"correlation": 1000 + i}}  # fmt: skip
        k = {**kernel, "ts": 1175 + 0.1 * i, "dur": 0.05, "args": {**kernel["args"], "correlation": 1000 + i}}
        events += [op, launch, k]
    (tmp_path / "t.json").write_text(json.dumps(doc))
    t = infer_opt.load_trace(tmp_path / "t.json")
    assert len(t.result.ops) == 7 + 30
    assert len(t.ops) == 37 and len(t.kernels) == 16 + 30


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"steps": "x"}, "steps"),  # the parameter, not the CLI's --steps (issue 42)
        ({"device": "tpu-v9"}, "device"),
        ({"peak_flops": -1.0}, "peak_flops"),
        ({"peak_bandwidth": float("nan")}, "peak_bandwidth"),
        ({"matmul_fraction": 0}, "matmul_fraction"),
        ({"causal_flops": "quarter"}, "causal_flops"),
    ],
)
def test_bad_arguments_raise_invalid_input_naming_them(kwargs, param):
    with pytest.raises(InvalidInput, match=param) as caught:
        infer_opt.load_trace(MODEL, **kwargs)
    assert caught.value.option == param


def test_missing_and_empty_inputs(tmp_path):
    with pytest.raises(InvalidInput, match="does not exist"):
        infer_opt.load_trace(tmp_path / "nope.json")
    with pytest.raises(InvalidInput, match="at least one"):
        infer_opt.load_trace([])
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(InvalidInput, match=r"x\.json"):
        infer_opt.load_trace(tmp_path / "x.json")


def test_load_trace_imports_neither_torch_nor_pandas_until_a_frame_is_asked_for():
    code = (
        "import sys, infer_opt; t = infer_opt.load_trace(sys.argv[1]); "
        "print('torch' in sys.modules, 'pandas' in sys.modules); t.ops; print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(MODEL)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "True"]


def test_critical_path_idle_causes_what_ifs_and_replay_frames():
    t = infer_opt.load_trace(MODEL)
    cp = t.critical_path
    for (_, step), rows in cp.groupby(["rank", "step"]):
        (s,) = [s for s in t.result.ranks[0].steps if s.step == step]
        assert rows.time_s.sum() == pytest.approx(s.replayed_span_s)
    assert {"host", "launch", "memcpy", "sync_wait", "comm"} <= set(cp.cause)
    assert list(t.idle_causes.columns) == ["cause", "time_s", "fraction"]
    assert {"amdahl_speedup", "replayed_speedup", "replayed_step_s"} <= set(t.what_ifs.columns)
    same = t.replay()
    assert (same.replayed_ts_us - same.ts_us).abs().max() < 1e-6
    faster = t.replay("host=2x")
    assert (faster.replayed_end_us <= faster.end_us + 1e-9).all()
    assert faster.replayed_end_us.max() < faster.end_us.max()
    with pytest.raises(InvalidInput, match="--what-if"):
        t.replay("nothing*=0.5x")
    with pytest.raises(InvalidInput, match="rank"):
        t.replay(rank=3)


_TOTALS = ("step_time_median_s", "step_time_spread_s", "kernel_time_s", "gpu_time_s", "modelled_fraction",
           "family_fraction", "bounds")  # fmt: skip


def test_json_carries_the_totals_the_view_shows_and_an_older_file_gets_them_on_load(loaded):
    from infer_opt.results.trace import TraceResult

    r = loaded.result
    data = r.to_dict()
    assert data["kernel_time_s"] == pytest.approx(math.fsum(g.time_s for g in r.ops))
    assert data["gpu_time_s"] == pytest.approx(math.fsum(c.time_s for c in r.coverage))
    assert [g["share"] for g in data["ops"]] == pytest.approx([g.time_s / r.kernel_time_s for g in r.ops])
    assert data["bounds"] and data["bounds"][0]["of_steps"] == 2
    older = {k: v for k, v in data.items() if k not in _TOTALS}
    older["ops"] = [{k: v for k, v in g.items() if k != "share"} for g in data["ops"]]
    assert TraceResult.from_dict(older) == r


def test_the_step_time_of_several_ranks_is_the_median_of_theirs(loaded):
    from dataclasses import replace

    from infer_opt.reports.trace import build_view

    rank = loaded.result.ranks[0]
    ranks = tuple(
        replace(rank, rank=i, step_time_median_s=t, step_time_spread_s=s)
        for i, (t, s) in enumerate([(1e-3, 1e-5), (2e-3, 3e-5), (10e-3, None)])
    )
    r = replace(loaded.result, ranks=ranks, slowest_rank=2)
    assert (r.step_time_median_s, r.step_time_spread_s) == (2e-3, 3e-5)
    assert dict(build_view(r).summary)["Step time (median)"] == "2 ms (spread 30 µs)"
