from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
import torch

from infer_opt.results import load_result, save_result
from infer_opt.results.roofline import RooflineFit
from tests.helpers import Run, assert_one_line_error, invoke, usable_fit

FIT = RooflineFit(
    compute_rate_flops=100e9, bandwidth_bytes_per_s=10e9, launch_overhead_s=1e-6, median_abs_rel_error=0.05
)
FAST = ("--reps", "3", "--warmup", "1", "--seq-len", "32")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "my_model.py"


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch, one_thread):
    """A private roofline cache holding a hand-made fit for this (one-thread) run, so no test
    calibrates."""
    monkeypatch.setenv("INFER_OPT_CACHE", str(tmp_path / "cache"))
    from infer_opt.profilers import roofline_sweep

    assert roofline_sweep.cache_fit(usable_fit()).saved


def _profile(*args: str) -> Run:
    return invoke("profile", *FAST, *args)


def test_default_model_json_has_the_documented_keys():
    run = _profile("--json")
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/profile"
    result = data["result"]
    assert result["model"] == "tiny" and result["mode"] == "prefill" and result["device"] == "cpu"
    assert result["step"]["median_s"] > 0 and result["coverage"] > 0
    assert len(result["step"]["samples_s"]) == 3
    for op in result["ops"]:
        assert {"name", "shapes", "calls", "time_s", "flops", "bytes", "bound", "efficiency"} <= set(op)
        assert len(op["time_samples_s"]) == 3
    names = {op["name"] for op in result["ops"]}
    assert {"aten::addmm", "aten::_scaled_dot_product_flash_attention_for_cpu"} <= names
    for cat in result["categories"]:
        assert {"category", "fraction", "ceiling_speedup", "roofline_speedup"} <= set(cat)
    assert result["roofline"]["source"].startswith("saved fit")
    assert result["generation"] is None


def test_table_output_has_the_header_tables_and_opportunities():
    run = _profile("--top", "40")
    assert run.exit_code == 0, run.stderr
    out = run.stdout
    for needle in (
        "Profile of tiny — prefill on cpu",
        "Step time",
        "Coverage",
        "Top operators by time (measured)",
        "Time by category (measured)",
        "Where optimization pays",
        "predictions, not measurements",
        "Most to gain:",
        "sdpa_flash_cpu",
    ):
        assert needle in out, needle
    assert "operator/shape groups" in out


def test_decode_mode():
    envelope = _profile("--mode", "decode", "--context", "40", "--seq-len", "64", "--json").json()
    data = envelope["result"]
    assert data["mode"] == "decode" and data["context"] == 40 and data["tokens_per_step"] == 1
    # a decode step does not read --seq-len: given, it is said to be ignored
    (ignored,) = [w for w in envelope["warnings"] if w["code"] == "option_ignored"]
    assert ignored["values"]["option"] == "--seq-len" and "--context" in ignored["message"]
    attention = [op for op in data["ops"] if op["category"] == "attention"]
    assert attention and attention[0]["shapes"][1][2] == 41


def test_generate_mode_reports_ttft_and_tpot():
    data = _profile("--mode", "generate", "--new-tokens", "3", "--json").json()["result"]
    assert data["generation"]["ttft_s"] > 0 and data["generation"]["tpot_s"] > 0
    assert data["generation"]["new_tokens"] == 3
    run = _profile("--mode", "generate", "--new-tokens", "3")
    assert "Time to first token" in run.stdout and "Time per output token" in run.stdout


@pytest.mark.parametrize(("by", "title"), [("module", "Time by module"), ("category", "Time by category")])
def test_group_by(by, title):
    run = _profile("--by", by)
    assert run.exit_code == 0 and title in run.stdout
    if by == "module":
        assert "blocks.*.attn.q_proj" in run.stdout
    else:
        assert "Top operators" not in run.stdout


def test_writes_plots_trace_markdown_and_a_loadable_result(tmp_path):
    png, trace, md, out = tmp_path / "p.png", tmp_path / "t.json", tmp_path / "p.md", tmp_path / "r.json"
    run = _profile("--plot", str(png), "--trace", str(trace), "--markdown", str(md), "--out", str(out))
    assert run.exit_code == 0, run.stderr
    for path in (png, tmp_path / "p-roofline.png"):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "traceEvents" in json.loads(trace.read_text())
    assert "**Where optimization pays" in md.read_text()
    loaded = load_result(out)
    assert loaded.kind == "profile" and loaded.result.model == "tiny"


def test_explicit_roofline_file(tmp_path):
    path = save_result(tmp_path / "fit.json", usable_fit())
    data = _profile("--roofline", str(path), "--json").json()["result"]
    assert data["roofline"]["source"] == str(path)
    assert data["roofline"]["compute_rate_flops"] == 100e9


def test_a_roofline_file_for_another_dtype_or_timing_is_refused(tmp_path):
    """A float16 fit was once used for a float32 profile without a word."""
    path = save_result(tmp_path / "fit.json", usable_fit(dtype="float16", matmul_precision=""))
    assert_one_line_error(_profile("--roofline", str(path)), "roofline", "dtype is float16", "float32")
    old = save_result(tmp_path / "old.json", FIT)  # a fit that records none of its run key
    assert_one_line_error(_profile("--roofline", str(old)), "roofline", "not usable for this run")


def test_no_usable_fit_profiles_without_roofline_columns(tmp_path, monkeypatch):
    """The cached fit is bad and both calibrations come out tick-quantized: the profile still
    runs, without bound/efficiency, and says why and what to do."""
    from dataclasses import replace

    from infer_opt.notices import Notice
    from infer_opt.profilers import roofline_sweep

    cached = roofline_sweep.fit_path("cpu", "float32")
    cached.write_text(
        cached.read_text().replace('"compute_rate_flops": 100000000000.0', '"compute_rate_flops": -1.0')
    )
    bad = usable_fit(warnings=(Notice("fit_tick_quantized", {"times_s": [8e-3], "kernels": 6}),))
    monkeypatch.setattr(roofline_sweep, "calibrate", lambda *a, **k: replace(bad, median_abs_rel_error=0.9))
    png = tmp_path / "p.png"
    run = _profile("--json", "--plot", str(png))
    assert run.exit_code == 0, run.stderr
    result = run.json()["result"]
    assert result["roofline"] is None and result["all_at_bound_speedup"] is None
    assert all(op["bound"] is None and op["efficiency"] is None for op in result["ops"])
    assert all(c["roofline_speedup"] is None and c["ceiling_speedup"] > 1 for c in result["categories"])
    joined = " ".join(w["message"] for w in run.json()["warnings"])
    assert "not usable for this run" in joined and "R (compute rate) is -1" in joined
    assert "misses the median kernel by 90%" in joined and "no usable roofline fit" in joined
    assert png.exists() and not (tmp_path / "p-roofline.png").exists()
    table = _profile()
    assert table.exit_code == 0 and "Eff." not in table.stdout and "Roofline" in table.stdout


def test_user_factory_from_a_file():
    run = _profile(f"{EXAMPLE}:make_model", "--batch", "2", "--json")
    assert run.exit_code == 0, run.stderr
    data = run.json()["result"]
    assert data["model"] == "my_model.py:make_model" and data["model_source"] == "factory"
    assert data["tokens_per_step"] == 2 * 32


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["nope"], ["MODEL", "tiny, gpt2-small, llama-tiny, llama-small"]),
        (["--mode", "train"], ["--mode", "prefill, decode, generate"]),
        (["--by", "layer"], ["--by"]),
        (["--batch", "0"], ["--batch"]),
        (["--seq-len", "abc"], ["--seq-len", "abc"]),
        (["--seq-len", "5000"], ["--seq-len", "2048 positions"]),
        (["--mode", "decode", "--context", "4000"], ["--context"]),
        (["--reps", "0"], ["--reps"]),
        (["--device", "tpu"], ["--device", "auto, cpu, cuda"]),
        (["--dtype", "int3"], ["--dtype"]),
        (["--plot", "x.svg"], ["--plot", ".png"]),
        (["--out", "x.xyz"], ["--out"]),
        (["--hf-config", "n_layer"], ["--hf-config", "KEY=VALUE"]),
        (["--hf-config", "n_layer=2"], ["--hf-config", "hf:<model_type>"]),
        (["missing/file.py:make"], ["MODEL", "does not exist"]),
        (["no_such_pkg_xyz.mod:make"], ["MODEL", "cannot import module"]),
        ([f"{EXAMPLE}:make_model", "--mode", "decode"], ["--mode", "built-in or an hf: model"]),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needles):
    assert_one_line_error(_profile(*args), *needles)


def test_cuda_without_cuda_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available")
    assert_one_line_error(_profile("--device", "cuda"), "CUDA is not available", "--device cpu")


@pytest.mark.skipif(importlib.util.find_spec("transformers") is not None, reason="transformers is installed")
def test_hf_without_transformers_says_how_to_install():
    assert_one_line_error(_profile("hf:gpt2"), "pip install 'infer-opt[hf]'")


RAISING = """
import torch

class Broken(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("shape mismatch in layer 3")

def make():
    return Broken(), torch.ones(2)
"""


def test_a_model_that_raises_exits_1_with_one_line(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(RAISING)
    run = _profile(f"{path}:make")
    assert run.exit_code == 1
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: the model raised RuntimeError")
    assert "shape mismatch in layer 3" in lines[0] and "Traceback" not in run.stderr


def test_debug_shows_the_traceback_and_keeps_the_exit_code(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(RAISING)
    run = _profile(f"{path}:make", "--debug")
    assert run.exit_code == 1
    assert "Traceback" in run.stderr and "RuntimeError" in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("Error: ")


def test_threads_option_sets_torch_threads_and_rejects_zero():
    import torch

    before = torch.get_num_threads()
    try:
        run = _profile("--threads", "1", "--json")
        assert run.exit_code == 0, run.stderr
        assert run.json()["environment"]["torch_num_threads"] == 1
    finally:
        torch.set_num_threads(before)
    assert_one_line_error(_profile("--threads", "0"), "--threads", f"[1, {os.cpu_count()}]")


def test_runs_are_kept_per_step_op_and_category_and_compare_tests_them(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path in (a, b):
        run = _profile("--runs", "2", "--out", str(path))
        assert run.exit_code == 0, run.stderr
    result = load_result(a).result
    assert result.runs == 2 and len(result.step.run_medians_s) == 2
    assert all(len(o.run_medians_s) == 2 for o in result.ops)
    assert all(len(c.run_medians_s) == 2 for c in result.categories)
    compared = invoke("compare", str(a), str(b), "--json").json()["result"]
    assert compared["headline"]["runs_base"] == 2 and compared["headline"]["floor"] is None
    assert {(r["runs_base"], r["runs_new"]) for r in compared["rows"]} == {(2, 2)}


def test_runs_with_tp_is_refused_in_one_line():
    assert_one_line_error(_profile("--tp", "2", "--runs", "2"), "--runs", "--tp")
