"""``infer-opt predict``: a model step's time from the operator calibration, without running it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from infer_opt.cli.common import AutoDtypeOpt, HfConfigOpt, ModelArg, ThreadsOpt, progress_bar
from infer_opt.cli.output import Outcome, with_output
from infer_opt.cli.profile import BatchOpt, ContextOpt, ModeOpt, NewTokensOpt, SeqLenOpt
from infer_opt.cli.types import Count, InputFile, Parsed

HELP = """Predict one step of a model from the device's operator calibration, without
running it: the operators are recorded on fake tensors (no data, no weights: a 7B
configuration in seconds), each predicted from its family's measured grid
(interpolated in log space; outside the grid extrapolated and flagged), plus the
host cost per dispatched op and per module call.

step = Σ t̂(op) + c_op·n_ops + c_mod·n_module_calls, with the calibration's
uncertainty band; the same tables as profile, labelled predicted.

--sweep batch=1,2,4,... (or seq-len=, context=) predicts each value: step time,
tokens/s, a plot, and where decode turns from bandwidth- to compute-bound.

Examples:

  infer-opt predict gpt2-small --mode decode --context 1024 --threads 1

  infer-opt predict hf:llama --hf-config hidden_size=4096 --hf-config num_hidden_layers=32 --seq-len 2048

  infer-opt predict gpt2-small --mode decode --sweep batch=1,2,4,8,16,32 --plot sweep.png

  infer-opt predict llama-small --calibration other-machine.json --json
"""


class SweepType(Parsed):
    """``batch=1,2,4`` (or ``seq-len=…``, ``context=…``): the parameter and its values."""

    name = "PARAM=V1,V2,…"

    def parse(self, text: str, option: str) -> tuple[str, tuple[int, ...]]:
        from infer_opt.errors import InvalidInput
        from infer_opt.profilers.predict import parse_sweep

        try:
            return parse_sweep(text)
        except InvalidInput as exc:
            raise InvalidInput(option, text, exc.expected) from None


CalibrationOpt = Annotated[
    Path | None,
    typer.Option(
        "--calibration",
        click_type=InputFile(),
        help="Calibration file (infer-opt calibrate --out): predict for the device it was made on. "
        "Default: the one saved for this device, dtype and thread count.",
    ),
]


def resolve(calibration_file: Path | None, dtype: str, threads: int | None) -> tuple[Any, str, Any]:
    """``(calibration, source, torch dtype)``: the file given, else the cached one for the CPU,
    this dtype and thread count; a --dtype that is not the calibration's is an error."""
    import torch

    from infer_opt.errors import InvalidInput
    from infer_opt.profilers import calibration as cal
    from infer_opt.profilers import device as devices

    if threads is not None:
        torch.set_num_threads(threads)
    if calibration_file is not None:
        found, source = cal.resolve_calibration("cpu", "float32", calibration_file)
    else:
        found, source = cal.resolve_calibration("cpu", devices.parse_dtype(dtype, "cpu"))
    wanted = found.dtype if dtype == "auto" else devices.dtype_name(devices.parse_dtype(dtype, "cpu"))
    if wanted != found.dtype:
        raise InvalidInput(
            "dtype", dtype, f"the calibration is for {found.dtype}; calibrate for {wanted} first"
        )
    return found, source, getattr(torch, found.dtype)


@with_output(plot=True)
def predict(
    model: ModelArg = "tiny",
    dtype: AutoDtypeOpt = "auto",
    batch: BatchOpt = 1,
    seq_len: SeqLenOpt = 128,
    mode: ModeOpt = "prefill",
    context: ContextOpt = 128,
    new_tokens: NewTokensOpt = 32,
    calibration: CalibrationOpt = None,
    sweep: Annotated[
        Any,
        typer.Option(
            "--sweep",
            click_type=SweepType(),
            help="Predict over batch=…, seq-len=… or context=… (comma-separated, increasing).",
        ),
    ] = None,
    top: Annotated[
        int, typer.Option("--top", click_type=Count(1, 10_000), help="Rows in the operator table.")
    ] = 15,
    threads: ThreadsOpt = None,
    hf_config: HfConfigOpt = None,
) -> Any:
    from infer_opt.profilers import models
    from infer_opt.profilers import predict as pr

    overrides = models.parse_hf_overrides(list(hf_config or ()))
    found, source, torch_dtype = resolve(calibration, dtype, threads)
    with progress_bar("predict") as update:
        result = pr.predict(
            model, found, calibration_source=source, mode=mode, batch=batch, seq_len=seq_len, context=context,
            new_tokens=new_tokens, dtype=torch_dtype, hf_overrides=overrides, sweep=sweep, progress=update,
        )  # fmt: skip
    return Outcome(result, view={"top": top})


def register(app: typer.Typer) -> None:
    app.command("predict", help=HELP)(predict)
