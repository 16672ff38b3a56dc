"""``profile --tp N``: the profile of a tensor-parallel step, one rank per shard (see
:mod:`infer_opt.profilers.profile_tp`). Outside torchrun it starts N ranks itself through
torchrun's launcher; under torchrun ``--tp`` must equal the job's world size."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from infer_opt.cli.common import option
from infer_opt.cli.distributed import MAX_RANKS, progress_for, rank_job, relaunch
from infer_opt.cli.output import Outcome
from infer_opt.cli.types import Count
from infer_opt.errors import InvalidInput
from infer_opt.steps import StepSettings

TpOpt = option(
    int,
    "--tp",
    parse=Count(1, MAX_RANKS),
    help="Tensor parallelism over N ranks (Megatron split of a built-in; each rank profiles its "
    "shard, rank 0 reports). Outside torchrun it starts the N ranks itself.",
)


def wanted(tp: int) -> bool:
    """Whether this ``profile`` run is tensor-parallel: ``--tp`` above 1, or a rank of a job
    of several."""
    from infer_opt.profilers import distributed

    return tp > 1 or (distributed.launched() and int(os.environ.get("WORLD_SIZE", "1")) > 1)


def profile_tp(
    settings: StepSettings, *, tp: int, timeout_s: float, arguments: dict[str, Any], **options: Any
) -> Any:
    """Run (or start) the tensor-parallel profile of ``settings``; rank 0 returns its
    :class:`Outcome`."""
    from infer_opt.profilers import distributed

    _check_model(settings.model, tp)
    _check_trace(options.get("trace"))
    if not distributed.launched():
        relaunch(tp, timeout_s, settings.device, option="tp", drop=())
    world = int(os.environ["WORLD_SIZE"])
    if tp != world:
        raise InvalidInput("tp", tp, f"this torchrun job has {world} ranks; --tp must equal it")
    with rank_job("auto", settings.device, timeout_s, arguments) as ctx:
        result = _profile(ctx, settings, **options)
    if result is None:
        return None
    if result.trace_dir is not None:
        typer.echo(f"wrote {tp} traces to {result.trace_dir} (rank0.json, …)", err=True)
    return Outcome(result, view={"top": options["top"], "by": options["by"]})


def _check_model(model: str, tp: int) -> None:
    """A built-in whose shapes split over ``tp`` ranks: checked before any rank starts."""
    from infer_opt.profilers import models
    from infer_opt.profilers.tensor_parallel import check_shardable

    config = models.BUILTIN_CONFIGS.get(models.ALIASES.get(model, model))
    if config is None:
        raise InvalidInput(
            "model", model, "--tp shards the built-in decoders (tiny, gpt2-small, llama-tiny, llama-small)"
        )
    check_shardable(config, tp)


def _check_trace(trace: Path | None) -> None:
    if trace is not None and (trace.suffix.lower() == ".json" or (trace.exists() and not trace.is_dir())):
        raise InvalidInput(
            "trace", str(trace), "with --tp, --trace names a folder (one rank<r>.json per rank)"
        )


def _profile(
    ctx: Any, settings: StepSettings, *, trace: Path | None, top: int, by: str, **options: Any
) -> Any:
    from infer_opt.profilers import profile_tp

    if settings.hf_config:
        overrides = ",".join(settings.hf_config)
        raise InvalidInput("hf_config", overrides, "--tp shards the built-in decoders only")
    with progress_for(ctx, "profile --tp") as update:
        return profile_tp.profile_tp(ctx, settings, trace_dir=trace, progress=update, **options)
