"""``infer-opt attention ...``: attention memory/traffic calculators and exactness checks.

The group object lives here; its commands may be defined in this module or in sibling
modules that import ``app`` from here (they are imported by :mod:`infer_opt.cli.app`)."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Attention: score-matrix memory and traffic, window truncation bound, exactness checks.",
    no_args_is_help=True,
)
