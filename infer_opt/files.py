"""Output files: check a path before the work starts, write it safely after.

- :func:`check_writable` refuses, before anything is measured, a path that cannot be written:
  empty, a directory, a missing parent or one that is a file, a place the process cannot create
  files in (``/proc/x.json``).
- :func:`write_text` writes a regular file atomically (a temporary file in the same folder,
  then a rename, so a reader or a second writer never sees half a file: the last writer wins).
  A symlink is written through to its target; a FIFO, ``/dev/stdout`` or another character
  device is written in place (a rename would replace the node with a plain file).
- :func:`keep_unsaved` puts a result that could not be written where it asked into the cache
  folder, so a long run is never lost to a full disk.
"""

from __future__ import annotations

import datetime as _dt
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from infer_opt.errors import InvalidInput

CACHE_ENV = "INFER_OPT_CACHE"
STDOUT = "-"


def cache_dir() -> Path:
    """``$INFER_OPT_CACHE`` or ``~/.cache/infer-opt`` (created on use)."""
    root = os.environ.get(CACHE_ENV) or os.path.join("~", ".cache", "infer-opt")
    return Path(root).expanduser()


def _reason(exc: OSError) -> str:
    return exc.strerror or errno.errorcode.get(exc.errno or 0, type(exc).__name__)


def _is_special(path: Path) -> bool:
    """An existing FIFO, character or block device (written in place, never replaced)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)


def check_writable(path: str | os.PathLike[str], option: str, *, allow_stdout: bool = False) -> Path:
    """``path`` if a file can be written there, else :class:`InvalidInput` naming ``option``.

    Creates nothing that stays: the folder is probed with a temporary file."""
    text = os.fspath(path)
    if text.strip() == "":
        raise InvalidInput(option, text, "empty path; give a file name")
    if text == STDOUT:
        if allow_stdout:
            return Path(text)
        raise InvalidInput(option, text, "'-' (stdout) is not accepted here; give a file name")
    try:
        return _check_place(text, option)
    except OSError as exc:  # a name too long, a loop of symlinks
        raise InvalidInput(option, text, f"cannot use this path ({_reason(exc)})") from None


def same_file_key(path: str | os.PathLike[str]) -> str:
    """What two paths naming one file share (through symlinks and ``..``)."""
    return os.path.realpath(os.fspath(path))


#: how long writing a result waits for a FIFO's reader to open it (then it fails, never hangs)
FIFO_WAIT_S = 10.0


def _open_special(target: Path, wait_s: float = 0.0) -> int:
    """A write descriptor on a FIFO or device, opened without blocking (a FIFO with no
    reader is ``ENXIO`` instead of a hang; retried for up to ``wait_s``), then switched
    back to blocking writes."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        try:
            fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)
    os.set_blocking(fd, True)
    return fd


def _check_place(text: str, option: str) -> Path:
    target = Path(os.path.realpath(text))
    if _is_special(target):
        if not os.access(target, os.W_OK):
            raise InvalidInput(option, text, "not writable")
        # a FIFO is not opened here: closing it would end its reader's input; writing it
        # waits FIFO_WAIT_S for a reader, then fails (the result is kept in the cache)
        return Path(text)
    if target.is_dir():
        raise InvalidInput(option, text, "is a directory; give a file name")
    parent = target.parent
    if not parent.exists():
        raise InvalidInput(option, text, f"its folder {parent} does not exist")
    if not parent.is_dir():
        raise InvalidInput(option, text, f"{parent} is not a folder")
    _probe(parent, option, text)
    return Path(text)


def _probe(folder: Path, option: str, text: str) -> None:
    try:
        fd, name = tempfile.mkstemp(prefix=".infer-opt-probe.", dir=folder)
    except OSError as exc:
        raise InvalidInput(option, text, f"cannot create a file in {folder} ({_reason(exc)})") from None
    os.close(fd)
    os.unlink(name)


#: the largest input file any command reads (a bigger one is refused before it is read)
MAX_INPUT_BYTES = 1 << 30


def check_readable_file(path: str | os.PathLike[str], param: str) -> None:
    """:class:`InvalidInput` naming ``param`` unless ``path`` is a regular file (through
    symlinks) of at most :data:`MAX_INPUT_BYTES`: a device (``/dev/zero``), a FIFO or a
    socket would be read until memory runs out, or never end; a missing or unreachable one too."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InvalidInput(param, os.fspath(path), "file does not exist") from None
    except OSError as exc:
        raise InvalidInput(param, os.fspath(path), f"cannot read it ({_reason(exc)})") from None
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInput(
            param, os.fspath(path), "not a regular file (a device, FIFO or socket); give a file"
        )
    if info.st_size > MAX_INPUT_BYTES:
        raise InvalidInput(
            param,
            os.fspath(path),
            f"{info.st_size} bytes; input files of at most {MAX_INPUT_BYTES} bytes (1 GiB) are read",
        )


def read_text(path: str | os.PathLike[str], param: str) -> str:
    """The UTF-8 text of the file at ``path``: the one reader of what a user hands in. A missing,
    unreadable, non-text, non-regular (a directory, a device, a FIFO) or too large (over
    :data:`MAX_INPUT_BYTES`) file is an :class:`InvalidInput` naming ``param`` and saying which."""
    check_readable_file(path, param)
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:  # removed since the check
        raise InvalidInput(param, str(path), "file does not exist") from None
    except UnicodeDecodeError:
        raise InvalidInput(param, str(path), "not a UTF-8 text file") from None
    except OSError as exc:
        raise InvalidInput(param, str(path), f"cannot read it ({exc.strerror})") from None


def read_input(path: str | os.PathLike[str], param: str) -> tuple[str, str]:
    """The text of ``path`` (``-`` = stdin) and a name for it in messages."""
    if os.fspath(path) == "-":
        return sys.stdin.read(), "stdin"
    return read_text(path, param), Path(path).name


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` ('-' = stdout): atomically for a regular file (through a
    symlink to its target), in place for a FIFO or device. Raises OSError on failure."""
    if os.fspath(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return Path(STDOUT)
    return write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str | os.PathLike[str], data: bytes | Iterable[bytes]) -> Path:
    """Write ``data`` (bytes, or pieces of them written in turn: a large output never held
    whole) to ``path`` as :func:`write_text` does ('-' = stdout's byte stream)."""
    pieces = [data] if isinstance(data, (bytes, bytearray, memoryview)) else data
    if os.fspath(path) == STDOUT:
        for piece in pieces:
            sys.stdout.buffer.write(piece)
        sys.stdout.flush()
        return Path(STDOUT)
    target = Path(os.path.realpath(path))
    if _is_special(target):  # in place: a rename would replace the node with a plain file
        with os.fdopen(_open_special(target, FIFO_WAIT_S), "wb") as handle:
            for piece in pieces:
                handle.write(piece)
        return Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            for piece in pieces:
                handle.write(piece)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file normal permissions
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def keep_unsaved(name: str, text: str) -> Path:
    """Save ``text`` under ``<cache>/unsaved/`` with a time stamp; returns where it went."""
    folder = cache_dir() / "unsaved"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    target = folder / f"{stamp}-{name}"
    write_text(target, text)
    return target
