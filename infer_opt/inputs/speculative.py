"""What the speculative commands read: a probability or logit vector (a ``.npy`` file, or text/CSV
numbers), a log of speculative rounds per plan (CSV/TSV ``plan, time, tokens``) and a JSON file of
a serving engine's counters (vLLM's names accepted)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from infer_opt.cost_models import speculative as model
from infer_opt.errors import InvalidInput
from infer_opt.files import check_readable_file, read_text
from infer_opt.notices import Notice
from infer_opt.units import MAX_WHOLE

_SEPARATORS = re.compile(r"[,;\s]+")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_vector(path: Path, option: str) -> list[float]:
    """Numbers from a ``.npy`` file, or from text/CSV separated by commas, spaces or newlines
    (one leading header line is skipped)."""
    if path.suffix.lower() == ".npy":
        import numpy as np

        check_readable_file(path, option)
        try:
            arr = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise InvalidInput(option, str(path), f"not a readable .npy file ({exc})") from None
        if arr.ndim != 1 and arr.squeeze().ndim != 1:
            raise InvalidInput(option, f"{path} shape {arr.shape}", "expected a 1-D array")
        try:
            return [float(v) for v in arr.squeeze().tolist()]
        except (TypeError, ValueError):
            raise InvalidInput(option, str(path), "expected a numeric array") from None
    lines = read_text(path, option).splitlines()
    if len(lines) > 1 and not all(_is_number(t) for t in _SEPARATORS.split(lines[0]) if t):
        lines = lines[1:]  # a header line
    items = [t for t in _SEPARATORS.split("\n".join(lines)) if t]
    if not items:
        raise InvalidInput(option, str(path), "the file holds no numbers")
    values = []
    for i, item in enumerate(items):
        try:
            values.append(float(item))
        except ValueError:
            raise InvalidInput(
                option,
                f"{path}: entry {i + 1} {item!r}",
                "expected numbers separated by commas, spaces or newlines",
            ) from None
    return values


def read_plan_log(path: Path) -> tuple[list[model.PlanRound], tuple[Notice, ...]]:
    """Rounds from a CSV/TSV with columns plan, time (``time``: bare = ms; or ``time_ms``,
    ``time_us``, ``time_s``), tokens, in any order; other columns are reported, not read."""
    from infer_opt.inputs.tables import Field, read_table

    fields = (
        Field("plan", "text"),
        Field("time", "duration", unit="ms", low=0.0, low_open=True),
        Field("tokens", "count", low=1),
    )
    table = read_table(read_text(path, "FILE"), fields, source=str(path))
    if len(table) == 0:
        raise InvalidInput("FILE", str(path), "the log has no data rows")
    frame = table.frame
    rounds = [
        model.PlanRound(plan, time_s, tokens)
        for plan, time_s, tokens in zip(
            frame["plan"].tolist(), frame["time"].tolist(), frame["tokens"].tolist(), strict=True
        )
    ]
    return rounds, table.notices()


_METRIC_ALIASES = {
    "accepted_tokens_per_pos": "accepted_per_position",
    "accepted_per_pos": "accepted_per_position",
}


def _metric_key(key: str) -> str:
    k = (
        key.strip()
        .lower()
        .replace("-", "_")
        .removeprefix("vllm:")
        .removeprefix("spec_decode_")
        .removeprefix("num_")
    )
    return _METRIC_ALIASES.get(k, k)


def _whole(option: str, value: Any) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 <= value <= MAX_WHOLE
        or value != int(value)
    ):
        raise InvalidInput(option, value, "counts must be whole numbers in [0, 2^53]")
    return int(value)


def read_metrics(path: Path) -> dict[str, Any]:
    """``{"drafts": ..., "accepted_per_position": [...], "draft_tokens": ...}`` from a JSON file
    (vLLM's names, with or without the ``vllm:spec_decode_num_`` prefix, are accepted)."""
    from infer_opt.inputs.tables import read_json

    data = read_json(read_text(path, "--file"), source=str(path))
    if not isinstance(data, dict):
        raise InvalidInput(
            "--file", str(path), "expected a JSON object with drafts and accepted_per_position"
        )
    found = {_metric_key(k): v for k, v in data.items()}
    out: dict[str, Any] = {}
    for key in ("drafts", "accepted_per_position"):
        if key not in found:
            raise InvalidInput(
                "--file", str(path), f"missing key {key!r} (keys: drafts, accepted_per_position)"
            )
    out["drafts"] = _whole(f"{path}: drafts", found["drafts"])
    acc = found["accepted_per_position"]
    if not isinstance(acc, list) or not acc:
        raise InvalidInput(f"{path}: accepted_per_position", acc, "expected a non-empty list of counts")
    out["accepted_per_position"] = [_whole(f"{path}: accepted_per_position", a) for a in acc]
    if found.get("draft_tokens") is not None:
        out["draft_tokens"] = _whole(f"{path}: draft_tokens", found["draft_tokens"])
    return out
