"""Per-operator record of one model step: what ran (aten op, shapes, module, FLOPs, bytes) and
how long each op took.

Two passes over the same step, because no single instrument gives both honestly:

1. **What ran** — :func:`record_ops`: a ``TorchDispatchMode`` sees every aten call that reaches
   a kernel, in program order, with its real arguments; FLOPs and bytes come from
   :mod:`infer_opt.profilers.flops`, the ``nn.Module`` path from forward pre/post hooks. The
   step runs under ``torch.no_grad()`` (not ``inference_mode``, under which composite ops such
   as ``linear`` would reach the mode undecomposed and hide the kernels that actually run).
   Nothing is timed here: a Python callback per op would add microseconds to every op and
   let the CPU's worker threads fall asleep between ops.
2. **How long** — :func:`time_ops`: ``torch.profiler`` over R repetitions of the step, each
   wrapped in a ``record_function`` marker. Each recorded call is matched, in order, to the
   profiler event with the same name and tensor shapes (an event inside an already matched
   one is the op's own internals; an unmatched event around matched ones — ``aten::linear``
   around ``aten::addmm`` — is a composite wrapper whose own time is framework overhead).

   The two passes do not always run the very same kernels: with a dispatch mode active, ATen
   treats every tensor as a subclass, and composite ops take their subclass-safe path — a
   ``reshape`` of a non-contiguous tensor that needs no copy reaches the mode as ``aten::view``
   but runs as ``aten::_reshape_alias`` without it (``transformers`` models do this in every
   attention layer). Such known pairs are matched as the same op (:data:`TRACE_EQUIVALENTS`).
   Any other call missing from the trace is skipped, not waited for: when the search for a call
   meets the event of one of the next :data:`MATCH_LOOKAHEAD` calls first, the call can only be
   inside that event (a composite overload with the same name, e.g. ``where`` with a scalar
   around ``scalar_tensor`` and ``where``); if it is not, it did not run there, stays unmatched
   (and is reported), and matching goes on with the next call. A call is only ever given the
   time of an event with its own name and shapes.

   * On a GPU the op's time is the device time of the kernels it (and its internals)
     launched, as CUPTI measured them — the kernel time, not the host's launch time.
   * On the CPU it is the op's wall time on the calling thread (it includes the work of the
     intra-op worker threads it waits for). The profiler's own cost for each event nested in
     an op (typically 0.3-1 µs) lies inside the op's interval; it is estimated once per run
     (:func:`profiler_overhead_per_event_s`) and subtracted per nested event, so
     instrumentation is not passed off as op time.

   The profiler records shapes (the match needs them) but not the values of list arguments
   (sizes, strides: part of what torch calls "concrete inputs", on by default with shapes):
   recording them costs page faults inside the ops that write fresh outputs and slows the
   very ops timed (:func:`lean_profiler_records`; measured in docs/notebook/journal.md, "The
   profiler without list-argument values").

With ``count_host``, :func:`record_ops` also counts what a real run's host does before each call
as a profiler recording Python stacks would (:class:`HostCounter`: ``predict``'s host cost on a GPU).

The uninstrumented step time is measured separately (:mod:`infer_opt.profilers.timing`); the
per-op total divided by it is the *coverage*, the rest is host / launch / framework time.
"""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from infer_opt.errors import RunFailure
from infer_opt.profilers import flops as fl

#: torch.distributed's ops as the dispatcher names them (c10d's in-place collectives and the
#: functional collectives with their wait): time in them is communication not hidden behind compute
COMMUNICATION_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::")

_MATMUL = frozenset(
    {
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::matmul",
        "aten::linear",
        "aten::_scaled_mm",
        "aten::addmv",
        "aten::mv",
        "aten::dot",
        "aten::convolution",
        "aten::_convolution",
        "aten::cudnn_convolution",
        "aten::mkldnn_convolution",
        "aten::_slow_conv2d_forward",
        "aten::_int_mm",
        "aten::_weight_int8pack_mm",
        "aten::_weight_int4pack_mm",
    }
)
_ATTENTION_RE = re.compile(r"scaled_dot_product|flash_attention|efficient_attention|flex_attention")
_NORMALIZATION = frozenset(
    {
        "aten::native_layer_norm",
        "aten::layer_norm",
        "aten::rms_norm",
        "aten::_fused_rms_norm",
        "aten::native_batch_norm",
        "aten::_native_batch_norm_legit_no_training",
        "aten::native_group_norm",
        "aten::group_norm",
    }
)
_ELEMENTWISE_EXTRA = frozenset(
    {
        "aten::_softmax",
        "aten::softmax",
        "aten::_log_softmax",
        "aten::where",
        "aten::masked_fill",
        "aten::clamp",
    }
)
_MEMORY = frozenset(
    {
        "aten::copy_",
        "aten::clone",
        "aten::contiguous",
        "aten::_to_copy",
        "aten::cat",
        "aten::stack",
        "aten::index_select",
        "aten::embedding",
        "aten::index",
        "aten::index_put_",
        "aten::index_copy_",
        "aten::gather",
        "aten::scatter",
        "aten::scatter_",
        "aten::slice_scatter",
        "aten::repeat",
        "aten::repeat_interleave",
        "aten::fill_",
        "aten::zero_",
        "aten::zeros",
        "aten::ones",
        "aten::full",
        "aten::zeros_like",
        "aten::ones_like",
        "aten::full_like",
        "aten::constant_pad_nd",
        "aten::roll",
        "aten::flip",
        "aten::tril",
        "aten::triu",
    }
)
_ATTENTION_CORE = frozenset(
    {"aten::bmm", "aten::baddbmm", "aten::matmul", "aten::_softmax", "aten::softmax", "aten::masked_fill"}
)


def categorize(name: str, func: Any = None, module_type: str = "") -> str:
    """An op's category from its name, refined by the innermost module: pointwise ops inside a
    ``*Norm`` module are normalization; a batched matmul or softmax whose innermost module is an
    ``*Attention`` module is the attention core (eager attention in e.g. transformers)."""
    module_type_l = module_type.lower()
    if name.startswith(COMMUNICATION_PREFIXES):
        return "communication"
    if _ATTENTION_RE.search(name):
        return "attention"
    if name in _ATTENTION_CORE and "attention" in module_type_l:
        return "attention"
    if name in _MATMUL:
        return "matmul"
    if name in _NORMALIZATION:
        return "normalization"
    if name in fl.ALIAS_OPS or name in fl.EMPTY_OPS or name in _MEMORY:
        return "memory"
    tags = getattr(func, "tags", ()) if func is not None else ()
    if name in _ELEMENTWISE_EXTRA or any(tag in tags for tag in fl.ELEMENTWISE_TAGS):
        return "normalization" if "norm" in module_type_l else "elementwise"
    if func is not None and fl.is_alias_op(func):
        return "memory"
    return "other"


@dataclass(frozen=True)
class OpCall:
    """One aten call of the step, in program order."""

    index: int
    name: str
    #: shapes of the tensor arguments (tensor lists flattened)
    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    flops: int
    #: "infer-opt", "torch", "nominal" or "none" (see flops.py)
    flops_source: str
    bytes: int
    #: dotted nn.Module path of the innermost module running it ("" = outside any module)
    module: str
    module_type: str
    category: str
    #: shapes the profiler reports for this call: non-scalar tensor arguments in schema order
    match_shapes: tuple[tuple[int, ...], ...] = field(default=(), repr=False)


def _match_shapes(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[int, ...], ...]:
    out = []
    for i, arg in enumerate(func._schema.arguments):
        value = args[i] if i < len(args) else kwargs.get(arg.name)
        if isinstance(value, torch.Tensor) and value.ndim > 0:
            out.append(tuple(int(s) for s in value.shape))
    return tuple(out)


class OpRecorder(TorchDispatchMode):
    """Records every aten call (name, shapes, FLOPs, bytes, module) without timing it."""

    def __init__(self, module_stack: list[tuple[str, str]] | None = None) -> None:
        super().__init__()
        self.calls: list[OpCall] = []
        #: per call ``(Python calls, aten ops)`` when recorded with ``count_host`` (:class:`HostCounter`)
        self.host_counts: list[tuple[int, int]] = []
        self.module_stack = module_stack if module_stack is not None else []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = fl.op_name(func)
        module, module_type = self.module_stack[-1] if self.module_stack else ("", "")
        flops, source = fl.op_flops(func, args, kwargs, out)
        self.calls.append(
            OpCall(
                index=len(self.calls),
                name=name,
                shapes=fl.shapes_of(args),
                dtype=fl.dtype_of(args, out),
                flops=flops,
                flops_source=source,
                bytes=fl.op_bytes(func, args, kwargs, out),
                module=module,
                module_type=module_type,
                category=categorize(name, func, module_type),
                match_shapes=_match_shapes(func, args, kwargs),
            )
        )
        return out


def _module_hooks(model: Any, stack: list[tuple[str, str]]) -> list[Any]:
    if not isinstance(model, torch.nn.Module):
        return []
    handles = []
    for name, module in model.named_modules():
        entry = (name, type(module).__name__)

        def pre(_m: Any, _inputs: Any, entry: tuple[str, str] = entry) -> None:
            stack.append(entry)

        def post(_m: Any, _inputs: Any, _out: Any) -> None:
            if stack:
                stack.pop()

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))
    return handles


def record_ops(
    fn: Callable[[], object],
    model: Any = None,
    *,
    recorder: OpRecorder | None = None,
    count_host: bool = False,
) -> list[OpCall]:
    """Run ``fn`` once under :class:`OpRecorder` (and ``no_grad``) and return its calls.
    ``recorder`` is a fresh recorder to use instead (a subclass that keeps more per call);
    ``count_host``: also set ``recorder.host_counts`` (:class:`HostCounter`)."""
    stack: list[tuple[str, str]] = []
    handles = _module_hooks(model, stack)
    recorder = recorder if recorder is not None else OpRecorder()
    recorder.module_stack = stack
    try:
        with torch.no_grad(), recorder:
            if count_host:
                recorder.host_counts = HostCounter(recorder).run(fn)
            else:
                fn()
    finally:
        for handle in handles:
            handle.remove()
    return recorder.calls


#: marks a recorded call's own dispatch in the profiler: what runs inside is the fake tensors' kernel
_MARK = "infer_opt::recorded_call"
#: Python files that are not the model's: the recorder's, fake tensors', dispatch and compile machinery's
_NOT_MODEL = (
    "infer_opt/", "torch/_subclasses", "torch/_ops.py", "torch/utils/", "torch/_dynamo", "torch/_compile",
    "torch/_prims", "torch/fx/", "torch/_library", "torch/_logging", "logging/", "torch/_decomp",
    "torch/_refs", "torch/_meta_registrations", "torch/_guards", "torch/_higher_order", "torch/_stats",
    "torch/profiler", "torch/autograd/profiler", "torch/autograd/grad_mode.py", "torch/compiler",
    "contextlib.py", "weakref.py", "/weak.py", "threading.py",
)  # fmt: skip
_MODULE_PY = os.path.join("torch", "nn", "modules", "module.py")
#: what the profiler's Python tracer records for one ``nn.Module`` call without hooks: ``nn.Module: X``,
#: ``_call_impl`` and ``torch._C._get_tracing_state``
PYTHON_CALLS_PER_MODULE = 3
_RESUMABLE = 0x20 | 0x80 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR


class HostCounter(TorchDispatchMode):
    """What the host of a real run does between the recorded calls, counted as a profiler
    recording ``with_stack`` counts it (the counts :mod:`infer_opt.trace.host_fit` models the
    host's time with), per recorded call from the previous one to it, its own included:

    * **aten ops**: the ``torch.profiler`` (CPU) events named ``aten::`` outside the recorded
      calls' own dispatch — the composite wrappers around a call (``aten::linear`` around
      ``aten::t`` and ``aten::addmm``) and the call's own event, not what the fake tensors'
      kernel runs inside it (``empty_strided``, ``detach``, ``set_``; a trace's real kernel
      records its own children instead: :func:`infer_opt.trace.host_fit.op_children`);
    * **Python calls**: every call and builtin call the model's code makes (``sys.setprofile``),
      without the recorder's, the fake tensors' and the dispatch machinery's frames, each
      ``nn.Module`` call as the :data:`PYTHON_CALLS_PER_MODULE` the profiler records without
      hooks (the recorder's hooks put ``_call_impl`` on its slow path), a resumed generator not
      again.

    It runs as a dispatch mode above the recorder, so it sees each call first."""

    def __init__(self, recorder: OpRecorder) -> None:
        super().__init__()
        self.recorder = recorder
        self.python: list[int] = []
        self.recorded: list[bool] = []
        self.pending = 0
        self.depth = 0

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        before = len(self.recorder.calls)
        self.depth += 1
        try:
            with torch._C._profiler._RecordFunctionFast(_MARK):
                out = func(*args, **(kwargs or {}))
        finally:
            self.depth -= 1
        self.recorded.append(len(self.recorder.calls) > before)
        if self.recorded[-1]:
            self.python.append(self.pending)
            self.pending = 0
        return out

    def _profile(self, frame: Any, event: str, _arg: Any) -> None:
        if self.depth or event not in ("call", "c_call"):
            return
        caller = frame if event == "c_call" else frame.f_back
        where = caller.f_code.co_filename if caller is not None else "infer_opt/"
        if any(part in where for part in _NOT_MODEL):
            return
        in_module = where.endswith(_MODULE_PY) and caller.f_code.co_name != "__getattr__"
        code = frame.f_code
        if event == "c_call":
            self.pending += 0 if in_module else 1
        elif code.co_filename.endswith(_MODULE_PY):
            self.pending += {"_call_impl": PYTHON_CALLS_PER_MODULE, "__getattr__": 1}.get(code.co_name, 0)
        elif not any(part in code.co_filename for part in _NOT_MODEL) and not (
            (in_module and code.co_name != "forward") or (code.co_flags & _RESUMABLE and frame.f_lasti > 0)
        ):
            self.pending += 1

    def run(self, fn: Callable[[], object]) -> list[tuple[int, int]]:
        """Run ``fn`` counted; per recorded call ``(Python calls, aten ops)``."""
        import sys

        quiet_kineto()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            previous = sys.getprofile()
            sys.setprofile(self._profile)
            try:
                with self:
                    fn()
            finally:
                sys.setprofile(previous)
        return list(zip(self.python, self._aten_ops(prof.events()), strict=True))

    def _aten_ops(self, events: Sequence[Any]) -> list[int]:
        """Per recorded call, the ``aten::`` events outside every call's own dispatch since the
        previous recorded call (a pre-order walk: a wrapper goes with the first call inside it)."""

        def inside(e: Any) -> bool:
            parent = e.cpu_parent
            while parent is not None and parent.name != _MARK:
                parent = parent.cpu_parent
            return parent is not None

        order = sorted(
            (e for e in events if e.name == _MARK or (e.name.startswith("aten::") and not inside(e))),
            key=lambda e: (e.time_range.start, -e.time_range.end, e.name == _MARK),
        )
        marks = iter(self.recorded)
        out, pending = [], 0
        for e in order:
            if e.name != _MARK:
                pending += 1
            elif next(marks, False):
                out.append(pending)
                pending = 0
        return out


# ---------------------------------------------------------------------------- timing


@dataclass
class OpTimings:
    """Per-call times from the profiler: ``per_rep_s[r][i]`` is call i in repetition r
    (``None`` when that call could not be matched in that repetition)."""

    per_rep_s: list[list[float | None]]
    #: "cpu" (op wall time on the calling thread) or "cuda" (kernel time)
    clock: str
    #: per repetition: the whole step as the profiler saw it (CPU: marker wall time;
    #: CUDA: all kernel time launched inside the marker)
    rep_total_s: list[float]
    #: profiler cost per nested event subtracted from CPU op times (0 on CUDA)
    overhead_per_event_s: float
    #: profiler overhead subtracted per repetition, summed over the matched ops
    overhead_subtracted_s: float
    #: calls never matched to a profiler event (by index)
    unmatched: list[int]

    def median_per_call_s(self) -> list[float]:
        out = []
        for i in range(len(self.per_rep_s[0]) if self.per_rep_s else 0):
            values = [rep[i] for rep in self.per_rep_s if rep[i] is not None]
            out.append(statistics.median(values) if values else 0.0)
        return out


_lean_depth = 0


@contextlib.contextmanager
def lean_profiler_records() -> Iterator[None]:
    """Within: profiler sessions record op names, times and shapes, not the values of list
    arguments (module docstring). Torch keeps that switch process-wide with a setter and no
    getter; on leaving the outermost block it is set back to torch's default (on). A torch
    without the switch profiles as it always did."""
    global _lean_depth
    setter = getattr(torch._C._profiler, "_set_record_concrete_inputs_enabled_val", None)
    if setter is None:
        yield
        return
    if _lean_depth == 0:
        setter(False)
    _lean_depth += 1
    try:
        yield
    finally:
        _lean_depth -= 1
        if _lean_depth == 0:
            setter(True)


def profiler_overhead_per_event_s(samples: int = 7, calls: int = 300) -> float:
    """The profiler's cost per recorded op on the CPU (with shapes recorded, as
    :func:`time_ops` records them): the time of
    ``calls`` trivial ``aten::view`` calls with the profiler on minus off, per call, median of
    ``samples`` tries. This is what an event nested inside an op adds to the op's interval."""
    x = torch.ones(4, 4)
    view = torch.ops.aten.view.default

    def loop() -> None:
        for _ in range(calls):
            view(x, [16])

    def timed() -> float:
        start = time.perf_counter_ns()
        loop()
        return (time.perf_counter_ns() - start) * 1e-9 / calls

    quiet_kineto()
    loop()
    off = [timed() for _ in range(samples)]
    with (
        lean_profiler_records(),
        torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True),
    ):
        loop()
        on = [timed() for _ in range(samples)]
    return max(0.0, statistics.median(on) - statistics.median(off))


_REP_PREFIX = "infer_opt::rep"
_WARMUP_MARK = "infer_opt::profiler_warmup"
_MARKS = (_REP_PREFIX, _WARMUP_MARK)
#: kineto prints a line on every profiler start/stop at its default log level; 6 silences it
#: (set only when the user has not chosen a level)
_KINETO_LOG_LEVEL = "6"


def quiet_kineto() -> None:
    """Silence kineto's per-start/stop log lines (unless the user set ``KINETO_LOG_LEVEL``);
    it reads the level when the first profiler starts in the process."""
    os.environ.setdefault("KINETO_LOG_LEVEL", _KINETO_LOG_LEVEL)


#: profiler event name -> the recorded name of the same operation (module docstring): without a
#: dispatch mode a ``reshape`` of a non-contiguous tensor that needs no copy runs
#: ``aten::_reshape_alias``, under the recording mode ``aten::view`` (same input, same result,
#: no data moved)
TRACE_EQUIVALENTS = {"aten::_reshape_alias": "aten::view"}
#: the search for a call gives up (the call is not in the trace here) when it meets the event of
#: one of this many following calls first
MATCH_LOOKAHEAD = 16
#: events visited per repetition, at most, per event and call (a trace unlike the recorded step
#: must not make matching quadratic); calls left when it runs out stay unmatched
MATCH_WORK_FACTOR = 16


class _Node:
    """A CPU op event of the profiler trace, with the device time of the kernels it launched."""

    __slots__ = ("_shapes", "children", "device_s", "end_ns", "event", "match_name", "name", "start_ns")

    def __init__(self, name: str, start_ns: int, end_ns: int, event: Any = None) -> None:
        self.name = name
        #: the name a recorded call of this operation has (:data:`TRACE_EQUIVALENTS`)
        self.match_name = TRACE_EQUIVALENTS.get(name, name)
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.event = event
        self._shapes: tuple[tuple[int, ...], ...] | None = None
        self.children: list[_Node] = []
        self.device_s = 0.0

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        """Non-scalar tensor input shapes (read from the event only when asked: it is slow)."""
        if self._shapes is None:
            self._shapes = _shape_key(self.event.shapes()) if self.event is not None else ()
        return self._shapes

    @property
    def wall_s(self) -> float:
        return (self.end_ns - self.start_ns) * 1e-9

    def device_total_s(self) -> float:
        return self.device_s + sum(child.device_total_s() for child in self.children)

    def descendants(self) -> int:
        return sum(1 + child.descendants() for child in self.children)


def _shape_key(shapes: Any) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(s) for s in shape) for shape in shapes or () if isinstance(shape, list) and shape)


#: host events the trace forest indexes: aten ops and record_function annotations. CUDA runtime
#: and driver calls (``cudaDeviceSynchronize`` between repetitions) number their correlation ids
#: apart from the ops', so one can carry an op's id and would take its kernels
_OP_ACTIVITIES = frozenset({"cpu_op", "user_annotation"})


def _is_op_event(event: Any) -> bool:
    kind = getattr(event, "activity_type", None)
    return kind is None or kind() in _OP_ACTIVITIES


def _device_activity(kineto_events: Sequence[Any]) -> bool:
    """Whether the profiler recorded anything on the device (a kernel, a copy, a GPU-side
    annotation): with CUPTI missing it records the host side only."""
    from torch.autograd import DeviceType

    return any(event.device_type() != DeviceType.CPU for event in kineto_events)


def _trace_forest(kineto_events: Sequence[Any]) -> list[_Node]:
    """The repetition markers (``infer_opt::rep<i>``, in order) with their nested CPU ops;
    kernels are attached to the CPU op that launched them (linked correlation id). Only op and
    annotation events are indexed (:data:`_OP_ACTIVITIES`). Built from the raw kineto events:
    torch's own ``FunctionEvent`` post-processing costs ~0.1 ms per event and leaves reference
    cycles behind."""
    from torch.autograd import DeviceType

    by_thread: dict[int, list[tuple[int, int, Any]]] = {}
    kernels: list[tuple[int, float]] = []
    for event in kineto_events:
        device_type = event.device_type()
        if device_type == DeviceType.CPU:
            if event.is_async() or event.linked_correlation_id() > 0 or not _is_op_event(event):
                continue
            start = event.start_ns()
            by_thread.setdefault(event.start_thread_id(), []).append(
                (start, start + event.duration_ns(), event)
            )
        elif not event.name().startswith(_MARKS):
            # kernels, memcpy and memset on the device; the GPU-side copies of our own
            # record_function markers ("gpu_user_annotation") are not work
            kernels.append((event.linked_correlation_id(), event.duration_ns() * 1e-9))
    markers: list[tuple[int, _Node]] = []
    by_correlation: dict[int, _Node] = {}
    for items in by_thread.values():
        items.sort(key=lambda item: (item[0], -item[1]))
        stack: list[_Node] = []
        for start, end, event in items:
            name = event.name()
            node = _Node(name, start, end, event)
            by_correlation[event.correlation_id()] = node
            while stack and stack[-1].end_ns <= start:
                stack.pop()
            if name.startswith(_REP_PREFIX):
                markers.append((int(name[len(_REP_PREFIX) :]), node))
                stack = [node]
                continue
            if stack:
                stack[-1].children.append(node)
            stack.append(node)
    for correlation, seconds in kernels:
        node = by_correlation.get(correlation)
        if node is not None:
            node.device_s += seconds
    markers.sort(key=lambda item: item[0])
    return [node for _, node in markers]


def _preorder(rep: _Node) -> tuple[list[_Node], list[int]]:
    """The events inside ``rep`` in program order (parents before their children), and for each
    the index just past its subtree."""
    nodes: list[_Node] = []
    ends: list[int] = []

    def walk(node: _Node) -> None:
        k = len(nodes)
        nodes.append(node)
        ends.append(0)
        for child in node.children:
            walk(child)
        ends[k] = len(nodes)

    for child in rep.children:
        walk(child)
    return nodes, ends


def match_rep(
    rep: _Node, calls: Sequence[OpCall], on_cuda: bool, overhead_per_event_s: float
) -> tuple[list[float | None], float]:
    """Times of ``calls`` inside one repetition marker, matched in program order (module
    docstring): each call takes the first event after the previous match (outside its subtree)
    with the call's name and shapes; a call whose search meets one of the next calls' events
    first, and is not inside it, is not in the trace here and stays ``None``. Returns the
    per-call times and the profiler overhead subtracted."""
    nodes, ends = _preorder(rep)
    times: list[float | None] = [None] * len(calls)
    subtracted = 0.0
    position = 0
    budget = MATCH_WORK_FACTOR * (len(nodes) + len(calls))
    for i, call in enumerate(calls):
        ahead = calls[i + 1 : i + 1 + MATCH_LOOKAHEAD]
        ahead_names = {c.name for c in ahead}
        found = -1
        k = position
        limit = len(nodes)
        while k < limit and budget > 0:
            budget -= 1
            node = nodes[k]
            name = node.match_name
            if name == call.name and node.shapes == call.match_shapes:
                found = k
                break
            if name in ahead_names and any(name == c.name and node.shapes == c.match_shapes for c in ahead):
                # a later call's op comes first: this call can only be inside it (a composite
                # overload sharing the name: where(cond, x, scalar) runs scalar_tensor and
                # where), else it did not run here
                limit = ends[k]
            k += 1  # into the event's children (a composite wrapper), then on
        if found < 0:
            if budget <= 0:
                break
            continue
        node = nodes[found]
        if on_cuda:
            times[i] = node.device_total_s()
        else:
            raw = node.wall_s
            correction = min((ends[found] - found - 1) * overhead_per_event_s, 0.5 * raw)
            subtracted += correction
            times[i] = raw - correction
        position = ends[found]
    return times, subtracted


def time_ops(
    fn: Callable[[], object],
    calls: Sequence[OpCall],
    *,
    device: Any = "cpu",
    reps: int = 10,
    trace_path: str | os.PathLike[str] | None = None,
    overhead_per_event_s: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> OpTimings:
    """Run ``fn`` ``reps`` times under ``torch.profiler`` (after one profiled warm-up call)
    and time every recorded call (module docstring). ``trace_path`` writes the raw trace in
    Chrome/Perfetto JSON."""
    from torch.profiler import ProfilerActivity, profile, record_function

    quiet_kineto()
    on_cuda = str(device).startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    if overhead_per_event_s is None:
        overhead_per_event_s = 0.0 if on_cuda else profiler_overhead_per_event_s()

    def sync() -> None:
        if on_cuda:
            torch.cuda.synchronize(device)

    with torch.no_grad(), lean_profiler_records(), profile(activities=activities, record_shapes=True) as prof:
        with record_function(_WARMUP_MARK):
            fn()
            if on_cuda and torch.cuda.is_available():  # one kernel: CUPTI is seen in any trace
                torch.zeros(1, device=device)
        sync()
        for r in range(reps):
            with record_function(f"{_REP_PREFIX}{r}"):
                fn()
            sync()
            if progress is not None:
                progress(r + 1, reps)
    if trace_path is not None:
        _export_trace(prof, Path(trace_path))
    events = prof.profiler.kineto_results.events()
    markers = _trace_forest(events)
    device_activity = on_cuda and _device_activity(events)
    del prof, events
    per_rep: list[list[float | None]] = []
    totals: list[float] = []
    subtracted: list[float] = []
    for marker in markers:
        times, sub = match_rep(marker, calls, on_cuda, overhead_per_event_s)
        per_rep.append(times)
        subtracted.append(sub)
        totals.append(marker.device_total_s() if on_cuda else marker.wall_s)
    if not per_rep:
        raise RuntimeError("torch.profiler recorded no repetitions (is another profiler running?)")
    if on_cuda and not any(total > 0 for total in totals) and not device_activity:
        # CUPTI missing or not allowed: the trace holds the host side only, and every op would
        # show 0 s of kernel time. (Calls that launch no kernel at all — views — with CUPTI
        # present show the warm-up's probe kernel: their 0 s is a measurement; found on an H200.)
        raise RunFailure(
            "torch.profiler recorded no CUDA kernel activity (CUPTI unavailable?): per-operator GPU "
            "times cannot be measured on this machine"
        )
    unmatched = [i for i in range(len(calls)) if all(rep[i] is None for rep in per_rep)]
    return OpTimings(
        per_rep_s=per_rep,
        clock="cuda" if on_cuda else "cpu",
        rep_total_s=totals,
        overhead_per_event_s=overhead_per_event_s,
        overhead_subtracted_s=statistics.median(subtracted) if subtracted else 0.0,
        unmatched=unmatched,
    )


def merge_timings(parts: Sequence[OpTimings]) -> OpTimings:
    """Several profiler sessions over the same calls as one (repetitions concatenated)."""
    if not parts:
        raise ValueError("merge_timings needs at least one OpTimings")
    per_rep = [rep for part in parts for rep in part.per_rep_s]
    unmatched = [i for i in parts[0].unmatched if all(i in part.unmatched for part in parts[1:])]
    subtracted = [part.overhead_subtracted_s for part in parts for _ in part.per_rep_s]
    return OpTimings(
        per_rep_s=per_rep,
        clock=parts[0].clock,
        rep_total_s=[t for part in parts for t in part.rep_total_s],
        overhead_per_event_s=parts[0].overhead_per_event_s,
        overhead_subtracted_s=statistics.median(subtracted) if subtracted else 0.0,
        unmatched=unmatched,
    )


def _export_trace(prof: Any, path: Path) -> None:
    """The trace exported to a private temporary folder, then written as every output is
    (:func:`infer_opt.files.write_bytes`): a regular file atomically, a symlink through to its
    target (the link stays), a FIFO or device (``/dev/null``) in place, never replaced."""
    from infer_opt.files import write_bytes

    if not os.path.exists(os.path.realpath(path)):
        path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="infer-opt-trace.") as folder:
        tmp = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(tmp)
        with open(tmp, "rb") as handle:
            write_bytes(path, iter(lambda: handle.read(1 << 20), b""))
