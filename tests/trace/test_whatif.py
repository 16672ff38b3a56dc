"""What-ifs on a hand-built stream: exact savings, and their invariants."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.results.trace import OpGroup, StepTimeline
from infer_opt.trace.ops import op_groups
from infer_opt.trace.whatif import category_at_bound, matmul_at_fraction, what_ifs
from tests.trace.builders import make_events
from tests.trace.test_ops import ADD, BF16, PEAKS, stub_cost

MM = {"Input Dims": [[4, 8], [8, 16]], "Input type": [BF16, BF16]}
OPS = [("aten::add", 0, 5, -1, ADD), ("aten::add", 14, 2, -1, ADD), ("aten::mm", 13, 2, -1, MM)]
LAUNCHES = [
    ("cudaLaunchKernel", 5, 1, 1, 0),
    ("cudaLaunchKernel", 15, 1, 2, 1),
    ("cudaLaunchKernel", 14, 1, 3, 2),
]
GPU = [
    ("kernel", "add", 10.0, 2.0, 7, 1, 0, 0, 0),
    ("kernel", "add", 20.0, 2.0, 7, 2, 1, 1, 0),  # launched at 15 >= 12: an 8 us launch gap
    (
        "kernel",
        "gemm",
        23.0,
        10.0,
        7,
        3,
        2,
        2,
        0,
    ),  # launched at 14 < 22: queued, its 1 us gap is not the host's
    ("kernel", "other_stream", 0.0, 1.0, 9, 4, -1, -1, 0),
]
STEP = StepTimeline(1, 0.0, 50e-6, 22e-6, 28e-6, 15e-6, 10e-6, 0.0, 0.0, 0.25)


def scenarios():
    ev = make_events(ops=OPS, launches=LAUNCHES, gpu=GPU, steps=[(1, 0, 60)])
    groups = op_groups(ev, peaks=PEAKS, cost=stub_cost)
    found = what_ifs(ev, groups, PEAKS, [STEP], cost=stub_cost)
    return groups, {(w.scenario, w.description.split(" ")[0]): w for w in found}


def test_cuda_graphs_fusion_and_overlap_exact():
    _, found = scenarios()
    graphs = found[("cuda_graphs", "CUDA")]
    assert graphs.saved_s == pytest.approx(8e-6)
    assert graphs.speedup == pytest.approx(50 / 42)
    fusion = found[("fusion", "fusing")]
    assert fusion.saved_s == pytest.approx(2 * 4 * 16 * 2 / PEAKS.bytes_per_s)
    assert found[("overlap", "communication")].saved_s == pytest.approx(10e-6 * 0.75)
    assert all(w.step_s == 50e-6 for w in found.values())


def test_matmul_at_fraction_and_category_at_bound_are_amdahl():
    groups, found = scenarios()
    mm = next(g for g in groups if g.name == "aten::mm")
    target = max(mm.flops / (0.7 * 1e15), mm.bytes / PEAKS.bytes_per_s)
    w = found[("matmul_at_peak_fraction", "matmuls")]
    assert w.saved_s == pytest.approx(mm.time_s - target)  # f < 1: Amdahl saves t − t'
    elementwise = category_at_bound(groups, PEAKS, 50e-6, 1)
    adds = [g for g in groups if g.family == "elementwise"]
    bound = sum(max(g.flops / 1e15, g.bytes / PEAKS.bytes_per_s) for g in adds)
    ew = next(x for x in elementwise if x.description.startswith("elementwise"))
    assert ew.saved_s == pytest.approx(sum(g.time_s for g in adds) - bound)


def test_a_gap_in_which_a_host_sync_ended_is_not_a_launch_gap():
    launches = [*LAUNCHES, ("cudaStreamSynchronize", 12.5, 2.0, -1, -1)]  # ends at 14.5, inside 12..20
    ev = make_events(ops=OPS, launches=launches, gpu=GPU, steps=[(1, 0, 60)])
    groups = op_groups(ev, peaks=PEAKS, cost=stub_cost)
    found = {w.scenario: w for w in what_ifs(ev, groups, PEAKS, [STEP], cost=stub_cost)}
    assert found["cuda_graphs"].saved_s == 0.0


def test_no_steps_no_what_ifs():
    ev = make_events(ops=OPS, launches=LAUNCHES, gpu=GPU)
    assert what_ifs(ev, (), PEAKS, [], cost=stub_cost) == ()


groups_strategy = st.lists(
    st.builds(
        lambda fam, t, f, q, calls: OpGroup(
            "op", "", "bf16", calls, t, f, q, f / t, q / t, "compute", 0.0, "bf16", family=fam, kernels=calls
        ),
        st.sampled_from(["matmul", "elementwise", "attention", "norm"]),
        st.floats(1e-7, 1e-2),
        st.floats(0, 1e13),
        st.floats(0, 1e10),
        st.integers(1, 50),
    ),
    max_size=8,
)


@settings(max_examples=80, deadline=None)
@given(groups_strategy, st.floats(1e-6, 1e-1), st.integers(1, 5), st.floats(0.05, 1.0))
def test_savings_are_within_the_step_and_speedups_at_least_one(groups, step_s, n_steps, eta):
    found = category_at_bound(groups, PEAKS, step_s, n_steps)
    found.append(matmul_at_fraction(groups, PEAKS, step_s, n_steps, eta))
    for w in found:
        assert 0.0 <= w.saved_s <= w.step_s
        assert w.speedup >= 1.0 or math.isclose(w.speedup, 1.0)


def test_host_copies_are_held_to_the_host_link_not_the_hbm(tmp_path):
    """The class: a pageable host→device copy (an input's ``.to("cuda")``) judged against HBM
    reads as 1% of the peak and promises to save nearly all its time; it crosses PCIe."""
    from infer_opt.trace.devices import by_name
    from infer_opt.trace.reader import read_trace
    from infer_opt.trace.roofline import peaks_for
    from tests.trace.gpu_traces import H2D, add, to, write_trace

    ops = [to(1 << 22, 400.0, copy=H2D), to(1 << 21, 4.0), add(1 << 20, 5.0)]
    ev = read_trace(write_trace(tmp_path / "t.json", ops))
    peaks = peaks_for(by_name("h100"))
    assert peaks.host_link_bytes_per_s == 63e9
    groups = {g.family: g for g in op_groups(ev, peaks=peaks)}
    copy, cast = groups["transfer"], groups["copy"]
    # 2^22 bf16 = 8 MiB each way; the copy's formula counts read + write (16 MiB)
    assert copy.peak_fraction == pytest.approx(copy.bytes / 400e-6 / 63e9)
    assert cast.peak_fraction == pytest.approx(cast.bytes / 4e-6 / 3.35e12)
    found = {w.description: w for w in category_at_bound(list(groups.values()), peaks, 1e-3, 1)}
    transfer = found["host↔device copies at the link rate"]
    assert transfer.saved_s == pytest.approx(400e-6 - copy.bytes / 63e9)
    assert "63 GB/s" in transfer.assumption and "pinned" in transfer.assumption
    # the cast is the copy family's, at the HBM bound
    assert found["copy ops at their roofline bound"].saved_s == pytest.approx(4e-6 - cast.bytes / 3.35e12)


def test_cuda_graphs_never_save_more_than_the_idle_time():
    # a window whose launch gaps per step (summed over the window) pass the median step's idle
    launches = [("cudaLaunchKernel", 10.0 * i, 1.0, i + 1, -1) for i in range(4)]
    gpu = [("kernel", "k", 10.0 * i + 5, 1.0, 7, i + 1, i, -1, 0 if i < 3 else 1) for i in range(4)]
    ev = make_events(launches=launches, gpu=gpu, steps=[(1, 0.0, 30.0), (2, 30.0, 40.0)])
    steps = [
        StepTimeline(1, 0.0, 21e-6, 3e-6, 18e-6, 3e-6, 0.0, 0.0, 0.0, 0.0),
        StepTimeline(2, 0.0, 1e-6, 1e-6, 0.0, 1e-6, 0.0, 0.0, 0.0, 0.0),
        StepTimeline(3, 0.0, 1e-6, 1e-6, 0.0, 1e-6, 0.0, 0.0, 0.0, 0.0),
    ]
    found = what_ifs(ev, [], PEAKS, steps)
    (graphs,) = [w for w in found if w.scenario == "cuda_graphs"]
    assert graphs.saved_s == 0.0  # the median step has no idle time to give
