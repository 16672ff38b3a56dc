"""Speculative decoding from measured costs: ``infer-opt speculative measure``.

What is measured (batch 1; target and draft share the vocabulary), each with
:func:`infer_opt.profilers.timing.measure` (median and IQR over the repetitions):

* ``c_t`` — one target decode step: one new token over a KV cache of ``context`` positions.
* ``c_d`` — one draft decode step, the same way.
* ``c_v(k)``, k = 1..k_max — the verification pass: one target forward over ``k + 1`` new
  positions (the token carried over from the previous round and the k drafts) over the same
  cache. The built-in models give several new positions over a cache the bottom-right-aligned
  causal mask (:func:`infer_opt.profilers.models.attention`).
* ``c_m`` — the round's cache bookkeeping: roll both KV caches back over the rejected drafts
  and commit the accepted ones. The built-in cache is preallocated and the verification pass
  (the draft steps, for the draft's cache) already wrote every position in place, so the real
  operation is setting each cache's length (:meth:`KVCache.reset`): no copy, host time only.
  Sampling and the accept/reject arithmetic are left out of c_t, c_d and c_m alike.

Every repetition starts from the same state: the cache length is reset to the context before
each call, so each call overwrites the same slots. c_t, c_d and the c_v(k) are measured in
interleaved rounds, so a change in machine load during the run shows up as spread in all of
them rather than as a bias between them.

From the costs (pure functions below, no torch): the least-squares fit ``c_v(k) ≈ a + b·k``,
the predicted speedup ``S = c_t·E[N] / (k·c_d + c_v(k) + c_m)`` over a grid of α and k through
:mod:`infer_opt.cost_models.speculative`, the best k per α, and per k the break-even α below
which speculation loses: the root of ``E[N](α) = (k·c_d + c_v(k) + c_m)/c_t`` (``E[N]`` rises
monotonically from 1 at α = 0 to k + 1 at α = 1).

``simulate_acceptance`` runs the reference sampler (:mod:`infer_opt.checks.speculative_sampler`) with
the two models' next-token distributions. The built-ins have random weights, so the α it
finds is a plumbing check of the whole path, not an estimate of a trained pair's acceptance.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from infer_opt.cost_models import speculative as calc
from infer_opt.cost_models.speculative_cost_fit import analyze
from infer_opt.errors import InvalidInput
from infer_opt.results.speculative_measure import (
    AcceptanceSimulation,
    MeasuredCost,
    SpecMeasureResult,
)
from infer_opt.stats import Summary, variance_notice

if TYPE_CHECKING:
    from infer_opt.requests import SpeculativeMeasureRequest

#: c_m is a sub-microsecond host operation: batch calls until a sample lasts this long
BOOKKEEPING_SAMPLE_S = 1e-3
Progress = Callable[[int, int, str], None]


# ----------------------------------------------------------------------------- models


@dataclass
class ModelPair:
    target: Any
    draft: Any
    target_name: str
    draft_name: str
    vocab_size: int
    #: e.g. "tiny built with the target's vocabulary (50257; its own is 1024)"
    draft_note: str | None = None


_NEEDS_CACHE = (
    "needs a model with the built-in KV cache: a built-in (tiny, gpt2-small, llama-tiny, llama-small) "
    "or a factory returning infer_opt.profilers.models.DecoderLM"
)


def load_decoder(spec: str, option: str, device: Any, dtype: Any, vocab_size: int | None) -> tuple[Any, str]:
    """A model with the built-in KV cache and its name: a built-in (with ``vocab_size`` when
    given) or a factory returning :class:`~infer_opt.profilers.models.DecoderLM`; errors name
    ``option``."""
    from infer_opt.profilers import models

    if spec.startswith("hf:"):
        raise InvalidInput(option, spec, _NEEDS_CACHE)
    if ":" not in spec:
        key = models.ALIASES.get(spec, spec)
        if key not in models.BUILTIN_CONFIGS:
            raise InvalidInput(
                option,
                spec,
                f"unknown built-in model; known: {', '.join(models.builtin_names())} "
                "(or module:factory, path/to/file.py:factory)",
            )
        return models.build_builtin(key, device=device, dtype=dtype, vocab_size=vocab_size), key
    try:
        loaded = models.load_model(spec, batch_size=1, seq_len=1, device=device, dtype=dtype)
    except InvalidInput as exc:
        raise InvalidInput(option, exc.value, exc.expected) from None
    if not isinstance(loaded.model, models.DecoderLM):
        raise InvalidInput(option, spec, _NEEDS_CACHE)
    return loaded.model, loaded.name


def load_pair(target: str, draft: str, *, device: Any, dtype: Any) -> ModelPair:
    """The target, then the draft. A built-in draft is built with the target's vocabulary
    (speculation needs one shared vocabulary); a factory's draft must already share it."""
    from infer_opt.profilers import models
    from infer_opt.profilers.model_profile import guard

    with guard(f"building the target {target}"):
        target_model, target_name = load_decoder(target, "--target", device, dtype, None)
    vocab = target_model.config.vocab_size
    builtin_draft = ":" not in draft
    with guard(f"building the draft {draft}"):
        draft_model, draft_name = load_decoder(
            draft, "--draft", device, dtype, vocab if builtin_draft else None
        )
    note = None
    if builtin_draft:
        own = models.BUILTIN_CONFIGS[draft_name].vocab_size
        if own != vocab:
            note = f"{draft_name} built with the target's vocabulary of {vocab} tokens; its own has {own}"
    elif draft_model.config.vocab_size != vocab:
        raise InvalidInput(
            "--draft",
            f"{draft} with vocabulary {draft_model.config.vocab_size}",
            f"the draft must share the target's vocabulary ({vocab} tokens)",
        )
    return ModelPair(target_model, draft_model, target_name, draft_name, vocab, note)


def _check_positions(pair: ModelPair, context: int, k_max: int) -> None:
    for model, name in ((pair.target, pair.target_name), (pair.draft, pair.draft_name)):
        limit = model.config.max_seq_len
        if context + k_max + 1 > limit:
            raise InvalidInput(
                "--context",
                context,
                f"context + k_max + 1 = {context + k_max + 1} exceeds the {limit} positions of {name}",
            )


# ----------------------------------------------------------------------------- measuring


def _forward_from(model: Any, cache: Any, start: int, tokens: Any) -> Callable[[], object]:
    """One forward of ``tokens`` over the cache cut back to ``start`` positions: the same
    state at every call (each call overwrites the same slots)."""
    import torch

    def run() -> object:
        with torch.no_grad():
            cache.reset(start)
            return model(tokens, cache)

    return run


#: (name, what was timed, the call, extra options for ``timing.measure``)
CostJob = tuple[str, str, Callable[[], object], dict[str, Any]]


def cost_jobs(pair: ModelPair, *, context: int, k_max: int, device: Any, seed: int = 0) -> list[CostJob]:
    """The calls behind c_t, c_d, c_v(1..k_max) and c_m (module docstring), in that order, over
    caches of their own filled with ``context`` seeded random tokens; c_m's options make
    :func:`timing.measure` batch its sub-microsecond calls."""
    import torch

    from infer_opt.profilers import models
    from infer_opt.profilers.model_profile import guard

    if k_max < 1:
        raise InvalidInput("--k-max", k_max, "must be an integer >= 1")
    _check_positions(pair, context, k_max)
    length = context + k_max + 1
    prompt = models.random_tokens(1, context, pair.vocab_size, device=device, seed=seed)
    new = models.random_tokens(1, k_max + 1, pair.vocab_size, device=device, seed=seed + 100)
    t_cache = pair.target.new_cache(1, length)
    d_cache = pair.draft.new_cache(1, length)
    with guard("filling the KV caches"), torch.no_grad():
        if context:
            pair.target(prompt, t_cache)
            pair.draft(prompt, d_cache)

    one = new[:, :1]
    jobs: list[CostJob] = [
        (
            "c_t",
            f"target decode step (1 token over {context} cached)",
            _forward_from(pair.target, t_cache, context, one),
            {},
        ),
        (
            "c_d",
            f"draft decode step (1 token over {context} cached)",
            _forward_from(pair.draft, d_cache, context, one),
            {},
        ),
    ]
    for k in range(1, k_max + 1):
        jobs.append(
            (
                f"c_v({k})",
                f"target verification: {k + 1} new positions over {context} cached",
                _forward_from(pair.target, t_cache, context, new[:, : k + 1]),
                {},
            )
        )
    accepted = k_max // 2
    keep = context + 1 + accepted

    def bookkeeping() -> None:
        t_cache.reset(keep)
        d_cache.reset(keep)

    jobs.append(
        (
            "c_m",
            f"cache rollback/commit of both models (keep {accepted} of {k_max} drafts; host time)",
            bookkeeping,
            {"device": "cpu", "min_sample_time_s": BOOKKEEPING_SAMPLE_S},
        )
    )
    return jobs


def measure_costs(
    pair: ModelPair,
    *,
    context: int,
    k_max: int,
    device: Any,
    warmup: int = 3,
    reps: int = 20,
    progress: Progress | None = None,
    seed: int = 0,
    rounds: int = 5,
    measure_fn: Callable[..., Any] | None = None,
) -> list[MeasuredCost]:
    """c_t, c_d, c_v(1..k_max) and c_m (module docstring) through ``timing.measure``: the
    model steps in ``rounds`` interleaved rounds of about ``reps/rounds`` repetitions each
    (``warmup`` calls before a step's first round, one before later rounds), c_m on its own."""
    from infer_opt.profilers.model_profile import guard
    from infer_opt.profilers.timing import measure

    timer = measure_fn or measure
    jobs = cost_jobs(pair, context=context, k_max=k_max, device=device, seed=seed)
    # c_t, c_d and c_v(k) are compared with each other: measure them in interleaved rounds so
    # a change in machine load during the run widens their spread instead of biasing one of them
    steps = jobs[:-1]
    n_rounds = max(1, min(rounds, reps))
    sizes = [reps // n_rounds + (1 if r < reps % n_rounds else 0) for r in range(n_rounds)]
    samples: dict[str, list[float]] = {name: [] for name, *_ in steps}
    cold: dict[str, float | None] = {}
    total = n_rounds * len(steps) + 1
    done = 0
    for r, size in enumerate(sizes):
        for name, _, fn, _ in steps:
            if progress:
                progress(done, total, f"measuring {name} (round {r + 1} of {n_rounds})")
            with guard(f"measuring {name}"):
                m = timer(
                    fn,
                    device=device,
                    warmup=warmup if r == 0 else min(warmup, 1),
                    reps=size,
                    time_cold=r == 0,
                )
            samples[name].extend(m.samples_s)
            cold.setdefault(name, m.cold_s)
            done += 1
    out = []
    for name, what, _, _ in steps:
        summary = Summary.from_samples(samples[name])
        warning = variance_notice(summary)
        out.append(MeasuredCost(name, what, summary, cold[name], (warning,) if warning else ()))
    name, what, fn, extra = jobs[-1]
    if progress:
        progress(done, total, f"measuring {name}")
    m = timer(fn, warmup=warmup, reps=reps, **extra)
    out.append(MeasuredCost(name, what, m.summary, m.cold_s, tuple(m.warnings)))
    if progress:
        progress(total, total, "measured")
    return out


# ----------------------------------------------------------------------------- acceptance


class _NextToken:
    """``f(round_prefix) -> p(· | prompt + round_prefix)`` for a model with the built-in cache:
    the prompt but its last token is cached once; each query feeds the last prompt token and
    the round's tokens. A query for a prefix of a known longer sequence (the drafts) runs one
    forward over the whole sequence and keeps the distribution at every position, as a real
    verification pass does."""

    def __init__(self, model: Any, prompt: Any, extra: int) -> None:
        import torch

        self.model = model
        self.prompt = prompt
        self.cache = model.new_cache(1, prompt.shape[1] + extra + 1)
        self.start = prompt.shape[1] - 1
        with torch.no_grad():
            if self.start:
                model(prompt[:, : self.start], self.cache)
        self.memo: dict[tuple[int, ...], np.ndarray] = {}
        self.lookahead: tuple[int, ...] = ()
        self.forwards = 0

    def __call__(self, prefix: tuple[int, ...]) -> np.ndarray:
        if prefix not in self.memo:
            import torch

            seq = self.lookahead if self.lookahead[: len(prefix)] == prefix else prefix
            ids = torch.tensor([[int(self.prompt[0, -1]), *seq]], device=self.prompt.device)
            with torch.no_grad():
                self.cache.reset(self.start)
                logits = self.model(ids, self.cache)[0].double().cpu().numpy()
            self.forwards += 1
            for i in range(len(seq) + 1):
                self.memo.setdefault(seq[:i], calc.softmax(logits[i]))
        return self.memo[prefix]


class _Recording:
    """Wraps the draft's ``f(prefix)`` and remembers the longest prefix it was asked about,
    so the target can verify the round's drafts in one forward."""

    def __init__(self, fn: _NextToken) -> None:
        self.fn = fn
        self.longest: tuple[int, ...] = ()

    def __call__(self, prefix: tuple[int, ...]) -> np.ndarray:
        if len(prefix) >= len(self.longest):
            self.longest = prefix
        return self.fn(prefix)


def simulate_acceptance(
    pair: ModelPair,
    *,
    context: int,
    k: int,
    device: Any,
    prompts: int = 4,
    rounds: int = 32,
    seed: int = 0,
    progress: Progress | None = None,
) -> AcceptanceSimulation:
    """``rounds`` speculative rounds of draft length k (spread over ``prompts`` seeded random
    prompts of ``context`` tokens) with :func:`speculative_sampler.speculative_round` and the models'
    softmax distributions; per-position conditional acceptance from the counts. Also the mean
    of ``Σ min(p, q)`` over the verified positions (the exact per-position acceptance)."""
    from infer_opt.checks import speculative_sampler
    from infer_opt.profilers import models
    from infer_opt.profilers.model_profile import guard

    k = calc.validate_k(k)
    if context < 1:
        raise InvalidInput("--context", context, "the acceptance simulation needs a context of >= 1 token")
    _check_positions(pair, context, k)
    prompts = max(1, min(prompts, rounds))
    rng = np.random.default_rng(seed)
    accepted = np.zeros(k + 1, dtype=np.int64)
    tokens = overlap = 0.0
    compared = 0
    done = 0
    start = time.perf_counter()
    with guard("simulating acceptance"):
        for j in range(prompts):
            prompt = models.random_tokens(1, context, pair.vocab_size, device=device, seed=seed + 1000 + j)
            p_fn = _NextToken(pair.target, prompt, k + 1)
            q_fn = _Recording(_NextToken(pair.draft, prompt, k + 1))
            share = rounds // prompts + (1 if j < rounds % prompts else 0)
            for _ in range(share):
                q_fn.longest = ()
                p_fn.lookahead = ()

                def p_model(
                    prefix: tuple[int, ...], p_fn: _NextToken = p_fn, q_fn: _Recording = q_fn
                ) -> np.ndarray:
                    p_fn.lookahead = q_fn.longest
                    return p_fn(prefix)

                outcome = speculative_sampler.speculative_round(p_model, q_fn, k, rng)
                accepted[outcome.accepted] += 1
                tokens += outcome.emitted
                done += 1
                if progress:
                    progress(done, rounds, "simulating acceptance")
            for prefix, q in q_fn.fn.memo.items():
                p = p_fn.memo.get(prefix)
                if p is not None and len(prefix) < k:
                    overlap += float(np.minimum(p, q).sum())
                    compared += 1
    reached = [int(accepted[i:].sum()) for i in range(1, k + 1)]
    counts = calc.rates_from_counts(done, reached)
    return AcceptanceSimulation(
        k=k,
        prompts=prompts,
        rounds=done,
        seed=seed,
        accepted_per_position=tuple(reached),
        alphas=tuple(p.conditional for p in counts.positions),
        mean_tokens=tokens / done,
        mean_overlap=overlap / compared if compared else math.nan,
        positions_compared=compared,
        elapsed_s=time.perf_counter() - start,
    )


# ----------------------------------------------------------------------------- the command


def _alpha_inputs(request: SpeculativeMeasureRequest) -> tuple[Any, Any, str | None]:
    """The acceptance to predict for: ``alpha``, ``alphas`` or the rates of ``metrics`` (one)."""
    given = [f"--{n}" for n in ("alpha", "alphas", "metrics") if getattr(request, n) is not None]
    if len(given) > 1:
        raise InvalidInput(given[1], "with " + given[0], "give one of --alpha, --alphas or --metrics")
    if request.metrics is None:
        alphas = None if request.alphas is None else list(request.alphas)
        return request.alpha, alphas, None if alphas is None else "--alphas"
    from infer_opt.cost_models.speculative_cost_fit import defined_alphas
    from infer_opt.inputs.speculative import read_metrics

    try:
        rates = calc.rates_from_counts(**read_metrics(request.metrics))
    except InvalidInput as exc:
        where = exc.option if exc.option != "--file" else "--metrics"
        raise InvalidInput(where, exc.value, exc.expected) from None
    alphas = defined_alphas([p.conditional for p in rates.positions])
    return None, alphas, f"--metrics {request.metrics.name}"


def run(request: SpeculativeMeasureRequest, *, progress: Progress | None = None) -> SpecMeasureResult:
    """``infer-opt speculative measure``: load the pair, measure the costs, optionally simulate
    acceptance, and analyze for the request's acceptance."""
    import torch

    from infer_opt.profilers import device as devices

    k_max, context, seed = request.k_max, request.context, request.seed
    if request.k is not None and request.k > k_max:
        raise InvalidInput("--k", request.k, f"must be a whole number in [1, {k_max}] (--k-max)")
    alpha, alphas, alphas_source = _alpha_inputs(request)
    device = devices.resolve_device(request.device)
    dtype = devices.parse_dtype(request.dtype, device)
    pair = load_pair(request.target, request.draft, device=device, dtype=dtype)
    _check_positions(pair, context, k_max)
    measured = measure_costs(
        pair, context=context, k_max=k_max, device=device, warmup=request.warmup, reps=request.reps,
        progress=progress, seed=seed,
    )  # fmt: skip
    simulation = None
    if request.simulate_acceptance:
        simulation = simulate_acceptance(
            pair, context=context, k=k_max, device=device, rounds=request.rounds, seed=seed, progress=progress
        )  # fmt: skip
    return analyze(
        measured,
        target=pair.target_name,
        draft=pair.draft_name,
        vocab_size=pair.vocab_size,
        context=context,
        device=str(device),
        device_name=devices.device_name(device),
        dtype=devices.dtype_name(dtype),
        threads=None if devices.is_cuda(device) else torch.get_num_threads(),
        warmup=request.warmup,
        reps=request.reps,
        alpha=alpha,
        alphas=alphas,
        alphas_source=alphas_source,
        k=request.k,
        simulation=simulation,
        draft_note=pair.draft_note,
    )
