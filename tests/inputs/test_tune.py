"""Saved ``trace`` results as the step-cost input of ``tune capture-sizes``: one point per trace
(its median ProfilerStep span, at the batch size given as FILE@B), two batch sizes at least."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.cost_models import capture_sizes as cs
from infer_opt.errors import InvalidInput
from infer_opt.inputs import tune as ti
from infer_opt.results import save_result
from infer_opt.results.trace import Peaks, RankTrace, StepTimeline, TraceResult
from tests.helpers import assert_one_line_error, invoke

MS = 1e-3


def _window(step, span_s, start_s=0.0):
    busy = 0.8 * span_s
    return StepTimeline(
        step=step, start_s=start_s, span_s=span_s, busy_s=busy, idle_s=span_s - busy,
        compute_s=busy, comm_s=0.0, memcpy_s=0.0, sync_s=0.0, overlap_fraction=0.0, kernels=10,
    )  # fmt: skip


def _trace(*ranks_spans, numbered=True):
    """A hand-made trace result: one rank per list of step spans (seconds)."""
    ranks = []
    for r, spans in enumerate(ranks_spans):
        steps = tuple(_window(i if numbered else None, s, start_s=0.01 * i) for i, s in enumerate(spans))
        rank = RankTrace(
            rank=r, path=f"rank{r}.json", steps=steps, idle_fraction=0.2, compute_fraction=0.8,
            non_compute_fraction=0.0, overlap_fraction=0.0, step_time_median_s=float(np.median(spans)),
        )  # fmt: skip
        ranks.append(rank)
    return TraceResult(
        files=tuple(r.path for r in ranks),
        device_name="NVIDIA H100 80GB HBM3",
        device_source="deviceProperties",
        peaks=Peaks(flops_per_s={"bf16": 989e12}, bytes_per_s=3.35e12, source="datasheet:H100"),
        ranks=tuple(ranks),
        ops=(),
        coverage=(),
    )


def _save(tmp_path, name, result):
    path = tmp_path / name
    save_result(path, result)
    return path


def test_step_time_worked_numbers(tmp_path):
    # rank 0: steps of 4, 5, 6 ms → median 5 ms; rank 1: 5, 7 ms → 6 ms; the step is the slower rank's
    t = _trace([4 * MS, 5 * MS, 6 * MS], [5 * MS, 7 * MS])
    assert ti.trace_step_time(t, tmp_path / "t.json") == pytest.approx(6 * MS)


def test_windows_that_are_not_profiler_steps_are_refused(tmp_path):
    whole = _trace([30 * MS], numbered=False)  # the trace analysed as one window: no per-step time
    with pytest.raises(InvalidInput, match="no ProfilerStep"):
        ti.trace_step_time(whole, tmp_path / "t.json")


def test_two_traces_make_a_curve(tmp_path):
    a = _save(tmp_path, "t8.json", _trace([5 * MS, 5 * MS, 5 * MS]))
    b = _save(tmp_path, "t32.json", _trace([7 * MS, 8 * MS, 9 * MS]))
    curve, label, notices = ti.read_costs([(b, 32), (a, 8)])
    assert curve.sizes.tolist() == [8, 32]
    assert curve.times == pytest.approx([5 * MS, 8 * MS])
    # log-log between them: t(16) = sqrt(5 · 8) ms (16 is the geometric mean of 8 and 32)
    assert float(curve([16])[0]) == pytest.approx(math.sqrt(5 * 8) * MS)
    assert label.startswith("measured: 2 trace results (8: 5 ms, 32: 8 ms;") and notices == ()


def test_one_trace_is_one_point_not_a_curve(tmp_path):
    a = _save(tmp_path, "t8.json", _trace([5 * MS]))
    with pytest.raises(InvalidInput, match="one point of the cost curve") as exc:
        ti.read_costs([(a, 8)])
    assert "only batch 8 measured (5 ms per step)" in str(exc.value)
    with pytest.raises(InvalidInput, match="one point"):  # a trace given without its batch size
        ti.read_costs([(a, None)])


def test_bad_trace_sources(tmp_path):
    a = _save(tmp_path, "t8.json", _trace([5 * MS]))
    b = _save(tmp_path, "t16.json", _trace([6 * MS]))
    with pytest.raises(InvalidInput, match="second trace result at batch 8"):
        ti.read_costs([(a, 8), (b, 8)])
    table = tmp_path / "cost.csv"
    table.write_text("batch_size,time_ms\n1,2\n8,3\n")
    with pytest.raises(InvalidInput, match="FILE@B takes a saved trace result"):
        ti.read_costs([(a, 8), (table, 16)])
    with pytest.raises(InvalidInput, match="each must be a trace result"):
        ti.read_costs([(a, 8), (table, None)])
    other = tmp_path / "other.json"
    other.write_text('{"schema": "infer-opt/amdahl", "version": 1, "result": {}}')
    with pytest.raises(InvalidInput, match="holds a 'amdahl' result; expected a saved trace result"):
        ti.read_costs([(a, 8), (other, 16)])
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": "infer-opt/trace", "version": 1, "result": {"files": 3}}')
    with pytest.raises(InvalidInput, match=r"broken\.json field files"):
        ti.read_costs([(a, 8), (broken, 16)])


@settings(max_examples=30, deadline=None)
@given(
    st.dictionaries(
        st.integers(1, 4096),
        st.lists(st.floats(1e-4, 1.0), min_size=1, max_size=5),
        min_size=2,
        max_size=5,
    )
)
def test_trace_points_equal_the_table_of_their_medians(tmp_path_factory, points):
    folder = tmp_path_factory.mktemp("traces")
    sources = [(_save(folder, f"t{b}.json", _trace(spans)), b) for b, spans in points.items()]
    curve = ti.read_costs(sources)[0]
    want = cs.cost_curve(list(points), [float(np.median(s)) for s in points.values()])
    assert curve.sizes.tolist() == want.sizes.tolist()
    assert curve.times == pytest.approx(want.times, rel=1e-12)


def test_cli_trace_costs_match_the_same_table(tmp_path):
    batches = tmp_path / "batches.csv"
    batches.write_text("batch_size,count\n1,50\n3,30\n7,20\n13,15\n30,10\n")
    a = _save(tmp_path, "t1.json", _trace([2 * MS]))
    b = _save(tmp_path, "t16.json", _trace([2.8 * MS, 2.8 * MS]))
    c = _save(tmp_path, "t64.json", _trace([4.5 * MS]))
    table = tmp_path / "cost.csv"
    table.write_text("batch_size,time_ms\n1,2\n16,2.8\n64,4.5\n")
    base = ["tune", "capture-sizes", "--batches", str(batches), "--max-captures", "2"]
    base += ["--eager-overhead", "1ms", "--current", "1,2,4,8", "--json"]
    traced = invoke(*base, "--cost-file", f"{a}@1", "--cost-file", f"{b}@16", "--cost-file", f"{c}@64")
    tabled = invoke(*base, "--cost-file", str(table))
    assert traced.exit_code == 0 and tabled.exit_code == 0, traced.stderr + tabled.stderr
    r, t = traced.json()["result"], tabled.json()["result"]
    assert r["capture_sizes"] == t["capture_sizes"]
    assert r["expected_step_s"] == pytest.approx(t["expected_step_s"])
    assert r["inputs"]["cost"].startswith("measured: 3 trace results")
    one = invoke(*base, "--cost-file", f"{a}@1")
    assert_one_line_error(one, "--cost-file", "one point of the cost curve")
    bad = invoke(*base, "--cost-file", f"{a}@0", "--cost-file", f"{b}@16")
    assert_one_line_error(bad, "--cost-file", "batch size the trace ran at")


def test_cli_speculative_takes_trace_costs(tmp_path):
    target = [_save(tmp_path, f"target{n}.json", _trace([t * MS])) for n, t in ((1, 10), (64, 12), (512, 40))]
    draft = [_save(tmp_path, f"draft{n}.json", _trace([t * MS])) for n, t in ((1, 1), (512, 20))]
    (tmp_path / "t.csv").write_text("tokens,time_ms\n1,10\n64,12\n512,40\n")
    (tmp_path / "d.csv").write_text("batch_size,time_ms\n1,1\n512,20\n")
    base = ["tune", "speculative", "--alphas", "0.8,0.7", "--batch-sizes", "1,8,64", "--json"]
    traced = invoke(
        *base, "--target-cost-file", f"{target[0]}@1", "--target-cost-file", f"{target[1]}@64",
        "--target-cost-file", f"{target[2]}@512",
        "--draft-cost-file", f"{draft[0]}@1", "--draft-cost-file", f"{draft[1]}@512",
    )  # fmt: skip
    tabled = invoke(
        *base, "--target-cost-file", str(tmp_path / "t.csv"), "--draft-cost-file", str(tmp_path / "d.csv")
    )
    assert traced.exit_code == 0 and tabled.exit_code == 0, traced.stderr + tabled.stderr
    r, t = traced.json()["result"], tabled.json()["result"]
    assert [row["k"] for row in r["table"]] == [row["k"] for row in t["table"]]
    assert [row["speedup"] for row in r["table"]] == pytest.approx([row["speedup"] for row in t["table"]])
    assert r["inputs"]["target_cost"].startswith("measured: 3 trace results")
    one = invoke(*base, "--target-cost-file", str(tmp_path / "t.csv"), "--draft-cost-file", f"{draft[0]}@1")
    assert_one_line_error(one, "--draft-cost-file", "one point of the cost curve")


def test_cli_eager_cost_takes_eager_traces_like_its_table(tmp_path):
    batches = tmp_path / "batches.csv"
    batches.write_text("batch_size,count\n1,50\n3,30\n7,20\n13,15\n30,10\n100,5\n")
    cost = tmp_path / "cost.csv"
    cost.write_text("batch_size,time_ms\n1,2\n16,2.8\n128,6\n")
    eager = tmp_path / "eager.csv"
    eager.write_text("batch_size,time_ms\n1,5\n128,9\n")
    e1 = _save(tmp_path, "e1.json", _trace([5 * MS]))
    e128 = _save(tmp_path, "e128.json", _trace([9 * MS]))
    base = [
        "tune",
        "capture-sizes",
        "--batches",
        str(batches),
        "--cost-file",
        str(cost),
        "--max-captures",
        "2",
    ]
    base += ["--current", "1,2,4,8", "--json"]
    traced = invoke(*base, "--eager-cost-file", f"{e1}@1", "--eager-cost-file", f"{e128}@128")
    tabled = invoke(*base, "--eager-cost-file", str(eager))
    assert traced.exit_code == 0 and tabled.exit_code == 0, traced.stderr + tabled.stderr
    r, t = traced.json()["result"], tabled.json()["result"]
    assert r["capture_sizes"] == t["capture_sizes"]
    assert r["expected_step_s"] == pytest.approx(t["expected_step_s"])
    assert_one_line_error(invoke(*base, "--eager-cost-file", f"{e1}@1"), "--eager-cost-file", "one point")


def test_one_trace_result_at_two_batch_sizes_is_refused(tmp_path):
    """Issue 42: one trace result given at two batch sizes became a flat cost curve."""
    a = _save(tmp_path, "t8.json", _trace([5 * MS]))
    with pytest.raises(InvalidInput, match="also given at batch 8"):
        ti.read_costs([(a, 8), (a, 16)])
