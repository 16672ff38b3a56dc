"""``infer-opt calibrate``: the operator-level calibration that ``predict`` and ``validate`` use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infer_opt.cli.common import AutoDtypeOpt, ThreadsOpt, argument, option, progress_bar
from infer_opt.cli.output import Outcome, Output, with_output
from infer_opt.cli.types import Choice, Count, InputFile
from infer_opt.cli.validate_trace import FromTraceOpt
from infer_opt.notices import Notice
from infer_opt.requests import CalibrateRequest

HELP = """Calibrate the device's operators for predict and validate: matmuls (linear
with and without bias, row-major weights, batched) over a log-spaced (M, N, K)
grid with skinny decode shapes, attention (causal, unmasked, decode over long
caches, masked) over (B·H, T, d), norms, softmax, elementwise ops and
reductions, copies, cat, embedding and views — per dtype and thread count — and
the host cost per dispatched op and per nn.Module call.

Each case is checked against a float64 reference, then timed as profile times
operators (torch.profiler, per aten call), with its weights warm and cold, and
small ops also after a read of eight L2s and the smallest after a flush of the
last-level cache (their dispatch context in a step). The grid
is generic (the shapes used are in the file). Saved to the cache for this
device, dtype and thread count after every group (and to --out FILE.json, which
predict --calibration reads on another machine); --continue continues an
interrupted run of the same --shapes (with none saved it says so and starts anew);
--only GROUP measures those groups again in the cached
calibration of the same grid (their points replace its own). About 3 minutes
at --threads 1 on a quiet 2-core Xeon, 5-6 on a 2-core EPYC of half its speed.

Examples:

  infer-opt calibrate --threads 1

  infer-opt calibrate --threads 1 --out cpu-1t.json

  infer-opt calibrate --continue

  infer-opt calibrate --only linear --only host --shapes tiny

  infer-opt calibrate --from-trace a.json.gz --from-trace b.json.gz --out h100.json

  infer-opt calibrate --from-trace bert.json.gz vit.json.gz owlv2.json.gz --out h100.json
"""

GROUP_NAMES = ("linear", "addmm_nn", "bmm", "sdpa", "norms", "elementwise", "memory", "views", "host")


DeviceOpt = option(
    str,
    "--device",
    help="auto (CUDA if available), cpu, cuda or cuda:N; with --from-trace, the traces' GPU "
    "(h100, mi250 …) when their deviceProperties do not name it.",
)
OnlyOpt = option(
    list[str] | None, "--only", help=f"Measure only these groups (repeatable): {', '.join(GROUP_NAMES)}."
)
ShapesOpt = option(
    str,
    "--shapes",
    parse=Choice(("standard", "tiny")),
    help="standard, or tiny (a few shapes per group: a smoke test, not one to predict with).",
)
RepsOpt = option(int, "--reps", parse=Count(3, 1000), help="Profiled repetitions per shape.")
ContinueOpt = option(bool, "--continue", help="Continue the saved run: skip the groups it finished.")
TraceArg = argument(
    list[Path] | None,
    metavar="TRACE",
    parse=InputFile(),
    help="More traces for --from-trace (--from-trace traces/h100_*.json.gz: a shell glob).",
    show_default=False,
)


@with_output()
def calibrate(
    device: DeviceOpt = "auto",
    dtype: AutoDtypeOpt = "auto",
    threads: ThreadsOpt = None,
    only: OnlyOpt = None,
    shapes: ShapesOpt = "standard",
    reps: RepsOpt = 5,
    continue_: ContinueOpt = False,
    from_trace: FromTraceOpt = None,
    trace: TraceArg = None,
    *,
    output: Output,
) -> Any:
    if trace and not from_trace:
        from infer_opt.errors import InvalidInput

        raise InvalidInput("TRACE", str(trace[0]), "trace files are read with --from-trace FILE...")
    if from_trace:
        from infer_opt.cli.validate_trace import from_traces

        from_trace = [*from_trace, *(trace or [])]

        used = {"--dtype": dtype != "auto", "--threads": threads is not None}
        used |= {"--only": bool(only), "--shapes": shapes != "standard", "--continue": continue_}
        return from_traces(from_trace, given=used, device=device)
    from infer_opt.profilers import calibration

    request = CalibrateRequest(
        device=device, dtype=dtype, threads=threads, only=only, shapes=shapes, reps=reps, continue_=continue_
    )
    notices: list[Notice] = []
    with progress_bar("calibrate") as bar:
        result = calibration.run(
            request, saved=output.out, on_group=output.save_partial, progress=bar, noticed=notices.append,
            said=lambda line: typer.echo(line, err=True),
        )  # fmt: skip
    return Outcome(result, exit_code=0 if result.complete or only else 130, warnings=tuple(notices))


def register(app: typer.Typer) -> None:
    app.command("calibrate", help=HELP)(calibrate)
