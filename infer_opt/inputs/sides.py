"""The two sides of ``infer-opt compare``: trace files (sniffed from their first bytes) or saved
results; a trace analysed, a result loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infer_opt.results import load_result

#: how far :func:`is_trace_file` reads for a top-level key that decides
SNIFF_BYTES = 64 << 20


def is_trace_file(path: Path) -> bool:
    """A torch.profiler trace (gzip, a bare array of events, or an object with ``traceEvents``),
    not a saved result (an object whose ``schema`` is ``infer-opt/<kind>``): the top-level keys
    are read in order, their values skipped, until one decides (at most :data:`SNIFF_BYTES`,
    the read doubling so each value is parsed a bounded number of times). Only a regular file
    is opened (a FIFO would never end: the reader it goes to refuses it)."""
    import json

    if not path.is_file():
        return False
    decoder = json.JSONDecoder()
    with open(path, "rb") as handle:
        raw = handle.read(1 << 16)
        if raw[:2] == b"\x1f\x8b":
            return True
        while True:
            text = raw.decode("utf-8", "replace")
            pos = len(text) - len(text.lstrip(" \t\r\n\ufeff"))
            if text[pos : pos + 1] == "[":
                return True
            decided = _top_level_decides(decoder, text, pos + 1) if text[pos : pos + 1] == "{" else False
            if decided is not None or len(raw) >= SNIFF_BYTES:
                return bool(decided)
            more = handle.read(len(raw))
            if not more:
                return False
            raw += more


def _top_level_decides(decoder: Any, text: str, pos: int) -> bool | None:
    """True at a ``traceEvents`` key, False at an ``infer-opt/`` schema or the object's end,
    None when ``text`` ends first (read more)."""
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text):
            return None
        if text[pos] == "}":
            return False
        try:
            key, pos = decoder.raw_decode(text, pos)
            while pos < len(text) and text[pos] in " \t\r\n:":
                pos += 1
            if key == "traceEvents":
                return True
            value, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return None
        if pos >= len(text):  # a number may go on in the next read
            return None
        if key == "schema" and isinstance(value, str) and value.startswith("infer-opt/"):
            return False


def side(path: Path) -> tuple[Any, str, str]:
    """One side: the trace's analysis, or the saved result; the command that made it; its kind."""
    if is_trace_file(path):
        from infer_opt.trace.analyze import analyze

        return analyze([path]).result, "", "trace"
    loaded = load_result(path)
    return loaded.result, loaded.envelope.get("command", ""), loaded.kind
