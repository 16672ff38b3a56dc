"""The whole ``trace`` analysis (trace/analyze.py) on the hand-made model step, and its
invariants: exact numbers where the fixture states them, sums that must hold on any trace."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.errors import InvalidInput
from infer_opt.results.trace import OpGroup, Peaks, TraceResult
from infer_opt.trace.analyze import analyze, parse_steps
from infer_opt.trace.augment import write_augmented
from infer_opt.trace.ops import merge_groups
from infer_opt.trace.reader import read_trace

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MODEL = FIXTURES / "model_step.json"
TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
GEMM = 2 * 64 * 4096 * 4096  # 2·M·N·K of the fixture's addmm; + M·N for its bias


@pytest.fixture(scope="module")
def model() -> TraceResult:
    return analyze([MODEL]).result


def _op(r: TraceResult, name: str) -> OpGroup:
    return next(g for g in r.ops if g.name == name)


def test_device_peaks_and_steps_come_from_the_trace(model):
    assert (model.device_name, model.device_source) == ("H100 SXM", "deviceProperties")
    assert model.peaks.flops_per_s["bf16"] == pytest.approx(989e12, rel=0.01)
    assert model.peaks.source.startswith("datasheet:H100 SXM")
    (rank,) = model.ranks
    assert [s.step for s in rank.steps] == [1, 2]


def test_timeline_per_step_is_exact(model):
    for s in model.ranks[0].steps:
        # kernels at g+[0,20) [20,22) [22,25) [25,28) [28,36), memset [36,37), memcpy [40,42),
        # all-reduce [15,25) on stream 20, in a 60 µs GPU annotation
        assert (s.span_s, s.busy_s, s.idle_s) == pytest.approx((60e-6, 39e-6, 21e-6), abs=1e-15)
        assert (s.compute_s, s.comm_s, s.memcpy_s) == pytest.approx((36e-6, 10e-6, 3e-6), abs=1e-15)
        assert s.overlap_fraction == pytest.approx(1.0)


def test_matmul_flops_are_2mnk_plus_the_bias_and_time_is_the_sum_of_its_kernels(model):
    linear = _op(model, "aten::linear")
    assert linear.calls == 2 and linear.kernels == 4  # the GEMM and its split-K reduce, twice
    assert linear.flops == 2 * (GEMM + 64 * 4096)
    assert linear.time_s == pytest.approx(2 * (20 + 2) * 1e-6, abs=1e-15)
    assert linear.achieved_flops_per_s == pytest.approx(linear.flops / linear.time_s)
    assert linear.precision == "bf16" and linear.family == "matmul"
    # 2.1 GFLOP in 2.2 µs at 989 TFLOP/s, 34.6 MB in 10.3 µs at 3.35 TB/s: bandwidth-bound
    assert linear.bound == "bandwidth"
    assert linear.peak_fraction == pytest.approx(linear.achieved_bytes_per_s / model.peaks.bytes_per_s)


def test_causal_flash_attention_counts_half_or_full(model):
    full = 4 * 64 * 32 * 32 * 128  # 4·B·H·Tq·Tk·d, q/k/v (1, 32, 64, 128) = (B, T, H, d), is_causal
    assert _op(model, "aten::_flash_attention_forward").flops == 2 * full / 2
    both = analyze([MODEL], causal="full").result
    assert _op(both, "aten::_flash_attention_forward").flops == 2 * full
    assert both.causal_flops == "full"


def test_every_group_time_is_its_kernels_and_coverage_sums_to_one(model):
    doc = json.loads(MODEL.read_text())
    gpu = [e for e in doc["traceEvents"] if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
    total = math.fsum(e["dur"] for e in gpu) / 1e6
    assert math.fsum(g.time_s for g in model.ops) == pytest.approx(total, abs=1e-15)
    assert math.fsum(c.fraction for c in model.coverage) == pytest.approx(1.0)
    reasons = {c.reason: c.time_s for c in model.coverage}
    assert reasons["communication"] == pytest.approx(20e-6, abs=1e-15)
    assert reasons["memcpy"] == pytest.approx(4e-6, abs=1e-15)  # the item's DtoH copies
    assert reasons["modelled"] == pytest.approx(total - 24e-6, abs=1e-15)


def test_collectives_busbw_and_host_syncs(model):
    (row,) = model.collectives
    assert (row.collective, row.bytes, row.group_size, row.calls) == ("all_reduce", 524288, 8, 2)
    assert row.algbw_bytes_per_s == pytest.approx(524288 / 10e-6)
    assert row.busbw_bytes_per_s == pytest.approx(row.algbw_bytes_per_s * 2 * 7 / 8)
    (sync,) = model.host_syncs
    assert (sync.name, sync.calls) == ("cudaStreamSynchronize", 2)
    assert sync.time_s == pytest.approx(40e-6)


def test_what_ifs_are_predictions_held_against_the_median_step(model):
    scenarios = {w.scenario for w in model.what_if}
    assert {"category_at_bound", "matmul_at_peak_fraction", "cuda_graphs", "fusion", "overlap"} <= scenarios
    for w in model.what_if:
        assert w.step_s == pytest.approx(60e-6)
        assert 0 <= w.saved_s < w.step_s
        assert w.speedup == pytest.approx(w.step_s / (w.step_s - w.saved_s))
    overlap = next(w for w in model.what_if if w.scenario == "overlap")
    assert overlap.saved_s == 0.0  # the all-reduce is already hidden under the GEMM


def test_steps_option_selects_windows_and_refuses_a_range_with_none():
    one = analyze([MODEL], steps=(2, 2)).result
    assert [s.step for s in one.ranks[0].steps] == [2]
    assert _op(one, "aten::linear").calls == 1
    assert one.steps_selected == "2-2"
    with pytest.raises(InvalidInput, match=r"--steps.*steps are 1-2"):
        analyze([MODEL], steps=(5, 9))


@pytest.mark.parametrize(
    ("text", "expected"), [("3-7", (3, 7)), ("4", (4, 4)), (None, None), (" 1-1 ", (1, 1))]
)
def test_parse_steps(text, expected):
    assert parse_steps(text) == expected


@pytest.mark.parametrize("text", ["", "a-b", "7-3", "-1", "1-", "1-2-3"])
def test_parse_steps_refuses(text):
    with pytest.raises(InvalidInput, match="--steps"):
        parse_steps(text)


def test_unknown_device_without_overrides_is_a_labelled_warning(tmp_path):
    doc = json.loads(MODEL.read_text())
    doc["deviceProperties"] = [{"id": 0, "name": ""}]
    for e in doc["traceEvents"]:
        e["name"] = e["name"].replace("sm90_", "gemm_").replace("flash_fwd", "attn_fwd")
    path = tmp_path / "anon.json"
    path.write_text(json.dumps(doc))
    r = analyze([path]).result
    assert r.device_name == "" and r.device_source == "unknown"
    codes = {w.code for w in r.warnings}
    assert {"device_unknown", "trace_no_peaks"} <= codes
    assert all(g.bound == "unknown" and g.peak_fraction is None for g in r.ops)  # unknown, not 0
    assert not {w.scenario for w in r.what_if} & {"category_at_bound", "matmul_at_peak_fraction", "fusion"}
    # the same trace with --device gets the datasheet
    named = analyze([path], device="h100").result
    assert named.device_source == "--device" and _op(named, "aten::linear").bound == "bandwidth"
    flat = analyze([path], peak_flops=100e12, peak_bandwidth=1e12).result
    assert flat.peaks.flops_per_s["*"] == 100e12 and _op(flat, "aten::linear").bound != "unknown"


def test_a_cpu_only_trace_gets_the_cpu_op_analysis_alone(tmp_path):
    doc = json.loads(MODEL.read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e["cat"] in ("cpu_op", "user_annotation")]
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(doc))
    r = analyze([path]).result
    assert r.ops == () and r.what_if == ()
    assert "trace_cpu_only" in {w.code for w in r.warnings}
    names = {c.name: c for c in r.cpu_ops}
    # aten::linear 10 µs holds aten::addmm 8 µs: self 2 µs per call
    assert names["aten::linear"].self_s == pytest.approx(2 * 2e-6)
    assert names["aten::linear"].time_s == pytest.approx(2 * 10e-6)
    assert names["aten::item"].self_s == pytest.approx(2 * 2e-6)


def test_several_ranks_are_tabled_per_rank_with_ops_summed():
    r = analyze([FIXTURES / "two_ranks"]).result
    assert [k.rank for k in r.ranks] == [0, 1]
    assert r.slowest_rank == 1 and r.step_skew >= 1
    single = [analyze([FIXTURES / "two_ranks" / f"rank{i}.json"]).result for i in (0, 1)]
    for g in r.ops:
        parts = [next((h for h in s.ops if (h.name, h.shapes) == (g.name, g.shapes)), None) for s in single]
        assert g.calls == sum(p.calls for p in parts if p)
        assert g.time_s == pytest.approx(sum(p.time_s for p in parts if p))


_GROUP = st.builds(
    OpGroup,
    name=st.sampled_from(["aten::mm", "aten::add"]),
    shapes=st.sampled_from(["(2, 2)", "(4, 4)"]),
    dtype=st.just("bf16"),
    calls=st.integers(1, 50),
    time_s=st.floats(1e-7, 1.0),
    flops=st.floats(0, 1e12),
    bytes=st.floats(1, 1e10),
    achieved_flops_per_s=st.just(0.0),
    achieved_bytes_per_s=st.just(0.0),
    bound=st.just("bandwidth"),
    peak_fraction=st.just(0.0),
    precision=st.just("bf16"),
    kernels=st.integers(1, 100),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_GROUP, max_size=4, unique_by=lambda g: (g.name, g.shapes)), min_size=1, max_size=4))
def test_merging_ranks_sums_calls_time_and_work_and_keeps_rates_consistent(per_rank):
    peaks = Peaks({"bf16": 1e15}, 3e12, "test")
    merged = merge_groups(per_rank, peaks=peaks)
    flat = [g for groups in per_rank for g in groups]
    assert sum(g.calls for g in merged) == sum(g.calls for g in flat)
    assert math.fsum(g.time_s for g in merged) == pytest.approx(math.fsum(g.time_s for g in flat))
    assert len({(g.name, g.shapes) for g in merged}) == len(merged)
    for g in merged:
        if sum(1 for h in flat if (h.name, h.shapes) == (g.name, g.shapes)) > 1:
            assert g.achieved_bytes_per_s == pytest.approx(g.bytes / g.time_s)
    assert [g.time_s for g in merged] == sorted((g.time_s for g in merged), reverse=True)


def test_augment_writes_the_analysis_into_each_event_and_the_file_still_reads(tmp_path):
    found = analyze([MODEL])
    (out,) = write_augmented(found, tmp_path / "annotated.json.gz")
    doc = json.loads(gzip.decompress(out.read_bytes()))
    linear_ops = [e for e in doc["traceEvents"] if e["name"] == "aten::linear"]
    assert all(
        e["args"]["flops"] == GEMM + 64 * 4096 and e["args"]["bound"] == "bandwidth" for e in linear_ops
    )
    gemm = [e for e in doc["traceEvents"] if e["cat"] == "kernel" and "gemm" in e["name"]]
    reduce = [e for e in doc["traceEvents"] if e["name"] == "splitKreduce_kernel"]
    for k, r in zip(gemm, reduce, strict=True):  # the op's work split by duration over its kernels
        assert k["args"]["flops"] + r["args"]["flops"] == pytest.approx(GEMM + 64 * 4096)
        assert k["args"]["infer_opt_share"] == pytest.approx(20 / 22)
        assert k["args"]["achieved_flops_per_s"] == r["args"]["achieved_flops_per_s"]
    assert all("bound" not in e.get("args", {}) for e in doc["traceEvents"] if e["cat"] == "cuda_runtime")
    again = analyze([out]).result  # the written file reads back to the same analysis
    assert again.ops == found.result.ops
    assert len(read_trace(out).gpu) == len(read_trace(MODEL).gpu)


def test_augment_of_several_ranks_writes_one_file_per_rank(tmp_path):
    found = analyze([FIXTURES / "two_ranks"])
    paths = write_augmented(found, tmp_path / "out.json")
    assert [p.name for p in paths] == ["out.rank0.json", "out.rank1.json"]
    assert all(p.exists() for p in paths)


SHARED = sorted(TRACES.glob("*.json.gz")) if TRACES.is_dir() else []


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces absent")
@pytest.mark.parametrize("path", SHARED, ids=[p.name[:50] for p in SHARED])
def test_every_shared_trace_analyzes_with_consistent_sums(path):
    r = analyze([path]).result
    for rank in r.ranks:
        for s in rank.steps:
            assert s.busy_s + s.idle_s == pytest.approx(s.span_s, rel=1e-9, abs=1e-12)
            assert -1e-12 <= s.compute_s <= s.busy_s + 1e-12
    if r.coverage:
        assert math.fsum(c.fraction for c in r.coverage) == pytest.approx(1.0)
    for g in r.ops:
        assert g.time_s >= 0 and g.calls >= 1
        if g.bound != "unknown":
            assert g.peak_fraction >= 0
    assert r.ops or r.cpu_ops or not any(rank.steps for rank in r.ranks) or r.coverage
    # the replay (issue 40): unedited it is the trace; no what-if replays to nothing or past its step
    for rank in r.ranks:
        for s in rank.steps:
            assert s.replayed_span_s == pytest.approx(s.span_s, rel=0.01)
            assert s.bound in ("host", "device")
    if r.idle_causes:
        most = max(s.idle_s for rank in r.ranks for s in rank.steps)
        assert math.fsum(c.time_s for c in r.idle_causes) <= most * 1.02 + 1e-9
    for w in r.what_if:
        if w.replayed_step_s is not None:
            assert 0 < w.replayed_step_s <= w.step_s * (1 + 1e-9), w.scenario
            assert math.isfinite(w.replayed_speedup), w.scenario
