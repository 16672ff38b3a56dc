"""What a device calibration depends on — device model, dtype, CPU threads, float32 matmul
precision, timing — as one key (:class:`RunKey`): every calibration kind (roofline fit, operator
calibration, noise floor) is cached and reused by it. Pure: the standard library only."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any


def slug(text: str) -> str:
    """Lower-case letters, digits and dashes: ``"AMD EPYC 7B13"`` -> ``"amd-epyc-7b13"``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


@dataclass(frozen=True)
class RunKey:
    """What a device calibration depends on: it is reused only by a run with the same key.

    ``threads`` is the CPU's intra-op thread count (the compute rate scales with it; None on
    CUDA); ``matmul_precision`` says what float32 matmuls compute in (``"ieee"``, ``"tf32"``,
    ``"bf16"``; ``""`` for other dtypes), since a TF32 fit is not a float32 fit; ``timing`` is how
    the kernels were timed (:data:`infer_opt.cost_models.roofline.PROFILE_TIMINGS`). A result
    carrying these as attributes (``device``, ``device_name``, ``dtype``, ``threads``,
    ``matmul_precision``, ``timing``) gives its key with :meth:`of`, so every calibration kind
    shares one key and one cache layout."""

    device_kind: str
    device_name: str
    dtype: str
    threads: int | None = None
    matmul_precision: str = ""
    timing: str = ""

    @classmethod
    def of(cls, result: Any) -> RunKey:
        """The key a calibration result was measured under (empty fields: not recorded); a
        result that knows its own key (a profile, from its settings: ``run_key()``) gives it."""
        own = getattr(result, "run_key", None)
        if callable(own):
            return own()
        device = str(getattr(result, "device", ""))
        kind = "cuda" if device.startswith("cuda") else ("cpu" if device else "")
        return cls(
            device_kind=kind,
            device_name=str(getattr(result, "device_name", "")),
            dtype=str(getattr(result, "dtype", "")),
            # a GPU's rates do not depend on the CPU's intra-op threads: a CUDA key has none,
            # whatever torch.get_num_threads() said when it was measured
            threads=None if kind == "cuda" else getattr(result, "threads", None),
            matmul_precision=str(getattr(result, "matmul_precision", "")),
            timing=str(getattr(result, "timing", "")),
        )

    def device_slug(self) -> str:
        """``cpu-amd-epyc-7b13-2t-float32``, ``cuda-nvidia-h200-float32-tf32``: device model,
        threads (CPU), dtype and a reduced float32 matmul precision."""
        parts = [self.device_kind, slug(self.device_name)]
        if self.threads is not None:
            parts.append(f"{self.threads}t")
        parts.append(self.dtype)
        if self.matmul_precision not in ("", "ieee"):
            parts.append(self.matmul_precision)
        return "-".join(parts)

    def slug(self) -> str:
        """The file name stem of this key in a cache: :meth:`device_slug` and the timing."""
        return f"{self.device_slug()}-{slug(self.timing)}" if self.timing else self.device_slug()

    def differences(self, other: RunKey, *, ignore: Sequence[str] = ()) -> list[tuple[str, Any, Any]]:
        """``(field, self's value, other's value)`` for each field that differs."""
        return [
            (f.name, getattr(self, f.name), getattr(other, f.name))
            for f in fields(self)
            if f.name not in ignore and getattr(self, f.name) != getattr(other, f.name)
        ]
