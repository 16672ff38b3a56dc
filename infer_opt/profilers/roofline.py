"""``infer-opt roofline``'s run: the kernel points (a saved file, a kernels result, or the
quick suite measured now), the fit, its datasheet peaks, saved and cached. Torch is imported
only to measure."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from infer_opt.cost_models import roofline as model
from infer_opt.cost_models.roofline import KernelPoint
from infer_opt.errors import Interrupted, InvalidInput
from infer_opt.results.roofline import RooflineFit

if TYPE_CHECKING:
    from infer_opt.requests import RooflineRequest


def run(
    request: RooflineRequest, *, progress: Any = None, said: Callable[[str], None] = lambda line: None
) -> RooflineFit:
    """Fit ``t ≈ t0 + max(F/R, Q/b)`` to the request's measurements (or the suite now), with its
    datasheet peaks; saved to ``request.save`` and cached unless ``no_save`` (``said`` reports)."""
    from infer_opt.inputs.measurements import kernel_points, load_points, measurement_meta
    from infer_opt.store import check_writable

    measurements = request.measurements
    if measurements is None:
        if not request.no_save:  # before measuring: a cache that cannot take the fit is said now
            check_writable("roofline", instead="give --no-save (with --save FILE or --out FILE.json)")
        points, meta, source = _measure_now(request, progress)
    elif not hasattr(measurements, "rows"):
        points, meta = load_points(measurements)
        source = str(measurements)
    else:
        points, source = kernel_points(measurements), "kernel suite"
        meta = measurement_meta(measurements)
    fit = model.fit_roofline(
        points, bootstrap=request.bootstrap, seed=request.seed, source=source,
        fit_families=_families(request.fit_on, points), **meta,
    )  # fmt: skip
    fit = model.with_datasheet(fit, flops=request.peak_flops, bytes_per_s=request.peak_bandwidth)
    _save(fit, request, said)
    return fit


def _measure_now(request: RooflineRequest, progress: Any) -> tuple[list[Any], dict[str, Any], str]:
    """Run the suite now: its points, the device it ran on, and a source line."""
    from infer_opt.inputs.measurements import kernel_points, measurement_meta
    from infer_opt.profilers import kernels
    from infer_opt.requests import KernelsRequest, SuiteRequest

    suite = {f: getattr(request, f) for f in SuiteRequest.__dataclass_fields__}
    result = kernels.run(KernelsRequest(**suite), progress=progress)
    if not result.complete:
        raise Interrupted(f"interrupted after {len(result.rows)} kernel(s); nothing was fitted")
    return (
        kernel_points(result),
        measurement_meta(result),
        f"measured now ({request.suite} suite, {result.wall_s:.0f} s)",
    )


def _families(text: str, points: list[KernelPoint]) -> tuple[str, ...] | None:
    choice = text.strip().lower()
    if choice == "auto":
        return model.default_fit_families(points)
    if choice == "all":
        return None
    wanted = tuple(f.strip() for f in text.split(","))
    known = sorted({p.family for p in points if p.family})
    choices = (
        f"auto, all, or families among: {', '.join(known)}" if known else "auto or all (no families named)"
    )
    if any(f == "" for f in wanted):
        raise InvalidInput("--fit-on", text, f"empty item in the list; expected {choices}")
    unknown = [f for f in wanted if f not in known]
    if unknown:
        raise InvalidInput(
            "--fit-on", text, f"unknown famil{'ies' if len(unknown) > 1 else 'y'}; expected {choices}"
        )
    return wanted


def _save(fit: RooflineFit, request: RooflineRequest, said: Callable[[str], None]) -> None:
    from infer_opt.messages import text
    from infer_opt.profilers import roofline_sweep

    if request.save is not None:
        said(f"saved fit to {roofline_sweep.save_fit(fit, request.save)}")
    if request.no_save:
        return
    if not fit.device:
        if request.save is None:
            said("not cached: the measurements do not name their device (use --save FILE)")
        return
    try:
        stored = roofline_sweep.cache_fit(fit)
    except OSError as exc:  # the fit is still shown and written to --out
        said(f"not cached: {exc.strerror or type(exc).__name__} writing the cache; --out keeps it")
        return
    if stored.saved:
        for notice in stored.notices:
            said(f"warning: {text(notice)}")
        said(f"saved fit to {stored.path}")
    else:
        said(f"not cached (profile would not use it): {'; '.join(text(n) for n in stored.notices)}")
