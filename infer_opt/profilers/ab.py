"""``infer-opt ab``: two command lines run alternately — A B A B … — each writing its
result, then compared with the run-level statistics of :mod:`infer_opt.cost_models.compare_runs`.

Alternation puts drift (other load, clock speed, a first run that compiles) on both sides
alike; each round is a new process, so the spread between rounds includes what changes from
one process to the next (allocator, caches, frequency). Each side's command is split with
:func:`shlex.split` and run without a shell, with ``--out <folder>/<side>-<round>.json``
appended; it must write a ``kernels`` or ``profile`` result there. A leading ``infer-opt``
runs this infer-opt (``python -m infer_opt`` with this interpreter); any other program (an
``infer-opt`` in another environment, a wrapper script) runs as given. Each side may add
environment variables (``KEY=VALUE``).

The same command on both sides (an A/A) measures the device's run-to-run noise
(:func:`infer_opt.cost_models.compare_runs.noise_floor`), saved per device key by
:mod:`infer_opt.store` as the default floor of later comparisons.

Nothing here imports torch: the commands do the measuring.
"""

from __future__ import annotations

import datetime as _dt
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infer_opt.cost_models.compare_runs import Noise, compare_results, noise_floor
from infer_opt.errors import Interrupted, InvalidInput, RunFailure
from infer_opt.notices import Notice
from infer_opt.results import load_result
from infer_opt.results.ab import AbResult, AbRun
from infer_opt.results.noise_floor import NoiseFloor

if TYPE_CHECKING:
    from infer_opt.requests import AbRequest

SIDES = ("base", "new")
#: lines of a failed command's stderr quoted in the failure
STDERR_LINES = 3

#: runs one command: (argv, environment) -> (exit status, stderr text)
Runner = Callable[[Sequence[str], Mapping[str, str]], tuple[int, str]]
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Side:
    """One side's command line, split, and its extra environment."""

    name: str
    command: str
    argv: tuple[str, ...]
    env: tuple[str, ...] = ()

    def environment(self) -> dict[str, str]:
        return dict(item.split("=", 1) for item in self.env)


def side(name: str, command: str, env: Sequence[str] = ()) -> Side:
    """Parse one side: ``command`` split as a shell would (no shell runs it), ``env`` as
    ``KEY=VALUE`` items. Bad input names the parameter (``base``, ``new_env``…)."""
    try:
        argv = tuple(shlex.split(command))
    except ValueError as exc:
        raise InvalidInput(name, command, f"cannot split the command line ({exc})") from None
    if not argv:
        raise InvalidInput(name, command, "give a command line, e.g. 'infer-opt kernels --suite quick'")
    for item in env:
        key, sep, _ = item.partition("=")
        if not sep or not key or not key.replace("_", "").isalnum():
            raise InvalidInput(f"{name}_env", item, "expected KEY=VALUE")
    parsed = Side(name, shlex.join(argv), argv, tuple(env))
    check_comparable(parsed)  # before either side runs (a calibrate would overwrite the cache)
    return parsed


#: the infer-opt commands whose results ab (and compare) can compare
COMPARABLE_COMMANDS = ("profile", "kernels")


def _subcommand(argv: Sequence[str]) -> str | None:
    """The infer-opt command ``argv`` runs (``infer-opt X`` or ``python -m infer_opt X``), else None."""
    if argv and Path(argv[0]).name == "infer-opt":
        rest = list(argv[1:])
    elif "-m" in argv and argv[list(argv).index("-m") + 1 : list(argv).index("-m") + 2] == ["infer_opt"]:
        rest = list(argv[list(argv).index("-m") + 2 :])
    else:
        return None
    return next((a for a in rest if not a.startswith("-")), None)


def check_comparable(s: Side) -> None:
    """An infer-opt command whose result cannot be compared (``calibrate``, ``roofline``,
    ``profile --tp N``) is refused before anything runs, naming the side."""
    sub = _subcommand(s.argv)
    tp = next((v for a, v in zip(s.argv, s.argv[1:], strict=False) if a == "--tp"), "1")
    if sub is None or (sub in COMPARABLE_COMMANDS and tp == "1"):
        return
    what = f"infer-opt {sub}" + (f" --tp {tp}" if sub == "profile" else "")
    why = f"ab compares the results of infer-opt profile or kernels; {what} gives none it can compare"
    raise InvalidInput(s.name, s.command, why)


def program(argv: Sequence[str]) -> list[str]:
    """``infer-opt ARGS`` as this interpreter's ``python -m infer_opt ARGS``; others unchanged."""
    if argv and argv[0] == "infer-opt":
        return [sys.executable, "-m", "infer_opt", *argv[1:]]
    return list(argv)


def subprocess_runner(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
    """Run ``argv`` (no shell) with ``env``; stdout discarded, stderr kept for a failure."""
    proc = subprocess.run(
        list(argv), env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, check=False,
    )  # fmt: skip
    return proc.returncode, proc.stderr or ""


def _failure(s: Side, round_: int, why: str, done: Sequence[AbRun], folder: Path) -> RunFailure:
    kept = ", ".join(Path(r.file).name for r in done)
    where = f"; finished runs kept in {folder} ({kept})" if done else ""
    return RunFailure(f"the {s.name} command failed in round {round_}: {why}{where}")


def _tail(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return " / ".join(lines[-STDERR_LINES:]) if lines else "no message"


def alternate(
    base: Side,
    new: Side,
    rounds: int,
    folder: Path,
    *,
    runner: Runner = subprocess_runner,
    progress: Progress | None = None,
) -> list[AbRun]:
    """Run ``base`` and ``new`` alternately for ``rounds`` rounds, each writing
    ``folder/<side>-<round>.json``. A failing command is a :class:`RunFailure` naming the side
    and round (finished files stay); Ctrl-C is :class:`Interrupted` naming the folder."""
    done: list[AbRun] = []
    for round_ in range(1, rounds + 1):
        for s in (base, new):
            if progress is not None:
                progress(len(done), 2 * rounds, f"round {round_}/{rounds}: {s.name}")
            file = folder / f"{s.name}-{round_}.json"
            argv = [*program(s.argv), "--out", str(file)]
            start = time.perf_counter()
            try:
                code, stderr = runner(argv, {**os.environ, **s.environment()})
            except KeyboardInterrupt:
                kept = f"{len(done)} finished run(s) kept in {folder}" if done else "nothing finished"
                raise Interrupted(f"interrupted in round {round_} ({s.name}): {kept}") from None
            except OSError as exc:
                raise _failure(
                    s, round_, f"cannot start {argv[0]!r} ({exc.strerror or exc})", done, folder
                ) from None
            if code != 0:
                raise _failure(s, round_, f"exit status {code}: {_tail(stderr)}", done, folder)
            if not file.exists():
                why = f"it wrote no result to {file} (is it a kernels or profile command?)"
                raise _failure(s, round_, why, done, folder)
            done.append(AbRun(s.name, round_, str(file), time.perf_counter() - start))
    if progress is not None:
        progress(2 * rounds, 2 * rounds, "comparing")
    return done


def _load(runs: Sequence[AbRun], name: str) -> list[Any]:
    out = []
    for run in runs:
        if run.side != name:
            continue
        try:
            out.append(load_result(run.file).result)
        except InvalidInput as exc:
            raise RunFailure(
                f"the {name} command's result {run.file} cannot be read: {exc.expected}"
            ) from None
    return out


def _save(record: NoiseFloor) -> tuple[str | None, list[Notice]]:
    """Cache the A/A's floor: its path, or None with the reasons (refused, or not writable)."""
    from infer_opt import store

    try:
        stored = store.save_floor(record)
    except OSError as exc:
        return None, [Notice("noise_floor_not_saved", {"reason": exc.strerror or str(exc)})]
    if not stored.saved:
        return None, [Notice("noise_floor_not_saved", {"reason": "it failed its check"}), *stored.notices]
    return str(stored.path), list(stored.notices)


def _folder(folder: Path | None) -> Path:
    """The folder the rounds' result files go to (created): ``dir``, else a new one under the
    cache (``<cache>/ab/<UTC time>``)."""
    if folder is None:
        from infer_opt.files import cache_dir

        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        folder = cache_dir() / "ab" / stamp
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput("--dir", str(folder), f"cannot create it ({exc.strerror})") from None
    return folder


def run(
    request: AbRequest,
    *,
    runner: Runner = subprocess_runner,
    progress: Progress | None = None,
    said: Callable[[str], None] = lambda line: None,
) -> AbResult:
    """``infer-opt ab``: alternate the two sides (:func:`alternate`) into the request's folder
    (``said`` names it), compare all base rounds with all new rounds (runs pooled per side),
    and after an A/A measure and save the noise floor (unless not ``save_floor``)."""
    from infer_opt import store

    base, new = side("base", request.base, request.base_env), side("new", request.new, request.new_env)
    folder, rounds = _folder(request.dir), request.rounds
    said(f"rounds' results go to {folder}")
    runs = alternate(base, new, rounds, folder, runner=runner, progress=progress)
    bases, news = _load(runs, "base"), _load(runs, "new")
    aa = base.argv == new.argv and base.env == new.env
    noise = Noise() if aa else store.noise_for([*bases, *news])
    comparison = compare_results(
        bases, news, base_name="base", new_name="new", noise=noise, commands=(base.command, new.command),
        alpha=request.significance, threshold=request.threshold, force=request.force, seed=request.seed,
    )  # fmt: skip
    record, saved, warnings = None, None, list(noise.notices)
    if aa and len(runs) >= 2:
        record = noise_floor([*bases, *news], command=base.command)
        if request.save_floor:
            saved, notices = _save(record)
            warnings += notices
    return AbResult(
        base_command=base.command, new_command=new.command, base_env=base.env, new_env=new.env,
        rounds=rounds, folder=str(folder), runs=tuple(runs), comparison=comparison, noise_floor=record,
        noise_saved_to=saved, warnings=tuple(warnings),
    )  # fmt: skip
