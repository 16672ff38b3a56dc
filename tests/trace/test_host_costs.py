"""The host's issue cost per launching op and the device's gap between queued kernels, from a
trace (infer_opt/trace/host_costs.py): a hand-made step with worked numbers."""

from __future__ import annotations

import numpy as np
import pytest

from infer_opt.trace import host_costs
from tests.trace.builders import make_events

BF16 = "c10::BFloat16"
MM = {"Input Dims": [[64, 1024], [1024, 1024]], "Input type": [BF16, BF16]}
ADD = {"Input Dims": [[4096], [4096], []], "Input type": [BF16, BF16, "Scalar"]}


def _step():
    """mm at 0 µs, a view at 30, add at 50, .item() at 95 (the host waits 80 µs in a stream
    sync), mm at 200. Kernels: mm 12–72, add 73.5–83.5 (its launch returned at 59, before the
    mm ended: queued, 1.5 µs gap), mm 215–225 (launched at 205–210, after: not queued)."""
    ops = [
        ("aten::mm", 0.0, 20.0, -1, MM),
        ("aten::view", 30.0, 1.0, -1, {}),
        ("aten::add", 50.0, 10.0, -1, ADD),
        ("aten::mm", 200.0, 20.0, -1, MM),
        ("aten::item", 95.0, 90.0, -1, {}),
    ]
    launches = [
        ("cudaLaunchKernel", 5.0, 5.0, 1, 0),
        ("cudaLaunchKernel", 55.0, 4.0, 2, 2),
        ("cudaStreamSynchronize", 100.0, 80.0, 3, 4),
        ("cudaLaunchKernel", 205.0, 5.0, 4, 3),
    ]
    gpu = [
        ("kernel", "gemm", 12.0, 60.0, 7, 1, 0, 0, 0),
        ("kernel", "add_kernel", 73.5, 10.0, 7, 2, 1, 2, 0),
        ("kernel", "gemm", 215.0, 10.0, 7, 4, 3, 3, 0),
    ]
    return make_events(ops=ops, launches=launches, gpu=gpu, steps=[(1, 0.0, 300.0)])


def test_issue_cost_per_launching_op_with_sync_waits_left_out():
    s = host_costs.issue_samples(_step())
    # add: 50 − 0 (the view's time is inside it); mm: 200 − 50 − 80 µs of stream sync
    assert s.issue_s == pytest.approx([50e-6, 70e-6])
    assert s.family[0].startswith("add") and s.family[1].startswith("gemm")
    assert s.kernels.tolist() == [1, 1]
    assert s.queued_gap_s == pytest.approx([1.5e-6])


def test_summarize_pools_the_traces():
    a = host_costs.HostIssueSamples(("gemm.nn", "add.t", "gemm.nn"), np.array([10e-6, 4e-6, 30e-6]),
                                    np.array([1, 1, 3]), np.array([1e-6, 3e-6]))  # fmt: skip
    b = host_costs.HostIssueSamples(("gemm.nn",), np.array([20e-6]), np.array([2]), np.array([2e-6]))
    rows, overall, gap = host_costs.summarize([a, b])
    by = {r.family: r for r in rows}
    assert by["gemm.nn"].issue_s == pytest.approx(20e-6)  # median of 10, 30, 20
    assert by["gemm.nn"].kernels == pytest.approx(2.0) and by["gemm.nn"].samples == 3
    assert by["add.t"].issue_s == pytest.approx(4e-6)
    assert overall == pytest.approx(15e-6)  # median of 10, 4, 30, 20
    assert gap == pytest.approx(2e-6)
    assert host_costs.summarize([]) == ((), 0.0, 0.0)
