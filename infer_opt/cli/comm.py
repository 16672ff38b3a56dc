"""``infer-opt comm``: collective times over message sizes on every rank, and their α-β fit."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import typer

from infer_opt.cli.common import DeviceOpt, option, progress_bar, reps_option, warmup_option
from infer_opt.cli.distributed import BackendOpt, NprocOpt, TimeoutOpt, relaunch
from infer_opt.cli.output import Outcome, Output, with_output
from infer_opt.cli.types import Choice, Count, Size
from infer_opt.errors import Interrupted
from infer_opt.requests import COLLECTIVES, MAX_COMM_REPS, CommRequest

HELP = """Time the collectives of torch.distributed — all_reduce, all_gather,
reduce_scatter, broadcast, all_to_all and send/recv — over message sizes on
every rank, each checked for the right result first, and fit t ≈ α + S/β per
collective.

t = the slowest rank's median; algbw = S/t; busbw = algbw·2(n−1)/n (all_reduce),
·(n−1)/n (all_gather, reduce_scatter, all_to_all), ·1 (broadcast, send/recv);
latency dominates below S* = α·β. The sweep is saved per backend, world size
and device (--no-save: not) for the tensor-parallel step prediction.

Run it on N ranks with --nproc N, or under torchrun (one node or many; rank 0
prints and writes). With one rank it measures the local copy instead.

Examples:

  infer-opt comm --nproc 2

  infer-opt comm --nproc 2 --collective all_reduce --max-size 1MiB --plot comm.png

  torchrun --nproc-per-node 8 -m infer_opt comm --device cuda --out comm.json

  torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
      --rdzv-endpoint host0:29500 -m infer_opt comm --device cuda
"""

WarmupOpt = warmup_option("Untimed calls per size and rank.", MAX_COMM_REPS)
RepsOpt = reps_option("Timed calls per size and rank.", MAX_COMM_REPS)
CollectiveOpt = option(
    list[str] | None,
    "--collective",
    parse=Choice(COLLECTIVES),
    help="A collective to time (repeatable); default: all.",
)
MinSizeOpt = option(float, "--min-size", parse=Size(), help="Smallest message S (bytes or 4KiB, …).")
MaxSizeOpt = option(
    float | None,
    "--max-size",
    parse=Size(),
    help="Largest message S; default 64MiB on a GPU, 16MiB on the CPU.",
)
FactorOpt = option(int, "--factor", parse=Count(2, 1024), help="Each size is the previous one times this.")
DtypeOpt = option(str, "--dtype", parse=Choice(("float32", "bfloat16", "float16")), help="Element type.")
NoSaveOpt = option(bool, "--no-save", help="Do not save the fit to the cache directory (for predict --tp).")


@with_output(plot=True)
def comm(
    collective: CollectiveOpt = None,
    min_size: MinSizeOpt = "4B",
    max_size: MaxSizeOpt = None,
    factor: FactorOpt = 2,
    warmup: WarmupOpt = 5,
    reps: RepsOpt = 20,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    dist_backend: BackendOpt = "auto",
    timeout: TimeoutOpt = "60s",
    nproc: NprocOpt = None,
    no_save: NoSaveOpt = False,
    *,
    output: Output,
) -> Any:
    from infer_opt.profilers import comm as sweep
    from infer_opt.profilers.distributed import env_rank

    request = CommRequest(
        collective=collective, min_size=min_size, max_size=max_size, factor=factor, warmup=warmup, reps=reps,
        device=device, dtype=dtype, dist_backend=dist_backend, timeout=timeout, no_save=no_save,
    )  # fmt: skip
    if nproc is not None:
        largest = max_size if max_size is not None else sweep.DEFAULT_MAX_BYTES_CUDA  # a GPU's, the largest
        relaunch(
            nproc, timeout, device, per_rank_bytes=sweep.BUFFERS_PER_SIZE * largest, size_option="max_size",
            size_value=max_size,
        )  # fmt: skip
    with progress_bar("comm") if env_rank() == 0 else nullcontext(None) as update:  # rank 0 shows it
        result = sweep.run(request, progress=update, on_update=output.save_partial, said=_say)
    if result is not None and not result.complete:
        return Outcome(result, error=Interrupted(_interrupted(result, output)))
    return result


def _say(line: str) -> None:
    typer.echo(line, err=True)


def _interrupted(result: Any, output: Output) -> str:
    measured = sum(len(c.points) for c in result.collectives)
    files = [str(p) for p, _ in output.targets() if str(p) != "-"]
    kept = f"; kept in {', '.join(files)}" if files else ""
    return f"interrupted after {measured} message size(s){kept}"


def register(app: typer.Typer) -> None:
    app.command("comm", help=HELP)(comm)
