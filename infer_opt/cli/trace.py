"""``infer-opt trace TRACE...``: the whole analysis of real torch.profiler / Kineto GPU traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infer_opt.cli.common import argument, option, progress_bar
from infer_opt.cli.output import Outcome, Output, with_output
from infer_opt.cli.types import (
    Bandwidth,
    Choice,
    Count,
    FlopRate,
    Fraction,
    InputFile,
    OutputFile,
    TraceInput,
)
from infer_opt.requests import TraceRequest

HELP = """Read torch.profiler / Kineto traces of a GPU (a .json or .json.gz file, several files,
or a folder of one file per rank) and say where the time went (the union timeline per step and
rank: busy, idle, compute, communication, memcpy, sync, overlap), what each op achieved against
the device's roofline (FLOPs and bytes from the recorded shapes, the bound and the fraction of
peak), which GPU time has no formula and why, the collectives (algbw, busbw, α-β), and what an
optimization would buy (each category at its bound, matmuls at a fraction of peak, CUDA graphs,
fusion, perfect overlap; predicted). Every figure is labelled measured, datasheet, fitted or
predicted.

The device comes from the trace's deviceProperties (or, where unambiguous, its SM count, memory
and kernel names); --device, --peak-flops/--peak-bandwidth or --roofline override it. Record
traces with record_shapes=True and a schedule with prof.step() for per-op FLOPs and per-step
figures.

Examples:

  infer-opt trace trace.json.gz

  infer-opt trace traces/ --steps 3-6 --plot trace.png

  infer-opt trace rank0.json.gz --hta-compat --json

  infer-opt trace t.json.gz --device h100 --augment annotated.json.gz

  infer-opt trace t.json.gz --what-if 'gemm*=0.5x' --what-if host=2x --what-if 'sync:aten::item=off'

  infer-opt trace graph_execution.json.gz --capture capture_traces/graph_capture_rank_0.json.gz

CUDA/HIP-graph replays (vLLM, SGLang) carry no ops: give the engine's capture trace with
--capture (or pass both files, or the folder holding capture_traces/) and each replayed kernel
gets the op and shapes it was captured with; without one, kernels are classed by name.
"""

StepsOpt = option(
    str | None, "--steps", help="ProfilerStep numbers to analyze, N-M or N (default: every complete step)."
)
HtaOpt = option(
    bool, "--hta-compat", help="Follow HTA 0.5's timeline conventions (to check against HTA; not exact)."
)
DeviceOpt = option(
    str | None, "--device", help="The GPU, e.g. h100, a100-80gb, mi300x (overrides the trace)."
)
PeakFlopsOpt = option(
    float | None, "--peak-flops", parse=FlopRate(), help="Compute peak for every precision, e.g. 989TFLOP/s."
)
PeakBwOpt = option(
    float | None, "--peak-bandwidth", parse=Bandwidth(), help="Memory bandwidth, e.g. 3.35TB/s."
)
RooflineOpt = option(
    Path | None,
    "--roofline",
    parse=InputFile(),
    help="A fit saved by `infer-opt roofline --save` on that GPU.",
)
CausalOpt = option(
    str,
    "--causal-flops",
    parse=Choice(("half", "full")),
    help="Causal attention FLOPs: half (the work done) or full (as many tools count).",
)
MatmulFractionOpt = option(
    float,
    "--matmul-fraction",
    parse=Fraction(low=0.01),
    help="The matmul what-if: matmuls at this fraction of peak.",
)
TopOpt = option(int, "--top", parse=Count(1, 10_000), help="Rows in the op tables.")
WhatIfOpt = option(
    list[str] | None,
    "--what-if",
    help="An edit to replay (repeatable): PATTERN=Fx (GPU time × F, e.g. 'gemm*=0.5x'; a category, "
    "family, op or kernel glob), host=Sx (host work S× faster), sync:PATTERN=off "
    "(e.g. 'sync:aten::item=off').",
)
AugmentWhatIfOpt = option(
    str | None,
    "--augment-what-if",
    help="With --augment: add the replayed timeline of this --what-if edit ('none': unedited) as a "
    "second process, to see in Perfetto which kernels moved.",
)
KernelsFromOpt = option(
    Path | None,
    "--kernels-from",
    parse=InputFile(),
    help="Another GPU's trace of the same model: replay this one with its kernel times (ops matched in "
    "order by name and shapes).",
)
AugmentOpt = option(
    Path | None,
    "--augment",
    parse=OutputFile(),
    help="Write the trace back (.json or .json.gz) with flops, bytes, rates and bound in each event's args.",
)
CaptureOpt = option(
    Path | None,
    "--capture",
    parse=InputFile(),
    help="The graph-capture trace of the replays (vLLM/SGLang capture_traces/).",
)
SchedulerOpt = option(
    str | None,
    "--scheduler",
    help="A Dask scheduler (tcp://HOST:8786) whose workers read the rank files from a shared path; "
    "default $INFER_OPT_SCHEDULER, else the local cores. Needs pip install 'infer-opt[dask]'.",
)
WorkersOpt = option(
    int | None, "--workers", parse=Count(1, 1024), help="Local processes reading ranks (default: the cores)."
)
StrictOpt = option(
    bool, "--strict", help="Refuse the job when a rank cannot be read (default: report the rest, say which)."
)
TracesArg = argument(
    list[Path],
    parse=TraceInput(),
    help="Trace files (.json, .json.gz) or folders of one file per rank.",
    show_default=False,
)
JointReplayOpt = option(
    bool,
    "--joint-replay",
    help="Replay the ranks jointly for the straggler's replayed cost with more than 8 ranks (up to 8: "
    "always). On a Dask cluster each rank's dependency graph stays on its worker; locally the driver "
    "holds every one.",
)


@with_output(plot=True)
def trace_command(
    traces: TracesArg,
    steps: StepsOpt = None,
    hta_compat: HtaOpt = False,
    device: DeviceOpt = None,
    peak_flops: PeakFlopsOpt = None,
    peak_bandwidth: PeakBwOpt = None,
    roofline: RooflineOpt = None,
    causal_flops: CausalOpt = "half",
    matmul_fraction: MatmulFractionOpt = 0.7,
    top: TopOpt = 15,
    augment: AugmentOpt = None,
    capture: CaptureOpt = None,
    scheduler: SchedulerOpt = None,
    workers: WorkersOpt = None,
    strict: StrictOpt = False,
    joint_replay: JointReplayOpt = False,
    what_if: WhatIfOpt = None,
    kernels_from: KernelsFromOpt = None,
    augment_what_if: AugmentWhatIfOpt = None,
    *,
    output: Output,
) -> Any:
    from infer_opt.errors import InvalidInput
    from infer_opt.trace.analyze import run
    from infer_opt.trace.user_edits import parse_edit

    request = TraceRequest(
        traces, steps=steps, hta_compat=hta_compat, device=device, peak_flops=peak_flops,
        peak_bandwidth=peak_bandwidth, roofline=roofline, causal_flops=causal_flops,
        matmul_fraction=matmul_fraction, capture=capture, scheduler=scheduler, workers=workers,
        strict=strict, joint_replay=joint_replay, what_if=what_if, kernels_from=kernels_from,
    )  # fmt: skip
    if augment_what_if not in (None, "none"):
        parse_edit(augment_what_if)  # bad syntax: refused before the trace is read
    if augment_what_if is not None and augment is None:
        raise InvalidInput("--augment-what-if", augment_what_if, "needs --augment FILE to write to")
    output.check_distinct((("--augment", augment),))
    _never_over_an_input(request.paths, output, augment)
    with progress_bar("trace") as bar:
        found = run(
            request, progress=lambda done, total: bar(done, total, "ranks"), keep_events=augment is not None
        )
    if augment is not None:
        from infer_opt.errors import RunFailure
        from infer_opt.trace.augment import write_augmented

        try:
            for path in write_augmented(found, augment, augment_what_if):
                typer.echo(f"annotated trace written to {path}", err=True)
        except OSError as exc:  # the analysis is still shown and saved
            why = exc.strerror or str(exc)
            failed = RunFailure(f"--augment {augment}: could not write the annotated trace ({why})")
            return Outcome(found.result, error=failed, view={"top": top})
    return Outcome(found.result, view={"top": top})


def _never_over_an_input(inputs: tuple[Path, ...], output: Output, augment: Path | None) -> None:
    """No output may replace a trace being read (``--out trace.json`` on trace.json)."""
    from infer_opt.errors import InvalidInput
    from infer_opt.files import same_file_key
    from infer_opt.trace.reader import trace_files

    files = trace_files(inputs)
    read = {same_file_key(p) for p in files}
    named = [("--out", p) for p in output.out]
    named += [("--markdown", output.markdown), ("--csv", output.csv), ("--plot", output.plot)]
    if augment is not None:  # several ranks: each written to --augment's name with .rank<i> added
        from infer_opt.trace.augment import _targets

        named += [("--augment", t) for t in {augment, *_targets(augment, len(files))}]
    for flag, path in named:
        if path is not None and str(path) != "-" and same_file_key(path) in read:
            raise InvalidInput(flag, str(path), "is a trace being read; write to another file")


def register(app: typer.Typer) -> None:
    app.command("trace", help=HELP)(trace_command)
