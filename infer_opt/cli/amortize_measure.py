"""``infer-opt amortize measure``: measure compile cost, eager and compiled time per bucket,
then decide which buckets to compile."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import typer

from infer_opt.cli.amortize import LengthsOpt, RequestsOpt, app
from infer_opt.cli.buckets import Bounds
from infer_opt.cli.common import (
    AutoDtypeOpt,
    DeviceOpt,
    HfConfigOpt,
    ModelArg,
    option,
    progress_bar,
    reps_option,
    warmup_option,
)
from infer_opt.cli.output import Outcome, Output, with_output
from infer_opt.cli.types import Choice, CountList, InputFile
from infer_opt.errors import Interrupted
from infer_opt.requests import AmortizeMeasureRequest
from infer_opt.units import format_duration

MAX_BATCH = 1 << 16
BACKENDS = ("inductor", "eager", "aot_eager", "cudagraphs")

HELP = (
    "Measure what compiling costs and buys per shape bucket on this device, then decide which "
    "buckets to compile.\n\n"
    "Per bucket: C = first torch.compile(dynamic=False) call - one eager step (+ CUDA graph capture "
    "on a GPU); t_e, t_c = steady medians; break-even n* = C/(t_e - t_c); compile iff "
    "n·(t_e - t_c) - C > 0.\n\n"
    "Each compile is cold (dynamo reset, inductor caches off); the compiler's one-time start-up "
    "(about 10 s on a 2-core CPU) is measured apart, then each bucket takes a few seconds to "
    "compile. Results are saved after every bucket (--out FILE.json); --resume FILE skips the "
    "buckets it already holds.\n\n"
    "Call counts: --calls-per-bucket (one per bucket, in the order listed) or --lengths FILE (one length per "
    "line, or CSV with length[,count]) mapped to the smallest bound >= T, scaled to --requests N; "
    "each call serves one batch.\n\n"
    "MODEL: a built-in (tiny, the default), package.module:factory or path/to/file.py:factory "
    "taking batch_size and seq_len, or hf:<model_type>[:base].\n\n"
    "Examples:\n\n"
    "  infer-opt amortize measure\n\n"
    "  infer-opt amortize measure tiny --bounds 32,64,128 --calls-per-bucket 1000,500,200 "
    "--out sweep.json\n\n"
    "  infer-opt amortize measure --resume sweep.json --bounds 32,64,128 --calls-per-bucket 1000,500,200\n\n"
    "  infer-opt amortize measure gpt2-small --device cuda --bounds 128,256 --lengths lengths.txt "
    "--requests 1e6\n"
)


def _say_estimate(estimate: Any) -> None:
    typer.echo(
        f"first bucket took {format_duration(estimate.first_bucket_s)}; about "
        f"{format_duration(estimate.remaining_s)} more for {estimate.buckets_left} bucket(s), "
        f"{format_duration(estimate.total_s)} in all (estimate)",
        err=True,
    )


BoundsOpt = option(Any, "--bounds", parse=Bounds(), help="Sequence-length bucket bounds, e.g. 32,64,128.")
BatchSizesOpt = option(
    Any, "--batch-sizes", parse=CountList(1, MAX_BATCH), help="Batch sizes, e.g. 1,4 (buckets = all pairs)."
)
CallsOpt = option(
    Any,
    "--calls-per-bucket",
    parse=CountList(0),
    help="Calls per bucket, in bucket order (batch-major), e.g. 1000,500.",
)
WarmupOpt = warmup_option("Untimed calls before each timing.")
RepsOpt = reps_option("Timed repetitions (eager and compiled).")
BackendOpt = option(
    str,
    "--backend",
    parse=Choice(BACKENDS),
    help="torch.compile backend: inductor, eager, aot_eager, cudagraphs.",
)
CudaGraphsOpt = option(
    bool | None,
    "--cuda-graphs/--no-cuda-graphs",
    help="Also capture the compiled step in a CUDA graph (default: on for CUDA devices).",
)
ResumeOpt = option(
    Path | None,
    "--resume",
    parse=InputFile(),
    help="Skip the buckets this saved sweep (JSON) holds; saves back to it.",
)


@app.command("measure", help=HELP)
@with_output(plot=True)
def measure(
    model: ModelArg = "tiny",
    bounds: BoundsOpt = "32,64",
    batch_sizes: BatchSizesOpt = "1",
    calls_per_bucket: CallsOpt = None,
    lengths: LengthsOpt = None,
    requests: RequestsOpt = None,
    device: DeviceOpt = "auto",
    dtype: AutoDtypeOpt = "auto",
    warmup: WarmupOpt = 3,
    reps: RepsOpt = 20,
    backend: BackendOpt = "inductor",
    cuda_graphs: CudaGraphsOpt = None,
    resume: ResumeOpt = None,
    hf_config: HfConfigOpt = None,
    *,
    output: Output,
) -> Any:
    """Measure each bucket (resuming a saved sweep), saving after every bucket, then decide."""
    from infer_opt.profilers import amortize_measure_sweep

    request = AmortizeMeasureRequest(
        model, bounds=bounds, batch_sizes=batch_sizes, calls_per_bucket=calls_per_bucket, lengths=lengths,
        requests=requests, device=device, dtype=dtype, warmup=warmup, reps=reps, backend=backend,
        cuda_graphs=cuda_graphs, resume=resume, hf_config=hf_config,
    )  # fmt: skip
    previous = request.resume
    if resume is not None and resume not in output.out:
        output = replace(output, out=(*output.out, resume))
    sweep = amortize_measure_sweep.sweep_of(request)
    kept = amortize_measure_sweep.kept_rows(sweep, previous)
    if kept:
        typer.echo(
            f"resuming {resume}: {len(kept)} of {len(sweep.buckets)} bucket(s) already measured", err=True
        )
    saved: list[Any] = []

    def save(result: Any) -> None:
        saved[:] = [result]
        output.save_partial(result)

    try:
        with progress_bar("amortize measure") as update:
            result = amortize_measure_sweep.run(
                sweep, previous=previous, compile_fn=compile_fn(), save=save, on_estimate=_say_estimate,
                progress=update,
            )  # fmt: skip
    except KeyboardInterrupt:
        raise Interrupted(_interrupted(saved, output)) from None
    return Outcome(result, also_write=() if resume is None else (resume,))


def _interrupted(saved: list[Any], output: Output) -> str:
    files = [str(p) for p in output.out if str(p) != "-"]
    if not saved or not files:
        return "interrupted before a bucket was saved (give --out FILE.json to keep finished buckets)"
    done = len(saved[0].buckets)
    return f"interrupted: {done} bucket(s) saved to {files[0]}; --resume {files[0]} goes on from there"


def compile_fn() -> Any:
    """The compiler the command uses: ``None`` means ``torch.compile`` (tests replace this to
    avoid minutes of inductor compiles)."""
    return None
