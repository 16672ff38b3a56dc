"""``infer-opt roofline``: fit the device's empirical roofline from kernel measurements."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infer_opt.cli.common import DeviceOpt, ThreadsOpt, argument, option, seed_option
from infer_opt.cli.kernels import DtypeOpt, FlushOpt, RepsOpt, SuiteOpt, WarmupOpt
from infer_opt.cli.output import with_output
from infer_opt.cli.types import Bandwidth, Count, FlopRate, InputFile, OutputFile
from infer_opt.cost_models import roofline as model
from infer_opt.cost_models.roofline import KernelPoint
from infer_opt.errors import Interrupted, InvalidInput
from infer_opt.results.roofline import RooflineFit

HELP = """Fit the empirical roofline t ≈ t0 + max(F/R, Q/b) — compute rate R, bandwidth b,
launch floor t0 — robustly in log space, with bootstrap intervals; label every kernel
compute-, bandwidth- or launch-bound with its efficiency (predicted / measured).

With no MEASUREMENTS file, the quick kernel suite runs on --device first. A file is a
saved `infer-opt kernels` result (.json) or a CSV with columns name, flops, bytes, time_s
(family optional). A fit that passes validation (finite parameters the data pin down,
median error within 35%, the kernels that pin R, b and t0, no tick-quantized timings) is
cached per device, dtype, threads, float32 matmul precision and timing in
~/.cache/infer-opt/roofline/ (or $INFER_OPT_CACHE/roofline/) for `infer-opt profile`.

Examples:

  infer-opt roofline --plot roofline.png

  infer-opt roofline kernels.json --peak-flops 989TFLOP/s --peak-bandwidth 4.8TB/s

  infer-opt roofline measurements.csv --json
"""


BootstrapOpt = option(
    int, "--bootstrap", parse=Count(0, 100_000), help="Bootstrap resamples for the intervals (0 = none)."
)
PeakFlopsOpt = option(
    float | None,
    "--peak-flops",
    parse=FlopRate(),
    help="Datasheet compute peak, e.g. 989TFLOP/s (shown, not fitted).",
)
PeakBandwidthOpt = option(
    float | None,
    "--peak-bandwidth",
    parse=Bandwidth(),
    help="Datasheet memory bandwidth, e.g. 4.8TB/s (shown, not fitted).",
)
FitOnOpt = option(
    str,
    "--fit-on",
    help="Kernels the parameters are fitted to: 'auto' (matmul, elementwise and launch "
    "families when present, so other kernels show their distance to the roofline), 'all', "
    "or comma-separated families.",
)
SaveOpt = option(
    Path | None,
    "--save",
    parse=OutputFile(),
    help="Also save the fit to FILE (JSON) for `profile --roofline`.",
)
NoSaveOpt = option(bool, "--no-save", help="Do not write the fit to the cache directory.")

SeedOpt = seed_option("the bootstrap")
MeasurementsArg = argument(
    Path | None,
    parse=InputFile(),
    help="Kernel measurements (.json from `infer-opt kernels`, or .csv); omit to measure now.",
    show_default=False,
)


@with_output(plot=True)
def roofline_command(
    measurements: MeasurementsArg = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    suite: SuiteOpt = "quick",
    l2_flush: FlushOpt = False,
    warmup: WarmupOpt = "5",
    reps: RepsOpt = "20",
    threads: ThreadsOpt = None,
    bootstrap: BootstrapOpt = 200,
    seed: SeedOpt = 0,
    peak_flops: PeakFlopsOpt = None,
    peak_bandwidth: PeakBandwidthOpt = None,
    fit_on: FitOnOpt = "auto",
    save: SaveOpt = None,
    no_save: NoSaveOpt = False,
) -> RooflineFit:
    if measurements is not None:
        from infer_opt.inputs.measurements import load_points

        points, meta = load_points(measurements)
        source = str(measurements)
    else:
        if not no_save:  # before measuring: a cache that cannot take the fit is said now
            from infer_opt.store import check_writable

            check_writable("roofline", instead="give --no-save (with --save FILE or --out FILE.json)")
        points, meta, source = _measure_now(device, dtype, suite, l2_flush, warmup, reps, threads)
    fit = model.fit_roofline(
        points, bootstrap=bootstrap, seed=seed, source=source, fit_families=_families(fit_on, points), **meta
    )
    fit = model.with_datasheet(fit, flops=peak_flops, bytes_per_s=peak_bandwidth)
    _save(fit, save, no_save)
    return fit


def _measure_now(
    device: str, dtype: str, suite: str, flush: bool, warmup: Any, reps: Any, threads: int | None
) -> tuple[list[KernelPoint], dict[str, Any], str]:
    """Run the suite now: its points, the device it ran on, and a source line."""
    from infer_opt.cli.kernels import run_suite_cli, suite_settings
    from infer_opt.inputs.measurements import kernel_points

    settings = suite_settings(warmup, reps, None, flush=flush, cuda_graphs=False)
    result = run_suite_cli(
        device=device,
        dtype=dtype,
        suite=suite,
        only=None,
        settings=settings,
        threads=threads,
        label="roofline",
    )
    if not result.complete:
        raise Interrupted(f"interrupted after {len(result.rows)} kernel(s); nothing was fitted")
    from infer_opt.inputs.measurements import measurement_meta

    return (
        kernel_points(result),
        measurement_meta(result),
        f"measured now ({suite} suite, {result.wall_s:.0f} s)",
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


def _save(fit: RooflineFit, save: Path | None, no_save: bool) -> None:
    from infer_opt.messages import text
    from infer_opt.profilers import roofline_calibration

    if save is not None:
        typer.echo(f"saved fit to {roofline_calibration.save_fit(fit, save)}", err=True)
    if no_save:
        return
    if not fit.device:
        if save is None:
            typer.echo("not cached: the measurements do not name their device (use --save FILE)", err=True)
        return
    try:
        stored = roofline_calibration.cache_fit(fit)
    except OSError as exc:  # the fit is still shown and written to --out
        why = exc.strerror or type(exc).__name__
        typer.echo(f"not cached: {why} writing the cache; --out keeps it", err=True)
        return
    if stored.saved:
        for notice in stored.notices:
            typer.echo(f"warning: {text(notice)}", err=True)
        typer.echo(f"saved fit to {stored.path}", err=True)
    else:
        why = "; ".join(text(n) for n in stored.notices)
        typer.echo(f"not cached (profile would not use it): {why}", err=True)


def register(app: typer.Typer) -> None:
    app.command("roofline", help=HELP)(roofline_command)
