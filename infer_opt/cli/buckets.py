"""``infer-opt buckets``: padding waste of shape buckets, and the bounds that minimise it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from infer_opt.cli.common import CsvOpt, FormatOpt, JsonOpt, MarkdownOpt, OutOpt, PlotOpt, emit
from infer_opt.cost_models import bucketing as model
from infer_opt.errors import InvalidInput
from infer_opt.units import parse_duration, parse_float

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


def read_input(path: str, option: str) -> tuple[str, str]:
    """The text of ``path`` (``-`` = stdin) and a name for it in messages."""
    if path == "-":
        return sys.stdin.read(), "stdin"
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8"), p.name
    except FileNotFoundError:
        raise InvalidInput(option, path, "file does not exist") from None
    except IsADirectoryError:
        raise InvalidInput(option, path, "is a directory, expected a file") from None
    except UnicodeDecodeError:
        raise InvalidInput(option, path, "not a UTF-8 text file") from None
    except OSError as exc:
        raise InvalidInput(option, path, f"cannot read it ({exc.strerror})") from None


def parse_count(text: str, option: str, low: int | None = 1) -> int:
    """A whole number, >= ``low`` when given (``1e6`` accepted)."""
    value = parse_float(text, option=option, low=low)
    if value != int(value):
        raise InvalidInput(option, text, "must be a whole number" + (f" >= {low}" if low is not None else ""))
    return int(value)


def parse_bounds(text: str, option: str = "--bounds") -> tuple[int, ...]:
    """``"128,256,512"`` -> (128, 256, 512): positive integers, strictly increasing."""
    items = [item for item in text.replace(" ", "").split(",") if item]
    if not items:
        raise InvalidInput(option, text, "expected comma-separated integer bounds, e.g. 128,256,512")
    return model.validate_bounds([parse_count(item, option) for item in items], option)


def buckets(
    file: Annotated[
        str,
        typer.Argument(
            metavar="FILE",
            help="Length sample: one integer per line, or CSV with 'length' (optional 'count'); '-' = stdin.",
        ),
    ],
    bounds: Annotated[
        str | None,
        typer.Option("--bounds", "-b", help="Bucket upper bounds, strictly increasing: 128,256,512."),
    ] = None,
    batch_size: Annotated[
        str | None,
        typer.Option("--batch-size", "-n", help="Batch size n: batches pad to their longest member."),
    ] = None,
    allow_unbucketed: Annotated[
        bool,
        typer.Option(
            "--allow-unbucketed",
            help="Report lengths above the largest bound apart (counted, left out of the expectations).",
        ),
    ] = False,
    optimize: Annotated[
        str | None, typer.Option("--optimize", "-k", help="Find the K bounds with the least expected waste.")
    ] = None,
    cost: Annotated[
        str,
        typer.Option("--cost", help="Waste --optimize minimises: linear (tokens) or quadratic (tokens²)."),
    ] = "linear",
    compile_cost: Annotated[
        str | None,
        typer.Option("--compile-cost", help="With --optimize: compile cost per bucket (bare number = s)."),
    ] = None,
    token_cost: Annotated[
        str | None,
        typer.Option(
            "--token-cost", help="With --optimize: time per padded token (token² if quadratic; bare = µs)."
        ),
    ] = None,
    requests: Annotated[
        str | None,
        typer.Option(
            "--requests", help="Requests the compile cost is spread over (default: the sample size)."
        ),
    ] = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    fmt: FormatOpt = None,
    plot: PlotOpt = None,
) -> None:
    if cost not in model.COST_POWER:
        raise InvalidInput("--cost", cost, "expected linear or quadratic")
    given = parse_bounds(bounds) if bounds is not None else None
    n = parse_count(batch_size, "--batch-size") if batch_size is not None else 1
    k = parse_count(optimize, "--optimize", low=None) if optimize is not None else None
    c_s = (
        parse_duration(compile_cost, option="--compile-cost", default_unit="s")
        if compile_cost is not None
        else None
    )
    t_s = (
        parse_duration(token_cost, option="--token-cost", default_unit="us")
        if token_cost is not None
        else None
    )
    n_req = parse_count(requests, "--requests") if requests is not None else None
    if k is None:
        for option, raw in (
            ("--compile-cost", compile_cost),
            ("--token-cost", token_cost),
            ("--requests", requests),
        ):
            if raw is not None:
                raise InvalidInput(option, raw, "only used with --optimize K")
        if given is None:
            raise InvalidInput("--bounds", "missing", "give --bounds (or --optimize K to design them)")
    text, source = read_input(file, "FILE")
    sample = model.parse_lengths_text(text, source=source)
    if k is None:
        result = model.analyze(sample, given, batch_size=n, allow_unbucketed=allow_unbucketed)
    else:
        result = model.optimize(
            sample,
            k,
            cost=cost,  # type: ignore[arg-type]
            compile_cost_s=c_s,
            token_cost_s=t_s,
            requests=n_req,
            batch_size=n,
            given_bounds=given,
        )
    emit(
        result,
        json_out=json_out,
        out=out,
        markdown=markdown,
        csv=csv,
        fmt=fmt,
        plot=plot,
        plot_fn=lambda res, path: _plot(res, sample, path),
    )


def _plot(result: model.BucketsResult, sample: model.LengthSample, path: Path) -> Path:
    from infer_opt.reports.plots import buckets as plots

    return plots.plot(result, model.plot_data(sample, result.bounds), path)


def register(app: typer.Typer) -> None:
    app.command("buckets", help=HELP)(buckets)
