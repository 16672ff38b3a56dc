"""Worker programs for the distributed tests, started by torchrun from the tests
(``python -m torch.distributed.run --standalone --nproc-per-node 2 -m
tests.profilers.dist_workers SCENARIO``). Rank 0 prints one JSON line on success; errors take
the CLI's path (one ``Error:`` line from rank 0, the other ranks quiet)."""

from __future__ import annotations

import json
import os
import sys
import time

import torch

from infer_opt.errors import InferOptError
from infer_opt.profilers import comm, distributed, models, tensor_parallel


def tp_exact(ctx: distributed.RankContext) -> dict:
    """Max |sharded − single-device| logits over prefill and a cached decode step."""
    out = {}
    for name in ("tiny", "llama-tiny"):
        full = models.build_builtin(name, device=ctx.device)
        sharded = tensor_parallel.shard(
            models.build_builtin(name, device=ctx.device), ctx.rank, ctx.world_size
        )
        ids = models.random_tokens(2, 12, full.config.vocab_size, device=ctx.device)
        with torch.no_grad():
            prefill = (sharded(ids) - full(ids)).abs().max().item()
            cache, full_cache = sharded.new_cache(2, 16), full.new_cache(2, 16)
            sharded(ids[:, :8], cache)
            full(ids[:, :8], full_cache)
            step = (sharded(ids[:, 8:9], cache) - full(ids[:, 8:9], full_cache)).abs().max().item()
            scale = full(ids).abs().max().item()
        out[name] = {"prefill": prefill, "decode": step, "scale": scale}
    gathered = distributed.gather_to_reporter(ctx, out)
    return {"ranks": gathered} if gathered is not None else {}


def sweep(ctx: distributed.RankContext) -> dict:
    settings = comm.SweepSettings(
        collectives=comm.parse_collectives(["all"], ctx.world_size),
        sizes=tuple(comm.message_sizes(4, 4096, 32)),
        dtype=torch.float32,
        warmup=1,
        reps=3,
        bootstrap=20,
    )
    result = comm.run_sweep(ctx, settings)
    return result.to_dict() if result is not None else {}


def fail(ctx: distributed.RankContext) -> dict:
    """Rank 1 raises in the middle of the sweep while rank 0 waits in a collective."""
    failing = int(os.environ.get("FAIL_RANK", "1"))
    settings = comm.SweepSettings(("all_reduce",), (4, 64), torch.float32, warmup=1, reps=2, bootstrap=0)
    comm.run_sweep(ctx, settings)
    if ctx.rank == failing:
        time.sleep(0.2)
        raise RuntimeError(f"model exploded on purpose (rank {ctx.rank})")
    comm.run_sweep(ctx, settings)
    return {"finished": True}


def differ(ctx: distributed.RankContext) -> dict:
    distributed.check_same_arguments(ctx, {"max_size": 4096 * (ctx.rank + 1), "reps": 3})
    return {}


def interrupt(ctx: distributed.RankContext) -> dict:
    """A long sweep; the test interrupts it. Rank 0 prints each partial result's size count,
    then what the sweep returned."""
    settings = comm.SweepSettings(("all_reduce",), tuple([64] * 400), torch.float32, warmup=1, reps=5)

    def update(result) -> None:
        print(json.dumps({"partial_points": len(result.collectives[-1].points)}), flush=True)

    result = comm.run_sweep(ctx, settings, on_update=update)
    if result is None:
        return {}
    return {"complete": result.complete, "points": sum(len(c.points) for c in result.collectives)}


SCENARIOS = {"tp_exact": tp_exact, "sweep": sweep, "fail": fail, "differ": differ, "interrupt": interrupt}


def main() -> int:
    scenario = SCENARIOS[sys.argv[1]]
    timeout_s = float(os.environ.get("TIMEOUT_S", "30"))
    try:
        device = os.environ.get("DEVICE", "cpu")
        with distributed.rank_job("auto", device, timeout_s) as ctx:
            out = scenario(ctx)
            if ctx.reporter:
                print(json.dumps(out), flush=True)
    except distributed.ReportedByRankZero:
        return 0
    except InferOptError as exc:
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    from infer_opt.cli.app import leave_rank

    leave_rank(main())
