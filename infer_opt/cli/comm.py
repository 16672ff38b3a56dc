"""``infer-opt comm``: collective times over message sizes on every rank, and their α-β fit."""

from __future__ import annotations

from typing import Any

import typer

from infer_opt.cli.common import DeviceOpt, option, reps_option, warmup_option
from infer_opt.cli.distributed import BackendOpt, NprocOpt, TimeoutOpt, progress_for, rank_job, relaunch
from infer_opt.cli.output import Outcome, Output, with_output
from infer_opt.cli.types import Choice, Count, Size
from infer_opt.errors import Interrupted

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

COLLECTIVE_NAMES = (
    "all",
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "all_to_all",
    "send_recv",
)
MAX_REPS = 100_000
#: a rank holds about this many buffers of the largest message (input, output, the check's copy)
BUFFERS_PER_SIZE = 3
#: the largest default --max-size (a GPU's), what --nproc checks memory for when it is not given
DEFAULT_MAX_BYTES = 64 << 20
WarmupOpt = warmup_option("Untimed calls per size and rank.", MAX_REPS)
RepsOpt = reps_option("Timed calls per size and rank.", MAX_REPS)
CollectiveOpt = option(
    list[str] | None,
    "--collective",
    parse=Choice(COLLECTIVE_NAMES),
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
    backend: BackendOpt = "auto",
    timeout: TimeoutOpt = "60s",
    nproc: NprocOpt = None,
    no_save: NoSaveOpt = False,
    *,
    output: Output,
) -> Any:
    if nproc is not None:
        largest = max_size if max_size is not None else DEFAULT_MAX_BYTES
        relaunch(
            nproc,
            timeout,
            device,
            per_rank_bytes=BUFFERS_PER_SIZE * largest,
            size_option="max_size",
            size_value=max_size,
        )
    arguments = {
        "collective": collective, "min_size": min_size, "max_size": max_size, "factor": factor,
        "warmup": warmup, "reps": reps, "device": device, "dtype": dtype, "backend": backend,
    }  # fmt: skip
    with rank_job(backend, device, timeout, arguments) as ctx:
        settings = _settings(ctx, collective, min_size, max_size, factor, warmup, reps, dtype)
        with progress_for(ctx, "comm") as update:
            result = _sweep(ctx, settings, update, output)
    if result is None:
        return None
    if not result.complete:
        return Outcome(result, error=Interrupted(_interrupted(result, output)))
    if not no_save:
        _save(result)
    return result


def _settings(ctx: Any, collective: Any, min_size: float, max_size: float | None, factor: int,
              warmup: int, reps: int, dtype: str) -> Any:  # fmt: skip
    from infer_opt.profilers import comm as sweep
    from infer_opt.profilers.device import parse_dtype

    largest = int(max_size) if max_size is not None else sweep.default_max_bytes(ctx.device)
    if ctx.device.type == "cpu":  # the buffers live in this node's memory: check before allocating
        from infer_opt.profilers.distributed import check_machine

        check_machine(ctx.local_world_size, "nproc", BUFFERS_PER_SIZE * largest, "max_size", max_size)
    torch_dtype = parse_dtype(dtype, ctx.device)
    element = sweep.torch.empty((), dtype=torch_dtype).element_size()
    return sweep.SweepSettings(
        collectives=sweep.parse_collectives(collective or ["all"], ctx.world_size),
        sizes=tuple(sweep.message_sizes(int(min_size), largest, factor, element)),
        dtype=torch_dtype,
        warmup=warmup,
        reps=reps,
    )


def _sweep(ctx: Any, settings: Any, update: Any, output: Output) -> Any:
    from infer_opt.profilers import comm as sweep

    return sweep.run_sweep(ctx, settings, progress=update, on_update=output.save_partial)


def _interrupted(result: Any, output: Output) -> str:
    measured = sum(len(c.points) for c in result.collectives)
    files = [str(p) for p, _ in output.targets() if str(p) != "-"]
    kept = f"; kept in {', '.join(files)}" if files else ""
    return f"interrupted after {measured} message size(s){kept}"


def _save(result: Any) -> None:
    from infer_opt.store import COMM

    try:
        typer.echo(f"saved the fit to {COMM.save(result).path}", err=True)
    except OSError as exc:
        typer.echo(f"could not save the fit to the cache ({exc.strerror}); use --out FILE.json", err=True)


def register(app: typer.Typer) -> None:
    app.command("comm", help=HELP)(comm)
