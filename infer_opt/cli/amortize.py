"""``infer-opt amortize``: does a compile cost pay for itself, for one shape or per bucket?

A group that computes when called without a subcommand, so that later subcommands
(``infer-opt amortize measure``) can join it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infer_opt.cli.buckets import parse_count, read_input
from infer_opt.cli.common import CsvOpt, FormatOpt, JsonOpt, MarkdownOpt, OutOpt, PlotOpt, emit
from infer_opt.cost_models import amortization as model
from infer_opt.cost_models import bucketing
from infer_opt.errors import InvalidInput
from infer_opt.units import parse_duration

# Rich keeps single newlines in help text, so each paragraph is one (concatenated) line.
HELP = (
    "Does compiling pay for itself? Break-even calls and net gain, for one shape or per bucket.\n\n"
    "n* = C/(t_e - t_c): gain iff n > n*; net gain n·(t_e - t_c) - C; per bucket compile iff "
    "n_i·Δt_i - C_i > 0.\n\n"
    "Bare numbers: --compile-cost in seconds, --eager and --compiled in milliseconds.\n\n"
    "--buckets FILE.csv has columns bucket,compile_s,calls and either eager_ms,compiled_ms or "
    "saving_ms (a negative saving means compiled is slower).\n\n"
    "With --lengths FILE (one integer per line, or a CSV with length and optional count) the bucket "
    "column holds each bucket's upper bound and calls = the number of lengths that map to it (the "
    "smallest bound >= T), scaled to --requests N calls in total if given.\n\n"
    "Examples:\n\n"
    "  infer-opt amortize --compile-cost 3s --eager 2ms --compiled 1.5ms --calls 10000\n\n"
    "  infer-opt amortize --buckets buckets.csv\n\n"
    "  infer-opt amortize --buckets bounds.csv --lengths lengths.txt --requests 1e6\n"
)

app = typer.Typer(help=HELP, invoke_without_command=True, no_args_is_help=False)


@app.callback(invoke_without_command=True, help=HELP)
def amortize(
    ctx: typer.Context,
    compile_cost: Annotated[
        str | None, typer.Option("--compile-cost", "-C", help="One-time compile cost C (bare number = s).")
    ] = None,
    eager: Annotated[
        str | None, typer.Option("--eager", help="Eager time per call t_e (bare number = ms).")
    ] = None,
    compiled: Annotated[
        str | None, typer.Option("--compiled", help="Compiled time per call t_c (bare number = ms).")
    ] = None,
    calls: Annotated[
        str | None, typer.Option("--calls", "-n", help="Calls n the compile is spread over.")
    ] = None,
    buckets: Annotated[
        str | None,
        typer.Option(
            "--buckets", help="Per-bucket CSV: bucket,compile_s,calls + eager_ms,compiled_ms or saving_ms."
        ),
    ] = None,
    lengths: Annotated[
        str | None,
        typer.Option(
            "--lengths", help="Length sample giving calls per bucket (bucket column = upper bound)."
        ),
    ] = None,
    requests: Annotated[
        str | None, typer.Option("--requests", help="With --lengths: scale the sample to N calls in total.")
    ] = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    fmt: FormatOpt = None,
    plot: PlotOpt = None,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    one_shape = {"--compile-cost": compile_cost, "--eager": eager, "--compiled": compiled, "--calls": calls}
    if (
        buckets is None
        and all(v is None for v in one_shape.values())
        and lengths is None
        and requests is None
    ):
        typer.echo(ctx.get_help())
        raise typer.Exit(0)
    if buckets is not None:
        given = [name for name, value in one_shape.items() if value is not None]
        if given:
            raise InvalidInput(
                given[0], one_shape[given[0]], "use either --buckets FILE or the one-shape options"
            )
        result = _buckets(buckets, lengths, requests)
    else:
        for option, value in (("--lengths", lengths), ("--requests", requests)):
            if value is not None:
                raise InvalidInput(option, value, "only used with --buckets FILE")
        for option in ("--compile-cost", "--eager", "--compiled"):
            if one_shape[option] is None:
                raise InvalidInput(
                    option, "missing", "give --compile-cost, --eager and --compiled (or --buckets)"
                )
        result = model.amortize(
            parse_duration(compile_cost, option="--compile-cost", default_unit="s"),  # type: ignore[arg-type]
            parse_duration(eager, option="--eager", default_unit="ms"),  # type: ignore[arg-type]
            parse_duration(compiled, option="--compiled", default_unit="ms"),  # type: ignore[arg-type]
            None if calls is None else parse_count(calls, "--calls", low=0),
        )
    emit(result, json_out=json_out, out=out, markdown=markdown, csv=csv, fmt=fmt, plot=plot)


def _buckets(path: str, lengths: str | None, requests: str | None) -> model.AmortizeBucketsResult:
    if requests is not None and lengths is None:
        raise InvalidInput("--requests", requests, "only used with --lengths FILE")
    text, source = read_input(path, "--buckets")
    rows = model.read_bucket_csv(text, source=source, calls_required=lengths is None)
    if lengths is None:
        return model.amortize_buckets(rows, source=source)
    sample_text, sample_source = read_input(lengths, "--lengths")
    sample = bucketing.parse_lengths_text(sample_text, source=sample_source)
    n_req = None if requests is None else parse_count(requests, "--requests")
    rows, n = model.calls_from_lengths(rows, sample, requests=n_req, source=source)
    how = f"{sample_source} ({n} lengths" + (f", scaled to {n_req} calls)" if n_req is not None else ")")
    return model.amortize_buckets(rows, source=source, calls_source=how)


def _plot_one(result: model.AmortizeResult, path: Path) -> Path:
    from infer_opt.reports.plots import amortize as plots

    return plots.plot_one_shape(result, model.time_curve(result), path)


def _plot_buckets(result: model.AmortizeBucketsResult, path: Path) -> Path:
    from infer_opt.reports.plots import amortize as plots

    return plots.plot_buckets(result, path)
