"""Every figure of ``trace`` right (issue 41 item 3): each test fixes a class of defect, with
worked numbers on hand-made traces."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.results.trace import OpGroup, Peaks
from infer_opt.trace import roofline as tr
from infer_opt.trace.devices import by_name
from infer_opt.trace.op_costs import op_cost
from infer_opt.trace.ops import TRANSFER, link_bytes, op_groups
from infer_opt.trace.reader import read_trace
from infer_opt.trace.roofline import peaks_for
from tests.trace.gpu_traces import D2H, H2D, to, write_trace

# ------------------------------------------------------------------ copies: one definition


@pytest.mark.parametrize("way", [H2D, D2H])
def test_a_host_copy_row_is_the_tensor_once_over_the_link(tmp_path, way):
    """The class: a copy's formula counts read + write (2 × the tensor); the host link carries
    it once. The MI300X owlv2 ``to`` row showed 148% of the link for a copy at ~47 GB/s."""
    n = 1 << 22  # bf16: 8 MiB
    ev = read_trace(write_trace(tmp_path / "t.json", [to(n, 200.0, copy=way)]))
    peaks = peaks_for(by_name("h100"))
    (g,) = op_groups(ev, peaks=peaks)
    assert g.family == TRANSFER
    assert g.bytes == 2 * n  # the tensor, once
    assert g.achieved_bytes_per_s == pytest.approx(2 * n / 200e-6)  # what the memcpy moved
    assert g.peak_fraction == pytest.approx(2 * n / 200e-6 / 63e9)  # 66.6%, not 133%


def test_every_formula_that_counts_a_copy_agrees(tmp_path):
    """``trace``'s row, ``calibrate --from-trace``'s instance and the what-if's bound read
    the same bytes for the same copy (:func:`link_bytes`)."""
    from infer_opt.trace.calibrate import op_instances
    from infer_opt.trace.whatif import category_at_bound

    n = 1 << 20
    ev = read_trace(write_trace(tmp_path / "t.json", [to(n, 100.0, copy=H2D)]))
    peaks = peaks_for(by_name("h100"))
    (g,) = op_groups(ev, peaks=peaks)
    (inst,) = op_instances(ev)
    formula = op_cost("aten::to", ev.ops.args[0])
    assert formula.bytes == 4 * n  # bf16 read + write
    assert g.bytes == inst.bytes == link_bytes(formula.bytes) == 2 * n
    (w,) = category_at_bound([g], peaks, 1e-3, 1)
    assert w.saved_s == pytest.approx(100e-6 - 2 * n / 63e9)  # the tensor once at the link rate


@settings(max_examples=40, deadline=None)
@given(st.floats(0, 1e12, allow_nan=False))
def test_link_bytes_is_half_the_copy(b):
    assert link_bytes(b) * 2 == pytest.approx(b) and link_bytes(b) <= b


# ------------------------------------------------------------------ gathers by their dim


def _args(dims, types, concrete=None):
    out = {"Input Dims": dims, "Input type": types}
    if concrete is not None:
        out["Concrete Inputs"] = concrete
    return out


def test_index_select_of_a_1d_tensor_counts_the_picked_elements():
    """The class: ``shape[-1]`` taken as the row width whatever ``dim`` is (the A100
    ``index_select (755000),(1024)`` row: 6.2 GB a call, 809× the memory peak)."""
    c = op_cost("aten::index_select", _args([[755000], [], [1024]], ["float", "Scalar", "int"]))
    assert c.bytes == 1024 * 4 + 2 * 1024 * 4  # the index, 1024 floats read and written
    assert c.features == (1024, 1)


@pytest.mark.parametrize(("dim", "picked_elements"), [("0", 10 * 64), ("1", 100 * 10), ("-1", 100 * 10)])
def test_index_select_by_its_recorded_dim(dim, picked_elements):
    c = op_cost(
        "aten::index_select", _args([[100, 64], [], [10]], ["float", "Scalar", "long"], ["", dim, ""])
    )
    assert c.bytes == 10 * 8 + 2 * picked_elements * 4


def test_an_nd_gather_without_its_dim_has_no_formula():
    assert op_cost("aten::index_select", _args([[100, 64], [], [10]], ["float", "Scalar", "long"])) is None


def test_embedding_gather_scatter_and_index_add_by_dim():
    emb = op_cost("aten::embedding", _args([[1000, 64], [8, 16]], ["float", "long"]))
    assert emb.bytes == 128 * 8 + 2 * 128 * 64 * 4 and emb.features == (128, 64)
    gather = op_cost("aten::gather", _args([[50], [], [600], []], ["float", "Scalar", "long", "Scalar"]))
    assert gather.bytes == 600 * 8 + 2 * 600 * 4
    scatter = op_cost(
        "aten::scatter_add_", _args([[50], [], [600], [600]], ["float", "Scalar", "long", "float"])
    )
    assert scatter.bytes == 600 * 8 + 3 * 600 * 4 and scatter.flops == 600  # reads its destination
    index_add = op_cost(
        "aten::index_add_",
        _args([[755000], [], [1024], [1024], []], ["float", "Scalar", "int", "float", "Scalar"]),
    )
    assert index_add.bytes == 1024 * 4 + 3 * 1024 * 4
    index_copy = op_cost(
        "aten::index_copy_", _args([[755000], [], [1024], [1024]], ["float", "Scalar", "long", "float"])
    )
    assert index_copy.bytes == 1024 * 8 + 2 * 1024 * 4 and index_copy.flops == 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 64), min_size=1, max_size=4),
    st.integers(1, 256),
    st.data(),
)
def test_an_index_select_never_moves_more_than_its_input_and_output(shape, picked, data):
    """Invariant: the bytes are the index plus the picked slices read and written, so at most
    the input plus the output plus the index; and they grow with the number of indices."""
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    args = _args([shape, [], [picked]], ["float", "Scalar", "long"], ["", str(dim), ""])
    c = op_cost("aten::index_select", args)
    out = math.prod(shape) // shape[dim] * picked
    assert c.bytes == picked * 8 + 2 * out * 4
    more = op_cost(
        "aten::index_select",
        _args([shape, [], [picked + 1]], ["float", "Scalar", "long"], ["", str(dim), ""]),
    )
    assert more.bytes > c.bytes


# ------------------------------------------------------------------ one rule above peak


def _group(**kw) -> OpGroup:
    base = dict(
        name="aten::add", shapes="(1)", dtype="bf16", calls=1, time_s=1e-3, flops=0.0, bytes=0.0,
        achieved_flops_per_s=0.0, achieved_bytes_per_s=0.0, bound="bandwidth", peak_fraction=0.0,
        precision="bf16", family="elementwise",
    )  # fmt: skip
    return OpGroup(**(base | kw))


PEAKS = Peaks({"bf16": 1e15}, 3e12, "test", host_link_bytes_per_s=63e9)


@pytest.mark.parametrize(
    ("ratio", "warned"), [(1.005, False), (1.0999, False), (1.1001, True), (2.0, True), (900.0, True)]
)
def test_one_margin_above_peak(ratio, warned):
    g = _group(achieved_bytes_per_s=ratio * 3e12)
    assert bool(tr.rate_checks([g], PEAKS)) is warned
    assert tr.above_peak(ratio * 3e12, 3e12) is warned
    from infer_opt.cost_models.roofline import DATASHEET_SLACK, RATE_SLACK

    assert DATASHEET_SLACK == RATE_SLACK == 1.1  # a fit against its datasheet: the same rule


@pytest.mark.parametrize(
    ("kw", "cause"),
    [
        ({"achieved_bytes_per_s": 1.5 * 3e12}, "cache"),
        ({"achieved_bytes_per_s": 809 * 3e12}, "formula"),
        ({"achieved_flops_per_s": 2e15}, "precision"),
        ({"family": TRANSFER, "achieved_bytes_per_s": 93e9}, "link"),
    ],
)
def test_the_warning_names_the_op_and_the_likely_cause(kw, cause):
    from infer_opt.messages import text as render

    (n,) = tr.rate_checks([_group(**kw)], PEAKS)
    assert n["cause"] == cause and n["op"] == "aten::add"
    text = render(n)
    assert "aten::add" in text and "1.1×" in text
    assert ("formula" in text) is (cause == "formula") and ("host link" in text) is (cause == "link")


def test_a_copy_is_warned_against_its_link_not_the_hbm():
    assert not tr.rate_checks([_group(family=TRANSFER, achieved_bytes_per_s=60e9)], PEAKS)
    assert tr.rate_checks([_group(family=TRANSFER, achieved_bytes_per_s=93e9)], PEAKS)


# ------------------------------------------------------------------ unknown is null, never 0


def test_an_unsized_collective_is_unknown_not_zero_and_takes_the_world_size():
    """The class: a collective with no message fields printed ``0 B``, ``0`` ranks, ``0 B/s``
    (V100 ``df_index_resolver``, A100 ``control``) though ``distributedInfo`` gave the world."""
    from infer_opt.trace.collectives import collective_call, collective_rows

    name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    bare = collective_call(name, {}, 0, 0.0, 10.0)
    assert (bare.bytes, bare.group_size) == (None, None)
    world = collective_call(name, {}, 0, 0.0, 10.0, world_size=8)
    assert (world.bytes, world.group_size) == (None, 8)
    sized = collective_call(name, {"In msg nelems": 1024, "dtype": "Float"}, 0, 0.0, 10.0, world_size=8)
    assert (sized.bytes, sized.group_size) == (4096, 8)
    (row,) = collective_rows([[world]])
    assert (row.bytes, row.algbw_bytes_per_s, row.busbw_bytes_per_s) == (None, None, None)
    assert (row.wait_s, row.transfer_s) == (None, None)  # one rank: the wait cannot be split off
    (row,) = collective_rows([[sized]])
    assert row.algbw_bytes_per_s == pytest.approx(4096 / 10e-6)
    assert row.busbw_bytes_per_s == pytest.approx(4096 / 10e-6 * 2 * 7 / 8)  # all_reduce's 2(n-1)/n
    gathered = collective_call(
        "ncclDevKernel_AllGather_RING_LL", {"In msg nelems": 10, "dtype": "Float"}, 0, 0.0, 1.0
    )
    assert gathered.bytes is None  # the gathered size needs the ranks


def test_unknown_values_are_null_in_json_and_a_dash_on_the_console():
    import json

    from infer_opt.results import to_jsonable
    from infer_opt.results.trace import CollectiveRow
    from infer_opt.units import format_bandwidth, format_bytes

    row = CollectiveRow("all_reduce", None, "fp32", None, 3, 1e-5, None, None)
    data = json.loads(json.dumps(to_jsonable(row)))
    assert data["bytes"] is None and data["group_size"] is None and data["busbw_bytes_per_s"] is None
    assert format_bytes(None) == "—" and format_bandwidth(None) == "—"
    g = _group(bound="unknown", achieved_bytes_per_s=None, achieved_flops_per_s=None, peak_fraction=None)
    assert not tr.rate_checks([g], PEAKS)  # an unknown rate is no rate above peak


def test_an_op_without_a_formula_has_no_rate_and_no_fraction(tmp_path):
    ev = read_trace(write_trace(tmp_path / "t.json", [("aten::mystery", [[4]], ["float"], 10.0)]))
    (g,) = op_groups(ev, peaks=peaks_for(by_name("h100")))
    assert g.bound == "unknown"
    assert (g.achieved_flops_per_s, g.achieved_bytes_per_s, g.peak_fraction) == (None, None, None)


# ------------------------------------------------------------------ shapes: data, not text


def test_json_shapes_are_dimension_lists_and_older_text_still_loads(tmp_path):
    import json

    from infer_opt.results import to_jsonable
    from infer_opt.results.trace import OpGroup

    ev = read_trace(write_trace(tmp_path / "t.json", [to(1 << 10, 3.0)]))
    (g,) = op_groups(ev, peaks=peaks_for(by_name("h100")))
    assert g.shapes == ((1024,),)  # the tensor; the scalar arguments are not tensors
    data = json.loads(json.dumps(to_jsonable(g)))
    assert data["shapes"] == [[1024]]
    assert OpGroup(**data).shapes == ((1024,),)
    assert OpGroup(**(data | {"shapes": "(1, 141, 512), (512), ()"})).shapes == ((1, 141, 512), (512,), ())


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(0, 10**6), max_size=4), min_size=1, max_size=8), st.integers(8, 40))
def test_a_terminal_cell_never_cuts_a_number(shapes, width):
    """The class: ``16×5185×518`` / ``5`` at 80 columns. Whole shapes only, then ``…+N``."""
    from infer_opt.reports.trace import _shapes, _shapes_full
    from infer_opt.results.trace import shapes_text

    dims = tuple(tuple(s) for s in shapes)
    cell = _shapes(dims, width)
    full = _shapes_full(dims)
    assert full == shapes_text(dims)
    kept = cell.split(", …+")[0].split(", ")
    assert kept == full.split(", ")[: len(kept)]  # a prefix of whole shapes
    if "…+" in cell:
        assert int(cell.rsplit("+", 1)[1]) == len(dims) - len(kept)


def test_markdown_keeps_every_shape(tmp_path):
    from infer_opt.reports.trace import _shapes_full
    from infer_opt.reports.view import Column

    long = ((16, 5185, 5185), (16, 5185, 64), (16, 64, 5185), (1, 2, 3))
    col = Column("shapes", "Shapes", _shapes_full, terminal=lambda v: "cut")
    assert col.format(long) == "16×5185×5185, 16×5185×64, 16×64×5185, 1×2×3"
    assert col.format_terminal(long) == "cut"


# ------------------------------------------------------------------ compare: what it says


@pytest.fixture(scope="module")
def model_result():
    from pathlib import Path

    from infer_opt.trace.analyze import analyze

    return analyze([Path(__file__).resolve().parent / "fixtures" / "model_step.json"]).result


def _idle(result, fraction):
    """``result`` with its GPU idle ``fraction`` and no replay (the replay's bound would decide)."""
    from dataclasses import replace

    def bare(r):
        return tuple(replace(s, critical_path={}, critical_kernels={}, bound="") for s in r.steps)

    return replace(
        result, ranks=tuple(replace(r, idle_fraction=fraction, steps=bare(r)) for r in result.ranks)
    )


def test_two_host_bound_steps_compare_the_kernel_time_not_the_step(model_result):
    """The class: H100 vs MI300X bert "ran 1.12× faster" while kernel time went 309 → 391 µs,
    both steps > 88% idle."""
    from dataclasses import replace

    from infer_opt.trace.compare import compare_traces

    base = _idle(model_result, 0.92)
    slower_gpu = replace(base, ops=tuple(replace(g, time_s=g.time_s * 1.25) for g in base.ops))
    r = compare_traces(base, _idle(slower_gpu, 0.89))
    assert r.compared == "kernel_time"
    assert "host-bound" in r.headline and "1.25× more GPU kernel time" in r.headline
    assert "trace_compare_host_bound" in {w.code for w in r.warnings}
    busy = compare_traces(_idle(model_result, 0.3), _idle(model_result, 0.95))  # one side busy: the step
    assert busy.compared == "step" and "trace_compare_host_bound" not in {w.code for w in busy.warnings}


def test_traces_with_few_ops_in_common_are_different_workloads(model_result):
    from dataclasses import replace

    from infer_opt.trace.compare import compare_traces

    other = replace(model_result, ops=tuple(replace(g, name=g.name + "_other") for g in model_result.ops))
    r = compare_traces(model_result, other)
    assert r.matched_fraction == 0.0
    assert "different workloads" in r.headline
    assert "trace_compare_unmatched" in {w.code for w in r.warnings}
    same = compare_traces(model_result, model_result)
    assert same.matched_fraction == 1.0 and "trace_compare_unmatched" not in {w.code for w in same.warnings}


def test_the_headline_says_the_devices_differ(model_result):
    from dataclasses import replace

    from infer_opt.trace.compare import compare_traces

    r = compare_traces(model_result, replace(model_result, device_name="MI300X"))
    assert "different devices" in r.headline and "MI300X" in r.headline


def test_traces_of_two_devices_are_not_ranks_of_one_job(tmp_path):
    from infer_opt.errors import InvalidInput
    from infer_opt.trace.analyze import analyze
    from tests.trace.gpu_traces import H100, MI300X, add

    a = write_trace(tmp_path / "a.json", [add(1 << 20, 5.0)], device=H100)
    b = write_trace(tmp_path / "b.json", [add(1 << 20, 5.0)], device=MI300X)
    with pytest.raises(InvalidInput, match="compare A B") as err:
        analyze([a, b])
    assert "H100 SXM and MI300X" in str(err.value)
    with pytest.raises(InvalidInput, match="compare A B"):
        analyze([a, b], device="h100")  # --device does not make them one job
    c = write_trace(tmp_path / "c.json", [add(1 << 20, 6.0)], device=H100)  # another rank (a copy is refused)
    assert analyze([a, c]).result.device_name == "H100 SXM"  # two ranks of one H100 job


# ------------------------------------------------------------------ the report's What matters


def test_what_matters_for_a_trace_has_the_step_the_ops_and_the_what_if(model_result):
    from dataclasses import replace

    from infer_opt.reports.highlights import highlights
    from infer_opt.reports.trace import build_view

    lines = [h.text for h in highlights(model_result, build_view(model_result))]
    assert len(lines) >= 3
    assert lines[0].startswith("step ") and "GPU idle" in lines[0]
    assert lines[1].startswith("top ops by GPU kernel time: ")
    assert any(line.startswith("largest what-if") for line in lines)
    idle = _idle(model_result, 0.95)
    assert "host-bound" in highlights(idle, build_view(idle))[0].text
    from infer_opt.results.trace import CoverageRow

    uncovered = replace(
        model_result, coverage=(CoverageRow("no_shapes", 1.0, 0.97), CoverageRow("modelled", 0.1, 0.03))
    )
    assert any(
        "3.0% of the GPU time has a FLOP/byte formula" in h.text
        for h in highlights(uncovered, build_view(uncovered))
    )


# ------------------------------------------------------------------ tune: never worse than the default


@pytest.mark.parametrize(("current", "keep"), [("1", False), ("1,3", True), ("3", True)])
def test_capture_sizes_never_pastes_flags_for_a_list_no_faster_than_the_current(tmp_path, current, keep):
    """The class: "Gain 0.9885×" printed beside ready-to-paste flags. With one capture allowed,
    [3] beats [1] (gain 2), ties [3] and loses to [1, 3]: keep the current list, no flags."""
    from tests.helpers import invoke

    (tmp_path / "b.csv").write_text("batch_size,count\n1,1\n3,1\n")
    (tmp_path / "c.csv").write_text("batch_size,time_ms\n1,2\n3,4\n")
    run = invoke(
        "tune", "capture-sizes", "--batches", str(tmp_path / "b.csv"), "--cost-file", str(tmp_path / "c.csv"),
        "--max-captures", "1", "--eager-overhead", "10ms", "--current", current, "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    r = run.json()["result"]
    assert (r["recommendation"] == "keep_current") is keep
    assert (r["flags"] == {}) is keep and (r["gain"] <= 1.0) is keep
    codes = {w["code"] for w in r["warnings"]}
    assert ("capture_keep_current" in codes) is keep
    console = invoke(
        "tune", "capture-sizes", "--batches", str(tmp_path / "b.csv"), "--cost-file", str(tmp_path / "c.csv"),
        "--max-captures", "1", "--eager-overhead", "10ms", "--current", current,
    )  # fmt: skip
    assert ("--cuda-graph-bs" in console.stdout) is not keep
    assert ("keep the current list" in console.stdout + console.stderr) is keep


def test_a_spread_over_one_step_is_unknown_not_zero(model_result):
    from pathlib import Path

    from infer_opt.trace.analyze import analyze
    from infer_opt.trace.compare import compare_traces

    one = analyze([Path(__file__).resolve().parent / "fixtures" / "model_step.json"], steps=(1, 1)).result
    assert all(g.time_spread_s is None for g in one.ops)
    assert all(r.step_time_spread_s is None for r in one.ranks)
    r = compare_traces(one, one)
    assert r.base.step_spread_s is None and all(o.spread_s is None for o in r.ops)
    assert all(g.time_spread_s is not None for g in model_result.ops)  # two steps: measured
