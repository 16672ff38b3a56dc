"""``predict``: a step's time from a calibration, ops recorded on fake tensors."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from infer_opt import steps
from infer_opt.errors import InvalidInput
from infer_opt.profilers import predict as pr
from infer_opt.profilers import validate
from infer_opt.profilers.meta_record import StepSpec
from infer_opt.results.calibration import CalibrationResult
from infer_opt.results.predict import PredictResult
from infer_opt.steps import StepSettings
from tests.profilers.synthetic_calibration import (
    PER_MODULE_S,
    PER_OP_S,
    local_calibration,
    matmul_family,
    roofline_time,
    synthetic_calibration,
)

#: a quick validation of tiny on the CPU
QUICK = StepSettings("tiny", "cpu", "float32", reps=2, warmup=1)


def test_step_is_every_op_at_its_prediction_plus_the_host_term():
    calibration = synthetic_calibration()
    result = pr.predict("tiny", calibration, mode="prefill", batch=2, seq_len=16)
    step = pr.predict_recorded(
        StepSpec("tiny", "prefill", batch=2, seq_len=16, context=0, new_tokens=1, dtype=torch.float32),
        pr.op_model.OpModel(calibration),
    )
    recorded = step.recorded
    ops = math.fsum(
        roofline_time(c.flops, q.work_bytes) for c, q in zip(recorded.calls, step.queries, strict=True)
    )
    host = PER_OP_S * len(recorded.calls) + PER_MODULE_S * recorded.module_calls
    assert result.step_time_s == pytest.approx(ops + host)
    assert result.host_s == pytest.approx(host)
    assert result.op_time_s == pytest.approx(ops)
    assert math.fsum(o.predicted_s for o in result.ops) == pytest.approx(ops)
    assert math.fsum(c.time_s for c in result.categories) == pytest.approx(ops)
    assert result.tokens_per_s == pytest.approx(32 / result.step_time_s)
    assert result.step_low_s < result.step_time_s < result.step_high_s
    assert result.extrapolated_share == pytest.approx(1.0)  # every op from the device roofline
    assert [n.code for n in result.warnings] == ["prediction_extrapolated"]


def test_json_has_the_issue_keys_and_round_trips():
    result = pr.predict("tiny", synthetic_calibration(), mode="decode", batch=1, context=32)
    data = result.to_dict()
    for key in ("step_time_s", "tokens_per_s", "flops", "bytes", "ops", "categories", "calibration"):
        assert key in data
    assert set(data["ops"][0]) >= {
        "name",
        "shapes",
        "calls",
        "predicted_s",
        "flops",
        "bytes",
        "bound",
        "extrapolated",
    }
    assert set(data["calibration"]) >= {"source", "device_name", "dtype", "threads"}
    assert PredictResult.from_dict(data) == result


def test_generate_gives_ttft_and_tpot_that_add_up_to_the_step():
    result = pr.predict("tiny", synthetic_calibration(), mode="generate", batch=1, seq_len=16, new_tokens=4)
    assert result.ttft_s is not None and result.tpot_s is not None
    assert result.ttft_s + 3 * result.tpot_s == pytest.approx(result.step_time_s)
    assert result.ttft_s > result.tpot_s
    assert result.tokens_per_step == 4


def test_flops_match_the_analytic_count():
    result = pr.predict("gpt2-small", synthetic_calibration(), mode="prefill", batch=1, seq_len=64)
    assert result.flops_vs_analytic is not None and abs(result.flops_vs_analytic) < 0.02


def test_decode_batch_sweep_finds_where_matmuls_turn_compute_bound():
    calibration = synthetic_calibration(families=True)
    sweep = ("batch", (1, 2, 4, 8, 16, 32))
    result = pr.predict("tiny", calibration, mode="decode", context=32, sweep=sweep)
    assert [p.value for p in result.points] == [1, 2, 4, 8, 16, 32]
    assert result.ridge_point == pytest.approx(2.0)  # R/b of the matmul family
    intensities = [p.matmul_intensity for p in result.points]
    assert intensities == sorted(intensities)
    crossing = result.compute_bound_from
    assert crossing is not None
    below = [p for p in result.points if p.value < crossing]
    assert all(p.bound == "bandwidth" for p in below)
    assert all(p.bound == "compute" for p in result.points if p.value >= crossing)
    assert all(p.step_time_s > 0 and p.tokens_per_s for p in result.points)


def test_sweep_points_are_recorded_on_the_same_device_as_the_step(monkeypatch):
    """A CUDA calibration's sweep claims CUDA for every point, as its base step does (the fused
    kernels a step picks depend on the device its fake tensors claim)."""
    seen: list[tuple[str, int]] = []
    real = pr.predict_recorded

    def spy(step, model):
        seen.append((step.device, step.batch))
        return real(replace(step, device="cpu"), model)

    monkeypatch.setattr(pr, "predict_recorded", spy)
    monkeypatch.setattr(pr, "recording_device", lambda calibration: ("cuda", []))
    pr.predict(
        "tiny", synthetic_calibration(families=True), mode="decode", context=8, sweep=("batch", (1, 2))
    )
    assert seen == [("cuda", 1), ("cuda", 1), ("cuda", 2)]


def test_parse_sweep():
    assert pr.parse_sweep("batch=1,2,4") == ("batch", (1, 2, 4))
    assert pr.parse_sweep("seq-len=64,128") == ("seq_len", (64, 128))
    assert pr.parse_sweep("context=0,16") == ("context", (0, 16))
    for bad in ("width=1,2", "batch", "batch=4,2", "batch=", "batch=0", "batch=1,,2", "batch=1,", "batch=,"):
        with pytest.raises(InvalidInput):
            pr.parse_sweep(bad)
    assert pr.parse_sweep("batch=8,16", high=16) == ("batch", (8, 16))
    with pytest.raises(InvalidInput, match=r"\[1, 16\]"):
        pr.parse_sweep("batch=8,17", high=16)


@pytest.mark.parametrize("mode", ["prefill", "decode", "generate"])
@pytest.mark.parametrize("param", pr.SWEEP_PARAMS)
def test_a_sweep_is_refused_exactly_where_its_parameter_does_not_change_the_step(mode, param):
    """What the recorder does decides: two values of ``param`` record different work for
    ``mode`` where SHAPE_MODES says the mode reads it, the same work where it is refused."""
    from infer_opt.profilers.meta_record import record_step

    base = StepSpec("tiny", mode, batch=1, seq_len=16, context=32, new_tokens=2, dtype=torch.float32)
    work = [sum(c.flops for c in record_step(replace(base, **{param: v})).calls) for v in (8, 24)]
    if mode in steps.SHAPE_MODES[param]:
        assert work[0] != work[1]
        pr.check_param_modes(param, (8, 24), (mode,), "sweep")
    else:
        assert work[0] == work[1]
        with pytest.raises(InvalidInput, match=f"does not change a {mode} step"):
            pr.check_param_modes(param, (8, 24), (mode,), "sweep")
        with pytest.raises(InvalidInput, match="sweep"):
            pr.predict("tiny", synthetic_calibration(), mode=mode, sweep=(param, (8, 24)))
    # a grid over several modes takes a parameter any of them uses
    pr.check_param_modes(param, (8, 24), steps.SHAPE_MODES[param], "grid")


def test_a_cold_matmul_family_is_used_for_a_model_larger_than_the_cache():
    warm = matmul_family()
    cold = matmul_family("cold", bandwidth=1e9)
    calibration = synthetic_calibration()
    # the cold state sits 1 KiB of reads after the last use: every weight is beyond it
    near = replace(calibration, families=(*warm, *cold), warm_reuse_bytes=512, cold_reuse_bytes=1024)
    ops = pr.predict("tiny", near, mode="decode", batch=1, context=8).ops
    matmuls = [o for o in ops if o.family.endswith(".nt")]
    assert matmuls and all(o.state == "cold" for o in matmuls)
    # far: every weight is nearer the warm state; ops without a weight are hot
    far = replace(near, warm_reuse_bytes=2**29, cold_reuse_bytes=2**40)
    ops = pr.predict("tiny", far, mode="decode", batch=1, context=8).ops
    assert all(o.state == "warm" for o in ops if o.family.endswith(".nt"))
    assert all(o.state == "hot" for o in ops if o.category in ("elementwise", "normalization"))


def noisy(calibration: CalibrationResult) -> CalibrationResult:
    """``calibration`` with a matmul family whose repetitions spread by 30%."""
    family = matmul_family()[0]
    points = tuple(replace(p, rel_spread=0.3) for p in family.points)
    return replace(calibration, families=(replace(family, points=points),))


def test_a_prediction_and_a_validation_from_a_noisy_calibration_say_so():
    result = pr.predict("tiny", noisy(synthetic_calibration()), mode="decode", batch=1, context=32)
    assert "calibration_noisy" in [n.code for n in result.warnings]
    checked = validate.validate(QUICK, noisy(local_calibration()), grid={"seq_len": (24,)})
    assert [n.code for n in checked.warnings].count("calibration_noisy") == 1
    quiet = pr.predict("tiny", synthetic_calibration(families=True), mode="decode", batch=1, context=32)
    assert "calibration_noisy" not in [n.code for n in quiet.warnings]


def test_what_is_said_of_the_calibration_is_said_by_predict_and_validate_alike():
    """Incomplete, without the host term, of the smoke-test grid: the same notices either way."""
    smoke = replace(local_calibration(), grid="tiny", complete=False, host=None)
    expected = ["calibration_incomplete", "calibration_no_host_term", "calibration_smoke_grid"]
    assert [n.code for n in pr.calibration_notices(smoke)] == expected
    predicted = pr.predict("tiny", smoke, mode="decode", batch=1, context=32)
    assert set(expected) <= {n.code for n in predicted.warnings}
    checked = validate.validate(QUICK, smoke, grid={"seq_len": (24,)})
    assert set(expected) <= {n.code for n in checked.warnings}
    assert pr.calibration_notices(local_calibration()) == []
