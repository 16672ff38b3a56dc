"""``infer-opt amdahl``: end-to-end speedup of a partial optimization."""

from __future__ import annotations

from typing import Any

import typer

from infer_opt.cli.common import option
from infer_opt.cli.output import with_output
from infer_opt.cli.types import Number, PartSpec
from infer_opt.cost_models import amdahl as model
from infer_opt.requests import AmdahlRequest
from infer_opt.results.amdahl import AmdahlResult

HELP = """End-to-end speedup when part of the time gets faster (Amdahl's law).

S = 1 / ((1 - Σf) + Σ f/s + a); ceiling 1/((1 - Σf) + a) when the parts become free.

Examples:

  infer-opt amdahl -f 0.4 -s 4

  infer-opt amdahl --part attention=0.35:3 --part mlp=0.4:1.2 --added 0.02

  infer-opt amdahl -f 0.6 --target-speedup 2
"""


FractionOpt = option(
    float | None,
    "--fraction",
    "-f",
    parse=Number(0, 1),
    help="Fraction f of the time that is sped up, in [0, 1].",
)
SpeedupOpt = option(
    float | None,
    "--speedup",
    "-s",
    parse=Number(model.MIN_SPEEDUP, allow_inf=True),
    help="Speedup s of that fraction, > 0 ('inf' = free).",
)
PartOpt = option(
    list[Any] | None, "--part", "-p", parse=PartSpec(), help="A disjoint part as NAME=F:S (repeatable)."
)
AddedOpt = option(
    float,
    "--added",
    "-a",
    parse=Number(0),
    help="Added overhead as a fraction of the original time, >= 0.",
)
TargetOpt = option(
    float | None,
    "--target-speedup",
    "-t",
    parse=Number(0, low_open=True),
    help="Solve for the speedup the part(s) need to reach this.",
)


@with_output(plot=True)
def amdahl(
    fraction: FractionOpt = None,
    speedup: SpeedupOpt = None,
    part: PartOpt = None,
    added: AddedOpt = 0.0,
    target_speedup: TargetOpt = None,
) -> AmdahlResult:
    request = AmdahlRequest(fraction, speedup, part=part, added=added, target_speedup=target_speedup)
    return model.run(request)


def register(app: typer.Typer) -> None:
    app.command("amdahl", help=HELP)(amdahl)
