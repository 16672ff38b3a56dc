"""The speed probes (a square matmul, a dispatch-bound small one): taken before each calibration
group and each validate point, compared."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from infer_opt.profilers import calibration as cal
from infer_opt.profilers import speed_probe
from infer_opt.profilers import validate as validate_module
from infer_opt.reports import validate as view
from infer_opt.steps import StepSettings
from tests.profilers.synthetic_calibration import local_calibration, synthetic_calibration

#: a quick validation of tiny on the CPU
QUICK = StepSettings("tiny", "cpu", "float32", reps=2, warmup=1)


def test_the_probe_times_its_matmul_and_compares_medians():
    assert 0 < speed_probe.probe_s("cpu") < 1.0
    # the dispatch probe's call does 1/2048 of the square matmul's arithmetic: it takes less time
    # (how much less is the machine's state, not asserted: a loaded machine stretches the matmul)
    matmul, dispatch = speed_probe.probe_s("cpu"), speed_probe.dispatch_probe_s("cpu")
    assert 0 < dispatch < matmul
    assert speed_probe.slowdown([2.0, 3.0, 9.0], [1.0, 1.5, 2.0]) == pytest.approx(2.0)
    assert speed_probe.slowdown([], [1.0]) is None
    assert speed_probe.slowdown([1.0], []) is None
    # a hand-edited calibration's unusable times are left out, not propagated
    edited = replace(synthetic_calibration(), probe_s=(1.0, float("nan"), -3.0, float("inf"), 3.0))
    assert edited.usable_probe_s == (1.0, 3.0) and edited.probe_median_s == pytest.approx(2.0)
    assert replace(edited, probe_s=(float("nan"), 0.0)).probe_median_s is None
    edited = replace(edited, dispatch_probe_s=(float("nan"), 4.0, 0.0, 2.0, 9.0))
    assert edited.usable_dispatch_probe_s == (4.0, 2.0, 9.0) and edited.dispatch_probe_median_s == 4.0
    assert synthetic_calibration().dispatch_probe_median_s is None


def test_calibrate_measures_on_its_device_and_probes_before_every_group(monkeypatch):
    device = torch.device("cpu")  # an object, so forwarding can be told from the default "cpu"
    seen: list[object] = []
    probes = iter([1e-3, 2e-3, 3e-3])
    dispatch = iter([1e-6, 2e-6, 3e-6])

    def measure_group(group, dtype, *, device="cpu", **kwargs):
        seen.append(device)
        return [], []

    monkeypatch.setattr(cal, "measure_group", measure_group)
    monkeypatch.setattr(cal, "calibrate_host", lambda dtype, device="cpu", reps=5: seen.append(device))
    monkeypatch.setattr(speed_probe, "probe_s", lambda device="cpu": next(probes))
    monkeypatch.setattr(speed_probe, "dispatch_probe_s", lambda device="cpu": next(dispatch))
    result = cal.calibrate(device, torch.float32, grid="tiny", only=["views", "norms", cal.HOST_GROUP])
    assert seen == [device, device, device]
    assert result.probe_s == (1e-3, 2e-3)
    assert result.dispatch_probe_s == (1e-6, 2e-6)


@pytest.mark.parametrize(
    ("calibration_probes", "calibration_dispatch"), [((1e-3, 1e-3), (4e-6, 4e-6)), ((1e-3,), ()), ((), ())]
)
def test_validate_says_how_much_slower_the_machine_ran_than_when_calibrated(
    monkeypatch, calibration_probes, calibration_dispatch
):
    monkeypatch.setattr(speed_probe, "probe_s", lambda device="cpu": 2e-3)
    monkeypatch.setattr(speed_probe, "dispatch_probe_s", lambda device="cpu": 6e-6)
    calibration = replace(
        local_calibration(), probe_s=calibration_probes, dispatch_probe_s=calibration_dispatch
    )
    result = validate_module.validate(QUICK, calibration, grid={"seq_len": (24,)})
    assert [(p.probe_s, p.dispatch_probe_s) for p in result.points] == [(2e-3, 6e-6)]
    assert result.probe_slowdown == (2.0 if calibration_probes else None)
    # a calibration made before the dispatch probe existed: not compared, the matmul still is
    assert result.dispatch_probe_slowdown == (pytest.approx(1.5) if calibration_dispatch else None)
    # another device's calibration: its probes say nothing about this machine
    other = replace(synthetic_calibration(families=True), probe_s=(1e-3,), dispatch_probe_s=(1e-6,))
    result = validate_module.validate(QUICK, other, grid={"seq_len": (24,)})
    assert result.probe_slowdown is None and result.dispatch_probe_slowdown is None


def test_the_report_words_the_machine_speed():
    assert view._speed(None, None).startswith("not compared")
    assert "slower" not in view._speed(1.03, None) and "1.03×" in view._speed(1.03, None)
    assert "ran slower than when calibrated" in view._speed(1.2, None)
    assert "ran faster than when calibrated" in view._speed(0.8, None)
    both = view._speed(1.02, 1.45)
    assert "1.02× (a square matmul) and 1.45× (a small, dispatch-bound one)" in both
    assert "ran slower than when calibrated" in both
    assert "ran faster" in view._speed(0.97, 0.7) and "1.03×" in view._speed(1.0, 1.03)
    assert "slower" not in view._speed(1.0, 1.03) and "faster" not in view._speed(1.0, 1.03)
    # the two probes moved apart: neither word fits
    apart = view._speed(0.8, 1.3)
    assert "moved since it was calibrated" in apart and "slower" not in apart and "faster" not in apart
    assert "dispatch probe (a small matmul) took 1.30×" in view._speed(None, 1.3)
