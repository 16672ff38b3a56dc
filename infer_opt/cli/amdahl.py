"""``infer-opt amdahl``: end-to-end speedup of a partial optimization."""

from __future__ import annotations

from typing import Any

import typer

from infer_opt.cli.common import option
from infer_opt.cli.output import with_output
from infer_opt.cli.types import Number, Parsed
from infer_opt.cost_models import amdahl as model
from infer_opt.errors import InvalidInput
from infer_opt.results.amdahl import AmdahlResult
from infer_opt.units import parse_float

HELP = """End-to-end speedup when part of the time gets faster (Amdahl's law).

S = 1 / ((1 - Σf) + Σ f/s + a); ceiling 1/((1 - Σf) + a) when the parts become free.

Examples:

  infer-opt amdahl -f 0.4 -s 4

  infer-opt amdahl --part attention=0.35:3 --part mlp=0.4:1.2 --added 0.02

  infer-opt amdahl -f 0.6 --target-speedup 2
"""


class PartType(Parsed):
    """``NAME=F:S`` -> :class:`~infer_opt.cost_models.amdahl.Part` (``S`` may be ``inf``)."""

    name = "NAME=F:S"

    def parse(self, text: str, option: str) -> model.Part:
        name, sep, rest = text.partition("=")
        f_text, sep2, s_text = rest.partition(":")
        if not sep or not sep2 or not name.strip():
            raise InvalidInput(option, text, "expected NAME=FRACTION:SPEEDUP, e.g. attention=0.4:4")
        where = f"{option} {name.strip()}"
        fraction = parse_float(f_text, option=where, low=0, high=1)
        speedup = parse_float(s_text, option=where, low=model.MIN_SPEEDUP, allow_inf=True)
        return model.Part(name.strip(), fraction, speedup)


def _parts(
    fraction: float | None, speedup: float | None, parts: list[Any], target: float | None
) -> list[Any]:
    """The parts to evaluate: ``--part`` items, or one part from ``--fraction``/``--speedup``
    (s = 1 when only ``--target-speedup`` is given: the parts are solved for, not evaluated)."""
    if fraction is None:
        if speedup is not None:
            raise InvalidInput("--speedup", speedup, "needs --fraction (or use --part NAME=F:S)")
        if not parts:
            raise InvalidInput(
                "--fraction", "missing", "give --fraction and --speedup, or one or more --part"
            )
        return parts
    if parts:
        raise InvalidInput("--fraction", fraction, "use either --fraction/--speedup or --part, not both")
    if speedup is None and target is None:
        raise InvalidInput("--speedup", "missing", "give --speedup (or --target-speedup to solve for it)")
    return [model.Part("part", fraction, 1.0 if speedup is None else speedup)]


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
    list[Any] | None, "--part", "-p", parse=PartType(), help="A disjoint part as NAME=F:S (repeatable)."
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
    target: TargetOpt = None,
) -> AmdahlResult:
    parts = _parts(fraction, speedup, list(part or []), target)
    given = fraction is None or speedup is not None
    return model.combined(parts, added=added, target=target, speedup_given=given)


def register(app: typer.Typer) -> None:
    app.command("amdahl", help=HELP)(amdahl)
