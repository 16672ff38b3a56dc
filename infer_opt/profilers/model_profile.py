"""Profile one model step: where the time goes, per operator, category and module, against the
device's fitted roofline, and what optimizing each category could buy.

The procedure, for a step ``fn`` (a prefill forward, one decode token over a KV cache, or a
whole greedy generation):

1. The very first call of the step is timed apart (cold), then
   :func:`op_recorder.record_ops` records what ran (names, shapes, FLOPs, bytes, modules).
2. The step is timed **without instrumentation** with :func:`timing.measure` (CUDA events on
   a GPU, the monotonic clock on a CPU) after ``warmup`` calls, ``reps`` samples, and
3. :func:`op_recorder.time_ops` times every op under ``torch.profiler`` (kernel time on a
   GPU; op time minus the profiler's own cost on a CPU). Steps 2 and 3 alternate in up to
   four chunks, so a change in machine load during the run hits both figures alike.
4. Ops are grouped (by op and shapes, category, module); each op is placed against the
   roofline fit ``t ≈ t0 + max(F/R, Q/b)`` (bound, efficiency); the categories go through
   :mod:`infer_opt.cost_models.profile_amdahl`.

``coverage = Σ per-op time / step time``; the rest is host, launch and framework time (Python,
module calls, the dispatcher; on a GPU: time the device sat idle between kernels).

Every caller (``profile``, the API, ``validate``'s grid points, each rank of ``profile --tp``)
makes one :class:`~infer_opt.steps.StepSettings`, builds the step with :func:`load` and profiles
it with :func:`profile_model`; the result carries the settings, resolved.
"""

from __future__ import annotations

import math
import os
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from infer_opt.cost_models import profile_amdahl
from infer_opt.cost_models.roofline import classify
from infer_opt.errors import InferOptError, InvalidInput, RunFailure, out_of_memory
from infer_opt.notices import Notice
from infer_opt.profilers import models, op_recorder
from infer_opt.profilers.models import DecoderLM, LoadedModel, random_tokens
from infer_opt.profilers.roofline_sweep import ResolvedFit
from infer_opt.requests import ProfileRequest
from infer_opt.results.profile import (
    CategoryStat,
    GenerationStats,
    ModuleStat,
    OpStat,
    ProfileResult,
    RooflineRef,
    StepTiming,
)
from infer_opt.results.roofline import RooflineFit
from infer_opt.run_key import RunKey
from infer_opt.stats import Summary, variance_notice
from infer_opt.steps import MODES, StepSettings

Progress = Callable[[int, int, str], None]

#: unattributed time above this share of the step is warned about
UNATTRIBUTED_WARNING = 0.15
#: per-op total above the step by more than this is warned about
OVERCOVERAGE_WARNING = 1.10
#: profiled repetitions are capped so that about this many op calls are parsed in all
#: (parsing the trace costs ~10 µs per event)
MAX_PROFILED_CALLS = 30_000
#: a CPU step is warmed up for at least this long as well as ``warmup`` calls (unless that is 0):
#: a freshly built step runs slow for its first ~20 ms — tiny's 0.85 ms decode step took 1.4-1.6 ms
#: for its first 14 calls, then dropped at once — and a count of 3 left most samples there
STEP_WARMUP_S = 0.1
#: after a profiler pass a CPU step is warmed up again for at least this long (one call at least):
#: the profiler's teardown leaves the caches and the allocator cold, and a 1 ms step then runs
#: 1.5-2x slower for its first few calls (tiny decode: 1.5, 1.2, 0.9, 0.9, 0.85 ms, then 0.81)
SETTLE_AFTER_PROFILER_S = 0.02
#: an op taking this share of the step whose efficiency is above FAST_OP_EFFICIENCY (faster than
#: the fitted bound) suggests a stale fit
FAST_OP_SHARE = 0.02
FAST_OP_EFFICIENCY = 1.5
#: an op with no FLOP formula is named when it takes at least this share of the step
ZERO_FLOP_SHARE = 0.01


# ---------------------------------------------------------------------------- errors


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@contextmanager
def guard(what: str, hint: str = "") -> Iterator[None]:
    """Turn a model failure into a one-line :class:`RunFailure` naming the cause."""
    try:
        yield
    except InferOptError:
        raise
    except KeyboardInterrupt:
        raise
    except SystemExit as exc:  # the user's model called sys.exit: a failure, not a silent exit
        raise RunFailure(f"the model called sys.exit({exc.code!r}) while {what}") from None
    except (Exception, MemoryError) as exc:
        size = out_of_memory(exc)
        if size is not None:
            tried = f" (tried to allocate {size})" if size else ""
            raise RunFailure(
                f"out of memory while {what}{hint}{tried}: lower --batch, --seq-len or --context, or use a "
                "smaller --dtype (bfloat16) or model"
            ) from exc
        raise RunFailure(
            f"the model raised {_describe(exc)} while {what}; rerun with --debug for the traceback"
        ) from exc
    except GeneratorExit:
        raise
    except BaseException as exc:  # another BaseException subclass of user code: one line, exit 1
        raise RunFailure(
            f"the model raised {_describe(exc)} while {what}; rerun with --debug for the traceback"
        ) from exc


# ---------------------------------------------------------------------------- steps


@dataclass
class Step:
    """What one mode measures."""

    fn: Callable[[], object]
    tokens: int | None
    flops_analytic: float | None
    description: str
    #: generate only: runs one generation and returns per-token marks (seconds)
    generate: Callable[[], list[float]] | None = None
    prompt_tokens: int = 0
    new_tokens: int = 0
    #: generate only: runs one generation calling ``mark()`` before the prompt and after each
    #: token, and returns the marks (what ``generate`` times; the predictor splits ops by token)
    marks: Callable[[Callable[[], Any]], list[Any]] | None = None


def build_step(
    loaded: LoadedModel,
    mode: str,
    *,
    context: int,
    new_tokens: int,
    device: Any,
) -> Step:
    """The callable each mode times (module docstring). Decode and generate need a built-in;
    their batch is the loaded token batch's, and generate's prompt is that batch."""
    if mode not in MODES:
        raise InvalidInput("mode", mode, f"expected one of {', '.join(MODES)}")
    model = loaded.model
    if mode == "decode" and loaded.source == "hf":
        return _hf_decode_step(loaded, context, device)
    if mode != "prefill" and not isinstance(model, DecoderLM):
        raise InvalidInput(
            "mode",
            mode,
            "decode needs a built-in or an hf: model, generate a built-in (tiny, gpt2-small, llama-tiny, "
            "llama-small); factory models profile --mode prefill",
        )
    if not isinstance(model, DecoderLM):
        return Step(
            _no_grad(loaded.prefill), loaded.tokens, loaded.flops_analytic, "forward on the example inputs"
        )
    if mode == "prefill":
        return _prefill_step(model, loaded.args[0])
    if mode == "decode":
        return _decode_step(model, loaded.args[0].shape[0], context, device)
    return _generate_step(model, loaded.args[0], new_tokens, device)


def _prefill_step(model: DecoderLM, ids: torch.Tensor) -> Step:
    """A forward over the prompt into an empty KV cache."""
    cache = model.new_cache(ids.shape[0], ids.shape[1])

    def prefill() -> object:
        cache.reset(0)
        return model(ids, cache)

    return Step(
        _no_grad(prefill),
        ids.numel(),
        float(model.config.forward_flops(ids.shape[0], ids.shape[1])),
        f"prefill of {ids.shape[1]} tokens into an empty KV cache",
    )


def _decode_step(model: DecoderLM, batch: int, context: int, device: Any) -> Step:
    """One new token per sequence over a KV cache already holding ``context`` tokens."""
    config = model.config
    if context + 1 > config.max_seq_len:
        raise InvalidInput(
            "context",
            context,
            f"must be at most {config.max_seq_len - 1}: model {config.name!r} has "
            f"{config.max_seq_len} positions and decode adds one token",
        )
    ctx = random_tokens(batch, context, config.vocab_size, device=device)
    token = random_tokens(batch, 1, config.vocab_size, device=device, seed=7)
    cache = model.new_cache(batch, context + 1)
    with guard("filling the KV cache"), torch.no_grad():
        if context:
            model(ctx, cache)

    def decode() -> object:
        cache.reset(context)
        return model(token, cache)

    return Step(
        _no_grad(decode),
        batch,
        float(config.forward_flops(batch, 1, context + 1)),
        f"one token over a KV cache of {context} tokens",
    )


def _hf_decode_step(loaded: LoadedModel, context: int, device: Any) -> Step:
    """An ``hf:`` causal LM's decode: one new token per sequence over the KV cache transformers
    keeps (``past_key_values``) after a prefill of ``context`` tokens; each call crops the cache
    back to ``context`` first, so every call is the same step."""
    model, config = loaded.model, loaded.model.config
    ids = loaded.kwargs.get("input_ids")
    batch = loaded.batch or (int(ids.shape[0]) if ids is not None else 1)
    max_pos = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if max_pos is not None and context + 1 > int(max_pos):
        raise InvalidInput(
            "context",
            context,
            f"must be at most {int(max_pos) - 1}: {loaded.name} has {max_pos} positions and decode adds "
            "one token",
        )
    vocab = int(getattr(config, "vocab_size", 1000) or 1000)
    token = random_tokens(batch, 1, vocab, device=device, seed=7)
    cache = None
    if context:
        ctx = random_tokens(batch, context, vocab, device=device)
        with guard("filling the KV cache"), torch.no_grad():
            out = model(input_ids=ctx, use_cache=True)
            cache = getattr(out, "past_key_values", None) or getattr(out, "cache", None)
        if cache is None or not hasattr(cache, "crop"):
            raise InvalidInput("mode", "decode", f"{loaded.name} keeps no KV cache transformers can crop")

    import inspect

    # newer transformers name the cache argument ``cache`` (``past_key_values`` is deprecated)
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def decode() -> object:
        if cache is None:
            return model(input_ids=token, use_cache=True)
        extra = int(cache.get_seq_length()) - context
        if extra > 0:
            cache.crop(-extra)  # a negative length removes that many tokens (every version)
        return model(input_ids=token, use_cache=True, **{name: cache})

    return Step(_no_grad(decode), batch, None, f"one token over a KV cache of {context} tokens")


def _generate_step(model: DecoderLM, prompt: torch.Tensor, new_tokens: int, device: Any) -> Step:
    """Greedy generation of ``new_tokens`` after ``prompt``; ``generate`` marks each token."""
    config = model.config
    batch, seq_len = prompt.shape
    if seq_len + new_tokens > config.max_seq_len:
        raise InvalidInput(
            "new_tokens",
            new_tokens,
            f"prompt + new tokens exceed the {config.max_seq_len} positions of {config.name!r}",
        )
    cache = model.new_cache(batch, seq_len + new_tokens)

    def generate_marks(mark: Callable[[], Any] | None = None) -> list[Any]:
        marks = [mark()] if mark else []
        cache.reset(0)
        token = model(prompt, cache)[:, -1:].argmax(-1)
        if mark:
            marks.append(mark())
        for _ in range(new_tokens - 1):
            token = model(token, cache)[:, -1:].argmax(-1)
            if mark:
                marks.append(mark())
        return marks

    analytic = config.forward_flops(batch, seq_len) + sum(
        config.forward_flops(batch, 1, seq_len + k + 1) for k in range(new_tokens - 1)
    )
    return Step(
        _no_grad(generate_marks),
        batch * new_tokens,
        float(analytic),
        f"greedy generation of {new_tokens} tokens after a {seq_len}-token prompt",
        generate=_timed_generation(generate_marks, new_tokens, device),
        prompt_tokens=seq_len,
        new_tokens=new_tokens,
        marks=generate_marks,
    )


def _timed_generation(
    generate_marks: Callable[..., list[Any]], new_tokens: int, device: Any
) -> Callable[[], list[float]]:
    """One generation's token times in seconds from its start (CUDA events on a GPU)."""
    on_cuda = str(device).startswith("cuda")

    def timed() -> list[float]:
        with torch.no_grad():
            if on_cuda:
                # events record on the current stream of the current device: make it this one
                with torch.cuda.device(device):
                    events = generate_marks(_cuda_marks(new_tokens + 1))
                torch.cuda.synchronize(device)
                return [0.0] + [events[0].elapsed_time(e) * 1e-3 for e in events[1:]]
            marks = generate_marks(time.perf_counter_ns)
            return [(m - marks[0]) * 1e-9 for m in marks]

    return timed


def _cuda_marks(count: int) -> Callable[[], Any]:
    """A mark function recording the next of ``count`` timing events, all created up front
    (creating an event is a host call that must not land between two marks)."""
    events = iter([torch.cuda.Event(enable_timing=True) for _ in range(count)])

    def mark() -> Any:
        event = next(events)
        event.record()
        return event

    return mark


def _no_grad(fn: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        with torch.no_grad():
            return fn()

    return run


# ---------------------------------------------------------------------------- aggregation


_LAYER_INDEX = re.compile(r"(?<=\.)\d+(?=\.|$)|^\d+(?=\.|$)")


def module_key(path: str) -> str:
    """``blocks.3.attn.q_proj`` -> ``blocks.*.attn.q_proj`` (layers folded); ``""`` -> ``(top level)``."""
    return _LAYER_INDEX.sub("*", path) if path else "(top level)"


def _per_call_samples(timings: op_recorder.OpTimings, n_calls: int) -> tuple[list[float], list[list[float]]]:
    """Per-call medians and per-repetition times with unmatched entries filled by the median."""
    medians = timings.median_per_call_s()
    filled = [
        [rep[i] if rep[i] is not None else medians[i] for i in range(n_calls)] for rep in timings.per_rep_s
    ]
    return medians, filled


def _group_samples(indices: Sequence[int], reps: list[list[float]]) -> tuple[float, ...]:
    return tuple(math.fsum(rep[i] for i in indices) for rep in reps)


def aggregate(
    calls: Sequence[op_recorder.OpCall],
    timings: op_recorder.OpTimings,
    fit: RooflineFit | None,
    step_time_s: float,
) -> tuple[list[OpStat], list[CategoryStat], list[ModuleStat], profile_amdahl.ProfileAmdahl]:
    """Group per-call times into ops, categories and modules, and rank the categories.
    Without a ``fit`` the roofline fields are None and each category's bound is its own time
    (the ranking is then by the if-free ceiling)."""
    medians, reps = _per_call_samples(timings, len(calls))
    step = max(step_time_s, math.fsum(medians))
    groups: dict[tuple[str, tuple[tuple[int, ...], ...]], list[int]] = defaultdict(list)
    by_category: dict[str, list[int]] = defaultdict(list)
    by_module: dict[str, list[int]] = defaultdict(list)
    for i, call in enumerate(calls):
        groups[(call.name, call.shapes)].append(i)
        by_category[call.category].append(i)
        by_module[module_key(call.module)].append(i)
    bound_by_category: dict[str, float] = defaultdict(float)
    ops = []
    for idx in groups.values():
        op = _op_stat(calls, idx, medians, reps, fit, step)
        ops.append(op)
        bound_by_category[op.category] += (
            op.time_s if op.predicted_s is None else profile_amdahl.capped_bound(op.time_s, op.predicted_s)
        )
    ops.sort(key=lambda o: (-o.time_s, o.name))
    times = {c: math.fsum(medians[i] for i in idx) for c, idx in by_category.items()}
    amdahl = profile_amdahl.profile_amdahl(
        [profile_amdahl.CategoryTime(c, times[c], min(times[c], bound_by_category[c])) for c in by_category],
        step_time_s,
    )
    categories = [
        _category_stat(opp, calls, by_category[opp.category], reps, fit is not None)
        for opp in amdahl.opportunities
    ]
    modules = [_module_stat(key, calls, idx, medians, step) for key, idx in by_module.items()]
    modules.sort(key=lambda m: (-m.time_s, m.module))
    return ops, categories, modules, amdahl


def _op_stat(
    calls: Sequence[op_recorder.OpCall],
    idx: Sequence[int],
    medians: Sequence[float],
    reps: list[list[float]],
    fit: RooflineFit | None,
    step: float,
) -> OpStat:
    """One operator at one set of input shapes: its calls' time, work and roofline place."""
    first = calls[idx[0]]
    n = len(idx)
    t = math.fsum(medians[i] for i in idx)
    flops = float(sum(calls[i].flops for i in idx))
    nbytes = float(sum(calls[i].bytes for i in idx))
    if first.category == "communication":
        # no roofline bound applies to a collective: it stays at its measured time
        bound, efficiency, predicted = "communication", None, None
    else:
        bound, efficiency, predicted = _classify(fit, flops / n, nbytes / n, t / n)
    return OpStat(
        name=first.name,
        shapes=first.shapes,
        dtype=first.dtype,
        category=first.category,
        calls=n,
        time_s=t,
        time_samples_s=_group_samples(idx, reps),
        share=t / step if step > 0 else 0.0,
        flops=flops,
        bytes=nbytes,
        flops_source=Counter(calls[i].flops_source for i in idx).most_common(1)[0][0],
        module=Counter(module_key(calls[i].module) for i in idx).most_common(1)[0][0],
        intensity=flops / nbytes if nbytes > 0 else None,
        achieved_flops_per_s=flops / t if t > 0 else 0.0,
        achieved_bytes_per_s=nbytes / t if t > 0 else 0.0,
        predicted_s=None if predicted is None else predicted * n,
        bound=bound,
        efficiency=efficiency,
    )


def _category_stat(
    opp: profile_amdahl.Opportunity,
    calls: Sequence[op_recorder.OpCall],
    idx: Sequence[int],
    reps: list[list[float]],
    fitted: bool,
) -> CategoryStat:
    """One category's time, work and Amdahl place (roofline columns only with a fit)."""
    flops = float(sum(calls[i].flops for i in idx))
    nbytes = float(sum(calls[i].bytes for i in idx))
    return CategoryStat(
        category=opp.category,
        time_s=opp.time_s,
        fraction=opp.fraction,
        calls=len(idx),
        flops=flops,
        bytes=nbytes,
        achieved_flops_per_s=flops / opp.time_s if opp.time_s > 0 else 0.0,
        achieved_bytes_per_s=nbytes / opp.time_s if opp.time_s > 0 else 0.0,
        bound_time_s=opp.bound_time_s if fitted else None,
        part_speedup=opp.part_speedup if fitted else None,
        ceiling_speedup=opp.ceiling_speedup,
        roofline_speedup=opp.roofline_speedup if fitted else None,
        time_samples_s=_group_samples(idx, reps),
    )


def _module_stat(
    key: str, calls: Sequence[op_recorder.OpCall], idx: Sequence[int], medians: Sequence[float], step: float
) -> ModuleStat:
    t = math.fsum(medians[i] for i in idx)
    return ModuleStat(
        module=key,
        time_s=t,
        share=t / step if step > 0 else 0.0,
        calls=len(idx),
        flops=float(sum(calls[i].flops for i in idx)),
        bytes=float(sum(calls[i].bytes for i in idx)),
    )


# ---------------------------------------------------------------------------- roofline


def _classify(
    fit: RooflineFit | None, flops: float, nbytes: float, time_s: float
) -> tuple[str | None, float | None, float | None]:
    """:func:`classify` against ``fit``; all None without one."""
    return (None, None, None) if fit is None else classify(fit, flops, nbytes, time_s)


def roofline_ref(fit: RooflineFit, source: str) -> RooflineRef:
    return RooflineRef(
        compute_rate_flops=fit.compute_rate_flops,
        bandwidth_bytes_per_s=fit.bandwidth_bytes_per_s,
        launch_overhead_s=fit.launch_overhead_s,
        median_abs_rel_error=fit.median_abs_rel_error,
        source=source,
        device_name=fit.device_name,
        dtype=fit.dtype,
    )


@dataclass(frozen=True)
class LoadedStep:
    """A model built for its :class:`StepSettings`, on its torch device and dtype; ``settings``
    hold them resolved (``"cpu"``, ``"float32"``, not ``"auto"``)."""

    settings: StepSettings
    loaded: LoadedModel
    device: Any
    dtype: Any


def load(settings: StepSettings, *, device: Any = None, progress: Progress | None = None) -> LoadedStep:
    """Set the CPU threads (``settings.threads``, before any roofline lookup: a CPU fit is per
    thread count), resolve device (or take ``device``, a rank's own) and dtype, and build the
    model at the settings' batch and sequence length; each failure named."""
    from infer_opt.profilers import device as devices

    overrides = models.parse_hf_overrides(list(settings.hf_config))
    dev = devices.resolve_device(settings.device) if device is None else device
    if settings.threads is not None:
        devices.set_threads(settings.threads)
    torch_dtype = devices.parse_dtype(settings.dtype, dev)
    if progress is not None:
        progress(0, 1, f"loading {settings.model}")
    shape = settings.shape
    with guard(f"building model {settings.model}"):
        loaded = models.load_model(
            settings.model, batch_size=shape.batch, seq_len=shape.seq_len, device=dev, dtype=torch_dtype,
            hf_overrides=overrides,
        )  # fmt: skip
    resolved = replace(settings, device=str(dev), dtype=devices.dtype_name(torch_dtype))
    return LoadedStep(resolved, loaded, dev, torch_dtype)


def resolve_fit(
    device: Any, dtype: Any, path: str | Path | None = None, progress: Progress | None = None
) -> ResolvedFit:
    """The roofline fit to use: the file given (``roofline``, refused unless it is valid and
    made for this device, dtype, threads, matmul precision and operator timing), else the one
    cached for this run's key, else a quick calibration now, cached if it passes validation
    (:func:`infer_opt.profilers.roofline_sweep.fit_for_run`: one retry, then no fit and a
    warning saying why). ``ResolvedFit.fit`` is None when no usable fit could be had: the
    profile then goes on without roofline columns."""
    from infer_opt.profilers import roofline_sweep

    op_recorder.quiet_kineto()
    if path is not None:
        return ResolvedFit(roofline_sweep.read_fit_for_run(path, device, dtype), str(path))
    return roofline_sweep.fit_for_run(device, dtype, progress=progress)


# ---------------------------------------------------------------------------- the profile


def _generation_stats(step: Step, warmup: int, reps: int) -> GenerationStats:
    assert step.generate is not None
    runs = [step.generate() for _ in range(1 + warmup + reps)]
    cold, timed = runs[0], runs[1 + warmup :]
    new = step.new_tokens

    def tpot(marks: list[float]) -> float | None:
        return (marks[-1] - marks[1]) / (new - 1) if new > 1 else None

    ttft = [m[1] for m in timed]
    tpots = [v for v in (tpot(m) for m in timed) if v is not None]
    totals = [m[-1] for m in timed]
    return GenerationStats(
        prompt_tokens=step.prompt_tokens,
        new_tokens=new,
        ttft_s=statistics.median(ttft),
        ttft_samples_s=tuple(ttft),
        tpot_s=statistics.median(tpots) if tpots else None,
        tpot_samples_s=tuple(tpots),
        tokens_per_s=new / statistics.median(totals) if statistics.median(totals) > 0 else math.inf,
        cold_ttft_s=cold[1],
        cold_tpot_s=tpot(cold),
    )


def _chunks(reps: int, most: int = 4, least: int = 3, count: int | None = None) -> list[int]:
    """Split ``reps`` into ``count`` chunks, or up to ``most`` chunks of at least ``least`` (the
    step timing and the operator pass alternate chunk by chunk, so a change in load hits both
    alike)."""
    if count is None:
        count = max(1, min(most, reps // least))
    count = max(1, min(count, reps))
    base, extra = divmod(reps, count)
    return [base + (1 if i < extra else 0) for i in range(count)]


def _machine_load() -> tuple[float, int] | None:
    """(1-minute load average, CPU count), where the OS reports it."""
    try:
        return os.getloadavg()[0], os.cpu_count() or 1
    except (AttributeError, OSError):
        return None


def _warnings(
    step: StepTiming,
    coverage: float,
    unattributed: float,
    zero_flop: Sequence[str],
    unmatched: int,
    flops_counted: float,
    flops_analytic: float | None,
    on_cuda: bool,
    load: tuple[float, int] | None,
) -> list[Notice]:
    out: list[Notice] = []
    variance = variance_notice(Summary.from_samples(step.samples_s))
    if variance:
        out.append(variance.about("step time"))
    share = unattributed / step.median_s if step.median_s > 0 else 0.0
    if share > UNATTRIBUTED_WARNING:
        out.append(Notice("step_unattributed", {"share": share, "on_cuda": on_cuda}))
    if coverage > OVERCOVERAGE_WARNING:
        out.append(Notice("ops_exceed_step", {"coverage": coverage}))
    if not on_cuda and load is not None and load[0] > load[1]:
        out.append(Notice("machine_busy", {"load": load[0], "cpus": load[1]}))
    if zero_flop:
        out.append(Notice("ops_without_flops", {"ops": list(zero_flop)}))
    if unmatched:
        out.append(Notice("calls_not_in_trace", {"calls": unmatched}))
    if flops_analytic and abs(flops_counted - flops_analytic) > 0.05 * flops_analytic:
        out.append(Notice("flops_differ_from_analytic", {"difference": flops_counted / flops_analytic - 1}))
    return out


@dataclass
class _Timed:
    """The step's and the operators' timings over every run, and each run's share."""

    samples_s: list[float]
    parts: list[op_recorder.OpTimings]
    step_run_sizes: list[int]
    op_run_sizes: list[int]
    warmup_calls: int = 0
    #: Ctrl-C after this many finished runs (None: every run finished); the rest is dropped
    interrupted_after: int | None = None

    def keep_runs(self, done: int, parts_per_run: int) -> None:
        """Only the first ``done`` runs (an interrupt in the next one)."""
        del self.samples_s[sum(self.step_run_sizes[:done]) :]
        del self.parts[done * parts_per_run :]
        del self.step_run_sizes[done:], self.op_run_sizes[done:]
        self.interrupted_after = done


def _time_runs(
    step: Step,
    calls: Sequence[op_recorder.OpCall],
    *,
    device: Any,
    mode: str,
    warmup: int,
    reps: int,
    runs: int,
    trace_path: str | Path | None,
    report: Callable[[int, str], None],
) -> _Timed:
    """``runs`` passes, each with its own warm-up: the uninstrumented step timing and the
    operator pass alternating in up to four chunks (a change in load hits both alike), each
    timing chunk after a profiler pass warmed up again (:data:`SETTLE_AFTER_PROFILER_S`)."""
    on_cuda = str(device).startswith("cuda")
    overhead = 0.0 if on_cuda else op_recorder.profiler_overhead_per_event_s()
    op_reps = min(reps, max(3, MAX_PROFILED_CALLS // len(calls)))
    chunks = _chunks(reps, count=len(_chunks(op_reps)))
    op_chunks = _chunks(op_reps, count=len(chunks))
    timed = _Timed([], [], [], [])
    try:
        chunked = (chunks, op_chunks)
        _passes(step, calls, timed, device, mode, warmup, runs, chunked, trace_path, overhead, report)
    except KeyboardInterrupt:  # Ctrl-C with --runs: the finished runs are kept, as kernels keeps its cases
        done = len(timed.op_run_sizes)
        if runs == 1 or done == 0:
            raise
        timed.keep_runs(done, len(chunks))
    return timed


def _passes(
    step: Step,
    calls: Sequence[op_recorder.OpCall],
    timed: _Timed,
    device: Any,
    mode: str,
    warmup: int,
    runs: int,
    chunked: tuple[list[int], list[int]],
    trace_path: str | Path | None,
    overhead: float,
    report: Callable[[int, str], None],
) -> None:
    """The runs of :func:`_time_runs`, each appended to ``timed`` when it has finished."""
    from infer_opt.profilers import timing

    on_cuda = str(device).startswith("cuda")
    chunks, op_chunks = chunked
    for run in range(runs):
        prefix = f"run {run + 1}/{runs}: " if runs > 1 else ""
        first_sample, first_part = len(timed.samples_s), len(timed.parts)
        for k, (n, n_ops) in enumerate(zip(chunks, op_chunks, strict=True)):
            unit = 2 + run * len(chunks) + k
            report(unit, f"{prefix}timing the step ({k + 1}/{len(chunks)})")
            with guard(f"running the {mode} step"):
                m = timing.measure(
                    step.fn,
                    device=device,
                    warmup=warmup if k == 0 else 1,
                    warmup_time_s=_warmup_time(k, warmup, on_cuda),
                    reps=n,
                    time_cold=False,
                )
            timed.samples_s.extend(m.samples_s)
            timed.warmup_calls += m.warmup_calls
            report(unit, f"{prefix}profiling operators ({k + 1}/{len(chunks)})")
            with guard(f"profiling the {mode} step"):
                timed.parts.append(
                    op_recorder.time_ops(
                        step.fn,
                        calls,
                        device=device,
                        reps=n_ops,
                        trace_path=trace_path if unit == 2 else None,
                        overhead_per_event_s=overhead,
                    )
                )
        timed.step_run_sizes.append(len(timed.samples_s) - first_sample)
        timed.op_run_sizes.append(sum(len(p.per_rep_s) for p in timed.parts[first_part:]))


def _warmup_time(chunk: int, warmup: int, on_cuda: bool) -> float | None:
    """The least warm-up time of a timing chunk: 0 under torchrun, even on CUDA (every rank must
    call the step — and its collectives — as many times as the others: a warm-up by time would
    let them differ and the collectives hang); None (the timer's own rule) on CUDA or when the
    user asked for no warm-up; :data:`STEP_WARMUP_S` before the first chunk and
    :data:`SETTLE_AFTER_PROFILER_S` before each chunk after a profiler pass."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return 0.0
    if on_cuda or (chunk == 0 and warmup == 0):
        return None
    return STEP_WARMUP_S if chunk == 0 else SETTLE_AFTER_PROFILER_S


def run_medians(samples: Sequence[float], sizes: Sequence[int]) -> tuple[float, ...]:
    """The median of each run's consecutive slice of ``samples`` (``()`` for one run)."""
    if len(sizes) < 2:
        return ()
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return tuple(statistics.median(samples[a : a + n]) for a, n in zip(starts, sizes, strict=True) if n)


def _step_timing(timed: _Timed, cold_s: float | None, timer: str) -> StepTiming:
    summary = Summary.from_samples(timed.samples_s)
    return StepTiming(
        samples_s=tuple(timed.samples_s),
        median_s=summary.median_s,
        q1_s=summary.q1_s,
        q3_s=summary.q3_s,
        min_s=summary.min_s,
        max_s=summary.max_s,
        cold_s=cold_s,
        warmup_calls=timed.warmup_calls,
        timer=timer,
        run_medians_s=run_medians(timed.samples_s, timed.step_run_sizes),
    )


def _fit_warnings(ops: Sequence[OpStat], fit: RooflineFit | None, run_key: str) -> list[Notice]:
    """Ops faster than the fit allows (a stale fit), and a fit made for another device key."""
    out: list[Notice] = []
    beyond = [
        o
        for o in ops
        if o.efficiency is not None
        and o.bound != "launch"
        and o.share >= FAST_OP_SHARE
        and o.efficiency > FAST_OP_EFFICIENCY
    ]
    if beyond:
        worst = max(beyond, key=lambda o: o.efficiency or 0.0)
        values = {"ops": len(beyond), "efficiency": worst.efficiency, "op": worst.name}
        out.append(Notice("ops_beat_fit", values))
    fit_key = fit.device_key if fit is not None else ""
    if fit_key and fit_key != run_key:
        out.append(Notice("fit_for_other_device", {"fit": fit_key, "run": run_key}))
    return out


def run(request: ProfileRequest, *, progress: Progress | None = None) -> ProfileResult:
    """``infer-opt profile`` on one rank: the request's step loaded, its fit resolved (none for
    ``roofline=False``), profiled."""
    step = load(request.settings(), progress=progress)
    resolved = ResolvedFit(None, "not used")
    if request.roofline is not False:
        resolved = resolve_fit(step.device, step.dtype, request.roofline, progress=progress)
    return profile_model(step, resolved, trace_path=request.trace, progress=progress)


def profile_model(
    built: LoadedStep,
    fit: ResolvedFit,
    *,
    trace_path: str | Path | None = None,
    progress: Progress | None = None,
) -> ProfileResult:
    """Profile one step of ``built`` (module docstring), as its settings say: ``runs``
    independent passes over the step, each with its own warm-up, pooled (each op, category and
    the step keep their per-run medians for ``compare``). ``fit.fit`` None: no roofline columns
    (``fit.warnings`` say why)."""
    from infer_opt.profilers import timing
    from infer_opt.profilers.device import is_cuda, run_key

    loaded, device, dtype, settings = built.loaded, built.device, built.dtype, built.settings
    mode, context, new_tokens = settings.mode, settings.shape.context, settings.shape.new_tokens
    warmup, reps, runs = settings.warmup, settings.reps, settings.runs
    if runs < 1:
        raise InvalidInput("runs", runs, "must be at least 1")
    load_at_start = _machine_load()
    total_units = 2 + runs * len(_chunks(reps)) + (1 if mode == "generate" else 0)

    def report(done: int, label: str) -> None:
        if progress is not None:
            progress(done, total_units, label)

    report(0, "building the step")
    step = build_step(loaded, mode, context=context, new_tokens=new_tokens, device=device)
    report(1, "recording operators")
    with guard(f"running the {mode} step"):
        # the very first call of the step, timed apart (cold) before anything else runs it
        cold = timing.measure(step.fn, device=device, warmup=0, reps=1, time_cold=True)
    with guard(f"recording the {mode} step's operators"):
        calls = op_recorder.record_ops(step.fn, loaded.model)
    if not calls:
        raise RunFailure("the step ran no aten operators: nothing to profile (is the model a torch model?)")
    probes = [_speed_probe(device)]
    timed = _time_runs(
        step, calls, device=device, mode=mode, warmup=warmup, reps=reps, runs=runs,
        trace_path=trace_path, report=report,
    )  # fmt: skip
    probes.append(_speed_probe(device))
    step_timing = _step_timing(timed, cold.cold_s, cold.mode)
    generation = None
    if step.generate is not None:
        report(total_units - 1, "timing time-to-first-token and time per token")
        with guard("generating"):
            generation = _generation_stats(step, warmup, max(3, min(reps, 10)))
    timings = op_recorder.merge_timings(timed.parts)
    ops, categories, modules, amdahl = aggregate(calls, timings, fit.fit, step_timing.median_s)
    ops = [replace(o, run_medians_s=run_medians(o.time_samples_s, timed.op_run_sizes)) for o in ops]
    categories = [
        replace(c, run_medians_s=run_medians(c.time_samples_s, timed.op_run_sizes)) for c in categories
    ]
    report(total_units, "done")
    key = run_key(device, dtype)
    att = _attribution(
        step, step_timing, timings, calls, ops, fit.fit, fit_warnings=fit.warnings,
        on_cuda=is_cuda(device), load=load_at_start, run_key=key,
    )  # fmt: skip
    if timed.interrupted_after is not None:
        stopped = Notice("runs_interrupted", {"done": timed.interrupted_after, "asked": runs})
        att = replace(att, warnings=(*att.warnings, stopped))
        settings = replace(settings, runs=timed.interrupted_after)
    result = _assemble(
        loaded, step, replace(settings, threads=key.threads), step_timing=step_timing, timings=timings,
        parts=(ops, categories, modules, amdahl), att=att, fit=fit, generation=generation, run_key=key,
        trace_path=trace_path,
    )  # fmt: skip
    return replace(result, speed_probe_s=tuple(p for p in probes if p is not None))


def _speed_probe(device: Any) -> float | None:
    """The machine's speed now (:func:`infer_opt.profilers.speed_probe.probe_s`); None when the
    probe itself fails (it is a label for ``compare``, never worth losing a profile over)."""
    from infer_opt.profilers import speed_probe

    try:
        return speed_probe.probe_s(device)
    except (RuntimeError, ValueError):
        return None


#: how per-op times are taken, on CUDA (True) and on the CPU
OP_TIMERS = {
    True: "torch.profiler: CUDA kernel time per op (CUPTI)",
    False: "torch.profiler: CPU time per op, minus the profiler's cost per nested event",
}


@dataclass(frozen=True)
class _Attribution:
    """How much of the step the ops cover, the FLOPs counted, and the profile's warnings."""

    op_time_s: float
    unattributed_s: float
    coverage: float
    flops_counted: float
    zero_flop_ops: tuple[str, ...]
    warnings: tuple[Notice, ...]


def _attribution(
    step: Step,
    step_timing: StepTiming,
    timings: op_recorder.OpTimings,
    calls: Sequence[op_recorder.OpCall],
    ops: Sequence[OpStat],
    fit: RooflineFit | None,
    *,
    fit_warnings: Sequence[Notice],
    on_cuda: bool,
    load: tuple[float, int] | None,
    run_key: RunKey,
) -> _Attribution:
    """``coverage = Σ per-op time / step time``, the ops with no FLOP formula, the warnings
    (the fit's own story first)."""
    median = step_timing.median_s
    op_time = math.fsum(o.time_s for o in ops)
    zero_flop = sorted(
        {
            o.name
            for o in ops
            if o.flops_source == "none"
            and o.category not in ("memory", "communication")
            and o.share >= ZERO_FLOP_SHARE
        }
    )
    flops_counted = float(sum(c.flops for c in calls))
    coverage = op_time / median if median > 0 else math.inf
    warnings = list(fit_warnings)
    warnings += _warnings(
        step_timing, coverage, median - op_time, zero_flop, len(timings.unmatched), flops_counted,
        step.flops_analytic, on_cuda, load,
    )  # fmt: skip
    warnings += _fit_warnings(ops, fit, run_key.device_slug())
    return _Attribution(op_time, median - op_time, coverage, flops_counted, tuple(zero_flop), tuple(warnings))


def _assemble(
    loaded: LoadedModel,
    step: Step,
    settings: StepSettings,
    *,
    step_timing: StepTiming,
    timings: op_recorder.OpTimings,
    parts: tuple[list[OpStat], list[CategoryStat], list[ModuleStat], profile_amdahl.ProfileAmdahl],
    att: _Attribution,
    fit: ResolvedFit,
    generation: GenerationStats | None,
    run_key: RunKey,
    trace_path: str | Path | None,
) -> ProfileResult:
    """The profile from its measured parts and their :func:`_attribution`; ``settings``
    resolved (device, dtype, the threads it ran at)."""
    ops, categories, modules, amdahl = parts
    mode, shape, has_fit = settings.mode, settings.shape, fit.fit is not None
    median = step_timing.median_s
    profiled = statistics.median(timings.rep_total_s)
    return ProfileResult(
        model=loaded.name,
        model_source=loaded.source,
        description=f"{loaded.description}; {step.description}" if loaded.description else step.description,
        n_params=loaded.n_params(),
        device=settings.device,
        device_name=run_key.device_name,
        dtype=settings.dtype,
        mode=mode,
        batch=loaded.batch,
        seq_len=loaded.seq_len,
        inputs=loaded.inputs(),
        context=shape.context if mode == "decode" else None,
        new_tokens=shape.new_tokens if mode == "generate" else None,
        tokens_per_step=step.tokens,
        step=step_timing,
        tokens_per_s=step.tokens / median if step.tokens and median > 0 else None,
        coverage=att.coverage,
        op_time_s=att.op_time_s,
        unattributed_s=att.unattributed_s,
        unattributed_fraction=max(0.0, att.unattributed_s) / median if median > 0 else 0.0,
        op_timer=OP_TIMERS[run_key.device_kind == "cuda"],
        profiler_overhead_per_event_s=timings.overhead_per_event_s,
        profiler_overhead_subtracted_s=timings.overhead_subtracted_s,
        profiled_step_s=profiled,
        profiled_step_ratio=profiled / median if median > 0 else 0.0,
        ops=tuple(ops),
        categories=tuple(categories),
        modules=tuple(modules),
        roofline=roofline_ref(fit.fit, fit.source) if fit.fit is not None else None,
        all_at_bound_speedup=amdahl.all_at_bound_speedup if has_fit else None,
        all_free_ceiling=amdahl.all_free_ceiling,
        attributed_fraction=1.0 - amdahl.unattributed_fraction,
        flops_counted=att.flops_counted,
        achieved_flops_per_s=att.flops_counted / median if median > 0 else 0.0,
        flops_analytic=step.flops_analytic,
        flops_vs_analytic=att.flops_counted / step.flops_analytic - 1 if step.flops_analytic else None,
        zero_flop_ops=att.zero_flop_ops,
        unmatched_calls=len(timings.unmatched),
        reps=settings.reps,
        warmup=settings.warmup,
        warnings=att.warnings,
        generation=generation,
        trace_path=str(trace_path) if trace_path is not None else None,
        runs=settings.runs,
        threads=run_key.threads,
        matmul_precision=run_key.matmul_precision,
        settings=settings,
    )
