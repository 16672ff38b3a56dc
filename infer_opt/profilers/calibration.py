"""``infer-opt calibrate``: the operator-level calibration of a device, dtype and thread count
(docs/prediction.md).

Every case of the suite (:mod:`infer_opt.profilers.calibration_cases`) is first run once and its
output compared with a float64 reference (norm-wise relative error within the kernel suite's
tolerance, 1e-4 in float32, 2e-2 in 16-bit types); a case that fails is reported and not timed.
Then the cases of a group are timed *the way* ``profile`` *times a model's operators*: each aten
call's own interval under ``torch.profiler`` (:func:`infer_opt.profilers.op_recorder.time_ops`,
minus the profiler's cost per nested event), in chunks that run every case in turn per
repetition, so one profiler session covers hundreds of shapes:

* **hot**: each case twice in a row per repetition, the second call kept — its inputs were just
  touched, as a layer's activations are (a short case whose main operand persists from step to
  step — a weight, a KV cache — four times: its steady state, :func:`_steady`);
* **warm** (cases with a main operand: matmuls, attention over a cache, embeddings): the case,
  a read of twice the L2 (:func:`warm_reuse_bytes`), the case again (kept) — its weights come
  from the last-level cache (a short case: three rounds of case and read first);
* **cold**: a read of twice the last-level cache first, then each case once — its weights come
  from memory, as in a model larger than the cache. Only calls with a main operand are kept.
* **context** (small cases without a main operand: elementwise, norms, copies, views, inputs of
  at most 512 KiB): the case, a read of four warm reads (:func:`context_reuse_bytes`), the case
  again (kept) — as a small op runs after a step's matmuls, its code and the dispatcher's data
  gone from the L2 and the TLB, which costs it two to nine times its hot-loop time on the CPU;
* **far** (the smallest of those, one call reading at most 64 KiB): the case, a flush of the
  last-level cache (:func:`far_reuse_bytes`), a read of the case's inputs by another op, the
  case again (kept) — as a small op runs after a decode step's tens of megabytes of weights:
  its inputs just written by the op before, its code gone from every cache (on a CPU whose
  last-level cache holds the context read, the context state alone barely slows a small op,
  while a read of twice that cache does).

The reads between uses are where the warm and cold states sit on the reuse-distance axis the
predictor interpolates along (``warm_reuse_bytes``, ``cold_reuse_bytes``,
``context_reuse_bytes``, ``far_reuse_bytes`` in the result).
Every call's time lands on its family's grid point (:func:`op_families.signature`), the median
over repetitions; the families are then fitted (:func:`infer_opt.cost_models.op_model.fit_family`).

The **host term** comes from two chains of the same small transformer layers, timed without
instrumentation (:func:`timing.measure`) and per op: called as plain functions and through
``nn.Module`` calls. ``c_op = (wall − Σ ops)/n_ops`` of the plain chain; ``c_mod`` is what the
module chain adds per module call.

Before each group the speed probes (:mod:`infer_opt.profilers.speed_probe`: a square matmul and
a dispatch-bound small one) are timed and kept, so ``validate`` can tell how far the machine's
speed has moved since.

The result is saved after every group (to the cache and to ``--out``), so an interrupted run
keeps what it measured and ``--continue`` skips the finished groups.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from infer_opt.cost_models import op_model
from infer_opt.cost_models.roofline import KernelPoint, fit_roofline, key_problems
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.profilers import calibration_cases, op_recorder, speed_probe
from infer_opt.profilers.op_families import FamilyRecorder, ModuleCounter, Signature

if TYPE_CHECKING:
    from infer_opt.requests import CalibrateRequest
from infer_opt.results import save_result
from infer_opt.results.calibration import (
    OP_TIMING,
    STATES,
    CalibrationResult,
    DeviceRoofline,
    FamilyCalibration,
    GridPoint,
    HostCalibration,
)
from infer_opt.run_key import RunKey
from infer_opt.store import Lookup, Store, Stored

Progress = Callable[[int, int, str], None]

#: profiled repetitions per chunk (after one warm-up repetition)
DEFAULT_REPS = 5
#: a chunk's inputs stay within this many bytes, and it holds at most CHUNK_CASES cases
CHUNK_BYTES = 1024 * 2**20
CHUNK_CASES = 400
#: feature names per family prefix (families not listed have one feature: elements)
FEATURE_NAMES = {
    "gemm": ("M", "N", "K"),
    "bmm": ("batch", "M", "N", "K"),
    "sdpa.causal": ("BH", "T", "d"),
    "sdpa.full": ("BH", "T", "d"),
    "sdpa.causal.tail": ("BH", "T", "d"),
    "sdpa.full.tail": ("BH", "T", "d"),
    "sdpa.decode": ("BH", "Tk", "d"),
    "sdpa.decode.gqa": ("BH", "Tk", "d", "g"),
    "sdpa.masked": ("BH", "Tq", "Tk", "d"),
    "sdpa.cross": ("BH", "Tq", "Tk", "d"),
    "layer_norm": ("rows", "hidden"),
    "rms_norm": ("rows", "hidden"),
    "softmax": ("rows", "columns"),
    "embedding": ("indices", "dim"),
    "view": (),
    "other": (),
}
#: the name ``only`` (and --only) gives the host-term measurement
HOST_GROUP = "host"
HOST_LAYERS = 8
HOST_WIDTH = 64
#: interleaved rounds of the two host chains (:func:`calibrate_host`)
HOST_ROUNDS = 15


def feature_names(family: str, n: int) -> tuple[str, ...]:
    """Names of a family's features (``M, N, K`` for matmuls, ...)."""
    for prefix in (family, family.split(".")[0]):
        if prefix in FEATURE_NAMES:
            return FEATURE_NAMES[prefix]
    if family.endswith(".r"):
        return ("outputs", "reduced")
    return ("elements",)[:n] if n <= 1 else tuple(f"x{i}" for i in range(n))


# ---------------------------------------------------------------------------- one chunk


@dataclass(frozen=True)
class _Sample:
    family: str
    state: str
    features: tuple[int, ...]
    time_s: float
    rel_spread: float
    flops: float
    work_bytes: float


def relative_error(out: Any, ref: torch.Tensor) -> float:
    """``‖out − ref‖ / ‖ref‖`` (0 when both are zero), float64; a shape mismatch is ∞."""
    a = out[0] if isinstance(out, (tuple, list)) else out
    a, b = a.detach().to(torch.float64), ref.detach().to(torch.float64)
    if a.shape != b.shape:
        return math.inf
    denom = float(torch.linalg.vector_norm(b))
    diff = float(torch.linalg.vector_norm(a - b))
    return diff / denom if denom > 0 else (0.0 if diff == 0 else math.inf)


def _tolerance(dtype: torch.dtype) -> float:
    from infer_opt.profilers.kernels import TOLERANCE

    return TOLERANCE.get(str(dtype).removeprefix("torch."), 2e-2)


def _on(inputs: calibration_cases.Inputs, device: Any) -> calibration_cases.Inputs:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def checked_inputs(
    cases: Sequence[calibration_cases.Case], dtype: torch.dtype, seed: int = 0, device: Any = "cpu"
) -> tuple[list[tuple[calibration_cases.Case, calibration_cases.Inputs]], list[str]]:
    """Build each case's inputs and check its output against the reference; returns the cases
    that passed with their inputs, and ``"label: reason"`` for each that did not."""
    passed: list[tuple[calibration_cases.Case, calibration_cases.Inputs]] = []
    skipped: list[str] = []
    tolerance = _tolerance(dtype)
    for i, case in enumerate(cases):
        generator = torch.Generator().manual_seed(seed + i)
        try:
            with torch.no_grad():
                inputs = _on(case.inputs(generator, dtype), device)
                out = case.run(inputs)
                if case.sample is not None:
                    out = case.sample(out[0] if isinstance(out, (tuple, list)) else out)
                error = relative_error(out, case.reference(inputs))
        except (RuntimeError, MemoryError) as exc:
            skipped.append(f"{case.label}: failed ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")
            continue
        if not error <= tolerance:
            skipped.append(
                f"{case.label}: output differs from the float64 reference ({error:.2g} > {tolerance:g})"
            )
            continue
        passed.append((case, inputs))
    return passed, skipped


@dataclass(frozen=True)
class _Part:
    """One piece of a repetition: what it runs, and the aten calls a run of it makes (recorded
    once, not per state: a recording runs the piece for real)."""

    run: Callable[[], object]
    calls: tuple[op_recorder.OpCall, ...]

    @classmethod
    def recorded(cls, fn: Callable[[], object]) -> _Part:
        return cls(fn, tuple(op_recorder.record_ops(fn)))


@dataclass(frozen=True)
class _Recorded:
    """A case ready to time: its inputs, its run as a :class:`_Part`, and its calls' signatures."""

    case: calibration_cases.Case
    inputs: calibration_cases.Inputs
    part: _Part
    signatures: tuple[Signature, ...]


def _record(case: calibration_cases.Case, inputs: calibration_cases.Inputs) -> _Recorded:
    recorder = FamilyRecorder()
    calls = op_recorder.record_ops(lambda: case.run(inputs), recorder=recorder)
    return _Recorded(case, inputs, _Part(lambda: case.run(inputs), tuple(calls)), tuple(recorder.signatures))


#: a warm case's code warmer (:func:`_warmers`) reads at most this much: a few percent of an L2
WARMER_MAX_BYTES = 2**16


@dataclass(frozen=True)
class _Scrubs:
    """What a repetition reads to move data out of the caches: ``l2`` over the L2 (a warm
    case's weights then come from the last-level cache, as a layer's do in a model step;
    None on a GPU), ``llc`` over the last-level cache (cold), ``context`` over several L2s
    and ``far`` over the last-level cache (at most 64 MiB) before a small op (None on a GPU,
    whose kernels do not run the host's code)."""

    l2: _Part | None
    llc: _Part
    context: _Part | None = None
    far: _Part | None = None

    def between(self, state: str) -> _Part | None:
        """The read between a case's two runs in ``state`` (warm, context, far; None otherwise)."""
        return {"warm": self.l2, "context": self.context, "far": self.far}.get(state)

    def measures(self, state: str) -> bool:
        """Whether ``state`` is measured here: the warm, context and far states need their read
        (none on a GPU, whose L2 is its last-level cache and whose kernels run no host code)."""
        return state in ("hot", "cold") or self.between(state) is not None


#: a case whose main operand a model's every step reads again (a weight, a KV cache: the cases
#: calibrated at a reuse distance, warm or cold) is run to its steady state
#: (:func:`_case_parts`) when one call does at most this much work: a
#: second call after a first is then still up to twice its steady time (a decode attention over
#: a 4 MiB cache: data used once is not yet kept in the last-level cache), and two more calls
#: cost little; beyond, calls are long enough to be within a few percent of it
STEADY_MAX_FLOPS = 1e8
STEADY_MAX_BYTES = 32 * 2**20
#: runs before the timed one, at the steady state and below it
STEADY_RUNS, FIRST_RUNS = 3, 1


def _steady(item: _Recorded) -> bool:
    """Whether ``item`` is timed at its steady state: a case whose main operand persists from
    step to step, with little work. Other inputs — a small op's, a prefill attention's keys and
    values — are what the op before wrote, once: such a case stays at its second run."""
    flops = sum(call.flops for call in item.part.calls)
    persists = "warm" in item.case.states or "cold" in item.case.states
    return persists and flops <= STEADY_MAX_FLOPS and item.case.reads <= STEADY_MAX_BYTES


def _case_parts(
    case: _Part, state: str, scrubs: _Scrubs, warmer: _Part | None = None, runs: int = FIRST_RUNS
) -> list[_Part]:
    """One case's part of a repetition (module docstring), its timed run last: hot = ``runs``
    runs, then the timed one; warm = ``runs`` rounds of the case, the L2 scrub and the
    ``warmer`` (a small case of the same kind: the op's code back in the caches, its weight
    not), then the timed run; context = once, the context read, once more; far = once, the
    flush of the last-level cache, the ``warmer`` (a read of the case's inputs by another op),
    once more; cold = once (after
    the flush of the chunk, the case before it of the same kind). Several runs before the timed
    one (:func:`_steady`) measure the state a step's every call sees after the first steps: its
    data and the weights it reads back have been used before, and are kept where such data is."""
    if state == "cold":
        return [case]
    if state == "hot":
        return [case] * (runs + 1)
    scrub = scrubs.between(state)
    rounds = runs if state == "warm" else 1
    between = [p for p in (scrub, warmer) if p is not None]
    return [*[case, *between] * rounds, case]


def _warmers(items: Sequence[_Recorded], limit: int) -> list[_Recorded | None]:
    """Per case, another case of its kind (the first word of its label) that reads at most
    ``limit`` bytes — the one whose label shares the most leading words with it (``linear M=4``:
    a BLAS picks its kernel by the shape, and M decides most), then the smallest — or None. Run
    between the warm state's scrub and its timed call, it brings back the op's code and the
    dispatcher's data — which a step's previous op of the same kind would have left there —
    without touching the timed case's weight: the warm state measures where the weight is, not
    how cold the code is (the context state's concern)."""
    by_kind: dict[str, list[_Recorded]] = {}
    for item in items:
        if item.case.reads <= limit:
            by_kind.setdefault(item.case.label.split()[0], []).append(item)

    def rank(other: calibration_cases.Case, case: calibration_cases.Case) -> tuple[int, int]:
        pairs = zip(other.label.split(), case.label.split(), strict=False)  # labels differ in length
        shared = sum(1 for _ in itertools.takewhile(lambda pair: pair[0] == pair[1], pairs))
        return -shared, other.reads

    out: list[_Recorded | None] = []
    for item in items:
        others = [c for c in by_kind.get(item.case.label.split()[0], []) if c.case is not item.case]
        out.append(min(others, key=lambda c: rank(c.case, item.case)) if others else None)
    return out


def _toucher(inputs: calibration_cases.Inputs) -> Callable[[], object]:
    """A read of a case's input tensors by another op (a sum), which the far state runs after its
    flush: in a step a small op's inputs were just written by the op before, only its own code
    (and the dispatcher's data for it) comes from memory."""
    tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor) and v.numel()]

    def touch() -> object:
        return [t.sum() for t in tensors]

    return touch


def _timed_program(
    items: Sequence[_Recorded], state: str, scrubs: _Scrubs
) -> tuple[Callable[[], None], list[op_recorder.OpCall], list[tuple[int, Signature]]]:
    """The function one repetition runs, its calls (composed from the recorded parts), and
    which calls are kept: every call of each case's timed run (hot, context, far), or its calls
    with a main operand (warm, cold)."""
    if state == "warm":
        warmers = [w.part if w is not None else None for w in _warmers(items, WARMER_MAX_BYTES)]
    elif state == "far":
        warmers = [_Part.recorded(_toucher(item.inputs)) for item in items]
    else:
        warmers = [None] * len(items)
    pieces: list[_Part] = [scrubs.llc] if state == "cold" else []
    calls: list[op_recorder.OpCall] = list(scrubs.llc.calls) if state == "cold" else []
    kept: list[tuple[int, Signature]] = []
    for item, warmer in zip(items, warmers, strict=True):
        runs = STEADY_RUNS if _steady(item) else FIRST_RUNS
        parts = _case_parts(item.part, state, scrubs, warmer, runs)
        pieces.extend(parts)
        for part in parts[:-1]:
            calls.extend(part.calls)
        for call, sig in zip(item.part.calls, item.signatures, strict=True):
            if state in ("hot", "context", "far") or sig.touches.main:
                kept.append((len(calls), sig))
            calls.append(call)
    steps = [piece.run for piece in pieces]

    def program() -> None:
        for step in steps:
            step()

    return program, calls, kept


def _samples(
    timings: op_recorder.OpTimings,
    calls: Sequence[op_recorder.OpCall],
    kept: Sequence[tuple[int, Signature]],
    state: str,
) -> list[_Sample]:
    out = []
    for index, sig in kept:
        values = [rep[index] for rep in timings.per_rep_s if rep[index] is not None and rep[index] > 0]
        if not values:
            continue
        median = statistics.median(values)
        q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [median] * 3
        out.append(
            _Sample(
                sig.family,
                state,
                sig.features,
                median,
                (q[2] - q[0]) / median if median > 0 else 0.0,
                float(calls[index].flops),
                sig.work_bytes,
            )
        )
    return out


def _chunks(
    items: Sequence[tuple[calibration_cases.Case, calibration_cases.Inputs]],
) -> Iterator[list[tuple[calibration_cases.Case, calibration_cases.Inputs]]]:
    chunk: list[tuple[calibration_cases.Case, calibration_cases.Inputs]] = []
    size = 0
    for item in items:
        if chunk and (size + item[0].input_bytes > CHUNK_BYTES or len(chunk) >= CHUNK_CASES):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += item[0].input_bytes
    if chunk:
        yield chunk


def measure_group(
    group: calibration_cases.Group,
    dtype: torch.dtype,
    *,
    device: Any = "cpu",
    reps: int = DEFAULT_REPS,
    overhead_per_event_s: float | None = None,
    progress: Progress | None = None,
) -> tuple[list[_Sample], list[str]]:
    """Check, then time every case of ``group`` (module docstring). Returns the samples and the
    skipped cases."""
    from infer_opt.profilers.device import is_cuda

    if overhead_per_event_s is None:
        overhead_per_event_s = 0.0 if is_cuda(device) else op_recorder.profiler_overhead_per_event_s()
    from infer_opt.profilers.device import flush_buffer_bytes

    cpu = not is_cuda(device)
    scrubs = _Scrubs(
        _Part.recorded(reader(warm_reuse_bytes(), device)) if cpu else None,
        _Part.recorded(reader(flush_buffer_bytes(device), device)),
        _Part.recorded(reader(context_reuse_bytes(), device)) if cpu else None,
        _Part.recorded(reader(far_reuse_bytes(), device)) if cpu else None,
    )
    samples: list[_Sample] = []
    skipped: list[str] = []
    done = 0
    total = len(group.cases)
    for start in range(0, total, CHUNK_CASES):
        batch = group.cases[start : start + CHUNK_CASES]
        passed, failed = checked_inputs(batch, dtype, seed=start, device=device)
        skipped.extend(failed)
        for chunk in _chunks(passed):
            recorded = [_record(case, inputs) for case, inputs in chunk]
            for state in STATES:
                if not scrubs.measures(state):
                    continue
                items = [item for item in recorded if state in item.case.states]
                if not items:
                    continue
                program, calls, kept = _timed_program(items, state, scrubs)
                timings = op_recorder.time_ops(
                    program, calls, device=device, reps=reps, overhead_per_event_s=overhead_per_event_s
                )
                samples.extend(_samples(timings, calls, kept, state))
            done += len(chunk)
            if progress is not None:
                progress(done, total, f"{group.name}: {chunk[-1][0].label}")
        done = min(total, start + len(batch))
    return samples, skipped


# ---------------------------------------------------------------------------- families


def cache_level_bytes(level: int) -> int | None:
    """The size of the CPU's level-``level`` data or unified cache (sysfs), None if unknown."""
    from infer_opt.profilers.device import cpu_caches

    sizes = [size for (lvl, kind), size in cpu_caches().items() if lvl == level and kind != "Instruction"]
    return sizes[0] if sizes else None


def code_cache_bytes() -> int:
    """One core's L1 caches, data and instruction (80 KiB on the 2-core Xeon; 64 KiB when
    unknown): the hot anchor of a small op's dispatch context. Timed in a hot loop an op finds
    its code there; in a step, other ops run between two of its calls and push it out — one
    small layer between (15 ops, 200 KB) makes a mean 1.3× slower, a 1 MiB read by a single op
    does not (docs/prediction.md, "Dispatch context")."""
    from infer_opt.profilers.device import cpu_caches

    return sum(size for (level, _), size in cpu_caches().items() if level == 1) or 2**16


_READ_BUFFERS: dict[tuple[str, int], torch.Tensor] = {}


def warm_reuse_bytes() -> int:
    """What the warm state reads between a case's two runs: twice the L2 (4 MiB when unknown),
    after which the case's inputs are in the last-level cache but not in L2."""
    return 2 * (cache_level_bytes(2) or 2 * 2**20)


def context_reuse_bytes() -> int:
    """What the context state reads before a small op's timed call: four warm reads (16 MiB with
    a 2 MiB L2), about one layer of a small model's decode step. A small op costs more the more a
    step touched since it last ran — its code, the dispatcher's tables and their page-table
    entries leave the caches and the TLB: on the 2-core Xeon an RMS norm's ops cost 2–5× their
    hot time after 4–16 MiB and more again after 64–256 MiB (docs/prediction.md, "Dispatch
    context"; beyond it, the far state: :func:`far_reuse_bytes`)."""
    return 4 * warm_reuse_bytes()


#: the far state's read is the last-level cache's flush, at most this much
FAR_MAX_READ_BYTES = 64 * 2**20


def far_reuse_bytes() -> int:
    """What the far state reads before a small op's timed call: twice the last-level cache (the
    cold state's flush), at most 64 MiB. A decode step of a model of a few hundred megabytes
    streams tens of megabytes of weights between two calls of a small op, and on a CPU whose
    last-level cache keeps the context read the op's code comes back from there
    (docs/prediction.md, "Dispatch context"). The 64 MiB cap is where small ops had taken most
    of their in-step slowdown in the measurements, and a larger read would cost the calibration
    seconds per case."""
    from infer_opt.profilers.device import flush_buffer_bytes

    return min(flush_buffer_bytes("cpu"), FAR_MAX_READ_BYTES)


def reader(nbytes: int, device: Any = "cpu") -> Callable[[], object]:
    """A read of ``nbytes`` (a sum over a buffer that size). A read, not a write: what runs
    between two uses of a weight in a model step is mostly other weights being read, which
    leaves clean lines behind (a write would add write-backs to the timed call)."""
    key = (str(device), nbytes)
    if key not in _READ_BUFFERS:
        _READ_BUFFERS[key] = torch.ones(max(nbytes // 4, 1), device=device)
    buffer = _READ_BUFFERS[key]
    return buffer.sum


def merge_families(
    existing: Sequence[FamilyCalibration], samples: Sequence[_Sample], *, renew: bool = False
) -> list[FamilyCalibration]:
    """Families with ``samples`` added: points with the same features are merged (median time) —
    or, ``renew``, the new ones replace the old at the same features (a group measured again) —
    and each family that got new points is refitted."""
    by_key: dict[str, dict[tuple[int, ...], list[GridPoint]]] = {}
    for family in existing:
        by_key[family.key] = {tuple(int(v) for v in p.features): [p] for p in family.points}
    touched: set[str] = set()
    fresh: set[tuple[str, tuple[int, ...]]] = set()
    for s in samples:
        key = f"{s.family}@{s.state}"
        point = GridPoint(tuple(float(v) for v in s.features), s.time_s, s.rel_spread, s.flops, s.work_bytes)
        grid = by_key.setdefault(key, {})
        if renew and (key, s.features) not in fresh:
            grid.pop(tuple(s.features), None)
            fresh.add((key, s.features))
        grid.setdefault(tuple(s.features), []).append(point)
        touched.add(key)
    old = {f.key: f for f in existing}
    out = []
    for key, grid in sorted(by_key.items()):
        if key not in touched:
            out.append(old[key])
            continue
        family, _, state = key.rpartition("@")
        points = [_median_point(ps) for ps in grid.values()]
        dims = len(points[0].features)
        previous = old[key].skipped if key in old else ()
        out.append(op_model.fit_family(family, state, feature_names(family, dims), points, previous))
    return out


def _median_point(points: Sequence[GridPoint]) -> GridPoint:
    if len(points) == 1:
        return points[0]
    ordered = sorted(points, key=lambda p: p.time_s)
    mid = ordered[len(ordered) // 2]
    return replace(mid, time_s=statistics.median(p.time_s for p in points))


#: the families that define the device roofline (plain matmuls and streaming elementwise)
ROOFLINE_FAMILIES = ("gemm.nt@hot", "add.t@hot", "copy.cc@hot")


def device_roofline(families: Sequence[FamilyCalibration]) -> DeviceRoofline | None:
    """``t0 + max(F/R, Q/b)`` fitted on :data:`ROOFLINE_FAMILIES`' points (None with fewer than
    3 points)."""
    points = [
        KernelPoint(f"{f.family}{i}", f.family, p.flops, p.bytes, p.time_s)
        for f in families
        if f.key in ROOFLINE_FAMILIES
        for i, p in enumerate(f.points)
        if p.flops > 0 or p.bytes > 0
    ]
    if len(points) < 3:
        return None
    fit = fit_roofline(points, bootstrap=0)
    return DeviceRoofline(
        fit.compute_rate_flops, fit.bandwidth_bytes_per_s, fit.launch_overhead_s, fit.median_abs_rel_error
    )


# ---------------------------------------------------------------------------- host term


class _Layer(nn.Module):
    """One small transformer layer built from modules (norms, projections, attention, MLP)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _layer(x, self.norm1, self.qkv, self.out, self.norm2, self.up, self.down)


def _layer(x: torch.Tensor, norm1: Any, qkv: Any, out: Any, norm2: Any, up: Any, down: Any) -> torch.Tensor:
    batch, length, width = x.shape
    q, k, v = qkv(norm1(x)).view(batch, length, 3, 2, width // 2).unbind(2)
    a = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
    )
    x = x + out(a.transpose(1, 2).reshape(batch, length, width))
    return x + down(F.gelu(up(norm2(x)), approximate="tanh"))


def _raw(module: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """The module's computation as a plain function (the same aten calls, no module call)."""
    if isinstance(module, nn.Linear):
        return lambda x: F.linear(x, module.weight, module.bias)
    assert isinstance(module, nn.LayerNorm)
    return lambda x: F.layer_norm(x, module.normalized_shape, module.weight, module.bias, module.eps)


def host_chains(
    dtype: torch.dtype, device: Any = "cpu"
) -> tuple[Callable[[], object], Callable[[], object], nn.Module]:
    """The plain and the module chain of :data:`HOST_LAYERS` layers on one 4-token sequence."""
    torch.manual_seed(0)
    layers = (
        nn.Sequential(*(_Layer(HOST_WIDTH) for _ in range(HOST_LAYERS))).to(device=device, dtype=dtype).eval()
    )
    x = torch.randn(1, 4, HOST_WIDTH).to(device=device, dtype=dtype)
    plain = [
        [_raw(m) for m in (layer.norm1, layer.qkv, layer.out, layer.norm2, layer.up, layer.down)]
        for layer in layers
    ]

    def raw_chain() -> object:
        y = x
        for fns in plain:
            y = _layer(y, *fns)
        return y

    return raw_chain, lambda: layers(x), layers


@dataclass(frozen=True)
class _Chain:
    """A host chain, its recorded calls and how many module calls it makes."""

    fn: Callable[[], object]
    calls: list[op_recorder.OpCall]
    modules: int

    @classmethod
    def of(cls, fn: Callable[[], object], model: nn.Module | None) -> _Chain:
        with ModuleCounter() as counter, torch.no_grad():
            fn()
        return cls(fn, op_recorder.record_ops(fn, model), counter.count)

    def round(self, reps: int, device: Any) -> tuple[float, float]:
        """(wall median, Σ per-op medians) of one round: uninstrumented, then profiled."""
        from infer_opt.profilers.timing import measure

        with torch.no_grad():
            wall = measure(self.fn, device=device, warmup=3, reps=max(20, 4 * reps), time_cold=False)
        timings = op_recorder.time_ops(self.fn, self.calls, device=device, reps=reps)
        return wall.summary.median_s, math.fsum(timings.median_per_call_s())


def calibrate_host(dtype: torch.dtype, *, device: Any = "cpu", reps: int = DEFAULT_REPS) -> HostCalibration:
    """``c_op`` and ``c_mod`` from the plain and the module chain (module docstring), in
    :data:`HOST_ROUNDS` interleaved rounds: each host time is a difference of two timings
    (wall − Σ ops) taken apart, which a machine whose speed drifts between them makes swing
    (c_op 0.5–2.7 µs from one calibration to the next, when each chain was timed once); the
    median over rounds of each round's difference keeps the two timings of a difference close."""
    raw_chain, module_chain, layers = host_chains(dtype, device)
    raw, mod = _Chain.of(raw_chain, None), _Chain.of(module_chain, layers)
    rounds = [(raw.round(reps, device), mod.round(reps, device)) for _ in range(HOST_ROUNDS)]
    per_op = [max(0.0, (r_wall - r_ops) / len(raw.calls)) for (r_wall, r_ops), _ in rounds]
    extra = [
        (m_wall - m_ops) - op * len(mod.calls)
        for op, (_, (m_wall, m_ops)) in zip(per_op, rounds, strict=True)
    ]
    walls = [r[0][0] for r in rounds]
    q = statistics.quantiles(walls, n=4, method="inclusive")
    return HostCalibration(
        per_op_s=statistics.median(per_op),
        per_module_call_s=max(0.0, statistics.median(extra) / mod.modules) if mod.modules else 0.0,
        chain_ops=len(raw.calls),
        chain_module_calls=mod.modules,
        raw_wall_s=statistics.median(walls),
        raw_op_time_s=statistics.median(r[0][1] for r in rounds),
        module_wall_s=statistics.median(r[1][0] for r in rounds),
        module_op_time_s=statistics.median(r[1][1] for r in rounds),
        rel_spread=(q[2] - q[0]) / statistics.median(walls),
    )


# ---------------------------------------------------------------------------- the run


def new_result(device: Any, dtype: torch.dtype, grid: str) -> CalibrationResult:
    """An empty calibration for this device, dtype and thread count."""
    from infer_opt.profilers import device as devices

    cuda = devices.is_cuda(device)
    return CalibrationResult(
        device=str(device),
        device_name=devices.device_name(device),
        device_key=calibration_key(device, dtype),
        dtype=devices.dtype_name(dtype),
        threads=torch.get_num_threads(),
        warm_reuse_bytes=0 if cuda else warm_reuse_bytes(),
        cold_reuse_bytes=devices.flush_buffer_bytes(device),
        context_reuse_bytes=0 if cuda else context_reuse_bytes(),
        context_near_bytes=0 if cuda else code_cache_bytes(),
        far_reuse_bytes=0 if cuda else far_reuse_bytes(),
        torch_version=torch.__version__,
        op_timer=(
            "torch.profiler: CUDA kernel time per op (CUPTI)"
            if devices.is_cuda(device)
            else "torch.profiler: CPU time per op, minus the profiler's cost per nested event"
        ),
        matmul_precision=devices.matmul_precision(device, dtype),
        grid=grid,
    )


def calibrate(
    device: Any,
    dtype: torch.dtype,
    *,
    grid: str = "standard",
    only: Sequence[str] | None = None,
    reps: int = DEFAULT_REPS,
    resume_from: CalibrationResult | None = None,
    update: CalibrationResult | None = None,
    on_group: Callable[[CalibrationResult], None] | None = None,
    progress: Progress | None = None,
) -> CalibrationResult:
    """Run the suite (module docstring); ``on_group`` receives the result after every group (to
    save it). ``resume_from`` skips its finished groups; ``update`` is a calibration whose
    ``only`` groups are measured again, their points replacing its own at the same shapes.
    Ctrl-C returns what finished."""
    from infer_opt.profilers import device as devices

    kind = "cuda" if devices.is_cuda(device) else "cpu"
    if update is not None:
        fresh = new_result(device, dtype, grid)
        again = set(only or [*calibration_cases.GROUPS, HOST_GROUP])
        resume_from = replace(
            update,
            groups_done=tuple(g for g in update.groups_done if g not in again),
            host=None if HOST_GROUP in again else update.host,
            context_reuse_bytes=fresh.context_reuse_bytes,
            context_near_bytes=fresh.context_near_bytes,
            far_reuse_bytes=fresh.far_reuse_bytes,
        )
    result = resume_from if resume_from is not None else new_result(device, dtype, grid)
    start = time.perf_counter() - result.wall_s
    wanted = None if not only else [name for name in only if name != HOST_GROUP]
    todo = (
        []
        if wanted == []
        else [g for g in calibration_cases.groups(grid, kind, wanted) if g.name not in result.groups_done]
    )
    overhead = 0.0 if kind == "cuda" else op_recorder.profiler_overhead_per_event_s()
    try:
        for group in todo:
            probe = speed_probe.probe_s(device)
            dispatch = speed_probe.dispatch_probe_s(device)
            samples, skipped = measure_group(
                group, dtype, device=device, reps=reps, overhead_per_event_s=overhead, progress=progress
            )
            families = merge_families(result.families, samples, renew=update is not None)
            result = replace(
                result,
                probe_s=(*result.probe_s, probe),
                dispatch_probe_s=(*result.dispatch_probe_s, dispatch),
                families=tuple(families),
                roofline=device_roofline(families) or result.roofline,
                groups_done=(*result.groups_done, group.name),
                wall_s=time.perf_counter() - start,
                warnings=(*result.warnings, *_skip_notices(group.name, skipped)),
            )
            if on_group is not None:
                on_group(result)
        if result.host is None and (not only or HOST_GROUP in only):
            if progress is not None:
                progress(0, 1, "host: op and module-call overhead")
            result = replace(
                result,
                host=calibrate_host(dtype, device=device, reps=reps),
                wall_s=time.perf_counter() - start,
            )
    except KeyboardInterrupt:
        return replace(result, complete=False, wall_s=time.perf_counter() - start)
    complete = (
        all(name in result.groups_done for name in calibration_cases.GROUPS) and result.host is not None
    )
    if result.host is not None and HOST_GROUP not in result.groups_done:
        result = replace(result, groups_done=(*result.groups_done, HOST_GROUP))
    kept = tuple(w for w in result.warnings if w.code != "calibration_noisy")
    result = replace(result, complete=complete, wall_s=time.perf_counter() - start, warnings=kept)
    result = replace(result, warnings=(*kept, *op_model.noise_notices(result)))
    if on_group is not None:
        on_group(result)
    return result


def _skip_notices(group: str, skipped: Sequence[str]) -> tuple[Notice, ...]:
    if not skipped:
        return ()
    return (Notice("calibration_cases_skipped", {"count": len(skipped), "first": skipped[0]}, group),)


# ---------------------------------------------------------------------------- the store


def calibration_key(device: Any, dtype: Any) -> str:
    """The cache key of a calibration made now on ``device`` in ``dtype``: the roofline cache's
    (:class:`~infer_opt.run_key.RunKey`: device model, CPU threads, dtype, float32
    matmul precision) with this instrument's timing."""
    from infer_opt.profilers.device import run_key

    return run_key(device, dtype, OP_TIMING).slug()


def _check(
    result: CalibrationResult, key: RunKey | None, timings: Sequence[str] | None
) -> tuple[Notice, ...]:
    """What stops ``result`` from being saved (times that are not finite positive numbers) or,
    with the run's ``key``, used (no families, no device roofline, another device, dtype,
    thread count or matmul precision)."""
    out = [
        Notice("calibration_bad_time", {"family": family.key})
        for family in result.families
        if any(not (math.isfinite(p.time_s) and p.time_s > 0) for p in family.points)
        or not (math.isfinite(family.launch_s) and family.launch_s >= 0)
    ]
    if key is None:
        return tuple(out)
    if not result.families:
        out.append(Notice("calibration_empty", {}))
    elif result.roofline is None:
        out.append(Notice("calibration_no_roofline", {}))
    return (*out, *key_problems(result, key, timings=timings))  # type: ignore[arg-type]


#: the operator calibrations ``predict`` and ``validate`` use, cached beside the roofline fits
OPERATORS: Store[CalibrationResult] = Store("calibration", CalibrationResult, _check)


def cache_path(device: Any, dtype: Any) -> Path:
    """Where the calibration for ``device`` and ``dtype`` (as torch is set now) is cached."""
    from infer_opt.profilers.device import run_key

    return OPERATORS.path(run_key(device, dtype, OP_TIMING))


def _words(notices: Sequence[Notice]) -> str:
    from infer_opt.messages import text

    return "; ".join(text(n) for n in notices)


def save_calibration(result: CalibrationResult, path: str | os.PathLike[str]) -> Path:
    """Write ``result`` to a file of the user's (envelope JSON, atomically), after checking its
    numbers."""
    found = _check(result, None, None)
    if found:
        raise InvalidInput("calibration", result.device_key, "not saved: " + _words(found))
    return save_result(path, result)


def watch_cache(device: Any, dtype: Any) -> Path:
    """Before a calibration measures: its cache folder must be writable (else an
    :class:`InvalidInput` before the work), and its file is watched, so a save that finds it
    written by another run meanwhile keeps that run's file aside and says so."""
    from infer_opt.store import check_writable

    check_writable(OPERATORS.kind)
    path = cache_path(device, dtype)
    OPERATORS.watch(path)
    return path


def cache_calibration(result: CalibrationResult) -> Stored:
    """Save ``result`` to the cache under its own key if its numbers are sound (a partial run is
    kept: ``--continue`` continues it). A cache that fails to take it (a full disk) does not stop
    the run: ``--out`` keeps it, and the notice says so."""
    try:
        return OPERATORS.save(result)
    except OSError as exc:
        path = OPERATORS.path(OPERATORS.key_of(result))
        reason = exc.strerror or type(exc).__name__
        values = {"kind": "calibration", "path": str(path), "reason": reason}
        return Stored(path, False, (Notice("calibration_cache_not_written", values),))


def load_calibration(
    path: str | os.PathLike[str], *, option: str = "calibration", to_use: bool = True
) -> CalibrationResult:
    """A calibration file, checked: a one-line error when it is missing, unreadable, of another
    kind or (``to_use``) holds nothing to predict with. Another device's calibration is
    accepted: that is what ``--calibration`` is for."""
    try:
        result = OPERATORS.read_file(path)
    except InvalidInput as exc:
        raise exc.under(option, str(path)) from None
    found = _check(result, RunKey.of(result), None) if to_use else _check(result, None, None)
    if found:
        raise InvalidInput(option, str(path), "unusable calibration: " + _words(found))
    return result


def load_cached(device: Any, dtype: Any) -> Lookup[CalibrationResult]:
    """The cached calibration for this device, dtype, thread count and matmul precision, with
    what was wrong with the cache (a corrupt file is moved aside, an unusable one ignored)."""
    from infer_opt.profilers.device import run_key

    return OPERATORS.load(run_key(device, dtype, OP_TIMING))


def cached_thread_counts(device: Any, dtype: Any) -> list[int]:
    """The CPU thread counts a calibration is cached for on ``device`` in ``dtype`` (as torch's
    matmul precision is set now); empty on CUDA."""
    import os
    from dataclasses import replace

    from infer_opt.profilers.device import run_key

    key = run_key(device, dtype, OP_TIMING)
    if key.threads is None:
        return []
    counts = range(1, (os.cpu_count() or 1) + 1)
    return [n for n in counts if OPERATORS.path(replace(key, threads=n)).exists()]


def resolve_calibration(
    device: Any, dtype: Any, path: str | os.PathLike[str] | None = None
) -> tuple[CalibrationResult, str, tuple[Notice, ...]]:
    """``(calibration, source, notices)``: the file given, else the one cached for this device,
    dtype and thread count, else a one-line error saying how to make one."""
    if path is not None:
        return load_calibration(path), str(path), ()
    found = load_cached(device, dtype)
    if found.result is None:
        why = f" ({_words(found.notices)})" if found.notices else ""
        raise InvalidInput(
            "calibration",
            calibration_key(device, dtype),
            "no usable calibration saved for this device, dtype and thread count"
            f"{why}: run infer-opt calibrate (same --dtype and --threads) first, or give a calibration file",
        )
    return found.result, str(found.path), found.notices


def run(
    request: CalibrateRequest,
    *,
    saved: Sequence[Path] = (),
    on_group: Callable[[CalibrationResult], None] | None = None,
    progress: Progress | None = None,
    said: Callable[[str], None] = lambda line: None,
    noticed: Callable[[Notice], None] = lambda notice: None,
) -> CalibrationResult:
    """``infer-opt calibrate``: :func:`calibrate` on the request's device, dtype and threads,
    cached after every group (and handed to ``on_group``); ``continue_`` goes on from the first of
    ``saved`` (the ``--out`` files) that exists, else the cached run; ``only`` measures groups
    again in the cached calibration of the same grid."""
    from infer_opt.profilers import device as devices

    groups = _only(list(request.only) if request.only else None)
    dev = devices.resolve_device(request.device)
    if request.threads is not None:
        devices.set_threads(request.threads)
    dtype = devices.parse_dtype(request.dtype, dev)
    previous, notices = _resume_from(saved, dev, dtype, request.shapes) if request.continue_ else (None, ())
    base, not_cached = (
        _to_update(dev, dtype, request.shapes) if groups and not request.continue_ else (None, None)
    )
    stored: list[Any] = []
    if not_cached is None:  # before any measurement: the cache must take what is measured
        watch_cache(dev, dtype)

    def save(result: CalibrationResult) -> None:
        if not_cached is None:
            stored.append(cache_calibration(result))
        if on_group is not None:
            on_group(result)

    result = calibrate(
        dev, dtype, grid=request.shapes, only=groups, reps=request.reps, resume_from=previous, update=base,
        on_group=save, progress=progress,
    )  # fmt: skip
    for notice in (*notices, *dict.fromkeys(n for s in stored for n in s.notices)):
        noticed(notice)
    if stored and stored[-1].saved:
        said(f"saved {stored[-1].path}")
    if not_cached is not None:
        said(f"not cached: {not_cached}")
    return result


GROUP_NAMES = (*calibration_cases.GROUPS, HOST_GROUP)


def _only(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    if any(not v.strip() for item in values for v in item.split(",")):
        shown = ",".join(values)
        raise InvalidInput("only", shown, f"an empty group name; give groups among {', '.join(GROUP_NAMES)}")
    names = [v.strip() for item in values for v in item.split(",") if v.strip()]
    unknown = sorted(set(names) - set(GROUP_NAMES))
    if unknown:
        raise InvalidInput("only", ",".join(unknown), f"unknown group; known: {', '.join(GROUP_NAMES)}")
    return names


def _resume_from(saved: Sequence[Path], device: Any, dtype: Any, grid: str) -> tuple[Any, tuple[Notice, ...]]:
    """The run to continue — the first ``--out`` JSON file that exists, else the cached one —
    and what to say: nothing saved (a new run starts). A saved run of another grid is refused:
    continuing it would mix two grids in one calibration."""
    found = [p for p in saved if p.suffix.lower() == ".json" and p.exists()]
    cached = cache_path(device, dtype)
    path = found[0] if found else cached if cached.exists() else None
    if path is None:
        return None, (Notice("calibration_nothing_to_resume", {"cache": str(cached)}),)
    previous = load_calibration(path, option="continue", to_use=False)
    if previous.grid and previous.grid != grid:
        raise InvalidInput(
            "continue",
            str(path),
            f"the saved run is of the {previous.grid} grid and this one --shapes {grid}: give --shapes "
            f"{previous.grid} to continue it, or drop --continue to start over",
        )
    return previous, ()


def _to_update(device: Any, dtype: Any, grid: str) -> tuple[Any, str | None]:
    """For ``--only`` without ``--continue``: ``(the cached calibration of the same grid, whose
    groups are measured again and replaced, or None; why the run must not be cached, or None)``.
    A run of another grid is not cached over a complete calibration (the cache keeps one per
    device, dtype and thread count)."""
    path = cache_path(device, dtype)
    if not path.exists():
        return None, None
    try:
        cached = load_calibration(path, option="only", to_use=False)
    except InvalidInput:
        return None, None
    if cached.grid == grid:
        return cached, None
    if cached.complete:
        return None, f"{path} keeps its complete {cached.grid} calibration (this run is --shapes {grid})"
    return None, None
