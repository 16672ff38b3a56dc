"""Options several commands share: the model to run (``MODEL``, ``--device``, ``--dtype``,
``--hf-config``), ``--threads``, the progress bar and reading a text input. Output options
live in :mod:`infer_opt.cli.output`; option types in :mod:`infer_opt.cli.types`."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from infer_opt import files
from infer_opt.cli._click import ParamType
from infer_opt.cli.types import Count
from infer_opt.errors import InvalidInput
from infer_opt.requests import MAX_REPS, MAX_RUNS


def option(kind: Any, *flags: str, parse: ParamType | None = None, help: str, **extra: Any) -> Any:
    """An option declared in one line: ``Annotated[kind, typer.Option(*flags, click_type=parse,
    help=help, **extra)]``, for a command's signature (``k: KOpt = 3``) or as a module alias."""
    return Annotated[kind, typer.Option(*flags, click_type=parse, help=help, **extra)]


DeviceOpt = option(str, "--device", help="auto (CUDA if available), cpu, cuda or cuda:N.")
AutoDtypeOpt = option(
    str, "--dtype", help="auto (float32 on CPU, bfloat16 on CUDA), float32, bfloat16, float16."
)
ModelArg = Annotated[
    str,
    typer.Argument(
        help="Built-in name, package.module:factory, path/to/file.py:factory, or hf:<model_type>."
    ),
]
HfConfigOpt = option(
    list[str] | None, "--hf-config", help="Config override for hf: models, KEY=VALUE (repeatable)."
)
ThreadsOpt = option(
    int | None,
    "--threads",
    parse=Count(1, os.cpu_count() or 1),
    help=f"CPU threads for torch (its intra-op threads), 1 to {os.cpu_count() or 1} here; "
    "default: torch's choice.",
)


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int, str], None]]:
    """A transient rich progress bar on stderr when it is a terminal; yields the profilers'
    progress callback ``update(done, total, description)``."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    bar = Progress(
        TextColumn("[bold]{task.fields[label]}[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,  # a log file gets no bar (and no blank line where it was)
    )
    task = bar.add_task("", total=None, label=label)

    def update(done: int, total: int, description: str) -> None:
        bar.update(task, completed=done, total=total, description=description)

    with bar:
        yield update


def read_text(path: str | Path, option: str) -> tuple[str, str]:
    """The text of ``path`` (``-`` = stdin) and a name for it in messages."""
    if str(path) == "-":
        return sys.stdin.read(), "stdin"
    return files.read_text(path, option), Path(path).name


def warmup_option(help: str, most: int = MAX_REPS) -> Any:
    """``--warmup N``: untimed calls before timing, 0 to ``most``."""
    return option(int, "--warmup", parse=Count(0, most), help=help)


def reps_option(help: str, most: int = MAX_REPS) -> Any:
    """``--reps N``: timed calls, 1 to ``most``."""
    return option(int, "--reps", parse=Count(1, most), help=help)


def seed_option(of: str) -> Any:
    """``--seed N`` (N >= 0), helped as "Seed of ``of``."."""
    return option(int, "--seed", parse=Count(0), help=f"Seed of {of}.")


def runs_option(help: str) -> Any:
    """``--runs N``: independent passes, 1 to :data:`MAX_RUNS`."""
    return option(int, "--runs", parse=Count(1, MAX_RUNS), help=help)


def read_resume(path: Path | None, kind: str, what: str) -> Any:
    """The saved result ``--resume`` names (None without one): a ``.json`` file of result kind
    ``kind`` (``what`` names it in the refusal, e.g. "an amortize measure result")."""
    if path is None:
        return None
    from infer_opt.results import load_result

    if path.suffix.lower() != ".json":
        raise InvalidInput("--resume", str(path), "expected the .json file a run wrote with --out FILE.json")
    try:
        loaded = load_result(path)
    except InvalidInput as exc:
        raise exc.under("--resume", str(path)) from None
    if loaded.kind != kind:
        raise InvalidInput("--resume", str(path), f"not {what} (kind {loaded.kind})")
    return loaded.result
