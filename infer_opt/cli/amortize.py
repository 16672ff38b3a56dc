"""``infer-opt amortize``: does a compile cost pay for itself, for one shape or per bucket?

A group that computes when called without a subcommand, so that later subcommands
(``infer-opt amortize measure``) can join it."""

from __future__ import annotations

from pathlib import Path

import typer

from infer_opt.cli.common import option
from infer_opt.cli.output import Outcome, with_output
from infer_opt.cli.types import Count, Duration, InputFile
from infer_opt.cost_models import amortization as model
from infer_opt.requests import AmortizeRequest

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
) -> Outcome | None:
    if ctx.invoked_subcommand is not None:
        return None
    given = (compile_cost, eager, compiled, calls, buckets, lengths, requests)
    if all(v is None for v in given):
        import contextlib

        from infer_opt.cli.output import tool_stdout

        with contextlib.redirect_stdout(tool_stdout()):  # rich prints the help as it formats it
            typer.echo(ctx.get_help())
        raise typer.Exit(0)
    result, notices = model.run(
        AmortizeRequest(*given[:4], buckets=buckets, lengths=lengths, requests=requests)
    )
    return Outcome(result, warnings=notices)
