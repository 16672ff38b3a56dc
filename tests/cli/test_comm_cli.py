"""``infer-opt comm`` and ``profile --tp``: bad input before any rank starts, one rank in
process, and real jobs of 2 gloo ranks through ``--nproc`` / ``--tp`` (torchrun's launcher)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from infer_opt.cost_models.comm import COLLECTIVES, LOCAL_COPY
from tests.helpers import assert_one_line_error, invoke
from tests.profilers.distributed_helpers import infer_opt
from tests.reports.fixtures import fixture


def test_bad_sizes_and_rank_counts_are_one_line_errors():
    assert_one_line_error(invoke("comm", "--min-size", "64", "--max-size", "4"), "--max-size", "64 B")
    assert_one_line_error(invoke("comm", "--nproc", "0"), "--nproc")
    assert_one_line_error(invoke("comm", "--collective", "gossip"), "--collective")
    assert_one_line_error(invoke("comm", "--timeout", "0s"), "--timeout")


def test_one_rank_measures_the_local_copy_and_says_a_collective_needs_two():
    run = invoke(
        "comm", "--max-size", "1KiB", "--factor", "16", "--reps", "3", "--warmup", "1", "--no-save", "--json"
    )
    assert run.exit_code == 0, run.stderr
    data = run.json()
    result = data["result"]
    assert (result["world_size"], result["backend"]) == (1, "gloo")
    assert [c["collective"] for c in result["collectives"]] == [LOCAL_COPY]
    assert [p["bytes"] for p in result["collectives"][0]["points"]] == [4, 64, 1024]
    assert "comm_single_rank" in [w["code"] for w in data["warnings"]]


def test_shapes_that_do_not_split_are_refused_before_any_rank_starts():
    assert_one_line_error(invoke("profile", "tiny", "--tp", "3"), "--tp", "4 attention heads", "3 ranks")
    assert_one_line_error(invoke("profile", "hf:gpt2", "--tp", "2"), "MODEL", "built-in")
    assert_one_line_error(invoke("profile", "tiny", "--tp", "2", "--trace", "t.json"), "--trace", "folder")


def test_nproc_sweeps_every_collective_on_two_ranks_and_rank_zero_writes(tmp_path):
    out, plot = tmp_path / "comm.json", tmp_path / "comm.png"
    run = infer_opt(
        "comm", "--nproc", "2", "--max-size", "1KiB", "--factor", "16", "--reps", "3", "--warmup", "1",
        "--json", "--out", str(out), "--plot", str(plot), INFER_OPT_CACHE=str(tmp_path / "cache"),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    data = json.loads(run.stdout)  # one document: only rank 0 printed
    result = data["result"]
    assert (result["world_size"], result["backend"], result["complete"]) == (2, "gloo", True)
    assert [c["collective"] for c in result["collectives"]] == list(COLLECTIVES)
    for entry in result["collectives"]:
        assert {"collective", "points", "alpha_s", "beta_bytes_per_s"} <= set(entry)
        assert {"bytes", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s"} <= set(entry["points"][0])
    assert json.loads(out.read_text())["result"]["world_size"] == 2
    assert plot.exists() and (tmp_path / "comm-busbw.png").exists()
    saved = list((tmp_path / "cache" / "comm").glob("gloo-2ranks-*.json"))
    assert len(saved) == 1  # the fit predict --tp reads


def _cached_roofline(cache: Path) -> None:
    """The fixture's roofline fit, saved where 1-thread ranks look for theirs (no calibration)."""
    from infer_opt.profilers.device import device_key
    from infer_opt.results import save_result

    key = re.sub(r"-\d+t-", "-1t-", device_key("cpu", "float32"))
    save_result(cache / "roofline" / f"{key}.json", fixture("roofline"))


def test_profile_tp_two_ranks_reports_ranks_skew_communication_and_traces(tmp_path):
    traces = tmp_path / "traces"
    _cached_roofline(tmp_path / "cache")
    run = infer_opt(
        "profile", "tiny", "--tp", "2", "--mode", "generate", "--seq-len", "16", "--new-tokens", "3",
        "--reps", "3", "--warmup", "1", "--trace", str(traces), "--json",
        INFER_OPT_CACHE=str(tmp_path / "cache"),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads(run.stdout)
    assert data["schema"] == "infer-opt/profile-tp"
    result = data["result"]
    assert result["world_size"] == 2 and result["skew"] >= 1.0
    # every rank built its shard from the one settings object of the command line
    shape = {"batch": 1, "seq_len": 16, "mode": "generate", "context": 128, "new_tokens": 3}
    assert result["settings"]["shape"] == shape and result["settings"]["device"] == "cpu"
    assert (result["settings"]["reps"], result["settings"]["warmup"], result["settings"]["runs"]) == (3, 1, 1)
    assert [r["rank"] for r in result["ranks"]] == [0, 1]
    assert all(r["step_time_s"] > 0 for r in result["ranks"])
    comm = next(c for c in result["categories"] if c["category"] == "communication")
    assert comm["time_s"] > 0
    # a generation: the prompt's prefill (2 layers × 2 all_reduces of 16·128·4 bytes), then
    # 2 decode steps of 1 token each
    seen = {(c["bytes"], c["calls"]) for c in result["collectives_seen"]}
    assert seen == {(16 * 128 * 4, 4), (128 * 4, 8)}
    for rank in (0, 1):
        trace = json.loads((traces / f"rank{rank}.json").read_text())
        assert trace["distributedInfo"]["rank"] == rank and trace["distributedInfo"]["world_size"] == 2


def test_nproc_starts_the_same_command_line_without_nproc(monkeypatch):
    from infer_opt.profilers import distributed

    started = []

    def fake_launch(nproc, args, **kwargs):
        started.append((nproc, list(args)))
        return 3

    monkeypatch.setattr(distributed, "launch", fake_launch)
    run = invoke(
        "comm", "--collective", "all_reduce", "--collective", "broadcast", "--max-size", "1KiB",
        "--nproc", "2", "--timeout", "30s", "--no-save", "--json",
    )  # fmt: skip
    assert run.exit_code == 3  # the job's exit code
    ((nproc, args),) = started
    assert nproc == 2 and "--nproc" not in args
    assert args[0] == "comm"
    assert args[args.index("--max-size") + 1] == "1024.0" and args.count("--collective") == 2
    assert {"--no-save", "--json"} <= set(args) and args[args.index("--timeout") + 1] == "30.0"
    assert "--reps" not in args  # defaults stay defaults
