"""``infer-opt amdahl``: end-to-end speedup of a partial optimization."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infer_opt.cli.common import CsvOpt, FormatOpt, JsonOpt, MarkdownOpt, OutOpt, PlotOpt, emit
from infer_opt.cost_models import amdahl as model
from infer_opt.errors import InvalidInput
from infer_opt.units import parse_float

HELP = """End-to-end speedup when part of the time gets faster (Amdahl's law).

S = 1 / ((1 - Σf) + Σ f/s + a); ceiling 1/((1 - Σf) + a) when the parts become free.

Examples:

  infer-opt amdahl -f 0.4 -s 4

  infer-opt amdahl --part attention=0.35:3 --part mlp=0.4:1.2 --added 0.02

  infer-opt amdahl -f 0.6 --target 2
"""


def parse_part(text: str) -> model.Part:
    """``NAME=F:S`` -> Part. ``S`` may be ``inf``."""
    name, sep, rest = text.partition("=")
    f_text, sep2, s_text = rest.partition(":")
    if not sep or not sep2 or not name.strip():
        raise InvalidInput("--part", text, "expected NAME=FRACTION:SPEEDUP, e.g. attention=0.4:4")
    fraction = parse_float(f_text, option=f"--part {name}", low=0, high=1)
    speedup = parse_float(s_text, option=f"--part {name}", low=0, low_open=True, allow_inf=True)
    return model.Part(name.strip(), fraction, speedup)


def amdahl(
    fraction: Annotated[
        str | None,
        typer.Option("--fraction", "-f", help="Fraction f of the time that is sped up, in [0, 1]."),
    ] = None,
    speedup: Annotated[
        str | None,
        typer.Option("--speedup", "-s", help="Speedup s of that fraction, > 0 ('inf' = free)."),
    ] = None,
    part: Annotated[
        list[str] | None,
        typer.Option("--part", "-p", help="A disjoint part as NAME=F:S (repeatable)."),
    ] = None,
    added: Annotated[
        str,
        typer.Option("--added", "-a", help="Added overhead as a fraction of the original time, >= 0."),
    ] = "0",
    target: Annotated[
        str | None,
        typer.Option("--target", "-t", help="Solve for the speedup the part(s) need to reach this."),
    ] = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    fmt: FormatOpt = None,
    plot: PlotOpt = None,
) -> None:
    parts = [parse_part(p) for p in part or []]
    if fraction is not None:
        if parts:
            raise InvalidInput("--fraction", fraction, "use either --fraction/--speedup or --part, not both")
        f = parse_float(fraction, option="--fraction", low=0, high=1)
        if speedup is None and target is None:
            raise InvalidInput("--speedup", "missing", "give --speedup (or --target to solve for it)")
        s = (
            1.0
            if speedup is None
            else parse_float(speedup, option="--speedup", low=0, low_open=True, allow_inf=True)
        )
        parts = [model.Part("part", f, s)]
    elif speedup is not None:
        raise InvalidInput("--speedup", speedup, "needs --fraction (or use --part NAME=F:S)")
    if not parts:
        raise InvalidInput("--fraction", "missing", "give --fraction and --speedup, or one or more --part")
    a = parse_float(added, option="--added", low=0)
    x = None if target is None else parse_float(target, option="--target", low=0, low_open=True)
    result = model.combined(parts, added=a, target=x, speedup_given=fraction is None or speedup is not None)
    emit(result, json_out=json_out, out=out, markdown=markdown, csv=csv, fmt=fmt, plot=plot)


def _plot(result: model.AmdahlResult, path: Path) -> Path:
    from infer_opt.reports.plots import amdahl as plots

    return plots.plot(result, model.part_curves(result), path)


def register(app: typer.Typer) -> None:
    app.command("amdahl", help=HELP)(amdahl)
