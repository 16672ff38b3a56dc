"""The request of compare: :mod:`infer_opt.requests`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infer_opt.requests import (
    Count,
    Flag,
    Fraction,
    Number,
    Request,
    ResultSide,
    option,
)


@dataclass(frozen=True)
class CompareRequest(Request):
    """``infer-opt compare``: two results (or traces), the change worth reporting and the test's
    settings (run-level: not for two traces)."""

    base: Any = option(check=ResultSide(), positional=True)
    new: Any = option(check=ResultSide(), positional=True)
    threshold: float = option(0.05, Fraction(0, 1))
    significance: float = option(0.05, Number(0, 1, low_open=True, high_open=True))
    force: bool = option(False, Flag())
    seed: int = option(0, Count(0))
    noise_floor: float | None = option(None, Fraction(0, 10))
