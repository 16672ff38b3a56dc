"""A graph capture linked to its replays (``trace REPLAY --capture CAPTURE``), on a hand-made
capture + replay pair and on the shared vLLM and SGLang pairs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.errors import InvalidInput
from infer_opt.trace.analyze import analyze
from infer_opt.trace.op_costs import op_cost
from tests.helpers import assert_one_line_error, invoke

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
PREFIX = "tracelens__inference__"
DEVICE = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85e9, "computeMajor": 9,
           "computeMinor": 0, "numSms": 132}]  # fmt: skip

LINEAR = ("aten::linear", [[4, 8], [16, 8], [16]], ["float", "float", "float"])
ADD = ("aten::add", [[4, 16], [4, 16], []], ["float", "float", "Scalar"])
CUSTOM = ("vllm::custom_op", [[4, 16]], ["float"])
#: the captured graph: (op, kernel it launches) in launch order, and a memcpy node
GEMM_KERNEL = "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x32"
ADD_KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)"
CUSTOM_KERNEL = "my_custom_kernel"
NODES = [(LINEAR, GEMM_KERNEL), (ADD, ADD_KERNEL), (CUSTOM, CUSTOM_KERNEL)]


def _x(cat: str, name: str, ts: float, dur: float, args: dict, pid: int = 1, tid: int = 1) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def capture_doc(nodes=NODES, label: str = "capture_4_FULL", named: bool = True) -> dict:
    """A capture trace: host ops with shapes, each launching its kernel inside one
    cudaStreamBeginCapture … EndCapture span (the kernels do not run), and a memcpy node."""
    ev = [_x("user_annotation", label, 0.0, 100.0, {})]
    ev.append(_x("cuda_runtime", "cudaStreamBeginCapture", 1.0, 1.0, {"correlation": 1}))
    t, corr = 5.0, 10
    for (name, dims, types), kernel in nodes:
        ev.append(_x("cpu_op", name, t, 8.0, {"Input Dims": dims, "Input type": types, "External id": corr}))
        launch = {"kernel": kernel, "correlation": corr} if named else {"correlation": corr, "cbid": 211}
        ev.append(_x("cuda_runtime", "cudaLaunchKernel", t + 2, 2.0, launch))
        t, corr = t + 10, corr + 1
    ev.append(_x("cuda_runtime", "cudaMemcpyAsync", t, 2.0, {"correlation": corr}))
    ev.append(_x("cuda_runtime", "cudaStreamEndCapture", t + 5, 1.0, {"correlation": corr + 1}))
    return {"deviceProperties": DEVICE, "traceEvents": ev}


def replay_doc(launches: int = 2, order=(0, 1, 2), kernel_us=(30.0, 5.0, 7.0)) -> dict:
    """A replay trace: ``launches`` cudaGraphLaunch calls, each running the captured kernels
    (in ``order``) and the memcpy, with no ops and no shapes."""
    ev = []
    gpu_t = 1000.0
    for i in range(launches):
        corr = 100 + i
        ev.append(_x("cuda_runtime", "cudaGraphLaunch", 500.0 + 50 * i, 10.0, {"correlation": corr}))
        for j in order:
            args = {"correlation": corr, "stream": 7, "device": 0}
            ev.append(_x("kernel", NODES[j][1], gpu_t, kernel_us[j], args, pid=0, tid=7))
            gpu_t += kernel_us[j] + 1
        ev.append(_x("gpu_memcpy", "Memcpy DtoD (Device -> Device)", gpu_t, 1.0,
                     {"correlation": corr, "stream": 7, "device": 0}, pid=0, tid=7))  # fmt: skip
        gpu_t += 20
    return {"deviceProperties": DEVICE, "traceEvents": ev}


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def pair(tmp_path):
    return _write(tmp_path / "replay.json", replay_doc()), _write(tmp_path / "capture.json", capture_doc())


def _group(r, name):
    return next(g for g in r.ops if g.name.endswith(name.split("::")[-1]))


def test_each_replayed_kernel_gets_its_captured_op_shapes_and_formula(pair):
    replay, capture = pair
    r = analyze([replay], capture=[capture]).result
    (link,) = r.captures
    assert (link.replays, link.replays_linked, link.kernels, link.kernels_linked) == (2, 2, 8, 8)
    assert link.labels == ("capture_4_FULL",) and link.graphs == 1
    per_call = op_cost("aten::linear", {"Input Dims": LINEAR[1], "Input type": LINEAR[2]})
    assert per_call.flops >= 2 * 4 * 16 * 8
    linear = _group(r, "aten::linear")
    # one op instance per replay, with the replay's own kernel times
    assert linear.calls == 2 and linear.kernels == 2
    assert linear.time_s == pytest.approx(60e-6)
    assert linear.flops == pytest.approx(2 * per_call.flops)
    assert (16, 8) in linear.shapes and linear.family == "matmul"
    add = _group(r, "aten::add")
    assert add.calls == 2 and add.time_s == pytest.approx(10e-6) and add.bytes > 0
    custom = _group(r, "vllm::custom_op")
    assert custom.calls == 2 and custom.bound == "unknown"
    reasons = {c.reason: c.time_s for c in r.coverage}
    assert reasons["modelled"] == pytest.approx(70e-6)  # linear + add
    assert reasons["no_formula"] == pytest.approx(14e-6)  # the custom op: it has shapes, no formula
    assert "no_shapes" not in reasons
    assert not [w for w in r.warnings if w.code.startswith("trace_capture")]


def test_kernels_are_matched_by_name_whatever_order_the_replay_ran_them_in(tmp_path):
    replay = _write(tmp_path / "replay.json", replay_doc(launches=1, order=(2, 0, 1)))
    capture = _write(tmp_path / "capture.json", capture_doc())
    r = analyze([replay], capture=[capture]).result
    assert r.captures[0].kernels_linked == 4
    assert _group(r, "aten::linear").time_s == pytest.approx(30e-6)
    assert _group(r, "vllm::custom_op").time_s == pytest.approx(7e-6)


def test_without_the_capture_the_replay_is_classed_by_kernel_names_and_says_so(pair):
    replay, _ = pair
    r = analyze([replay]).result
    assert not r.captures and "trace_capture_absent" in {w.code for w in r.warnings}
    fams = {k.name: (k.family, k.family_source) for k in r.kernels}
    assert fams[GEMM_KERNEL] == ("matmul", "name")
    assert fams[ADD_KERNEL] == ("elementwise", "name")
    assert fams[CUSTOM_KERNEL] == (None, None)
    with_capture = analyze([replay], capture=[pair[1]]).result
    fams = {k.name: (k.family, k.family_source) for k in with_capture.kernels}
    assert fams[GEMM_KERNEL] == ("matmul", "op") and fams[CUSTOM_KERNEL] == (None, None)


def test_a_capture_given_among_the_traces_or_beside_them_is_paired_automatically(pair, tmp_path):
    replay, capture = pair
    r = analyze([replay, capture]).result
    assert r.files == (str(replay),) and r.captures[0].replays_linked == 2
    folder = tmp_path / "run"
    (folder / "capture_traces").mkdir(parents=True)
    _write(folder / "graph_execution.json", replay_doc())
    _write(folder / "capture_traces" / "graph_capture_rank_0.json", capture_doc())
    r = analyze([folder]).result
    assert r.captures and r.captures[0].kernels_linked == 8


def test_a_capture_of_another_graph_is_refused_saying_how_many_kernels_matched(tmp_path):
    replay = _write(tmp_path / "replay.json", replay_doc())
    other = [((n, d, t), k + "_other") for (n, d, t), k in NODES[:2]] + [NODES[2]]
    capture = _write(tmp_path / "capture.json", capture_doc(other))
    with pytest.raises(InvalidInput) as err:
        analyze([replay], capture=[capture])
    assert err.value.option == "--capture" and "4 of the 8 replayed kernels matched" in str(err.value)
    run = invoke("trace", str(replay), "--capture", str(capture))
    assert_one_line_error(run, "--capture", "4 of the 8 replayed kernels matched")


def test_a_capture_file_that_captured_nothing_is_refused(pair):
    replay, _ = pair
    run = invoke("trace", str(replay), "--capture", str(replay))
    assert_one_line_error(run, "--capture", "graph-capture trace")


def test_a_replay_only_partly_matched_is_linked_where_it_matches_with_a_notice(tmp_path):
    doc = replay_doc(launches=2)
    # the second launch ran one more kernel: no captured graph has it
    extra = dict(doc["traceEvents"][-1], name="another_kernel", cat="kernel", ts=9000.0)
    doc["traceEvents"].append(extra)
    replay = _write(tmp_path / "replay.json", doc)
    capture = _write(tmp_path / "capture.json", capture_doc())
    r = analyze([replay], capture=[capture]).result
    assert (r.captures[0].replays_linked, r.captures[0].kernels_linked) == (1, 4)
    assert "trace_capture_partial" in {w.code for w in r.warnings}


def test_json_has_the_kernel_table_family_coverage_and_links(pair):
    replay, capture = pair
    run = invoke("trace", str(replay), "--capture", str(capture), "--json")
    assert run.exit_code == 0, run.stderr
    result = run.json()["result"]
    row = result["kernels"][0]
    assert set(row) == {"name", "calls", "time_s", "fraction", "family", "family_source"}
    assert row["name"] == GEMM_KERNEL and row["family"] == "matmul" and row["family_source"] == "op"
    custom = next(k for k in result["kernels"] if k["name"] == CUSTOM_KERNEL)
    assert custom["family"] is None and custom["family_source"] is None
    assert math.fsum(c["fraction"] for c in result["family_coverage"]) == pytest.approx(1.0)
    assert result["captures"][0]["kernels_linked"] == 8
    console = invoke("trace", str(replay), "--capture", str(capture))
    assert "Top kernels by GPU time" in console.stdout and "Graph replays linked" in console.stdout


SHARED_PAIRS = [
    ("vllm_decode_full__graph_execution", "vllm_decode_full__capture_traces__graph_capture_rank_0", 1),
    (
        "vllm_prefilldecode_piecewise__graph_execution",
        "vllm_prefilldecode_piecewise__capture_traces__graph_capture_rank_0",
        25,
    ),
    ("sglang_decode__sglang_Qwen3-8B_decode", "sglang_decode__capture_traces__bs_32_rank0", 1),
]


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces absent")
@pytest.mark.parametrize(("replay", "capture", "launches"), SHARED_PAIRS, ids=["full", "piecewise", "sglang"])
def test_the_shared_capture_and_replay_pairs_link_every_replayed_kernel(replay, capture, launches):
    (rep,) = TRACES.glob(f"{PREFIX}{replay}.json.gz")
    (cap,) = TRACES.glob(f"{PREFIX}{capture}*.json.gz")
    r = analyze([rep], capture=[cap]).result
    (link,) = r.captures
    assert link.replays == link.replays_linked == launches
    assert link.kernels_linked == link.kernels > 0
    alone = analyze([rep]).result
    modelled = {c.reason: c.fraction for c in r.coverage}.get("modelled", 0.0)
    before = {c.reason: c.fraction for c in alone.coverage}.get("modelled", 0.0)
    assert modelled > before


def test_load_trace_gives_the_kernel_table_as_a_frame_and_takes_the_capture(pair):
    from infer_opt.api import load_trace

    replay, capture = pair
    t = load_trace(replay, capture=capture)
    frame = t.kernel_names
    assert list(frame.columns) == ["name", "calls", "time_s", "fraction", "family", "family_source"]
    assert frame.time_s.sum() == pytest.approx(math.fsum(c.time_s for c in t.result.coverage))
    assert frame.set_index("name").loc[GEMM_KERNEL, "family_source"] == "op"
    with pytest.raises(InvalidInput) as err:
        load_trace(replay, capture=replay.parent / "absent.json")
    assert err.value.option == "capture"


def test_a_saved_result_with_a_made_up_family_source_is_refused(pair):
    from infer_opt.errors import BadField
    from infer_opt.results.trace import TraceResult

    replay, capture = pair
    saved = invoke("trace", str(replay), "--capture", str(capture), "--json").json()["result"]
    assert TraceResult.from_dict(saved).kernels[0].family_source == "op"
    saved["kernels"][0]["family_source"] = "guess"
    with pytest.raises(BadField) as err:
        TraceResult.from_dict(saved)
    assert "kernels[0]" in str(err.value) and "family_source" in str(err.value)


def test_a_trace_that_captured_and_replayed_is_linked_to_itself(tmp_path):
    cap, rep = capture_doc(), replay_doc(launches=1)
    doc = {"deviceProperties": DEVICE, "traceEvents": cap["traceEvents"] + rep["traceEvents"]}
    both = _write(tmp_path / "run.json", doc)
    r = analyze([both]).result
    assert r.files == (str(both),) and r.captures[0].kernels_linked == 4
    assert _group(r, "aten::linear").calls == 1


def test_augment_of_a_linked_replay_puts_the_captured_formula_on_its_kernels(pair, tmp_path):
    from infer_opt.trace.augment import write_augmented

    replay, capture = pair
    found = analyze([replay], capture=[capture])
    (out,) = write_augmented(found, tmp_path / "out.json")
    events = json.loads(out.read_text())["traceEvents"]
    gemms = [e for e in events if e.get("name") == GEMM_KERNEL]
    per_call = op_cost("aten::linear", {"Input Dims": LINEAR[1], "Input type": LINEAR[2]})
    assert len(gemms) == 2 and all(e["args"]["flops"] == pytest.approx(per_call.flops) for e in gemms)
    assert len(events) == len(json.loads(replay.read_text())["traceEvents"])


def test_graphs_of_two_sizes_with_the_same_kernels_link_to_one_and_say_so(tmp_path):
    small, large = capture_doc(label="capture_4_FULL"), capture_doc(label="capture_8_FULL")
    shift = 1000.0
    for e in large["traceEvents"]:
        e["ts"] += shift
        if e["name"] == "aten::linear":
            e["args"]["Input Dims"] = [[8, 8], [16, 8], [16]]
    doc = {"deviceProperties": DEVICE, "traceEvents": small["traceEvents"] + large["traceEvents"]}
    capture = _write(tmp_path / "capture.json", doc)
    replay = _write(tmp_path / "replay.json", replay_doc(launches=3))
    r = analyze([replay], capture=[capture]).result
    (link,) = r.captures
    assert link.graphs == 2 and link.kernels_linked == 12
    # every launch of the one replayed graph linked to the same capture: one shape, three calls
    assert link.labels == ("capture_4_FULL",)
    assert link.ambiguous_labels == ("capture_4_FULL", "capture_8_FULL")
    assert _group(r, "aten::linear").calls == 3
    notice = next(w for w in r.warnings if w.code == "trace_capture_ambiguous")
    assert notice.values["chosen"] == ("capture_4_FULL",)


@settings(max_examples=25, deadline=None)
@given(
    order=st.permutations([0, 1, 2]),
    times=st.tuples(*[st.floats(0.5, 500.0, allow_nan=False) for _ in range(3)]),
    launches=st.integers(1, 4),
)
def test_whatever_the_order_and_times_each_op_gets_exactly_its_kernels_time(order, times, launches):
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        replay = _write(Path(folder) / "r.json", replay_doc(launches, tuple(order), times))
        capture = _write(Path(folder) / "c.json", capture_doc())
        r = analyze([replay], capture=[capture]).result
    assert r.captures[0].kernels_linked == 4 * launches
    for (op, _), t in zip(NODES, times, strict=True):
        g = _group(r, op[0])
        assert g.calls == launches and g.time_s == pytest.approx(launches * t * 1e-6)


def test_a_linked_replay_mostly_in_ops_without_a_formula_names_them(tmp_path):
    replay = _write(tmp_path / "replay.json", replay_doc(launches=1, kernel_us=(30.0, 5.0, 70.0)))
    capture = _write(tmp_path / "capture.json", capture_doc())
    r = analyze([replay], capture=[capture]).result
    notice = next(w for w in r.warnings if w.code == "trace_capture_no_formula")
    assert notice.values["share"] == pytest.approx(70 / 106)  # of 106 µs: 30 + 5 + 70 and the 1 µs memcpy
    assert notice.values["ops"][0] == ("vllm::custom_op", pytest.approx(70 / 106))
    quiet = analyze([_write(tmp_path / "r2.json", replay_doc())], capture=[capture]).result
    assert "trace_capture_no_formula" not in {w.code for w in quiet.warnings}


def test_a_cuda_capture_without_kernel_names_links_by_count_and_order_and_says_so(tmp_path):
    # CUDA's cudaLaunchKernel events carry no kernel name: the k-th replayed kernel is the k-th launch
    capture = _write(tmp_path / "capture.json", capture_doc(named=False))
    replay = _write(tmp_path / "replay.json", replay_doc(launches=2))
    r = analyze([replay], capture=[capture]).result
    (link,) = r.captures
    assert link.by_order and link.unnamed_graphs == 1 and link.kernels_linked == 8
    assert _group(r, "aten::linear").time_s == pytest.approx(60e-6)
    assert _group(r, "vllm::custom_op").time_s == pytest.approx(14e-6)
    assert "trace_capture_by_order" in {w.code for w in r.warnings}
    short = _write(tmp_path / "short.json", capture_doc(NODES[:2], named=False))
    with pytest.raises(InvalidInput) as err:
        analyze([replay], capture=[short])
    assert "matched by count and order" in str(err.value)


def test_a_capture_both_given_and_among_the_traces_is_not_analyzed_as_a_rank(pair):
    replay, capture = pair
    r = analyze([replay, capture], capture=[capture]).result
    assert r.files == (str(replay),) and r.captures[0].kernels_linked == 8
