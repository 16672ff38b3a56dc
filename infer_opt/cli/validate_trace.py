"""``infer-opt validate --against TRACE --calibration CAL`` and ``infer-opt calibrate --from-trace
TRACE…``: the operator model on real GPUs, from and against torch.profiler traces
(:mod:`infer_opt.trace.calibrate`, :mod:`infer_opt.trace.validate`). Torch-free."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infer_opt.cli.common import option
from infer_opt.cli.types import InputFile

AgainstOpt = option(
    list[Path] | None,
    "--against",
    parse=InputFile(),
    help="A GPU trace (torch.profiler, record_shapes=True) not among the calibration's: predict each "
    "of its ops from its shapes and compare with its kernel time (needs --calibration from "
    "calibrate --from-trace; MODEL and the grid options are not used).",
)
UnseenDeviceOpt = option(
    bool,
    "--unseen-device",
    help="With --against: a calibration of another GPU is scaled to the trace's by the datasheets' "
    "peaks (the unseen-device tier) instead of refused.",
)
FromTraceOpt = option(
    list[Path] | None,
    "--from-trace",
    parse=InputFile(),
    help="Build the calibration from these GPU traces of one device and dtype (repeatable; "
    "torch.profiler with record_shapes=True) instead of measuring this machine.",
)


def trace_gpu(device: str | None) -> Any:
    """The GPU ``--device NAME`` names for traces that do not name theirs (``None``: not given,
    or ``auto``, the machine's default, which says nothing of a trace)."""
    if device is None or device == "auto":
        return None
    from infer_opt.trace.devices import by_name

    return by_name(device)


def against_trace(
    against: Path,
    calibration: Path | None,
    unseen_device: bool,
    *,
    given: dict[str, Any],
    device: str | None = None,
) -> Any:
    """The ``validate --against`` run: refuses options it does not use (``given``: option ->
    whether it was set) and a missing ``--calibration``; ``device`` names the trace's GPU when
    it does not (:func:`trace_gpu`)."""
    from infer_opt.errors import InvalidInput
    from infer_opt.trace import calibrate as tc
    from infer_opt.trace import validate as tv
    from infer_opt.trace.reader import read_trace

    extra = [name for name, set_ in given.items() if set_]
    if extra:
        raise InvalidInput(extra[0], "given", "not used with --against (a trace's shapes are its own)")
    if calibration is None:
        raise InvalidInput(
            "--calibration",
            "none",
            "--against needs a calibration file (infer-opt calibrate --from-trace … --out CAL.json)",
        )
    gpu = trace_gpu(device)
    cal = tc.load(calibration)
    try:
        events = read_trace(against)
    except InvalidInput as exc:
        raise InvalidInput("--against", str(against), exc.expected) from None
    source = tv.source_label(cal, str(calibration))
    return tv.validate_against(events, cal, calibration_source=source, unseen_device=unseen_device, gpu=gpu)


def from_traces(paths: list[Path], *, given: dict[str, Any], device: str | None = None) -> Any:
    """The ``calibrate --from-trace`` run (options it does not use refused); ``device`` names
    the traces' GPU when they do not (:func:`trace_gpu`)."""
    from infer_opt.errors import InvalidInput
    from infer_opt.trace import calibrate as tc

    extra = [name for name, set_ in given.items() if set_]
    if extra:
        raise InvalidInput(extra[0], "given", "not used with --from-trace (the traces' dtype is used)")
    return tc.read_and_calibrate(paths, device=trace_gpu(device))
