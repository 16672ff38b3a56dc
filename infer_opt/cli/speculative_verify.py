"""``infer-opt speculative verify``: the speculative sampler preserves the target distribution."""

from __future__ import annotations

from typing import Annotated

import typer

from infer_opt.cli.common import CsvOpt, FormatOpt, JsonOpt, MarkdownOpt, OutOpt, emit
from infer_opt.cli.speculative import app
from infer_opt.errors import RunFailure
from infer_opt.units import parse_float, parse_int

#: more trials than this would run for minutes; the checks need far fewer
MAX_TRIALS = 10_000_000

HELP = """Exactness check of the speculative sampler: its output is distributed exactly as the target p.

Accept x ~ q if u < p(x)/q(x); at the first rejection sample r = max(p - q, 0)/Z; all accepted: bonus ~ p.

Random per-position p, q over V tokens (seeded Dirichlet). For the exact rule and for the wrong
rule "after a rejection, resample from p": exact enumeration of one round's output against the
target, and a seeded Monte-Carlo with chi-square tests (significance 1e-3). Measured acceptance
per position and committed tokens per round are compared with the calculators' A = Σ min(p, q)
and E[N] = Σ_i Π_{j≤i} α_j (within 5 standard errors). Exit code 1 when the exact rule fails,
the wrong rule is not detected, or the rates disagree.

Examples:

  infer-opt speculative verify

  infer-opt speculative verify --vocab 6 --k 4 --trials 100000 --alpha-target 0.8 --json
"""


@app.command("verify", help=HELP)
def verify(
    vocab: Annotated[str, typer.Option("--vocab", help="Vocabulary size V, >= 2.")] = "4",
    k: Annotated[str, typer.Option("--k", help="Draft length k, >= 1.")] = "3",
    trials: Annotated[str, typer.Option("--trials", help="Monte-Carlo rounds per rule.")] = "20000",
    seed: Annotated[str, typer.Option("--seed", help="Seed of p, q and the sampler.")] = "0",
    alpha_target: Annotated[
        str | None,
        typer.Option("--alpha-target", help="Tune each q_i to this acceptance A(p_i, q_i), in (0, 1)."),
    ] = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    fmt: FormatOpt = None,
) -> None:
    v = parse_int(vocab, option="--vocab", low=2)
    kk = parse_int(k, option="--k", low=1)
    n = parse_int(trials, option="--trials", low=1, high=MAX_TRIALS)
    s = parse_int(seed, option="--seed", low=0)
    a = None
    if alpha_target is not None:
        a = parse_float(alpha_target, option="--alpha-target", low=0, high=1, low_open=True, high_open=True)
    from infer_opt.checks.spec_sampler import verify_sampler

    result = verify_sampler(vocab=v, k=kk, trials=n, seed=s, alpha_target=a)
    emit(result, json_out=json_out, out=out, markdown=markdown, csv=csv, fmt=fmt)
    if not result.passed:
        raise RunFailure("speculative verify failed (see the verdict above)")
