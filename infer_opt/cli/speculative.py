"""``infer-opt speculative ...``: speculative-decoding calculators and checks.

The group object lives here; its commands may be defined in this module or in sibling
modules that import ``app`` from here (they are imported by :mod:`infer_opt.cli.app`)."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Speculative decoding: expected committed tokens, speedup, acceptance, plan comparison.",
    no_args_is_help=True,
)
