"""``infer-opt kernels``: time the kernel suite (matmul, copy/elementwise, launch floor,
softmax, layer norm, attention variants, fused bias+GELU) on one device and dtype."""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from infer_opt import requests
from infer_opt.cli.common import DeviceOpt, ThreadsOpt, option, progress_bar, runs_option
from infer_opt.cli.output import Outcome, Output, with_output
from infer_opt.cli.types import Choice, Duration, InputFile, Reps, Warmup
from infer_opt.errors import Interrupted, RunFailure

if TYPE_CHECKING:
    from infer_opt.results.kernels import KernelSuiteResult

HELP = """Time real kernels with known FLOPs F and minimum bytes Q: matmul sweep (compute
bound), copy/add/scale sweep (bandwidth bound), tiny adds (launch floor), softmax, layer
norm, attention explicit vs blocked (online softmax) vs SDPA, eager vs torch.compile bias+GELU.

achieved FLOP/s = F / t, bytes/s = Q / t, t = median over repetitions (first call timed apart).

Optimized variants are checked against their reference output before they are timed.
Results are saved after every case (--out), so an interrupt keeps what finished, and
--resume FILE goes on from there.

--runs N makes N independent passes over the suite (each case with its own warm-up, the
case order rotated per pass) and keeps every run's median: one run is a quick look; use
--runs 3 or more for anything you will compare, since infer-opt compare tests a change
against the spread between runs (or alternate two commands with infer-opt ab).

Examples:

  infer-opt kernels --suite quick

  infer-opt kernels --suite quick --threads 1 --runs 3 --out base.json

  infer-opt kernels --device cuda --dtype bfloat16 --l2-flush --out kernels.json

  infer-opt kernels --only matmul --only copy --reps auto

  infer-opt kernels --runs 3 --resume base.json
"""


DtypeOpt = option(
    str,
    "--dtype",
    parse=Choice(("auto", "float32", "bfloat16", "float16")),
    help="auto (float32 on CPU, bfloat16 on CUDA, as every command), float32, bfloat16 or float16.",
)
SuiteOpt = option(
    str,
    "--suite",
    parse=Choice(("quick", "full")),
    help="quick (10-20 s on a 2-core CPU, plus ~15 s for a first torch.compile) or full (larger sweeps).",
)
FlushOpt = option(
    bool,
    "--l2-flush/--no-l2-flush",
    help="Write a buffer larger than the GPU's L2 (CPU: last-level cache) before each "
    "repetition, outside the timed region, so inputs come from DRAM/HBM.",
)
WarmupOpt = option(
    Any,
    "--warmup",
    parse=Warmup(requests.MAX_KERNEL_REPS, requests.MAX_WARMUP_S),
    help="Warm-up calls before timing: a count (5) or a duration (200ms).",
)
RepsOpt = option(
    Any,
    "--reps",
    parse=Reps(requests.MAX_KERNEL_REPS),
    help="Timed repetitions per case, or 'auto': repeat until IQR/median < 5% (--max-time caps).",
)
MaxTimeOpt = option(
    float | None,
    "--max-time",
    parse=Duration(allow_zero=False, most_s=24 * 3600.0),
    help="Cap on timed repetitions per case, e.g. 2s.",
)


RunsOpt = runs_option(
    "Independent passes (own warm-up, rotated order). 1 for a look; 3 or more for anything you will compare."
)


def _say(line: str) -> None:
    typer.echo(line, err=True)


def resume_command(argv: list[str], file: str) -> str:
    """The command line that goes on from ``file``: this one with ``--resume FILE`` (an
    ``--out`` or ``--resume`` of that file dropped, since resuming saves back to it)."""
    out: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg in ("--out", "-o", "--resume") and i + 1 < len(argv) and argv[i + 1] == file:
            skip = True
            continue
        if arg in (f"--out={file}", f"--resume={file}"):
            continue
        out.append(arg)
    return shlex.join(["infer-opt", "kernels", *out, "--resume", file])


def _incomplete(result: KernelSuiteResult, output: Output) -> Interrupted | RunFailure:
    """Ctrl-C (:class:`Interrupted`, exit 130) or a sweep the device stopped (:class:`RunFailure`,
    exit 1): what finished, where it is saved, and the command that goes on from there."""
    files = [str(p) for p in output.out if str(p) != "-" and str(p).lower().endswith(".json")]
    done = sum(1 for r in result.rows if r.runs >= result.runs or r.time_s is None)
    what = f"{done} of the cases measured in all {result.runs} runs" if result.runs > 1 else f"{done} case(s)"
    stopped = [w for w in result.warnings if w.code == "sweep_stopped"]
    head = f"stopped at {stopped[0]['case']} (see the warning)" if stopped else "interrupted"
    if not files:
        text = f"{head}: {what}, not saved (give --out FILE.json to keep finished cases)"
    else:
        args = sys.argv[2:] if len(sys.argv) > 1 and sys.argv[1] == "kernels" else []
        text = f"{head}: {what} saved to {files[0]}; go on with: {resume_command(args, files[0])}"
    return RunFailure(text) if stopped else Interrupted(text)


OnlyOpt = option(
    list[str] | None,
    "--only",
    help="Run only these kernels or families (repeatable, or comma-separated).",
)
CudaGraphsOpt = option(
    bool,
    "--cuda-graphs",
    help="Also time each kernel as CUDA-graph replays (10 calls per graph; one with "
    "--l2-flush, so every call is flushed): the gap to eager timing is launch overhead. "
    "CUDA only.",
)
ResumeOpt = option(
    Path | None,
    "--resume",
    parse=InputFile(),
    help="Skip the cases (and runs) this saved kernels result (JSON) holds; saves back to it. "
    "Same device, threads, dtype, suite and timing options, or it is refused.",
)


@with_output()
def kernels_command(
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    suite: SuiteOpt = "quick",
    only: OnlyOpt = None,
    l2_flush: FlushOpt = False,
    cuda_graphs: CudaGraphsOpt = False,
    warmup: WarmupOpt = "5",
    reps: RepsOpt = "20",
    max_time: MaxTimeOpt = None,
    threads: ThreadsOpt = None,
    runs: RunsOpt = 1,
    resume: ResumeOpt = None,
    *,
    output: Output,
) -> Outcome:
    from infer_opt.profilers import kernels

    request = requests.KernelsRequest(
        device=device, dtype=dtype, suite=suite, only=only, l2_flush=l2_flush, cuda_graphs=cuda_graphs,
        warmup=warmup, reps=reps, max_time=max_time, threads=threads, runs=runs, resume=resume,
    )  # fmt: skip
    if resume is not None and resume not in output.out:
        output = replace(output, out=(*output.out, resume))
    with progress_bar("kernels") as update:
        result = kernels.run(request, progress=update, on_row=output.save_partial, said=_say)
    also = () if resume is None else (resume,)
    if not result.complete:
        return Outcome(result, error=_incomplete(result, output), also_write=also)
    failed = [row.key for row in result.rows if row.passed is False]
    error = RunFailure(f"output check failed for {', '.join(failed)} (see the table)") if failed else None
    return Outcome(result, error=error, also_write=also)


def register(app: typer.Typer) -> None:
    app.command("kernels", help=HELP)(kernels_command)
