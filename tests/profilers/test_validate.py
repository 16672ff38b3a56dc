"""``validate`` with several passes over its grid: each point compared at the median of its
passes, and the passes compared with each other (the noise floor)."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.errors import InvalidInput
from infer_opt.profilers import validate as validate_module
from infer_opt.reports import validate as view
from infer_opt.results.validate import (
    NOISE_HOST,
    NOISE_OPS,
    NOISE_SMALL_OPS,
    OpComparison,
    ValidatePoint,
    ValidateResult,
)
from infer_opt.steps import StepSettings
from tests.profilers.synthetic_calibration import local_calibration, synthetic_calibration

#: a quick validation of tiny on the CPU
QUICK = StepSettings("tiny", "cpu", "float32", reps=2, warmup=1)


def point(measured: float, *, mode: str = "prefill", predicted: float = 1.0, host: float = 0.0, **kw):
    return ValidatePoint(
        mode=mode,
        batch=1,
        seq_len=16 if mode != "decode" else None,
        context=16 if mode == "decode" else None,
        measured_s=measured,
        predicted_s=predicted,
        rel_error=(predicted - measured) / measured,
        measured_host_s=host,
        predicted_host_s=0.0,
        measured_rel_iqr=0.0,
        on_grid_share=0.0,
        extrapolated_share=0.0,
        **kw,
    )


def op(measured: float, *, name: str = "aten::mm", at: int = 0, predicted: float = 20e-6):
    return OpComparison(
        point=at,
        mode="prefill",
        name=name,
        shapes=((4, 4),),
        family="gemm.nn",
        calls=1,
        measured_s=measured,
        predicted_s=predicted,
        rel_error=(predicted - measured) / measured,
        extrapolated=False,
    )


def test_one_pass_has_no_noise_and_is_taken_as_it_is():
    points, ops = [point(2.0)], [op(30e-6)]
    assert validate_module.pass_noise([(points, ops)]) == {}
    assert validate_module.merge_passes([(points, ops)]) == (points, ops)


def test_the_later_pass_is_compared_with_the_earlier_per_mode_op_bucket_and_host():
    first = (
        [point(1.0, host=0.1), point(2.0, mode="decode", host=0.0)],
        [op(20e-6, at=0), op(5e-6, name="aten::add", at=0), op(40e-6, at=1)],
    )
    second = (
        [point(1.2, host=0.15), point(1.0, mode="decode", host=0.2)],
        [op(30e-6, at=0), op(6e-6, name="aten::add", at=0)],  # the op at point 1 did not match
    )
    noise = validate_module.pass_noise([first, second])
    assert noise["prefill"].mape == pytest.approx(0.2) and noise["prefill"].mean_signed_rel_error > 0
    assert noise["decode"].mape == pytest.approx(0.5) and noise["decode"].mean_signed_rel_error < 0
    # operators by the earlier pass's time: 20 µs is a large one, 5 µs a small one
    assert noise[NOISE_OPS].n == 1 and noise[NOISE_OPS].mape == pytest.approx(0.5)
    assert noise[NOISE_SMALL_OPS].n == 1 and noise[NOISE_SMALL_OPS].mape == pytest.approx(0.2)
    # a host term measured as zero in either pass is left out
    assert noise[NOISE_HOST].n == 1 and noise[NOISE_HOST].mape == pytest.approx(0.5)
    # with three passes every pair counts: 1.0 → 1.2, 1.0 → 0.9, 1.2 → 0.9
    third = ([point(0.9, host=0.1), point(2.0, mode="decode", host=0.1)], [])
    three = validate_module.pass_noise([first, second, third])
    assert three["prefill"].n == 3
    assert three["prefill"].mape == pytest.approx((0.2 + 0.1 + 0.25) / 3)


def test_generate_points_compare_their_ttft_and_tpot_between_passes():
    a = point(1.0, mode="generate", ttft_measured_s=0.2, tpot_measured_s=0.1, ttft_predicted_s=0.3)
    b = point(1.0, mode="generate", ttft_measured_s=0.3, tpot_measured_s=0.1, ttft_predicted_s=0.3)
    noise = validate_module.pass_noise([([a], []), ([b], [])])
    assert noise["generate"].mape == 0.0
    assert noise["prefill (TTFT)"].mape == pytest.approx(0.5)
    assert noise["decode (TPOT)"].mape == 0.0
    # the prediction's own TTFT/TPOT errors keep their keys (a TPOT without prediction is left out)
    errors = validate_module.summarize([a], [])["step_by_mode"]
    assert set(errors) == {"generate", "prefill (TTFT)"}
    assert errors["prefill (TTFT)"].mape == pytest.approx(0.5)


@given(st.lists(st.floats(1e-4, 1.0), min_size=2, max_size=6))
def test_a_point_is_compared_at_the_median_of_its_passes(times):
    passes = [([point(t, predicted=0.5, host=t / 10)], [op(t * 1e-3)]) for t in times]
    (merged,), (merged_op,) = validate_module.merge_passes(passes)
    median = statistics.median(times)
    assert merged.measured_s == pytest.approx(median)
    assert merged.rel_error == pytest.approx((0.5 - median) / median)
    assert merged.pass_measured_s == tuple(times)
    assert merged.measured_host_s == pytest.approx(median / 10)
    assert merged_op.measured_s == pytest.approx(median * 1e-3)
    assert merged_op.rel_error == pytest.approx((20e-6 - median * 1e-3) / (median * 1e-3))
    # the spread shown per point: slowest − fastest over the median
    assert merged.pass_spread == pytest.approx((max(times) - min(times)) / median)


def test_validate_measures_the_grid_pass_after_pass_and_predicts_each_point_once(monkeypatch):
    measured_order: list[tuple[str, int]] = []
    real_measure = validate_module._measure

    def measure(settings, fit, device):
        measured_order.append((settings.mode, settings.shape.seq_len))
        return real_measure(settings, fit, device)

    predicted: list[int] = []
    real_predict = validate_module.pr.predict_recorded

    def predict(step, model):
        predicted.append(step.seq_len)
        return real_predict(step, model)

    monkeypatch.setattr(validate_module, "_measure", measure)
    monkeypatch.setattr(validate_module.pr, "predict_recorded", predict)
    labels: list[str] = []
    result = validate_module.validate(
        QUICK, local_calibration(), grid={"seq_len": (24, 40)}, passes=2,
        progress=lambda done, total, label: labels.append(f"{done}/{total} {label}"),
    )  # fmt: skip
    assert measured_order == [("prefill", 24), ("prefill", 40)] * 2
    assert predicted == [24, 40]
    assert labels[0] == "0/4 pass 1/2: prefill batch=1 seq-len=24" and labels[-1] == "4/4 done"
    assert result.passes == 2 and len(result.points) == 2
    assert all(len(p.pass_measured_s) == 2 for p in result.points)
    assert result.noise["prefill"].n == 2
    assert {NOISE_OPS, NOISE_SMALL_OPS, NOISE_HOST} <= set(result.noise)
    # one comparison per op and point, not one per pass
    keys = [(o.point, o.name, o.shapes) for o in result.ops]
    assert len(keys) == len(set(keys))
    # the result round-trips through its JSON envelope
    assert type(result).from_dict(result.to_dict()) == result
    # and carries the settings every point was made from, resolved (the threads it ran at)
    assert result.settings == replace(QUICK, threads=torch.get_num_threads())
    with pytest.raises(InvalidInput, match="passes"):
        validate_module.validate(QUICK, local_calibration(), passes=0)


def test_the_report_sets_the_noise_floor_beside_the_errors(monkeypatch):
    first = ([point(1.0, predicted=1.05)], [op(20e-6)])
    second = ([point(1.2, predicted=1.05)], [op(22e-6)])
    points, ops = validate_module.merge_passes([first, second])
    result = ValidateResult(
        model="tiny", dtype="float32", threads=1, calibration=None, points=tuple(points),
        ops=tuple(ops), passes=2, noise=validate_module.pass_noise([first, second]),
        **validate_module.summarize(points, ops),
    )  # fmt: skip
    # step error 4.5% against a 20% move between passes: within the noise
    floor = view._noise_floor(result)
    assert "20.0% (prefill)" in floor and "prefill step error is within it" in floor
    stats = view.stats_table(result)
    assert stats.rows[0]["noise"] == pytest.approx(0.2)
    assert any(c.key == "noise" for c in stats.columns)
    assert any(c.key == "spread" for c in view.point_table(result).columns)
    one = ValidateResult(
        model="tiny", dtype="float32", threads=1, calibration=None, points=(first[0][0],), ops=(),
        **validate_module.summarize(first[0], []),
    )  # fmt: skip
    assert view._noise_floor(one).startswith("not measured")
    assert not any(c.key in ("noise", "spread") for c in view.stats_table(one).columns)
    assert not any(c.key == "spread" for c in view.point_table(one).columns)


def test_a_cpu_run_at_another_thread_count_than_its_calibration_says_so():
    import torch

    now = torch.get_num_threads()
    other = replace(synthetic_calibration(), threads=now + 1)
    (said,) = validate_module._threads_notices(other, "cpu")
    assert said.code == "validation_threads_differ" and said.values == {"threads": now, "calibrated": now + 1}
    assert validate_module._threads_notices(replace(other, threads=now), "cpu") == []
    # a GPU run, or a GPU's calibration: its threads are not the measurement's
    assert validate_module._threads_notices(other, "cuda:0") == []
    assert validate_module._threads_notices(replace(other, device="cuda:0"), "cpu") == []


def test_a_calibration_of_another_device_kind_is_refused_and_another_model_said():
    here = local_calibration()
    assert validate_module._device_notices(here, "cpu") == []
    (said,) = validate_module._device_notices(replace(here, device_name="Some Other CPU"), "cpu")
    assert said.code == "validation_other_device" and said.values["calibrated"] == "Some Other CPU"
    gpu = replace(here, device="cuda", device_name="NVIDIA H200", dtype="bfloat16")
    with pytest.raises(InvalidInput, match="measures the steps here"):
        validate_module.validate(QUICK, gpu, grid={"seq_len": (24,)})
