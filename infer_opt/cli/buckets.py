"""``infer-opt buckets``: padding waste of shape buckets, and the bounds that minimise it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infer_opt.cli.common import argument, option
from infer_opt.cli.output import Outcome, with_output
from infer_opt.cli.types import Bounds, Choice, Count, Duration, InputFile
from infer_opt.cost_models import bucketing as model
from infer_opt.requests import BucketsRequest
from infer_opt.results.buckets import BucketsResult

#: a batch larger than this is not a batch a server forms
MAX_BATCH = 1 << 20

# Square brackets that open with a lower-case letter are rich markup in help text: escaped.
# Rich keeps single newlines, so each paragraph is one (concatenated) line.
HELP = (
    "Padding waste of shape buckets: each length T runs at b(T), the smallest bound >= T.\n\n"
    "E\\[b(T) - T] / E[T] (linear) and E\\[b(T)² - T²] / E[T²] (dense attention); "
    "a batch of n pads to b(max), P(max <= x) = F(x)^n.\n\n"
    "--optimize K finds the K bounds with the least expected waste exactly (dynamic programming over "
    "the distinct lengths; the largest bound is the longest length), and compares them with "
    "power-of-two and fixed-step ladders.\n\n"
    "With --compile-cost (per bucket; bare number = s) and --token-cost (per padded token, or per "
    "padded token² with --cost quadratic; bare number = µs) it picks K in 1..K minimising "
    "requests·token_cost·E\\[waste] + K·compile_cost, where requests = --requests (default: the "
    "sample size).\n\n"
    "Examples:\n\n"
    "  infer-opt buckets lengths.txt --bounds 128,256,512,1024\n\n"
    "  infer-opt buckets lengths.csv --bounds 512,1024,2048 --batch-size 8\n\n"
    "  infer-opt buckets lengths.txt --optimize 8 --cost quadratic\n\n"
    "  infer-opt buckets lengths.txt --optimize 16 --compile-cost 40s --token-cost 2us --requests 1e7\n"
)


FileArg = argument(
    Path,
    metavar="FILE",
    parse=InputFile(allow_stdin=True),
    help="Length sample: one integer per line, or CSV with 'length' (optional 'count'); '-' = stdin.",
)
BoundsOpt = option(
    Any, "--bounds", "-b", parse=Bounds(), help="Bucket upper bounds, strictly increasing: 128,256,512."
)
BatchSizeOpt = option(
    int,
    "--batch-size",
    "-n",
    parse=Count(1, MAX_BATCH),
    help="Batch size n: batches pad to their longest member.",
)
AllowUnbucketedOpt = option(
    bool,
    "--allow-unbucketed",
    help="Report lengths above the largest bound apart (counted, left out of the expectations).",
)
OptimizeOpt = option(
    int | None, "--optimize", "-k", parse=Count(1), help="Find the K bounds with the least expected waste."
)
CostOpt = option(
    str,
    "--cost",
    parse=Choice(tuple(model.COST_POWER)),
    help="Waste --optimize minimises: linear (tokens) or quadratic (tokens²).",
)
CompileCostOpt = option(
    float | None,
    "--compile-cost",
    parse=Duration("s"),
    help="With --optimize: compile cost per bucket (bare number = s).",
)
TokenCostOpt = option(
    float | None,
    "--token-cost",
    parse=Duration("us"),
    help="With --optimize: time per padded token (token² if quadratic; bare = µs).",
)
RequestsOpt = option(
    int | None,
    "--requests",
    parse=Count(1),
    help="Requests the compile cost is spread over (default: the sample size).",
)


@with_output(plot=True)
def buckets(
    file: FileArg,
    bounds: BoundsOpt = None,
    batch_size: BatchSizeOpt = 1,
    allow_unbucketed: AllowUnbucketedOpt = False,
    optimize: OptimizeOpt = None,
    cost: CostOpt = "linear",
    compile_cost: CompileCostOpt = None,
    token_cost: TokenCostOpt = None,
    requests: RequestsOpt = None,
) -> Outcome:
    request = BucketsRequest(
        file, bounds, batch_size=batch_size, allow_unbucketed=allow_unbucketed, optimize=optimize, cost=cost,
        compile_cost=compile_cost, token_cost=token_cost, requests=requests,
    )  # fmt: skip
    result, sample = model.run(request)
    return Outcome(result, plot=lambda res, path: _plot(res, sample, path), warnings=sample.notices)


def _plot(result: BucketsResult, sample: model.LengthSample, path: Path) -> Path:
    from infer_opt.reports.plots import buckets as plots

    return plots.plot_sample(result, sample, path)


def register(app: typer.Typer) -> None:
    app.command("buckets", help=HELP)(buckets)
