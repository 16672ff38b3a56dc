"""Speculative decoding run for real and held against its cost model: ``infer-opt speculative run``.

Batch 1. A round with draft length k:

1. The draft proposes k tokens autoregressively over its KV cache
   (:func:`speculative_sampler.draft_tokens`; the draft is first fed the committed tokens it has not
   seen: the one carried over — and for a separate draft model, after a round that accepted
   every draft, the last draft too, which it sampled but never fed).
2. The target verifies them in **one** forward over k + 1 positions (the carried token and the
   k drafts) over its cache; the built-in models give several new positions the
   bottom-right-aligned causal mask (:func:`infer_opt.profilers.models.attention`).
3. Acceptance and the correction or bonus draw by the exact rule of the project's sampler
   (:func:`speculative_sampler.verify_drafts`): accept ``x_i`` iff ``u·q_i(x_i) < p_i(x_i)``, at the
   first rejection draw from ``max(p_i - q_i, 0)/Z``, all accepted: a bonus token from
   ``p_{k+1}``. Greedy decoding is the same rule with point masses on each model's argmax: a
   draft is accepted iff it is the target's argmax, and the correction is that argmax.
4. Both caches are truncated (:meth:`KVCache.crop`) to the committed tokens: the rejected
   drafts' keys and values are dropped.

Rounds repeat until N tokens are committed; a round never drafts past the N-th token (the
last rounds draft ``min(k, tokens left - 1)``).

Timing: the plain decoding of the target and the speculative decoding of the same prompt
start from the same state (the prompt but its last token in the caches, which is fed first)
and are timed alike by :func:`infer_opt.profilers.timing.measure`, one repetition of each in
turn so that a change in machine load shows up in both. The prefill is outside the timed
region (it is the same for both, the draft's aside). Measured speedup = plain time / speculative
time for the same N tokens.

Prediction: ``S = c_t·E[N] / (k·c_d + c_v(k) + c_m)`` with c_t, c_d, c_v(k) and c_m measured in
the same run as ``speculative measure`` measures them (:func:`speculative_measure.cost_jobs`, over a
cache of ``prompt_len + N/2`` positions, the middle of the run; c_t, c_d and c_v(k) timed in
the same interleaved rounds as the decodings) and ``E[N] = 1 + Σ_i Π_{j≤i} α_j`` from the
realised α_i. The α_i come from the rounds that drafted all k tokens, through the same
:func:`calc.rates_from_counts` as ``from-metrics`` (``α_i = acc_i / acc_{i-1}``, acc_0 = rounds).
What the model leaves out shows up as the relative error: sampling and acceptance arithmetic,
Python between the forwards, a separate draft's catch-up forward of two tokens, the growth of the
cache over the run, and the shorter last rounds.

``self:N`` drafts with the target's first N layers, its final norm and LM head (LayerSkip's
early exit), sharing every weight with the target (:class:`EarlyExitLM`) and the target's KV
cache of those layers (:func:`new_caches`): the verification pass writes the keys and values of
every draft, so the draft never has to catch up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from infer_opt.checks import speculative_sampler
from infer_opt.cost_models import speculative as calc
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.profilers.models import DecoderLM, KVCache, random_tokens
from infer_opt.profilers.speculative_costs import CostJob, ModelPair, cost_jobs, load_decoder, load_pair
from infer_opt.results.speculative import Costs
from infer_opt.results.speculative_measure import MeasuredCost
from infer_opt.results.speculative_run import RunPoint, SpecRunResult
from infer_opt.stats import VARIANCE_THRESHOLD, Summary

if TYPE_CHECKING:
    from infer_opt.requests import SpeculativeRunRequest

Progress = Callable[[int, int, str], None]
SELF_PREFIX = "self:"


# ----------------------------------------------------------------------------- self-speculation


class EarlyExitLM(DecoderLM):
    """The target's first ``n_layers`` blocks, then its final norm and LM head: an early-exit
    draft (LayerSkip) whose every weight is the target's own (nothing is copied). It has its
    own KV cache of ``n_layers`` layers."""

    def __init__(self, target: DecoderLM, n_layers: int) -> None:
        nn.Module.__init__(self)
        self.config = replace(
            target.config,
            name=f"{SELF_PREFIX}{n_layers}",
            n_layers=n_layers,
            description=f"first {n_layers} of {target.config.n_layers} layers of {target.config.name}",
        )
        self.embed = target.embed
        if target.config.positions == "learned":
            self.pos_embed = target.pos_embed
        else:
            self.register_buffer("rope_cos", target.rope_cos, persistent=False)
            self.register_buffer("rope_sin", target.rope_sin, persistent=False)
        self.blocks = nn.ModuleList(list(target.blocks)[:n_layers])
        self.final_norm = target.final_norm
        self.lm_head = target.lm_head


def _self_layers(draft: str, target_layers: int) -> int:
    text = draft[len(SELF_PREFIX) :]
    expected = f"self:N drafts with the target's first N layers: 1 <= N < {target_layers}"
    if not text.isdigit():
        raise InvalidInput("draft", draft, expected)
    n = int(text)
    if not 1 <= n < target_layers:
        raise InvalidInput("draft", draft, expected)
    return n


def load_run_pair(target: str, draft: str, *, device: Any, dtype: Any) -> ModelPair:
    """The target and the draft: ``self:N`` (the target's first N layers, shared weights) or any
    draft :func:`speculative_measure.load_pair` accepts (sharing the target's vocabulary)."""
    if not draft.startswith(SELF_PREFIX):
        return load_pair(target, draft, device=device, dtype=dtype)
    from infer_opt.profilers.model_profile import guard

    with guard(f"building the target {target}"):
        model, name = load_decoder(target, "target", device, dtype, None)
    n = _self_layers(draft, model.config.n_layers)
    note = f"the target's first {n} of {model.config.n_layers} layers with its final norm and LM head"
    return ModelPair(model, EarlyExitLM(model, n), name, f"{SELF_PREFIX}{n}", model.config.vocab_size, note)


# ----------------------------------------------------------------------------- decoding


@dataclass(frozen=True)
class Decoding:
    """How a token is chosen from a row of logits: greedy (``temperature`` None) or drawn from
    ``softmax(z/T)``."""

    temperature: float | None = None

    def distribution(self, logits: torch.Tensor) -> np.ndarray:
        """The distribution a token is drawn from, float64: ``softmax(z/T)``, or for greedy a
        point mass on the argmax (``torch.argmax``: the first of tied maxima)."""
        if self.temperature is None:
            out = np.zeros(logits.shape[-1])
            out[int(torch.argmax(logits))] = 1.0
            return out
        return calc.softmax(logits.double().cpu().numpy(), self.temperature)

    def pick(self, logits: torch.Tensor, rng: np.random.Generator) -> int:
        """One token for plain decoding: the argmax, or a draw with one uniform of ``rng``."""
        if self.temperature is None:
            return int(torch.argmax(logits))
        return speculative_sampler.sample(self.distribution(logits), rng)


def _ids(tokens: Sequence[int], device: Any) -> torch.Tensor:
    return torch.tensor([list(tokens)], dtype=torch.long, device=device)


def prefill(model: DecoderLM, cache: KVCache, prompt: Sequence[int]) -> None:
    """Fill ``cache`` with the prompt but its last token (decoding starts by feeding that one)."""
    cache.reset(0)
    if len(prompt) > 1:
        with torch.no_grad():
            model(_ids(prompt[:-1], model.lm_head.weight.device), cache)


def new_caches(pair: ModelPair, length: int) -> tuple[KVCache, KVCache]:
    """The target's KV cache and the draft's. An early-exit draft of this target views the
    target's tensors of the layers they share (:meth:`KVCache.sharing`): after a verification
    pass it has every committed token but the last, so it never feeds two tokens to catch up."""
    target_cache = pair.target.new_cache(1, length)
    draft = pair.draft
    if isinstance(draft, EarlyExitLM) and draft.blocks[0] is pair.target.blocks[0]:
        return target_cache, KVCache.sharing(target_cache, draft.config.n_layers)
    return target_cache, draft.new_cache(1, length)


def prefill_pair(pair: ModelPair, target_cache: KVCache, draft_cache: KVCache, prompt: Sequence[int]) -> None:
    """:func:`prefill` both caches (a shared draft cache just takes the target's length)."""
    prefill(pair.target, target_cache, prompt)
    if draft_cache.shares is target_cache:
        draft_cache.reset(target_cache.length)
    else:
        prefill(pair.draft, draft_cache, prompt)


def decode_plain(
    model: DecoderLM,
    cache: KVCache,
    prompt: Sequence[int],
    new_tokens: int,
    decoding: Decoding,
    rng: np.random.Generator,
) -> list[int]:
    """``new_tokens`` tokens of plain decoding, one forward each, from a cache holding the prompt
    but its last token (:func:`prefill`)."""
    device = model.lm_head.weight.device
    cache.crop(len(prompt) - 1)
    token, out = prompt[-1], []
    with torch.no_grad():
        for _ in range(new_tokens):
            token = decoding.pick(model(_ids([token], device), cache)[0, -1], rng)
            out.append(token)
    return out


@dataclass
class SpeculativeTrace:
    """What one speculative decoding did: the committed tokens and the round counts."""

    k: int
    tokens: list[int] = field(default_factory=list)
    rounds: int = 0
    #: rounds that drafted all k tokens, and per position how many of them accepted it
    full_rounds: int = 0
    accepted_per_position: list[int] = field(default_factory=list)

    def record(self, drafted: int, accepted: int) -> None:
        self.rounds += 1
        if drafted == self.k:
            self.full_rounds += 1
            for i in range(accepted):
                self.accepted_per_position[i] += 1


def _draft_fn(
    model: DecoderLM, cache: KVCache, seq: list[int], decoding: Decoding
) -> Callable[[tuple[int, ...]], np.ndarray]:
    """``q(round_prefix)`` for :func:`speculative_sampler.draft_tokens`: feeds the draft what it has
    not seen (the committed tokens past its cache, then each new draft) and returns its next
    distribution."""
    device = model.lm_head.weight.device

    def q(prefix: tuple[int, ...]) -> np.ndarray:
        feed = seq[cache.length :] if not prefix else [prefix[-1]]
        return decoding.distribution(model(_ids(feed, device), cache)[0, -1])

    return q


def _verify(
    model: DecoderLM,
    cache: KVCache,
    seq: list[int],
    drafts: list[int],
    q_dists: list[np.ndarray],
    decoding: Decoding,
    rng: np.random.Generator,
    rule: speculative_sampler.Rule,
) -> speculative_sampler.RoundOutcome:
    """One target forward over the carried token and the drafts, the exact rule over its rows
    (each row's distribution built only when the round reaches it), then the target's cache cut
    back to the committed tokens."""
    logits = model(_ids([seq[-1], *drafts], model.lm_head.weight.device), cache)[0]
    rows: dict[int, np.ndarray] = {}

    def p(prefix: tuple[int, ...]) -> np.ndarray:
        i = len(prefix)
        if i not in rows:
            rows[i] = decoding.distribution(logits[i])
        return rows[i]

    outcome = speculative_sampler.verify_drafts(p, drafts, q_dists, rng, rule=rule)
    cache.crop(len(seq) + outcome.accepted)
    return outcome


def decode_speculative(
    pair: ModelPair,
    target_cache: KVCache,
    draft_cache: KVCache,
    prompt: Sequence[int],
    new_tokens: int,
    k: int,
    decoding: Decoding,
    rng: np.random.Generator,
    *,
    rule: speculative_sampler.Rule = "exact",
) -> SpeculativeTrace:
    """``new_tokens`` tokens of speculative decoding with draft length ``k`` (module docstring),
    from caches holding the prompt but its last token (:func:`prefill` of both models)."""
    seq = list(prompt)
    target_cache.crop(len(prompt) - 1)
    draft_cache.crop(len(prompt) - 1)
    trace = SpeculativeTrace(k, accepted_per_position=[0] * k)
    end = len(prompt) + new_tokens
    with torch.no_grad():
        while len(seq) < end:
            drafted = min(k, end - len(seq) - 1)
            q = _draft_fn(pair.draft, draft_cache, seq, decoding)
            drafts, q_dists = speculative_sampler.draft_tokens(q, drafted, rng)
            outcome = _verify(pair.target, target_cache, seq, drafts, q_dists, decoding, rng, rule)
            if draft_cache.shares is target_cache:
                draft_cache.reset(target_cache.length)
            else:
                draft_cache.crop(min(draft_cache.length, len(seq) + outcome.accepted))
            seq.extend(outcome.tokens)
            trace.record(drafted, outcome.accepted)
    trace.tokens = seq[len(prompt) :]
    return trace


# ----------------------------------------------------------------------------- result types


# ----------------------------------------------------------------------------- analysis


def cost_medians(costs: Sequence[MeasuredCost]) -> dict[str, float]:
    """``{"c_t": ..., "c_d": ..., "c_v(1)": ..., "c_m": ...}``: each cost's median."""
    return {c.name: c.median_s for c in costs}


def make_point(
    trace: SpeculativeTrace,
    time: Summary,
    plain_time: Summary,
    costs: dict[str, float],
    *,
    new_tokens: int,
    plain_tokens: Sequence[int] | None,
) -> RunPoint:
    """A run's measurements against the prediction ``S = c_t·E[N] / (k·c_d + c_v(k) + c_m)``
    (α_i from :func:`calc.rates_from_counts` over the full rounds; an undefined α_i, after a
    position nobody accepted, does not change E[N] and is taken as 0). ``plain_tokens``: the
    greedy plain output to compare with (None when sampling)."""
    k = trace.k
    rates = calc.rates_from_counts(trace.full_rounds, trace.accepted_per_position)
    alphas = tuple(p.conditional for p in rates.positions)
    model_costs = Costs(costs["c_t"], costs["c_d"], costs[f"c_v({k})"], 0.0, costs["c_m"])
    predicted = calc.speculative_speedup(k, model_costs, alphas=[a or 0.0 for a in alphas])
    measured = plain_time.median_s / time.median_s
    identical = difference = None
    if plain_tokens is not None:
        identical = list(trace.tokens) == list(plain_tokens)
        if not identical:
            difference = next(
                (i for i, (a, b) in enumerate(zip(trace.tokens, plain_tokens, strict=False)) if a != b),
                min(len(trace.tokens), len(plain_tokens)),
            )
    return RunPoint(
        k=k,
        time=time,
        tokens_per_s=new_tokens / time.median_s,
        measured_speedup=measured,
        predicted_speedup=predicted.speedup,
        relative_error=(predicted.speedup - measured) / measured,
        rounds=trace.rounds,
        expected_tokens_measured=new_tokens / trace.rounds,
        expected_tokens_predicted=predicted.expected_tokens,
        alpha_per_position=alphas,
        full_rounds=trace.full_rounds,
        accepted_per_position=tuple(trace.accepted_per_position),
        verify_s=costs[f"c_v({k})"],
        round_time_predicted_s=predicted.round_time_s,
        tokens=tuple(trace.tokens),
        tokens_identical=identical,
        first_difference=difference,
    )


def _variance_notice(summary: Summary, subject: str) -> list[Notice]:
    if summary.rel_iqr > VARIANCE_THRESHOLD:
        return [Notice("high_variance", {"rel_iqr": summary.rel_iqr}, subject)]
    return []


def run_notices(
    plain_time: Summary,
    points: Sequence[RunPoint],
    costs: Sequence[MeasuredCost],
    nondeterministic: Sequence[str],
) -> tuple[Notice, ...]:
    """Warnings: outputs that differ (greedy), repetitions that decoded different tokens, and
    timings with a high spread."""
    out: list[Notice] = []
    for p in points:
        if p.tokens_identical is False:
            out.append(Notice("spec_run_tokens_differ", {"k": p.k, "index": p.first_difference}))
    out += [Notice("spec_run_nondeterministic", {"what": what}) for what in nondeterministic]
    out += _variance_notice(plain_time, "plain decoding")
    for p in points:
        out += _variance_notice(p.time, f"speculative decoding, k = {p.k}")
    for c in costs:
        out += _variance_notice(c.summary, c.name)
    return tuple(out)


# ----------------------------------------------------------------------------- measuring

#: c_m is sub-microsecond: untimed calls before it (it needs no interleaving)
BOOKKEEPING_WARMUP = 3


@dataclass
class TimedJob:
    """A call timed in every round of :func:`time_interleaved`, its samples, and (decodings)
    every output it produced, warm-up calls included."""

    name: str
    run: Callable[[], Any]
    #: timed calls per round, and untimed calls before the first round / before later ones
    reps_per_round: int = 1
    warmup_first: int = 1
    warmup_later: int = 0
    keep_outputs: bool = True
    what: str = ""
    samples_s: list[float] = field(default_factory=list)
    outputs: list[Any] = field(default_factory=list)

    def __call__(self) -> None:
        out = self.run()
        if self.keep_outputs:
            self.outputs.append(out)


def time_interleaved(
    jobs: Sequence[TimedJob],
    *,
    device: Any,
    rounds: int,
    timer: Callable[..., Any],
    progress: Progress | None = None,
) -> int:
    """``rounds`` rounds; in each, every job in turn is timed ``reps_per_round`` times, so that
    a change in machine load during the run spreads over all of them (the decodings and the
    costs of the prediction alike) rather than biasing one against another. Returns the rounds
    done: Ctrl-C after a whole round keeps the whole rounds (every job's samples of the round
    cut short dropped); before one, the interrupt goes on."""
    done = 0
    try:
        _rounds(jobs, device=device, rounds=rounds, timer=timer, progress=progress)
        return rounds
    except KeyboardInterrupt:
        done = min(len(job.samples_s) // job.reps_per_round for job in jobs)
        if done == 0:
            raise
        for job in jobs:
            del job.samples_s[done * job.reps_per_round :]
        return done


def _rounds(
    jobs: Sequence[TimedJob],
    *,
    device: Any,
    rounds: int,
    timer: Callable[..., Any],
    progress: Progress | None,
) -> None:
    total = rounds * len(jobs)
    for r in range(rounds):
        for j, job in enumerate(jobs):
            if progress:
                progress(r * len(jobs) + j, total, f"timing {job.name} (round {r + 1} of {rounds})")
            m = timer(
                job,
                device=device,
                warmup=job.warmup_first if r == 0 else job.warmup_later,
                reps=job.reps_per_round,
                time_cold=False,
            )
            job.samples_s.extend(m.samples_s)


def _check_positions(pair: ModelPair, prompt_len: int, new_tokens: int, k_max: int) -> int:
    """The cache length a run needs: the prompt, the N tokens and one round's drafts."""
    need = prompt_len + new_tokens + k_max + 1
    for model, name in ((pair.target, pair.target_name), (pair.draft, pair.draft_name)):
        if need > model.config.max_seq_len:  # blamed on the larger of the two lengths given
            blamed = ("prompt_len", prompt_len) if prompt_len >= new_tokens else ("new_tokens", new_tokens)
            raise InvalidInput(
                *blamed,
                f"prompt_len + new_tokens + k + 1 = {need} exceeds the {model.config.max_seq_len} "
                f"positions of {name}",
            )
    return need


def decoding_jobs(
    pair: ModelPair,
    ks: Sequence[int],
    prompt: list[int],
    new_tokens: int,
    decoding: Decoding,
    *,
    seed: int,
    warmup: int,
) -> list[TimedJob]:
    """The plain decoding and one speculative decoding per k, each from the prefilled caches and
    a fresh ``default_rng(seed)`` per call (so every repetition decodes the same tokens)."""
    t_cache, d_cache = new_caches(pair, len(prompt) + new_tokens + max(ks) + 1)
    prefill_pair(pair, t_cache, d_cache, prompt)

    def plain() -> list[int]:
        rng = np.random.default_rng(seed)
        return decode_plain(pair.target, t_cache, prompt, new_tokens, decoding, rng)

    def speculative(k: int) -> Callable[[], SpeculativeTrace]:
        def run() -> SpeculativeTrace:
            rng = np.random.default_rng(seed)
            return decode_speculative(pair, t_cache, d_cache, prompt, new_tokens, k, decoding, rng)

        return run

    jobs = [TimedJob("plain decoding", plain, warmup_first=warmup)]
    return jobs + [TimedJob(f"speculative k = {k}", speculative(k), warmup_first=warmup) for k in ks]


def cost_step_jobs(steps: Sequence[CostJob], *, reps_per_round: int, warmup: int) -> list[TimedJob]:
    """c_t, c_d and the c_v(k) as jobs of :func:`time_interleaved` (no outputs kept)."""
    return [
        TimedJob(
            name,
            fn,
            reps_per_round=reps_per_round,
            warmup_first=warmup,
            warmup_later=1,
            keep_outputs=False,
            what=what,
        )
        for name, what, fn, _ in steps
    ]


def _bookkeeping_cost(bookkeeping: CostJob, timer: Callable[..., Any], reps: int) -> MeasuredCost:
    """c_m timed on its own (a host operation), before the rounds: an interrupt after a whole
    round then leaves no timing still to do, and the rounds done are kept."""
    name, what, fn, options = bookkeeping
    m = timer(fn, warmup=BOOKKEEPING_WARMUP, reps=reps, **options)
    return MeasuredCost(name, what, m.summary, m.cold_s)


def _measured_costs(steps: Sequence[TimedJob], bookkeeping: MeasuredCost) -> list[MeasuredCost]:
    """The interleaved steps' samples, and c_m."""
    out = [MeasuredCost(job.name, job.what, Summary.from_samples(job.samples_s)) for job in steps]
    return [*out, bookkeeping]


def _nondeterministic(jobs: Sequence[TimedJob]) -> list[str]:
    def tokens(out: Any) -> list[int]:
        return out.tokens if isinstance(out, SpeculativeTrace) else out

    return [j.name for j in jobs if any(tokens(o) != tokens(j.outputs[-1]) for o in j.outputs)]


def run_pair(
    pair: ModelPair,
    *,
    ks: Sequence[int] = (4,),
    new_tokens: int = 64,
    prompt_len: int = 32,
    temperature: float | None = None,
    seed: int = 0,
    device: Any = "cpu",
    warmup: int = 1,
    reps: int = 5,
    cost_reps: int = 20,
    sweep: bool = False,
    progress: Progress | None = None,
    timer: Callable[..., Any] | None = None,
) -> SpecRunResult:
    """Plain and speculative decoding (one per k in ``ks``) of ``new_tokens`` tokens after a
    seeded random prompt of ``prompt_len`` tokens, ``reps`` timed calls each, and c_t, c_d,
    c_v(k) over a cache of ``prompt_len + new_tokens // 2`` positions, about ``cost_reps`` calls
    each, all in ``reps`` interleaved rounds; c_m apart. Then the comparison (module docstring).
    ``temperature`` None decodes greedily; ``timer`` replaces :func:`timing.measure` (tests)."""
    from infer_opt.profilers.model_profile import guard
    from infer_opt.profilers.timing import measure

    if new_tokens < max(ks) + 1:  # the request checked each option; this is their pairing
        raise InvalidInput(
            "new_tokens",
            new_tokens,
            f"must be >= k + 1 = {max(ks) + 1} (so that a round drafts all k tokens)",
        )
    _check_positions(pair, prompt_len, new_tokens, max(ks))
    timer = timer or measure
    prompt = random_tokens(1, prompt_len, pair.vocab_size, seed=seed)[0].tolist()
    cost_context = prompt_len + new_tokens // 2
    with guard("decoding"):
        decodes = decoding_jobs(pair, ks, prompt, new_tokens, Decoding(temperature), seed=seed, warmup=warmup)
        *steps, bookkeeping = cost_jobs(pair, context=cost_context, k_max=max(ks), device=device, seed=seed)
        step_jobs = cost_step_jobs(
            steps, reps_per_round=max(1, round(cost_reps / reps)), warmup=max(warmup, 2)
        )
        jobs = [*decodes, *step_jobs]
        c_m = _bookkeeping_cost(bookkeeping, timer, cost_reps)
        done = time_interleaved(jobs, device=device, rounds=reps, timer=timer, progress=progress)
        costs = _measured_costs(step_jobs, c_m)
    result = _result(
        pair,
        decodes,
        costs,
        ks=ks,
        new_tokens=new_tokens,
        prompt_len=prompt_len,
        temperature=temperature,
        seed=seed,
        device=device,
        warmup=warmup,
        reps=reps,
        cost_context=cost_context,
        sweep=sweep,
    )
    if done == reps:
        return result
    stopped = Notice("spec_run_interrupted", {"rounds": done, "asked": reps})
    return replace(result, reps=done, warnings=(*result.warnings, stopped))


def _result(
    pair: ModelPair,
    decodes: Sequence[TimedJob],
    costs: Sequence[MeasuredCost],
    *,
    ks: Sequence[int],
    new_tokens: int,
    prompt_len: int,
    temperature: float | None,
    seed: int,
    device: Any,
    warmup: int,
    reps: int,
    cost_context: int,
    sweep: bool,
) -> SpecRunResult:
    from infer_opt.profilers import device as devices

    plain_time = Summary.from_samples(decodes[0].samples_s)
    plain_tokens = tuple(decodes[0].outputs[-1])
    medians = cost_medians(costs)
    points = tuple(
        make_point(
            job.outputs[-1],
            Summary.from_samples(job.samples_s),
            plain_time,
            medians,
            new_tokens=new_tokens,
            plain_tokens=plain_tokens if temperature is None else None,
        )
        for job in decodes[1:]
    )
    headline = max(points, key=lambda p: p.measured_speedup) if sweep else points[0]
    return SpecRunResult(
        target=pair.target_name,
        draft=pair.draft_name,
        vocab_size=pair.vocab_size,
        device=str(device),
        device_name=devices.device_name(device),
        dtype=devices.dtype_name(pair.target.lm_head.weight.dtype),
        threads=None if devices.is_cuda(device) else torch.get_num_threads(),
        prompt_len=prompt_len,
        new_tokens=new_tokens,
        temperature=temperature,
        seed=seed,
        warmup=warmup,
        reps=reps,
        cost_context=cost_context,
        plain_time=plain_time,
        plain_tokens_per_s=new_tokens / plain_time.median_s,
        plain_tokens=plain_tokens,
        costs=tuple(costs),
        target_step_s=medians["c_t"],
        draft_step_s=medians["c_d"],
        bookkeeping_s=medians["c_m"],
        points=points,
        sweep=sweep,
        headline_k=headline.k,
        draft_note=pair.draft_note,
        warnings=run_notices(plain_time, points, costs, _nondeterministic(decodes)),
    )


def run(request: SpeculativeRunRequest, *, progress: Progress | None = None) -> SpecRunResult:
    """``infer-opt speculative run``: one draft length (``k``, default 4) or a sweep (``sweep_k``),
    greedy unless ``temperature``; the pair loaded (:func:`load_run_pair`) and :func:`run_pair`."""
    from infer_opt.profilers import device as devices

    if request.k is not None and request.sweep_k is not None:
        raise InvalidInput("--sweep-k", "with --k", "give one draft length (--k) or a sweep (--sweep-k)")
    if request.greedy and request.temperature is not None:
        raise InvalidInput("--temperature", request.temperature, "give --greedy or --temperature, not both")
    device = devices.resolve_device(request.device)
    if request.threads is not None:
        torch.set_num_threads(request.threads)
    pair = load_run_pair(
        request.target, request.draft, device=device, dtype=devices.parse_dtype(request.dtype, device)
    )
    ks = [4 if request.k is None else request.k] if request.sweep_k is None else list(request.sweep_k)
    return run_pair(
        pair, ks=ks, new_tokens=request.new_tokens, prompt_len=request.prompt_len,
        temperature=request.temperature, seed=request.seed, device=device, warmup=request.warmup,
        reps=request.reps, cost_reps=request.cost_reps, sweep=request.sweep_k is not None, progress=progress,
    )  # fmt: skip
