"""The roofline fit a ``profile`` places operators against: the quick calibration sweep it runs
when nothing usable is cached (one retry, with one thread on a loaded machine), a fit file checked
for a run, and where the fits are kept (:data:`infer_opt.store.ROOFLINE`).

torch is imported only by the functions that measure.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_opt.cost_models.roofline import (
    PROFILE_TIMINGS,
    RooflineFit,
    default_fit_families,
    fit_problems,
    fit_roofline,
)
from infer_opt.errors import InvalidInput
from infer_opt.inputs.measurements import kernel_points
from infer_opt.notices import Notice
from infer_opt.results import save_result
from infer_opt.results.kernels import SuiteSettings
from infer_opt.run_key import RunKey
from infer_opt.store import ROOFLINE, Stored

#: the calibration sweep: enough of each regime to pin R, b and t0
CALIBRATION_CASES = ("matmul", "copy", "add", "tiny_add")
CALIBRATION_REPS = 10
#: how a calibration times kernels, per device kind: on CUDA as ``profile`` times operators
#: (device time: a flush before each sample, one-call graph replays for the launch floor)
CALIBRATION_TIMING = {"cpu": "cpu-clock", "cuda": "cuda-graph-flushed"}

Calibrate = Callable[..., RooflineFit]


def calibrate(device: Any, dtype: Any, *, progress: Any = None) -> RooflineFit:
    """A quick kernel sweep (matmul, copy, add, tiny add from the quick suite; about 10 s
    on a 2-core CPU) and its fit, recording its :class:`RunKey` (threads, matmul precision,
    timing). On CUDA every sample is flushed and replayed from a one-call graph
    (:data:`CALIBRATION_TIMING`). ``device``/``dtype`` are specs or torch objects."""
    from infer_opt.profilers import device as devices
    from infer_opt.profilers import kernels

    dev = devices.resolve_device(device)
    torch_dtype = devices.parse_dtype(dtype, dev)
    on_cuda = devices.is_cuda(dev)
    cases = [
        c for c in kernels.all_cases("cuda" if on_cuda else "cpu", "quick") if c.name in CALIBRATION_CASES
    ]
    settings = SuiteSettings(warmup=3, reps=CALIBRATION_REPS, flush_cache=on_cuda, cuda_graphs=on_cuda)
    result = kernels.run_suite(cases, dev, torch_dtype, settings, suite="calibration", progress=progress)
    points = kernel_points(result)
    key = RunKey.of(result)
    return fit_roofline(
        points,
        device=result.device,
        dtype=result.dtype,
        device_name=result.device_name,
        device_key=result.device_key,
        source="calibration sweep",
        fit_families=default_fit_families(points),
        threads=key.threads,
        matmul_precision=key.matmul_precision,
        timing=key.timing,
    )


@dataclass(frozen=True)
class ResolvedFit:
    """The fit a profile uses (None: the profile goes on without roofline columns), where it
    came from, and what happened on the way (a corrupt cache, a rejected calibration)."""

    fit: RooflineFit | None
    source: str
    warnings: tuple[Notice, ...] = ()


def read_fit_for_run(path: str | os.PathLike[str], device: Any, dtype: Any) -> RooflineFit:
    """The fit in ``path``, refused (:class:`InvalidInput` naming ``roofline``) unless it is
    usable for a run on ``device`` in ``dtype``: valid, same device model, dtype, threads and
    matmul precision, and timed as the run's operators are (:data:`PROFILE_TIMINGS`)."""
    from infer_opt.messages import text
    from infer_opt.profilers.device import is_cuda, run_key

    timings = PROFILE_TIMINGS["cuda" if is_cuda(device) else "cpu"]
    fit = ROOFLINE.read_file(path)
    problems = fit_problems(fit, run_key(device, dtype, timings[0]), timings=timings)
    if problems:
        raise InvalidInput(
            "roofline", str(path), "not usable for this run: " + "; ".join(text(n) for n in problems)
        )
    return fit


def fit_for_run(
    device: Any,
    dtype: Any,
    *,
    progress: Any = None,
    calibrate_fn: Calibrate | None = None,
    load: Callable[[], float | None] | None = None,
) -> ResolvedFit:
    """The cached fit usable for a run on ``device`` in ``dtype`` (any timing of
    :data:`PROFILE_TIMINGS`, the calibration's first), else a calibration now, saved if it
    passes :func:`fit_problems`.

    A calibration that fails is measured once more — with one intra-op thread when the
    machine is loaded (:func:`machine_loaded`; a loaded machine stalls multi-threaded kernels
    at the scheduler's quantum). A second failure is not cached and the run goes on without a
    fit (``fit=None``). A good one-thread fit is cached for runs at one thread, but this run's
    threads differ, so it too goes on without a fit, and the notice says how to use it."""
    from infer_opt.profilers.device import is_cuda, run_key

    calibrate_fn = calibrate_fn or calibrate
    timings = PROFILE_TIMINGS["cuda" if is_cuda(device) else "cpu"]
    notices: list[Notice] = []
    for timing in timings:
        found = ROOFLINE.load(run_key(device, dtype, timing), timings=timings)
        notices.extend(found.notices)
        if found.result is not None:
            return ResolvedFit(found.result, f"saved fit ({found.path})", tuple(notices))
    expected = run_key(device, dtype, timings[0])
    loaded = not is_cuda(device) and machine_loaded(expected.threads or 1, load)
    fit = calibrate_fn(device, dtype, progress=progress)
    problems = fit_problems(fit, expected, timings=timings)
    if not problems:
        return _cached(fit, "calibrated now", notices)
    notices += _rejected(1, expected.threads, problems)
    retry_threads = 1 if loaded and (expected.threads or 1) > 1 else expected.threads
    with _threads(retry_threads):
        fit = calibrate_fn(device, dtype, progress=progress)
        problems = fit_problems(fit, run_key(device, dtype, timings[0]), timings=timings)
    if not problems and retry_threads == expected.threads:
        return _cached(fit, "calibrated now (second try)", notices)
    if problems:
        notices += _rejected(2, retry_threads, problems)
    else:
        try:
            stored = cache_fit(fit)
        except OSError as exc:  # a full or read-only cache: the measurement stands, unsaved
            notices.append(Notice("roofline_not_saved", {"reason": f"{type(exc).__name__}: {exc}"}))
        else:
            saved = {"path": str(stored.path), "threads": retry_threads}
            notices += [*stored.notices, Notice("roofline_saved_for_other_threads", saved)]
    unavailable = {"threads": expected.threads, "loaded": loaded, "device": expected.device_kind}
    return ResolvedFit(
        None, "none: the calibration was unusable", (*notices, Notice("roofline_unavailable", unavailable))
    )


def _cached(fit: RooflineFit, how: str, notices: list[Notice]) -> ResolvedFit:
    try:
        stored = cache_fit(fit)
    except OSError as exc:
        reason = {"reason": f"{type(exc).__name__}: {exc}"}
        return ResolvedFit(fit, f"{how} (not saved)", (*notices, Notice("roofline_not_saved", reason)))
    return ResolvedFit(fit, f"{how}, saved to {stored.path}", (*notices, *stored.notices))


def _rejected(attempt: int, threads: int | None, problems: Sequence[Notice]) -> list[Notice]:
    head = Notice("roofline_calibration_rejected", {"attempt": attempt, "threads": threads})
    return [head, *(n.about(f"calibration {attempt}") for n in problems)]


def machine_loaded(threads: int, load: Callable[[], float | None] | None = None) -> bool:
    """Whether other work competes for the cores ``threads`` intra-op threads need: the
    1-minute load average plus ``threads`` exceeds the CPUs available by more than half a
    core. ``load`` returns the load average (default ``os.getloadavg``; None: unknown)."""
    from infer_opt.profilers.device import available_cpus

    value = (load or _load_average)()
    return value is not None and math.isfinite(value) and value + threads > available_cpus() + 0.5


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


@contextlib.contextmanager
def _threads(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` intra-op threads (None: unchanged), restored after."""
    if threads is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def fit_path(device: Any, dtype: Any, timing: str | None = None) -> Path:
    """Where the fit for this device model and dtype (as torch is set now) is cached;
    ``timing`` defaults to the one a calibration uses on that device (:data:`CALIBRATION_TIMING`)."""
    from infer_opt.profilers.device import is_cuda, run_key

    kind = "cuda" if is_cuda(device) else "cpu"
    return ROOFLINE.path(run_key(device, dtype, timing or CALIBRATION_TIMING[kind]))


def save_fit(fit: RooflineFit, path: str | os.PathLike[str]) -> Path:
    """Save ``fit`` to a file of the user's (envelope JSON, atomic, not validated)."""
    return save_result(Path(path), fit)


def cache_fit(fit: RooflineFit) -> Stored:
    """Save ``fit`` to the cache if it is fit to be used (:meth:`infer_opt.store.Store.save`)."""
    return ROOFLINE.save(fit)


def load_fit(path: str | os.PathLike[str]) -> RooflineFit:
    """The fit in a file; a missing or unreadable file is an :class:`InvalidInput`."""
    return ROOFLINE.read_file(path)
