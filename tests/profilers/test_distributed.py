"""Running on every rank: failure reports through the store, argument agreement, the
rendezvous timeout, interrupts — with real torchrun jobs of 2 gloo ranks where it matters."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist

from infer_opt.errors import InvalidInput, RunFailure
from infer_opt.profilers import distributed
from infer_opt.profilers.distributed import RankContext, RankFailure, ReportedByRankZero
from tests.profilers.distributed_helpers import ROOT, error_lines, job_env, json_lines, torchrun

WORKERS = "tests.profilers.dist_workers"


def fake_ctx(rank: int, world_size: int = 2, timeout_s: float = 0.3) -> RankContext:
    return RankContext(
        rank, world_size, rank, world_size, 1, "gloo", torch.device("cpu"), timeout_s, dist.HashStore()
    )


def test_comm_errors_are_told_from_a_ranks_own_errors():
    assert distributed.is_comm_error(
        RuntimeError("[gloo/transport/tcp/pair.cc:553] Connection closed by peer")
    )
    wrapped = RunFailure("the model raised RuntimeError: [../third_party/gloo/...] Connection closed by peer")
    assert distributed.is_comm_error(wrapped)
    try:
        try:
            raise RuntimeError("NCCL watchdog timed out")
        except RuntimeError as inner:
            raise RunFailure("the model raised while running the decode step") from inner
    except RunFailure as outer:
        assert distributed.is_comm_error(outer)
    assert not distributed.is_comm_error(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not distributed.is_comm_error(MemoryError())


def test_rank_zero_reports_a_peers_own_error_by_rank():
    ctx = fake_ctx(0)
    peer = fake_ctx(1)
    peer_store_report = distributed._report(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"))
    ctx.store.set("error/1", json.dumps(peer_store_report))
    del peer
    error = distributed._handled(ctx, RuntimeError("[gloo] Connection closed by peer"))
    assert isinstance(error, RankFailure)
    assert str(error).startswith("rank 1: RuntimeError: CUDA out of memory")
    assert error.exit_code == 1


def test_rank_zero_keeps_its_own_error_first():
    ctx = fake_ctx(0)
    ctx.store.set(
        "error/1", json.dumps(distributed._report(RuntimeError("[gloo] Connection closed by peer")))
    )
    error = distributed._handled(ctx, ValueError("bad shapes"))
    assert isinstance(error, RankFailure) and str(error) == "rank 0: ValueError: bad shapes"
    invalid = InvalidInput("tp", 3, "tiny has 4 attention heads")
    assert distributed._handled(fake_ctx(0), invalid) is invalid  # a bad argument stays one


def test_a_peers_bad_argument_stays_a_bad_argument():
    ctx = fake_ctx(0)
    ctx.store.set("error/1", json.dumps(distributed._report(InvalidInput("seq_len", 4096, "at most 2048"))))
    error = distributed._handled(ctx, RuntimeError("Connection reset by peer (gloo)"))
    assert isinstance(error, InvalidInput)
    assert error.option == "seq_len" and "on rank 1" in error.expected


def test_a_failed_collective_with_no_report_blames_the_collective():
    start = time.monotonic()
    error = distributed._handled(fake_ctx(0, timeout_s=0.3), RuntimeError("[gloo] Connection closed by peer"))
    assert time.monotonic() - start < 5
    assert isinstance(error, RankFailure)
    assert "a collective failed" in str(error) and "another rank may have died" in str(error)


def test_other_ranks_publish_and_stay_quiet():
    ctx = fake_ctx(1)
    error = distributed._handled(ctx, RuntimeError("boom"))
    assert isinstance(error, ReportedByRankZero) and error.exit_code == 0
    report = json.loads(ctx.store.get("error/1"))
    assert report["message"] == "RuntimeError: boom" and report["comm"] is False


def test_backend_follows_the_device():
    assert distributed.resolve_backend("auto", torch.device("cpu")) == "gloo"
    with pytest.raises(InvalidInput, match="backend"):
        distributed.resolve_backend("nccl", torch.device("cpu"))
    with pytest.raises(InvalidInput, match="backend"):
        distributed.resolve_backend("mpi", torch.device("cpu"))


def test_a_process_torchrun_did_not_start_is_a_job_of_one(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    assert not distributed.launched()
    with distributed.rank_job("auto", "cpu", 10) as ctx:
        assert (ctx.rank, ctx.world_size, ctx.backend, ctx.reporter) == (0, 1, "gloo", True)
        assert distributed.gather_to_reporter(ctx, {"x": 1}) == [{"x": 1}]
        distributed.check_same_arguments(ctx, {"reps": 3})
    assert not dist.is_initialized()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_launch_rejects_a_bad_rank_count():
    with pytest.raises(InvalidInput, match="nproc"):
        distributed.launch(0, ["comm"])


def test_rendezvous_that_never_completes_ends_with_an_error():
    env = job_env(
        RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="0", TIMEOUT_S="2"
    )
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", WORKERS, "sweep"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - start < 30
    assert run.returncode == 1
    (line,) = error_lines(run.stderr)
    assert "rendezvous did not complete within 2 s" in line and "1/2" in line


# ---------------------------------------------------------------------------- real jobs of 2 ranks


def test_sharded_model_matches_the_single_device_model():
    run = torchrun("-m", WORKERS, "tp_exact")
    assert run.returncode == 0, run.stderr[-2000:]
    (out,) = json_lines(run.stdout)
    for rank in out["ranks"]:
        for name, errors in rank.items():
            assert errors["prefill"] < 1e-5 * max(1.0, errors["scale"]), name
            assert errors["decode"] < 1e-5 * max(1.0, errors["scale"]), name


def test_a_rank_that_raises_ends_the_run_with_one_line_naming_it():
    start = time.monotonic()
    run = torchrun("-m", WORKERS, "fail", FAIL_RANK="1", TIMEOUT_S="60")
    assert time.monotonic() - start < 60  # ended by the failure, not by the timeout
    assert run.returncode == 1
    assert error_lines(run.stderr) == ["Error: rank 1: RuntimeError: model exploded on purpose (rank 1)"]
    assert json_lines(run.stdout) == []


def test_arguments_that_differ_across_ranks_are_an_error():
    run = torchrun("-m", WORKERS, "differ")
    assert run.returncode != 0  # torchrun exits 1 whatever its worker's code (rank 0 exits 2)
    (line,) = error_lines(run.stderr)
    assert "max_size" in line and "rank 0: 4096, rank 1: 8192" in line


def test_interrupt_stops_every_rank_and_rank_zero_keeps_what_it_had():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", WORKERS]
    proc = subprocess.Popen(
        [*cmd, "interrupt"],
        cwd=ROOT,
        env=job_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # wait until rank 0 has a partial result
            lines.append(line)
            if "partial_points" in line:
                break
        proc.send_signal(signal.SIGINT)  # Ctrl-C reaches the launcher, which stops the ranks
        rest, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    records = json_lines("".join(lines) + rest)
    partial = [r["partial_points"] for r in records if "partial_points" in r]
    final = [r for r in records if "complete" in r]
    assert partial and final == [{"complete": False, "points": final[0]["points"]}]
    assert final[0]["points"] >= partial[0] >= 1  # rank 0 returned what it had received


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_sharded_model_matches_on_two_gpus_with_nccl():
    run = torchrun("-m", WORKERS, "tp_exact", DEVICE="cuda")
    assert run.returncode == 0, run.stderr[-2000:]
    for rank in json_lines(run.stdout)[0]["ranks"]:
        for errors in rank.values():
            assert errors["prefill"] < 1e-4 * max(1.0, errors["scale"])


def test_nproc_failure_is_rank_zeros_one_line_and_its_exit_code(capfd):
    code = distributed.launch(2, ["fail"], timeout_s=30, module=WORKERS)
    _, err = capfd.readouterr()
    assert code == 1
    assert [line for line in err.splitlines() if line.strip()] == [
        "Error: rank 1: RuntimeError: model exploded on purpose (rank 1)"
    ]
