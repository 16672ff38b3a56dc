"""Device calibrations cached per run key — the roofline fit, and any other kind of
calibration that follows the same rules — plus the measurement files ``infer-opt roofline``
reads and the quick calibration sweep ``profile`` runs when nothing usable is cached.

The cache rules (:class:`CalibrationStore`, one instance per kind; :data:`ROOFLINE` here):

* One file per kind and :class:`~infer_opt.run_key.RunKey` — device model, dtype,
  CPU threads, float32 matmul precision and timing mode — at
  ``cache_dir()/<kind>/<key slug>.json`` (``$INFER_OPT_CACHE`` overrides the directory,
  default ``~/.cache/infer-opt``), as an ordinary result envelope, written atomically
  (temporary file and rename).
* Validated before it is saved and again before it is used, by the kind's check (for the
  roofline :func:`~infer_opt.cost_models.roofline.fit_problems`: finite positive parameters
  the data pin down, a median fit error within 35%, enough kernels, no tick-quantized
  timings, and the run's key). A calibration that fails is not saved; a cached one that fails
  is not used (and is replaced by the next good one).
* A cache file that cannot be read as a result of its kind is reported as corrupt and moved
  aside (``<name>.json.corrupt``), never silently overwritten.
* Written under a lock (``fcntl.flock`` on ``<name>.json.lock``): two runs saving the same key
  take turns. A run that :meth:`~CalibrationStore.watch` es its file before measuring and finds
  it written by another run meanwhile moves that run's file aside (``<name>.other.json``) and
  says so, so two parallel calibrations never silently lose one.
* :func:`check_writable` is run before any measurement: a cache that cannot be written is an
  error before the work, never a traceback after it.

torch is imported only by the functions that measure.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from infer_opt.cost_models.roofline import (
    PROFILE_TIMINGS,
    KernelPoint,
    RooflineFit,
    default_fit_families,
    fit_problems,
    fit_roofline,
)
from infer_opt.errors import InvalidInput
from infer_opt.kinds.kernels import SuiteSettings
from infer_opt.notices import Notice
from infer_opt.results import Result, parse_envelope, save_result
from infer_opt.run_key import RunKey
from infer_opt.inputs.tables import Field, read_json, read_table, reject_non_finite

CACHE_ENV = "INFER_OPT_CACHE"
REQUIRED_COLUMNS = ("name", "flops", "bytes", "time_s")

R = TypeVar("R", bound=Result)
#: check(result, the run's key or None, the timings the run accepts or None) -> problems
Check = Callable[[Any, RunKey | None, Sequence[str] | None], tuple[Notice, ...]]


def cache_dir() -> Path:
    """``$INFER_OPT_CACHE`` or ``~/.cache/infer-opt``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "infer-opt"


@dataclass(frozen=True)
class Lookup(Generic[R]):
    """What a cache lookup found: the usable result (or None), where it looked, and what is
    worth saying (a corrupt file moved aside, a cached result that failed its check)."""

    result: R | None
    path: Path
    notices: tuple[Notice, ...] = ()


@dataclass(frozen=True)
class Stored:
    """What saving to the cache did: ``saved`` False when the check refused the result
    (``notices`` say why); a corrupt file found in the way is reported in ``notices`` too."""

    path: Path
    saved: bool
    notices: tuple[Notice, ...] = ()


class CalibrationStore(Generic[R]):
    """The cache of one calibration kind (module docstring): ``kind`` names the directory and
    the result kind; ``check`` validates a result, on its own (before saving) or for a run's
    key (before use); ``key_of`` gives a result's key (``RunKey.of`` reads the ``device``,
    ``device_name``, ``dtype``, ``threads``, ``matmul_precision`` and ``timing`` attributes)."""

    def __init__(
        self,
        kind: str,
        result_type: type[R],
        check: Check,
        key_of: Callable[[R], RunKey] = RunKey.of,
    ) -> None:
        self.kind = kind
        self.result_type = result_type
        self.check = check
        self.key_of = key_of
        #: per cache file: its state when this process last saw it (watched or written)
        self._seen: dict[Path, tuple[int, int, int] | None] = {}
        #: the files another run wrote while this one ran, already said
        self._said: set[Path] = set()

    def watch(self, path: Path) -> None:
        """Remember ``path``'s state now (before measuring): a later :meth:`save` that finds it
        changed knows another run wrote it meanwhile."""
        self._seen[path] = _state(path)

    def path(self, key: RunKey) -> Path:
        """Where the calibration for ``key`` is cached."""
        return cache_dir() / self.kind / f"{key.slug()}.json"

    def read_file(self, path: str | os.PathLike[str]) -> R:
        """A result of this kind from a file; a missing or unreadable file or another kind
        is an :class:`InvalidInput` naming parameter ``kind``."""
        target = Path(path)
        try:
            return self._read(target)
        except FileNotFoundError:
            raise InvalidInput(self.kind, str(target), "file does not exist") from None
        except InvalidInput as exc:  # not an envelope, an unknown kind or version
            raise exc.under(self.kind, str(target)) from None
        except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
            why = f"{type(exc).__name__}: {str(exc).splitlines()[0]}" if str(exc) else type(exc).__name__
            raise InvalidInput(
                self.kind, str(target), f"not a readable infer-opt {self.kind} result ({why})"
            ) from None

    def load(self, key: RunKey, *, timings: Sequence[str] | None = None) -> Lookup[R]:
        """The cached result for ``key`` if there is one and it passes the check for ``key``
        (its timing may be any of ``timings``, default ``key.timing``)."""
        path = self.path(key)
        try:
            result = self._read(path)
        except FileNotFoundError:
            return Lookup(None, path)
        except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
            return Lookup(None, path, (self._move_aside(path, exc),))
        problems = self.check(result, key, timings)
        if problems:
            rejected = Notice("calibration_cache_rejected", {"kind": self.kind, "path": str(path)})
            return Lookup(None, path, (rejected, *(n.about(f"cached {self.kind}") for n in problems)))
        return Lookup(result, path)

    def save(self, result: R) -> Stored:
        """Save ``result`` to the cache under its own key, atomically, if it passes the check;
        a corrupt file at that path is reported and moved aside first."""
        path = self.path(self.key_of(result))
        problems = self.check(result, None, None)
        if problems:
            return Stored(path, False, problems)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path):
            notices = self._keep_other(path)
            if not notices and path.exists():
                try:
                    self._read(path)
                except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
                    notices = (self._move_aside(path, exc),)
            save_result(path, result)
            self._seen[path] = _state(path)
        return Stored(path, True, notices)

    def _keep_other(self, path: Path) -> tuple[Notice, ...]:
        """When another run wrote ``path`` since this one saw it: its file moved aside to
        ``<name>.other.json`` (said once per file and run)."""
        if path not in self._seen or _state(path) in (None, self._seen[path]):
            return ()
        kept = path.with_name(path.name.removesuffix(".json") + ".other.json")
        try:
            os.replace(path, kept)
        except OSError:
            return ()
        if path in self._said:
            return ()
        self._said.add(path)
        values = {"kind": self.kind, "path": str(path), "kept": str(kept)}
        return (Notice("calibration_cache_concurrent", values),)

    def _read(self, path: Path) -> R:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=reject_non_finite)
        loaded = parse_envelope(data, source=str(path))
        if not isinstance(loaded.result, self.result_type):
            raise ValueError(f"holds a {loaded.kind!r} result, not {self.kind}")
        return loaded.result  # type: ignore[return-value]

    def _move_aside(self, path: Path, exc: BaseException) -> Notice:
        aside = path.with_name(path.name + ".corrupt")
        try:
            os.replace(path, aside)
            moved = str(aside)
        except OSError:
            moved = ""
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip(": ")
        return Notice(
            "calibration_cache_corrupt",
            {"kind": self.kind, "path": str(path), "moved_to": moved, "reason": reason},
        )


def _state(path: Path) -> tuple[int, int, int] | None:
    """A file's identity and version (inode, size, modification time), None when absent."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``<path>.lock`` (a no-op where there is no fcntl)."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def check_writable(kind: str, *, instead: str = "") -> Path:
    """The cache folder of ``kind``, created and checked writable before any measurement: an
    :class:`InvalidInput` naming it (and ``$INFER_OPT_CACHE``, and ``instead``: what else to
    do) when it is not."""
    import tempfile

    folder = cache_dir() / kind
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".writable-", delete=True):
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        other = f", or {instead}" if instead else ""
        raise InvalidInput(
            CACHE_ENV,
            str(folder),
            f"the cache cannot be written ({why}), so nothing was measured: set {CACHE_ENV} to a "
            f"writable folder{other}",
        ) from None
    return folder


def _check_fit(fit: RooflineFit, key: RunKey | None, timings: Sequence[str] | None) -> tuple[Notice, ...]:
    return fit_problems(fit, key, timings=timings)


#: the roofline fits ``profile`` places operators against
ROOFLINE: CalibrationStore[RooflineFit] = CalibrationStore("roofline", RooflineFit, _check_fit)


def fit_path(device: Any, dtype: Any, timing: str | None = None) -> Path:
    """Where the fit for this device model and dtype (as torch is set now) is cached;
    ``timing`` defaults to the one a calibration uses on that device (:data:`CALIBRATION_TIMING`)."""
    from infer_opt.profilers.device import is_cuda, run_key

    kind = "cuda" if is_cuda(device) else "cpu"
    return ROOFLINE.path(run_key(device, dtype, timing or CALIBRATION_TIMING[kind]))


def save_fit(fit: RooflineFit, path: str | os.PathLike[str]) -> Path:
    """Save ``fit`` to a file of the user's (envelope JSON, atomic, not validated)."""
    return save_result(Path(path), fit)


def cache_fit(fit: RooflineFit) -> Stored:
    """Save ``fit`` to the cache if it is fit to be used (:meth:`CalibrationStore.save`)."""
    return ROOFLINE.save(fit)


def load_fit(path: str | os.PathLike[str]) -> RooflineFit:
    """The fit in a file; a missing or unreadable file is an :class:`InvalidInput`."""
    return ROOFLINE.read_file(path)


# ---------------------------------------------------------------------------- measurement files


#: a measurement CSV's columns: name, flops, bytes, time (``time_s``; ``time_us`` etc. change the
#: unit); ``family``, ``size``/``label`` optional; an empty time is a case that was skipped
POINT_FIELDS = (
    Field("name", "text"),
    Field("flops", "number", high=1e30),
    Field("bytes", "number", high=1e30),
    # below a femtosecond a time is a unit mistake, not a kernel (and its log overflows the fit)
    Field("time", "duration", unit="s", low=1e-15, high=1e9, blank_ok=True),
    Field("family", "text", required=False, blank_ok=True),
    Field("size", "text", required=False, blank_ok=True, aliases=("label",)),
)


def points_from_csv(text: str, source: str = "measurements") -> list[KernelPoint]:
    """Rows of a CSV/TSV with columns ``name, flops, bytes, time_s`` (``family`` optional), read
    by :func:`infer_opt.inputs.tables.read_table` (errors name the file, line, column and value).

    The CSV that ``infer-opt kernels --out FILE.csv`` writes holds one section per family,
    each after a ``# <family>`` line with its own header; sections are read in turn and the
    family is taken from the section title when there is no ``family`` column."""
    sections: list[tuple[str, int, list[str]]] = []
    title, start, lines = "", 0, []
    for number, line in enumerate(text.splitlines()):
        if line.startswith("#"):
            if any(s.strip() for s in lines):
                sections.append((title, start, lines))
            title, start, lines = line.lstrip("#").strip(), number + 1, []
        else:
            lines.append(line)
    if any(s.strip() for s in lines):
        sections.append((title, start, lines))
    if not sections:
        raise InvalidInput(source, "empty", f"expected CSV columns {', '.join(REQUIRED_COLUMNS)}")
    points: list[KernelPoint] = []
    for title, start, body in sections:
        # blank lines keep the section's line numbers equal to the file's
        table = read_table("\n" * start + "\n".join(body), POINT_FIELDS, source=source, comments=False)
        points.extend(_points(table.frame, title))
    return points


def _points(frame: Any, title: str) -> list[KernelPoint]:
    out = []
    for row in frame.to_dict("records"):
        if row["time"] != row["time"]:  # NaN: a skipped case in a kernels CSV
            continue
        label = row.get("size") or ""
        name = f"{row['name']}[{label}]" if label else row["name"]
        out.append(KernelPoint(name, row.get("family") or title, row["flops"], row["bytes"], row["time"]))
    return out


def load_points(path: str | os.PathLike[str]) -> tuple[list[KernelPoint], dict[str, str]]:
    """Kernel points from a measurements file: a ``kernels`` or ``roofline`` result (JSON)
    or a CSV. Also returns what the file says about the device and timing (:func:`measurement_meta`;
    empty for CSV)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput("MEASUREMENTS", str(p), "file does not exist") from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise InvalidInput("MEASUREMENTS", str(p), f"cannot read it ({type(exc).__name__})") from None
    if p.suffix.lower() != ".json":
        return points_from_csv(text, str(p)), {}
    data = read_json(text, source=str(p))
    loaded = parse_envelope(data, source=str(p))
    result = loaded.result
    if loaded.kind == "kernels":
        from infer_opt.profilers.kernels import kernel_points

        return kernel_points(result), measurement_meta(result)
    if loaded.kind == "roofline":
        points = [KernelPoint(k.name, k.family, k.flops, k.bytes, k.time_s) for k in result.kernels]
        return points, measurement_meta(result)
    raise InvalidInput(
        "MEASUREMENTS", str(p), f"holds a {loaded.kind!r} result; expected kernels or roofline"
    )


def measurement_meta(result: Any) -> dict[str, Any]:
    """What a kernels or roofline result says about where and how it was measured: the
    arguments :func:`fit_roofline` records (device, dtype, names, and the run key's threads,
    matmul precision and timing)."""
    key = RunKey.of(result)
    return {
        "device": result.device,
        "dtype": result.dtype,
        "device_name": result.device_name,
        "device_key": result.device_key,
        "threads": key.threads,
        "matmul_precision": key.matmul_precision,
        "timing": key.timing,
    }


# ---------------------------------------------------------------------------- calibration

#: the calibration sweep: enough of each regime to pin R, b and t0
CALIBRATION_CASES = ("matmul", "copy", "add", "tiny_add")
CALIBRATION_REPS = 10
#: how a calibration times kernels, per device kind: on CUDA as ``profile`` times operators
#: (device time: a flush before each sample, one-call graph replays for the launch floor)
CALIBRATION_TIMING = {"cpu": "cpu-clock", "cuda": "cuda-graph-flushed"}

Calibrate = Callable[..., RooflineFit]


def calibrate(device: Any, dtype: Any, *, progress: Any = None) -> RooflineFit:
    """A quick kernel sweep (matmul, copy, add, tiny add from the quick suite; about 10 s
    on a 2-core CPU) and its fit, recording its :class:`RunKey` (threads, matmul precision,
    timing). On CUDA every sample is flushed and replayed from a one-call graph
    (:data:`CALIBRATION_TIMING`). ``device``/``dtype`` are specs or torch objects."""
    from infer_opt.profilers import device as devices
    from infer_opt.profilers import kernels

    dev = devices.resolve_device(device)
    torch_dtype = devices.parse_dtype(dtype, dev)
    on_cuda = devices.is_cuda(dev)
    cases = [
        c for c in kernels.all_cases("cuda" if on_cuda else "cpu", "quick") if c.name in CALIBRATION_CASES
    ]
    settings = SuiteSettings(warmup=3, reps=CALIBRATION_REPS, flush_cache=on_cuda, cuda_graphs=on_cuda)
    result = kernels.run_suite(cases, dev, torch_dtype, settings, suite="calibration", progress=progress)
    points = kernels.kernel_points(result)
    key = RunKey.of(result)
    return fit_roofline(
        points,
        device=result.device,
        dtype=result.dtype,
        device_name=result.device_name,
        device_key=result.device_key,
        source="calibration sweep",
        fit_families=default_fit_families(points),
        threads=key.threads,
        matmul_precision=key.matmul_precision,
        timing=key.timing,
    )


@dataclass(frozen=True)
class ResolvedFit:
    """The fit a profile uses (None: the profile goes on without roofline columns), where it
    came from, and what happened on the way (a corrupt cache, a rejected calibration)."""

    fit: RooflineFit | None
    source: str
    warnings: tuple[Notice, ...] = ()


def read_fit_for_run(path: str | os.PathLike[str], device: Any, dtype: Any) -> RooflineFit:
    """The fit in ``path``, refused (:class:`InvalidInput` naming ``roofline``) unless it is
    usable for a run on ``device`` in ``dtype``: valid, same device model, dtype, threads and
    matmul precision, and timed as the run's operators are (:data:`PROFILE_TIMINGS`)."""
    from infer_opt.messages import text
    from infer_opt.profilers.device import is_cuda, run_key

    timings = PROFILE_TIMINGS["cuda" if is_cuda(device) else "cpu"]
    fit = ROOFLINE.read_file(path)
    problems = fit_problems(fit, run_key(device, dtype, timings[0]), timings=timings)
    if problems:
        raise InvalidInput(
            "roofline", str(path), "not usable for this run: " + "; ".join(text(n) for n in problems)
        )
    return fit


def fit_for_run(
    device: Any,
    dtype: Any,
    *,
    progress: Any = None,
    calibrate_fn: Calibrate | None = None,
    load: Callable[[], float | None] | None = None,
) -> ResolvedFit:
    """The cached fit usable for a run on ``device`` in ``dtype`` (any timing of
    :data:`PROFILE_TIMINGS`, the calibration's first), else a calibration now, saved if it
    passes :func:`fit_problems`.

    A calibration that fails is measured once more — with one intra-op thread when the
    machine is loaded (:func:`machine_loaded`; a loaded machine stalls multi-threaded kernels
    at the scheduler's quantum). A second failure is not cached and the run goes on without a
    fit (``fit=None``). A good one-thread fit is cached for runs at one thread, but this run's
    threads differ, so it too goes on without a fit, and the notice says how to use it."""
    from infer_opt.profilers.device import is_cuda, run_key

    calibrate_fn = calibrate_fn or calibrate
    timings = PROFILE_TIMINGS["cuda" if is_cuda(device) else "cpu"]
    notices: list[Notice] = []
    for timing in timings:
        found = ROOFLINE.load(run_key(device, dtype, timing), timings=timings)
        notices.extend(found.notices)
        if found.result is not None:
            return ResolvedFit(found.result, f"saved fit ({found.path})", tuple(notices))
    expected = run_key(device, dtype, timings[0])
    loaded = not is_cuda(device) and machine_loaded(expected.threads or 1, load)
    fit = calibrate_fn(device, dtype, progress=progress)
    problems = fit_problems(fit, expected, timings=timings)
    if not problems:
        return _cached(fit, "calibrated now", notices)
    notices += _rejected(1, expected.threads, problems)
    retry_threads = 1 if loaded and (expected.threads or 1) > 1 else expected.threads
    with _threads(retry_threads):
        fit = calibrate_fn(device, dtype, progress=progress)
        problems = fit_problems(fit, run_key(device, dtype, timings[0]), timings=timings)
    if not problems and retry_threads == expected.threads:
        return _cached(fit, "calibrated now (second try)", notices)
    if problems:
        notices += _rejected(2, retry_threads, problems)
    else:
        try:
            stored = cache_fit(fit)
        except OSError as exc:  # a full or read-only cache: the measurement stands, unsaved
            notices.append(Notice("roofline_not_saved", {"reason": f"{type(exc).__name__}: {exc}"}))
        else:
            saved = {"path": str(stored.path), "threads": retry_threads}
            notices += [*stored.notices, Notice("roofline_saved_for_other_threads", saved)]
    unavailable = {"threads": expected.threads, "loaded": loaded, "device": expected.device_kind}
    return ResolvedFit(
        None, "none: the calibration was unusable", (*notices, Notice("roofline_unavailable", unavailable))
    )


def _cached(fit: RooflineFit, how: str, notices: list[Notice]) -> ResolvedFit:
    try:
        stored = cache_fit(fit)
    except OSError as exc:
        reason = {"reason": f"{type(exc).__name__}: {exc}"}
        return ResolvedFit(fit, f"{how} (not saved)", (*notices, Notice("roofline_not_saved", reason)))
    return ResolvedFit(fit, f"{how}, saved to {stored.path}", (*notices, *stored.notices))


def _rejected(attempt: int, threads: int | None, problems: Sequence[Notice]) -> list[Notice]:
    head = Notice("roofline_calibration_rejected", {"attempt": attempt, "threads": threads})
    return [head, *(n.about(f"calibration {attempt}") for n in problems)]


def machine_loaded(threads: int, load: Callable[[], float | None] | None = None) -> bool:
    """Whether other work competes for the cores ``threads`` intra-op threads need: the
    1-minute load average plus ``threads`` exceeds the CPUs available by more than half a
    core. ``load`` returns the load average (default ``os.getloadavg``; None: unknown)."""
    from infer_opt.profilers.device import available_cpus

    value = (load or _load_average)()
    return value is not None and math.isfinite(value) and value + threads > available_cpus() + 0.5


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


@contextlib.contextmanager
def _threads(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` intra-op threads (None: unchanged), restored after."""
    if threads is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
