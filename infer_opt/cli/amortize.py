"""``infer-opt amortize``: does a compile cost pay for itself, for one shape or per bucket?

A group that computes when called without a subcommand, so that later subcommands
(``infer-opt amortize measure``) can join it."""

from __future__ import annotations

from pathlib import Path

import typer

from infer_opt.cli.common import option, read_text
from infer_opt.cli.output import Outcome, with_output
from infer_opt.cli.types import Count, Duration, InputFile
from infer_opt.cost_models import amortization as model
from infer_opt.cost_models import bucketing
from infer_opt.errors import InvalidInput
from infer_opt.results import Result

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

app = typer.Typer(help=HELP, invoke_without_command=True, no_args_is_help=False, add_completion=False)


DurationS = Duration("s")
DurationMs = Duration("ms")

#: options ``amortize`` and ``amortize measure`` share: calls per bucket from a length sample
LengthsOpt = option(
    Path | None,
    "--lengths",
    parse=InputFile(allow_stdin=True),
    help="Length sample giving the calls per bucket: one integer per line, or CSV with "
    "length[,count] ('-' = stdin).",
)
RequestsOpt = option(
    int | None, "--requests", parse=Count(1), help="With --lengths: scale the sample to N calls in total."
)


CompileCostOpt = option(
    float | None,
    "--compile-cost",
    "-C",
    parse=DurationS,
    help="One-time compile cost C (bare number = s).",
)
EagerOpt = option(
    float | None, "--eager", parse=DurationMs, help="Eager time per call t_e (bare number = ms)."
)
CompiledOpt = option(
    float | None, "--compiled", parse=DurationMs, help="Compiled time per call t_c (bare number = ms)."
)
CallsOpt = option(int | None, "--calls", "-n", parse=Count(0), help="Calls n the compile is spread over.")
BucketsOpt = option(
    Path | None,
    "--buckets",
    parse=InputFile(allow_stdin=True),
    help="Per-bucket CSV: bucket,compile_s,calls + eager_ms,compiled_ms or saving_ms.",
)


@app.callback(invoke_without_command=True, help=HELP)
@with_output(plot=True)
def amortize(
    ctx: typer.Context,
    compile_cost: CompileCostOpt = None,
    eager: EagerOpt = None,
    compiled: CompiledOpt = None,
    calls: CallsOpt = None,
    buckets: BucketsOpt = None,
    lengths: LengthsOpt = None,
    requests: RequestsOpt = None,
) -> Result | Outcome | None:
    if ctx.invoked_subcommand is not None:
        return None
    one_shape = {"--compile-cost": compile_cost, "--eager": eager, "--compiled": compiled, "--calls": calls}
    if buckets is None and all(v is None for v in (*one_shape.values(), lengths, requests)):
        import contextlib

        from infer_opt.cli.output import tool_stdout

        with contextlib.redirect_stdout(tool_stdout()):  # rich prints the help as it formats it
            typer.echo(ctx.get_help())
        raise typer.Exit(0)
    if buckets is not None:
        given = [name for name, value in one_shape.items() if value is not None]
        if given:
            raise InvalidInput(
                given[0], one_shape[given[0]], "use either --buckets FILE or the one-shape options"
            )
        return _buckets(buckets, lengths, requests)
    for flag, value in (("--lengths", lengths), ("--requests", requests)):
        if value is not None:
            raise InvalidInput(flag, str(value), "only used with --buckets FILE")
    for flag in ("--compile-cost", "--eager", "--compiled"):
        if one_shape[flag] is None:
            raise InvalidInput(flag, "missing", "give --compile-cost, --eager and --compiled (or --buckets)")
    return model.amortize(compile_cost, eager, compiled, calls)  # type: ignore[arg-type]


def _buckets(path: Path, lengths: Path | None, requests: int | None) -> Outcome:
    if requests is not None and lengths is None:
        raise InvalidInput("--requests", requests, "only used with --lengths FILE")
    text, source = read_text(path, "--buckets")
    rows = model.read_bucket_csv(text, source=source, calls_required=lengths is None)
    if lengths is None:
        return Outcome(model.amortize_buckets(rows, source=source), warnings=rows.notices)
    sample_text, sample_source = read_text(lengths, "--lengths")
    sample = bucketing.parse_lengths_text(sample_text, source=sample_source)
    counted, n = model.calls_from_lengths(rows, sample, requests=requests, source=source)
    how = f"{sample_source} ({n} lengths" + (
        f", scaled to {requests} calls)" if requests is not None else ")"
    )
    result = model.amortize_buckets(counted, source=source, calls_source=how)
    return Outcome(result, warnings=rows.notices + sample.notices)
