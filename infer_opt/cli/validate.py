"""``infer-opt validate``: measure and predict a grid of shapes and report the error honestly."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import typer

from infer_opt.cli.common import (
    AutoDtypeOpt,
    HfConfigOpt,
    ModelArg,
    ThreadsOpt,
    option,
    progress_bar,
    reps_option,
    warmup_option,
)
from infer_opt.cli.output import Outcome, with_output
from infer_opt.cli.predict import CalibrationOpt
from infer_opt.cli.profile import SHAPE_LENGTHS, StepShapes, given, ignored_shape_options
from infer_opt.cli.types import Count, Sweep
from infer_opt.cli.validate_trace import AgainstOpt, UnseenDeviceOpt
from infer_opt.notices import Notice
from infer_opt.requests import ValidateRequest

HELP = """Validate the predictor: on every point of a shape grid, measure the step as
profile does and predict it from the calibration (ops recorded on fake tensors),
then report absolute errors |t̂ − t| / t — per step MAPE and p90 (prefill and
decode apart), per operator over ops of at least 10 µs, the shorter ones as their
own bucket — the worst operators and a parity plot (y = x, ±10%).

Use shapes off the calibration grid (a point mostly on measured shapes is flagged).
Steps are measured at a CPU calibration's own thread count unless --threads says
otherwise (then a warning). A grid parameter no --mode reads is refused: a decode
step varies with --grid context=…, prefill and generate with seq-len=….
On a shared or noisy machine measure the grid twice or more (--passes 2): each
point is then compared at the median of its passes, and the passes with each
other — how far the same step moved between two measurements, the noise floor
under which a prediction error says nothing.

Examples:

  infer-opt validate tiny --threads 1 --grid batch=1,3 --grid seq-len=48,200

  infer-opt validate gpt2-small --threads 1 --mode decode --grid context=200,700 --plot parity.png

  infer-opt validate llama-small --mode prefill --mode decode --grid batch=1,3 --json

  infer-opt validate tiny --threads 1 --grid seq-len=48,200 --passes 3

  infer-opt validate --against held-out.json.gz --calibration h100.json
"""

WarmupOpt = warmup_option("Untimed calls per point (on a CPU for 0.1 s at least, unless 0).")
RepsOpt = reps_option("Timed repetitions per point.")
#: the most passes over a grid (--passes)
MAX_PASSES = 10
PassesOpt = option(
    int,
    "--passes",
    parse=Count(1, MAX_PASSES),
    help="Measure the whole grid this many times, pass after pass; with 2 or more the passes are "
    "compared (the noise floor) and each point is compared at their median.",
)
DeviceOpt = option(
    str,
    "--device",
    help="auto (CUDA if available), cpu, cuda or cuda:N; with --against, the trace's GPU (h100, "
    "mi250 …) when its deviceProperties do not name it.",
)
GridOpt = option(
    list[Any] | None,
    "--grid",
    parse=Sweep(),
    help="Values of batch=…, seq-len=… or context=… (repeatable); the points are their product.",
)


@with_output(plot=True)
def validate(
    model: ModelArg = "tiny",
    device: DeviceOpt = "auto",
    dtype: AutoDtypeOpt = "auto",
    shape: StepShapes = StepShapes(),
    grid: GridOpt = None,
    calibration: CalibrationOpt = None,
    warmup: WarmupOpt = 3,
    reps: RepsOpt = 10,
    passes: PassesOpt = 1,
    threads: ThreadsOpt = None,
    hf_config: HfConfigOpt = None,
    against: AgainstOpt = None,
    unseen_device: UnseenDeviceOpt = False,
) -> Any:
    if against or unseen_device:
        from infer_opt.cli.validate_trace import against_trace
        from infer_opt.errors import InvalidInput

        if not against:
            raise InvalidInput("--unseen-device", "given", "needs --against TRACE")
        if len(against) > 1:  # (the last one alone was taken, the others dropped without a word)
            raise InvalidInput("--against", str(against[1]), "give one trace (run once per trace)")
        used = {"--grid": bool(grid), "--passes": passes != 1, "--threads": threads is not None}
        typed = given(["model", "reps", "warmup", "dtype", "hf_config", "batch", *SHAPE_LENGTHS, "mode"])
        used |= {("MODEL" if n == "model" else "--" + n.replace("_", "-")): True for n in typed}
        return against_trace(against[0], calibration, unseen_device, given=used, device=device)
    from infer_opt.profilers import validate as validate_module

    request = ValidateRequest(
        model, device=device, dtype=dtype, **asdict(shape), grid=grid, calibration=calibration, warmup=warmup,
        reps=reps, passes=passes, threads=threads, hf_config=hf_config,
    )  # fmt: skip
    found: list[Notice] = []
    with progress_bar("validate") as update:
        result = validate_module.run(request, progress=update, noticed=found.append)
    modes = tuple(dict.fromkeys(shape.mode or ["prefill"]))
    gridded = dict(grid or ())
    fixed = [name for name in SHAPE_LENGTHS if name not in gridded]  # a grid's are checked
    flags = ["--" + name.replace("_", "-") for name in given(list(gridded))]
    overridden = [Notice("option_overridden", {"option": flag}) for flag in flags]
    notices = (*found, *ignored_shape_options(modes, fixed), *overridden)
    return Outcome(result, warnings=notices, error=_interrupted(result))


def _interrupted(result: Any) -> Any:
    """Ctrl-C during the grid: the points measured are compared, shown and written (exit 130)."""
    from infer_opt.errors import Interrupted

    stopped = next((n for n in result.warnings if n.code == "validate_interrupted"), None)
    if stopped is None:
        return None
    return Interrupted(
        f"interrupted after {stopped['points']} of {stopped['of']} grid points: the comparison of those "
        "is shown and written to --out"
    )


def register(app: typer.Typer) -> None:
    app.command("validate", help=HELP)(validate)
