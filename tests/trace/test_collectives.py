"""Collective kernels: message sizes, nccl-tests bandwidths, cross-rank waits, the α-β fit."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.trace.collectives import CollectiveCall, alpha_beta, collective_call, collective_rows

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
K = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def args(name, nin, nout, group, dtype="Float"):
    return {
        "Collective name": name,
        "In msg nelems": nin,
        "Out msg nelems": nout,
        "Group size": group,
        "dtype": dtype,
    }


def test_message_sizes_follow_nccl_tests():
    c = collective_call(K, args("allreduce", 1000, 1000, 4), 0, 10.0, 5.0)
    assert (c.collective, c.bytes, c.dtype, c.group_size) == ("all_reduce", 4000, "fp32", 4)
    ag = collective_call(
        "ncclDevKernel_AllGather_RING_LL", args("allgather", 250, 1000, 4, "BFloat16"), 0, 0, 1
    )
    assert (ag.collective, ag.bytes) == ("all_gather", 2000)  # the gathered output
    rs = collective_call(
        "ncclDevKernel_ReduceScatter_Sum_bf16", args("reduce_scatter", 1000, 250, 4, "BFloat16"), 0, 0, 1
    )
    assert (rs.collective, rs.bytes) == ("reduce_scatter", 2000)  # the input


def test_from_kernel_name_only_and_not_a_collective():
    c = collective_call("ncclDevKernel_AllReduce_Sum_f32_RING_LL", {}, 1, 0.0, 3.0)
    assert (c.collective, c.dtype, c.bytes, c.rank, c.group_size) == ("all_reduce", "fp32", None, 1, None)
    assert (
        collective_call("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", {}, 0, 0, 1).collective == "send_recv"
    )
    assert collective_call("ampere_bf16_s16816gemm", {}, 0, 0, 1) is None


def test_busbw_factors():
    rows = collective_rows([[collective_call(K, args("allreduce", 1000, 1000, 4), 0, 0.0, 10.0)]])
    (row,) = rows
    assert row.algbw_bytes_per_s == pytest.approx(4000 / 10e-6)
    assert row.busbw_bytes_per_s == pytest.approx(4000 / 10e-6 * 2 * 3 / 4)
    ag = collective_rows([[collective_call("x_nccl", args("allgather", 250, 1000, 4), 0, 0.0, 10.0)]])[0]
    assert ag.busbw_bytes_per_s == pytest.approx(ag.algbw_bytes_per_s * 3 / 4)
    bc = collective_rows([[collective_call("x_nccl", args("broadcast", 10, 10, 8), 0, 0.0, 1.0)]])[0]
    assert bc.busbw_bytes_per_s == bc.algbw_bytes_per_s


def _call(rank, ts, dur, n=1000):
    return CollectiveCall(rank, ts, dur, "all_reduce", n * 4, "fp32", 2)


def test_ranks_matched_by_order_wait_and_transfer():
    # two calls; rank 0 starts each 6 µs early and so runs 6 µs longer
    rank0 = [_call(0, 100.0, 10.0), _call(0, 200.0, 10.0)]
    rank1 = [_call(1, 206.0, 4.0), _call(1, 106.0, 4.0)]  # order in the list does not matter
    (row,) = collective_rows([rank0, rank1])
    assert row.calls == 2
    assert row.wait_s == pytest.approx(6e-6)
    assert row.transfer_s == pytest.approx(4e-6)
    assert row.time_s == pytest.approx(7e-6)  # median over all kernels includes the wait


def test_alpha_beta_from_the_trace():
    alpha, beta = 5e-6, 1e10
    calls = [
        _call(0, i * 100.0, (alpha + n * 4 / beta) * 1e6, n) for i, n in enumerate((1e3, 1e4, 1e5, 1e6, 1e7))
    ]
    fits, notices = alpha_beta(collective_rows([calls]))
    assert fits["all_reduce"].alpha_s == pytest.approx(alpha, rel=0.05)
    assert fits["all_reduce"].beta_bytes_per_s == pytest.approx(beta, rel=0.05)
    assert notices[0].code == "collective_wait_included"
    few, none_said = alpha_beta(collective_rows([calls[:2]]))
    assert few == {"all_reduce": None} and none_said == ()


@given(st.integers(2, 64), st.integers(1, 10**9), st.floats(1.0, 1e6))
def test_busbw_over_algbw_is_the_factor(n, elems, dur):
    row = collective_rows([[collective_call(K, args("allreduce", elems, elems, n), 0, 0.0, dur)]])[0]
    assert row.busbw_bytes_per_s / row.algbw_bytes_per_s == pytest.approx(2 * (n - 1) / n)


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces absent")
def test_shared_nccl_trace():
    with gzip.open(TRACES / "hta__nccl_parser_config__nccl_data.json.gz") as f:
        events = json.load(f)["traceEvents"]
    calls = [
        c
        for e in events
        if e.get("cat") in ("kernel", "Kernel")
        and (c := collective_call(e["name"], e.get("args", {}), 0, e["ts"], e.get("dur", 0)))
    ]
    assert len(calls) == 21
    rows = collective_rows([calls])
    assert {r.collective for r in rows} == {"all_reduce", "broadcast"}
    assert all(r.group_size == 2 and r.bytes > 0 for r in rows)
    assert sum(r.calls for r in rows) == 21
