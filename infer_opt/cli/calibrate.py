"""``infer-opt calibrate``: the operator-level calibration that ``predict`` and ``validate`` use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infer_opt.cli.common import AutoDtypeOpt, ThreadsOpt, argument, option, progress_bar
from infer_opt.cli.output import Outcome, Output, with_output
from infer_opt.cli.types import Choice, Count, InputFile
from infer_opt.cli.validate_trace import FromTraceOpt
from infer_opt.notices import Notice

HELP = """Calibrate the device's operators for predict and validate: matmuls (linear
with and without bias, row-major weights, batched) over a log-spaced (M, N, K)
grid with skinny decode shapes, attention (causal, unmasked, decode over long
caches, masked) over (B·H, T, d), norms, softmax, elementwise ops and
reductions, copies, cat, embedding and views — per dtype and thread count — and
the host cost per dispatched op and per nn.Module call.

Each case is checked against a float64 reference, then timed as profile times
operators (torch.profiler, per aten call), with its weights warm and cold, and
small ops also after a read of eight L2s and the smallest after a flush of the
last-level cache (their dispatch context in a step). The grid
is generic (the shapes used are in the file). Saved to the cache for this
device, dtype and thread count after every group (and to --out FILE.json, which
predict --calibration reads on another machine); --continue continues an
interrupted run of the same --shapes (with none saved it says so and starts anew);
--only GROUP measures those groups again in the cached
calibration of the same grid (their points replace its own). About 3 minutes
at --threads 1 on a quiet 2-core Xeon, 5-6 on a 2-core EPYC of half its speed.

Examples:

  infer-opt calibrate --threads 1

  infer-opt calibrate --threads 1 --out cpu-1t.json

  infer-opt calibrate --continue

  infer-opt calibrate --only linear --only host --shapes tiny

  infer-opt calibrate --from-trace a.json.gz --from-trace b.json.gz --out h100.json

  infer-opt calibrate --from-trace bert.json.gz vit.json.gz owlv2.json.gz --out h100.json
"""

GROUP_NAMES = ("linear", "addmm_nn", "bmm", "sdpa", "norms", "elementwise", "memory", "views", "host")


def _only(values: list[str] | None) -> list[str] | None:
    from infer_opt.errors import InvalidInput

    if not values:
        return None
    if any(not v.strip() for item in values for v in item.split(",")):
        shown = ",".join(values)
        raise InvalidInput("only", shown, f"an empty group name; give groups among {', '.join(GROUP_NAMES)}")
    names = [v.strip() for item in values for v in item.split(",") if v.strip()]
    unknown = sorted(set(names) - set(GROUP_NAMES))
    if unknown:
        raise InvalidInput("only", ",".join(unknown), f"unknown group; known: {', '.join(GROUP_NAMES)}")
    return names


def _resume_from(output: Output, device: Any, dtype: Any, grid: str) -> tuple[Any, tuple[Notice, ...]]:
    """The run to continue — the first ``--out`` JSON file that exists, else the cached one —
    and what to say: nothing saved (a new run starts). A saved run of another grid is refused:
    continuing it would mix two grids in one calibration."""
    from infer_opt.errors import InvalidInput
    from infer_opt.profilers import calibration

    found = [p for p in output.out if p.suffix.lower() == ".json" and p.exists()]
    cached = calibration.cache_path(device, dtype)
    path = found[0] if found else cached if cached.exists() else None
    if path is None:
        return None, (Notice("calibration_nothing_to_resume", {"cache": str(cached)}),)
    previous = calibration.load_calibration(path, option="resume", to_use=False)
    if previous.grid and previous.grid != grid:
        raise InvalidInput(
            "resume",
            str(path),
            f"the saved run is of the {previous.grid} grid and this one --shapes {grid}: give --shapes "
            f"{previous.grid} to continue it, or drop --continue to start over",
        )
    return previous, ()


def _to_update(device: Any, dtype: Any, grid: str) -> tuple[Any, str | None]:
    """For ``--only`` without ``--continue``: ``(the cached calibration of the same grid, whose
    groups are measured again and replaced, or None; why the run must not be cached, or None)``.
    A run of another grid is not cached over a complete calibration (the cache keeps one per
    device, dtype and thread count)."""
    from infer_opt.errors import InvalidInput
    from infer_opt.profilers import calibration

    path = calibration.cache_path(device, dtype)
    if not path.exists():
        return None, None
    try:
        cached = calibration.load_calibration(path, option="only", to_use=False)
    except InvalidInput:
        return None, None
    if cached.grid == grid:
        return cached, None
    if cached.complete:
        return None, f"{path} keeps its complete {cached.grid} calibration (this run is --shapes {grid})"
    return None, None


DeviceOpt = option(
    str,
    "--device",
    help="auto (CUDA if available), cpu, cuda or cuda:N; with --from-trace, the traces' GPU "
    "(h100, mi250 …) when their deviceProperties do not name it.",
)
OnlyOpt = option(
    list[str] | None, "--only", help=f"Measure only these groups (repeatable): {', '.join(GROUP_NAMES)}."
)
GridOpt = option(
    str,
    "--shapes",
    parse=Choice(("standard", "tiny")),
    help="standard, or tiny (a few shapes per group: a smoke test, not one to predict with).",
)
RepsOpt = option(int, "--reps", parse=Count(3, 1000), help="Profiled repetitions per shape.")
ResumeOpt = option(bool, "--continue", help="Continue the saved run: skip the groups it finished.")
TraceArg = argument(
    list[Path] | None,
    metavar="TRACE",
    parse=InputFile(),
    help="More traces for --from-trace (--from-trace traces/h100_*.json.gz: a shell glob).",
    show_default=False,
)


@with_output()
def calibrate(
    device: DeviceOpt = "auto",
    dtype: AutoDtypeOpt = "auto",
    threads: ThreadsOpt = None,
    only: OnlyOpt = None,
    grid: GridOpt = "standard",
    reps: RepsOpt = 5,
    resume: ResumeOpt = False,
    from_trace: FromTraceOpt = None,
    trace: TraceArg = None,
    *,
    output: Output,
) -> Any:
    if trace and not from_trace:
        from infer_opt.errors import InvalidInput

        raise InvalidInput("TRACE", str(trace[0]), "trace files are read with --from-trace FILE...")
    if from_trace:
        from infer_opt.cli.validate_trace import from_traces

        from_trace = [*from_trace, *(trace or [])]

        used = {"--dtype": dtype != "auto", "--threads": threads is not None}
        used |= {"--only": bool(only), "--shapes": grid != "standard", "--continue": resume}
        return from_traces(from_trace, given=used, device=device)
    from infer_opt.profilers import calibration
    from infer_opt.profilers import device as devices

    groups = _only(only)
    dev = devices.resolve_device(device)
    if threads is not None:
        devices.set_threads(threads)
    torch_dtype = devices.parse_dtype(dtype, dev)
    previous, said = _resume_from(output, dev, torch_dtype, grid) if resume else (None, ())
    base, not_cached = _to_update(dev, torch_dtype, grid) if groups and not resume else (None, None)
    stored: list[Any] = []
    if not_cached is None:  # before any measurement: the cache must take what is measured
        calibration.watch_cache(dev, torch_dtype)

    def save(result: Any) -> None:
        if not_cached is None:
            stored.append(calibration.cache_calibration(result))
        output.save_partial(result)

    with progress_bar("calibrate") as bar:
        result = calibration.calibrate(
            dev, torch_dtype, grid=grid, only=groups, reps=reps, resume_from=previous, update=base,
            on_group=save, progress=bar,
        )  # fmt: skip
    notices = (*said, *dict.fromkeys(n for s in stored for n in s.notices))
    if stored and stored[-1].saved:
        typer.echo(f"saved {stored[-1].path}", err=True)
    if not_cached is not None:
        typer.echo(f"not cached: {not_cached}", err=True)
    return Outcome(result, exit_code=0 if result.complete or groups else 130, warnings=notices)


def register(app: typer.Typer) -> None:
    app.command("calibrate", help=HELP)(calibrate)
