"""Write small multi-rank Kineto traces (tests only): ``write_rank(path, rank, steps, ...)``.

Each step is ``(number, cpu_start_us, [(kernel_name, start_us, dur_us, args), ...])``: a
``ProfilerStep#number`` from ``cpu_start_us`` (1000 µs long), and each kernel launched from
inside it (a ``cudaLaunchKernel`` 1 µs after the step starts) and run on the GPU at
``start_us``. ``allreduce(start, dur)`` is an NCCL all-reduce kernel's tuple (1 MiB of fp32,
process group ``"0"``), ``gemm(start, dur)`` a compute kernel's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

H100 = "NVIDIA H100 80GB HBM3"
STEP_US = 1000.0


def allreduce(start: float, dur: float, group: str = "0", size: int = 3) -> tuple:
    args = {"Collective name": "allreduce", "In msg nelems": 262144, "Out msg nelems": 262144,
            "dtype": "Float", "Group size": size, "Process Group Name": group}  # fmt: skip
    return ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", start, dur, args)


def gemm(start: float, dur: float) -> tuple:
    return ("sm90_xmma_gemm_bf16bf16_bf16f32", start, dur, {})


def rank_doc(
    rank: int | None, steps: Sequence[tuple], *, world_size: int = 3, device: str = H100
) -> dict[str, Any]:
    events: list[dict] = []
    corr = 0
    for number, cpu_start, kernels in steps:
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}", "pid": 1,
                       "tid": 1, "ts": cpu_start, "dur": STEP_US, "args": {}})  # fmt: skip
        for name, start, dur, args in kernels:
            corr += 1
            stream = 20 if name.startswith("nccl") else 7
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                           "tid": 1, "ts": cpu_start + 1 + corr * 0.01, "dur": 0.5,
                           "args": {"correlation": corr}})  # fmt: skip
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": start,
                           "dur": dur, "args": {"stream": stream, "device": 0, "correlation": corr,
                                                **args}})  # fmt: skip
    doc: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": device, "numSms": 132}]}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": world_size, "backend": "nccl"}
    doc["traceEvents"] = events
    return doc


def write_rank(path: Path, rank: int | None, steps: Sequence[tuple], **how: Any) -> Path:
    path.write_text(json.dumps(rank_doc(rank, steps, **how)))
    return path


def three_ranks(folder: Path) -> Path:
    """The hand-checked job: three ranks, one step (ProfilerStep#5), a gemm then two all-reduces.

    all-reduce 0 starts at 100, 130, 110 µs (ranks 0, 1, 2): skew 30, waits 30/0/20, rank 1 last,
    the next-latest at 110: rank 1 blamed 20 µs; durations 40/10/30 → transfer 10 on each.
    all-reduce 1 starts at 300, 305, 350: skew 50, waits 50/45/0, rank 2 last, blamed 45 µs;
    durations 60/55/10 → transfer 10. The straggler of step 5: rank 2, cost 45 µs. Rank 2's gemm
    is 150 µs (the others' 80): its extra time is compute."""
    folder.mkdir(parents=True, exist_ok=True)
    starts = {0: (100, 300), 1: (130, 305), 2: (110, 350)}
    durs = {0: (40, 60), 1: (10, 55), 2: (30, 10)}
    gemm_us = {0: 80, 1: 80, 2: 150}
    for rank in range(3):
        (a0, a1), (d0, d1) = starts[rank], durs[rank]
        kernels = [gemm(10, gemm_us[rank]), allreduce(a0, d0), allreduce(a1, d1)]
        write_rank(folder / f"rank{rank}.json", rank, [(5, 0.0, kernels)])
    return folder
