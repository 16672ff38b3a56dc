"""Error types. The core raises these with a user-facing message; only the CLI turns them
into exit codes (``InvalidInput`` -> 2, ``RunFailure`` -> 1)."""

from __future__ import annotations


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
