"""What the commands that run on every rank share (``comm``, ``profile --tp``): their options,
starting the job with ``--nproc`` through torchrun's launcher, and joining it as a rank.

Under ``torchrun --nproc-per-node N -m infer_opt <command> …`` each rank runs the command
body; rank 0 alone returns a result (so only it prints and writes), the others return None
and exit quietly, also when a failure was reported by rank 0. ``--nproc N`` in a process
torchrun did not start re-runs the same command line on N ranks
(:func:`infer_opt.profilers.distributed.launch`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import typer

from infer_opt.cli._click import Context, click
from infer_opt.cli.common import option
from infer_opt.cli.types import Choice, Count, Duration
from infer_opt.errors import InvalidInput
from infer_opt.requests import DIST_BACKENDS

MAX_RANKS = 4096

NprocOpt = option(
    int | None,
    "--nproc",
    parse=Count(1, MAX_RANKS),
    help="Start N ranks on this machine (torchrun's launcher, torch.distributed.run) and run on "
    "them; the same as torchrun --standalone --nproc-per-node N -m infer_opt …. Leave it out "
    "under torchrun.",
)
TimeoutOpt = option(
    float,
    "--timeout",
    parse=Duration("s", allow_zero=False, most_s=24 * 3600.0),
    help="How long the ranks wait for each other (the rendezvous, every collective) before the "
    "run ends with an error.",
)
BackendOpt = option(
    str,
    "--dist-backend",
    parse=Choice(DIST_BACKENDS),
    help="torch.distributed backend: auto (NCCL on CUDA, gloo on the CPU), gloo or nccl.",
)


def _as_text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _option_args(param: Any, value: Any) -> list[str]:
    flag = max((o for o in param.opts if o.startswith("--")), key=len, default=param.opts[0])
    if getattr(param, "is_flag", False):
        if value:
            return [flag]
        return [param.secondary_opts[0]] if param.secondary_opts else []
    values = value if getattr(param, "multiple", False) else [value]
    return [item for v in values for item in (flag, _as_text(v))]


def command_line(ctx: Context, *, drop: Sequence[str] = ()) -> list[str]:
    """The command line that gave ``ctx``'s parameters (the command path after ``infer-opt``,
    then every parameter set on the command line, parsed values written back as text),
    without the parameters named in ``drop``."""
    source = click.core.ParameterSource.COMMANDLINE
    path = ctx.command_path.split()[1:]
    args: list[str] = []
    for param in ctx.command.params:
        name = param.name
        if name in drop or ctx.get_parameter_source(name) != source:
            continue
        value = ctx.params.get(name)
        if value is None:
            continue
        if param.param_type_name == "argument":
            args.extend(_as_text(v) for v in (value if isinstance(value, (list, tuple)) else [value]))
        else:
            args.extend(_option_args(param, value))
    return [*path, *args]


def relaunch(
    nproc: int,
    timeout_s: float,
    device: str,
    *,
    option: str = "nproc",
    drop: Sequence[str] = ("nproc",),
    per_rank_bytes: float = 0.0,
    size_option: str | None = None,
    size_value: Any = None,
) -> None:
    """Run this command again on ``nproc`` ranks started by torchrun's launcher; the ranks
    print (rank 0) and this process exits with the job's code. An interrupt stops every rank
    (rank 0 keeps and shows what it had) and exits 130 without another word. ``option`` is
    the flag that set the rank count (for messages). Before any rank starts, the rank count
    (and ``per_rank_bytes`` of buffers each, set by ``size_option``) is checked against the
    machine's cores and available memory (:func:`~infer_opt.profilers.distributed.check_machine`)."""
    from infer_opt.profilers import distributed

    if distributed.launched():
        raise InvalidInput(option, nproc, "this process already is a rank of a torchrun job; drop it")
    distributed.check_gpus(device, nproc, option)
    distributed.check_machine(nproc, option, per_rank_bytes, size_option, size_value)
    ctx = click.globals.get_current_context()
    debug = bool(getattr(ctx.find_root().command, "debug", False))
    if debug:
        os.environ["INFER_OPT_DEBUG"] = "1"  # the ranks inherit it
    from infer_opt.results.base import COMMAND_ENV, _command_line

    before = os.environ.get(COMMAND_ENV)
    os.environ[COMMAND_ENV] = before or _command_line()  # what the ranks' results say produced them
    try:
        code = distributed.launch(nproc, command_line(ctx, drop=drop), timeout_s=timeout_s, quiet=not debug)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    finally:
        if before is None:
            os.environ.pop(COMMAND_ENV, None)
    raise typer.Exit(code)


@contextmanager
def rank_job(backend: str, device: str, timeout_s: float, arguments: Mapping[str, Any]) -> Iterator[Any]:
    """Join the job as one rank (a job of one outside torchrun), check that every rank got the
    same ``arguments``, and yield the rank's context. On a rank other than 0 a failure that rank
    0 reports ends this process quietly."""
    from infer_opt.profilers import distributed

    try:
        with distributed.rank_job(backend, device, timeout_s) as ctx:
            distributed.check_same_arguments(ctx, arguments)
            yield ctx
    except distributed.ReportedByRankZero:
        raise SystemExit(0) from None


def progress_for(ctx: Any, label: str) -> Any:
    """The progress bar on rank 0; nothing on the other ranks."""
    from infer_opt.cli.common import progress_bar

    return progress_bar(label) if ctx.reporter else nullcontext(None)
