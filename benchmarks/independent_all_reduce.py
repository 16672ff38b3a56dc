"""An all_reduce timed with nothing but torch.distributed, as nccl-tests times one: the
reference ``benchmarks/bench_comm.py`` holds ``infer-opt comm`` against. It imports nothing from
infer_opt.

    torchrun --standalone --nproc-per-node 2 benchmarks/independent_all_reduce.py --bytes 1048576

Each rank: ``--warmup`` untimed calls, then ``--reps`` samples, each a barrier-free timed call
(``time.perf_counter`` on the CPU; CUDA events around it on a GPU). The result is the maximum
over ranks of each rank's median — a collective ends when its slowest rank does — printed by
rank 0 as one JSON line ``{"bytes": …, "time_s": …, "rank_median_s": […]}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bytes", type=int, default=1 << 20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    backend = "nccl" if cuda else "gloo"
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(backend)
    buf = torch.zeros(max(1, args.bytes // 4), dtype=torch.float32, device=device)
    for _ in range(args.warmup):
        dist.all_reduce(buf)
    dist.barrier()
    samples = []
    for _ in range(args.reps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dist.all_reduce(buf)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e-3)
        else:
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            samples.append(time.perf_counter() - t0)
    medians: list[float] = [0.0] * dist.get_world_size()
    dist.all_gather_object(medians, statistics.median(samples))
    if dist.get_rank() == 0:
        print(json.dumps({"bytes": buf.numel() * 4, "time_s": max(medians), "rank_median_s": medians}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
