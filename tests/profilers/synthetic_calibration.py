"""A calibration whose every prediction is the device roofline (exact numbers for tests)."""

from __future__ import annotations

from dataclasses import replace

from infer_opt.results.calibration import (
    CalibrationResult,
    DeviceRoofline,
    FamilyCalibration,
    GridPoint,
    HostCalibration,
)

T0, R, B = 2e-6, 2e10, 1e10
PER_OP_S, PER_MODULE_S = 1e-6, 3e-6


def matmul_family(state: str = "warm", rate: float = R, bandwidth: float = B) -> list[FamilyCalibration]:
    """A ``gemm.nt`` family whose points sit on its base roofline (residual 0:
    every shape predicts ``t0 + max(F/R, Q/b)``)."""
    out = []
    for name in ("gemm.nt",):
        points = []
        for m in (1.0, 64.0):
            for n in (64.0, 4096.0):
                for k in (64.0, 1024.0):
                    flops, nbytes = 2 * m * n * k, 4 * (m * k + n * k + m * n)
                    t = T0 + max(flops / rate, nbytes / bandwidth)
                    points.append(GridPoint((m, n, k), t, 0.0, flops, nbytes))
        out.append(FamilyCalibration(name, state, ("M", "N", "K"), tuple(points), T0, rate, bandwidth, 0.05))
    return out


def synthetic_calibration(*, families: bool = False) -> CalibrationResult:
    return CalibrationResult(
        device="cpu",
        device_name="synthetic cpu",
        device_key="cpu-synthetic-1t-float32",
        dtype="float32",
        threads=1,
        warm_reuse_bytes=4 * 2**20,
        cold_reuse_bytes=512 * 2**20,
        families=tuple(matmul_family()) if families else (),
        context_reuse_bytes=16 * 2**20,
        host=HostCalibration(per_op_s=PER_OP_S, per_module_call_s=PER_MODULE_S),
        roofline=DeviceRoofline(R, B, T0),
        groups_done=("linear",),
        complete=True,
        grid="synthetic",
    )


def roofline_time(flops: float, nbytes: float) -> float:
    return T0 + max(flops / R, nbytes / B)


def local_calibration() -> CalibrationResult:
    """:func:`synthetic_calibration` keyed for this machine and torch's settings now (device
    model, threads, matmul precision), so the cache serves it to a run here."""
    import torch

    from infer_opt.profilers import device as devices

    return replace(
        synthetic_calibration(families=True),
        device_name=devices.device_name("cpu"),
        threads=torch.get_num_threads(),
        matmul_precision=devices.matmul_precision("cpu", torch.float32),
    )
