"""``infer-opt attention check``: blocked attention and cached-decode mask alignment."""

from __future__ import annotations

from infer_opt.cli.attention import app
from infer_opt.cli.common import option, seed_option
from infer_opt.cli.output import Outcome, with_output
from infer_opt.cli.types import Choice, Count
from infer_opt.errors import RunFailure
from infer_opt.requests import AttentionCheckRequest

DTYPES = ("float32", "float64")

HELP = """Exactness check: blocked online-softmax attention and the causal mask of cached decode.

o_i = Σ_j softmax_j(q_i·k_j/√d)·v_j over keys j ≤ T_k - T_q + i (bottom-right aligned causal mask).

Runs prefill (T_q = T_k), decode of 1 new token and of T_q new tokens, and a sliding-window +
padding case through the blocked kernel (numpy float64 and torch) and PyTorch SDPA, and
compares every output with full softmax attention in float64. A top-left aligned mask (what
SDPA's is_causal=True does when T_q < T_k) is run on purpose and must be flagged as wrong.
Exit code 1 when a path that should match does not, or the misaligned mask goes undetected.

Examples:

  infer-opt attention check

  infer-opt attention check --tq 8 --tk 512 --block-size 64 --window 128 --dtype float64 --json
"""


#: the float64 reference materialises B·H·T_q·T_k scores: keep a check a check, not an hour
MAX_KEYS = 8192
MAX_HEADS = 128
MAX_HEAD_DIM = 1024


TqOpt = option(int, "--tq", parse=Count(1, MAX_KEYS), help="New queries T_q in the decode cases (<= T_k).")
TkOpt = option(int, "--tk", parse=Count(1, MAX_KEYS), help="Keys T_k (cached context incl. the new tokens).")
HeadsOpt = option(int, "--heads", parse=Count(1, MAX_HEADS), help="Attention heads H.")
HeadDimOpt = option(int, "--head-dim", parse=Count(1, MAX_HEAD_DIM), help="Head dimension d.")
BlockSizeOpt = option(
    int, "--block-size", parse=Count(1, MAX_KEYS), help="Keys per block of the blocked kernel."
)
WindowOpt = option(
    int, "--window", parse=Count(1, MAX_KEYS), help="Sliding window (keys) of the window case."
)
SeedOpt = seed_option("the random q, k, v")
DtypeOpt = option(str, "--dtype", parse=Choice(DTYPES), help="Dtype of the torch paths: float32 or float64.")


@app.command("check", help=HELP)
@with_output()
def check(
    tq: TqOpt = 4,
    tk: TkOpt = 128,
    heads: HeadsOpt = 4,
    head_dim: HeadDimOpt = 32,
    block_size: BlockSizeOpt = 32,
    window: WindowOpt = 48,
    seed: SeedOpt = 0,
    dtype: DtypeOpt = "float32",
) -> Outcome:
    from infer_opt.checks.mask_alignment import run

    request = AttentionCheckRequest(
        tq=tq, tk=tk, heads=heads, head_dim=head_dim, block_size=block_size, window=window, seed=seed,
        dtype=dtype,
    )  # fmt: skip
    result = run(request)
    if result.passed:
        return Outcome(result)
    failed = sum(not c.passed for c in result.cases)
    return Outcome(
        result,
        error=RunFailure(f"attention check failed: {failed} of {len(result.cases)} rows (see the table)"),
    )
