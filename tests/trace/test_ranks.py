"""The map over ranks (trace/ranks.py): the local pool, a real Dask LocalCluster (workers as
processes on the loopback, not a mock) giving the same result exactly, a rank that cannot be
read, a worker that dies, an unreachable scheduler."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from infer_opt.api import load_trace
from infer_opt.errors import InvalidInput
from infer_opt.results import to_jsonable
from infer_opt.trace import ranks as rk
from infer_opt.trace.analyze import analyze
from tests.trace.rank_files import allreduce, gemm, three_ranks, write_rank

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
PAIR = ("hta__timeline_analysis__sampled_rank-0.json.gz", "hta__trace_filter__sampled_rank-1.json.gz")


def _job(tmp_path: Path) -> Path:
    job = three_ranks(tmp_path / "job")
    if TRACES.is_dir():  # and the shared ranks of a 128-rank job, next to it
        pair = tmp_path / "pair"
        pair.mkdir()
        for name in PAIR:
            (pair / name).symlink_to(TRACES / name)
    return job


def _same(a, b) -> bool:
    return to_jsonable(a) == to_jsonable(b)


def test_pool_equals_one_process(tmp_path):
    job = _job(tmp_path)
    assert _same(analyze([job], workers=1).result, analyze([job], workers=2).result)


def test_progress_over_ranks(tmp_path):
    seen = []
    analyze([_job(tmp_path)], workers=1, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_unreadable_rank_named_and_the_rest_kept(tmp_path):
    job = _job(tmp_path)
    (job / "rank9.json").write_text("{not json")
    result = analyze([job], workers=1).result
    failed = [w for w in result.warnings if w.code == "trace_rank_failed"]
    assert [w.values["file"] for w in failed] == ["rank9.json"] and failed[0].values["error"]
    assert [r.rank for r in result.ranks] == [0, 1, 2] and result.cross_rank is not None
    with pytest.raises(InvalidInput, match=r"rank9\.json"):  # --strict: the file's own one line
        analyze([job], workers=1, strict=True)


def test_one_unreadable_file_keeps_its_own_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    with pytest.raises(InvalidInput):
        analyze([bad])


def test_summaries_hold_no_events_unless_asked(tmp_path):
    job = _job(tmp_path)
    found = analyze([job], workers=1, keep_events=False)
    assert found.traces == () and found.masks == ()
    summary = rk.summarize(str(job / "rank0.json"), rk.RankOptions())
    assert isinstance(summary, rk.RankSummary) and summary.events is None
    # the kernels frame reads the events again when the analysis kept none
    assert len(load_trace(job / "rank0.json").kernels) == 3


def test_scheduler_from_the_environment(monkeypatch):
    monkeypatch.setenv(rk.SCHEDULER_ENV, "tcp://10.0.0.1:8786")
    assert rk.scheduler_address(None) == "tcp://10.0.0.1:8786"
    assert rk.scheduler_address("tcp://h:1") == "tcp://h:1"
    monkeypatch.delenv(rk.SCHEDULER_ENV)
    assert rk.scheduler_address(None) is None


@pytest.mark.slow
def test_unreachable_scheduler_is_one_line_in_seconds(tmp_path):
    start = time.monotonic()
    with pytest.raises(InvalidInput, match=r"--scheduler.*no Dask scheduler answered"):
        analyze([_job(tmp_path)], scheduler="tcp://127.0.0.1:9")
    assert time.monotonic() - start < 30


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        ) as c,
        distributed.Client(c) as client,
    ):
        yield c, client


@pytest.mark.slow
def test_on_a_cluster_each_ranks_graph_stays_on_its_worker_for_the_joint_replay(tmp_path, cluster, monkeypatch):
    """The joint replay's rounds run where each rank's graph was made: the driver gets futures,
    never a graph, and the straggler's replayed cost is the one a local run gives."""
    from distributed import Future

    from infer_opt.trace import straggler_replay as tsr

    _, client = cluster
    job = _job(tmp_path)
    seen = []
    real = tsr.on_time
    monkeypatch.setattr(tsr, "on_time", lambda inputs, *a: seen.append(dict(inputs)) or real(inputs, *a))
    remote = analyze([job], scheduler=client, joint_replay=True).result
    assert seen and all(isinstance(v, Future) for v in seen[-1].values())
    local = analyze([job], workers=1, joint_replay=True).result
    assert not any(isinstance(v, Future) for v in seen[-1].values())
    (s,) = remote.cross_rank.straggler
    assert s.replayed_step_s is not None and s.on_time_scale < 1.0
    assert _same(remote, local)


@pytest.mark.slow
def test_local_cluster_equals_local_exactly(tmp_path, cluster):
    c, client = cluster
    job = _job(tmp_path)
    folders = [job] + ([tmp_path / "pair"] if (tmp_path / "pair").is_dir() else [])
    for folder in folders:
        local = analyze([folder], workers=2).result
        assert _same(analyze([folder], scheduler=c.scheduler_address).result, local)
        assert _same(analyze([folder], scheduler=client).result, local)
    frames = load_trace(job, scheduler=client)
    assert list(frames.imbalance["rank"]) == [0, 1, 2]
    assert set(frames.collective_skew["rank"]) == {0, 1, 2}
    assert list(frames.stragglers["rank"]) == [2]


@pytest.mark.slow
def test_dead_worker_fails_its_rank_only(tmp_path, cluster):
    import dask

    c, _ = cluster
    job = _job(tmp_path)

    def dies_on_rank1(path, options):  # a local function: Dask sends it by value
        if path.endswith("rank1.json"):
            os._exit(1)
        return rk.summarize(path, options)

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        found = rk.map_ranks(
            sorted(job.iterdir()), rk.RankOptions(), scheduler=c.scheduler_address, task=dies_on_rank1
        )
    failed = [f for f in found if isinstance(f, rk.RankFailure)]
    assert [Path(f.path).name for f in failed] == ["rank1.json"]
    assert sum(isinstance(f, rk.RankSummary) for f in found) == 2


def test_rank_with_collective_but_another_group(tmp_path):
    for rank in range(2):
        kernels = [gemm(10, 5), allreduce(20 + rank, 5, group="tp"), allreduce(40 + 3 * rank, 5, group="dp")]
        write_rank(tmp_path / f"r{rank}.json", rank, [(1, 0.0, kernels)], world_size=2)
    cross = analyze([tmp_path], workers=1).result.cross_rank
    assert {(m.group, round(m.skew_s * 1e6, 6)) for m in cross.collectives} == {("tp", 1.0), ("dp", 3.0)}
