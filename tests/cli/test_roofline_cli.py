from __future__ import annotations

import json
import math

import pytest
import torch

from infer_opt import store
from infer_opt.cost_models.roofline import KernelPoint, fit_roofline
from infer_opt.inputs import measurements
from infer_opt.messages import text
from infer_opt.profilers import kernels as K
from infer_opt.profilers import roofline_sweep
from infer_opt.results import save_result
from tests.helpers import assert_one_line_error, invoke, usable_fit

R, B, T0 = 2e11, 5e10, 3e-6


def _rows():
    rows = []
    for n in (64, 128, 256, 512, 1024):
        rows.append((f"matmul{n}", "matmul", 2.0 * n**3, 12.0 * n * n))
    for e in range(12, 23, 2):
        rows.append((f"copy{2**e}", "elementwise", 0.0, 8.0 * 2**e))
        rows.append((f"add{2**e}", "elementwise", float(2**e), 12.0 * 2**e))
    rows.append(("tiny1", "launch", 1.0, 12.0))
    return [(n, fam, f, q, T0 + max(f / R, q / B)) for n, fam, f, q in rows]


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "m.csv"
    lines = ["name,family,flops,bytes,time_s"] + [f"{n},{fam},{f},{q},{t}" for n, fam, f, q, t in _rows()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("INFER_OPT_CACHE", str(path))
    return path


def test_csv_fit_json_keys_and_values(csv_file):
    run = invoke("roofline", str(csv_file), "--json", "--bootstrap", "50")
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/roofline"
    r = data["result"]
    assert r["compute_rate_flops"] == pytest.approx(R, rel=1e-3)
    assert r["bandwidth_bytes_per_s"] == pytest.approx(B, rel=1e-3)
    assert r["launch_overhead_s"] == pytest.approx(T0, rel=1e-3)
    assert r["median_abs_rel_error"] < 1e-3
    kernel = r["kernels"][0]
    assert {"name", "flops", "bytes", "time_s", "bound", "efficiency"} <= set(kernel)
    bounds = {k["name"]: k["bound"] for k in r["kernels"]}
    assert (
        bounds["matmul1024"] == "compute"
        and bounds["copy4194304"] == "bandwidth"
        and bounds["tiny1"] == "launch"
    )
    assert "not cached" in run.stderr


def test_table_shows_fit_and_datasheet_labelled(csv_file):
    run = invoke(
        "roofline",
        str(csv_file),
        "--bootstrap",
        "0",
        "--peak-flops",
        "989TFLOP/s",
        "--peak-bandwidth",
        "4.8TB/s",
    )
    assert run.exit_code == 0, run.stderr
    assert "Compute rate R (fitted)" in run.stdout
    assert "200 GFLOP/s" in run.stdout and "50 GB/s" in run.stdout
    assert (
        "datasheet (not measured)" in run.stdout and "989 TFLOP/s" in run.stdout and "4.8 TB/s" in run.stdout
    )


def test_plot_writes_roofline_and_prediction_pngs(csv_file, tmp_path):
    png = tmp_path / "roof.png"
    run = invoke(
        "roofline", str(csv_file), "--bootstrap", "0", "--plot", str(png), "--peak-flops", "1TFLOP/s"
    )
    assert run.exit_code == 0, run.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "roof-pred.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_save_file_and_cache_from_a_kernels_result(tmp_path, cache):
    kernels_json = tmp_path / "k.json"
    run = invoke(
        "kernels",
        "--device",
        "cpu",
        "--reps",
        "3",
        "--warmup",
        "1",
        "--only",
        "tiny_add,copy",
        "--out",
        str(kernels_json),
    )
    assert run.exit_code == 0, run.stderr
    saved = tmp_path / "fit.json"
    run = invoke("roofline", str(kernels_json), "--bootstrap", "0", "--save", str(saved), "--json")
    assert run.exit_code == 0, run.stderr
    fit = roofline_sweep.load_fit(saved)
    assert fit.device == "cpu" and fit.dtype == "float32" and fit.timing == "cpu-clock"
    assert fit.threads == torch.get_num_threads() and fit.matmul_precision == "ieee"
    assert fit.n_points == 8
    # copies and tiny adds alone pin no compute rate: saved where asked, but not cached for profile
    assert "not cached (profile would not use it)" in run.stderr
    assert "lacks the kernels that pin R (matmul)" in run.stderr
    assert not roofline_sweep.fit_path("cpu", "float32").exists()


def test_no_file_runs_the_suite_first(monkeypatch):
    real = K.all_cases

    def few(kind, suite):
        keep = {"matmul[n=64]", "matmul[n=128]", "copy[N=2^12]", "copy[N=2^16]", "tiny_add[N=1]"}
        return [c for c in real(kind, suite) if c.key in keep]

    monkeypatch.setattr(K, "all_cases", few)
    run = invoke("roofline", "--device", "cpu", "--reps", "3", "--warmup", "1", "--bootstrap", "0", "--json")
    assert run.exit_code == 0, run.stderr
    r = run.json()["result"]
    assert r["n_points"] == 5 and r["source"].startswith("measured now")
    assert r["compute_rate_flops"] > 0 and r["bandwidth_bytes_per_s"] > 0
    assert r["timing"] == "cpu-clock" and r["threads"] == torch.get_num_threads()
    # five kernels are too few to be trusted by profile
    assert "only 5 kernels were fitted" in run.stderr and "not cached" in run.stderr
    assert not roofline_sweep.fit_path("cpu", "float32").exists()


def test_reads_the_sectioned_csv_that_kernels_writes(tmp_path):
    csv_path = tmp_path / "k.csv"
    run = invoke(
        "kernels",
        "--device",
        "cpu",
        "--reps",
        "3",
        "--warmup",
        "1",
        "--only",
        "tiny_add,copy",
        "--out",
        str(csv_path),
    )
    assert run.exit_code == 0, run.stderr
    points = measurements.points_from_csv(csv_path.read_text())
    assert len(points) == 8
    assert {p.family for p in points} == {"elementwise", "launch"}
    assert points[0].name.startswith("copy[N=")


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("name,flops,time_s\na,1,1\n", ["'bytes' column"]),
        (
            "name,flops,bytes,time_s\na,1,1,0\nb,1,1,1\nc,1,1,1\n",
            ["line 2, column time_s", ">= 1e-15", "'0'"],
        ),
        ("name,flops,bytes,time_s\na,1,1,-2\nb,1,1,1\nc,1,1,1\n", ["line 2, column time_s", "'-2'"]),
        ("name,flops,bytes,time_s\na,1,x,1\nb,1,1,1\nc,1,1,1\n", ["line 2, column bytes", "number", "'x'"]),
        ("name,flops,bytes,time_s\na,1,nan,1\nb,1,1,1\nc,1,1,1\n", ["line 2, column bytes", "NaN"]),
        ("name,flops,bytes,time_s\na,1,1,inf\nb,1,1,1\nc,1,1,1\n", ["line 2, column time_s", "finite"]),
        ("name\tflops\tbytes\ttime_us\na\t1\t1\t-1\n", ["line 2, column time_us", "'-1'"]),
        ("name,flops,bytes,time_s\na,1,1,1\n", ["at least 3"]),
        ("", ["expected CSV columns"]),
    ],
)
def test_bad_measurement_files(tmp_path, text, needles):
    path = tmp_path / "m.csv"
    path.write_text(text)
    assert_one_line_error(invoke("roofline", str(path)), *needles)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--peak-flops", "fast"], ["--peak-flops"]),
        (["--peak-bandwidth", "-1TB/s"], ["--peak-bandwidth"]),
        (["--plot", "x.svg"], ["--plot", ".png"]),
        (["--bootstrap", "-1"], ["--bootstrap"]),
    ],
)
def test_bad_options(csv_file, args, needles):
    assert_one_line_error(invoke("roofline", str(csv_file), *args), *needles)


def test_missing_file_and_wrong_kind(tmp_path):
    assert_one_line_error(invoke("roofline", str(tmp_path / "none.json")), "does not exist")
    other = tmp_path / "a.json"
    assert invoke("amdahl", "-f", "0.4", "-s", "4", "--out", str(other)).exit_code == 0
    assert_one_line_error(invoke("roofline", str(other)), "amdahl", "kernels or roofline")


def test_cuda_without_cuda_is_one_line_error(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert_one_line_error(invoke("roofline", "--device", "cuda"), "--device", "CUDA")


# ---------------------------------------------------------------------------- the store


def _fit():
    points = [KernelPoint(n, fam, f, q, t) for n, fam, f, q, t in _rows()]
    return fit_roofline(points, bootstrap=0, device="cpu", dtype="float32")


def test_cache_dir_follows_the_environment(cache, monkeypatch):
    assert store.cache_dir() == cache
    monkeypatch.delenv("INFER_OPT_CACHE")
    assert store.cache_dir().parts[-2:] == (".cache", "infer-opt")


def test_cache_round_trip_under_the_run_key(cache):
    fit = usable_fit()
    stored = roofline_sweep.cache_fit(fit)
    assert stored.saved and stored.path == roofline_sweep.fit_path("cpu", "float32")
    assert stored.path.parent == cache / "roofline" and stored.path.name.endswith("-float32-cpu-clock.json")
    assert roofline_sweep.ROOFLINE.load(store_key()).result == fit
    assert roofline_sweep.ROOFLINE.load(store_key(dtype="bfloat16")).result is None


def store_key(dtype="float32"):
    from infer_opt.profilers.device import run_key

    return run_key("cpu", dtype, "cpu-clock")


def test_a_corrupt_cache_file_is_reported_moved_aside_and_replaced(tmp_path):
    path = roofline_sweep.fit_path("cpu", "float32")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    found = roofline_sweep.ROOFLINE.load(store_key())
    assert found.result is None
    (corrupt,) = found.notices
    assert corrupt.code == "calibration_cache_corrupt" and corrupt["path"] == str(path)
    assert corrupt["moved_to"] == str(path) + ".corrupt" and "not valid JSON" in corrupt["reason"]
    assert (tmp_path / "cache" / "roofline" / (path.name + ".corrupt")).read_text() == "{not json"
    assert not path.exists()
    # saving over a corrupt file says so too
    path.write_text("[]")
    stored = roofline_sweep.cache_fit(usable_fit())
    assert stored.saved and [n.code for n in stored.notices] == ["calibration_cache_corrupt"]
    assert roofline_sweep.ROOFLINE.load(store_key()).result == usable_fit()


def test_explicit_files_missing_or_unreadable_are_errors(tmp_path):
    from infer_opt.errors import InvalidInput

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidInput, match="roofline: not valid JSON"):
        roofline_sweep.load_fit(bad)
    with pytest.raises(InvalidInput, match="does not exist"):
        roofline_sweep.load_fit(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"compute_rate_flops": -1.0}, "fit_not_finite"),
        ({"compute_rate_flops": math.nan}, "fit_not_finite"),
        ({"bandwidth_bytes_per_s": 0.0}, "fit_not_finite"),
        ({"median_abs_rel_error": 0.9}, "fit_error_high"),
        ({"n_fitted": 4, "parameters_at_bound": ("t0",)}, "fit_too_few_kernels"),
    ],
)
def test_bad_fits_are_neither_cached_nor_used(changes, code):
    """Each of these was once accepted and cached (issue 12): R = -1, R = NaN, b = 0 (a
    ZeroDivisionError after profiling), median error 0.90, an interrupted 4-row file."""
    stored = roofline_sweep.cache_fit(usable_fit(**changes))
    assert not stored.saved and code in {n.code for n in stored.notices}
    assert not stored.path.exists()
    # hand-written into the cache, it is refused at use and replaced by the next good fit
    save_result(stored.path, usable_fit(**changes))
    found = roofline_sweep.ROOFLINE.load(store_key())
    assert found.result is None and found.notices[0].code == "calibration_cache_rejected"
    assert code in {n.code for n in found.notices[1:]}
    assert (
        roofline_sweep.cache_fit(usable_fit()).saved
        and roofline_sweep.ROOFLINE.load(store_key()).result is not None
    )


def test_calibrate_runs_a_small_sweep_and_fits(monkeypatch):
    real = K.all_cases

    def few(kind, suite):
        return [
            c for c in real(kind, suite) if c.size <= 2**14 and c.name in roofline_sweep.CALIBRATION_CASES
        ]

    monkeypatch.setattr(K, "all_cases", few)
    seen = []
    fit = roofline_sweep.calibrate("cpu", "float32", progress=lambda i, n, d: seen.append(d))
    assert fit.KIND == "roofline" and fit.n_points >= 5
    assert math.isfinite(fit.compute_rate_flops) and fit.launch_overhead_s > 0
    assert fit.source == "calibration sweep" and fit.device_key.startswith("cpu-")
    assert seen[-1] == "done"


def test_roofline_json_round_trip_file(csv_file, tmp_path):
    out = tmp_path / "fit.json"
    assert invoke("roofline", str(csv_file), "--bootstrap", "0", "--out", str(out)).exit_code == 0
    data = json.loads(out.read_text())
    assert data["schema"] == "infer-opt/roofline"
    assert len(data["result"]["kernels"]) == len(_rows())


def test_view_shows_the_fit_s_warnings():
    from dataclasses import replace

    from infer_opt.cost_models.roofline import fit_quality
    from infer_opt.reports.roofline import build_view

    fit = replace(_fit(), parameters_at_bound=("b",), median_abs_rel_error=0.5)
    warnings = " ".join(text(n) for n in build_view(replace(fit, warnings=fit_quality(fit))).warnings)
    assert "b (bandwidth) ended at the edge of its search range" in warnings
    assert "misses the median kernel by 50%" in warnings
    assert build_view(_fit()).warnings == []


def test_tf32_fits_are_labelled_and_warned_against_the_fp32_peak(csv_file):
    from dataclasses import replace

    from infer_opt.cost_models.roofline import with_datasheet
    from infer_opt.reports.roofline import build_view

    fit = replace(_fit(), matmul_precision="tf32")
    view = build_view(with_datasheet(fit, flops=R / 2))
    assert "tf32" in dict(view.summary)["Data"]
    assert any("above the datasheet figure" in text(w) and "TF32 peak" in text(w) for w in view.warnings)
    assert build_view(with_datasheet(_fit(), flops=2 * R)).warnings == []
