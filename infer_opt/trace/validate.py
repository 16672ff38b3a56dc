"""``infer-opt validate --against TRACE``: an operator calibration's predictions against the kernel
times of a GPU trace it was not built from (docs/gpu_model.md).

Every op instance of the trace that ran GPU work and has a formula
(:func:`infer_opt.trace.calibrate.op_instances`) is predicted from its recorded shapes alone —
its family, features, FLOPs and bytes — by the calibration's
:class:`~infer_opt.cost_models.op_model.OpModel`; an op in another dtype than the calibration's
(``eq.s:int64``) falls back to its plain family when the calibration has no points of its own.
Ops are compared per (name, shapes, dtype), per call: the median measured time over the
instances against the prediction. As ``validate`` reports it: the MAPE and p90 of
``|t̂ − t| / t`` over the ops of at least :data:`~infer_opt.results.validate.SMALL_OP_S`, the
shorter ones as their own bucket, per family, the worst ops; and per ``ProfilerStep`` (the whole
trace when it has none) the summed GPU time of every kernel, memcpy and memset in it, measured
against predicted — the modelled instances' predictions plus, for the events no formula covers,
the calibration's launch floor per event (their share is reported: ``modelled_share``).

**Tiers.** *target-calibrated*: the calibration is of the trace's GPU model. *unseen-device*: a
calibration of another GPU moved to the trace's by the datasheets' peaks
(:func:`infer_opt.trace.calibrate.scale_to_device`), asked for with ``unseen_device=True``;
without it a calibration of another device (or another dtype, or a CPU calibration) is refused,
naming both. Pure: numpy and the standard library.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from infer_opt.cost_models import op_model
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results.calibration import CalibrationResult
from infer_opt.results.predict import CalibrationRef
from infer_opt.results.validate import SMALL_OP_S
from infer_opt.results.validate_trace import (
    TIER_TARGET,
    TIER_UNSEEN,
    FamilyError,
    TraceOp,
    TraceStep,
    TraceValidateResult,
)
from infer_opt.trace import calibrate as tc
from infer_opt.trace.devices import DeviceSpec
from infer_opt.trace.events import SYNC, TraceEvents, fingerprint

OPTION = "--against"
WORST_OPS = 10
#: a ``ProfilerStep``'s kind of row (the whole trace's: ``trace``)
STEP_MODE = "profiler"
#: the trace's name is cut to this many characters (the parity plot's title)
NAME_CHARS = 40


def short_name(path: str) -> str:
    """The trace file's name without ``.json``/``.json.gz``, cut to :data:`NAME_CHARS`."""
    stem = Path(path).name.removesuffix(".gz").removesuffix(".json")
    return stem if len(stem) <= NAME_CHARS else stem[: NAME_CHARS - 1] + "…"


def _check_calibration(
    calibration: CalibrationResult, device: tc.TraceDevice, source: str, unseen: bool
) -> CalibrationResult:
    """The calibration to predict with: refused when it is a CPU one, of another dtype, or of
    another device (unless ``unseen``: then scaled to the trace's device)."""
    path = Path(device.path).name
    if calibration.device == "cpu" or not str(calibration.device).startswith("cuda"):
        raise InvalidInput(
            "--calibration",
            source,
            f"is a calibration of {calibration.device_name or 'the CPU'} ({calibration.device}); {path} ran "
            f"on {device.spec.name}: give one made by calibrate --from-trace on traces of that GPU",
        )
    wanted = tc.TORCH_DTYPES.get(device.dtype, device.dtype)
    if calibration.dtype != wanted:
        raise InvalidInput(
            OPTION,
            device.path,
            f"is a {wanted} trace and the calibration ({source}) is for {calibration.dtype}: give a "
            f"{wanted} calibration",
        )
    if calibration.device_name == device.spec.name:
        if unseen:  # (asked to scale to the GPU it is of: nothing would be scaled)
            raise InvalidInput(
                "--unseen-device",
                "given",
                f"the calibration ({source}) is of {device.spec.name}, the GPU {path} ran on: nothing to "
                "scale; leave --unseen-device out",
            )
        return calibration
    if not unseen:
        raise InvalidInput(
            OPTION,
            device.path,
            f"ran on {device.spec.name} and the calibration ({source}) is of {calibration.device_name}: "
            "give a calibration of that GPU, or --unseen-device to scale this one by datasheet peaks",
        )
    from infer_opt.trace.devices import by_name

    try:
        by_name(calibration.device_name)
    except InvalidInput:
        raise InvalidInput(
            "--calibration", source, f"{calibration.device_name} has no datasheet entry to scale from"
        ) from None
    return tc.scale_to_device(calibration, device.spec)


def predict_instance(model: op_model.OpModel, inst: tc.OpInstance, dtype: str) -> op_model.OpEstimate:
    """The model's time for one instance: its own family (with a ``:dtype`` suffix when not the
    calibration's), else the plain family, else the model's fallbacks and device roofline."""
    keyed = tc.family_key(inst.family, inst.causal, inst.dtype, dtype)
    plain = tc.family_key(inst.family, inst.causal, "", dtype)
    family = next((f for f in (keyed, plain) if f"{f}@hot" in model.families), plain)
    query = op_model.OpQuery(inst.name, family, inst.features, inst.flops, inst.bytes)
    return model.estimate(query)


def _ops(instances: Sequence[tc.OpInstance], predicted: Sequence[op_model.OpEstimate]) -> list[TraceOp]:
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, inst in enumerate(instances):
        groups.setdefault((inst.name, inst.shapes, inst.dtype), []).append(i)
    out = []
    for (name, shapes, dtype), idx in groups.items():
        measured = float(np.median([instances[i].time_s for i in idx]))
        est = predicted[idx[0]]
        family = tc.family_key(instances[idx[0]].family, instances[idx[0]].causal, "", "")
        out.append(
            TraceOp(
                name, shapes, dtype, family, len(idx), measured, est.time_s,
                (est.time_s - measured) / measured, est.source, est.used, est.extrapolated,
            )
        )  # fmt: skip
    out.sort(key=lambda o: (-o.measured_s * o.calls, o.name, o.shapes))
    return out


def _steps(
    events: TraceEvents,
    instances: Sequence[tc.OpInstance],
    predicted: Sequence[op_model.OpEstimate],
    floor_s: float,
) -> list[TraceStep]:
    gpu = events.gpu
    events_in = gpu.kind != SYNC
    step_of = gpu.step if events.steps and (gpu.step[events_in] >= 0).any() else np.zeros(len(gpu), np.int32)
    mode = STEP_MODE if events.steps and (gpu.step[events_in] >= 0).any() else "trace"
    modelled_events = sum(i.kernels for i in instances)
    out = []
    for s in sorted({int(v) for v in step_of[events_in] if v >= 0}):
        mask = events_in & (step_of == s)
        measured = math.fsum(gpu.dur_us[mask]) / 1e6
        mine = [k for k, inst in enumerate(instances) if (inst.step if mode == STEP_MODE else 0) == s]
        modelled = math.fsum(instances[k].time_s for k in mine)
        covered = sum(instances[k].kernels for k in mine) if mode == STEP_MODE else modelled_events
        rest = max(int(mask.sum()) - covered, 0)
        pred = math.fsum(predicted[k].time_s for k in mine) + rest * floor_s
        if measured <= 0:
            continue
        number = events.steps[s].number if mode == STEP_MODE else 0
        out.append(
            TraceStep(
                mode,
                number,
                measured,
                pred,
                (pred - measured) / measured,
                modelled / measured,
                int(mask.sum()),
            )
        )
    return out


def _families(ops: Sequence[TraceOp]) -> list[FamilyError]:
    by: dict[str, list[TraceOp]] = {}
    for o in ops:
        if o.measured_s >= SMALL_OP_S:
            by.setdefault(o.family, []).append(o)
    out = [
        FamilyError(
            f,
            len(os_),
            float(np.mean([abs(o.rel_error) for o in os_])),
            math.fsum(o.measured_s * o.calls for o in os_),
            math.fsum(o.predicted_s * o.calls for o in os_),
        )
        for f, os_ in by.items()
    ]
    out.sort(key=lambda f: (-f.measured_s, f.family))
    return out


def validate_against(
    events: TraceEvents,
    calibration: CalibrationResult,
    *,
    calibration_source: str,
    unseen_device: bool = False,
    causal: str = "half",
    gpu: DeviceSpec | None = None,
) -> TraceValidateResult:
    """Predict every op instance of ``events`` from its shapes and compare (module docstring);
    ``gpu`` (``--device``) names the GPU of a trace that does not."""
    started = time.perf_counter()
    device = tc.trace_device(events, causal=causal, option=OPTION, purpose="validate against", device=gpu)
    used = _check_calibration(calibration, device, calibration_source, unseen_device)
    tier = TIER_TARGET if used is calibration else TIER_UNSEEN
    model = tc.TraceOpModel(used)
    short = tc.SHORT_DTYPES.get(used.dtype, used.dtype)
    instances = device.instances
    predicted = [predict_instance(model, inst, short) for inst in instances]
    ops = _ops(instances, predicted)
    large = [o for o in ops if o.measured_s >= SMALL_OP_S]
    small = [o for o in ops if o.measured_s < SMALL_OP_S]
    summary = op_model.error_stats([o.predicted_s for o in large], [o.measured_s for o in large])
    small_summary = op_model.error_stats([o.predicted_s for o in small], [o.measured_s for o in small])
    floor = used.launch_floor_s or (used.roofline.launch_overhead_s if used.roofline else 0.0)
    steps = _steps(events, instances, predicted, floor)
    gpu = events.gpu
    total = math.fsum(gpu.dur_us[gpu.kind != SYNC]) / 1e6
    weight = math.fsum(o.measured_s * o.calls for o in large)
    ref = CalibrationRef(
        calibration_source,
        used.device_name,
        used.dtype,
        used.threads,
        used.device_key,
        used.grid,
        used.complete,
    )
    return TraceValidateResult(
        model=short_name(events.path),
        trace=events.path,
        device_name=device.spec.name,
        dtype=used.dtype,
        tier=tier,
        calibration=ref,
        points=tuple(steps),
        step_mape=float(np.mean([abs(s.rel_error) for s in steps])) if steps else None,
        op_mape=summary.mape,
        op_p90_abs_rel_error=summary.p90_abs_rel_error,
        op_count=summary.n,
        small_op_mape=small_summary.mape,
        small_op_count=small_summary.n,
        ops_summary=summary,
        families=tuple(_families(ops)),
        worst_ops=tuple(sorted(large, key=lambda o: -abs(o.rel_error))[:WORST_OPS]),
        ops=tuple(ops),
        op_weighted_error=(
            math.fsum(abs(o.predicted_s - o.measured_s) * o.calls for o in large) / weight
            if weight > 0
            else None
        ),
        modelled_share=math.fsum(i.time_s for i in instances) / total if total > 0 else 0.0,
        predicted_gap_s=used.kernel_gap_s * max(int((gpu.kind != SYNC).sum()) - 1, 0),
        wall_s=time.perf_counter() - started,
        warnings=_fitted_notice(events, calibration),
        in_calibration=bool(_fitted_notice(events, calibration)),
    )


def _fitted_notice(events: TraceEvents, calibration: CalibrationResult) -> tuple[Notice, ...]:
    """A notice when the trace is among the calibration's own (not held out): by its events'
    fingerprint (any name, folder or compression); by file name for a calibration that
    recorded none (made before it did)."""
    name = Path(events.path).name
    if calibration.trace_ids:
        if fingerprint(events) not in calibration.trace_ids:
            return ()
    elif name not in calibration.traces:
        return ()
    return (Notice("validate_trace_in_calibration", {"trace": name}),)


def source_label(calibration: CalibrationResult, path: str) -> str:
    """What ``calibration.source`` says of a calibration file: its own source and the file."""
    return f"{path} ({calibration.source})" if calibration.source else path
