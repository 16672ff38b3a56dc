"""``infer-opt validate``: how far the calibrated predictor is from measurement (docs/prediction.md).

For every point of a shape grid (batch × sequence length × context, per mode) the step is

* **measured** exactly as ``profile`` measures it
  (:func:`infer_opt.profilers.model_profile.profile_model`: the uninstrumented step time, per-op
  times under ``torch.profiler``, the unattributed host time), and
* **predicted** from the calibration (:func:`infer_opt.profilers.predict.predict_recorded`, ops
  recorded on fake tensors — not from the measured run).

The error is reported honestly, as absolute relative errors ``|t̂ − t| / t`` (signed errors
cancel): per step the MAPE and p90, prefill and decode apart; per operator (an op with one set
of shapes, per call) the same over ops of at least :data:`SMALL_OP_S` measured, and the MAPE of
the shorter ones as their own bucket (the launch floor rules them). Ops are matched by name and
shapes; the worst are listed. A point whose ops mostly sit on measured grid shapes is flagged:
validation shapes should lie between them. Before each point the speed probes (a square matmul
and a dispatch-bound small one, :mod:`infer_opt.profilers.speed_probe`) are timed; against their
times in the calibration they say how far the machine's own speed moved between calibrating and
measuring, which every step error includes — a large model's as the matmul moved, a small
model's (mostly dispatch) as the small one did.

With several passes (``passes``) the whole grid is measured again, pass after pass, so that a
point's measurements lie minutes apart as a prediction and its calibration do. A point is then
compared at the median of its passes, and the passes are compared with each other
(:func:`pass_noise`): how far the same step, the same operator and the host term moved between
two measurements of them — the noise floor under which no prediction error says anything.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any

import torch

from infer_opt.cost_models import op_model
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.profilers import meta_record, model_profile, models, speed_probe
from infer_opt.profilers import predict as pr
from infer_opt.profilers.roofline_sweep import ResolvedFit
from infer_opt.requests import ValidateRequest
from infer_opt.results.calibration import CalibrationResult
from infer_opt.results.profile import ProfileResult
from infer_opt.results.roofline import RooflineFit
from infer_opt.results.validate import (
    NOISE_HOST,
    NOISE_OPS,
    NOISE_SMALL_OPS,
    SMALL_OP_S,
    ErrorSummary,
    OpComparison,
    ValidatePoint,
    ValidateResult,
)
from infer_opt.steps import Shape, StepSettings

Progress = Callable[[int, int, str], None]
#: a point whose predicted op time is more than this share on measured grid shapes is flagged
ON_GRID_WARNING = 0.5
WORST_OPS = 10
GRID_PARAMS = ("batch", "seq_len", "context")


def parse_grid(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``["batch=1,4", "seq-len=64,256"]`` -> {"batch": (1, 4), "seq_len": (64, 256)}."""
    out: dict[str, tuple[int, ...]] = {}
    for item in items:
        param, values = pr.parse_sweep(item)
        if param in out:
            raise InvalidInput("grid", item, f"{param} is given twice")
        out[param] = tuple(values)
    return out


def grid_points(
    modes: Sequence[str], grid: Mapping[str, Sequence[int]], defaults: Mapping[str, int]
) -> list[tuple[str, int, int, int]]:
    """``(mode, batch, seq_len, context)`` per point: the product of the grid's values (defaults
    for what it does not name); decode ignores the sequence length, prefill the context."""
    values = {p: tuple(grid.get(p, (defaults[p],))) for p in GRID_PARAMS}
    out: list[tuple[str, int, int, int]] = []
    for mode in modes:
        for batch, seq_len, context in itertools.product(
            values["batch"], values["seq_len"], values["context"]
        ):
            point = (
                mode,
                batch,
                seq_len if mode != "decode" else defaults["seq_len"],
                context if mode == "decode" else defaults["context"],
            )
            if point not in out:
                out.append(point)
    return out


def roofline_of(calibration: CalibrationResult) -> RooflineFit:
    """The calibration's device roofline as the fit ``profile`` places ops against."""
    roof = calibration.roofline
    if roof is None:
        raise InvalidInput("calibration", calibration.device_key, "has no device roofline")
    return RooflineFit(
        compute_rate_flops=roof.compute_rate_flops,
        bandwidth_bytes_per_s=roof.bandwidth_bytes_per_s,
        launch_overhead_s=roof.launch_overhead_s,
        median_abs_rel_error=roof.median_abs_rel_error,
        ridge_point=roof.ridge_point,
        device=calibration.device,
        dtype=calibration.dtype,
        device_name=calibration.device_name,
        device_key=calibration.device_key,
        source="operator calibration",
    )


def _measure(settings: StepSettings, fit: RooflineFit, device: Any) -> ProfileResult:
    """``profile``'s measurement of one point, the step ``settings`` describe, on ``device``."""
    step = model_profile.load(settings, device=device)
    return model_profile.profile_model(step, ResolvedFit(fit, "operator calibration"))


def _predict(
    settings: StepSettings, dtype: torch.dtype, device: Any, model: op_model.OpModel
) -> pr.StepPrediction:
    """The step ``settings`` describe (the one :func:`_measure` measures) recorded on fake
    tensors in ``dtype`` and predicted."""
    from infer_opt.profilers.models import parse_hf_overrides

    on = "cuda" if str(device).startswith("cuda") else "cpu"
    shape, overrides = settings.shape, parse_hf_overrides(list(settings.hf_config))
    step = meta_record.StepSpec(
        settings.model, shape.mode, shape.batch, shape.seq_len, shape.context, shape.new_tokens, dtype,
        overrides, device=on,
    )  # fmt: skip
    return pr.predict_recorded(step, model)


def compare_ops(
    point: int, mode: str, measured: ProfileResult, predicted: pr.StepPrediction
) -> list[OpComparison]:
    """Per-call measured and predicted time of every op (name and shapes) found in both."""
    grouped: dict[tuple[str, tuple[tuple[int, ...], ...]], list[int]] = {}
    for i, call in enumerate(predicted.recorded.calls):
        grouped.setdefault((call.name, call.shapes), []).append(i)
    estimates = predicted.estimates
    out = []
    for op in measured.ops:
        idx = grouped.get((op.name, op.shapes))
        if not idx or op.time_s <= 0 or op.calls != len(idx):
            continue
        t_hat = math.fsum(estimates[i].time_s for i in idx) / len(idx)
        t = op.time_s / op.calls
        out.append(
            OpComparison(
                point=point,
                mode=mode,
                name=op.name,
                shapes=op.shapes,
                family=predicted.queries[idx[0]].family,
                calls=op.calls,
                measured_s=t,
                predicted_s=t_hat,
                rel_error=(t_hat - t) / t,
                extrapolated=any(estimates[i].extrapolated for i in idx),
            )
        )
    return out


def _point(
    mode: str,
    shape: tuple[int, int, int],
    measured: ProfileResult,
    predicted: pr.StepPrediction,
    probe_s: float | None = None,
    dispatch_probe_s: float | None = None,
) -> ValidatePoint:
    batch, seq_len, context = shape
    estimates = predicted.estimates
    op_time = math.fsum(e.time_s for e in estimates) or 1.0
    segments = predicted.segments
    gen = measured.generation
    return ValidatePoint(
        mode=mode,
        batch=batch,
        seq_len=seq_len if mode != "decode" else None,
        context=context if mode == "decode" else None,
        measured_s=measured.step_time_s,
        predicted_s=predicted.step_time_s,
        rel_error=(predicted.step_time_s - measured.step_time_s) / measured.step_time_s,
        measured_host_s=measured.unattributed_s,
        predicted_host_s=predicted.host_s,
        measured_rel_iqr=(measured.step.q3_s - measured.step.q1_s) / measured.step.median_s,
        on_grid_share=math.fsum(e.time_s for e in estimates if e.on_grid) / op_time,
        extrapolated_share=math.fsum(e.time_s for e in estimates if e.extrapolated) / op_time,
        ttft_measured_s=gen.ttft_s if gen else None,
        ttft_predicted_s=segments[0].step_time_s if gen else None,
        tpot_measured_s=gen.tpot_s if gen else None,
        tpot_predicted_s=(
            math.fsum(s.step_time_s for s in segments[1:]) / (len(segments) - 1)
            if gen and len(segments) > 1
            else None
        ),
        probe_s=probe_s,
        dispatch_probe_s=dispatch_probe_s,
    )


_PREDICTED = (attrgetter("predicted_s"), attrgetter("ttft_predicted_s"), attrgetter("tpot_predicted_s"))
_MEASURED = (attrgetter("measured_s"), attrgetter("ttft_measured_s"), attrgetter("tpot_measured_s"))


def _by_mode(
    pairs: Iterable[tuple[ValidatePoint, ValidatePoint]],
    estimate: tuple[Callable[[ValidatePoint], float | None], ...] = _PREDICTED,
) -> dict[str, ErrorSummary]:
    """Step errors per mode of each (estimate, reference) pair of points — the estimate's
    ``estimate`` getters (step, TTFT, TPOT) against the reference's measured ones; generate adds
    its TTFT to prefill and its TPOT to decode."""
    values: dict[str, list[tuple[float, float]]] = {}
    for e, m in pairs:
        keys = (m.mode, "prefill (TTFT)", "decode (TPOT)")
        for key, get_e, get_m in zip(keys, estimate, _MEASURED, strict=True):
            t_hat, t = get_e(e), get_m(m)
            if t and t_hat is not None:
                values.setdefault(key, []).append((t_hat, t))
    return {mode: op_model.error_stats([a for a, _ in v], [b for _, b in v]) for mode, v in values.items()}


def summarize(points: Sequence[ValidatePoint], ops: Sequence[OpComparison]) -> dict[str, Any]:
    """The result's statistics over the points and op comparisons (module docstring)."""
    step = op_model.error_stats([p.predicted_s for p in points], [p.measured_s for p in points])
    large = [o for o in ops if o.measured_s >= SMALL_OP_S]
    small = [o for o in ops if o.measured_s < SMALL_OP_S]
    big = op_model.error_stats([o.predicted_s for o in large], [o.measured_s for o in large])
    tiny = op_model.error_stats([o.predicted_s for o in small], [o.measured_s for o in small])
    hosts = [(p.predicted_host_s, p.measured_host_s) for p in points if p.measured_host_s > 0]
    return {
        "step_mape": step.mape,
        "step_p90_abs_rel_error": step.p90_abs_rel_error,
        "step_by_mode": _by_mode((p, p) for p in points),
        "op_mape": big.mape,
        "op_p90_abs_rel_error": big.p90_abs_rel_error,
        "op_count": big.n,
        "small_op_mape": tiny.mape,
        "small_op_count": tiny.n,
        "host": op_model.error_stats([a for a, _ in hosts], [b for _, b in hosts]),
        "worst_ops": tuple(sorted(large, key=lambda o: -abs(o.rel_error))[:WORST_OPS]),
    }


def _notices(
    shapes: Sequence[tuple[str, int, int, int]],
    predictions: Sequence[pr.StepPrediction],
    points: Sequence[ValidatePoint],
    calibration: CalibrationResult,
) -> list[Notice]:
    """What recording each point said, the points mostly on measured grid shapes, then what to
    say of the calibration (:func:`~infer_opt.profilers.predict.calibration_notices`)."""
    recorded = [
        notice.about(_label(*shape))
        for shape, p in zip(shapes, predictions, strict=True)
        for notice in p.recorded.notices
    ]
    return (
        recorded
        + [
            Notice(
                "validation_on_grid",
                {"share": p.on_grid_share},
                _label(p.mode, p.batch, p.seq_len, p.context),
            )
            for p in points
            if p.on_grid_share > ON_GRID_WARNING
        ]
        + pr.calibration_notices(calibration)
    )


def _checked(
    calibration: CalibrationResult,
    device: Any,
    modes: Sequence[str],
    grid: Mapping[str, Sequence[int]],
    passes: int,
) -> list[Notice]:
    """Refuse what cannot be validated (a grid parameter no mode reads, no pass, another kind of
    device); what to say of the device (:func:`_device_notices`)."""
    for param, values in grid.items():
        pr.check_param_modes(param, values, modes, "grid")
    if passes < 1:
        raise InvalidInput("passes", passes, "must be at least 1")
    return _device_notices(calibration, device)


def _grid_reaches_the_model(spec: str, grid: Mapping[str, Sequence[int]]) -> None:
    """A grid over a shape the factory cannot be given would measure one step at every value
    (listed as several shapes): refused before any work."""
    varied = [p for p, values in grid.items() if len(values) > 1]
    for param, keyword in models.factory_ignores(spec, varied):
        raise InvalidInput(
            "grid",
            f"{param.replace('_', '-')}={','.join(map(str, grid[param]))}",
            f"the factory {spec} takes no {keyword}: its step would be the same at every value; "
            f"drop it from --grid, or give the factory a {keyword} parameter",
        )


def _device_notices(calibration: CalibrationResult, device: Any) -> list[Notice]:
    """A calibration of another kind of device (a GPU's, with the steps measured here on a CPU)
    is refused: nothing would be validated. Another model of the same kind is compared, and
    said (``validation_other_device``): its errors include the difference between the two."""
    from infer_opt.profilers.device import run_key
    from infer_opt.run_key import RunKey

    made, here = RunKey.of(calibration), run_key(device, "float32")
    if made.device_kind and made.device_kind != here.device_kind:
        raise InvalidInput(
            "calibration",
            f"{calibration.device_name} ({made.device_kind})",
            f"validate measures the steps here, on {here.device_name} ({here.device_kind}): give a "
            "calibration made on this device (predict takes another device's)",
        )
    if made.device_name and made.device_name != here.device_name:
        names = {"calibrated": made.device_name, "measured": here.device_name}
        return [Notice("validation_other_device", names)]
    return []


def _threads_notices(calibration: CalibrationResult, device: Any) -> list[Notice]:
    """A CPU run measured at another thread count than its CPU calibration was made at."""
    from infer_opt.profilers.device import is_cuda

    threads = torch.get_num_threads()
    if is_cuda(device) or calibration.device != "cpu" or threads == calibration.threads:
        return []
    return [Notice("validation_threads_differ", {"threads": threads, "calibrated": calibration.threads})]


def measure_as_calibrated(calibration: CalibrationResult, threads: int | None, device: Any) -> None:
    """Measure at a CPU calibration's own thread count unless ``threads`` were given (``validate``:
    a prediction is for the thread count its calibration was made at)."""
    from infer_opt.profilers import device as devices

    made = calibration.threads
    cpu = not devices.is_cuda(device) and calibration.device == "cpu"
    if threads is None and cpu and 1 <= made <= devices.available_cpus():
        devices.set_threads(made)


def _label(mode: str, batch: int, seq_len: int | None, context: int | None) -> str:
    return f"{mode} batch={batch} " + (f"context={context}" if mode == "decode" else f"seq-len={seq_len}")


def pass_noise(
    passes: Sequence[tuple[Sequence[ValidatePoint], Sequence[OpComparison]]],
) -> dict[str, ErrorSummary]:
    """The passes' measurements against each other: for every pair of passes, the later one's
    measurement of a point against the earlier one's, ``|t_later − t_earlier| / t_earlier``
    (the mean signed error is then the drift from pass to pass). Keyed like
    :attr:`ValidateResult.step_by_mode`, plus :data:`NOISE_OPS` (operators of at least
    :data:`SMALL_OP_S` in the earlier pass, matched by point, name and shapes),
    :data:`NOISE_SMALL_OPS` and :data:`NOISE_HOST`. Each pass is (points, op comparisons) over the
    same grid, its points in the same order; empty with fewer than two passes."""
    steps: list[tuple[ValidatePoint, ValidatePoint]] = []
    ops: dict[str, list[tuple[float, float]]] = {NOISE_OPS: [], NOISE_SMALL_OPS: []}
    hosts: list[tuple[float, float]] = []
    for (points_a, ops_a), (points_b, ops_b) in itertools.combinations(passes, 2):
        steps += zip(points_b, points_a, strict=True)
        hosts += [
            (b.measured_host_s, a.measured_host_s)
            for a, b in zip(points_a, points_b, strict=True)
            if a.measured_host_s > 0 and b.measured_host_s > 0
        ]
        later = {(o.point, o.name, o.shapes): o.measured_s for o in ops_b}
        for o in ops_a:
            if (t := later.get((o.point, o.name, o.shapes))) is not None:
                ops[NOISE_OPS if o.measured_s >= SMALL_OP_S else NOISE_SMALL_OPS].append((t, o.measured_s))
    if not steps:
        return {}
    out = _by_mode(steps, _MEASURED)
    for key, pairs in (*ops.items(), (NOISE_HOST, hosts)):
        out[key] = op_model.error_stats([b for b, _ in pairs], [a for _, a in pairs])
    return out


def merge_passes(
    passes: Sequence[tuple[Sequence[ValidatePoint], Sequence[OpComparison]]],
) -> tuple[list[ValidatePoint], list[OpComparison]]:
    """One measurement per point and per operator from several passes: the median of the passes'
    measurements (step, host term, TTFT, TPOT; an operator over the passes that matched it), the
    prediction and the rest from the first pass; each point keeps its passes' step times."""
    if len(passes) == 1:
        return list(passes[0][0]), list(passes[0][1])

    def median(values: Iterable[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return statistics.median(known) if known else None

    points = []
    for same in zip(*(p for p, _ in passes), strict=True):
        first = same[0]
        measured = statistics.median(p.measured_s for p in same)
        points.append(
            replace(
                first,
                measured_s=measured,
                rel_error=(first.predicted_s - measured) / measured,
                measured_host_s=statistics.median(p.measured_host_s for p in same),
                measured_rel_iqr=statistics.median(p.measured_rel_iqr for p in same),
                ttft_measured_s=median(p.ttft_measured_s for p in same),
                tpot_measured_s=median(p.tpot_measured_s for p in same),
                probe_s=median(p.probe_s for p in same),
                dispatch_probe_s=median(p.dispatch_probe_s for p in same),
                pass_measured_s=tuple(p.measured_s for p in same),
            )
        )
    grouped: dict[tuple[int, str, tuple[tuple[int, ...], ...]], list[OpComparison]] = {}
    for _, ops in passes:
        for o in ops:
            grouped.setdefault((o.point, o.name, o.shapes), []).append(o)
    merged = []
    for same_op in grouped.values():
        t = statistics.median(o.measured_s for o in same_op)
        first_op = same_op[0]
        merged.append(replace(first_op, measured_s=t, rel_error=(first_op.predicted_s - t) / t))
    return points, merged


@dataclass
class _Passes:
    """The grid's passes: each point measured (after the speed probes) beside its prediction."""

    shapes: list[tuple[str, int, int, int]]
    at: list[StepSettings]
    predictions: list[pr.StepPrediction]
    fit: RooflineFit
    device: Any
    probes: tuple[list[float], list[float]]

    def all(
        self,
        passes: int,
        done: list[tuple[list[ValidatePoint], list[OpComparison]]],
        progress: Progress | None,
    ) -> list[Notice]:
        """Every pass, appended to ``done``. Ctrl-C keeps what finished, as ``kernels`` keeps
        its cases: the passes done, or in the first pass its points done (a notice says so);
        an interrupt before any point finished goes on."""
        for n in range(passes):
            points: list[ValidatePoint] = []
            ops: list[OpComparison] = []
            try:
                for k in range(len(self.shapes)):
                    self.one(n, k, passes, points, ops, progress)
            except KeyboardInterrupt:
                if not done and not points:
                    raise
                if not done:
                    done.append((points, ops))
                kept = {"points": len(done[0][0]), "of": len(self.shapes), "passes": len(done)}
                return [Notice("validate_interrupted", {**kept, "asked": passes})]
            done.append((points, ops))
        return []

    def one(
        self, n: int, k: int, passes: int, points: list[ValidatePoint], ops: list[OpComparison], progress: Any
    ) -> None:
        mode, batch, seq_len, context = self.shapes[k]
        if progress is not None:
            prefix = f"pass {n + 1}/{passes}: " if passes > 1 else ""
            total = passes * len(self.shapes)
            progress(n * len(self.shapes) + k, total, prefix + _label(mode, batch, seq_len, context))
        probe = speed_probe.probe_s(self.device)
        dispatch = speed_probe.dispatch_probe_s(self.device)
        measured = _measure(self.at[k], self.fit, self.device)
        predicted = self.predictions[k]
        point = _point(mode, (batch, seq_len, context), measured, predicted, probe, dispatch)
        compared = compare_ops(k, mode, measured, predicted)
        # all at once, after the work: an interrupt leaves a point either whole or absent
        self.probes[0].append(probe)
        self.probes[1].append(dispatch)
        points.append(point)
        ops.extend(compared)


def run(
    request: ValidateRequest,
    *,
    progress: Progress | None = None,
    noticed: Callable[[Notice], None] = lambda notice: None,
) -> ValidateResult:
    """``infer-opt validate``: the request's calibration found (``noticed`` gets what finding it
    noticed), the step measured as it was calibrated, and :func:`validate` over its grid."""
    from infer_opt.profilers import device as devices

    models.parse_hf_overrides(list(request.hf_config))  # a bad --hf-config before any calibration
    found = pr.calibration_for_run(request.calibration, request.dtype, request.threads, request.device)
    for notice in found.notices:
        noticed(notice)
    dev = devices.resolve_device(request.device)
    measure_as_calibrated(found.calibration, request.threads, dev)
    params = [param for param, _ in request.grid or ()]
    if len(set(params)) != len(params):
        raise InvalidInput("grid", ",".join(params), "name each of batch, seq-len and context at most once")
    modes = tuple(dict.fromkeys(request.mode or ["prefill"]))
    lengths = Shape(**{**request.shape(), "mode": modes[0]})
    settings = StepSettings(
        request.model, str(dev), found.calibration.dtype, lengths, warmup=request.warmup, reps=request.reps,
        hf_config=request.hf_config,
    )  # fmt: skip
    return validate(
        settings, found.calibration, calibration_source=found.source, modes=modes,
        grid=dict(request.grid or ()), passes=request.passes, progress=progress,
    )  # fmt: skip


def validate(
    settings: StepSettings,
    calibration: CalibrationResult,
    *,
    calibration_source: str = "",
    modes: Sequence[str] = ("prefill",),
    grid: Mapping[str, Sequence[int]] | None = None,
    passes: int = 1,
    progress: Progress | None = None,
) -> ValidateResult:
    """Measure and predict every grid point (module docstring), ``passes`` times: each point is
    ``settings`` at the point's mode and shape (the settings' own shape where the grid names
    nothing), on the settings' device and in their dtype."""
    from infer_opt.profilers import device as devices

    device = devices.resolve_device(settings.device)
    dtype = devices.parse_dtype(settings.dtype, device)
    other_device = _checked(calibration, device, modes, grid or {}, passes)
    _grid_reaches_the_model(settings.model, grid or {})
    base = {p: getattr(settings.shape, p) for p in GRID_PARAMS}
    shapes = grid_points(modes, grid or {}, base)
    fit = roofline_of(calibration)
    model = op_model.OpModel(calibration)
    probes: list[float] = []
    dispatch_probes: list[float] = []
    same_machine = speed_probe.same_machine(calibration, device)
    then = (calibration.usable_probe_s, calibration.usable_dispatch_probe_s) if same_machine else ((), ())
    # one settings object per point, measured and predicted; predicted once: it does not change
    # between passes
    at = [settings.at(mode=m, batch=b, seq_len=t, context=c) for m, b, t, c in shapes]
    predictions = [_predict(point, dtype, device, model) for point in at]
    passes_done: list[tuple[list[ValidatePoint], list[OpComparison]]] = []
    run = _Passes(shapes, at, predictions, fit, device, (probes, dispatch_probes))
    stopped = run.all(passes, passes_done, progress)
    passes = len(passes_done)
    points, ops = merge_passes(passes_done)
    warnings = [
        *_notices(shapes, predictions, points, calibration),
        *other_device,
        *_threads_notices(calibration, device),
        *stopped,
    ]
    if progress is not None:
        progress(passes * len(shapes), passes * len(shapes), "done")
    threads = None if devices.is_cuda(device) else torch.get_num_threads()
    ran = replace(settings, device=str(device), dtype=devices.dtype_name(dtype), threads=threads)
    return ValidateResult(
        model=settings.model,
        dtype=calibration.dtype,
        threads=torch.get_num_threads(),
        calibration=pr.calibration_ref(calibration, calibration_source),
        points=tuple(points),
        ops=tuple(ops),
        warmup=settings.warmup,
        reps=settings.reps,
        probe_slowdown=speed_probe.slowdown(probes, then[0]),
        dispatch_probe_slowdown=speed_probe.slowdown(dispatch_probes, then[1]),
        passes=passes,
        noise=pass_noise(passes_done),
        warnings=tuple(warnings),
        settings=ran,
        **summarize(points, ops),
    )
