"""Options several commands share: the model to run (``MODEL``, ``--device``, ``--dtype``,
``--hf-config``), ``--threads`` and the progress bar. Output options
live in :mod:`infer_opt.cli.output`; option types in :mod:`infer_opt.cli.types`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from infer_opt.cli._click import ParamType
from infer_opt.cli.types import Count, InputFile
from infer_opt.requests import MAX_REPS, MAX_RUNS


def option(kind: Any, *flags: str, parse: ParamType | None = None, help: str, **extra: Any) -> Any:
    """An option declared in one line: ``Annotated[kind, typer.Option(*flags, click_type=parse,
    help=help, **extra)]``, for a command's signature (``k: KOpt = 3``) or as a module alias."""
    return Annotated[kind, typer.Option(*flags, click_type=parse, help=help, **extra)]


def argument(kind: Any, *, parse: ParamType | None = None, help: str, **extra: Any) -> Any:
    """A positional argument declared in one line, as :func:`option` declares an option:
    ``Annotated[kind, typer.Argument(click_type=parse, help=help, **extra)]``."""
    return Annotated[kind, typer.Argument(click_type=parse, help=help, **extra)]


DeviceOpt = option(str, "--device", help="auto (CUDA if available), cpu, cuda or cuda:N.")
AutoDtypeOpt = option(
    str, "--dtype", help="auto (float32 on CPU, bfloat16 on CUDA), float32, bfloat16, float16."
)
ModelArg = argument(
    str, help="Built-in name, package.module:factory, path/to/file.py:factory, or hf:<model_type>[:base]."
)
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
BeforeOpt = option(
    Path | None,
    "--before",
    parse=InputFile(),
    help="An earlier /metrics snapshot: use the interval between the two (with --prometheus).",
)

#: option spellings renamed so that one name means one thing in every command (issue 43 §5):
#: command -> {old flag: new flag}. The old spelling still works for one release, saying so on
#: stderr (:func:`renamed_spellings`); it is gone from ``--help``.
RENAMED: dict[str, dict[str, str]] = {
    "calibrate": {"--resume": "--continue", "--grid": "--shapes"},
    "compare": {"--alpha": "--significance"},
    "ab": {"--alpha": "--significance"},
    "comm": {"--backend": "--dist-backend"},
    "amdahl": {"--target": "--target-speedup"},
    "amortize measure": {"--calls": "--calls-per-bucket"},
    "speculative speedup": {"--sweep-k": "--k-max"},
    "tune capture-sizes": {"--cost": "--cost-file", "--eager-cost": "--eager-cost-file"},
    "tune speculative": {"--target-cost": "--target-cost-file", "--draft-cost": "--draft-cost-file"},
}


def deprecated(command: str, old: str, new: str) -> None:
    """The one line on stderr when an old spelling is used: what to write instead."""
    typer.secho(
        f"warning: `{command} {old}` is now `{new}`; the old spelling goes in the next release.",
        fg="yellow",
        err=True,
    )


def renamed_spellings(command: str, args: list[str]) -> list[str]:
    """``args`` with the old spellings of ``command``'s renamed options (:data:`RENAMED`) written
    the new way (``--cost x``, ``--cost=x``), each said once by :func:`deprecated`; ``--`` ends the
    options."""
    renamed = RENAMED.get(command, {})
    out, said = list(args), set()
    end = args.index("--") if "--" in args else len(args)
    for i, token in enumerate(args[:end]):
        old, eq, value = token.partition("=")
        if old in renamed:
            out[i] = renamed[old] + eq + value
            if old not in said:
                said.add(old)
                deprecated(command, old, renamed[old])
    return out


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
