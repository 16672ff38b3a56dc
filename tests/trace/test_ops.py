"""Per-op groups, coverage and host syncs on hand-built TraceEvents (exact numbers)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.results.trace import Peaks
from infer_opt.trace.ops import coverage, host_syncs, op_groups
from tests.trace.builders import make_events

PEAKS = Peaks({"bf16": 1e15, "fp32": 6e13, "tf32": 4.9e14}, 3.35e12, "test", launch_s=2e-6)
BF16 = "c10::BFloat16"


def _prod(dims):
    return math.prod(dims) if dims else 1


def stub_cost(name, args, *, causal="half"):
    """The formulas the tests rely on (a stand-in for op_costs.op_cost): matmuls 2·M·N·K
    (+ M·N bias), elementwise bytes = inputs + output at 2 bytes."""
    dims = args.get("Input Dims") or []
    if len(dims) < 2 or len(dims[0]) != 2 or len(dims[-2]) != 2 or len(dims[-1]) < 1:
        return None
    if name == "aten::linear":
        (m, k), (n, _) = dims[0], dims[1]
        return SimpleNamespace(
            flops=2 * m * n * k + m * n, bytes=2 * (m * k + n * k + n + m * n), family="matmul", dtype="bf16"
        )
    if name in ("aten::addmm", "aten::mm"):
        a, b = dims[-2], dims[-1]
        m, k, n = a[0], a[1], b[1]
        return SimpleNamespace(
            flops=2 * m * n * k, bytes=2 * (m * k + k * n + m * n), family="matmul", dtype=""
        )
    if name == "aten::add":
        return SimpleNamespace(
            flops=_prod(dims[0]), bytes=2 * 3 * _prod(dims[0]), family="elementwise", dtype=""
        )
    return None


LINEAR = {"Input Dims": [[4, 8], [16, 8], [16]], "Input type": [BF16] * 3}
ADDMM = {"Input Dims": [[16], [4, 8], [8, 16]], "Input type": [BF16] * 3}
ADD = {"Input Dims": [[4, 16], [4, 16]], "Input type": [BF16, BF16]}
COPY = {"Input Dims": [[4, 16], [4, 16]], "Input type": [BF16, BF16]}

OPS = [
    ("aten::linear", 0, 100, -1, LINEAR),  # 0
    ("aten::t", 1, 1, 0, {"Input Dims": [[16, 8]]}),  # 1
    ("aten::addmm", 5, 90, 0, ADDMM),  # 2
    ("aten::add", 200, 20, -1, ADD),  # 3
    ("aten::copy_", 300, 10, -1, COPY),  # 4
    ("Torch-Compiled Region: 0/0", 400, 50, -1, {}),  # 5
    ("aten::is_nonzero", 500, 30, -1, {"Input Dims": [[]]}),  # 6
    ("aten::item", 501, 28, 6, {"Input Dims": [[]]}),  # 7
    ("aten::_local_scalar_dense", 502, 26, 7, {"Input Dims": [[]]}),  # 8
]
LAUNCHES = [
    ("cudaLaunchKernel", 10, 3, 101, 2),  # 0 gemm
    ("cudaLaunchKernel", 14, 3, 102, 2),  # 1 split-K reduce
    ("cudaMemsetAsync", 8, 1, 100, 2),  # 2 memset
    ("cudaLaunchKernel", 205, 3, 103, 3),  # 3 add
    ("cudaLaunchKernel", 302, 3, 104, 4),  # 4 copy kernel
    ("cudaMemcpyAsync", 306, 2, 105, 4),  # 5 memcpy
    ("cudaLaunchKernel", 410, 3, 106, 5),  # 6 triton
    ("cudaGraphLaunch", 600, 5, 107, -1),  # 7 graph replay
    ("cudaMemcpyAsync", 505, 2, 108, 8),  # 8 DtoH of the item
    ("cudaStreamSynchronize", 508, 15, -1, 8),  # 9
    ("cudaMemcpy", 700, 12, 109, -1),  # 10 blocking copy at the top level
]
GPU = [
    ("memset", "Memset (Device)", 20.0, 0.75, 7, 100, 2, 2, 0),
    (
        "kernel",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_splitK",
        21.0,
        10.5,
        7,
        101,
        0,
        2,
        0,
    ),
    ("kernel", "void cutlass::Kernel2<cutlass_80_splitKreduce_kernel>", 32.0, 1.25, 7, 102, 1, 2, 0),
    (
        "kernel",
        "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add>",
        210.0,
        2.0,
        7,
        103,
        3,
        3,
        0,
    ),
    ("kernel", "void at::native::unrolled_elementwise_kernel<copy>", 310.0, 3.0, 7, 104, 4, 4, 0),
    ("memcpy", "Memcpy DtoD (Device -> Device)", 314.0, 0.5, 7, 105, 5, 4, 0),
    ("kernel", "triton_poi_fused_add_mul_0", 420.0, 4.0, 7, 106, 6, 5, 0),
    ("kernel", "void graph_kernel<float>", 610.0, 5.0, 7, 107, 7, -1, 0),
    ("kernel", "void queued_before_window", 1.0, 6.0, 7, 3, -2, -1, -1),
    ("kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 620.0, 7.0, 13, 110, -1, -1, 0),
    ("sync", "Stream Sync", 700.0, 1.0, 7, 111, -1, -1, 0),
]


def events(**kw):
    return make_events(ops=OPS, launches=LAUNCHES, gpu=GPU, steps=[(1, 0, 1000)], **kw)


def by_name(groups):
    return {g.name: g for g in groups}


def test_group_time_is_the_sum_of_its_events_incl_memset_and_split_k_and_nested_linear_counted_once():
    groups = by_name(op_groups(events(), peaks=PEAKS, cost=stub_cost))
    linear = groups["aten::linear"]
    assert linear.time_s == pytest.approx((0.75 + 10.5 + 1.25) / 1e6, rel=1e-15)
    assert linear.kernels == 3 and linear.calls == 1
    assert linear.flops == 2 * 4 * 16 * 8 + 4 * 16  # the linear's formula once, not + addmm's
    assert "aten::addmm" not in groups and "aten::t" not in groups
    assert groups["aten::copy_"].time_s == pytest.approx(3.5e-6, rel=1e-15)
    assert groups["aten::copy_"].bound == "unknown" and groups["aten::copy_"].flops == 0
    assert groups["aten::add"].time_s == pytest.approx(2e-6, rel=1e-15)
    # the groups hold exactly the linked non-sync events, each once
    linked = [g for g in GPU if g[7] >= 0 and g[0] != "sync"]
    assert math.fsum(g.time_s for g in groups.values()) == pytest.approx(
        math.fsum(x[3] for x in linked) / 1e6
    )


def test_tiny_kernels_are_launch_bound_and_a_big_matmul_compute_bound():
    groups = by_name(op_groups(events(), peaks=PEAKS, cost=stub_cost))
    assert groups["aten::add"].bound == "launch"
    assert groups["aten::linear"].bound == "launch"
    n = 8192
    big = make_events(
        ops=[("aten::mm", 0, 2000, -1, {"Input Dims": [[n, n], [n, n]], "Input type": [BF16, BF16]})],
        launches=[("cudaLaunchKernel", 1, 3, 1, 0)],
        gpu=[("kernel", "sm90_xmma_gemm_bf16bf16", 10, 1500.0, 7, 1, 0, 0, -1)],
    )
    (mm,) = op_groups(big, peaks=PEAKS, cost=stub_cost)
    assert mm.flops == 2 * n**3
    assert mm.bound == "compute" and mm.precision == "bf16"
    assert mm.achieved_flops_per_s == pytest.approx(2 * n**3 / 1.5e-3)
    assert mm.peak_fraction == pytest.approx(2 * n**3 / 1.5e-3 / 1e15)


@pytest.mark.parametrize(
    ("kernel", "precision", "peak"),
    [
        ("ampere_sgemm_128x64_nn", "fp32", 6e13),
        ("sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16", "tf32", 4.9e14),
    ],
)
def test_fp32_matmul_runs_as_tf32_or_fp32_by_its_kernel_name(kernel, precision, peak):
    n = 4096
    ev = make_events(
        ops=[("aten::mm", 0, 2000, -1, {"Input Dims": [[n, n], [n, n]], "Input type": ["float", "float"]})],
        launches=[("cudaLaunchKernel", 1, 3, 1, 0)],
        gpu=[("kernel", kernel, 10, 1000.0, 7, 1, 0, 0, -1)],
    )
    (mm,) = op_groups(ev, peaks=PEAKS, cost=stub_cost)
    assert mm.precision == precision
    assert mm.peak_fraction == pytest.approx(2 * n**3 / 1e-3 / peak)


def test_per_step_spread_and_kernel_mask():
    ops = [("aten::add", 0, 10, -1, ADD), ("aten::add", 100, 10, -1, ADD)]
    launches = [("cudaLaunchKernel", 1, 1, 1, 0), ("cudaLaunchKernel", 101, 1, 2, 1)]
    gpu = [("kernel", "add", 5, 2.0, 7, 1, 0, 0, 0), ("kernel", "add", 105, 3.0, 7, 2, 1, 1, 1)]
    ev = make_events(ops=ops, launches=launches, gpu=gpu, steps=[(1, 0, 50), (2, 50, 150)])
    (add,) = op_groups(ev, peaks=PEAKS, cost=stub_cost)
    assert add.calls == 2 and add.time_s == pytest.approx(5e-6)
    assert add.time_spread_s == pytest.approx(1e-6)
    (second,) = op_groups(ev, peaks=PEAKS, cost=stub_cost, kernel_mask=np.array([False, True]))
    assert second.calls == 1 and second.time_s == pytest.approx(3e-6) and second.time_spread_s is None


def test_coverage_reasons_exact():
    rows = {r.reason: r for r in coverage(events(), cost=stub_cost)}
    total = 0.75 + 10.5 + 1.25 + 2 + 3 + 0.5 + 4 + 5 + 6 + 7 + 1
    expected = {
        "modelled": 14.5,
        "no_formula": 3.0,
        "memcpy": 0.5,
        "no_shapes": 9.0,  # the torch.compile region and the graph replay
        "unlinked": 6.0,
        "communication": 7.0,
        "sync": 1.0,
    }
    assert set(rows) == set(expected)
    for reason, us in expected.items():
        assert rows[reason].time_s == pytest.approx(us / 1e6)
        assert rows[reason].fraction == pytest.approx(us / total)
    assert math.fsum(r.fraction for r in rows.values()) == pytest.approx(1.0)


def test_host_syncs_name_the_enclosing_op():
    rows = {(r.name, r.under_op): r for r in host_syncs(events())}
    assert set(rows) == {("cudaStreamSynchronize", "aten::is_nonzero"), ("cudaMemcpy", "")}
    assert rows[("cudaStreamSynchronize", "aten::is_nonzero")].time_s == pytest.approx(15e-6)
    assert rows[("cudaMemcpy", "")].calls == 1


def test_host_syncs_without_runtime_events_list_the_scalar_reads():
    ev = make_events(ops=OPS, gpu=[])
    rows = host_syncs(ev)
    assert [(r.name, r.under_op, r.calls) for r in rows] == [("aten::item", "aten::is_nonzero", 1)]


@st.composite
def random_events(draw):
    n_ops = draw(st.integers(0, 5))
    ops = [
        (
            draw(st.sampled_from(["aten::add", "aten::mm", "aten::copy_", "custom"])),
            0,
            10,
            -1,
            draw(st.sampled_from([{}, ADD, {"Input Dims": [[2, 3], [3, 4]]}])),
        )
        for _ in range(n_ops)
    ]
    n = draw(st.integers(1, 12))
    gpu = []
    for i in range(n):
        kind = draw(st.sampled_from(["kernel", "memcpy", "memset", "sync"]))
        name = draw(st.sampled_from(["k", "nccl_allreduce", "Memcpy HtoD"]))
        op = draw(st.integers(-1, n_ops - 1))
        dur = draw(st.floats(0, 1e4, allow_nan=False))
        gpu.append((kind, name, float(i), dur, 7, i, -1, op, 0))
    return make_events(ops=ops, gpu=gpu)


@settings(max_examples=60, deadline=None)
@given(random_events())
def test_coverage_fractions_sum_to_one_and_groups_sum_to_attributed_time(ev):
    rows = coverage(ev, cost=stub_cost)
    total = math.fsum(ev.gpu.dur_us)
    if total > 0:
        assert math.fsum(r.fraction for r in rows) == pytest.approx(1.0)
        assert math.fsum(r.time_s for r in rows) == pytest.approx(total / 1e6)
    else:
        assert rows == ()
    groups = op_groups(ev, peaks=PEAKS, cost=stub_cost)
    attributed = math.fsum(
        d for d, k, o in zip(ev.gpu.dur_us, ev.gpu.kind, ev.gpu.op, strict=True) if o >= 0 and k != 3
    )
    assert math.fsum(g.time_s for g in groups) == pytest.approx(attributed / 1e6, abs=1e-15)


def test_with_the_real_formulas_nested_linear_counts_once_and_out_is_not_an_input():
    from infer_opt.trace.op_costs import op_cost

    m, k, n = 64, 128, 256
    linear = {"Input Dims": [[1, m, k], [n, k], [n]], "Input type": [BF16] * 3}
    addmm = {"Input Dims": [[n], [m, k], [k, n], [], []], "Input type": [BF16] * 3 + ["Scalar"] * 2}
    mm_out = {"Input Dims": [[m, k], [k, n], [m, n]], "Input type": [BF16] * 3}
    ops = [
        ("aten::linear", 0, 50, -1, linear),
        ("aten::view", 1, 1, 0, {"Input Dims": [[1, m, k], []], "Input type": [BF16, "ScalarList"]}),
        ("aten::addmm", 2, 40, 0, addmm),
        ("aten::mm", 100, 20, -1, mm_out),
    ]
    launches = [
        ("cudaLaunchKernel", 3, 2, 1, 2),
        ("cudaMemsetAsync", 6, 1, 2, 2),
        ("cudaLaunchKernel", 101, 2, 3, 3),
    ]
    gpu = [
        ("kernel", "sm90_gemm_bf16", 10.0, 5.5, 7, 1, 0, 2, -1),
        ("memset", "Memset (Device)", 16.0, 0.5, 7, 2, 1, 2, -1),
        ("kernel", "sm90_gemm_bf16", 110.0, 4.0, 7, 3, 2, 3, -1),
    ]
    ev = make_events(ops=ops, launches=launches, gpu=gpu)
    groups = by_name(op_groups(ev, peaks=PEAKS))
    assert set(groups) == {"aten::linear", "aten::mm"}
    assert groups["aten::linear"].flops == 2 * m * n * k + m * n
    assert groups["aten::linear"].time_s == pytest.approx(6e-6)
    mm = groups["aten::mm"]
    assert mm.flops == 2 * m * n * k
    assert mm.bytes == op_cost("aten::mm", mm_out).bytes == 2 * (m * k + k * n + m * n)  # out written once
    rows = {r.reason: r.fraction for r in coverage(ev)}
    assert rows == {"modelled": pytest.approx(1.0)}
