"""``infer-opt predict``: a model step's time from the operator calibration, without running it."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer

from infer_opt.cli.common import AutoDtypeOpt, HfConfigOpt, ModelArg, ThreadsOpt, option, progress_bar
from infer_opt.cli.output import Outcome, with_output
from infer_opt.cli.profile import StepShape, TopOpt, ignored_shape_options
from infer_opt.cli.types import Count, InputFile, Sweep
from infer_opt.requests import PredictRequest

HELP = """Predict one step of a model from the device's operator calibration, without
running it: the operators are recorded on fake tensors (no data, no weights: a 7B
configuration in seconds), each predicted from its family's measured grid
(interpolated in log space; outside the grid extrapolated and flagged), plus the
host cost per dispatched op and per module call.

On a CPU calibration: step = Σ t̂(op) + c_op·n_ops + c_mod·n_module_calls. On a GPU
calibration (calibrate --from-trace): the step is replayed — the host issues each op
after its fitted cost (c_launch + c_python·Python calls + c_op·aten ops before it),
each kernel starts when its launch arrives and its stream is free — and the report
says whether the host or the device set it. With the calibration's uncertainty band;
the same tables as profile, labelled predicted.

--sweep batch=1,2,4,... (or seq-len=, context=) predicts each value: step time,
tokens/s, a plot, and where decode turns from bandwidth- to compute-bound.

Examples:

  infer-opt predict gpt2-small --mode decode --context 1000 --threads 1

  infer-opt predict hf:llama --hf-config hidden_size=4096 --hf-config num_hidden_layers=32 --seq-len 2048

  infer-opt predict gpt2-small --mode decode --sweep batch=1,2,4,8,16,32 --plot sweep.png

  infer-opt predict llama-small --calibration other-machine.json --json

  infer-opt predict hf:vit:base --batch 4 --calibration h100-from-traces.json
"""


TpOpt = option(
    int,
    "--tp",
    parse=Count(1, 64),
    help="Predict the step sharded over N tensor-parallel ranks (built-ins): each rank's compute from "
    "the calibration, the collectives from the comm sweep over N ranks.",
)
CommOpt = option(
    Path | None,
    "--comm",
    parse=InputFile(),
    help="With --tp: the comm sweep (infer-opt comm --out FILE.json) to price the collectives with. "
    "Default: the one saved for N ranks.",
)


CalibrationOpt = option(
    Path | None,
    "--calibration",
    parse=InputFile(),
    help="Calibration file (infer-opt calibrate --out): predict for the device it was made on. "
    "Default: the one saved for this device, dtype and thread count.",
)


PredictDeviceOpt = option(
    str,
    "--device",
    help="Whose cached calibration to use: auto (CUDA if available), cpu, cuda or cuda:N (or give "
    "--calibration FILE).",
)
SweepOpt = option(
    Any,
    "--sweep",
    parse=Sweep(),
    help="Predict over batch=…, seq-len=… or context=… (comma-separated, increasing; one "
    "parameter: validate --grid takes several).",
)


@with_output(plot=True)
def predict(
    model: ModelArg = "tiny",
    device: PredictDeviceOpt = "auto",
    dtype: AutoDtypeOpt = "auto",
    shape: StepShape = StepShape(),
    calibration: CalibrationOpt = None,
    sweep: SweepOpt = None,
    top: TopOpt = 15,
    threads: ThreadsOpt = None,
    hf_config: HfConfigOpt = None,
    tp: TpOpt = 1,
    comm: CommOpt = None,
) -> Any:
    from infer_opt.profilers import predict as pr

    request = PredictRequest(
        model, device=device, dtype=dtype, **asdict(shape), calibration=calibration, sweep=sweep,
        threads=threads, hf_config=hf_config, tp=tp, comm=comm,
    )  # fmt: skip
    notices: list[Any] = []
    with progress_bar("predict") as update:
        result = pr.run(request, progress=update, noticed=notices.append)
    ignored = ignored_shape_options((shape.mode,))
    return Outcome(result, view={"top": top}, warnings=(*notices, *ignored))


def register(app: typer.Typer) -> None:
    app.command("predict", help=HELP)(predict)
