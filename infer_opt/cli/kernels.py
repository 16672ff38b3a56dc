"""``infer-opt kernels``: time the kernel suite (matmul, copy/elementwise, launch floor,
softmax, layer norm, attention variants, fused bias+GELU) on one device and dtype."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from infer_opt.cli.common import (
    DeviceOpt,
    FormatOpt,
    JsonOpt,
    MarkdownOpt,
    OutOpt,
    check_outputs,
    emit,
    format_for,
)
from infer_opt.errors import InvalidInput, RunFailure, UnsupportedOnDevice
from infer_opt.units import parse_duration, parse_int

if TYPE_CHECKING:
    from infer_opt.profilers.kernels import KernelSuiteResult, SuiteSettings

HELP = """Time real kernels with known FLOPs F and minimum bytes Q: matmul sweep (compute
bound), copy/add/scale sweep (bandwidth bound), tiny adds (launch floor), softmax, layer
norm, attention explicit vs blocked (online softmax) vs SDPA, eager vs torch.compile bias+GELU.

achieved FLOP/s = F / t, bytes/s = Q / t, t = median over repetitions (first call timed apart).

Optimized variants are checked against their reference output before they are timed.
Results are saved after every case (--out), so an interrupt keeps what finished.

Examples:

  infer-opt kernels --suite quick

  infer-opt kernels --device cuda --dtype bfloat16 --l2-flush --out kernels.json

  infer-opt kernels --only matmul --only copy --reps auto
"""

DtypeOpt = Annotated[str, typer.Option("--dtype", help="float32, bfloat16 or float16.")]
SuiteOpt = Annotated[
    str,
    typer.Option(
        "--suite",
        help="quick (10-20 s on a 2-core CPU, plus ~15 s for a first torch.compile) or full (larger sweeps).",
    ),
]
FlushOpt = Annotated[
    bool,
    typer.Option(
        "--l2-flush/--no-l2-flush",
        help="Write a buffer larger than the GPU's L2 (CPU: last-level cache) before each "
        "repetition, outside the timed region, so inputs come from DRAM/HBM.",
    ),
]
WarmupOpt = Annotated[
    str, typer.Option("--warmup", help="Warm-up calls before timing: a count (5) or a duration (200ms).")
]
RepsOpt = Annotated[
    str,
    typer.Option(
        "--reps",
        help="Timed repetitions per case, or 'auto': repeat until IQR/median < 5% (--max-time caps).",
    ),
]
ThreadsOpt = Annotated[
    str | None,
    typer.Option("--threads", help="CPU threads for torch (torch.set_num_threads); default: torch's choice."),
]
MaxTimeOpt = Annotated[
    str | None, typer.Option("--max-time", help="Cap on timed repetitions per case, e.g. 2s.")
]


def parse_settings(
    warmup: str, reps: str, max_time: str | None, *, flush: bool, cuda_graphs: bool
) -> SuiteSettings:
    """Turn the timing options into :class:`SuiteSettings` (errors name the option)."""
    from infer_opt.profilers.kernels import SuiteSettings

    warmup_calls: int | None
    warmup_time: float | None = None
    if re.fullmatch(r"\s*\d+\s*", warmup):
        warmup_calls = parse_int(warmup, option="--warmup", low=0)
    else:
        warmup_calls = None
        warmup_time = parse_duration(warmup, option="--warmup")
    max_time_s = None if max_time is None else parse_duration(max_time, option="--max-time", allow_zero=False)
    if reps.strip().lower() == "auto":
        return SuiteSettings(
            warmup=warmup_calls,
            warmup_time_s=warmup_time,
            reps=None,
            max_time_s=2.0 if max_time_s is None else max_time_s,
            flush_cache=flush,
            cuda_graphs=cuda_graphs,
        )
    return SuiteSettings(
        warmup=warmup_calls,
        warmup_time_s=warmup_time,
        reps=parse_int(reps, option="--reps", low=1, high=100_000),
        max_time_s=max_time_s,
        flush_cache=flush,
        cuda_graphs=cuda_graphs,
    )


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int, str], None]]:
    """A transient rich progress bar on stderr; yields the profilers' progress callback."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("[bold]{task.fields[label]}[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task("", total=None, label=label)

    def update(done: int, total: int, description: str) -> None:
        bar.update(task, completed=done, total=total, description=description)

    with bar:
        yield update


def save_partial(paths: list[Path]) -> Callable[[Any], None]:
    """A callback writing the result so far to every ``--out`` file (atomically)."""
    from infer_opt.cli.common import _render
    from infer_opt.results import atomic_write_text

    targets = [(p, format_for(p)) for p in paths if str(p) != "-"]

    def write(result: Any) -> None:
        for path, fmt in targets:
            atomic_write_text(path, _render(result, fmt))

    return write


def run_suite_cli(
    *,
    device: str,
    dtype: str,
    suite: str,
    only: list[str] | None,
    settings: SuiteSettings,
    out: list[Path] | None,
    threads: str | None = None,
    label: str = "kernels",
) -> KernelSuiteResult:
    """Resolve device and dtype, select cases, run them under a progress bar, saving
    after each case. Shared by ``kernels`` and ``roofline``."""
    from infer_opt.profilers import device as devices
    from infer_opt.profilers import kernels

    n_threads = None if threads is None else parse_int(threads, option="--threads", low=1, high=4096)
    dev = devices.resolve_device(device)
    torch_dtype = devices.parse_dtype(dtype, dev)
    if n_threads is not None:
        devices.set_threads(n_threads)
    if settings.cuda_graphs and not devices.is_cuda(dev):
        raise UnsupportedOnDevice(
            f"--cuda-graphs: CUDA graphs need a CUDA device; this run is on {dev} (drop --cuda-graphs)"
        )
    kind = "cuda" if devices.is_cuda(dev) else "cpu"
    known = kernels.all_cases(kind, suite)
    cases = kernels.select(known, only)
    check_outputs(out)
    with progress_bar(label) as update:
        return kernels.run_suite(
            cases,
            dev,
            torch_dtype,
            settings,
            suite=suite,
            all_known=known,
            progress=update,
            on_row=save_partial(list(out or [])),
        )


def kernels_command(
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    suite: SuiteOpt = "quick",
    only: Annotated[
        list[str] | None,
        typer.Option("--only", help="Run only these kernels or families (repeatable, or comma-separated)."),
    ] = None,
    l2_flush: FlushOpt = False,
    cuda_graphs: Annotated[
        bool,
        typer.Option(
            "--cuda-graphs",
            help="Also time each kernel as CUDA-graph replays (10 calls per graph): the gap to "
            "eager timing is launch overhead. CUDA only.",
        ),
    ] = False,
    warmup: WarmupOpt = "5",
    reps: RepsOpt = "20",
    max_time: MaxTimeOpt = None,
    threads: ThreadsOpt = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    fmt: FormatOpt = None,
) -> None:
    if suite not in ("quick", "full"):
        raise InvalidInput("--suite", suite, "expected quick or full")
    settings = parse_settings(warmup, reps, max_time, flush=l2_flush, cuda_graphs=cuda_graphs)
    result = run_suite_cli(
        device=device, dtype=dtype, suite=suite, only=only, settings=settings, out=out, threads=threads
    )
    emit(result, json_out=json_out, out=out, markdown=markdown, fmt=fmt)
    if not result.complete:
        raise typer.Exit(130)
    failed = [row.key for row in result.rows if row.passed is False]
    if failed:
        raise RunFailure(f"output check failed for {', '.join(failed)} (see the table)")


def register(app: typer.Typer) -> None:
    app.command("kernels", help=HELP)(kernels_command)
