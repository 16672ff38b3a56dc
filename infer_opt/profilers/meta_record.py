"""Record a model step's operator sequence without running it on data (docs/prediction.md).

The model is built on the ``meta`` device (shapes only: a 7B or 70B configuration costs no weight
memory), its parameters, buffers and example inputs are turned into *fake tensors* that claim the
target device (``torch._subclasses.fake_tensor``), and the step — the same callable ``profile``
times, from :func:`infer_opt.profilers.model_profile.build_step`, KV cache included — runs under
``FakeTensorMode`` with :class:`~infer_opt.profilers.op_families.FamilyRecorder` on top. Fake
tensors, unlike plain meta tensors, report the target device, so composite ops pick the kernels
a real run picks (``scaled_dot_product_attention`` takes the CPU flash kernel, not the math path
the meta device would take); the op list matches a real run's call for call.

``transformers`` takes a tracing-safe mask path when it sees a fake tensor (it materialises the
causal mask instead of passing ``is_causal``); while recording, its fake-tensor test is switched
off so the recorded ops are those of a real run, and the boolean checks it then makes on data
("all positions unpadded") are answered by the recorder (see ``op_families``).

A model that cannot be built or run this way (a factory that creates real tensors, data-dependent
Python) is recorded by a real run instead when ``fallback`` allows, with a notice saying so.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from infer_opt.errors import InferOptError, InvalidInput, RunFailure
from infer_opt.notices import Notice
from infer_opt.profilers import models, op_recorder
from infer_opt.profilers.model_profile import build_step
from infer_opt.profilers.op_families import FamilyRecorder, ModuleCounter, Signature
from infer_opt.results.profile import ModelStep

HOW_FAKE = "fake tensors"
HOW_REAL = "real run"


@dataclass(frozen=True)
class StepSpec:
    """The step to record: MODEL, what the step does (``mode``) over which shapes, its dtype, and
    the device the fake tensors claim (its kernels are chosen)."""

    spec: str
    mode: str
    batch: int
    seq_len: int
    context: int
    new_tokens: int
    dtype: torch.dtype
    hf_overrides: Mapping[str, Any] | None = None
    device: torch.device | str = "cpu"
    #: also count each call's host work as a profiler would
    #: (:class:`~infer_opt.profilers.op_recorder.HostCounter`)
    count_host: bool = False


@dataclass(frozen=True)
class RecordedStep(ModelStep):
    """The ops of one step, recorded without data, and what the step is."""

    calls: tuple[op_recorder.OpCall, ...]
    signatures: tuple[Signature, ...]
    module_calls: int
    #: per token of a generation (prompt first): (first op, end op, module calls); one segment
    #: for prefill and decode
    segments: tuple[tuple[int, int, int], ...]
    #: tokens the step processes (prefill B·T, decode B, generate B·N)
    tokens: int | None
    flops_analytic: float | None
    #: "fake tensors" or "real run"
    how: str
    notices: tuple[Notice, ...] = ()
    #: per call ``(Python calls, aten ops)`` of a real run since the previous call (empty: not counted)
    host_counts: tuple[tuple[int, int], ...] = ()


# ---------------------------------------------------------------------------- fake models


def _fake_converter(mode: Any, device: torch.device) -> Any:
    """A function meta tensor -> fake tensor on ``device`` (the same meta tensor always gives the
    same fake tensor, so tied weights stay tied)."""
    memo: dict[int, torch.Tensor] = {}
    converter = mode.fake_tensor_converter

    def fake(t: torch.Tensor) -> torch.Tensor:
        if id(t) not in memo:
            if t.device.type != "meta":
                raise RunFailure(
                    f"the model holds a real tensor on {t.device} (not built on the meta device)"
                )
            memo[id(t)] = converter.from_meta_and_device(mode, t, device)
        return memo[id(t)]

    return fake


def _convert_tree(value: Any, fake: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return fake(value)
    if isinstance(value, tuple):
        return tuple(_convert_tree(v, fake) for v in value)
    if isinstance(value, list):
        return [_convert_tree(v, fake) for v in value]
    if isinstance(value, dict):
        return {k: _convert_tree(v, fake) for k, v in value.items()}
    return value


def to_fake(loaded: models.LoadedModel, mode: Any, device: torch.device) -> models.LoadedModel:
    """``loaded`` (built on the meta device) with fake parameters, buffers and inputs on ``device``,
    swapped in place of the meta tensors (``Module.to`` cannot move fake tensors)."""
    fake = _fake_converter(mode, device)
    params: dict[int, torch.nn.Parameter] = {}
    model = loaded.model
    if isinstance(model, torch.nn.Module):
        for module in model.modules():
            for name, param in list(module._parameters.items()):
                if param is not None:
                    if id(param) not in params:
                        params[id(param)] = torch.nn.Parameter(fake(param), requires_grad=False)
                    module._parameters[name] = params[id(param)]
            for name, buffer in list(module._buffers.items()):
                if buffer is not None:
                    module._buffers[name] = fake(buffer)
    loaded.args = _convert_tree(loaded.args, fake)
    loaded.kwargs = _convert_tree(loaded.kwargs, fake)
    return loaded


def load_meta(
    spec: str,
    *,
    batch: int,
    seq_len: int,
    dtype: torch.dtype,
    hf_overrides: Mapping[str, Any] | None = None,
) -> models.LoadedModel:
    """MODEL built on the meta device: a built-in from its config, a factory called with
    ``device=meta``, an ``hf:`` model from its config — no weights are allocated."""
    meta = torch.device("meta")
    key = models.ALIASES.get(spec, spec)
    if key in models.BUILTIN_CONFIGS and not hf_overrides:
        config = models.BUILTIN_CONFIGS[key]
        if seq_len > config.max_seq_len:
            raise InvalidInput("seq_len", seq_len, f"model {key!r} has {config.max_seq_len} positions")
        with meta:
            model = models.DecoderLM(config).to(dtype).eval()
            ids = torch.zeros(batch, seq_len, dtype=torch.long)
        return models.LoadedModel(
            key,
            "builtin",
            model,
            (ids,),
            config=config,
            tokens=batch * seq_len,
            description=config.description,
            batch=batch,
            seq_len=seq_len,
        )
    with meta:
        return models.load_model(
            spec, batch_size=batch, seq_len=seq_len, device=meta, dtype=dtype, hf_overrides=hf_overrides
        )


@contextlib.contextmanager
def _real_mask_path() -> Iterator[None]:
    """transformers' fake-tensor test off (module docstring); a no-op without transformers."""
    try:
        import transformers.utils.import_utils as hf_utils
    except ImportError:
        yield
        return
    if not hasattr(hf_utils, "is_fake_tensor"):
        yield
        return
    from unittest import mock

    with mock.patch.object(hf_utils, "is_fake_tensor", lambda _tensor: False):
        yield


# ---------------------------------------------------------------------------- recording


def _record(
    step: Any, model: Any, mode: str, count_host: bool = False
) -> tuple[FamilyRecorder, int, list[tuple[int, int, int]]]:
    """Run the step once under the recorder; for generate split the ops by token."""
    recorder = FamilyRecorder()
    marks: list[tuple[int, int]] = []
    with ModuleCounter() as counter:

        def mark() -> None:
            marks.append((len(recorder.calls), counter.count))

        def run() -> object:
            if mode == "generate" and step.marks is not None:
                return step.marks(mark)
            return step.fn()

        op_recorder.record_ops(run, model, recorder=recorder, count_host=count_host)
    if not marks:
        marks = [(0, 0), (len(recorder.calls), counter.count)]
    segments = [(a[0], b[0], b[1] - a[1]) for a, b in itertools.pairwise(marks)]
    if segments and segments[-1][1] < len(recorder.calls):
        last = segments[-1]
        segments[-1] = (last[0], len(recorder.calls), last[2])
    return recorder, counter.count, segments


def _recorded(
    loaded: models.LoadedModel,
    step: Any,
    recorded: tuple[FamilyRecorder, int, list[tuple[int, int, int]]],
    how: str,
    wanted: StepSpec,
) -> RecordedStep:
    from infer_opt.profilers.device import dtype_name

    recorder, module_calls, segments = recorded
    return RecordedStep(
        model=loaded.name,
        model_source=loaded.source,
        description=f"{loaded.description}; {step.description}" if loaded.description else step.description,
        n_params=loaded.n_params(),
        mode=wanted.mode,
        dtype=dtype_name(wanted.dtype),
        batch=loaded.batch,
        seq_len=loaded.seq_len,
        calls=tuple(recorder.calls),
        signatures=tuple(recorder.signatures),
        module_calls=module_calls,
        segments=tuple(segments),
        tokens=step.tokens,
        flops_analytic=step.flops_analytic,
        how=how,
        host_counts=tuple(recorder.host_counts),
    )


def record_fake(step: StepSpec, tp: int = 1) -> RecordedStep:
    """The step's ops recorded on fake tensors (module docstring); with ``tp`` > 1, the ops of
    one rank's compute-only tensor-parallel shard (a built-in's, without its collectives)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    target = torch.device(step.device)
    loaded = load_meta(
        step.spec, batch=step.batch, seq_len=step.seq_len, dtype=step.dtype, hf_overrides=step.hf_overrides
    )
    if tp > 1:
        loaded = shard_meta(loaded, tp)
    fake_mode = FakeTensorMode(allow_non_fake_inputs=False)
    loaded = to_fake(loaded, fake_mode, target)
    with fake_mode, _real_mask_path(), torch.no_grad():
        built = build_step(loaded, step.mode, context=step.context, new_tokens=step.new_tokens, device=target)
        recorded = _record(built, loaded.model, step.mode, step.count_host)
    return _recorded(loaded, built, recorded, HOW_FAKE, step)


def shard_meta(loaded: models.LoadedModel, tp: int) -> models.LoadedModel:
    """Rank 0's compute-only shard of a built-in built on the meta device (the slices stay on
    the meta device: nothing is allocated)."""
    from dataclasses import replace

    from infer_opt.profilers.tensor_parallel import shard

    if loaded.source != "builtin" or not isinstance(loaded.model, models.DecoderLM):
        raise InvalidInput(
            "tp", tp, "--tp shards the built-in decoders (tiny, gpt2-small, llama-tiny, llama-small)"
        )
    sharded = shard(loaded.model, 0, tp, communicate=False)
    return replace(loaded, model=sharded, config=sharded.config)


def record_real(step: StepSpec) -> RecordedStep:
    """The step's ops recorded by running it once on real (random) data."""
    loaded = models.load_model(
        step.spec,
        batch_size=step.batch,
        seq_len=step.seq_len,
        device=step.device,
        dtype=step.dtype,
        hf_overrides=step.hf_overrides,
    )
    built = build_step(
        loaded, step.mode, context=step.context, new_tokens=step.new_tokens, device=step.device
    )
    return _recorded(loaded, built, _record(built, loaded.model, step.mode), HOW_REAL, step)


def record_step(step: StepSpec, *, fallback: bool = True, tp: int = 1) -> RecordedStep:
    """Record on fake tensors; if the model cannot be recorded that way, by a real run when
    ``fallback`` (with a ``recorded_by_real_run`` notice), else a one-line error. ``tp`` > 1:
    one rank's compute-only shard (built-ins, which always record on fake tensors)."""
    from dataclasses import replace

    try:
        recorded = record_fake(step, tp)
    except InferOptError as exc:
        if isinstance(exc, InvalidInput) or tp > 1:
            raise
        reason = str(exc)
        _never_real(step, reason, exc)
        if not fallback:
            raise
    except Exception as exc:  # the model's own code failed on fake tensors
        reason = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        _never_real(step, reason, exc)
        if not fallback:
            raise RunFailure(
                f"{step.spec} cannot be recorded on the meta device / fake tensors ({reason}); "
                "build it from its config without real tensors, or allow a real run"
            ) from exc
    else:
        return recorded
    with rec_guard(step.spec):
        recorded = record_real(step)
    return replace(recorded, notices=(Notice("recorded_by_real_run", {"reason": reason}),))


def _never_real(step: StepSpec, reason: str, exc: BaseException) -> None:
    """An ``hf:`` model is built from its config alone, so it always records on fake tensors:
    when it cannot, its config is wrong (an inconsistent head split, say) and a real run would
    only allocate real weights for it (2 GB for 0.3 B parameters) to fail the same way."""
    if not step.spec.startswith("hf:"):
        return
    if step.hf_overrides:
        given = " ".join(f"{k}={v}" for k, v in step.hf_overrides.items())
        raise InvalidInput("hf_config", given, f"{step.spec} cannot run with this config ({reason})") from exc
    raise RunFailure(f"{step.spec} could not be recorded on fake tensors ({reason})") from exc


@contextlib.contextmanager
def rec_guard(spec: str) -> Iterator[None]:
    """A model failure during the real-run fallback as a one-line :class:`RunFailure`."""
    from infer_opt.profilers.model_profile import guard

    with guard(f"recording {spec} by a real run"):
        yield
