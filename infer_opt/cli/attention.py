"""``infer-opt attention ...``: attention memory/traffic calculators and exactness checks.

The group object lives here; its commands may be defined in this module or in sibling
modules that import ``app`` from here (they are imported by :mod:`infer_opt.cli.app`)."""

from __future__ import annotations

from typing import Annotated

import typer

from infer_opt.cli.common import CsvOpt, FormatOpt, JsonOpt, MarkdownOpt, OutOpt, emit
from infer_opt.cost_models import attention as model
from infer_opt.units import parse_float, parse_int

app = typer.Typer(
    help="Attention: score-matrix memory and traffic, window truncation bound, exactness checks.",
    no_args_is_help=True,
)

MEMORY_HELP = """Memory of the explicit T_q × T_k score matrix and the estimated HBM traffic of
explicit vs tiled (FlashAttention-style) attention; the FLOPs are the same for both.

score bytes = B·H·T_q·T_k·bytes; FLOPs = 4·B·H·T_q·T_k·d (QKᵀ and PV, softmax not included).

Example:

  infer-opt attention memory --tq 8192 --tk 8192 --heads 32 --batch 1 --head-dim 128 --dtype float16
"""


def memory(
    tq: Annotated[str, typer.Option("--tq", help="Query length T_q.", show_default=False)],
    tk: Annotated[str, typer.Option("--tk", help="Key length T_k.", show_default=False)],
    heads: Annotated[str, typer.Option("--heads", help="Attention heads H.", show_default=False)],
    head_dim: Annotated[str, typer.Option("--head-dim", help="Head dimension d.", show_default=False)],
    batch: Annotated[str, typer.Option("--batch", help="Batch size B.")] = "1",
    dtype: Annotated[
        str,
        typer.Option("--dtype", help="float32, float16, bfloat16, float64, fp8, or bytes per element."),
    ] = "float16",
    causal: Annotated[
        bool,
        typer.Option(
            "--causal",
            help="Causal mask: FLOPs count only visible pairs (a kernel that skips masked blocks); "
            "the explicit path still materialises the full matrix.",
        ),
    ] = False,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    fmt: FormatOpt = None,
) -> None:
    result = model.attention_memory(
        tq=parse_int(tq, option="--tq", low=1),
        tk=parse_int(tk, option="--tk", low=1),
        heads=parse_int(heads, option="--heads", low=1),
        batch=parse_int(batch, option="--batch", low=1),
        head_dim=parse_int(head_dim, option="--head-dim", low=1),
        dtype=dtype,
        causal=causal,
    )
    emit(result, json_out=json_out, out=out, markdown=markdown, csv=csv, fmt=fmt)


WINDOW_HELP = """Bound on the output error of sliding-window (or any key-dropping) attention.

If the dropped keys carry softmax mass δ < 1 and every value vector has norm ≤ M, then
‖o - o'‖ ≤ 2·δ·M (o' renormalises the kept weights).

Example:

  infer-opt attention window --dropped-mass 0.01 --value-norm 4
"""


def window(
    dropped_mass: Annotated[
        str,
        typer.Option(
            "--dropped-mass", help="δ: softmax mass of the dropped keys, in [0, 1).", show_default=False
        ),
    ],
    value_norm: Annotated[
        str,
        typer.Option(
            "--value-norm", help="M: a bound on every value vector's norm, >= 0.", show_default=False
        ),
    ],
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    fmt: FormatOpt = None,
) -> None:
    delta = parse_float(dropped_mass, option="--dropped-mass", low=0, high=1, high_open=True)
    norm = parse_float(value_norm, option="--value-norm", low=0)
    emit(model.window_bound(delta, norm), json_out=json_out, out=out, markdown=markdown, csv=csv, fmt=fmt)


app.command("memory", help=MEMORY_HELP)(memory)
app.command("window", help=WINDOW_HELP)(window)
