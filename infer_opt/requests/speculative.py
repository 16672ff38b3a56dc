"""The requests of the speculative cost models (speedup, acceptance, plans, from-metrics):
:mod:`infer_opt.requests`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_opt.errors import InvalidInput
from infer_opt.requests import (
    MAX_DRAFT,
    Count,
    CountList,
    Duration,
    Flag,
    InputFile,
    KMax,
    Number,
    NumberList,
    Request,
    VerifyModel,
    option,
)


@dataclass(frozen=True)
class SpecCostsRequest(Request):
    """The per-round costs of a speculative calculator (seconds from Python; bare numbers are
    ms on the command line): c_v = c_t (said as assumed) without ``verify_cost(_model)``."""

    target_cost: float | None = option(None, Duration("ms", allow_zero=False))
    draft_cost: float | None = option(None, Duration("ms"))
    verify_cost: float | None = option(None, Duration("ms"))
    verify_cost_model: tuple[float, float] | None = option(None, VerifyModel())
    overhead: float = option(0.0, Duration("ms"))

    def costs(self) -> Any:
        from infer_opt.results.speculative import Costs

        c_t, c_d, c_v, model = self.target_cost, self.draft_cost, self.verify_cost, self.verify_cost_model
        if c_t is None:
            raise InvalidInput(
                "--target-cost", "missing", "give c_t, the cost of one plain target step (e.g. 10ms)"
            )
        if c_d is None:
            raise InvalidInput("--draft-cost", "missing", "give c_d, the cost of one draft token (e.g. 1ms)")
        if c_v is not None and model is not None:
            raise InvalidInput("--verify-cost", c_v, "give --verify-cost or --verify-cost-model, not both")
        if c_v is not None:
            return Costs(c_t, c_d, c_v, 0.0, self.overhead)
        if model is not None:
            return Costs(c_t, c_d, model[0], model[1], self.overhead)
        return Costs(c_t, c_d, c_t, 0.0, self.overhead, verify_assumed=True)


@dataclass(frozen=True)
class SpecSpeedupRequest(SpecCostsRequest):
    """``infer-opt speculative speedup``: E[N] and the speedup of one draft length (or a sweep)."""

    k: int | None = option(None, Count(1, MAX_DRAFT))
    alpha: float | None = option(None, Number(0, 1))
    alphas: tuple[float, ...] | None = option(None, NumberList(low=0, high=1))
    budget: int | None = option(None, Count(1))
    k_max: int | None = option(None, KMax(1, MAX_DRAFT))


@dataclass(frozen=True)
class AcceptanceRequest(Request):
    """``infer-opt speculative acceptance``: draft tokens ``x ~ q`` against the target ``p``."""

    p: tuple[float, ...] | None = option(None, NumberList(allow_inf=True), positional=True)
    q: tuple[float, ...] | None = option(None, NumberList(allow_inf=True), positional=True)
    p_file: Path | None = option(None, InputFile())
    q_file: Path | None = option(None, InputFile())
    logits: bool = option(False, Flag())
    p_temperature: float | None = option(None, Number(0, low_open=True))
    q_temperature: float | None = option(None, Number(0, low_open=True))
    normalize: bool = option(False, Flag())


@dataclass(frozen=True)
class PlansRequest(Request):
    """``infer-opt speculative plans``: the long-run cost per committed token of logged plans."""

    file: Path = option(check=InputFile(), positional=True)


@dataclass(frozen=True)
class FromMetricsRequest(SpecCostsRequest):
    """``infer-opt speculative from-metrics``: per-position acceptance from serving counters
    (given, a JSON ``file`` or a ``prometheus`` snapshot, ``before`` another), with costs the speedup."""

    drafts: int | None = option(None, Count(1))
    accepted_per_position: tuple[int, ...] | None = option(None, CountList(0))
    draft_tokens: int | None = option(None, Count(0))
    file: Path | None = option(None, InputFile())
    prometheus: Path | None = option(None, InputFile())
    before: Path | None = option(None, InputFile())
    model_name: str | None = option(None)
