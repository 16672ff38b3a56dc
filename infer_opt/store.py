"""The cache: every kind infer-opt keeps between runs, through one :class:`Store` per kind —
the roofline fits (:data:`ROOFLINE`), the operator calibrations
(``infer_opt.profilers.calibration.OPERATORS``), the run-to-run noise floors (:data:`NOISE`) and
the collective sweeps (:data:`COMM`). Torch-free: ``compare`` reads it without measuring.

The rules, the same for every kind:

* One file per kind and key — a :class:`~infer_opt.run_key.RunKey` (device model, dtype,
  CPU threads, float32 matmul precision and timing mode), or for a comm sweep its backend, rank
  count and device — at ``cache_dir()/<kind>/<key slug>.json`` (``$INFER_OPT_CACHE`` overrides
  the directory, default ``~/.cache/infer-opt``), as an ordinary result envelope, written
  atomically (temporary file and rename), read through the one checked reader
  (:func:`infer_opt.files.read_text`).
* Validated before it is saved and again before it is used, by the kind's check (for the
  roofline :func:`~infer_opt.cost_models.roofline.fit_problems`: finite positive parameters
  the data pin down, a median fit error within 35%, enough kernels, no tick-quantized
  timings, and the run's key). A result that fails is not saved; a cached one that fails
  is not used (and is replaced by the next good one).
* A cache file that cannot be read as a result of its kind is reported as corrupt and moved
  aside (``<name>.json.corrupt``), never silently overwritten.
* Written under a lock (``fcntl.flock`` on ``<name>.json.lock``): two runs saving the same key
  take turns. A run that :meth:`~Store.watch` es its file before measuring and finds
  it written by another run meanwhile moves that run's file aside (``<name>.other.json``) and
  says so, so two parallel calibrations never silently lose one.
* :func:`check_writable` is run before any measurement: a cache that cannot be written is an
  error before the work, never a traceback after it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from infer_opt.cost_models.comm import CommResult
from infer_opt.cost_models.compare_runs import Noise, NoiseFloor, noise_floor_problems
from infer_opt.cost_models.roofline import RooflineFit, fit_problems
from infer_opt.errors import InvalidInput
from infer_opt.files import CACHE_ENV, cache_dir, read_text
from infer_opt.inputs.tables import read_json
from infer_opt.notices import Notice
from infer_opt.results import Result, parse_envelope, save_result
from infer_opt.run_key import RunKey

R = TypeVar("R", bound=Result)
#: check(result, the run's key or None, the timings the run accepts or None) -> problems
Check = Callable[[Any, RunKey | None, Sequence[str] | None], tuple[Notice, ...]]


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


class Store(Generic[R]):
    """The cache of one kind (module docstring): ``kind`` names the directory and
    the result kind; ``check`` validates a result, on its own (before saving) or for a run's
    key (before use); ``key_of`` gives a result's key (``RunKey.of`` reads the ``device``,
    ``device_name``, ``dtype``, ``threads``, ``matmul_precision`` and ``timing`` attributes)."""

    def __init__(
        self,
        kind: str,
        result_type: type[R],
        check: Check,
        key_of: Callable[[R], RunKey | str] = RunKey.of,
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

    def path(self, key: RunKey | str) -> Path:
        """Where the result for ``key`` (a run key, or a file name's stem) is cached."""
        return cache_dir() / self.kind / f"{key if isinstance(key, str) else key.slug()}.json"

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

    def newest(self, prefix: str) -> R | None:
        """The newest cached result whose file name starts with ``prefix`` and that reads and
        passes its check, or None (an unusable file is skipped)."""
        found = None
        saved = (cache_dir() / self.kind).glob(f"{prefix}*.json")
        for path in sorted(saved, key=lambda p: p.stat().st_mtime):
            try:
                result = self._read(path)
            except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError):
                continue
            found = result if not self.check(result, None, None) else found
        return found

    def _read(self, path: Path) -> R:
        if not os.path.lexists(path):  # not cached (any other failure is a corrupt file)
            raise FileNotFoundError(path)
        loaded = parse_envelope(read_json(read_text(path, self.kind), source=str(path)), source=str(path))
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
        if isinstance(exc, InvalidInput):  # what the reader found (not JSON, a FIFO, too large)
            reason = exc.expected
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
ROOFLINE: Store[RooflineFit] = Store("roofline", RooflineFit, _check_fit)


def _check_floor(record: NoiseFloor, key: RunKey | None, timings: Sequence[str] | None) -> tuple[Notice, ...]:
    return noise_floor_problems(record, key, timings)


#: run-to-run noise floors per compared kind (``noise-kernels``, ``noise-profile``): ``ab`` saves
#: one after an A/A (the same command on both sides); ``compare`` and ``ab`` read it as the noise
NOISE: dict[str, Store[NoiseFloor]] = {
    kind: Store(f"noise-{kind}", NoiseFloor, _check_floor) for kind in ("kernels", "profile")
}


def save_floor(record: NoiseFloor) -> Stored:
    """Cache ``record`` under its key if it passes its check (:meth:`Store.save`)."""
    return NOISE[record.compared].save(record)


def noise_for(results: Iterable[Any]) -> Noise:
    """The noise to compare ``results`` with: the cached floors of their run keys (the larger
    σ per family when the keys differ, e.g. two thread counts), else the default; anything the
    lookups found wrong (a corrupt or unusable file) travels in :attr:`Noise.notices`."""
    sigmas: dict[str, float] = {}
    where: list[str] = []
    notices: list[Notice] = []
    seen: set[tuple[str, RunKey]] = set()
    for result in results:
        lookup_key = (result.KIND, RunKey.of(result))
        if lookup_key in seen or result.KIND not in NOISE:
            continue
        seen.add(lookup_key)
        found = NOISE[result.KIND].load(lookup_key[1])
        notices.extend(found.notices)
        if found.result is not None:
            where.append(str(found.path))
            for group in found.result.groups:
                sigmas[group.key] = max(sigmas.get(group.key, 0.0), group.between_run_cv)
    if not where:
        return Noise(notices=tuple(notices))
    return Noise("measured", sigmas, where=", ".join(where), notices=tuple(notices))


#: the collective sweeps ``predict --tp`` prices collectives with, keyed by backend, ranks and device
#: (``cache_dir()/comm/<backend>-<N>ranks-<device key>.json``)
COMM: Store[CommResult] = Store(
    "comm", CommResult, lambda *_: (), lambda r: f"{r.backend}-{r.world_size}ranks-{r.device_key}"
)  # type: ignore[arg-type]
