"""Per-op figures of a trace: groups by (op, shapes, dtypes), the coverage table, host syncs.

**Which op a GPU event belongs to.** Each GPU event (kernel, memcpy, memset; not a
``cuda_sync`` wait) was launched from inside a chain of nested ``cpu_op`` s, innermost first
(``GpuEvents.op`` is the innermost; ``CpuOps.parent`` walks out). The event is attributed to
the **outermost op of that chain that has a FLOP/byte formula** (``op_costs.op_cost`` is not
``None`` and counts some work: a view's zero formula does not claim the copy a ``reshape``
launches through ``clone``); when no op of the chain has one, to the innermost op. So ``aten::linear`` →
``aten::addmm`` → gemm kernel + split-K reduce + memset is one ``aten::linear`` group whose
kernel time is all three events and whose FLOPs are ``linear``'s formula once; ``aten::addmm``
has no group of its own there (its work is inside ``linear``'s formula), which is what keeps
FLOPs from being counted twice. An op's own work is always inside the formula of any op that
encloses it, so the outermost formula is never smaller than the inner ones; HTA and TraceLens
group by the leaf op instead, which splits a ``matmul`` of 4-D inputs into its ``bmm`` and the
``clone`` copies it needs, and books the copies nowhere. A generic
``aten::scaled_dot_product_attention`` owner takes its family from the backend it dispatched
to (``_scaled_dot_product_flash_attention`` → ``attention_flash``; efficient, cuDNN likewise):
its own formula cannot tell which kernel ran, and only the math path stays ``attention_math``.

Each event belongs to exactly one group, so the groups' times sum to the attributed GPU time
and each group's ``time_s`` is exactly the sum of its events' durations. Events without an op
(queued before the window, launched outside any cpu_op, CUDA-graph replays launched at the top
level) are in no group; :func:`coverage` counts them. ``calls`` are distinct op instances;
``flops``/``bytes`` are the formula's figures summed over those instances.

A host↔device copy's group (family ``transfer``) counts the bytes that crossed the host link
(:func:`link_bytes`: the tensor once), not the read and the write its formula counts.

**Bound.** Per call, against the peaks of the group's precision: ``launch`` when the launch
floor ``t0`` exceeds both ``F/R`` and ``Q/b`` (the work would take less than launching it;
:func:`infer_opt.cost_models.roofline.classify`'s rule), else ``compute`` or ``bandwidth``,
whichever term is larger; ``unknown`` without a formula. ``peak_fraction`` is the achieved rate
over the peak of the resource whose term is larger (for a launch-bound op too).

Pure: numpy and the standard library.
"""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from infer_opt.results.trace import CoverageRow, HostSync, OpGroup, Peaks
from infer_opt.trace.events import KERNEL, MEMCPY, MEMSET, SYNC, TraceEvents
from infer_opt.trace.roofline import DEFAULT_LAUNCH_S, peak_flops

#: attention families (``op_costs.SDPA_OPS``): the generic entry point's, until the backend it
#: dispatched to says which kernel ran
ATTENTION_PREFIX, ATTENTION_MATH = "attention_", "attention_math"
#: distinct kernel names kept per group
KERNEL_NAMES_KEPT = 3
#: collective kernels (NCCL, RCCL, c10d's names)
COMM_KERNEL = re.compile(
    r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|alltoall", re.IGNORECASE
)
#: launches that replay a captured CUDA/HIP graph (their kernels carry no shapes)
GRAPH_LAUNCH = re.compile(r"^(cuda|hip)GraphLaunch|^cuGraphLaunch", re.IGNORECASE)
#: host calls that wait for the device
SYNC_CALLS = re.compile(
    r"^(cuda|hip)(StreamSynchronize|DeviceSynchronize|EventSynchronize|Memcpy|MemcpyDtoH)$"
    r"|^cu(StreamSynchronize|CtxSynchronize|EventSynchronize|MemcpyDtoH(_v2)?)$"
)
#: ops that read a device scalar on the host (and the plumbing under them)
SCALAR_READS = ("aten::item", "aten::_local_scalar_dense")
PLUMBING = (*SCALAR_READS, "aten::copy_", "aten::_to_copy", "aten::empty_strided")
#: the family (and what-if category) of an op whose GPU time is mostly host↔device copies
TRANSFER = "transfer"
CATEGORIES = (
    "matmul",
    "attention",
    "conv",
    "norm",
    "softmax",
    "embedding",
    "elementwise",
    "reduction",
    "copy",
    TRANSFER,
)
#: engine ops' families (``engine_op_costs``) that are their own category, named as
#: ``kernel_names`` names their kernels' families
ENGINE_CATEGORIES = ("activation", "rotary", "kv_cache")
#: their directions (``transfer.h2d``, ``transfer.d2h``) and how memcpy names spell them (CUDA
#: ``Memcpy HtoD (Pageable -> Device)``, HIP ``Memcpy HtoD (Host -> Device)``)
TRANSFER_WAYS = {"h2d": "HtoD", "d2h": "DtoH"}
#: an op is a transfer when host↔device copies are at least this share of its GPU time (an
#: ``aten::to`` from the host, an ``item()``; not a ``nonzero`` that reads its count back)
TRANSFER_SHARE = 0.5


def transfer_directions(events: TraceEvents) -> dict[int, str]:
    """``name index -> "h2d" | "d2h"`` for the trace's memcpy names that cross the host link."""
    out = {}
    for i, name in enumerate(events.names):
        for way, word in TRANSFER_WAYS.items():
            if word in name:
                out[i] = way
    return out


def link_bytes(copy_bytes: float) -> float:
    """The bytes a host↔device copy moves across the host link. Every formula that counts a
    copy (``op_costs``: ``to``, ``_to_copy``, ``copy_``, ``clone``) counts one read and one write
    of the tensor, as HBM sees a device-side copy; the link carries the tensor once. The one
    definition ``trace``'s op table, its "copies at the link rate" what-if and
    ``calibrate --from-trace`` use."""
    return copy_bytes / 2.0


def group_peaks(family: str, peaks: Peaks) -> Peaks:
    """The peaks a group of ``family`` is held against: a transfer's bandwidth is the host
    link's (:attr:`Peaks.host_link_bytes_per_s`), not the HBM's."""
    if family == TRANSFER and peaks.host_link_bytes_per_s > 0:
        return replace(peaks, bytes_per_s=peaks.host_link_bytes_per_s)
    return peaks


COVERAGE_REASONS = ("modelled", "no_shapes", "unlinked", "communication", "memcpy", "sync", "no_formula")

CostFn = Callable[..., Any]
#: the cpu_op args a formula reads
_COST_ARGS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")


def _default_cost() -> tuple[CostFn, Callable[[dict], str], Callable[[dict], str]]:
    from infer_opt.trace.op_costs import dtype_key, op_cost, shape_dims

    return op_cost, shape_dims, dtype_key


@dataclass
class Attribution:
    """Which op owns each GPU event (see the module docstring), and the ops' formulas."""

    owner: np.ndarray  # per GPU event: the op index it is attributed to, -1 none
    costs: dict[int, Any]  # op index -> OpCost or None (only ops looked at)
    shapes: Callable[[dict], tuple[tuple[int, ...], ...]]  # an op's shapes (OpGroup.shapes)
    dtypes: Callable[[dict], str]
    #: id(args) -> shapes (the reader shares one args dict between ops recorded alike)
    shape_cache: dict[int, tuple] = field(default_factory=dict)

    def shapes_of(self, args: dict) -> tuple[tuple[int, ...], ...]:
        found = self.shape_cache.get(id(args))
        if found is None:
            found = self.shape_cache[id(args)] = self.shapes(args)
        return found


#: the default formulas' attribution of a trace, per causal convention (op groups, coverage and
#: the what-ifs all ask for it; it lives as long as the trace)
_ATTRIBUTED: weakref.WeakKeyDictionary[TraceEvents, dict[str, Attribution]] = weakref.WeakKeyDictionary()


def attribute(events: TraceEvents, cost: CostFn | None, causal: str) -> Attribution:
    if cost is None:
        found = _ATTRIBUTED.get(events, {}).get(causal)
        if found is None:
            found = _ATTRIBUTED.setdefault(events, {})[causal] = _attribute(events, None, causal)
        return found
    return _attribute(events, cost, causal)


def _attribute(events: TraceEvents, cost: CostFn | None, causal: str) -> Attribution:
    fn, shapes, dtypes = _default_cost() if cost is None else (cost, _shapes_fallback, _dtypes_fallback)
    ops = events.ops
    names, parents, all_args = ops.name.tolist(), ops.parent.tolist(), ops.args
    costs: dict[int, Any] = {}
    owner_of: dict[int, int] = {}
    memo: dict[tuple, Any] = {}  # the same op and recorded arguments: the same formula
    # the reader shares one args dict between ops with the same recorded arguments: an op and
    # args object seen before needs no repr (ops.args keeps every object alive, ids are unique)
    by_object: dict[tuple[int, int], Any] = {}

    def cost_of(i: int) -> Any:
        if i not in costs:
            args = all_args[i]
            seen = (names[i], id(args))
            if seen not in by_object:
                key = (names[i], repr([args.get(k) for k in _COST_ARGS]))
                if key not in memo:
                    memo[key] = fn(events.names[names[i]], args, causal=causal)
                by_object[seen] = memo[key]
            costs[i] = by_object[seen]
        return costs[i]

    def owner(leaf: int) -> int:
        if leaf not in owner_of:
            found, i, kernel_family = leaf, leaf, ""
            while i >= 0:
                c = cost_of(i)
                if _works(c):
                    found = i
                    family = getattr(c, "family", "")
                    if not kernel_family and family.startswith(ATTENTION_PREFIX) and family != ATTENTION_MATH:
                        kernel_family = family
                i = parents[i]
            top = costs.get(found)
            if kernel_family and getattr(top, "family", "") == ATTENTION_MATH:
                # scaled_dot_product_attention's own formula cannot tell which kernel it chose:
                # the backend it dispatched to (flash, efficient, cuDNN) names the family
                costs[found] = replace(top, family=kernel_family)
            owner_of[leaf] = found
        return owner_of[leaf]

    leaves, inverse = np.unique(events.gpu.op, return_inverse=True)
    owners = np.array([owner(int(o)) if o >= 0 else -1 for o in leaves], dtype=np.int64)
    return Attribution(
        owners[inverse].reshape(-1) if len(leaves) else np.zeros(0, np.int64), costs, shapes, dtypes
    )


def _shapes_fallback(args: dict) -> tuple[tuple[int, ...], ...]:
    dims = args.get("Input Dims") or ()
    return tuple(
        tuple(int(d) for d in x)
        for x in dims
        if isinstance(x, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in x)
    )


def _dtypes_fallback(args: dict) -> str:
    return ",".join(str(t) for t in args.get("Input type", ()) if t)


def _kept(events: TraceEvents, kernel_mask: np.ndarray | None) -> np.ndarray:
    n = len(events.gpu)
    return np.ones(n, dtype=bool) if kernel_mask is None else np.asarray(kernel_mask, dtype=bool)


def _is_comm(events: TraceEvents) -> np.ndarray:
    from infer_opt.trace.timeline import COMM, classify

    return classify(events) == COMM


def _works(c: Any) -> bool:
    """A formula that counts some work (a view's 0/0 formula does not claim its children)."""
    return c is not None and (c.flops > 0 or c.bytes > 0)


def category(family: str) -> str:
    """The what-if category of an ``op_costs`` family: ``gemm.nn`` -> matmul, ``add.s`` ->
    elementwise, ``sum.r`` -> reduction, ``attention_flash`` -> attention ..."""
    if family in CATEGORIES or not family:
        return family
    head = family.split(".")[0]
    if head in ("gemm", "bmm"):
        return "matmul"
    for prefix, name in (
        ("attention", "attention"),
        ("conv", "conv"),
        ("view", "view"),
        ("foreach", "elementwise"),
    ):
        if head.startswith(prefix):
            return name
    if "norm" in head:
        return "norm"
    if head in ("softmax", "embedding"):
        return head
    if head in ENGINE_CATEGORIES:
        return head
    if head in ("copy", "clone", "to_copy", "cat"):
        return "copy"
    return "reduction" if family.endswith(".r") else "elementwise"


def op_groups(
    events: TraceEvents,
    *,
    peaks: Peaks,
    device: Any = None,
    kernel_mask: np.ndarray | None = None,
    causal: str = "half",
    cost: CostFn | None = None,
) -> tuple[OpGroup, ...]:
    """The (op, shapes, dtypes) groups over the kept GPU events, longest first (see the module
    docstring for the attribution and bound rules). ``cost`` replaces ``op_costs.op_cost``
    (tests)."""
    att = attribute(events, cost, causal)
    gpu = events.gpu
    keep = _kept(events, kernel_mask) & (gpu.kind != SYNC) & (att.owner >= 0)
    kept = np.flatnonzero(keep)
    owners, inverse = np.unique(att.owner[kept], return_inverse=True)
    keys = [_key(events, att, int(op)) for op in owners]
    members: dict[tuple[str, tuple, str], list[int]] = {}
    for e, i in zip(kept.tolist(), inverse.reshape(-1).tolist(), strict=True):
        members.setdefault(keys[i], []).append(e)
    steps = sorted({int(s) for s in gpu.step[keep] if s >= 0})
    ways = transfer_directions(events)
    groups = [_group(events, att, key, idx, peaks, device, steps, ways) for key, idx in members.items()]
    groups.sort(key=lambda g: (-g.time_s, g.name, g.shapes))
    return tuple(groups)


def merge_groups(per_rank: Sequence[Sequence[OpGroup]], *, peaks: Peaks) -> tuple[OpGroup, ...]:
    """The same (op, shapes, dtypes) groups of several ranks as one: calls, kernels, time,
    FLOPs and bytes summed, rates and the bound recomputed; spread is the largest rank's."""
    found: dict[tuple[str, tuple, str], list[OpGroup]] = {}
    for groups in per_rank:
        for g in groups:
            found.setdefault((g.name, g.shapes, g.dtype), []).append(g)
    out = []
    for members in found.values():
        first = members[0]
        if len(members) == 1:
            out.append(first)
            continue
        calls = sum(g.calls for g in members)
        time_s = math.fsum(g.time_s for g in members)
        flops = math.fsum(g.flops for g in members)
        nbytes = math.fsum(g.bytes for g in members)
        work = _work(
            calls,
            time_s,
            flops,
            nbytes,
            first.bound != "unknown",
            first.precision,
            group_peaks(first.family, peaks),
        )
        names = tuple(dict.fromkeys(k for g in members for k in g.kernel_names))
        out.append(
            replace(
                first,
                **work,
                kernels=sum(g.kernels for g in members),
                time_spread_s=max(
                    (g.time_spread_s for g in members if g.time_spread_s is not None), default=None
                ),
                kernel_names=names[:KERNEL_NAMES_KEPT],
            )
        )
    out.sort(key=lambda g: (-g.time_s, g.name, g.shapes))
    return tuple(out)


def _work(
    calls: int, time_s: float, flops: float, nbytes: float, modelled: bool, precision: str, peaks: Peaks
) -> dict[str, Any]:
    """A group's work fields: totals, achieved rates and its bound against ``peaks``."""
    bound, fraction = _bound(flops, nbytes, time_s, calls, modelled, peak_flops(peaks, precision), peaks)
    return {
        "calls": calls,
        "time_s": time_s,
        "flops": flops,
        "bytes": nbytes,
        # unknown is None (JSON null), never 0: no formula, no rate; no roofline, no fraction
        "achieved_flops_per_s": flops / time_s if modelled and time_s > 0 else None,
        "achieved_bytes_per_s": nbytes / time_s if modelled and time_s > 0 else None,
        "bound": bound,
        "peak_fraction": None if bound == "unknown" else fraction,
    }


def _key(events: TraceEvents, att: Attribution, op: int) -> tuple[str, tuple, str]:
    c = att.costs.get(op)
    args = events.ops.args[op]
    dtype = att.dtypes(args) if c is None or not c.dtype else c.dtype
    return events.name_of(events.ops.name[op]), att.shapes_of(args), dtype


def _group(
    events: TraceEvents,
    att: Attribution,
    key: tuple[str, tuple, str],
    idx: list[int],
    peaks: Peaks,
    device: Any,
    steps: list[int],
    ways: dict[int, str],
) -> OpGroup:
    gpu = events.gpu
    name, shapes, dtype = key
    instances = sorted({int(att.owner[e]) for e in idx})
    costs = [att.costs.get(i) for i in instances]
    modelled = [c for c in costs if _works(c)]
    flops = math.fsum(float(c.flops) for c in modelled)
    nbytes = math.fsum(float(c.bytes) for c in modelled)
    time_s = math.fsum(float(gpu.dur_us[e]) for e in idx) / 1e6
    kernel_names = tuple(dict.fromkeys(events.name_of(gpu.name[e]) for e in idx if gpu.kind[e] == KERNEL))
    precision = _precision(dtype, kernel_names, device)
    family = (
        category(modelled[0].family)
        if modelled
        else ("communication" if any(COMM_KERNEL.search(k) for k in kernel_names) else "")
    )
    if modelled and _copied_us(events, idx, ways) >= TRANSFER_SHARE * time_s * 1e6:
        family = TRANSFER
        nbytes = link_bytes(nbytes)  # held against the host link: the tensor once
    return OpGroup(
        name=name,
        shapes=shapes,
        dtype=dtype,
        **_work(len(instances), time_s, flops, nbytes, modelled != [], precision, group_peaks(family, peaks)),
        precision=precision,
        family=family,
        kernels=len(idx),
        time_spread_s=_spread(gpu, idx, steps),
        kernel_names=kernel_names[:KERNEL_NAMES_KEPT],
    )


def _copied_us(events: TraceEvents, idx: list[int], ways: dict[int, str]) -> float:
    """The time of the events ``idx`` that are host↔device copies (``ways``:
    :func:`transfer_directions`)."""
    gpu = events.gpu
    return math.fsum(float(gpu.dur_us[e]) for e in idx if gpu.kind[e] == MEMCPY and int(gpu.name[e]) in ways)


def _precision(dtype: str, kernel_names: tuple[str, ...], device: Any) -> str:
    from infer_opt.trace.devices import precision_of

    first = dtype.split(",")[0] if dtype else ""
    return precision_of(first, kernel_names, device)


def _bound(
    flops: float, nbytes: float, time_s: float, calls: int, modelled: bool, rate: float, peaks: Peaks
) -> tuple[str, float]:
    if not modelled or calls == 0 or (flops == 0 and nbytes == 0) or (rate <= 0 and peaks.bytes_per_s <= 0):
        return "unknown", 0.0  # no formula, or no roofline to hold it against
    compute = flops / calls / rate if rate > 0 and flops > 0 else 0.0
    memory = nbytes / calls / peaks.bytes_per_s if peaks.bytes_per_s > 0 and nbytes > 0 else 0.0
    launch = peaks.launch_s if peaks.launch_s > 0 else DEFAULT_LAUNCH_S
    heavier = "compute" if compute >= memory else "bandwidth"
    if time_s <= 0:
        fraction = 0.0
    elif heavier == "compute":
        fraction = flops / time_s / rate if rate > 0 else 0.0
    else:
        fraction = nbytes / time_s / peaks.bytes_per_s
    return ("launch" if launch > max(compute, memory) else heavier), fraction


def _spread(gpu: Any, idx: list[int], steps: list[int]) -> float | None:
    if len(steps) < 2:
        return None  # one step: no spread to measure (unknown, not 0)
    per_step = dict.fromkeys(steps, 0.0)
    for e in idx:
        s = int(gpu.step[e])
        if s in per_step:
            per_step[s] += float(gpu.dur_us[e])
    values = per_step.values()
    return (max(values) - min(values)) / 1e6


def event_reasons(events: TraceEvents, *, causal: str = "half", cost: CostFn | None = None) -> np.ndarray:
    """Per GPU event, the index into :data:`COVERAGE_REASONS` of why it has (or has no) formula,
    first match: sync, communication, modelled (its op has a formula), memcpy (memcpy/memset),
    no_shapes (a graph replay's launch), unlinked (no op), no_formula (an op chain with
    ``Input Dims``), no_shapes (none: a torch.compile region)."""
    att = attribute(events, cost, causal)
    gpu = events.gpu
    code = {r: i for i, r in enumerate(COVERAGE_REASONS)}
    owners, inverse = np.unique(att.owner, return_inverse=True)
    per_owner = np.array([code[_op_reason(events, att, int(o))] for o in owners], dtype=np.int8)
    reasons = per_owner[inverse.reshape(-1)] if len(owners) else np.zeros(0, dtype=np.int8)
    modelled = reasons == code["modelled"]
    graph = np.array([bool(GRAPH_LAUNCH.search(n)) for n in events.names], dtype=bool)
    launch = gpu.launch
    linked = launch >= 0
    replay = np.zeros(len(gpu), dtype=bool)
    if len(events.launches) and linked.any():
        replay[linked] = graph[events.launches.name[launch[linked]]]
    memory = (gpu.kind == MEMCPY) | (gpu.kind == MEMSET)
    # a replay linked to its capture (trace/capture.py) has the captured ops, copied with
    # event_index -1: no formula there is the op's, not missing shapes
    captured = np.zeros(len(gpu), dtype=bool)
    owned = att.owner >= 0
    captured[owned] = events.ops.event_index[att.owner[owned]] < 0
    reasons[~modelled & ~memory & replay & ~captured] = code["no_shapes"]
    reasons[~modelled & memory] = code["memcpy"]
    reasons[_is_comm(events)] = code["communication"]
    reasons[gpu.kind == SYNC] = code["sync"]
    return reasons


def _op_reason(events: TraceEvents, att: Attribution, op: int) -> str:
    if op < 0:
        return "unlinked"
    if _works(att.costs.get(op)):
        return "modelled"
    ops = events.ops
    while op >= 0:
        if ops.args[op].get("Input Dims"):
            return "no_formula"
        op = int(ops.parent[op])
    return "no_shapes"


def coverage(
    events: TraceEvents,
    *,
    kernel_mask: np.ndarray | None = None,
    causal: str = "half",
    cost: CostFn | None = None,
) -> tuple[CoverageRow, ...]:
    """Shares of the kept GPU events' summed time by reason (nonzero rows, largest first; the
    fractions sum to 1; empty without GPU time). A memset or memcpy an op with a formula
    launched counts as modelled, like its kernels."""
    keep = _kept(events, kernel_mask)
    reasons = event_reasons(events, causal=causal, cost=cost)
    dur = events.gpu.dur_us
    times = {r: math.fsum(dur[keep & (reasons == i)]) for i, r in enumerate(COVERAGE_REASONS)}
    total = math.fsum(times.values())
    if total <= 0:
        return ()
    rows = [CoverageRow(r, t / 1e6, t / total) for r, t in times.items() if t > 0]
    rows.sort(key=lambda r: (-r.time_s, r.reason))
    return tuple(rows)


def _meaningful_parent(events: TraceEvents, op: int) -> str:
    ops = events.ops
    while op >= 0 and events.name_of(ops.name[op]) in PLUMBING:
        op = int(ops.parent[op])
    return events.name_of(ops.name[op]) if op >= 0 else ""


def host_syncs(events: TraceEvents) -> tuple[HostSync, ...]:
    """Host calls that wait for the device, by (call, enclosing op), most time first.

    Runtime calls: ``cuda/hip`` ``StreamSynchronize``, ``DeviceSynchronize``,
    ``EventSynchronize``, the blocking ``cudaMemcpy``/``hipMemcpy`` (not ``...Async``) and the
    driver's equivalents; the enclosing op is the nearest one that is not scalar-read plumbing
    (``aten::item``, ``aten::_local_scalar_dense``, ``aten::copy_``, ...), so a ``.item()`` under
    ``aten::is_nonzero`` says ``aten::is_nonzero``. A trace without runtime events lists its
    ``aten::item``/``aten::_local_scalar_dense`` calls instead, under their parent op."""
    found: dict[tuple[str, str], list[float]] = {}
    launches = events.launches
    is_sync = np.array([bool(SYNC_CALLS.search(n)) for n in events.names], dtype=bool)
    for i in np.flatnonzero(is_sync[launches.name]) if len(launches) else ():
        key = (events.name_of(launches.name[i]), _meaningful_parent(events, int(launches.op[i])))
        found.setdefault(key, []).append(float(launches.dur_us[i]))
    if not len(launches):
        ops = events.ops
        for i in range(len(ops)):
            name = events.name_of(ops.name[i])
            if name in SCALAR_READS and (
                ops.parent[i] < 0 or events.name_of(ops.name[ops.parent[i]]) not in SCALAR_READS
            ):
                key = (name, _meaningful_parent(events, int(ops.parent[i])))
                found.setdefault(key, []).append(float(ops.dur_us[i]))
    rows = [HostSync(name, len(d), math.fsum(d) / 1e6, under) for (name, under), d in found.items()]
    rows.sort(key=lambda r: (-r.time_s, r.name, r.under_op))
    return tuple(rows)
