"""``infer-opt roofline``: fit the device's empirical roofline from kernel measurements."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infer_opt.cli.common import CsvOpt, FormatOpt, JsonOpt, MarkdownOpt, OutOpt, PlotOpt, check_png, emit
from infer_opt.cli.kernels import DeviceOpt, DtypeOpt, FlushOpt, RepsOpt, SuiteOpt, ThreadsOpt, WarmupOpt
from infer_opt.cost_models import roofline as model
from infer_opt.errors import InvalidInput
from infer_opt.units import parse_bandwidth, parse_flops_rate, parse_int

HELP = """Fit the empirical roofline t ≈ t0 + max(F/R, Q/b) — compute rate R, bandwidth b,
launch floor t0 — robustly in log space, with bootstrap intervals; label every kernel
compute-, bandwidth- or launch-bound with its efficiency (predicted / measured).

With no MEASUREMENTS file, the quick kernel suite runs on --device first. A file is a
saved `infer-opt kernels` result (.json) or a CSV with columns name, flops, bytes, time_s
(family optional). A fit that passes validation (finite parameters the data pin down,
median error within 35%, at least 6 kernels, no tick-quantized timings) is cached per
device, dtype, threads, float32 matmul precision and timing in ~/.cache/infer-opt/roofline/
(or $INFER_OPT_CACHE/roofline/) for `infer-opt profile`.

Examples:

  infer-opt roofline --plot roofline.png

  infer-opt roofline kernels.json --peak-flops 989TFLOP/s --peak-bandwidth 4.8TB/s

  infer-opt roofline measurements.csv --json
"""


def roofline_command(
    measurements: Annotated[
        Path | None,
        typer.Argument(
            help="Kernel measurements (.json from `infer-opt kernels`, or .csv); omit to measure now.",
            show_default=False,
        ),
    ] = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    suite: SuiteOpt = "quick",
    l2_flush: FlushOpt = False,
    warmup: WarmupOpt = "5",
    reps: RepsOpt = "20",
    threads: ThreadsOpt = None,
    bootstrap: Annotated[
        str, typer.Option("--bootstrap", help="Bootstrap resamples for the intervals (0 = none).")
    ] = "200",
    seed: Annotated[str, typer.Option("--seed", help="Seed of the bootstrap.")] = "0",
    peak_flops: Annotated[
        str | None,
        typer.Option("--peak-flops", help="Datasheet compute peak, e.g. 989TFLOP/s (shown, not fitted)."),
    ] = None,
    peak_bandwidth: Annotated[
        str | None,
        typer.Option(
            "--peak-bandwidth", help="Datasheet memory bandwidth, e.g. 4.8TB/s (shown, not fitted)."
        ),
    ] = None,
    fit_on: Annotated[
        str,
        typer.Option(
            "--fit-on",
            help="Kernels the parameters are fitted to: 'auto' (matmul, elementwise and launch "
            "families when present, so other kernels show their distance to the roofline), 'all', "
            "or comma-separated families.",
        ),
    ] = "auto",
    save: Annotated[
        Path | None, typer.Option("--save", help="Also save the fit to FILE (JSON) for `profile --roofline`.")
    ] = None,
    no_save: Annotated[
        bool, typer.Option("--no-save", help="Do not write the fit to the cache directory.")
    ] = False,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    fmt: FormatOpt = None,
    plot: PlotOpt = None,
) -> None:
    n_boot = parse_int(bootstrap, option="--bootstrap", low=0, high=100_000)
    seed_value = parse_int(seed, option="--seed", low=0)
    sheet_r = None if peak_flops is None else parse_flops_rate(peak_flops, option="--peak-flops")
    sheet_b = None if peak_bandwidth is None else parse_bandwidth(peak_bandwidth, option="--peak-bandwidth")
    check_png("--plot", plot)
    if measurements is not None:
        from infer_opt.profilers.roofline_store import load_points

        points, meta = load_points(measurements)
        source = str(measurements)
    else:
        from infer_opt.cli.kernels import parse_settings, run_suite_cli
        from infer_opt.profilers.kernels import kernel_points

        if suite not in ("quick", "full"):
            raise InvalidInput("--suite", suite, "expected quick or full")
        settings = parse_settings(warmup, reps, None, flush=l2_flush, cuda_graphs=False)
        result = run_suite_cli(
            device=device,
            dtype=dtype,
            suite=suite,
            only=None,
            settings=settings,
            out=None,
            threads=threads,
            label="roofline",
        )
        if not result.complete:
            raise typer.Exit(130)
        points = kernel_points(result)
        from infer_opt.profilers.roofline_store import measurement_meta

        meta = measurement_meta(result)
        source = f"measured now ({suite} suite, {result.wall_s:.0f} s)"
    fit = model.fit_roofline(
        points,
        bootstrap=n_boot,
        seed=seed_value,
        source=source,
        fit_families=_families(fit_on, points),
        **meta,
    )
    fit = model.with_datasheet(fit, flops=sheet_r, bytes_per_s=sheet_b)
    _save(fit, save, no_save)
    emit(fit, json_out=json_out, out=out, markdown=markdown, csv=csv, fmt=fmt, plot=plot, plot_fn=_plot)


def _families(text: str, points: list[model.KernelPoint]) -> tuple[str, ...] | None:
    choice = text.strip().lower()
    if choice == "auto":
        return model.default_fit_families(points)
    if choice == "all":
        return None
    wanted = tuple(f.strip() for f in text.split(",") if f.strip())
    known = sorted({p.family for p in points})
    unknown = [f for f in wanted if f not in known]
    if not wanted or unknown:
        raise InvalidInput("--fit-on", text, f"expected auto, all or families among: {', '.join(known)}")
    return wanted


def _save(fit: model.RooflineFit, save: Path | None, no_save: bool) -> None:
    from infer_opt.profilers import roofline_store
    from infer_opt.reports.messages import text

    if save is not None:
        typer.echo(f"saved fit to {roofline_store.save_fit(fit, save)}", err=True)
    if no_save:
        return
    if not fit.device:
        if save is None:
            typer.echo("not cached: the measurements do not name their device (use --save FILE)", err=True)
        return
    stored = roofline_store.cache_fit(fit)
    if stored.saved:
        for notice in stored.notices:
            typer.echo(f"warning: {text(notice)}", err=True)
        typer.echo(f"saved fit to {stored.path}", err=True)
    else:
        why = "; ".join(text(n) for n in stored.notices)
        typer.echo(f"not cached (profile would not use it): {why}", err=True)


def _plot(fit: model.RooflineFit, path: Path) -> list[Path]:
    """The roofline at ``path`` and predicted-vs-measured beside it (``FILE-pred.png``)."""
    from infer_opt.reports.plots import roofline as plots

    pred = path.with_name(f"{path.stem}-pred{path.suffix}")
    return [plots.plot_roofline(fit, model.roofline_curve(fit), path), plots.plot_predicted(fit, pred)]


def register(app: typer.Typer) -> None:
    app.command("roofline", help=HELP)(roofline_command)
