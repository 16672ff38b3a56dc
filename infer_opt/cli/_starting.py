"""Ctrl-C while the command line is still being imported (torch, typer, the commands' modules):
"Aborted." and exit 130, never a traceback. Imported first by :mod:`infer_opt.cli.app`, which
calls :func:`started` once its own imports are done (Python's usual handler is back then, and
the app's error boundary says "Aborted." from there on). Only when Python's own handler is in
place, in the main thread: a program that set its own is left alone."""

from __future__ import annotations

import signal
import sys
import threading


def _abort(_signum: int, _frame: object) -> None:
    sys.stderr.write("Aborted.\n")
    sys.exit(130)


ACTIVE = threading.current_thread() is threading.main_thread() and (
    signal.getsignal(signal.SIGINT) is signal.default_int_handler
)
if ACTIVE:
    signal.signal(signal.SIGINT, _abort)


def started() -> None:
    """Python's usual Ctrl-C (KeyboardInterrupt) again."""
    if ACTIVE and signal.getsignal(signal.SIGINT) is _abort:
        signal.signal(signal.SIGINT, signal.default_int_handler)
