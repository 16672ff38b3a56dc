"""``infer-opt roofline``: fit the device's empirical roofline from kernel measurements."""

from __future__ import annotations

from pathlib import Path

import typer

from infer_opt.cli.common import DeviceOpt, ThreadsOpt, argument, option, progress_bar, seed_option
from infer_opt.cli.kernels import DtypeOpt, FlushOpt, RepsOpt, SuiteOpt, WarmupOpt
from infer_opt.cli.output import with_output
from infer_opt.cli.types import Bandwidth, Count, FlopRate, InputFile, OutputFile
from infer_opt.requests import RooflineRequest
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
    from infer_opt.profilers import roofline

    request = RooflineRequest(
        measurements, device=device, dtype=dtype, suite=suite, l2_flush=l2_flush, warmup=warmup, reps=reps,
        threads=threads, bootstrap=bootstrap, seed=seed, peak_flops=peak_flops, peak_bandwidth=peak_bandwidth,
        fit_on=fit_on, save=save, no_save=no_save,
    )  # fmt: skip
    with progress_bar("roofline") as update:
        return roofline.run(request, progress=update, said=lambda line: typer.echo(line, err=True))


def register(app: typer.Typer) -> None:
    app.command("roofline", help=HELP)(roofline_command)
