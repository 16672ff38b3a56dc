"""Cross-rank analysis (trace/cross_rank.py): hand-made ranks checked by hand, the robust
outlier rule, and a folder that is not one job."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.errors import InvalidInput
from infer_opt.results import load_result, save_result, to_jsonable
from infer_opt.results.trace import RankTrace, StepTimeline
from infer_opt.trace import cross_rank as xr
from infer_opt.trace.analyze import analyze
from tests.trace.rank_files import allreduce, gemm, three_ranks, write_rank

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
PAIR = ("hta__timeline_analysis__sampled_rank-0.json.gz", "hta__trace_filter__sampled_rank-1.json.gz")


def test_three_ranks_by_hand(tmp_path):
    cross = analyze([three_ranks(tmp_path / "job")], workers=1).result.cross_rank
    assert cross is not None and cross.ranks == 3
    first, second = cross.collectives
    assert (first.name, first.group, first.index, first.step) == ("all_reduce", "0", 0, 5)
    assert first.ranks == (0, 1, 2)
    assert first.skew_s == pytest.approx(30e-6)
    assert first.wait_s == pytest.approx((30e-6, 0.0, 20e-6))
    assert first.last_rank == 1
    assert first.transfer_s == pytest.approx(10e-6)
    # nccl-tests' all-reduce busbw: S/t · 2(n−1)/n, from the transfer, not the kernel time
    assert first.busbw_bytes_per_s == pytest.approx(1048576 / 10e-6 * 4 / 3)
    assert second.skew_s == pytest.approx(50e-6)
    assert second.wait_s == pytest.approx((50e-6, 45e-6, 0.0))
    assert second.last_rank == 2
    (straggler,) = cross.straggler
    assert (straggler.step, straggler.rank) == (5, 2)
    assert straggler.cost_s == pytest.approx(45e-6)  # 350 − 305: the next-latest rank's start
    assert straggler.cost_basis == "amdahl_bound"
    assert straggler.cause == "compute"
    assert straggler.extra_compute_s == pytest.approx(70e-6)  # 150 µs gemm against the others' 80
    assert straggler.collectives == 2
    assert [r.rank for r in cross.imbalance] == [0, 1, 2]
    assert cross.imbalance[2].compute_s == pytest.approx(150e-6)


def test_cross_rank_in_json_and_reloaded(tmp_path):
    result = analyze([three_ranks(tmp_path / "job")], workers=1).result
    doc = json.loads(json.dumps(to_jsonable(result)))["cross_rank"]
    assert {"step", "rank", "cost_s"} <= set(doc["straggler"][0])
    assert {"name", "index", "skew_s", "wait_s", "transfer_s"} <= set(doc["collectives"][0])
    assert {"rank", "step_time_s", "compute_s", "idle_s", "outlier"} <= set(doc["imbalance"][0])


def test_three_ranks_replayed_jointly(tmp_path):
    # up to 8 ranks the ranks are replayed jointly by default: the unedited replay is the trace;
    # rank 2's late all-reduce 1 starts where its launch (and the lag after it) puts it, not
    # after its gemm: its gemm at the median's pace (k = 0.86) moves nothing — 0 saved, where
    # the others waited 45 µs for it
    cross = analyze([three_ranks(tmp_path / "job")], workers=1).result.cross_rank
    check = cross.joint_replay
    assert (check.steps, check.error_max, check.matched, check.left_out) == (1, 0.0, 2, 0) and check.converged
    (s,) = cross.straggler
    assert s.replayed_step_s == pytest.approx(350e-6) and s.replayed_saving_s == 0.0
    # span − communication: 350 − 100, 350 − 65, 350 − 40 µs; the others' median over its own
    assert s.on_time_scale == pytest.approx(267.5 / 310)
    assert s.replayed_vs_waits.startswith("less")
    off = analyze([three_ranks(tmp_path / "job2")], workers=1, joint_replay=False).result.cross_rank
    assert off.joint_replay is None and off.straggler[0].replayed_saving_s is None
    assert off.joint_replay_note.startswith("not replayed jointly")
    doc = json.loads(json.dumps(to_jsonable(analyze([tmp_path / "job"], workers=1).result)))["cross_rank"]
    assert {"replayed_step_s", "replayed_step_s_if_on_time", "replayed_saving_s"} <= set(doc["straggler"][0])
    assert {"error_median", "error_max", "matched", "left_out"} <= set(doc["joint_replay"])


def test_saved_result_round_trips(tmp_path):
    result = analyze([three_ranks(tmp_path / "job")], workers=1).result
    out = tmp_path / "saved.json"
    save_result(out, result)
    assert load_result(out).result.cross_rank == result.cross_rank


def test_one_rank_has_no_cross_rank(tmp_path):
    job = three_ranks(tmp_path / "job")
    assert analyze([job / "rank0.json"]).result.cross_rank is None


def test_blame_is_the_next_latest_start():
    m = xr.match(
        {
            0: [xr.CollectiveRecord("g", "all_reduce", 1, 0.0, 10.0, 0, 4)],
            1: [xr.CollectiveRecord("g", "all_reduce", 1, 7.0, 3.0, 0, 4)],
            2: [xr.CollectiveRecord("g", "all_reduce", 1, 2.0, 8.0, 0, 4)],
        }
    )[0]
    assert m.last_rank == 1 and xr.blame(m) == pytest.approx(5e-6)  # 7 − 2


def test_groups_and_kinds_are_matched_apart():
    rec = xr.CollectiveRecord
    matched = xr.match(
        {
            0: [rec("a", "all_reduce", 0, 0.0, 5.0, 0, 2), rec("b", "all_reduce", 0, 1.0, 5.0, 0, 2)],
            1: [rec("b", "all_reduce", 0, 3.0, 5.0, 0, 2), rec("a", "all_reduce", 0, 4.0, 5.0, 0, 2)],
        }
    )
    by_group = {m.group: m for m in matched}
    assert by_group["a"].skew_s == pytest.approx(4e-6)
    assert by_group["b"].skew_s == pytest.approx(2e-6)


@given(
    st.lists(st.floats(0.0, 1e6, allow_nan=False), min_size=2, max_size=12),
    st.floats(0.0, 1e6, allow_nan=False),
)
def test_match_invariants(starts, dur):
    recs = {r: [xr.CollectiveRecord("", "all_gather", None, s, dur, 0, 0)] for r, s in enumerate(starts)}
    (m,) = xr.match(recs)
    assert m.skew_s == pytest.approx((max(starts) - min(starts)) * 1e-6)
    assert min(m.wait_s) == 0.0 and max(m.wait_s) == pytest.approx(m.skew_s)
    assert m.transfer_s >= 0.0 and 0.0 <= xr.blame(m) <= m.skew_s + 1e-18


def test_outliers_by_median_and_mad():
    # median 10, |deviations| 0,0,1,1,10 → MAD 1, σ ≈ 1.4826: 20 is out (10 > 4.45), 11 and 9 in
    assert xr.outliers([10, 10, 11, 9, 20]) == [False, False, False, False, True]
    assert xr.outliers([5.0, 6.0]) == [False, False]  # too few ranks to call one out
    assert xr.outliers([3.0, 3.0, 3.0, 4.0]) == [False, False, False, True]  # MAD 0: off the median


@given(st.lists(st.floats(0.0, 1e3, allow_nan=False), min_size=3, max_size=30))
def test_outliers_never_the_median(values):
    flags = xr.outliers(values)
    mid = float(np.median(values))
    assert not any(f for v, f in zip(values, flags, strict=True) if v == mid)
    assert sum(flags) <= len(values) // 2


def test_imbalance_spread():
    def rank(r, spans):
        steps = tuple(StepTimeline(i, 0.0, s, s, 0.0, s / 2, 0.0, 0.0, 0.0, 0.0) for i, s in enumerate(spans))
        return RankTrace(r, f"r{r}", steps, 0, 0, 0, 0, step_time_median_s=float(np.median(spans)))

    rows, spread = xr.imbalance([rank(0, [1.0, 3.0]), rank(1, [2.0, 2.0]), rank(2, [4.0, 4.0])])
    assert [r.step_time_s for r in rows] == [2.0, 2.0, 4.0]
    assert rows[0].compute_s == 1.0
    assert spread[0].figure == "step_time_s" and (spread[0].min_s, spread[0].median_s, spread[0].max_s) == (
        2.0,
        2.0,
        4.0,
    )


def test_two_jobs_refused_naming_both(tmp_path):
    write_rank(tmp_path / "a.json", 0, [(1, 0.0, [gemm(10, 5)])], world_size=2)
    write_rank(tmp_path / "b.json", 1, [(1, 0.0, [gemm(10, 5)])], world_size=4)
    with pytest.raises(InvalidInput, match=r"world size 2 in a\.json, 4 in b\.json"):
        analyze([tmp_path], workers=1)


def test_two_devices_refused(tmp_path):
    write_rank(tmp_path / "a.json", 0, [(1, 0.0, [gemm(10, 5)])], world_size=2)
    write_rank(
        tmp_path / "b.json", 1, [(1, 0.0, [gemm(10, 5)])], world_size=2, device="NVIDIA A100-SXM4-80GB"
    )
    with pytest.raises(InvalidInput, match="device"):
        analyze([tmp_path], workers=1)


def test_duplicate_and_missing_rank_ids_named(tmp_path):
    for i, (name, rank) in enumerate((("a.json", 0), ("b.json", 0), ("c.json", None))):  # 3 files, no copy
        write_rank(tmp_path / name, rank, [(1, 0.0, [gemm(10, 5 + i), allreduce(20, 5)])])
    result = analyze([tmp_path], workers=1).result
    codes = {w.code: w.values for w in result.warnings}
    assert codes["trace_rank_duplicate"] == {"rank": 0, "files": ("a.json", "b.json")}
    assert codes["trace_rank_id_missing"] == {"files": ("c.json",)}
    assert result.cross_rank is None  # rank 0 twice: no attribution


def test_absent_ranks_said(tmp_path):
    for rank in (0, 2):
        write_rank(
            tmp_path / f"r{rank}.json", rank, [(1, 0.0, [gemm(10, 5), allreduce(20, 5)])], world_size=4
        )
    result = analyze([tmp_path], workers=1).result
    absent = next(w for w in result.warnings if w.code == "trace_ranks_absent")
    assert absent.values["absent"] == (1, 3) and absent.values["present"] == 2
    assert result.cross_rank is not None


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces absent")
def test_shared_pair_of_a_128_rank_job(tmp_path):
    for name in PAIR:
        (tmp_path / name).symlink_to(TRACES / name)
    result = analyze([tmp_path], workers=1).result
    cross = result.cross_rank
    assert cross is not None and cross.ranks == 2
    assert len(cross.collectives) == 10  # ten SendRecv kernels on each rank, matched in order
    assert all(m.name == "send_recv" and m.ranks == (0, 1) for m in cross.collectives)
    assert [s.step for s in cross.straggler] == [551, 552]
    for m in cross.collectives:
        assert m.skew_s == pytest.approx(max(m.wait_s))
