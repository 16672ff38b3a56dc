"""``infer-opt speculative verify``: the speculative sampler preserves the target distribution."""

from __future__ import annotations

from infer_opt.cli.common import option, seed_option
from infer_opt.cli.output import Outcome, with_output
from infer_opt.cli.speculative import app
from infer_opt.cli.types import Count, Number
from infer_opt.errors import RunFailure
from infer_opt.requests import MAX_TRIALS, MAX_VERIFY_K, MAX_VOCAB, SpeculativeVerifyRequest

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


VocabOpt = option(int, "--vocab", parse=Count(2, MAX_VOCAB), help="Vocabulary size V, >= 2.")
KOpt = option(int, "--k", parse=Count(1, MAX_VERIFY_K), help="Draft length k, >= 1.")
TrialsOpt = option(int, "--trials", parse=Count(1, MAX_TRIALS), help="Monte-Carlo rounds per rule.")
SeedOpt = seed_option("p, q and the sampler")
AlphaTargetOpt = option(
    float | None,
    "--alpha-target",
    parse=Number(0, 1, low_open=True, high_open=True),
    help="Tune each q_i to this acceptance A(p_i, q_i), in (0, 1).",
)


@app.command("verify", help=HELP)
@with_output()
def verify(
    vocab: VocabOpt = 4,
    k: KOpt = 3,
    trials: TrialsOpt = 20000,
    seed: SeedOpt = 0,
    alpha_target: AlphaTargetOpt = None,
) -> Outcome:
    from infer_opt.checks.speculative_sampler import run

    request = SpeculativeVerifyRequest(vocab=vocab, k=k, trials=trials, seed=seed, alpha_target=alpha_target)
    result = run(request)
    error = None if result.passed else RunFailure("speculative verify failed (see the verdict above)")
    return Outcome(result, error=error)
