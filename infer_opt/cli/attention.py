"""``infer-opt attention ...``: attention memory/traffic calculators and exactness checks.

The group object lives here; its commands may be defined in this module or in sibling
modules that import ``app`` from here (they are imported by :mod:`infer_opt.cli.app`)."""

from __future__ import annotations

from typing import Any

import typer

from infer_opt.cli.common import option
from infer_opt.cli.output import with_output
from infer_opt.cli.types import Count, Number
from infer_opt.cost_models import attention as model
from infer_opt.requests import AttentionMemoryRequest, AttentionWindowRequest
from infer_opt.results.attention import AttentionMemoryResult, WindowBoundResult

#: a sequence, head count or batch beyond this is not a model anyone runs (and would overflow)
MAX_DIM = 1 << 30

app = typer.Typer(
    help="Attention: score-matrix memory and traffic, window truncation bound, exactness checks.",
    no_args_is_help=True,
    add_completion=False,
)

MEMORY_HELP = """Memory of the explicit T_q × T_k score matrix and the estimated HBM traffic of
explicit vs tiled (FlashAttention-style) attention; the FLOPs are the same for both.

score bytes = B·H·T_q·T_k·bytes; FLOPs = 4·B·H·T_q·T_k·d (QKᵀ and PV, softmax not included).

Example:

  infer-opt attention memory --tq 8192 --tk 8192 --heads 32 --batch 1 --head-dim 128 --dtype float16
"""


def _size(flag: str, help_text: str) -> Any:
    return option(int, flag, parse=Count(1, MAX_DIM), help=help_text, show_default=False)


BatchOpt = option(int, "--batch", parse=Count(1, MAX_DIM), help="Batch size B.")
DtypeOpt = option(str, "--dtype", help="float32, float16, bfloat16, float64, fp8, or bytes per element.")
CausalOpt = option(
    bool,
    "--causal",
    help="Causal mask: FLOPs count only visible pairs (a kernel that skips masked blocks); "
    "the explicit path still materialises the full matrix.",
)
TqOpt = _size("--tq", "Query length T_q.")
TkOpt = _size("--tk", "Key length T_k.")
HeadsOpt = _size("--heads", "Attention heads H.")
HeadDimOpt = _size("--head-dim", "Head dimension d.")


@with_output()
def memory(
    tq: TqOpt,
    tk: TkOpt,
    heads: HeadsOpt,
    head_dim: HeadDimOpt,
    batch: BatchOpt = 1,
    dtype: DtypeOpt = "float16",
    causal: CausalOpt = False,
) -> AttentionMemoryResult:
    request = AttentionMemoryRequest(
        tq=tq, tk=tk, heads=heads, head_dim=head_dim, batch=batch, dtype=dtype, causal=causal
    )
    return model.run_memory(request)


WINDOW_HELP = """Bound on the output error of sliding-window (or any key-dropping) attention.

If the dropped keys carry softmax mass δ < 1 and every value vector has norm ≤ M, then
‖o - o'‖ ≤ 2·δ·M (o' renormalises the kept weights).

Example:

  infer-opt attention window --dropped-mass 0.01 --value-norm 4
"""


DroppedMassOpt = option(
    float,
    "--dropped-mass",
    parse=Number(0, 1, high_open=True),
    help="δ: softmax mass of the dropped keys, in [0, 1).",
    show_default=False,
)
ValueNormOpt = option(
    float,
    "--value-norm",
    parse=Number(0),
    help="M: a bound on every value vector's norm, >= 0.",
    show_default=False,
)


@with_output()
def window(
    dropped_mass: DroppedMassOpt,
    value_norm: ValueNormOpt,
) -> WindowBoundResult:
    return model.run_window(AttentionWindowRequest(dropped_mass, value_norm))


app.command("memory", help=MEMORY_HELP)(memory)
app.command("window", help=WINDOW_HELP)(window)
