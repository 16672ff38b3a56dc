"""``infer-opt attention check``: blocked attention and cached-decode mask alignment."""

from __future__ import annotations

from typing import Annotated

import typer

from infer_opt.cli.attention import app
from infer_opt.cli.common import CsvOpt, FormatOpt, JsonOpt, MarkdownOpt, OutOpt, emit
from infer_opt.errors import InvalidInput, RunFailure
from infer_opt.units import parse_int

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


def _count(text: str, option: str, low: int = 1) -> int:
    return parse_int(text, option=option, low=low)


@app.command("check", help=HELP)
def check(
    tq: Annotated[str, typer.Option("--tq", help="New queries T_q in the decode cases (<= T_k).")] = "4",
    tk: Annotated[str, typer.Option("--tk", help="Keys T_k (cached context incl. the new tokens).")] = "128",
    heads: Annotated[str, typer.Option("--heads", help="Attention heads H.")] = "4",
    head_dim: Annotated[str, typer.Option("--head-dim", help="Head dimension d.")] = "32",
    block_size: Annotated[
        str, typer.Option("--block-size", help="Keys per block of the blocked kernel.")
    ] = "32",
    window: Annotated[str, typer.Option("--window", help="Sliding window (keys) of the window case.")] = "48",
    seed: Annotated[str, typer.Option("--seed", help="Seed of the random q, k, v.")] = "0",
    dtype: Annotated[
        str, typer.Option("--dtype", help="Dtype of the torch paths: float32 or float64.")
    ] = "float32",
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    fmt: FormatOpt = None,
) -> None:
    sizes = {
        "tq": _count(tq, "--tq"),
        "tk": _count(tk, "--tk"),
        "heads": _count(heads, "--heads"),
        "head_dim": _count(head_dim, "--head-dim"),
        "block_size": _count(block_size, "--block-size"),
        "window": _count(window, "--window"),
        "seed": _count(seed, "--seed", low=0),
    }
    if sizes["tq"] > sizes["tk"]:
        raise InvalidInput(
            "--tq", tq, f"must be <= --tk = {sizes['tk']} (new queries cannot outnumber the keys)"
        )
    if dtype not in DTYPES:
        raise InvalidInput("--dtype", dtype, f"must be one of {', '.join(DTYPES)}")
    from infer_opt.checks.mask_alignment import check_attention

    result = check_attention(dtype=dtype, **sizes)
    emit(result, json_out=json_out, out=out, markdown=markdown, csv=csv, fmt=fmt)
    if not result.passed:
        failed = sum(not c.passed for c in result.cases)
        raise RunFailure(f"attention check failed: {failed} of {len(result.cases)} rows (see the table)")
