"""``infer-opt predict``: a model step's time from the device's operator calibration, without
running the model (docs/prediction.md).

1. The step's ops are recorded on fake tensors (:mod:`infer_opt.profilers.meta_record`): names,
   shapes, FLOPs, bytes, families, the memory each touches, module calls.
2. Each op's cache state comes from the LRU rule over the recorded sequence
   (:func:`infer_opt.cost_models.op_model.reuse_distances`: bytes touched since its weights,
   keys and values were last used), which places it between the calibrated cache states.
3. :func:`infer_opt.cost_models.op_model.predict_step` gives each op's predicted time and the
   host term; ops are grouped as ``profile`` groups them (op and shapes), and the categories get
   the same Amdahl table — labelled predicted, with the calibration's uncertainty band.
4. ``generate``: the ops are split by token; TTFT is the prompt's segment (prefill and the first
   greedy pick), TPOT the mean of the others.
5. A sweep (``batch``, ``seq_len`` or ``context``) repeats 1–3 per value; for decode it reports
   where the matmuls' arithmetic intensity ``F/Q`` reaches the ridge ``R_f/b_f`` of the matmul
   family that runs them — where the step turns from bandwidth- to compute-bound.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from infer_opt import steps
from infer_opt.cost_models import op_model, profile_amdahl
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.profilers import meta_record, models
from infer_opt.results.calibration import CalibrationResult, DeviceRoofline
from infer_opt.results.comm import CommResult
from infer_opt.results.predict import (
    CalibrationRef,
    PredictedCategory,
    PredictedOp,
    PredictResult,
    SweepPoint,
    TPPrediction,
)

if TYPE_CHECKING:
    from infer_opt.requests import PredictRequest

Progress = Callable[[int, int, str], None]
SWEEP_PARAMS = ("batch", "seq_len", "context")
#: a prediction whose extrapolated ops take more than this share of the op time is warned about
EXTRAPOLATED_WARNING = 0.25
MATMUL_FAMILIES = ("gemm.", "bmm.")


def model_for(calibration: CalibrationResult) -> op_model.OpModel:
    """The CPU's operator model, or for a calibration built from GPU traces the GPU one
    (:func:`infer_opt.trace.gpu_predict.model_for`)."""
    from infer_opt.trace.gpu_predict import model_for as gpu_model_for

    return gpu_model_for(calibration)


# ---------------------------------------------------------------------------- one step


def queries(recorded: meta_record.RecordedStep) -> list[op_model.OpQuery]:
    """The recorded calls as the op model's queries, each with its main operand's reuse distance
    and the bytes touched since the previous call of the same op (its dispatch context)."""
    touches = [s.touches for s in recorded.signatures]
    reuse = op_model.reuse_distances(touches)
    context = op_model.context_distances([call.name for call in recorded.calls], touches)
    counts = recorded.host_counts if len(recorded.host_counts) == len(recorded.calls) else None
    return [
        op_model.OpQuery(
            call.name,
            sig.family,
            tuple(float(v) for v in sig.features),
            float(call.flops),
            sig.work_bytes,
            distance,
            main_bytes,
            since_same_op,
            counts[i] if counts is not None else None,
        )
        for i, (call, sig, (distance, main_bytes), since_same_op) in enumerate(
            zip(recorded.calls, recorded.signatures, reuse, context, strict=True)
        )
    ]


def _segments(
    model: op_model.OpModel, qs: Sequence[op_model.OpQuery], recorded: meta_record.RecordedStep
) -> list[op_model.StepEstimate]:
    return [op_model.predict_step(model, qs[a:b], modules) for a, b, modules in recorded.segments]


def _group_ops(
    recorded: meta_record.RecordedStep,
    qs: Sequence[op_model.OpQuery],
    estimates: Sequence[op_model.OpEstimate],
    step_s: float,
    names: Sequence[str] | None = None,
) -> list[PredictedOp]:
    """Calls grouped by op (``names``: the device's name of each call, e.g. a GPU's attention
    backend for a recorded CPU attention) and shapes."""
    groups: dict[tuple[str, tuple[tuple[int, ...], ...]], list[int]] = defaultdict(list)
    for i, call in enumerate(recorded.calls):
        groups[(names[i] if names is not None else call.name, call.shapes)].append(i)
    out = []
    for (name, shapes), idx in groups.items():
        first, est = recorded.calls[idx[0]], estimates[idx[0]]
        t = math.fsum(estimates[i].time_s for i in idx)
        out.append(
            PredictedOp(
                name=name,
                shapes=shapes,
                category=first.category,
                family=qs[idx[0]].family,
                calls=len(idx),
                predicted_s=t,
                share=t / step_s if step_s > 0 else 0.0,
                flops=float(sum(recorded.calls[i].flops for i in idx)),
                bytes=float(sum(recorded.calls[i].bytes for i in idx)),
                bound=est.bound,
                extrapolated=any(estimates[i].extrapolated for i in idx),
                source=est.source,
                state=est.state,
                rel_uncertainty=est.rel_uncertainty,
            )
        )
    return sorted(out, key=lambda o: (-o.predicted_s, o.name))


def _categories(
    recorded: meta_record.RecordedStep,
    estimates: Sequence[op_model.OpEstimate],
    roofline: DeviceRoofline | None,
    step_s: float,
) -> list[PredictedCategory]:
    by: dict[str, list[int]] = defaultdict(list)
    for i, call in enumerate(recorded.calls):
        by[call.category].append(i)
    times, bounds = {}, {}
    for cat, idx in by.items():
        times[cat] = math.fsum(estimates[i].time_s for i in idx)
        bound = 0.0
        for i in idx:
            at_roof = (
                roofline.time(recorded.calls[i].flops, recorded.calls[i].bytes)
                if roofline
                else estimates[i].time_s
            )
            bound += profile_amdahl.capped_bound(estimates[i].time_s, at_roof)
        bounds[cat] = min(bound, times[cat])
    amdahl = profile_amdahl.profile_amdahl(
        [profile_amdahl.CategoryTime(c, times[c], bounds[c]) for c in by], step_s
    )
    return [
        PredictedCategory(
            category=o.category,
            time_s=o.time_s,
            fraction=o.fraction,
            calls=len(by[o.category]),
            flops=float(sum(recorded.calls[i].flops for i in by[o.category])),
            bytes=float(sum(recorded.calls[i].bytes for i in by[o.category])),
            bound_time_s=o.bound_time_s,
            part_speedup=o.part_speedup,
            ceiling_speedup=o.ceiling_speedup,
            roofline_speedup=o.roofline_speedup,
        )
        for o in amdahl.opportunities
    ]


@dataclass(frozen=True)
class StepPrediction:
    """A recorded step and its prediction (what ``predict`` and ``validate`` share)."""

    recorded: meta_record.RecordedStep
    queries: tuple[op_model.OpQuery, ...]
    segments: tuple[op_model.StepEstimate, ...]
    record_s: float

    @property
    def estimates(self) -> tuple[op_model.OpEstimate, ...]:
        return tuple(e for seg in self.segments for e in seg.ops)

    @property
    def step_time_s(self) -> float:
        return math.fsum(s.step_time_s for s in self.segments)

    @property
    def host_s(self) -> float:
        return math.fsum(s.host_s for s in self.segments)

    @property
    def replays(self) -> tuple[Any, ...]:
        """Each segment's replayed step (empty when the steps are serial sums)."""
        return tuple(s.replay for s in self.segments if s.replay is not None)

    @property
    def critical_s(self) -> tuple[float, float] | None:
        """``(host, device)`` of the replayed critical paths, summed over segments (None: not
        replayed)."""
        replays = self.replays
        if not replays or len(replays) != len(self.segments):
            return None
        return math.fsum(r.host_critical_s for r in replays), math.fsum(r.device_critical_s for r in replays)

    @property
    def rel_uncertainty(self) -> float:
        total = self.step_time_s
        return (
            math.fsum(s.step_time_s * s.rel_uncertainty for s in self.segments) / total if total > 0 else 0.0
        )


def predict_recorded(step: meta_record.StepSpec, model: op_model.OpModel, *, tp: int = 1) -> StepPrediction:
    """Record one step on fake tensors (claiming ``step.device``: its kernels are chosen) and
    predict it; ``tp`` > 1: one rank's compute-only tensor-parallel shard."""
    start = time.perf_counter()
    recorded = meta_record.record_step(step, tp=tp)
    elapsed = time.perf_counter() - start
    qs = queries(recorded)
    return StepPrediction(recorded, tuple(qs), tuple(_segments(model, qs, recorded)), elapsed)


def matmul_intensity(prediction: StepPrediction) -> float | None:
    """F/Q of the step's matmul calls (None without matmuls)."""
    flops = nbytes = 0.0
    for call, q in zip(prediction.recorded.calls, prediction.queries, strict=True):
        if q.family.startswith(MATMUL_FAMILIES):
            flops += call.flops
            nbytes += call.bytes
    return flops / nbytes if nbytes > 0 else None


def matmul_ridge(prediction: StepPrediction, model: op_model.OpModel) -> float | None:
    """``R_f / b_f`` of the matmul family with the most predicted time in the step (None when the
    step has no calibrated matmul family)."""
    time_by: dict[str, float] = defaultdict(float)
    for q, e in zip(prediction.queries, prediction.estimates, strict=True):
        if q.family.startswith(MATMUL_FAMILIES) and e.used:
            time_by[e.used] += e.time_s
    if not time_by:
        return None
    family = model.families[max(time_by, key=time_by.__getitem__)]
    if not (math.isfinite(family.rate_flops) and math.isfinite(family.bandwidth_bytes_per_s)):
        return None
    return family.rate_flops / family.bandwidth_bytes_per_s


def recording_device(calibration: CalibrationResult) -> tuple[str, list[Notice]]:
    """The device the fake tensors claim: the calibration's kind where this torch can pick that
    device's kernels, else the CPU (with a notice: e.g. a GPU's fused attention differs)."""
    if calibration.device.startswith("cuda"):
        if torch.cuda.is_available():
            return "cuda", []
        return "cpu", [Notice("recorded_for_cpu_kernels", {"device": calibration.device_name})]
    return "cpu", []


# ---------------------------------------------------------------------------- the result


def calibration_ref(calibration: CalibrationResult, source: str) -> CalibrationRef:
    return CalibrationRef(
        source=source,
        device_name=calibration.device_name,
        dtype=calibration.dtype,
        threads=calibration.threads,
        device_key=calibration.device_key,
        grid=calibration.grid,
        complete=calibration.complete,
    )


def _notices(prediction: StepPrediction, calibration: CalibrationResult, share: float) -> list[Notice]:
    out = list(prediction.recorded.notices)
    if share > EXTRAPOLATED_WARNING:
        out.append(Notice("prediction_extrapolated", {"share": share}))
    return out + calibration_notices(calibration)


#: the calibration grid that is a smoke test (a few shapes per group), not one to predict with
SMOKE_GRID = "tiny"


def calibration_notices(calibration: CalibrationResult) -> list[Notice]:
    """What a prediction (or a validation) should say of the calibration it used: incomplete,
    without the host term, of the smoke-test grid, noisy."""
    out = []
    if not calibration.complete:
        out.append(Notice("calibration_incomplete", {"groups": list(calibration.groups_done)}))
    if calibration.host is None and calibration.grid != "trace":  # a trace's: the kernel gap
        out.append(Notice("calibration_no_host_term"))
    if calibration.grid == SMOKE_GRID:
        out.append(Notice("calibration_smoke_grid", {"grid": calibration.grid}))
    return out + op_model.noise_notices(calibration)


@dataclass(frozen=True)
class RunCalibration:
    """The calibration a prediction (or a validation) uses, where it came from, what the cache
    lookup found wrong on the way, and the dtype to record the model in."""

    calibration: CalibrationResult
    source: str
    notices: tuple[Notice, ...]
    dtype: torch.dtype


def _cached_calibration(device: Any, dtype: Any, threads: int | None) -> tuple[Any, str, tuple[Notice, ...]]:
    """The calibration cached for this thread count; without ``--threads``, when there is none
    but one is cached for exactly one other count (``calibrate --threads 1``, then a bare
    ``predict``), that one, torch set to its count and a notice saying so."""
    from infer_opt.profilers import calibration as cal
    from infer_opt.profilers import device as devices

    try:
        return cal.resolve_calibration(device, dtype)
    except InvalidInput:
        counts = cal.cached_thread_counts(device, dtype) if threads is None else []
        if len(counts) != 1:
            raise
    devices.set_threads(counts[0])
    found, source, notices = cal.resolve_calibration(device, dtype)
    return found, source, (*notices, Notice("calibration_threads_used", {"threads": counts[0]}))


def calibration_for_run(
    calibration_file: Path | None,
    dtype: str,
    threads: int | None,
    device: str = "auto",
    *,
    trace_ok: bool = False,
) -> RunCalibration:
    """Set the CPU ``threads`` (when given), then take the calibration file given, else the one
    cached for ``device`` (default: the CPU), this dtype, thread count and matmul precision; a
    ``dtype`` that is not the calibration's is an error; so is a calibration built from GPU traces
    unless ``trace_ok`` (``predict`` takes one, ``validate MODEL`` measures this machine)."""
    from infer_opt.profilers import calibration as cal
    from infer_opt.profilers import device as devices

    if threads is not None:
        devices.set_threads(threads)
    dev = devices.resolve_device(device)
    if calibration_file is not None:
        found, source, notices = cal.resolve_calibration(dev, "float32", calibration_file)
    else:
        found, source, notices = _cached_calibration(dev, devices.parse_dtype(dtype, dev), threads)
    if found.dtype not in devices.DTYPE_ALIASES.values():  # (an fp8 trace's, or a word torch lacks)
        raise InvalidInput(
            "--calibration",
            source,
            f"is for {found.dtype or 'no dtype (its traces name none)'}; a model's step is predicted in "
            f"{devices.DTYPE_CHOICES}: "
            "calibrate from traces (or a run) in one of those",
        )
    if found.from_traces and not trace_ok:
        raise InvalidInput(
            "--calibration",
            source,
            f"was built from GPU traces ({found.source}): its families are the GPU kernels' and "
            "a model's step measured here would be this CPU's; use it with validate --against TRACE",
        )
    wanted = found.dtype if dtype == "auto" else devices.dtype_name(devices.parse_dtype(dtype, dev))
    if wanted != found.dtype:
        raise InvalidInput(
            "dtype", dtype, f"the calibration is for {found.dtype}; calibrate for {wanted} first"
        )
    return RunCalibration(found, source, tuple(notices), getattr(torch, found.dtype))


def _step_fields(prediction: StepPrediction, model: op_model.OpModel) -> dict[str, Any]:
    """The result's fields for one predicted step."""
    recorded = prediction.recorded
    estimates = prediction.estimates
    step = prediction.step_time_s
    op_time = math.fsum(e.time_s for e in estimates)
    extrapolated = math.fsum(e.time_s for e in estimates if e.extrapolated)
    flops = float(sum(c.flops for c in recorded.calls))
    segments = prediction.segments
    generate = recorded.mode == "generate" and len(segments) > 1
    critical = prediction.critical_s
    op_name = getattr(model, "op_name", None)
    names = [op_name(q) for q in prediction.queries] if op_name is not None else None
    return {
        "bound": None if critical is None else ("host" if critical[0] > critical[1] else "device"),
        "host_critical_s": None if critical is None else critical[0],
        "device_critical_s": None if critical is None else critical[1],
        "serial_step_s": None if critical is None else math.fsum(s.serial_s for s in segments),
        "tokens_per_step": recorded.tokens,
        "step_time_s": step,
        "step_low_s": step * (1 - prediction.rel_uncertainty),
        "step_high_s": step * (1 + prediction.rel_uncertainty),
        "rel_uncertainty": prediction.rel_uncertainty,
        "tokens_per_s": recorded.tokens / step if recorded.tokens and step > 0 else None,
        "op_time_s": op_time,
        "host_s": prediction.host_s,
        "n_ops": len(recorded.calls),
        "module_calls": recorded.module_calls,
        "flops": flops,
        "bytes": float(sum(c.bytes for c in recorded.calls)),
        "flops_analytic": recorded.flops_analytic,
        "flops_vs_analytic": flops / recorded.flops_analytic - 1 if recorded.flops_analytic else None,
        "extrapolated_share": extrapolated / op_time if op_time > 0 else 0.0,
        "ops": tuple(_group_ops(recorded, prediction.queries, estimates, step, names)),
        "categories": tuple(_categories(recorded, estimates, model.calibration.roofline, step)),
        "ttft_s": segments[0].step_time_s if generate else None,
        "tpot_s": math.fsum(s.step_time_s for s in segments[1:]) / (len(segments) - 1) if generate else None,
    }


def sweep_point(param: str, value: int, prediction: StepPrediction, ridge: float | None) -> SweepPoint:
    recorded = prediction.recorded
    intensity = matmul_intensity(prediction)
    step = prediction.step_time_s
    compute = intensity is not None and ridge is not None and intensity >= ridge
    return SweepPoint(
        value=value,
        batch=recorded.batch,
        seq_len=recorded.seq_len,
        context=value if param == "context" else None,
        step_time_s=step,
        tokens_per_s=recorded.tokens / step if recorded.tokens and step > 0 else None,
        rel_uncertainty=prediction.rel_uncertainty,
        matmul_intensity=intensity,
        bound="compute" if compute else "bandwidth",
        flops=float(sum(c.flops for c in recorded.calls)),
        bytes=float(sum(c.bytes for c in recorded.calls)),
    )


def parse_sweep(text: str, high: int | None = None) -> tuple[str, tuple[int, ...]]:
    """``batch=1,2,4`` (or ``seq-len=``, ``context=``) -> ("batch", (1, 2, 4)); each value at
    most ``high``, an empty item refused."""
    from infer_opt.units import parse_int_list

    name, sep, values = text.partition("=")
    param = name.strip().replace("-", "_")
    if not sep or param not in SWEEP_PARAMS:
        raise InvalidInput("sweep", text, "expected batch=V1,V2,..., seq-len=... or context=...")
    if not values.strip():
        raise InvalidInput("sweep", text, "needs at least one value")
    low = 0 if param == "context" else 1
    parsed = tuple(parse_int_list(values, option="sweep", low=low, high=high))
    if list(parsed) != sorted(set(parsed)):
        raise InvalidInput("sweep", text, "values must be distinct and increasing")
    return param, parsed


def check_param_modes(param: str, values: Sequence[int], modes: Sequence[str], option: str) -> None:
    """Refuse a sweep (grid) parameter that changes none of the step ``modes``: a decode step's
    length is its KV cache (``context``), a prefill's or generate's its prompt (``seq_len``) —
    every value would predict (measure) the same step."""
    if steps.reads(param, modes):
        return
    name = param.replace("_", "-")
    raise InvalidInput(
        option,
        f"{name}={','.join(str(v) for v in values)}",
        f"{name} does not change a {' or '.join(modes)} step ({steps.not_read(param, '{}=…')})",
    )


def run(
    request: PredictRequest,
    *,
    progress: Callable[[int, int, str], None] | None = None,
    noticed: Callable[[Notice], None] = lambda notice: None,
) -> PredictResult:
    """``infer-opt predict``: the request's calibration found (what finding it noticed goes to
    ``noticed``), a ``--threads`` or ``--device`` it would ignore refused, its step predicted
    (over ``tp`` ranks with their comm sweep)."""
    from infer_opt.profilers.comm import comm_for

    r = request
    overrides = models.parse_hf_overrides(list(r.hf_config))
    if request.comm is not None and request.tp == 1:
        needs = "prices the collectives of --tp N > 1; give --tp N or drop --comm"
        raise InvalidInput("--comm", str(request.comm), needs)
    found = calibration_for_run(r.calibration, r.dtype, r.threads, r.device, trace_ok=True)
    for notice in found.notices:
        noticed(notice)
    if request.calibration is not None:
        _file_ignores_nothing(found.calibration, request)
    gpu = found.calibration.device.startswith("cuda")
    comm = None if request.tp == 1 else comm_for(request.tp, "cuda" if gpu else "cpu", request.comm)
    return predict(
        r.model, found.calibration, calibration_source=found.source, **r.shape(), dtype=found.dtype,
        hf_overrides=overrides, sweep=r.sweep, progress=progress, tp=r.tp, comm=comm,
    )  # fmt: skip


def _file_ignores_nothing(found: Any, request: PredictRequest) -> None:
    """A calibration file predicts for the device and thread count it was made on: a
    ``--threads`` that differs (any, for a GPU's) or a ``--device`` of another kind (cpu for a
    GPU calibration, cuda for a CPU one) would be ignored, so they are refused."""
    given, threads, device = request.calibration, request.threads, request.device
    gpu = str(found.device).startswith("cuda")
    if threads is not None and not gpu and found.threads != threads:
        raise InvalidInput(
            "--threads",
            threads,
            f"{given} was calibrated at {found.threads} thread(s), and a prediction is for its thread count: "
            f"drop --threads, or calibrate at --threads {threads}",
        )
    if gpu and threads is not None:
        raise InvalidInput(
            "--threads",
            threads,
            f"{given} is a calibration of {found.device_name or 'a GPU'}: the prediction is for that GPU, "
            "whose time no CPU thread count changes; drop --threads",
        )
    if device != "auto" and device.startswith("cuda") != gpu:
        where = f"{found.device_name or 'a GPU'} ({found.device})" if gpu else f"the CPU ({found.device})"
        raise InvalidInput(
            "--device",
            device,
            f"{given} is a calibration of {where}: the prediction is for it; drop --device",
        )


def predict(
    spec: str,
    calibration: CalibrationResult,
    *,
    calibration_source: str = "",
    mode: str = "prefill",
    batch: int = 1,
    seq_len: int = 128,
    context: int = 128,
    new_tokens: int = 32,
    dtype: torch.dtype = torch.float32,
    hf_overrides: Mapping[str, Any] | None = None,
    sweep: tuple[str, Sequence[int]] | None = None,
    progress: Progress | None = None,
    tp: int = 1,
    comm: CommResult | None = None,
) -> PredictResult:
    """Predict one step of ``spec`` (module docstring); with ``sweep`` also each sweep value;
    with ``tp`` > 1 and the ``comm`` sweep of that many ranks, the tensor-parallel step."""
    if sweep:
        check_param_modes(*sweep, (mode,), "sweep")
        for param, keyword in models.factory_ignores(spec, [sweep[0]]):
            raise InvalidInput(
                "sweep",
                f"{param.replace('_', '-')}={','.join(map(str, sweep[1]))}",
                f"the factory {spec} takes no {keyword}: every value would predict the same step",
            )
    model = model_for(calibration)
    device, device_notices = recording_device(calibration)
    device_notices += getattr(model, "notices", list)()
    step = meta_record.StepSpec(
        spec, mode, batch, seq_len, context, new_tokens, dtype, hf_overrides, device,
        count_host=getattr(model, "counts_host", False),
    )  # fmt: skip
    total = 1 + (len(sweep[1]) if sweep else 0)
    if progress is not None:
        progress(0, total, "recording the step on fake tensors")
    base = predict_recorded(step, model)
    fields = _step_fields(base, model)
    points: list[SweepPoint] = []
    ridge = matmul_ridge(base, model)
    if sweep:
        param, values = sweep
        for k, value in enumerate(values):
            if progress is not None:
                progress(1 + k, total, f"{param} = {value}")
            p = predict_recorded(replace(step, **{param: value}), model)
            points.append(sweep_point(param, value, p, ridge))
    crossing = None
    if points and ridge is not None and sweep is not None:
        measured = [(p.value, p.matmul_intensity) for p in points if p.matmul_intensity]
        crossing = (
            op_model.ridge_crossing([v for v, _ in measured], [i for _, i in measured], ridge)
            if measured
            else None
        )
    recorded = base.recorded
    return PredictResult(
        model=recorded.model,
        model_source=recorded.model_source,
        description=recorded.description,
        n_params=recorded.n_params,
        mode=mode,
        dtype=recorded.dtype,
        batch=recorded.batch,
        seq_len=recorded.seq_len if mode != "decode" else None,
        context=context if mode == "decode" else None,
        new_tokens=new_tokens if mode == "generate" else None,
        calibration=calibration_ref(calibration, calibration_source),
        recorded_by=recorded.how,
        record_s=base.record_s,
        sweep=sweep[0] if sweep else None,
        points=tuple(points),
        compute_bound_from=crossing,
        ridge_point=ridge,
        warnings=(*device_notices, *_notices(base, calibration, fields["extrapolated_share"])),
        tensor_parallel=None if tp == 1 else tensor_parallel(step, model, base, tp=tp, comm=comm),
        **fields,
    )


def tensor_parallel(
    step: meta_record.StepSpec,
    model: op_model.OpModel,
    base: StepPrediction,
    *,
    tp: int,
    comm: CommResult | None,
) -> TPPrediction:
    """``max_r compute_r + Σ t(S)``: one rank's shard recorded and predicted like the whole model
    (the Megatron shards have equal shapes: one rank stands for all), the collectives of the
    split priced with ``comm``'s α-β fits, and the speedup over ``base`` (one device)."""
    from infer_opt.profilers import tensor_parallel_predict

    if comm is None:
        raise InvalidInput(
            "comm", "none", f"--tp {tp} needs a comm sweep over {tp} ranks (infer-opt comm --nproc {tp})"
        )
    shard = predict_recorded(step, model, tp=tp)
    config = models.BUILTIN_CONFIGS[models.ALIASES.get(step.spec, step.spec)]
    itemsize = torch.empty((), dtype=step.dtype).element_size()
    return tensor_parallel_predict.predict_tp(
        config, tp=tp, mode=step.mode, batch=step.batch, seq_len=step.seq_len,
        new_tokens=step.new_tokens, dtype_bytes=itemsize, compute_per_rank_s=[shard.step_time_s] * tp,
        comm=comm, baseline_step_s=base.step_time_s,
    )  # fmt: skip
