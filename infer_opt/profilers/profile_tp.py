"""``profile --tp N``: profile a tensor-parallel step on every rank, report on rank 0.

Each rank builds the same seeded built-in, keeps its shard (:mod:`tensor_parallel`) and runs
the ordinary :func:`model_profile.profile_model` on it — the same step timing, operator
recording and ``torch.profiler`` pass as a single-device profile, in lockstep across ranks
(every step's all_reduces pair up). Rank 0 then gets every rank's summary and reports:

* per-rank step time and the time each spent in collectives, from its own trace;
* ``skew = max/median`` of the per-rank step times, and the straggler — the rank with the
  most time in operators other than collectives (its trace), the one the others wait for at
  each all_reduce;
* a ``communication`` category — the collectives seen in the trace (the functional
  ``all_reduce`` and its ``wait_tensor``), with their message bytes and their share of the
  step: time the rank spent blocked in them, i.e. not hidden behind compute — and Amdahl over
  every category, communication included;
* with ``trace_dir``, one Chrome trace per rank (``rank0.json``, …) — torch.profiler's export,
  which carries the rank and world size (``distributedInfo``) that multi-rank tools such as
  HTA read.

Per-operator detail is rank 0's (every rank runs the same shapes).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from infer_opt.cost_models import comm
from infer_opt.errors import InvalidInput
from infer_opt.profilers import model_profile as mp
from infer_opt.profilers.distributed import RankContext, barrier, gather_to_reporter
from infer_opt.profilers.tensor_parallel import check_shardable, shard
from infer_opt.results.profile import OpStat, ProfileResult
from infer_opt.results.profile_tp import CollectiveSeen, RankStep, TPProfileResult
from infer_opt.steps import StepSettings

Progress = Callable[[int, int, str], None]
COMMUNICATION = "communication"
#: the op that only waits for a collective started before it
_WAIT_OPS = ("wait_tensor", "wait")


def collective_name(op_name: str) -> str:
    """``_c10d_functional::all_reduce`` -> ``all_reduce``; ``c10d::allreduce_`` -> ``allreduce``."""
    return op_name.split("::", 1)[-1].rstrip("_")


def _element_size(dtype: str) -> int:
    value = getattr(torch, dtype, None)
    return torch.empty((), dtype=value).element_size() if isinstance(value, torch.dtype) else 0


def collectives_seen(ops: Sequence[OpStat], step_time_s: float) -> tuple[CollectiveSeen, ...]:
    """The communication ops of a profile as collectives: a wait's time goes to the collective
    whose output (same shape) it waits for; bytes are the message (the input) of one call; the
    share is over the larger of the step and the operators' total, as the categories' is."""
    comm_ops = [o for o in ops if o.category == COMMUNICATION]
    entries: dict[tuple[str, tuple[tuple[int, ...], ...]], dict[str, Any]] = {}
    waits = []
    for o in comm_ops:
        name = collective_name(o.name)
        if name in _WAIT_OPS:
            waits.append(o)
            continue
        shape = o.shapes[:1]
        numel = math.prod(shape[0]) if shape and shape[0] else 0
        entry = entries.setdefault(
            (name, shape), {"bytes": numel * _element_size(o.dtype), "calls": 0, "time_s": 0.0}
        )
        entry["calls"] += o.calls
        entry["time_s"] += o.time_s
    for w in waits:
        match = next((e for (_, shape), e in entries.items() if shape == w.shapes[:1]), None)
        if match is None:
            match = entries.setdefault(("wait", w.shapes[:1]), {"bytes": 0, "calls": w.calls, "time_s": 0.0})
        match["time_s"] += w.time_s
    step = max(step_time_s, math.fsum(o.time_s for o in ops))
    step = step if step > 0 else math.inf
    out = [
        CollectiveSeen(name, e["bytes"], e["calls"], e["time_s"], e["time_s"] / step)
        for (name, _), e in entries.items()
    ]
    return tuple(sorted(out, key=lambda c: -c.time_s))


def rank_step(rank: int, result: ProfileResult) -> RankStep:
    """A rank's step time, and its time in collectives and in the other ops (one trace)."""
    communication = math.fsum(c.time_s for c in result.categories if c.category == COMMUNICATION)
    compute = math.fsum(c.time_s for c in result.categories if c.category != COMMUNICATION)
    return RankStep(rank, result.step_time_s, communication, compute, result.profiled_step_s)


def merge(
    base: ProfileResult,
    steps: Sequence[RankStep],
    ctx: RankContext,
    trace_dir: Path | None,
) -> TPProfileResult:
    """Rank 0's profile with every rank's step (module docstring)."""
    values = {f.name: getattr(base, f.name) for f in dataclasses.fields(ProfileResult)}
    values["description"] = f"{base.description}; tensor-parallel shard of rank 0 of {ctx.world_size}"
    return TPProfileResult(
        **values,
        world_size=ctx.world_size,
        backend=ctx.backend,
        ranks=tuple(steps),
        skew=comm.skew([s.step_time_s for s in steps]),
        straggler=comm.straggler([s.compute_s for s in steps]),
        collectives_seen=collectives_seen(base.ops, base.step_time_s),
        trace_dir=str(trace_dir) if trace_dir is not None else None,
    )


def _fit_in_turn(ctx: RankContext, dtype: Any, roofline: Path | None, progress: Progress | None) -> Any:
    """The roofline fit on every rank (a ``ResolvedFit``): each node's first rank resolves it
    first (it may calibrate and cache it), the others then load the cached fit instead of
    calibrating at the same time."""
    resolved = None
    if ctx.local_rank == 0:
        resolved = mp.resolve_fit(ctx.device, dtype, roofline, progress=progress)
    barrier(ctx)
    if resolved is None:
        resolved = mp.resolve_fit(ctx.device, dtype, roofline)
    return resolved


def load_shard(ctx: RankContext, settings: StepSettings) -> mp.LoadedStep:
    """This rank's shard of a built-in (:func:`model_profile.load` on the rank's device, then
    split), ready for :func:`model_profile.profile_model`."""
    built = mp.load(settings, device=ctx.device)
    loaded = built.loaded
    if loaded.source != "builtin" or loaded.config is None:
        raise InvalidInput(
            "model", settings.model,
            "--tp shards the built-in decoders (tiny, gpt2-small, llama-tiny, llama-small)",
        )  # fmt: skip
    check_shardable(loaded.config, ctx.world_size)
    sharded = shard(loaded.model, ctx.rank, ctx.world_size)
    loaded = dataclasses.replace(loaded, model=sharded, config=sharded.config)
    return dataclasses.replace(built, loaded=loaded)


def profile_tp(
    ctx: RankContext,
    settings: StepSettings,
    *,
    roofline: Path | None = None,
    trace_dir: Path | None = None,
    progress: Progress | None = None,
) -> TPProfileResult | None:
    """Profile rank ``ctx.rank``'s shard of the step ``settings`` describe (module docstring);
    rank 0 returns the report, the others ``None``."""
    shown = progress if ctx.reporter else None
    with mp.guard(f"building the shard of {settings.model} on rank {ctx.rank}"):
        built = load_shard(ctx, settings)
    resolved = _fit_in_turn(ctx, built.dtype, roofline, shown)
    trace = trace_dir / f"rank{ctx.rank}.json" if trace_dir is not None else None
    result = mp.profile_model(built, resolved, trace_path=trace, progress=shown)
    steps = gather_to_reporter(ctx, rank_step(ctx.rank, result))
    if steps is None:
        return None
    return merge(result, steps, ctx, trace_dir)
