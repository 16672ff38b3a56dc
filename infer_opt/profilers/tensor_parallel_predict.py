"""The tensor-parallel step, predicted: ``max_r compute_r + Σ t(S)``.

* **Compute per rank** comes from a compute predictor applied to the ops the rank's shard runs:
  :func:`rank_ops` records them from a compute-only shard (``shard(…, communicate=False)``: the
  same slices, no collective, no process group needed), so any per-op model — the calibrated
  operator model of ``predict``, or the roofline (:func:`roofline_compute_s`) — predicts one
  rank's compute. The shards of a Megatron split have equal shapes, so one rank's ops stand for
  every rank's.
* **Communication** is the collectives the sharded model issues
  (:func:`infer_opt.cost_models.comm.step_collectives`: two all_reduces of ``B·T·d`` per layer
  and forward) priced with the ``comm`` α-β fit measured at the same world size.

:func:`measured_compute_s` times the compute-only shard on one process instead: measured compute
plus predicted communication, which tests the communication half of the model on its own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

from infer_opt.cost_models import comm as comm_module
from infer_opt.cost_models.roofline import predict_time
from infer_opt.errors import InvalidInput
from infer_opt.profilers import model_profile as mp
from infer_opt.profilers import op_recorder
from infer_opt.profilers.models import LoadedModel, load_model
from infer_opt.profilers.tensor_parallel import shard
from infer_opt.results.comm import CommResult
from infer_opt.results.predict import TPPrediction
from infer_opt.results.roofline import RooflineFit

ComputePredictor = Callable[[Sequence[op_recorder.OpCall]], float]


def compute_shard(
    spec: str,
    *,
    tp: int,
    rank: int = 0,
    batch: int,
    seq_len: int,
    device: Any,
    dtype: Any,
) -> LoadedModel:
    """Rank ``rank``'s compute-only shard of a built-in, loaded as ``profile`` loads models."""
    loaded = load_model(spec, batch_size=batch, seq_len=seq_len, device=device, dtype=dtype)
    if loaded.source != "builtin" or loaded.config is None:
        raise InvalidInput(
            "model", spec, "--tp shards the built-in decoders (tiny, gpt2-small, llama-tiny, llama-small)"
        )
    sharded = shard(loaded.model, rank, tp, communicate=False)
    return dataclasses.replace(loaded, model=sharded, config=sharded.config)


def shard_step(loaded: LoadedModel, *, mode: str, context: int, new_tokens: int, device: Any) -> mp.Step:
    """The step ``profile`` would time on this shard."""
    return mp.build_step(loaded, mode, context=context, new_tokens=new_tokens, device=device)


def rank_ops(loaded: LoadedModel, step: mp.Step) -> list[op_recorder.OpCall]:
    """The aten ops one step of the shard runs (names, shapes, FLOPs, bytes)."""
    with mp.guard("recording the shard's step"):
        return op_recorder.record_ops(step.fn, loaded.model)


def roofline_compute_s(calls: Sequence[op_recorder.OpCall], fit: RooflineFit) -> float:
    """``Σ_ops t0 + max(F/R, Q/b)`` — the roofline's prediction of the ops alone (no host time
    between them; a floor more than a forecast on a CPU)."""
    return math.fsum(predict_time(fit, c.flops, c.bytes) for c in calls)


def measured_compute_s(step: mp.Step, *, device: Any, warmup: int = 3, reps: int = 20) -> float:
    """The compute-only shard's step, timed on this process (median)."""
    from infer_opt.profilers import timing

    with mp.guard("timing the shard's step"):
        return timing.measure(step.fn, device=device, warmup=warmup, reps=reps).median_s


def predict_tp(
    config: Any,
    *,
    tp: int,
    mode: str,
    batch: int,
    seq_len: int,
    new_tokens: int,
    dtype_bytes: int,
    compute_per_rank_s: Sequence[float],
    comm: CommResult,
    baseline_step_s: float | None = None,
) -> TPPrediction:
    """``max_r compute_r + Σ t(S)`` with the collectives of ``config``'s Megatron split and
    ``comm``'s fits, which must have been measured over ``tp`` ranks."""
    if comm.world_size != tp:
        raise InvalidInput(
            "comm", comm.world_size, f"the comm fit was measured over {comm.world_size} ranks; --tp is {tp}"
        )
    calls = comm_module.step_collectives(
        n_layers=config.n_layers,
        d_model=config.d_model,
        batch=batch,
        mode=mode,
        seq_len=seq_len,
        new_tokens=new_tokens,
        dtype_bytes=dtype_bytes,
        tp=tp,
    )
    return comm_module.predict_tp_step(
        compute_per_rank_s, calls, comm_module.fits_of(comm), baseline_step_s=baseline_step_s
    )
