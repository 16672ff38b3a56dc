"""The calibration cache's rules, driven by fake calibrations (no kernel runs): validated
before saving and before use, one retry (with one thread when the machine is loaded), then
no fit rather than a bad one."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from infer_opt.messages import text
from infer_opt.notices import Notice
from infer_opt.profilers import roofline_sweep
from infer_opt.results.kernels import KernelSuiteResult
from tests.helpers import usable_fit

TICKS = Notice("fit_tick_quantized", {"tick_s": 8e-3, "kernels": 6})


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INFER_OPT_CACHE", str(tmp_path / "cache"))
    before = torch.get_num_threads()
    yield tmp_path / "cache"
    torch.set_num_threads(before)


class Calibrations:
    """Hands out the given fits in turn (each keyed for the threads torch has when asked)."""

    def __init__(self, *bad: bool) -> None:
        self.bad = list(bad)
        self.threads: list[int] = []

    def __call__(self, device, dtype, *, progress=None):
        self.threads.append(torch.get_num_threads())
        fit = usable_fit()
        return replace(fit, median_abs_rel_error=0.9, warnings=(TICKS,)) if self.bad.pop(0) else fit


def _resolve(calibrations, load=0.0):
    return roofline_sweep.fit_for_run("cpu", "float32", calibrate_fn=calibrations, load=lambda: load)


def test_a_good_calibration_is_cached_and_reused():
    first = _resolve(Calibrations(False))
    assert first.fit is not None and first.source.startswith("calibrated now, saved to")
    again = _resolve(Calibrations())  # no calibration left to run: it must come from the cache
    assert again.fit == first.fit and again.source.startswith("saved fit") and again.warnings == ()


def test_a_bad_calibration_is_measured_again_and_the_good_one_used():
    calibrations = Calibrations(True, False)
    resolved = _resolve(calibrations)
    assert resolved.fit is not None and "second try" in resolved.source
    assert calibrations.threads == [torch.get_num_threads()] * 2  # a quiet machine: same threads
    assert [n.code for n in resolved.warnings][:2] == ["roofline_calibration_rejected", "fit_error_high"]
    assert roofline_sweep.ROOFLINE.load(store_key()).result == resolved.fit


def test_twice_bad_is_not_cached_and_the_run_goes_on_without_a_fit():
    resolved = _resolve(Calibrations(True, True))
    assert resolved.fit is None
    assert not roofline_sweep.fit_path("cpu", "float32").exists()
    codes = [n.code for n in resolved.warnings]
    assert codes.count("roofline_calibration_rejected") == 2 and codes[-1] == "roofline_unavailable"
    assert "Run `infer-opt roofline` on a quiet machine" in text(resolved.warnings[-1])


def test_on_a_loaded_machine_the_retry_uses_one_thread(monkeypatch):
    monkeypatch.setattr(roofline_sweep, "machine_loaded", lambda threads, load=None: True)
    torch.set_num_threads(2)
    calibrations = Calibrations(True, False)
    resolved = _resolve(calibrations)
    assert calibrations.threads == [2, 1] and torch.get_num_threads() == 2
    # the one-thread fit is good and cached for one-thread runs; this run has two threads
    assert resolved.fit is None
    saved = next(n for n in resolved.warnings if n.code == "roofline_saved_for_other_threads")
    assert saved["threads"] == 1 and "-1t-" in saved["path"]
    assert "--threads 1" in text(resolved.warnings[-1])
    torch.set_num_threads(1)
    assert _resolve(Calibrations()).fit is not None  # a --threads 1 run finds it


def test_a_cache_that_cannot_be_written_after_the_second_try_is_said_not_raised(monkeypatch):
    monkeypatch.setattr(roofline_sweep, "machine_loaded", lambda threads, load=None: True)

    def full(fit):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(roofline_sweep, "cache_fit", full)
    torch.set_num_threads(2)
    try:
        resolved = _resolve(Calibrations(True, False))
    finally:
        torch.set_num_threads(1)
    codes = [n.code for n in resolved.warnings]
    assert "roofline_not_saved" in codes and codes[-1] == "roofline_unavailable"


def test_machine_loaded_compares_the_load_with_the_free_cores(monkeypatch):
    monkeypatch.setattr("infer_opt.profilers.device.available_cpus", lambda: 2)
    assert not roofline_sweep.machine_loaded(2, lambda: 0.2)
    assert roofline_sweep.machine_loaded(2, lambda: 1.0)
    assert not roofline_sweep.machine_loaded(1, lambda: 1.0)
    assert not roofline_sweep.machine_loaded(2, lambda: None)


def test_a_cached_fit_for_other_threads_or_precision_is_not_used():
    torch.set_num_threads(1)
    assert roofline_sweep.cache_fit(usable_fit()).saved
    torch.set_num_threads(2)
    resolved = _resolve(Calibrations(False))
    assert resolved.source.startswith("calibrated now")  # the 1-thread fit is another key


def test_an_explicit_fit_for_another_run_is_refused_naming_why(tmp_path):
    from infer_opt.errors import InvalidInput
    from infer_opt.results import save_result

    path = save_result(tmp_path / "fit.json", usable_fit(timing="cuda-events"))
    with pytest.raises(
        InvalidInput, match=r"^roofline: not usable for this run: the fit's timing is cuda-events"
    ):
        roofline_sweep.read_fit_for_run(path, "cpu", "float32")
    good = save_result(tmp_path / "good.json", usable_fit())
    assert roofline_sweep.read_fit_for_run(good, "cpu", "float32") == usable_fit()


def store_key():
    from infer_opt.profilers.device import run_key

    return run_key("cpu", "float32", "cpu-clock")


def test_a_cuda_calibration_is_timed_as_profile_times_operators(monkeypatch):
    """Unflushed eager events time tiny kernels at the host's launch rate (t0 ≈ 5 µs against
    1-2 µs kernels): on CUDA the calibration flushes and replays one-call graphs, and its fit
    records that timing."""
    from infer_opt.profilers import device as devices
    from infer_opt.profilers import kernels

    seen = {}

    def run_suite(cases, dev, dtype, settings, **kwargs):
        seen["settings"] = settings
        return KernelSuiteResult("cuda:0", "GPU", "cuda-gpu-bfloat16", "bfloat16", "calibration", settings)

    monkeypatch.setattr(devices, "resolve_device", lambda spec: torch.device("cuda", 0))
    monkeypatch.setattr(devices, "parse_dtype", lambda name, dev: torch.bfloat16)
    monkeypatch.setattr(kernels, "run_suite", run_suite)
    monkeypatch.setattr(roofline_sweep, "kernel_points", lambda result: synthetic_points())
    fit = roofline_sweep.calibrate("cuda", "bfloat16")
    assert seen["settings"].flush_cache and seen["settings"].cuda_graphs
    assert fit.timing == roofline_sweep.CALIBRATION_TIMING["cuda"] == "cuda-graph-flushed"
    assert fit.timing in roofline_sweep.PROFILE_TIMINGS["cuda"] and fit.threads is None


def synthetic_points():
    from tests.cost_models.test_roofline import synthetic

    return synthetic()
