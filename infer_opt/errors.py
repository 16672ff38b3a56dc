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


def _show(value: object) -> str:
    if isinstance(value, str):
        return repr(value)
    return str(value)
