"""Run-to-run noise floors saved per device key (device model, CPU threads, dtype) and per
compared kind, as the roofline fits are: ``cache_dir()/noise/<device key>-<kind>.json``, an
ordinary result envelope of kind ``noise-floor``. ``infer-opt ab`` saves one after an A/A
(the same command on both sides); ``compare`` and ``ab`` read it as the default noise.

A missing or unreadable file is no floor (the comparison then says it uses the stated
default). Imports nothing heavy: ``compare`` reads the store.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from infer_opt.cost_models.compare import Noise, NoiseFloor
from infer_opt.errors import InvalidInput
from infer_opt.files import cache_dir
from infer_opt.results import parse_envelope, save_result


def floor_path(device_key: str, kind: str) -> Path:
    """Where the floor of ``kind`` results (``kernels``, ``profile``) for a device key lives."""
    return cache_dir() / "noise" / f"{device_key}-{kind}.json"


def save_floor(record: NoiseFloor) -> Path:
    """Save ``record`` (atomically) under its device key and kind; returns the path."""
    if not record.device_key:
        raise InvalidInput(
            "noise floor", record.subject, "the results name no device key; nothing to save under"
        )
    return save_result(floor_path(record.device_key, record.compared), record)


def load_floor(device_key: str, kind: str) -> tuple[NoiseFloor, Path] | None:
    """The saved floor and its path, or None (no key, no file, or a file that is not one)."""
    if not device_key:
        return None
    path = floor_path(device_key, kind)
    try:
        loaded = parse_envelope(json.loads(path.read_text(encoding="utf-8")), source=str(path))
    except (OSError, ValueError, InvalidInput, TypeError, KeyError):
        return None
    return (loaded.result, path) if isinstance(loaded.result, NoiseFloor) else None


def noise_for(results: Iterable[Any]) -> Noise:
    """The noise to compare ``results`` with: the saved floors of their device keys (the
    larger σ per family when two keys differ, e.g. two thread counts), else the default."""
    found: list[tuple[NoiseFloor, Path]] = []
    seen: set[tuple[str, str]] = set()
    for result in results:
        key = (getattr(result, "device_key", ""), result.KIND)
        if key in seen:
            continue
        seen.add(key)
        record = load_floor(*key)
        if record is not None:
            found.append(record)
    if not found:
        return Noise()
    sigmas: dict[str, float] = {}
    for record, _ in found:
        for group in record.groups:
            sigmas[group.key] = max(sigmas.get(group.key, 0.0), group.between_run_cv)
    return Noise("measured", sigmas, where=", ".join(str(p) for _, p in found))
