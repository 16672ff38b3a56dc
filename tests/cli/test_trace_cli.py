"""``infer-opt trace`` end to end: the JSON keys of issue 30 §10, the options, the outputs,
and bad input (one line naming the file or option, exit 2)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.helpers import assert_one_line_error, invoke

FIXTURES = Path(__file__).resolve().parents[1] / "trace" / "fixtures"
MODEL = str(FIXTURES / "model_step.json")


def test_json_has_the_documented_keys():
    run = invoke("trace", MODEL, "--json")
    assert run.exit_code == 0, run.stderr
    r = run.json()["result"]
    for key in ("device_name", "device_source", "peaks", "ranks", "ops", "coverage", "what_if",
                "collectives", "hta_compat"):  # fmt: skip
        assert key in r, key
    assert set(r["peaks"]) >= {"flops_per_s", "bytes_per_s", "source"}
    (rank,) = r["ranks"]
    assert set(rank) >= {"rank", "steps", "idle_fraction", "compute_fraction", "non_compute_fraction",
                         "overlap_fraction"}  # fmt: skip
    assert set(rank["steps"][0]) >= {"step", "span_s", "busy_s", "idle_s", "compute_s", "comm_s", "memcpy_s",
                                     "sync_s", "overlap_fraction"}  # fmt: skip
    op = r["ops"][0]
    assert set(op) >= {"name", "shapes", "dtype", "calls", "time_s", "flops", "bytes", "achieved_flops_per_s",
                       "achieved_bytes_per_s", "bound", "peak_fraction", "precision"}  # fmt: skip
    assert set(r["coverage"][0]) == {"reason", "time_s", "fraction"}
    assert r["hta_compat"] is False and r["device_source"] == "deviceProperties"


def test_json_has_the_replay_keys_and_user_what_ifs():
    run = invoke("trace", MODEL, "--what-if", "matmul=0.5x", "--what-if", "host=2x", "--json")
    assert run.exit_code == 0, run.stderr
    r = run.json()["result"]
    step = r["ranks"][0]["steps"][0]
    assert {"replayed_span_s", "bound", "critical_path"} <= set(step)
    assert set(step["critical_path"]) == {"host", "launch", "kernel", "memcpy", "sync_wait", "comm"}
    assert step["bound"] in ("host", "device")
    assert step["replayed_span_s"] == pytest.approx(step["span_s"])
    assert sum(step["critical_path"].values()) == pytest.approx(step["replayed_span_s"])
    assert isinstance(r["idle_causes"], list)
    for w in r["what_if"]:
        assert {"scenario", "amdahl_speedup", "replayed_speedup", "replayed_step_s"} <= set(w)
    user = [w for w in r["what_if"] if w["scenario"] == "user"]
    assert [w["description"] for w in user] == ["matmul=0.5x", "host=2x"]
    assert all(w["replayed_step_s"] > 0 for w in user)


def test_kernels_from_the_same_trace_replays_to_the_same_step():
    run = invoke("trace", MODEL, "--kernels-from", MODEL, "--json")
    assert run.exit_code == 0, run.stderr
    (w,) = [w for w in run.json()["result"]["what_if"] if w["scenario"] == "kernels_from"]
    assert w["replayed_speedup"] == pytest.approx(1.0) and w["amdahl_speedup"] == pytest.approx(1.0)
    assert w["replayed_step_s"] == pytest.approx(w["step_s"])


def test_console_output_names_the_device_steps_and_tables():
    run = invoke("trace", MODEL)
    assert run.exit_code == 0, run.stderr
    for needle in ("H100 SXM", "2: #1–#2", "Top ops by GPU kernel time", "Coverage", "What would it buy",
                   "Collectives", "cudaStreamSynchronize"):  # fmt: skip
        assert needle in run.stdout, needle


def test_options_steps_device_peaks_and_hta_compat():
    run = invoke("trace", MODEL, "--steps", "2", "--json")
    assert [s["step"] for s in run.json()["result"]["ranks"][0]["steps"]] == [2]
    run = invoke("trace", MODEL, "--device", "mi300x", "--json")
    r = run.json()["result"]
    assert (r["device_name"], r["device_source"]) == ("MI300X", "--device")
    run = invoke("trace", MODEL, "--peak-flops", "100TFLOP/s", "--peak-bandwidth", "1TB/s", "--json")
    r = run.json()["result"]
    assert r["peaks"]["bytes_per_s"] == 1e12 and "--peak-flops" in r["peaks"]["source"]
    run = invoke("trace", MODEL, "--hta-compat", "--json")
    assert run.exit_code == 0 and run.json()["result"]["hta_compat"] is True


def test_roofline_fit_file_sets_the_peaks(tmp_path):
    from infer_opt.results import save_result
    from infer_opt.results.roofline import RooflineFit
    from tests.reports.fixtures import fixture

    fit = fixture("roofline")
    assert isinstance(fit, RooflineFit)
    path = save_result(tmp_path / "fit.json", fit)
    run = invoke("trace", MODEL, "--roofline", str(path), "--json")
    assert run.exit_code == 0, run.stderr
    assert "--roofline" in run.json()["result"]["peaks"]["source"]
    other = save_result(tmp_path / "amdahl.json", fixture("amdahl"))
    assert_one_line_error(invoke("trace", MODEL, "--roofline", str(other)), "--roofline", "amdahl")


def test_out_plot_csv_markdown_and_augment(tmp_path):
    run = invoke(
        "trace", MODEL, "--out", str(tmp_path / "t.json"), "--plot", str(tmp_path / "t.png"),
        "--csv", str(tmp_path / "t.csv"), "--markdown", str(tmp_path / "t.md"),
        "--augment", str(tmp_path / "a.json.gz"),
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    assert (tmp_path / "t.png").stat().st_size > 10_000
    assert "# GPU trace analysis" in (tmp_path / "t.md").read_text()
    assert json.loads((tmp_path / "t.json").read_text())["schema"].endswith("trace")
    doc = json.loads(gzip.decompress((tmp_path / "a.json.gz").read_bytes()))
    assert any("bound" in e.get("args", {}) for e in doc["traceEvents"])
    report = invoke("report", str(tmp_path / "t.json"), "-o", str(tmp_path / "r.md"))
    assert report.exit_code == 0, report.stderr
    assert "GPU trace analysis" in (tmp_path / "r.md").read_text()


def test_every_rank_of_a_folder_is_replayed():
    run = invoke("trace", str(FIXTURES / "two_ranks"), "--json")
    assert run.exit_code == 0, run.stderr
    ranks = run.json()["result"]["ranks"]
    assert len(ranks) == 2
    for rank in ranks:
        for step in rank["steps"]:
            assert step["bound"] in ("host", "device")
            assert step["replayed_span_s"] == pytest.approx(step["span_s"])
            assert sum(step["critical_path"].values()) == pytest.approx(step["replayed_span_s"])


def test_augment_adds_the_replayed_timeline_of_a_what_if(tmp_path):
    out = tmp_path / "a.json"
    run = invoke("trace", MODEL, "--augment", str(out), "--augment-what-if", "host=2x")
    assert run.exit_code == 0, run.stderr
    doc = json.loads(out.read_text())
    replayed = [e for e in doc["traceEvents"] if e.get("pid") == 1_000_000 and e.get("ph") == "X"]
    gpu = ("kernel", "gpu_memcpy", "gpu_memset")
    measured = [e for e in doc["traceEvents"] if e.get("cat") in gpu and e.get("pid") != 1_000_000]
    assert len(replayed) >= len(measured) > 0
    assert any(e["ts"] < e["args"]["infer_opt_measured_ts"] for e in replayed)  # the host got faster
    assert all(e["ts"] <= e["args"]["infer_opt_measured_ts"] + 1e-6 for e in replayed)
    names = [e for e in doc["traceEvents"] if e.get("ph") == "M" and e.get("pid") == 1_000_000]
    assert names[0]["args"]["name"] == "replayed: host=2x"
    assert_one_line_error(invoke("trace", MODEL, "--augment-what-if", "none"), "needs --augment")


def test_a_folder_of_ranks():
    run = invoke("trace", str(FIXTURES / "two_ranks"), "--json")
    assert run.exit_code == 0, run.stderr
    r = run.json()["result"]
    assert [k["rank"] for k in r["ranks"]] == [0, 1] and r["slowest_rank"] == 1


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize(
    ("name", "data", "needle"),
    [
        ("not.json", b"hello world", "not JSON"),
        ("empty.json", b"{}", "TRACE"),
        ("list.json", b"[1, 2, 3]", "TRACE"),
        ("empty.json.gz", gzip.compress(b""), "empty gzip"),
        ("corrupt.json.gz", b"\x1f\x8b\x08\x00garbage", "TRACE"),
        ("zero.json", b"", "TRACE"),
    ],
)
def test_bad_files_are_one_line_naming_the_file(tmp_path, name, data, needle):
    path = _write(tmp_path / name, data)
    run = invoke("trace", path)
    assert_one_line_error(run, needle)
    assert name in run.stderr


def test_an_infer_opt_result_is_not_a_trace(tmp_path):
    from infer_opt.results import save_result
    from tests.reports.fixtures import fixture

    path = save_result(tmp_path / "amdahl.json", fixture("amdahl"))
    assert_one_line_error(invoke("trace", str(path)), "amdahl.json")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--steps", "x"], "--steps"),
        (["--steps", "9-3"], "--steps"),
        (["--steps", "5-9"], "--steps"),
        (["--device", "tpu-v9"], "--device"),
        (["--causal-flops", "quarter"], "--causal-flops"),
        (["--matmul-fraction", "0"], "--matmul-fraction"),
        (["--top", "0"], "--top"),
        (["--what-if", "gemm=fast"], "PATTERN=Fx"),
        (["--what-if", "nothing_here*=0.5x"], "the trace has"),
        (["--what-if", "sync:aten::nonexistent=off"], "host sync"),
        (["--what-if", "host=0x"], "S > 0"),
        (["--what-if", "matmul=off"], "only a sync"),
        (["--kernels-from", str(FIXTURES / "two_streams.json")], "only 0 of 14 op instances match"),
        (["--kernels-from", str(FIXTURES / "absent.json")], "--kernels-from"),
    ],
)
def test_bad_options_are_one_line(argv, needle):
    assert_one_line_error(invoke("trace", MODEL, *argv), needle)


def test_missing_trace_and_empty_folder(tmp_path):
    assert_one_line_error(invoke("trace", str(tmp_path / "nope.json")), "nope.json")
    (tmp_path / "empty").mkdir()
    assert_one_line_error(invoke("trace", str(tmp_path / "empty")), "empty")


def test_a_bad_rank_in_a_folder_is_named_and_the_rest_kept_unless_strict(tmp_path):
    folder = tmp_path / "ranks"
    folder.mkdir()
    (folder / "rank0.json").write_text((FIXTURES / "two_ranks" / "rank0.json").read_text())
    (folder / "rank1.json").write_text("garbage")
    run = invoke("trace", str(folder), "--json", "--workers", "2")
    assert run.exit_code == 0, run.stderr
    (failed,) = [w for w in run.json()["result"]["warnings"] if w["code"] == "trace_rank_failed"]
    assert failed["values"]["file"] == "rank1.json" and "not JSON" in failed["values"]["error"]
    assert_one_line_error(invoke("trace", str(folder), "--strict"), "rank1.json", "not JSON")


def test_cross_rank_json_keys(tmp_path):
    from tests.trace.rank_files import three_ranks

    run = invoke("trace", str(three_ranks(tmp_path / "job")), "--json", "--workers", "1")
    assert run.exit_code == 0, run.stderr
    cross = run.json()["result"]["cross_rank"]
    assert cross["straggler"] == [
        {**cross["straggler"][0], "step": 5, "rank": 2, "cost_s": pytest.approx(45e-6)}
    ]
    assert {"name", "index", "skew_s", "wait_s", "transfer_s"} <= set(cross["collectives"][0])
    assert [r["rank"] for r in cross["imbalance"]] == [0, 1, 2]
    assert all(isinstance(r["outlier"], bool) for r in cross["imbalance"])


def test_joint_replay_past_eight_ranks_only_when_asked(tmp_path):
    from tests.trace.rank_files import allreduce, gemm, write_rank

    job = tmp_path / "job"
    job.mkdir()
    for rank in range(9):  # rank 8 computes 50 µs longer and arrives last
        late = 50 if rank == 8 else 0
        kernels = [gemm(10, 80 + late), allreduce(100 + late, 60 - late, size=9)]
        write_rank(job / f"rank{rank}.json", rank, [(5, 0.0, kernels)], world_size=9)
    run = invoke("trace", str(job), "--json", "--workers", "1")
    assert run.exit_code == 0, run.stderr
    cross = run.json()["result"]["cross_rank"]
    assert cross["joint_replay"] is None and cross["joint_replay_note"].startswith("not replayed jointly")
    assert cross["straggler"][0]["replayed_saving_s"] is None
    run = invoke("trace", str(job), "--json", "--workers", "1", "--joint-replay")
    assert run.exit_code == 0, run.stderr
    cross = run.json()["result"]["cross_rank"]
    assert cross["joint_replay"]["error_max"] == 0.0 and cross["joint_replay"]["matched"] == 1
    (s,) = cross["straggler"]
    assert s["rank"] == 8 and s["replayed_saving_s"] >= 0.0
    assert s["replayed_step_s_if_on_time"] == pytest.approx(s["replayed_step_s"] - s["replayed_saving_s"])


@pytest.mark.slow
def test_unreachable_scheduler_is_one_line(tmp_path, monkeypatch):
    from tests.trace.rank_files import three_ranks

    job = str(three_ranks(tmp_path / "job"))
    assert_one_line_error(invoke("trace", job, "--scheduler", "tcp://127.0.0.1:9"), "--scheduler")
    monkeypatch.setenv("INFER_OPT_SCHEDULER", "tcp://127.0.0.1:9")
    assert_one_line_error(invoke("trace", job), "--scheduler", "no Dask scheduler answered")


@pytest.mark.parametrize(
    "error",
    [
        ("InvalidInput", ("TRACE", "x.json", "not JSON")),
        ("BadField", ("f.json", "families", None, "a list")),
        ("BadField", ("f.json", "families", None, "a list", "--calibration")),
    ],
)
def test_errors_survive_a_worker_process(error):
    import pickle

    from infer_opt import errors

    name, args = error
    e = getattr(errors, name)(*args)
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is type(e) and str(again) == str(e)


def test_no_output_replaces_an_input_trace_or_another_output(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text(Path(MODEL).read_text())
    before = trace.read_bytes()
    for option in ("--out", "--markdown", "--augment", "--csv"):
        assert_one_line_error(invoke("trace", str(trace), option, str(trace)), option, "being read")
    assert trace.read_bytes() == before
    out = str(tmp_path / "r.json")
    assert_one_line_error(invoke("trace", str(trace), "--out", out, "--augment", out), "--augment")


def test_traces_are_held_to_the_readers_limit_not_the_1_gib_of_other_inputs(monkeypatch):
    from infer_opt import files

    monkeypatch.setattr(files, "MAX_INPUT_BYTES", 1000)  # model_step.json is 10 kB
    run = invoke("trace", MODEL, "--json")
    assert run.exit_code == 0, run.stderr
    assert_one_line_error(invoke("trace", "/dev/zero"), "not a regular file")


def test_steps_and_hta_compat_together_are_refused():
    assert_one_line_error(invoke("trace", MODEL, "--hta-compat", "--steps", "1-2"), "--steps", "--hta-compat")


def test_augment_of_several_ranks_never_writes_over_an_input_rank(tmp_path):
    """Issue 42: with two ranks, ``--augment t.json`` writes ``t.rank0.json`` and ``t.rank1.json``:
    when those are the inputs, refused before any work (an input trace was rewritten)."""
    ranks = [tmp_path / f"t.rank{i}.json" for i in range(2)]
    for i, r in enumerate(ranks):  # two files, not one twice (refused as such)
        r.write_text(Path(MODEL).read_text() + " " * i)
    before = [r.read_bytes() for r in ranks]
    run = invoke("trace", *map(str, ranks), "--augment", str(tmp_path / "t.json"))
    assert_one_line_error(run, "--augment", "being read")
    assert [r.read_bytes() for r in ranks] == before


def test_a_capture_that_is_no_capture_is_one_line_even_without_replays_to_link():
    """Found by hand: a --capture beside a trace with no graph replays read nothing and crashed
    (an empty process pool); the capture is still checked, in one line."""
    fixture = Path(__file__).resolve().parents[1] / "trace" / "fixtures" / "model_step.json"
    run = invoke("trace", str(fixture), "--capture", str(fixture))
    assert_one_line_error(run, "--capture", "graph-capture trace")
