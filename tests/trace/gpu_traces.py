"""Write small Kineto (torch.profiler) trace files of GPU ops for the operator-model tests.

``kineto_trace(ops, device=...)`` is a trace document: one ``ProfilerStep#1`` holding, per op
``(name, input_dims, input_types, kernel_us[, concrete_inputs])`` (``kernel_us`` a number or a
list: one kernel each, launched from inside the op; a ``(memcpy name, µs)`` pair in the list is
a copy, an op tuple a child op called from inside it, with its own kernels), a ``cpu_op`` with
``Input Dims``/``Input type`` (and ``Concrete Inputs`` when given), its ``cudaLaunchKernel`` and
kernels, ``GAP_US`` apart on stream 7. ``write_trace(path, ...)`` writes it as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

H100 = "NVIDIA H100 80GB HBM3"
MI300X = "AMD Instinct MI300X"
#: idle time between consecutive kernels
GAP_US = 2.0

Op = tuple  # (name, dims, types, kernel_us[, concrete inputs])


def _x(cat: str, name: str, ts: float, dur: float, pid: int, tid: int, args: dict) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _is_op(entry: Any) -> bool:
    return (
        isinstance(entry, tuple) and len(entry) in (4, 5) and isinstance(entry[0], str) and "::" in entry[0]
    )


def _span(op: Op) -> float:
    """CPU µs an op's event lasts: 1 before and after, 4 per kernel, a child op's own span + 1."""
    kernels = list(op[3]) if isinstance(op[3], (list, tuple)) and not _is_op(op[3]) else [op[3]]
    return 2.0 + sum(_span(k) + 1 if _is_op(k) else 4.0 for k in kernels)


def kineto_trace(ops: Sequence[Op], *, device: str = H100, step: bool = True) -> dict[str, Any]:
    events: list[dict] = []
    state = {"gpu_t": 100.0, "corr": 1, "id": 1}

    def emit(op: Op, cpu_t: float) -> None:
        name, dims, types, kernel_us = op[:4]
        kernels = list(kernel_us) if isinstance(kernel_us, (list, tuple)) else [kernel_us]
        args = {"External id": state["id"], "Input Dims": dims, "Input type": types}
        if len(op) > 4:  # the scalars' values, as text (a conv's stride, padding ...)
            args["Concrete Inputs"] = op[4]
        state["id"] += 1
        events.append(_x("cpu_op", name, cpu_t, _span(op), 100, 1, args))
        t = cpu_t + 1
        for j, entry in enumerate(kernels):
            if _is_op(entry):  # a child op, launching its own kernels
                emit(entry, t)
                t += _span(entry) + 1
                continue
            # a (memcpy name, µs) entry is a copy (cudaMemcpyAsync), a number a kernel
            copy, dur = entry if isinstance(entry, (list, tuple)) else (None, entry)
            runtime = "cudaMemcpyAsync" if copy else "cudaLaunchKernel"
            events.append(_x("cuda_runtime", runtime, t, 1.0, 100, 1, {"correlation": state["corr"]}))
            kargs = {"stream": 7, "device": 0, "correlation": state["corr"]}
            gname = copy or f"kernel_{name.split('::')[-1]}_{j}"
            kind = "gpu_memcpy" if copy else "kernel"
            events.append(_x(kind, gname, state["gpu_t"], float(dur), 0, 7, kargs))
            state["gpu_t"] += float(dur) + GAP_US
            state["corr"] += 1
            t += 4.0

    cpu_t = 10.0
    for op in ops:
        emit(op, cpu_t)
        cpu_t += _span(op) + 1
    if step:
        events.insert(0, _x("user_annotation", "ProfilerStep#1", 0.0, cpu_t + 10, 100, 1, {}))
    props = [{"id": 0, "name": device, "numSms": 132 if "H100" in device else 304}]
    return {"schemaVersion": 1, "deviceProperties": props, "traceEvents": events}


def write_trace(path: Path, ops: Sequence[Op], **kwargs: Any) -> Path:
    path.write_text(json.dumps(kineto_trace(ops, **kwargs)))
    return path


BF16 = "c10::BFloat16"


def mm(m: int, n: int, k: int, us: Any) -> Op:
    """``aten::mm`` of (m, k) by (k, n), bf16."""
    return ("aten::mm", [[m, k], [k, n]], [BF16, BF16], us)


def add(n: int, us: Any, dtype: str = BF16) -> Op:
    """``aten::add`` of two contiguous (n,) tensors."""
    return ("aten::add", [[n], [n], []], [dtype, dtype, "Scalar"], us)


def conv2d(n: int, c: int, size: int, c_out: int, k: int, us: Any) -> Op:
    """``aten::conv2d`` of ``n`` bf16 images of ``c`` × ``size``² by ``c_out`` kernels of ``k``²
    at stride ``k`` (a ViT's patch embedding), its stride/padding/dilation/groups recorded."""
    dims = [[n, c, size, size], [c_out, c, k, k], [c_out], [], [], [], []]
    types = [BF16, BF16, BF16, "ScalarList", "ScalarList", "ScalarList", "Scalar"]
    return ("aten::conv2d", dims, types, us, ["", "", "", f"[{k}, {k}]", "[0, 0]", "[1, 1]", "1"])


H2D = "Memcpy HtoD (Pageable -> Device)"
D2H = "Memcpy DtoH (Device -> Pageable)"


def to(n: int, us: Any, *, copy: str | None = None) -> Op:
    """``aten::to`` of a contiguous (n,) bf16 tensor: an on-device cast (a kernel of ``us``), or
    with ``copy`` a copy across the host link (one memcpy of that name)."""
    kernel = [(copy, us)] if copy else us
    return ("aten::to", [[n], [], [], [], [], []], [BF16, "ScalarType", "", "", "Scalar", "Scalar"], kernel)


def training_ops(scale: float = 1.0) -> list[Op]:
    """A calibration's worth of bf16 GEMMs and adds (times in µs, ``scale`` slows them all)."""
    ops = []
    for m, us in ((64, 8.0), (128, 11.0), (256, 18.0), (512, 40.0)):
        ops += [mm(m, 1024, 1024, us * scale), mm(m, 1024, 1024, (us + 1) * scale)]
    for n, us in ((1 << 12, 3.0), (1 << 16, 6.0), (1 << 20, 20.0)):
        ops.append(add(n, us * scale))
    return ops


def held_out_ops() -> list[Op]:
    """Shapes between the training ones (a GEMM of M = 192, an add of 2^18), one repeated."""
    return [mm(192, 1024, 1024, 15.0), mm(192, 1024, 1024, 16.0), add(1 << 18, 12.0), add(1 << 14, 4.0)]


def validate_trace_fixture() -> Any:
    """A ``validate-trace`` result: calibrated on two synthetic H100 traces, validated on a third."""
    import tempfile
    from dataclasses import replace

    from infer_opt.trace.calibrate import read_and_calibrate
    from infer_opt.trace.reader import read_trace
    from infer_opt.trace.validate import validate_against

    with tempfile.TemporaryDirectory() as tmp:
        a = write_trace(Path(tmp) / "a.json", training_ops())
        b = write_trace(Path(tmp) / "b.json", training_ops(1.1))
        held = write_trace(Path(tmp) / "held_out.json", held_out_ops())
        cal = read_and_calibrate([a, b])
        result = validate_against(read_trace(held), cal, calibration_source=f"h100.json ({cal.source})")
    return replace(result, trace="held_out.json", wall_s=0.0)
