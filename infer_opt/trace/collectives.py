"""Collectives in a trace: NCCL/RCCL kernels as calls, their nccl-tests bandwidths, and an
α-β fit from the trace's own collectives.

A collective kernel's ``args`` (Kineto, PyTorch 2.x) carry ``Collective name``
(``allreduce``, ``allgather``, ``reduce_scatter``, ``broadcast``, ``all_to_all``, ``send``,
``recv`` ...), ``In msg nelems``/``Out msg nelems``, ``dtype`` (``Float``, ``BFloat16``, ...) and
``Group size``; where they are absent the kernel name says which collective it is
(``ncclDevKernel_AllReduce_Sum_f32_RING_LL``, ``ncclKernel_AllGather_RING_LL_Sum_float``) and
the message size is unknown (``None``; with no ``Group size`` the ranks are ``distributedInfo``'s
world size, else unknown too: never 0). The message size ``S`` is nccl-tests': the buffer for
all_reduce, the gathered output for all_gather, the input for reduce_scatter and all_to_all,
the message for broadcast/reduce/send/recv. Bandwidths and the fit are
:mod:`infer_opt.cost_models.comm`'s. A collective's kernel time includes waiting for its peers:
with several ranks the i-th call of the same kind on each rank is one collective, the early
ranks' wait is ``last start − own start`` and the transfer is the rest (rank clocks are taken as
comparable, as they are on one host). Pure: numpy only.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from infer_opt.cost_models import comm
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results.trace import CollectiveRow
from infer_opt.trace.devices import DTYPE_BYTES, normalize_dtype

#: ``Collective name`` spellings → comm's collective names
_NAMES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "allgatherintotensorcoalesced": "all_gather",
    "allgatherbase": "all_gather",
    "allgatherintotensor": "all_gather",
    "reducescatter": "reduce_scatter",
    "reducescattertensor": "reduce_scatter",
    "reducescatterbase": "reduce_scatter",
    "reducescattertensorcoalesced": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoallbase": "all_to_all",
    "alltoallv": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "send": "send_recv",
    "recv": "send_recv",
    "sendrecv": "send_recv",
}
#: kernel-name words (ncclDevKernel_AllReduce_..., ncclKernel_SendRecv...) → collective
_KERNEL = re.compile(
    r"(?:nccl|rccl)\w*?Kernel_?(AllReduce|AllGather|ReduceScatter|AllToAll|Broadcast|Reduce|SendRecv|Send|Recv)",
    re.IGNORECASE,
)
_KERNEL_DTYPES = {
    "f32": "fp32",
    "float": "fp32",
    "f16": "fp16",
    "half": "fp16",
    "bf16": "bf16",
    "f64": "fp64",
}
_KERNEL_DTYPES |= {"double": "fp64", "i8": "int8", "int8_t": "int8", "u8": "uint8", "uint8_t": "uint8"}
_KERNEL_DTYPES |= {"i32": "int32", "int32_t": "int32", "i64": "int64", "int64_t": "int64", "u32": "int32"}
#: collectives whose message size is the output (the gathered buffer)
_OUTPUT_SIZED = frozenset({"all_gather"})


@dataclass(frozen=True)
class CollectiveCall:
    """One collective kernel on one rank."""

    rank: int
    ts_us: float
    dur_us: float
    collective: str  # comm's name: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, ...
    bytes: int | None  # nccl-tests' message size S (None when the trace does not say)
    dtype: str  # short name
    group_size: int | None  # None when unknown
    seq: int = -1  # the call's position among this rank's calls of the same kind


def _squash(text: str) -> str:
    return re.sub(r"[^a-z]", "", text.lower())


def _from_kernel_name(kernel_name: str) -> tuple[str, str] | None:
    found = _KERNEL.search(kernel_name)
    if not found:
        return None
    collective = _NAMES.get(_squash(found.group(1)), "")
    tail = kernel_name[found.end() :].split("(")[0]
    dtype = next((_KERNEL_DTYPES[w.lower()] for w in re.split(r"_", tail) if w.lower() in _KERNEL_DTYPES), "")
    return collective, dtype


def _int(value: object) -> int | None:
    """A count from the trace's args; absent or not a count (a word, negative, beyond int64):
    None, unknown."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        count = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return None
    return count if 0 <= count < (1 << 62) else None


def collective_call(
    kernel_name: str, args: Mapping, rank: int, ts_us: float, dur_us: float, world_size: int | None = None
) -> CollectiveCall | None:
    """The collective a GPU kernel is, from its ``args`` or its name; None when it is none.
    ``world_size`` (``distributedInfo``) stands for a ``Group size`` the kernel does not record."""
    named = args.get("Collective name")
    from_name = _from_kernel_name(kernel_name)
    if named is None and from_name is None:
        return None
    collective = _NAMES.get(_squash(str(named)), "") if named is not None else ""
    if not collective and from_name is not None:
        collective = from_name[0]
    if not collective:
        collective = _squash(str(named)) or "unknown"
    dtype = normalize_dtype(str(args.get("dtype", ""))) or (from_name[1] if from_name else "")
    group = _int(args.get("Group size")) or (world_size if world_size and world_size > 0 else None)
    elems = _int(args.get("Out msg nelems" if collective in _OUTPUT_SIZED else "In msg nelems"))
    if collective in _OUTPUT_SIZED and not elems:
        given = _int(args.get("In msg nelems"))
        elems = given * group if given is not None and group else None
    esize = DTYPE_BYTES.get(dtype)
    nbytes = elems * esize if elems is not None and esize else None
    return CollectiveCall(rank, float(ts_us), float(dur_us), collective, nbytes, dtype, group)


def _kind(call: CollectiveCall) -> tuple[str, int | None, str, int | None]:
    return call.collective, call.bytes, call.dtype, call.group_size


def _numbered(calls: Sequence[CollectiveCall]) -> list[CollectiveCall]:
    """The rank's calls in start order, each with its seq among calls of its kind."""
    seen: dict[tuple[str, int | None, str, int | None], int] = defaultdict(int)
    out = []
    for call in sorted(calls, key=lambda c: c.ts_us):
        out.append(replace(call, seq=seen[_kind(call)]))
        seen[_kind(call)] += 1
    return out


def _waits(matched: Mapping[int, Sequence[CollectiveCall]]) -> tuple[list[float], list[float]]:
    """Early ranks' waits and every rank's transfer (µs) over the calls matched across ranks."""
    waits: list[float] = []
    transfers: list[float] = []
    for calls in matched.values():
        if len(calls) < 2:
            continue
        last = max(c.ts_us for c in calls)
        for c in calls:
            wait = last - c.ts_us
            if wait > 0:
                waits.append(wait)
            transfers.append(max(c.dur_us - wait, 0.0))
    return waits, transfers


def _row(
    kind: tuple[str, int | None, str, int | None], calls: Sequence[CollectiveCall], several: bool
) -> CollectiveRow:
    collective, nbytes, dtype, group = kind
    time_s = float(np.median([c.dur_us for c in calls])) * 1e-6
    algbw = busbw = None
    if nbytes is not None and time_s > 0:
        algbw = comm.algbw(nbytes, time_s)
        try:
            busbw = comm.busbw(collective, nbytes, time_s, group) if group else None
        except InvalidInput:  # a collective nccl-tests has no factor for
            busbw = None
    wait_s: float | None = None
    transfer_s: float | None = None
    if several:
        matched: dict[int, list[CollectiveCall]] = defaultdict(list)
        for c in calls:
            matched[c.seq].append(c)
        waits, transfers = _waits(matched)
        if transfers:  # some calls matched across ranks: a wait (0 when none waited) and the rest
            wait_s = float(np.median(waits)) * 1e-6 if waits else 0.0
            transfer_s = float(np.median(transfers)) * 1e-6
    ranks = {c.rank for c in calls}
    return CollectiveRow(
        collective=collective,
        bytes=nbytes,
        dtype=dtype,
        group_size=group,
        calls=len(calls) // max(len(ranks), 1) if several else len(calls),
        time_s=time_s,
        algbw_bytes_per_s=algbw,
        busbw_bytes_per_s=busbw,
        wait_s=wait_s,
        transfer_s=transfer_s,
    )


def collective_rows(calls_by_rank: Sequence[Sequence[CollectiveCall]]) -> tuple[CollectiveRow, ...]:
    """One row per (collective, bytes, dtype, group size) over every rank's calls: ``calls``
    per rank, median kernel time, algbw/busbw (nccl-tests), and with several ranks the median
    wait of the early ranks and the transfer (module docstring). Largest total time first."""
    groups: dict[tuple[str, int | None, str, int | None], list[CollectiveCall]] = defaultdict(list)
    ranks_seen = 0
    for calls in calls_by_rank:
        if calls:
            ranks_seen += 1
        for call in _numbered(calls):
            groups[_kind(call)].append(call)
    rows = [_row(kind, calls, ranks_seen > 1) for kind, calls in groups.items()]
    return tuple(sorted(rows, key=lambda r: (-r.time_s * r.calls, r.collective, r.bytes or -1)))


def alpha_beta(
    rows: Sequence[CollectiveRow], *, bootstrap: int = 0, seed: int = 0
) -> tuple[dict[str, comm.AlphaBetaFit | None], tuple[Notice, ...]]:
    """``t ≈ α + S/β`` per collective kind over its distinct message sizes (the median time of
    each size), ``None`` for a kind with fewer than :data:`comm.MIN_FIT_POINTS` sizes; the
    notice ``collective_wait_included`` says the times include waiting for peers."""
    by_kind: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row.bytes and row.time_s > 0:
            by_kind[row.collective][row.bytes].append(row.time_s)
    fits: dict[str, comm.AlphaBetaFit | None] = {}
    for kind, sizes in sorted(by_kind.items()):
        if len(sizes) < comm.MIN_FIT_POINTS:
            fits[kind] = None
            continue
        xs = sorted(sizes)
        ts = [float(np.median(sizes[s])) for s in xs]
        fits[kind] = comm.fit_alpha_beta(xs, ts, bootstrap=bootstrap, seed=seed)
    fitted = tuple(k for k, f in fits.items() if f is not None)
    notices = (Notice("collective_wait_included", {"collectives": fitted}),) if fitted else ()
    return fits, notices
