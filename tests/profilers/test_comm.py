"""The collective sweep: sizes, checks before timing, the single-rank fallback (the sweep over
2 gloo ranks is run through the CLI in tests/cli/test_comm_cli.py)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.cost_models import comm as comm_module
from infer_opt.errors import InvalidInput, RunFailure
from infer_opt.notices import has
from infer_opt.profilers import comm, distributed
from infer_opt.results.comm import CommResult
from tests.profilers.distributed_helpers import json_lines, torchrun


def test_sizes_are_a_geometric_grid_from_four_bytes():
    assert comm.message_sizes(4, 64, 2) == [4, 8, 16, 32, 64]
    assert comm.message_sizes(4, 100, 4) == [4, 16, 64]
    assert comm.message_sizes(4, 16 * 2**20)[-1] == 16 * 2**20
    with pytest.raises(InvalidInput, match="max_size"):
        comm.message_sizes(64, 4)


def test_sizes_are_whole_elements_so_no_two_sizes_build_the_same_buffer():
    # 3 B of float32 used to become 4 B twice (3 and 6 B both one element) and never reach 64 B
    assert comm.message_sizes(3, 64, 2, element=4) == [4, 8, 16, 32, 64]
    assert comm.message_sizes(4, 64, 2, element=8) == [8, 16, 32, 64]
    with pytest.raises(InvalidInput, match="max_size"):
        comm.message_sizes(3, 3, 2, element=4)


@given(st.integers(1, 10_000), st.integers(1, 10**7), st.integers(2, 8), st.sampled_from([1, 2, 4, 8]))
def test_every_size_is_whole_elements_distinct_and_in_range(low, high, factor, element):
    try:
        sizes = comm.message_sizes(low, high, factor, element)
    except InvalidInput:
        assert high < low or -(-low // element) * element > high
        return
    assert all(s % element == 0 and low <= s <= high for s in sizes)
    assert len(set(sizes)) == len(sizes) and sizes == sorted(sizes)


def test_collectives_are_named_in_canonical_order():
    assert comm.parse_collectives(["all"], 2) == comm_module.COLLECTIVES
    assert comm.parse_collectives(["send_recv", "all_reduce"], 4) == ("all_reduce", "send_recv")
    assert comm.parse_collectives(["all_reduce"], 1) == (comm_module.LOCAL_COPY,)


def test_a_wrong_result_is_never_timed():
    op = comm.CollectiveOp("all_reduce", 64, run=lambda: None, check=lambda: 3.0)
    with pytest.raises(RunFailure, match="all_reduce of 64 B gave a wrong result on rank 1"):
        comm.checked(op, 1)
    assert comm.checked(comm.CollectiveOp("all_reduce", 64, lambda: None, lambda: 0.0), 0).bytes == 64


def test_check_tolerance_allows_rounding_only_in_16_bit_floats():
    assert comm.tolerance(torch.float32, 2) < 1e-5
    assert comm.tolerance(torch.bfloat16, 2) == pytest.approx(0.0078125 * 5)


def test_one_rank_measures_the_local_copy_and_says_why(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    updates = []
    with distributed.rank_job("auto", "cpu", 10) as ctx:
        settings = comm.SweepSettings(
            comm.parse_collectives(["all"], ctx.world_size),
            tuple(comm.message_sizes(4, 4096, 4)),
            torch.float32,
            warmup=1,
            reps=3,
            bootstrap=10,
        )
        result = comm.run_sweep(ctx, settings, on_update=updates.append)
    assert result is not None and result.complete
    assert [c.collective for c in result.collectives] == [comm_module.LOCAL_COPY]
    (copy,) = result.collectives
    assert [p.bytes for p in copy.points] == [4, 16, 64, 256, 1024, 4096]
    assert copy.alpha_s is not None and copy.alpha_s > 0
    assert has(result.warnings, "comm_single_rank")
    assert len(updates) == 6 and not updates[0].complete and has(updates[0].warnings, "comm_partial")


@pytest.mark.gpu
def test_one_gpu_measures_the_local_copy_with_cuda_events(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    with distributed.rank_job("auto", "cuda", 30) as ctx:
        assert (ctx.backend, ctx.device.type) == ("nccl", "cuda")
        settings = comm.SweepSettings(
            (comm_module.LOCAL_COPY,), (4, 2**20, 2**26), torch.float32, warmup=2, reps=5
        )
        result = comm.run_sweep(ctx, settings)
    assert result is not None and has(result.warnings, "comm_single_rank")
    (copy,) = result.collectives
    assert copy.points[-1].algbw_bytes_per_s > 1e10  # a device-local copy runs at HBM speed


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_every_collective_over_two_gpus_with_nccl():
    run = torchrun("-m", "tests.profilers.dist_workers", "sweep", DEVICE="cuda")
    assert run.returncode == 0, run.stderr[-2000:]
    result = CommResult.from_dict(json_lines(run.stdout)[0])
    assert (result.backend, result.world_size) == ("nccl", 2)
    assert [c.collective for c in result.collectives] == list(comm_module.COLLECTIVES)


def _sweep(sizes, crossover):
    points = tuple(
        comm_module.CommPoint(
            bytes=s,
            time_s=1e-6,
            algbw_bytes_per_s=s / 1e-6,
            busbw_bytes_per_s=s / 1e-6,
            rank_median_s=(1e-6,),
            q1_s=1e-6,
            q3_s=1e-6,
            slowest_rank=0,
            reps=20,
        )
        for s in sizes
    )
    return comm_module.CollectiveSweep("local_copy", 1.0, points, crossover_bytes=crossover)


@pytest.mark.parametrize(
    ("sizes", "crossover", "parameter"),
    [((4, 64), 6000.0, "beta"), ((8192, 65536), 6000.0, "alpha"), ((4, 65536), 6000.0, None)],
)
def test_a_fit_from_sizes_on_one_side_of_its_crossover_says_which_term_is_extrapolated(
    sizes, crossover, parameter
):
    notices = comm._side_notices(_sweep(sizes, crossover))
    assert [n.values["parameter"] for n in notices] == ([parameter] if parameter else [])
