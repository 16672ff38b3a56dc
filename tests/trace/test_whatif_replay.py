"""What-ifs by replaying the edited graph: SPEC §7.1's worked check (halving kernels of a
host-bound stream buys 1.00× where Amdahl says 1.18×; a CUDA graph of them spans ≈ 300 µs),
a faster host, a removed sync, and the caps (never above Amdahl for a duration edit)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from infer_opt.cost_models.amdahl import amdahl_speedup
from infer_opt.results.trace import WhatIf
from infer_opt.trace import timeline as tt
from infer_opt.trace import whatif_replay as twr
from infer_opt.trace.replay import replay_rank
from tests.trace.builders import make_events

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"


def host_bound(n=100):
    """SPEC §7.1 in one ProfilerStep: a launch every 10 µs (2 µs call), kernels of 3 µs."""
    launches = [("cudaLaunchKernel", 10.0 * i, 2.0, i + 1, -1) for i in range(n)]
    gpu = [("kernel", "k", 10.0 * i + 2, 3.0, 7, i + 1, i, -1, 0) for i in range(n)]
    return make_events(launches=launches, gpu=gpu, steps=[(1, 0.0, 10.0 * n)])


def setup(ev):
    rr = replay_rank(ev)
    rank = tt.rank_timeline(ev)
    return rr, rank.steps


def test_halving_host_bound_kernels_buys_nothing_amdahl_says_1_18():
    ev = host_bound()
    rr, timelines = setup(ev)
    (step,) = timelines
    assert step.span_s == pytest.approx(993e-6)
    edit = twr.fresh(rr)
    edit.dur[rr.graph.n_host :] /= 2
    replayed = twr.replayed_step_s(ev, rr, edit, None)
    assert step.span_s / replayed == pytest.approx(993 / 991.5)  # 1.00×
    f = 300 / 993
    amdahl = amdahl_speedup(f, 2.0)
    assert amdahl == pytest.approx(1.178, abs=1e-3)  # 1.18×
    saved = step.span_s * (1 - 1 / amdahl)
    w = twr.with_replay(WhatIf("x", "x", saved, step.span_s, amdahl), replayed, math.inf)
    assert w.amdahl_speedup == amdahl and w.replayed_speedup == pytest.approx(993 / 991.5)


def test_cuda_graph_of_the_host_bound_stream_spans_300_us_plus_a_launch():
    ev = host_bound()
    rr, timelines = setup(ev)
    edit = twr.cuda_graphs_edit(ev, rr, timelines, None)
    replayed = twr.replayed_step_s(ev, rr, edit, None)
    # the first call (the graph launch) stays: kernels start 2 µs after it, back to back
    assert replayed == pytest.approx(300e-6)
    # its cap: idle (99 gaps of 7 µs) plus the 99 launch calls of 2 µs it removed
    assert edit.cap_s == pytest.approx(693e-6 + 198e-6)


def test_faster_host_and_its_amdahl_figure():
    ev = host_bound()
    rr, timelines = setup(ev)
    replayed = twr.replayed_step_s(ev, rr, twr.faster_host_edit(rr, 2.0), None)
    assert replayed == pytest.approx((99 * 6 + 3) * 1e-6)  # a launch every 6 µs
    # host work inside the step's GPU window [2, 995]: 99 gaps of 8 µs
    assert twr.host_work_s(ev, rr, timelines) == pytest.approx(99 * 8e-6)


def test_removing_a_named_sync():
    launches = [
        ("cudaLaunchKernel", 0.0, 2.0, 1, -1),
        ("cudaStreamSynchronize", 5.0, 100.0, 2, 1),
        ("cudaLaunchKernel", 110.0, 2.0, 3, -1),
    ]
    gpu = [("kernel", "k0", 2.0, 100.0, 7, 1, 0, -1, 0), ("kernel", "k1", 112.0, 1.0, 7, 3, 2, -1, 0)]
    ops = [("aten::is_nonzero", 3.0, 104.0, -1, {}), ("aten::item", 4.0, 102.0, 0, {})]
    ev = make_events(ops=ops, launches=launches, gpu=gpu, steps=[(1, 0.0, 120.0)])
    rr, _ = setup(ev)
    names = twr.sync_names(ev, rr)
    assert names == {"cudaStreamSynchronize in aten::is_nonzero": [1]}
    replayed = twr.replayed_step_s(ev, rr, twr.remove_sync_edit(rr, [1]), None)
    # the sync returns at once (no sync that did not wait to learn a base from: 0 µs): k1 is
    # launched 5 µs later, at 10, and queues behind k0 (ends 102, no stream gap learnt): 2 .. 103
    assert replayed == pytest.approx(101e-6)
    edit = twr.remove_sync_edit(rr, [1])
    edit.dur[rr.graph.n_host] = 10.0  # k0 ends at 12 as k1's launch (10) arrives: 2 .. 13
    assert twr.replayed_step_s(ev, rr, edit, None) == pytest.approx((12 + 1 - 2) * 1e-6)


def test_a_duration_edit_never_beats_amdahl():
    w = WhatIf("category_at_bound", "matmul ops at their roofline bound", 1e-6, 10e-6, 10 / 9)
    assert twr.with_replay(w, 5e-6, math.inf).replayed_step_s == pytest.approx(9e-6)
    assert twr.with_replay(w, 5e-6, math.inf, amdahl_bound=False).replayed_step_s == pytest.approx(5e-6)
    assert twr.with_replay(w, 11e-6, math.inf).replayed_speedup == 1.0  # never slower than now


def test_what_ifs_on_a_real_trace_keep_scenarios_and_gain_figures():
    path = SHARED / "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz"
    if not path.exists():
        pytest.skip("../shared/traces/ is absent")
    from infer_opt.trace.analyze import analyze

    result = analyze([path]).result
    by = {(w.scenario, w.description): w for w in result.what_if}
    matmul = by[("category_at_bound", "matmul ops at their roofline bound")]
    assert matmul.amdahl_speedup == matmul.speedup > 1.03
    assert 1.0 <= matmul.replayed_speedup <= 1.02  # launch-bound: the replay keeps the host's pace
    graphs = next(w for w in result.what_if if w.scenario == "cuda_graphs")
    assert graphs.replayed_speedup > 2 and graphs.saved_s <= result.ranks[0].steps[0].idle_s + 1e-3
    assert {"faster_host", "remove_sync"} <= {w.scenario for w in result.what_if}
    (step,) = result.ranks[0].steps
    assert step.bound == "host" and step.replayed_span_s == pytest.approx(step.span_s)
    assert sum(step.critical_path.values()) == pytest.approx(step.replayed_span_s)
    assert np.isclose(sum(c.time_s for c in result.idle_causes), step.idle_s)


def test_kernels_from_another_gpu_scales_matched_ops_and_refuses_another_model():
    from infer_opt.errors import InvalidInput
    from infer_opt.trace.kernels_from import kernels_from_what_if

    mm = {"Input Dims": [[4, 8], [8, 16]], "Input type": ["c10::BFloat16"] * 2}
    add = {"Input Dims": [[4, 8], [4, 8]], "Input type": ["c10::BFloat16"] * 2}

    def model(mm_us, add_us, op_names=("aten::mm", "aten::add")):
        # two device-bound ops launched back to back: kernel time sets the step
        ops = [(op_names[0], 0.0, 2.0, -1, mm), (op_names[1], 2.0, 2.0, -1, add)]
        launches = [("cudaLaunchKernel", 0.5, 1.0, 1, 0), ("cudaLaunchKernel", 2.5, 1.0, 2, 1)]
        gpu = [
            ("kernel", "gemm", 3.0, mm_us, 7, 1, 0, 0, 0),
            ("kernel", "add", 3.0 + mm_us, add_us, 7, 2, 1, 1, 0),
        ]
        return make_events(ops=ops, launches=launches, gpu=gpu, steps=[(1, 0.0, 200.0)])

    here, there = model(100.0, 20.0), model(40.0, 10.0)
    rr, timelines = setup(here)
    mask = np.ones(len(here.gpu), dtype=bool)
    w = kernels_from_what_if(here, rr, there, np.ones(2, dtype=bool), timelines, mask)
    assert w.scenario == "kernels_from" and "2 of 2 ops matched" in w.description
    assert w.step_s == pytest.approx(120e-6) and w.replayed_step_s == pytest.approx(50e-6)
    assert w.amdahl_speedup == pytest.approx(120 / 50)
    other = model(40.0, 10.0, op_names=("aten::conv2d", "aten::relu"))
    with pytest.raises(InvalidInput, match="only 0 of 2 op instances match"):
        kernels_from_what_if(here, rr, other, np.ones(2, dtype=bool), timelines, mask)


def test_fused_attention_replaces_an_eager_pattern_with_a_flash_kernel():
    from infer_opt.results.trace import Peaks

    bf16 = ["c10::BFloat16"] * 2
    q_k = {"Input Dims": [[8, 128, 64], [8, 64, 128]], "Input type": bf16}
    p_v = {"Input Dims": [[8, 128, 128], [8, 128, 64]], "Input type": bf16}
    soft = {"Input Dims": [[8, 128, 128], []], "Input type": ["c10::BFloat16", "Scalar"]}
    names = [("aten::bmm", q_k), ("aten::softmax", soft), ("aten::bmm", p_v)]
    ops = [(n, 2.0 * i, 1.0, -1, a) for i, (n, a) in enumerate(names)]
    launches = [("cudaLaunchKernel", 2.0 * i + 0.5, 0.5, i + 1, i) for i in range(3)]
    gpu = [("kernel", f"k{i}", 10.0 + 10 * i, 10.0, 7, i + 1, i, i, 0) for i in range(3)]
    ev = make_events(ops=ops, launches=launches, gpu=gpu, steps=[(1, 0.0, 100.0)])
    rr, timelines = setup(ev)
    mask = np.ones(3, dtype=bool)
    (pattern,) = twr.attention_patterns(ev, mask, "half")
    assert [op for op, _ in pattern] == [0, 1, 2]
    peaks = Peaks({"bf16": 1e15}, 1e12, "test")
    # F = 4·8·128·128·64 = 33.6 MFLOP → 33.6 ns; Q = 4·8·128·64·2 B = 524 kB → 524 ns at 1 TB/s
    assert twr.flash_us(ev, 0, peaks) == pytest.approx(0.524288)
    (w,) = twr.fused_attention(ev, rr, timelines, mask, peaks, None, "half")
    assert w.scenario == "fused_attention" and w.step_s == pytest.approx(30e-6)
    assert w.amdahl_speedup == pytest.approx(30 / 0.524288)
    # replayed, the flash kernel waits for its launch (4.5 + the 9.5 µs latency k0 showed): the
    # window runs from k0's start (10) to 14 + 0.52 — the host's pace, not the kernel's
    assert w.replayed_step_s == pytest.approx(4.524288e-6)


@pytest.mark.parametrize(
    ("text", "kind", "pattern", "factor"),
    [
        ("gemm*=0.5x", "gpu", "gemm*", 0.5),
        (" matmul = 2x ", "gpu", "matmul", 2.0),
        ("aten::mm=0x", "gpu", "aten::mm", 0.0),
        ("host=2x", "host", "host", 2.0),
        ("HOST=1.5x", "host", "HOST", 1.5),
        ("sync:aten::item=off", "sync", "aten::item", 0.0),
        ("sync:cudaStreamSynchronize=OFF", "sync", "cudaStreamSynchronize", 0.0),
    ],
)
def test_what_if_grammar(text, kind, pattern, factor):
    from infer_opt.trace.user_edits import parse_edit

    e = parse_edit(text)
    assert (e.kind, e.pattern, e.factor) == (kind, pattern, factor)


@pytest.mark.parametrize(
    "text", ["gemm", "gemm=half", "=0.5x", "sync:x=0.5x", "matmul=off", "host=0x", "host=-1x"]
)
def test_what_if_grammar_refuses(text):
    from infer_opt.errors import InvalidInput
    from infer_opt.trace.user_edits import parse_edit

    with pytest.raises(InvalidInput, match="--what-if"):
        parse_edit(text)
