"""Error types. The core raises these with a user-facing message; only the CLI turns them
into exit codes (``InvalidInput`` -> 2, ``RunFailure`` -> 1)."""

from __future__ import annotations

import re


class InferOptError(Exception):
    """Base class for every error infer-opt reports to the user."""

    exit_code: int = 2


class InvalidInput(InferOptError, ValueError):
    """Bad input: names the option, the value given and the allowed range."""

    exit_code = 2

    def __init__(self, option: str, value: object, expected: str) -> None:
        self.option = option
        self.value = value
        self.expected = expected
        super().__init__(f"{option}: {expected} (got {_show(value)})")

    def __reduce__(self) -> tuple:
        # picklable with its arguments, so a worker process (a folder of ranks read in
        # parallel) hands the same one-line error back
        return (type(self), (self.option, self.value, self.expected))

    def under(self, option: str, value: object = None) -> InvalidInput:
        """The same problem said about ``option`` (the flag that named the file), with
        ``value`` (the file's path) as what it got; a :class:`BadField` keeps its own value
        and says the file and field instead."""
        return InvalidInput(option, value, self.expected)


class BadField(InvalidInput):
    """A field of a file (a saved result, a calibration) that is not what is allowed: names the
    option that gave the file (if any), the file, the field (``families[0].points``), what is
    allowed and the value found."""

    def __init__(self, file: str, field: str, value: object, expected: str, option: str = "") -> None:
        self.file = file
        self.field = field
        self.allowed = expected
        where = f"{file} field {field}" if field else file
        if option:
            super().__init__(option, value, f"{where}: {expected}")
        else:
            super().__init__(file, value, f"field {field}: {expected}" if field else expected)

    def __reduce__(self) -> tuple:
        option = self.option if self.option != self.file else ""
        return (type(self), (self.file, self.field, self.value, self.allowed, option))

    def under(self, option: str, value: object = None) -> InvalidInput:
        """The same problem said about ``option`` (the flag that named the file)."""
        return BadField(self.file, self.field, self.value, self.allowed, option=option)


class RunFailure(InferOptError, RuntimeError):
    """Something failed while running (a model raised, out of memory, a check failed)."""

    exit_code = 1


class UnsupportedOnDevice(InferOptError):
    """A feature asked for on a device that lacks it (e.g. CUDA graphs on the CPU)."""

    exit_code = 2


#: longer values are cut in messages (a 309-digit integer helps nobody)
SHOW_AT_MOST = 120


def _show(value: object) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    if len(text) > SHOW_AT_MOST:
        return text[: SHOW_AT_MOST - 30] + f"… ({len(text)} characters)"
    return text


class Interrupted(InferOptError):
    """Ctrl-C during a long run: says what was kept and how to go on (exit 130)."""

    exit_code = 130


_ALLOCATION = re.compile(
    r"(?:tried to allocate|unable to allocate)\s+([\d.]+\s*(?:[KMGTPE]i?B|bytes)?)", re.IGNORECASE
)


def out_of_memory(exc: BaseException) -> str | None:
    """When ``exc`` is an allocation failure (Python's or numpy's ``MemoryError``, torch's
    ``OutOfMemoryError``, the CPU allocator's "can't allocate memory"), what it tried to
    allocate ("" when the message does not say); else None. Needs no torch import."""
    message = str(exc)
    lowered = message.lower()
    is_oom = (
        isinstance(exc, MemoryError)
        or type(exc).__name__ == "OutOfMemoryError"
        or (
            isinstance(exc, RuntimeError)
            and ("out of memory" in lowered or "can't allocate memory" in lowered)
        )
    )
    if not is_oom:
        return None
    found = _ALLOCATION.search(message)
    if found is None:
        return ""
    size = found.group(1).strip()
    if size.endswith("bytes") or size.isdigit():
        from infer_opt.units import format_bytes

        size = format_bytes(float(size.split()[0]))
    return size
