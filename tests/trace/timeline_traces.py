"""Small hand-made Kineto traces that break a timeline's definitions if read naively (issue 42,
class 7): two GPUs in one file, an all-reduce under a matmul, kernels that start before their
launch (skewed clocks), steps that share one name. Each function returns the trace document;
:func:`write` writes one as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

H100 = "NVIDIA H100 80GB HBM3"


def _x(cat: str, name: str, ts: float, dur: float, pid: int, tid: int, args: dict) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _doc(events: list[dict], devices: int = 1, **metadata: Any) -> dict[str, Any]:
    props = [{"id": d, "name": H100, "numSms": 132} for d in range(devices)]
    return {"schemaVersion": 1, **metadata, "deviceProperties": props, "traceEvents": events}


def _launched(name: str, cpu_t: float, gpu_t: float, dur: float, corr: int, device: int = 0, stream: int = 7):
    """A cpu_op, its launch call and its kernel."""
    return [
        _x("cpu_op", "aten::mm" if "nccl" not in name else "nccl:all_reduce", cpu_t, 20, 100, 1,
           {"External id": corr}),
        _x("cuda_runtime", "cudaLaunchKernel", cpu_t + 2, 2, 100, 1, {"correlation": corr}),
        _x("kernel", name, gpu_t, dur, device, stream,
           {"device": device, "stream": stream, "correlation": corr}),
    ]  # fmt: skip


def two_gpus() -> dict[str, Any]:
    """One process, one step: GPU 0 busy the first half of it, GPU 1 the second."""
    events = [_x("user_annotation", "ProfilerStep#1", 0, 1000, 100, 1, {})]
    events += _launched("sm90_gemm_a", 10, 100, 500, 1, device=0)
    events += _launched("sm90_gemm_b", 40, 600, 500, 2, device=1)
    return _doc(events, devices=2)


def overlapped(kernels: list[tuple[str, float, float]] | None = None) -> dict[str, Any]:
    """One step of kernels ``(name, start, dur)`` on their own streams (default: an all-reduce
    under a matmul)."""
    kernels = kernels or [("sm90_gemm_a", 100, 500), ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 150, 400)]
    events = [_x("user_annotation", "ProfilerStep#1", 0, 2000, 100, 1, {})]
    for i, (name, start, dur) in enumerate(kernels):
        events += _launched(name, 10 + 30 * i, start, dur, i + 1, stream=7 + i)
    return _doc(events)


def skewed(gpu_annotation: bool = True) -> dict[str, Any]:
    """One step whose two kernels (660 µs) start ~900 µs before their launch calls (the device's
    clock behind the host's), its GPU-side annotation on the host's time."""
    events = [_x("user_annotation", "ProfilerStep#1", 1000, 1000, 100, 1, {})]
    if gpu_annotation:
        events.append(_x("gpu_user_annotation", "ProfilerStep#1", 1000, 1000, 0, 7, {}))
    events += _launched("sm90_gemm_a", 1010, 100, 330, 1)
    events += _launched("sm90_gemm_b", 1040, 440, 330, 2)
    return _doc(events)


def same_named_steps(count: int = 3) -> dict[str, Any]:
    """``count`` steps all named ``ProfilerStep#1``, 1000 µs apart, one 300 µs kernel each."""
    events = []
    for i in range(count):
        t = i * 1000
        events.append(_x("user_annotation", "ProfilerStep#1", t, 900, 100, 1, {}))
        events += _launched("sm90_gemm_a", t + 10, t + 100, 300, i + 1)
    return _doc(events)


def gpu_span(lo: float, dur: float, kernels: int = 4) -> dict[str, Any]:
    """One step (CPU 0–3000 µs) of ``kernels`` 100 µs kernels 300 µs apart from 1000 µs (four:
    1000, 1300, 1600, 1900), its GPU-side ``ProfilerStep#1`` annotation at ``[lo, lo + dur]`` (a
    true one: 1000, 1000; a ROCm-like stub: a few µs anywhere, or one that ends halfway)."""
    events = [_x("user_annotation", "ProfilerStep#1", 0, 300 * kernels + 2000, 100, 1, {}),
              _x("gpu_user_annotation", "ProfilerStep#1", lo, dur, 0, 7, {})]  # fmt: skip
    for i in range(kernels):
        events += _launched("sm90_gemm_a", 10 + 30 * i, 1000 + 300 * i, 100, i + 1)
    return _doc(events)


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path
