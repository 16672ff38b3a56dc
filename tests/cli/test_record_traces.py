"""``scripts/record_traces.py``: the traces ``scripts/gpu_check.sh`` calibrates from and validates
against on a lent GPU (issue 31) — names in step, held-out shapes apart, a dry run writes nothing,
and on the CPU a recorded trace holds shaped ops in ProfilerSteps."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def _recorder():
    spec = importlib.util.spec_from_file_location("record_traces", ROOT / "scripts" / "record_traces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_calibrates_from_the_plan_and_validates_on_the_held_out_shapes():
    rt = _recorder()
    text = SCRIPT.read_text().replace("\\\n", " ")
    calibrated = re.findall(r'--from-trace "\$W/([^"]+\.json\.gz)"', text)
    against = re.findall(r'--against "\$W/([^"]+\.json\.gz)"', text)
    assert calibrated == [rt.name(*p) for p in rt.CALIBRATION]
    assert against == [rt.name(*p) for p in rt.HELD_OUT]
    assert not set(calibrated) & set(against)


def test_held_out_shapes_lie_between_the_calibrations():
    rt = _recorder()
    for model, mode, batch, length in rt.HELD_OUT:
        grid = [(b, n) for m, md, b, n in rt.CALIBRATION if (m, md) == (model, mode)]
        assert min(b for b, _ in grid) < batch < max(b for b, _ in grid)
        assert min(n for _, n in grid) < length < max(n for _, n in grid)


def test_dry_run_writes_nothing(tmp_path, capsys):
    rt = _recorder()
    assert rt.main(["--out", str(tmp_path / "t"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("would record") == len(rt.CALIBRATION) + len(rt.HELD_OUT)
    assert not (tmp_path / "t").exists()


@pytest.mark.slow
def test_a_cpu_recording_has_shaped_ops_in_profiler_steps(tmp_path):
    from infer_opt.trace.reader import read_trace

    rt = _recorder()
    path = rt.record("tiny", "prefill", 1, 16, device="cpu", dtype="float32", steps=2, out=tmp_path)
    ev = read_trace(path)
    assert len(ev.steps) == 2
    assert any(a.get("Input Dims") for a in ev.ops.args)
