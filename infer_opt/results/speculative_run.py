"""The ``speculative-run`` result kind: real speculative decoding timed against plain decoding, per
k (built by :mod:`infer_opt.profilers.speculative_run`, read by :mod:`infer_opt.reports.speculative_run`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infer_opt.notices import Notice
from infer_opt.results import Result
from infer_opt.results.speculative_measure import MeasuredCost
from infer_opt.stats import Summary


@dataclass(frozen=True)
class RunPoint:
    """Speculative decoding with one draft length k: measured, and as the cost model predicts."""

    k: int
    #: time to decode the N tokens speculatively
    time: Summary
    tokens_per_s: float
    #: plain time / speculative time for the same N tokens (a measurement)
    measured_speedup: float
    #: c_t·E[N] / (k·c_d + c_v(k) + c_m) with this run's costs and α_i (a prediction)
    predicted_speedup: float
    #: (predicted - measured) / measured
    relative_error: float
    rounds: int
    #: N / rounds: committed tokens per round over the whole run (short last rounds included)
    expected_tokens_measured: float
    #: E[N] = 1 + Σ_i Π_{j≤i} α_j from the realised α_i
    expected_tokens_predicted: float
    #: conditional α_i = acc_i / acc_{i-1} over the rounds that drafted all k tokens
    #: (None where no such round got that far)
    alpha_per_position: tuple[float | None, ...]
    full_rounds: int
    accepted_per_position: tuple[int, ...]
    #: c_v(k), measured; and the round time the model charges, k·c_d + c_v(k) + c_m
    verify_s: float
    round_time_predicted_s: float
    tokens: tuple[int, ...]
    #: greedy: the speculative output equals the plain output token for token (None: sampling)
    tokens_identical: bool | None = None
    #: greedy: the first position where they differ
    first_difference: int | None = None
    #: the measured time per round (time / rounds), derived when built
    round_time_measured_s: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "round_time_measured_s", self.time.median_s / self.rounds if self.rounds else 0.0
        )


@dataclass(frozen=True)
class SpecRunResult(Result):
    KIND = "speculative-run"

    target: str
    draft: str
    vocab_size: int
    device: str
    device_name: str
    dtype: str
    threads: int | None
    prompt_len: int
    new_tokens: int
    #: None = greedy
    temperature: float | None
    seed: int
    warmup: int
    reps: int
    #: the cache length the costs were measured over (prompt_len + new_tokens // 2)
    cost_context: int
    plain_time: Summary
    plain_tokens_per_s: float
    plain_tokens: tuple[int, ...]
    #: c_t, c_d, c_v(1..max k), c_m with their spread
    costs: tuple[MeasuredCost, ...]
    target_step_s: float
    draft_step_s: float
    bookkeeping_s: float
    #: one point per k (several with --sweep-k)
    points: tuple[RunPoint, ...]
    sweep: bool
    #: the point the summary reports: the only one, or the best measured speedup of a sweep
    headline_k: int
    draft_note: str | None = None
    warnings: tuple[Notice, ...] = ()
    #: plain decoding's measured time per new token, derived when built
    plain_per_token_s: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        per_token = self.plain_time.median_s / self.new_tokens if self.new_tokens else 0.0
        object.__setattr__(self, "plain_per_token_s", per_token)

    @property
    def greedy(self) -> bool:
        return self.temperature is None

    @property
    def headline(self) -> RunPoint:
        return next(p for p in self.points if p.k == self.headline_k)

    @property
    def tokens_identical(self) -> bool | None:
        """Greedy: every k's output equals the plain output; None when sampling."""
        if not self.greedy:
            return None
        return all(bool(p.tokens_identical) for p in self.points)

    def to_dict(self) -> dict[str, Any]:
        """The fields, and the headline point's figures under the top-level keys scripts read
        (``k``, ``measured_speedup``, ``predicted_speedup``, ...)."""
        out = super().to_dict()
        h = self.headline
        out.update(
            k=h.k,
            tokens_identical=self.tokens_identical,
            speculative_tokens_per_s=h.tokens_per_s,
            measured_speedup=h.measured_speedup,
            predicted_speedup=h.predicted_speedup,
            relative_error=h.relative_error,
            expected_tokens_measured=h.expected_tokens_measured,
            expected_tokens_predicted=h.expected_tokens_predicted,
            alpha_per_position=list(h.alpha_per_position),
        )
        return out


def measured_speedup_range(plain_time: Summary, time: Summary) -> tuple[float, float]:
    """The measured speedup's spread from the two timings' quartiles: ``plain q1 / speculative q3``
    to ``plain q3 / speculative q1``."""
    return plain_time.q1_s / time.q3_s, plain_time.q3_s / time.q1_s
