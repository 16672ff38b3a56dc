"""A reference speculative sampler and the checks that it preserves the target distribution.

One round (chapter algorithm 33.2), draft length k, target p, draft q:

1. Draft up to k tokens ``x_i ~ q_i(· | prefix, x_<i)`` (the draft stops early once it
   proposes the stop token).
2. Verify in order with independent uniforms ``u_i``: accept ``x_i`` iff ``u_i·q_i(x_i) <
   p_i(x_i)`` (i.e. ``u_i < p/q``; ``q_i(x_i) > 0`` since x_i was drafted from q_i).
3. At the first rejection sample a correction from the residual ``r = max(p_i - q_i, 0)/Z``
   and discard the remaining drafts. If every draft was accepted, sample a bonus token from
   the target's next distribution ``p_{k+1}``.
4. A committed stop token (accepted draft, correction or bonus) ends the round at once.
   A remaining length budget L caps the round: only ``min(k, L-1)`` tokens are drafted, so at
   most L are committed (the L-th being the correction or bonus).

The *wrong* rule ("after a rejection, resample from p") is available as ``rule="resample-p"``
so that the checks can show they detect it.

:func:`speculative_round` is :func:`draft_tokens` (step 1) then :func:`verify_drafts` (steps
2-4); a real decoding loop (:mod:`infer_opt.profilers.speculative_run`) calls the two itself, with one
target forward over all the drafts in between.

Distributions are given as a 1-D array (the same at every position), a 2-D array (row i is
used at round position i, i.e. after i tokens of this round), or a callable
``f(prefix) -> 1-D array`` receiving ``context + tokens so far in the round`` (a Markov
chain, a small language model).

Checks:

* :func:`round_distribution` enumerates every draft sequence and verification outcome and
  returns the exact distribution of the committed sequence of one round.
  :func:`exact_max_abs_error` completes each outcome with target sampling up to the round's
  horizon ``H = min(k+1, L)`` and compares with H autoregressive target steps: the exact
  rule agrees to rounding, the wrong rule does not.
* :func:`simulate_rounds` is a vectorised Monte-Carlo of the same round for position-wise
  (context-independent) p and q; :func:`run` (``infer-opt speculative verify``)
  runs chi-square tests at significance 1e-3 and compares the measured acceptance rates and
  committed tokens with the calculators in :mod:`infer_opt.cost_models.speculative`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from infer_opt.cost_models import speculative as calc
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results.speculative_verify import (
    EXACT_TOLERANCE,
    SIGMA_LIMIT,
    SIGNIFICANCE,
    RateCheck,
    RuleVerdict,
    SpeculativeVerifyResult,
)

if TYPE_CHECKING:
    from infer_opt.requests import SpeculativeVerifyRequest

Rule = Literal["exact", "resample-p"]
RULES: tuple[str, ...] = ("exact", "resample-p")
Distribution = (
    np.ndarray | Sequence[float] | Sequence[Sequence[float]] | Callable[[tuple[int, ...]], np.ndarray]
)

#: exact enumeration covers at most this many sequences (vocab^H, H = min(k+1, L))
MAX_ENUMERATED_SEQUENCES = 200_000
#: a chi-square cell needs at least this expected count; smaller cells are pooled
MIN_EXPECTED_COUNT = 5.0
_CHUNK = 200_000


# --------------------------------------------------------------------------- distributions


def _check_rule(rule: str) -> None:
    if rule not in RULES:
        raise InvalidInput("rule", rule, f"must be one of {', '.join(RULES)}")


def _int(option: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise InvalidInput(option, value, f"must be an integer >= {low}")
    return int(value)


class _Conditional:
    """A distribution model turned into ``f(round_prefix) -> validated 1-D array``; an array
    model needs one row, or one row per round position (``positions``)."""

    def __init__(self, name: str, model: Distribution, context: tuple[int, ...], positions: int) -> None:
        self.name = name
        self.context = context
        self.fn: Callable[[tuple[int, ...]], np.ndarray] | None = None
        self.rows: np.ndarray | None = None
        if callable(model):
            self.fn = model
            self.vocab = None
            return
        arr = np.asarray(model, dtype=np.float64)
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2:
            raise InvalidInput(
                name,
                f"shape {arr.shape}",
                "expected a 1-D distribution, (positions, vocab) rows, or a callable",
            )
        if arr.shape[0] != 1 and arr.shape[0] < positions:
            raise InvalidInput(
                name,
                f"{arr.shape[0]} rows",
                f"need one distribution per round position ({positions}) or a single one",
            )
        self.rows = np.stack([calc.validate_distribution(f"{name}[{i}]", row) for i, row in enumerate(arr)])
        self.vocab = arr.shape[1]

    def __call__(self, round_prefix: tuple[int, ...]) -> np.ndarray:
        if self.rows is not None:
            return self.rows[min(len(round_prefix), self.rows.shape[0] - 1)]
        assert self.fn is not None
        return calc.validate_distribution(self.name, self.fn(self.context + round_prefix))


def _models(
    p: Distribution, q: Distribution, k_eff: int, context: Sequence[int]
) -> tuple[_Conditional, _Conditional]:
    ctx = tuple(int(t) for t in context)
    pf = _Conditional("p", p, ctx, k_eff + 1)  # the last row serves the bonus token
    qf = _Conditional("q", q, ctx, k_eff)
    if pf.vocab is not None and qf.vocab is not None and pf.vocab != qf.vocab:
        raise InvalidInput("q", f"vocab {qf.vocab}", f"p and q must share the vocabulary (p has {pf.vocab})")
    return pf, qf


def _draft_length(k: int, budget: int | None) -> int:
    k = _int("k", k, 1)
    if budget is None:
        return k
    return min(k, _int("budget", budget, 1) - 1)


def _correction(p_i: np.ndarray, q_i: np.ndarray, rule: str) -> np.ndarray:
    """Where a rejected position's correction is drawn from: the residual ``max(p-q,0)/Z``
    (exact) or p itself (the wrong rule). With Z = 0 a rejection has probability 0 and can
    only come from rounding of ``u·q < p``; p (= the residual's limit) is used then."""
    if rule == "resample-p":
        return p_i
    residual = calc.acceptance(p_i, q_i).residual
    return p_i if residual is None else residual


def _sample(dist: np.ndarray, rng: np.random.Generator) -> int:
    return int(np.searchsorted(_cdf(dist), rng.random(), side="right"))


def _cdf(dist: np.ndarray) -> np.ndarray:
    """Cumulative sums along the last axis, normalised, with every entry from the last
    positive-mass token on set to exactly 1: inverse-CDF sampling with ``u ∈ [0, 1)`` then
    never picks a zero-mass token."""
    d = np.asarray(dist, dtype=np.float64)
    c = np.cumsum(d, axis=-1)
    c = c / c[..., -1:]
    last = d.shape[-1] - 1 - np.argmax((d > 0)[..., ::-1], axis=-1)
    c[np.arange(d.shape[-1]) >= last[..., None]] = 1.0
    return c


# ------------------------------------------------------------------------------ one round


@dataclass(frozen=True)
class RoundOutcome:
    """What one speculative round did.

    Counting convention (positions relative to the round's start; the token carried over
    from the previous round is context, not counted):

    * ``drafted`` — draft tokens proposed. Each was fed through the target's verification
      pass, which wrote a KV entry for it: these are the target-cache positions the round
      *materialised* (``kv_written``). (The draft's own cache holds all drafts but the last,
      which it sampled without feeding.)
    * ``accepted`` — drafts accepted; their target KV entries are kept (``kv_kept``); the
      other ``drafted - accepted`` must be rolled back, in the draft's cache as well
      (``kv_rolled_back``).
    * ``tokens`` / ``emitted`` — committed output tokens: the accepted drafts plus the
      correction or bonus token, if any. The correction/bonus was sampled from the target's
      output but never fed through it, so it has no KV entry yet (``pending`` = 1); the next
      round's verification pass starts with it.

    So the output grows by ``emitted`` while the target's KV cache grows by ``accepted``.
    """

    tokens: tuple[int, ...]
    drafted: int
    accepted: int
    #: a draft was rejected; the last token is the correction
    rejected: bool
    #: every draft was accepted and the last token is the bonus from the target
    bonus: bool
    #: the round ended on the stop token
    stopped: bool

    @property
    def emitted(self) -> int:
        return len(self.tokens)

    @property
    def kv_written(self) -> int:
        return self.drafted

    @property
    def kv_kept(self) -> int:
        return self.accepted

    @property
    def kv_rolled_back(self) -> int:
        return self.drafted - self.accepted

    @property
    def pending(self) -> int:
        return self.emitted - self.accepted


def speculative_round(
    p: Distribution,
    q: Distribution,
    k: int,
    rng: np.random.Generator,
    *,
    context: Sequence[int] = (),
    stop_token: int | None = None,
    budget: int | None = None,
    rule: Rule = "exact",
) -> RoundOutcome:
    """Run one speculative round (see the module docstring) with ``rng``: draft uniforms
    first, then one verification uniform per checked draft, then one for the correction or
    bonus. ``budget`` is the number of tokens the request may still emit (L >= 1)."""
    _check_rule(rule)
    k_eff = _draft_length(k, budget)
    pf, qf = _models(p, q, k_eff, context)
    drafts, q_dists = draft_tokens(qf, k_eff, rng, stop_token=stop_token)
    return verify_drafts(pf, drafts, q_dists, rng, stop_token=stop_token, rule=rule)


def sample(dist: np.ndarray, rng: np.random.Generator) -> int:
    """One token from the distribution ``dist`` by inverse CDF with one uniform of ``rng``
    (a zero-mass token is never drawn)."""
    return _sample(dist, rng)


def draft_tokens(
    q: Callable[[tuple[int, ...]], np.ndarray],
    k: int,
    rng: np.random.Generator,
    *,
    stop_token: int | None = None,
) -> tuple[list[int], list[np.ndarray]]:
    """Step 1 of a round: up to ``k`` drafts ``x_i ~ q(x_<i)``, one uniform each, stopping
    after a drafted stop token. ``q`` gets the round's drafts so far (a model runs its step
    there). Returns the drafts and the distributions they were drawn from."""
    drafts: list[int] = []
    q_dists: list[np.ndarray] = []
    for _ in range(k):
        q_i = q(tuple(drafts))
        drafts.append(_sample(q_i, rng))
        q_dists.append(q_i)
        if drafts[-1] == stop_token:
            break
    return drafts, q_dists


def verify_drafts(
    p: Callable[[tuple[int, ...]], np.ndarray],
    drafts: Sequence[int],
    q_dists: Sequence[np.ndarray],
    rng: np.random.Generator,
    *,
    stop_token: int | None = None,
    rule: Rule = "exact",
) -> RoundOutcome:
    """Steps 2-4 of a round: accept draft ``x_i`` iff ``u_i·q_i(x_i) < p_i(x_i)``; at the first
    rejection draw the correction from ``r = max(p_i - q_i, 0)/Z`` (``rule="exact"``) and drop
    the rest; all accepted: a bonus token from ``p_{k+1}``. ``p`` gets the accepted prefix, so
    a caller holding one verification pass's rows answers ``p(prefix)`` with row
    ``len(prefix)`` (only the rows the round reaches are asked for)."""
    _check_rule(rule)
    tokens: list[int] = []
    for x, q_i in zip(drafts, q_dists, strict=True):
        p_i = p(tuple(tokens))
        if p_i.size != q_i.size:
            raise InvalidInput(
                "q", f"vocab {q_i.size}", f"p and q must share the vocabulary (p has {p_i.size})"
            )
        if rng.random() * q_i[x] < p_i[x]:
            tokens.append(x)
            if x == stop_token:
                return RoundOutcome(tuple(tokens), len(drafts), len(tokens), False, False, True)
            continue
        accepted = len(tokens)
        tokens.append(_sample(_correction(p_i, q_i, rule), rng))
        return RoundOutcome(tuple(tokens), len(drafts), accepted, True, False, tokens[-1] == stop_token)
    accepted = len(tokens)
    tokens.append(_sample(p(tuple(tokens)), rng))
    return RoundOutcome(tuple(tokens), len(drafts), accepted, False, True, tokens[-1] == stop_token)


# ---------------------------------------------------------------------- exact enumeration


def _enumeration_size(vocab: int, horizon: int) -> None:
    if vocab**horizon > MAX_ENUMERATED_SEQUENCES:
        raise InvalidInput(
            "k",
            f"vocab {vocab}, horizon {horizon}",
            f"exact enumeration covers at most {MAX_ENUMERATED_SEQUENCES:,} sequences (vocab^(k+1)); "
            "use a smaller --vocab or --k",
        )


def round_distribution(
    p: Distribution,
    q: Distribution,
    k: int,
    *,
    context: Sequence[int] = (),
    stop_token: int | None = None,
    budget: int | None = None,
    rule: Rule = "exact",
) -> dict[tuple[int, ...], float]:
    """The exact distribution of the committed sequence of one round: every draft
    sequence, every accept/reject pattern and every correction or bonus token, with their
    probabilities. Drafts after the first rejection are discarded, so they are summed out
    (their probabilities add to 1); a draft that proposes the stop token ends drafting."""
    _check_rule(rule)
    k_eff = _draft_length(k, budget)
    pf, qf = _models(p, q, k_eff, context)
    vocab = pf(()).size
    _enumeration_size(vocab, k_eff + 1)
    out: dict[tuple[int, ...], float] = defaultdict(float)

    def visit(prefix: tuple[int, ...], mass: float) -> None:
        p_i = pf(prefix)
        if len(prefix) == k_eff:  # every draft accepted: bonus token from the target
            for y in np.flatnonzero(p_i):
                out[(*prefix, int(y))] += mass * p_i[y]
            return
        q_i = qf(prefix)
        an = calc.acceptance(p_i, q_i)
        for x in np.flatnonzero(q_i):
            # drafted with q(x), accepted with min(1, p/q): mass min(p(x), q(x))
            m = mass * an.accepted_mass[x]
            if m == 0.0:
                continue
            if x == stop_token:
                out[(*prefix, int(x))] += m
            else:
                visit((*prefix, int(x)), m)
        if an.rejection_mass > 0:  # Σ_x q(x)(1 - a(x)) = Z
            corr = _correction(p_i, q_i, rule)
            for y in np.flatnonzero(corr):
                out[(*prefix, int(y))] += mass * an.rejection_mass * corr[y]

    visit((), 1.0)
    return {seq: float(mass) for seq, mass in out.items()}


def target_distribution(
    p: Distribution,
    horizon: int,
    *,
    context: Sequence[int] = (),
    stop_token: int | None = None,
) -> dict[tuple[int, ...], float]:
    """The target's own autoregressive distribution over its next ``horizon`` tokens
    (a sequence ends early at the stop token)."""
    horizon = _int("horizon", horizon, 1)
    pf = _Conditional("p", p, tuple(int(t) for t in context), horizon)
    _enumeration_size(pf(()).size, horizon)
    out: dict[tuple[int, ...], float] = {}
    _extend(pf, (), 1.0, horizon, stop_token, out)
    return out


def _extend(
    pf: _Conditional,
    prefix: tuple[int, ...],
    mass: float,
    horizon: int,
    stop_token: int | None,
    out: dict[tuple[int, ...], float],
) -> None:
    """Add ``mass`` × the target's continuations of ``prefix`` up to ``horizon`` to ``out``."""
    if len(prefix) >= horizon or (prefix and prefix[-1] == stop_token):
        out[prefix] = out.get(prefix, 0.0) + mass
        return
    p_i = pf(prefix)
    for y in np.flatnonzero(p_i):
        _extend(pf, (*prefix, int(y)), mass * float(p_i[y]), horizon, stop_token, out)


def completed_distribution(
    round_dist: dict[tuple[int, ...], float],
    p: Distribution,
    horizon: int,
    *,
    context: Sequence[int] = (),
    stop_token: int | None = None,
) -> dict[tuple[int, ...], float]:
    """Each round outcome continued with target sampling up to ``horizon`` tokens (or the
    stop token). For an exact sampler this is the target's own distribution: the round's
    output is the beginning of a target sample."""
    pf = _Conditional("p", p, tuple(int(t) for t in context), horizon)
    out: dict[tuple[int, ...], float] = {}
    for seq, mass in round_dist.items():
        _extend(pf, seq, mass, horizon, stop_token, out)
    return out


def max_abs_difference(a: dict[tuple[int, ...], float], b: dict[tuple[int, ...], float]) -> float:
    """``max_s |a(s) - b(s)|`` over the union of supports."""
    keys = set(a) | set(b)
    return float(max((abs(a.get(s, 0.0) - b.get(s, 0.0)) for s in keys), default=0.0))


def exact_max_abs_error(
    p: Distribution,
    q: Distribution,
    k: int,
    *,
    context: Sequence[int] = (),
    stop_token: int | None = None,
    budget: int | None = None,
    rule: Rule = "exact",
) -> float:
    """Max abs difference between the round's output (completed by the target to the
    horizon ``H = min(k+1, L)``) and H target steps. ~1e-16 for the exact rule; a clear
    difference for ``rule="resample-p"`` whenever a rejection is possible."""
    horizon = _draft_length(k, budget) + 1
    rd = round_distribution(p, q, k, context=context, stop_token=stop_token, budget=budget, rule=rule)
    done = completed_distribution(rd, p, horizon, context=context, stop_token=stop_token)
    return max_abs_difference(done, target_distribution(p, horizon, context=context, stop_token=stop_token))


# --------------------------------------------------------------------------- Monte-Carlo


@dataclass(frozen=True, eq=False)
class RoundBatch:
    """Many independent rounds (arrays over trials) from :func:`simulate_rounds`; field
    meanings as in :class:`RoundOutcome`."""

    #: committed tokens, (trials, H), padded with -1 after ``emitted``
    tokens: np.ndarray
    emitted: np.ndarray
    drafted: np.ndarray
    accepted: np.ndarray
    rejected: np.ndarray
    bonus: np.ndarray
    stopped: np.ndarray


def _rows(name: str, dist: np.ndarray | Sequence[float] | Sequence[Sequence[float]], n: int) -> np.ndarray:
    arr = np.asarray(dist, dtype=np.float64)
    if arr.ndim == 1:
        arr = np.broadcast_to(arr, (max(n, 1), arr.size))
    if arr.ndim != 2 or arr.shape[0] < n:
        raise InvalidInput(
            name, f"shape {arr.shape}", f"expected (V,) or ({n}, V) position-wise distributions"
        )
    return (
        np.stack([calc.validate_distribution(f"{name}[{i}]", row) for i, row in enumerate(arr[:n])])
        if n
        else arr[:0]
    )


def _sample_rows(cdf_rows: np.ndarray, which: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Token per trial: inverse CDF of row ``which[t]`` of ``cdf_rows`` at ``u[t]``."""
    out = np.empty(u.shape, dtype=np.int64)
    for r in np.unique(which):
        sel = which == r
        out[sel] = np.searchsorted(cdf_rows[r], u[sel], side="right")
    return out


def simulate_rounds(
    p: np.ndarray | Sequence[float] | Sequence[Sequence[float]],
    q: np.ndarray | Sequence[float] | Sequence[Sequence[float]],
    k: int,
    trials: int,
    rng: np.random.Generator,
    *,
    stop_token: int | None = None,
    budget: int | None = None,
    rule: Rule = "exact",
) -> RoundBatch:
    """``trials`` independent rounds at once (numpy, no per-trial Python loop) for
    position-wise distributions that do not depend on the drafted tokens: ``p`` is (V,) or
    (k+1, V) — row i is the target at round position i, the last row the bonus — and ``q``
    is (V,) or (k, V). Same algorithm as :func:`speculative_round`."""
    _check_rule(rule)
    k_eff = _draft_length(k, budget)
    trials = _int("trials", trials, 1)
    P = _rows("p", p, k_eff + 1)
    Q = _rows("q", q, k_eff)
    if P.shape[1] != Q.shape[1] and k_eff:
        raise InvalidInput(
            "q", f"vocab {Q.shape[1]}", f"p and q must share the vocabulary (p has {P.shape[1]})"
        )
    h = k_eff + 1
    cols = np.arange(k_eff)
    rows = np.arange(trials)
    drafts = np.empty((trials, k_eff), dtype=np.int64)
    u_draft = rng.random((trials, k_eff))
    q_cdf = _cdf(Q) if k_eff else Q
    for j in range(k_eff):
        drafts[:, j] = np.searchsorted(q_cdf[j], u_draft[:, j], side="right")
    drafted = np.full(trials, k_eff)
    if stop_token is not None and k_eff:
        is_stop = drafts == stop_token
        drafted = np.where(is_stop.any(axis=1), is_stop.argmax(axis=1) + 1, k_eff)
    u_verify = rng.random((trials, k_eff))
    acc = u_verify * Q[cols, drafts] < P[cols, drafts]
    rej = ~acc & (cols < drafted[:, None])
    rejected = rej.any(axis=1)
    first_rejection = rej.argmax(axis=1) if k_eff else np.zeros(trials, dtype=np.int64)
    accepted = np.where(rejected, first_rejection, drafted)
    last = drafts[rows, np.maximum(drafted - 1, 0)] if k_eff else np.full(trials, -1)
    stopped_on_draft = ~rejected & (drafted > 0) & (last == stop_token)
    bonus = ~rejected & ~stopped_on_draft
    # one table: rows 0..k_eff-1 corrections, rows k_eff..2k_eff bonus distributions
    corrections = np.stack([_correction(P[j], Q[j], rule) for j in range(k_eff)]) if k_eff else P[:0]
    table = _cdf(np.concatenate([corrections, P]))
    which = np.where(rejected, accepted, k_eff + accepted)
    extra = _sample_rows(table, which, rng.random(trials))
    has_extra = rejected | bonus
    emitted = accepted + has_extra
    tokens = np.full((trials, h), -1, dtype=np.int64)
    if k_eff:
        tokens[:, :k_eff] = np.where(cols < accepted[:, None], drafts, -1)
    tokens[rows[has_extra], accepted[has_extra]] = extra[has_extra]
    stopped = stopped_on_draft | (has_extra & (extra == stop_token))
    return RoundBatch(tokens, emitted, drafted, accepted, rejected, bonus, stopped)


def complete_with_target(
    batch: RoundBatch,
    p: np.ndarray | Sequence[float] | Sequence[Sequence[float]],
    rng: np.random.Generator,
    *,
    stop_token: int | None = None,
) -> np.ndarray:
    """Each round's tokens continued by target sampling to the horizon H (padding -1 after
    a stop token): for an exact sampler, H-token sequences distributed as the target's."""
    trials, h = batch.tokens.shape
    P = _rows("p", p, h)
    cdf = _cdf(P)
    u = rng.random((trials, h))
    fill = np.stack([np.searchsorted(cdf[n], u[:, n], side="right") for n in range(h)], axis=1)
    out = np.where(np.arange(h) < batch.emitted[:, None], batch.tokens, fill)
    if stop_token is not None:
        after_stop = np.cumsum(out == stop_token, axis=1) - (out == stop_token) > 0
        out[after_stop] = -1
    return out


# ------------------------------------------------------------------------------ chi-square


def encode_sequences(seqs: np.ndarray, vocab: int) -> np.ndarray:
    """One integer per sequence row (tokens -1..V-1 in base V+1)."""
    base = (vocab + 1) ** np.arange(seqs.shape[1], dtype=np.int64)
    return (seqs + 1) @ base


def sequence_codes(dist: dict[tuple[int, ...], float], vocab: int) -> dict[int, float]:
    """A sequence distribution keyed by the integer codes :func:`encode_sequences` gives its
    sequences (padded with -1 to the longest), for :func:`chi_square_p_value`."""
    if not dist:
        return {}
    seqs = list(dist)
    width = max(len(s) for s in seqs)
    arr = np.full((len(seqs), width), -1, dtype=np.int64)
    for i, s in enumerate(seqs):
        arr[i, : len(s)] = s
    return dict(zip(encode_sequences(arr, vocab).tolist(), dist.values(), strict=True))


def chi_square_p_value(
    observed_codes: np.ndarray, expected_probs: dict[int, float]
) -> tuple[float | None, int]:
    """Pearson chi-square goodness-of-fit p-value of ``observed_codes`` (one code per trial)
    against ``expected_probs`` (code -> probability). Cells with expected count below 5 are
    pooled into one cell (merged into the smallest kept cell if the pool is still below 5).
    A trial in a zero-probability cell gives p = 0. Returns (p-value or None when fewer than
    two cells remain, number of cells)."""
    from scipy.stats import chisquare

    n = observed_codes.size
    codes, counts = np.unique(observed_codes, return_counts=True)
    obs = dict(zip(codes.tolist(), counts.tolist(), strict=True))
    if any(c not in expected_probs or expected_probs[c] == 0.0 for c in obs):
        return 0.0, 0
    items = sorted(expected_probs.items(), key=lambda kv: -kv[1])
    kept = [(c, pr) for c, pr in items if pr * n >= MIN_EXPECTED_COUNT]
    pooled = [c for c, pr in items if pr * n < MIN_EXPECTED_COUNT]
    f_obs = [float(obs.get(c, 0)) for c, _ in kept]
    f_exp = [pr * n for _, pr in kept]
    if pooled:
        pool_obs = float(sum(obs.get(c, 0) for c in pooled))
        pool_exp = math.fsum(expected_probs[c] for c in pooled) * n
        if pool_exp >= MIN_EXPECTED_COUNT or not f_exp:
            f_obs.append(pool_obs)
            f_exp.append(pool_exp)
        elif pool_exp > 0:
            f_obs[-1] += pool_obs
            f_exp[-1] += pool_exp
    if len(f_exp) < 2:
        return None, len(f_exp)
    f_exp_arr = np.asarray(f_exp)
    f_exp_arr *= sum(f_obs) / f_exp_arr.sum()  # scipy requires equal totals; differs only by rounding
    return float(chisquare(np.asarray(f_obs), f_exp_arr).pvalue), len(f_exp)


# ----------------------------------------------------------------------------- the check


def random_pair(
    vocab: int, k: int, rng: np.random.Generator, alpha_target: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Position-wise target rows p (k+1, V) and draft rows q (k, V), uniform on the simplex
    (Dirichlet(1)). With ``alpha_target`` each draft row is ``q = λ·p + (1-λ)·d`` with λ
    chosen by bisection so that ``A(p_i, q_i) = alpha_target`` (d is a Dirichlet draw, or a
    point mass on p's least likely token when the draw already accepts more than the target)."""
    p = rng.dirichlet(np.ones(vocab), size=k + 1)
    q = rng.dirichlet(np.ones(vocab), size=k)
    if alpha_target is None:
        return p, q
    for i in range(k):
        base = q[i]
        if calc.acceptance(p[i], base).acceptance_rate > alpha_target:
            base = np.zeros(vocab)
            base[np.argmin(p[i])] = 1.0
            floor = calc.acceptance(p[i], base).acceptance_rate
            if floor > alpha_target:
                raise InvalidInput(
                    "alpha_target",
                    alpha_target,
                    f"with this seed the target at position {i + 1} accepts at least {floor:.3g}; "
                    "raise --alpha-target or change --seed",
                )
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if calc.acceptance(p[i], mid * p[i] + (1 - mid) * base).acceptance_rate < alpha_target:
                lo = mid
            else:
                hi = mid
        q[i] = hi * p[i] + (1 - hi) * base
        q[i] /= q[i].sum()
    return p, q


@dataclass
class _MonteCarlo:
    first_codes: np.ndarray
    seq_codes: np.ndarray
    accepted_hist: np.ndarray
    emitted_sum: float
    drafted_sum: float


def _monte_carlo(
    p: np.ndarray, q: np.ndarray, k: int, trials: int, rng: np.random.Generator, rule: Rule
) -> _MonteCarlo:
    """Simulate in chunks (bounded memory) and keep only what the tests need."""
    vocab = p.shape[1]
    first, seqs = [], []
    hist = np.zeros(k + 1, dtype=np.int64)
    e_sum = d_sum = 0.0
    done = 0
    while done < trials:
        n = min(_CHUNK, trials - done)
        batch = simulate_rounds(p, q, k, n, rng, rule=rule)
        full = complete_with_target(batch, p, rng)
        first.append(batch.tokens[:, 0])
        seqs.append(encode_sequences(full, vocab))
        hist += np.bincount(batch.accepted, minlength=k + 1)
        e_sum += float(batch.emitted.sum())
        d_sum += float(batch.drafted.sum())
        done += n
    return _MonteCarlo(np.concatenate(first), np.concatenate(seqs), hist, e_sum, d_sum)


def _rule_verdict(
    rule: Rule,
    p: np.ndarray,
    q: np.ndarray,
    k: int,
    mc: _MonteCarlo,
    target_seq: dict[tuple[int, ...], float],
) -> RuleVerdict:
    vocab = p.shape[1]
    err = exact_max_abs_error(p, q, k, rule=rule)
    first_p, first_cells = chi_square_p_value(mc.first_codes, dict(enumerate(p[0].tolist())))
    seq_p, seq_cells = chi_square_p_value(mc.seq_codes, sequence_codes(target_seq, vocab))
    rejects = any(v is not None and v < SIGNIFICANCE for v in (first_p, seq_p))
    return RuleVerdict(
        rule=rule,
        exact_max_abs_error=err,
        chi2_p_value=first_p,
        chi2_sequence_p_value=seq_p,
        chi2_cells=first_cells,
        chi2_sequence_cells=seq_cells,
        exact_differs=bool(err > EXACT_TOLERANCE),
        chi2_rejects=rejects,
    )


def _rate(quantity: str, measured: float, predicted: float, se: float) -> RateCheck:
    if se > 0:
        z = (measured - predicted) / se
        within = abs(z) <= SIGMA_LIMIT
    else:  # a degenerate rate (0 or 1): the measurement must equal the prediction
        z = 0.0 if abs(measured - predicted) <= 1e-12 else math.inf
        within = z == 0.0
    return RateCheck(quantity, measured, predicted, se, z, within)


def _rates(p: np.ndarray, q: np.ndarray, k: int, trials: int, mc: _MonteCarlo) -> list[RateCheck]:
    alphas = np.array([calc.acceptance(p[i], q[i]).acceptance_rate for i in range(k)])
    out = []
    # trials that reached position i (all before accepted), and those that also accepted it
    reached = trials - np.concatenate(([0], np.cumsum(mc.accepted_hist)[:-1]))
    for i in range(k):
        n_i, acc_i = int(reached[i]), int(reached[i + 1])
        if n_i == 0:
            continue
        se = math.sqrt(alphas[i] * (1 - alphas[i]) / n_i)
        out.append(_rate(f"α_{i + 1} (acceptance at position {i + 1})", acc_i / n_i, float(alphas[i]), se))
    e_n = calc.expected_tokens(alphas)
    mean_n = mc.emitted_sum / trials
    # the predicted spread of N, like the α_i above (a sample variance is 0 for few trials):
    # E[N²] = Σ_j (2j - 1)·P(N ≥ j)
    surv = calc.survival(alphas)
    var_n = max(math.fsum((2 * j - 1) * s for j, s in enumerate(surv.tolist(), start=1)) - e_n**2, 0.0)
    out.append(_rate("E[N] (committed tokens per round)", mean_n, e_n, math.sqrt(var_n / trials)))
    return out


def run(request: SpeculativeVerifyRequest) -> SpeculativeVerifyResult:
    """The check behind ``infer-opt speculative verify``: random position-wise p and q over
    ``vocab`` tokens (seeded Dirichlet), then for the exact rule and the wrong "resample
    from p" rule: (1) exact enumeration of the round's output distribution against the
    target (tolerance 1e-12), (2) a seeded Monte-Carlo of ``trials`` rounds with chi-square
    tests of the first committed token and of the completed sequence at significance 1e-3,
    and for the exact rule (3) measured acceptance rates and mean committed tokens against
    the calculators' ``A = Σ min(p, q)`` and ``E[N] = Σ_i Π_{j≤i} α_j`` within 5 standard
    errors. With a fixed seed the result is deterministic; over random seeds the exact
    rule fails by chance with probability about 2e-3 (two chi-square tests at 1e-3, plus
    k+2 comparisons at 5.7e-7 each)."""
    vocab, k, trials, seed = request.vocab, request.k, request.trials, request.seed
    _enumeration_size(vocab, k + 1)
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)]
    p, q = random_pair(vocab, k, streams[0], request.alpha_target)
    target_seq = target_distribution(p, k + 1)

    mc_exact = _monte_carlo(p, q, k, trials, streams[1], "exact")
    mc_wrong = _monte_carlo(p, q, k, trials, streams[2], "resample-p")
    exact = _rule_verdict("exact", p, q, k, mc_exact, target_seq)
    wrong = _rule_verdict("resample-p", p, q, k, mc_wrong, target_seq)
    rates = _rates(p, q, k, trials, mc_exact)

    exact_ok = not exact.exact_differs and not exact.chi2_rejects
    detected = wrong.exact_differs and wrong.chi2_rejects
    rates_ok = all(r.within for r in rates)
    return SpeculativeVerifyResult(
        vocab=vocab,
        k=k,
        trials=trials,
        seed=seed,
        p=tuple(tuple(float(x) for x in row) for row in p),
        q=tuple(tuple(float(x) for x in row) for row in q),
        exact=exact,
        wrong=wrong,
        exact_rule_ok=exact_ok,
        wrong_rule_detected=detected,
        rates=tuple(rates),
        rates_ok=rates_ok,
        passed=exact_ok and detected and rates_ok,
        mean_drafted=mc_exact.drafted_sum / trials,
        mean_kv_kept=float(np.dot(np.arange(k + 1), mc_exact.accepted_hist)) / trials,
        mean_emitted=mc_exact.emitted_sum / trials,
        alpha_target=request.alpha_target,
        warnings=(Notice("wrong_rule_missed_by_sampling", {"trials": trials}),)
        if wrong.exact_differs and not wrong.chi2_rejects
        else (),
    )
