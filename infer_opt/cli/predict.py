"""``infer-opt predict``: a model step's time from the operator calibration, without running it."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer

from infer_opt.cli.common import AutoDtypeOpt, HfConfigOpt, ModelArg, ThreadsOpt, option, progress_bar
from infer_opt.cli.output import Outcome, with_output
from infer_opt.cli.profile import StepShape, TopOpt, ignored_shape_options
from infer_opt.cli.types import Count, InputFile, Parsed
from infer_opt.errors import InvalidInput

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

  infer-opt predict gpt2-small --mode decode --context 1000 --threads 1

  infer-opt predict hf:llama --hf-config hidden_size=4096 --hf-config num_hidden_layers=32 --seq-len 2048

  infer-opt predict gpt2-small --mode decode --sweep batch=1,2,4,8,16,32 --plot sweep.png

  infer-opt predict llama-small --calibration other-machine.json --json
"""


class SweepType(Parsed):
    """``batch=1,2,4`` (or ``seq-len=…``, ``context=…``): the parameter and its values."""

    name = "PARAM=V1,V2,…"
    listed = True
    once = "predict sweeps one parameter, its values in one --sweep (validate --grid takes several)"

    def parse(self, text: str, option: str) -> tuple[str, tuple[int, ...]]:
        from infer_opt.cli.profile import MAX_SIZE
        from infer_opt.errors import InvalidInput
        from infer_opt.profilers.predict import parse_sweep

        try:
            return parse_sweep(text, high=MAX_SIZE)
        except InvalidInput as exc:
            raise InvalidInput(option, text, exc.expected) from None


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
    parse=SweepType(),
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
    from infer_opt.profilers import models
    from infer_opt.profilers import predict as pr
    from infer_opt.profilers.comm import comm_for

    overrides = models.parse_hf_overrides(list(hf_config or ()))
    if comm is not None and tp == 1:
        needs = "prices the collectives of --tp N > 1; give --tp N or drop --comm"
        raise InvalidInput("--comm", str(comm), needs)
    found = pr.calibration_for_run(calibration, dtype, threads, device, trace_ok=True)
    _threads_used(found.calibration, calibration, threads)
    _device_used(found.calibration, calibration, device, threads)
    sweep_comm = (
        None
        if tp == 1
        else comm_for(tp, "cuda" if found.calibration.device.startswith("cuda") else "cpu", comm)
    )
    with progress_bar("predict") as update:
        result = pr.predict(
            model, found.calibration, calibration_source=found.source, **asdict(shape),
            dtype=found.dtype, hf_overrides=overrides, sweep=sweep, progress=update,
            tp=tp, comm=sweep_comm,
        )  # fmt: skip
    ignored = ignored_shape_options((shape.mode,))
    return Outcome(result, view={"top": top}, warnings=(*found.notices, *ignored))


def _threads_used(found: Any, given: Path | None, threads: int | None) -> None:
    """A calibration file predicts for the thread count it was made at: a --threads that differs
    would be ignored, so it is refused."""
    if given is None or threads is None or found.device.startswith("cuda") or found.threads == threads:
        return
    raise InvalidInput(
        "--threads",
        threads,
        f"{given} was calibrated at {found.threads} thread(s), and a prediction is for its thread count: "
        f"drop --threads, or calibrate at --threads {threads}",
    )


def _device_used(found: Any, given: Path | None, device: str, threads: int | None) -> None:
    """A calibration file predicts for the device it was made on: a ``--device`` of another kind
    (cpu for a GPU calibration, cuda for a CPU one) or ``--threads`` with a GPU calibration
    would be ignored, so they are refused."""
    from infer_opt.cli.profile import given as typed

    if given is None:
        return
    gpu = str(found.device).startswith("cuda")
    if gpu and threads is not None:
        raise InvalidInput(
            "--threads",
            threads,
            f"{given} is a calibration of {found.device_name or 'a GPU'}: the prediction is for that GPU, "
            "whose time no CPU thread count changes; drop --threads",
        )
    if "device" in typed(["device"]) and device != "auto" and device.startswith("cuda") != gpu:
        where = f"{found.device_name or 'a GPU'} ({found.device})" if gpu else f"the CPU ({found.device})"
        raise InvalidInput(
            "--device",
            device,
            f"{given} is a calibration of {where}: the prediction is for it; drop --device",
        )


def register(app: typer.Typer) -> None:
    app.command("predict", help=HELP)(predict)
