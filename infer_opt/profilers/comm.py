"""The collective sweep behind ``infer-opt comm``: every collective over message sizes, timed
on every rank with the project's timing core, checked for the right result first.

For each collective and message size ``S`` (bytes, nccl-tests' convention: the whole buffer —
the gathered output of all_gather, the input of reduce_scatter, the send buffer of
all_to_all — rounded down to whole elements, and for those three to ``n`` equal chunks):

1. every rank allocates its buffers and runs the collective once on known values (rank r
   contributes ``r + 1``, all_to_all chunk j of rank r holds ``r·n + j + 1``) and checks what
   it received; a wrong value is a :class:`RunFailure` on that rank;
2. the ranks meet at a barrier and each times the collective with :func:`timing.measure`
   (``warmup`` calls, then ``reps`` samples; CUDA events on a GPU, the monotonic clock on the
   CPU);
3. rank 0 gathers every rank's samples; the point's time is the slowest rank's median
   (:func:`infer_opt.cost_models.comm.comm_point`).

send_recv is the ring shift nccl-tests times: each rank sends ``S`` to rank ``r+1`` and
receives ``S`` from ``r−1`` at once (two ranks: a pair exchanging). With one rank no
collective has a peer: the sweep measures the device-local copy of ``S`` bytes instead and says
so. Each collective's α-β fit follows when its sizes are done; ``on_update`` gets the result
so far after every size (rank 0), so an interrupted sweep keeps what it measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from infer_opt.cost_models import comm as comm_module
from infer_opt.errors import InvalidInput, RunFailure
from infer_opt.notices import Notice
from infer_opt.profilers.distributed import RankContext, barrier, gather_to_reporter
from infer_opt.results.comm import CollectiveSweep, CommPoint, CommResult
from infer_opt.stats import VARIANCE_THRESHOLD

if TYPE_CHECKING:
    from infer_opt.requests import CommRequest

Progress = Callable[[int, int, str], None]

MIN_BYTES = 4
DEFAULT_MAX_BYTES_CPU = 16 * 2**20
DEFAULT_MAX_BYTES_CUDA = 64 * 2**20
DEFAULT_FACTOR = 2


def message_sizes(
    min_bytes: int, max_bytes: int, factor: int = DEFAULT_FACTOR, element: int = 1
) -> list[int]:
    """``min_bytes, min_bytes·factor, …`` up to ``max_bytes`` (included when on the grid), in
    whole elements of ``element`` bytes: the smallest size rounded up to one, the largest down,
    so no two sizes of the sweep build the same buffer."""
    if not isinstance(min_bytes, int) or min_bytes < 1:
        raise InvalidInput("min_size", min_bytes, "must be a whole number of bytes >= 1")
    if not isinstance(max_bytes, int) or max_bytes < min_bytes:
        raise InvalidInput("max_size", max_bytes, f"must be at least the smallest size ({min_bytes} B)")
    low = -(-min_bytes // element) * element
    if low > max_bytes:
        raise InvalidInput(
            "max_size", max_bytes, f"must hold at least one element from the smallest size ({low} B)"
        )
    sizes = [low]
    while sizes[-1] * factor <= max_bytes:
        sizes.append(sizes[-1] * factor)
    return sizes


@dataclass
class CollectiveOp:
    """One collective on buffers of one size: ``run`` times it, ``check`` runs it once on
    known values and returns the largest error this rank sees."""

    collective: str
    bytes: int
    run: Callable[[], object]
    check: Callable[[], float]


def _full(count: int, value: float, like: dict[str, Any]) -> torch.Tensor:
    return torch.full((count,), float(value), **like)


def _error(got: torch.Tensor, expected: torch.Tensor) -> float:
    return float((got.double() - expected.double()).abs().max().item()) if got.numel() else 0.0


def _all_gather(out: torch.Tensor, inp: torch.Tensor) -> None:
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    fn(out, inp)


def _reduce_scatter(out: torch.Tensor, inp: torch.Tensor) -> None:
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    fn(out, inp)


def _op_all_reduce(count: int, ctx: RankContext, like: dict[str, Any]) -> CollectiveOp:
    buf = torch.empty(count, **like)
    total = ctx.world_size * (ctx.world_size + 1) / 2

    def check() -> float:
        buf.fill_(ctx.rank + 1)
        dist.all_reduce(buf)
        return _error(buf, _full(count, total, like))

    return CollectiveOp("all_reduce", count * buf.element_size(), lambda: dist.all_reduce(buf), check)


def _op_broadcast(count: int, ctx: RankContext, like: dict[str, Any]) -> CollectiveOp:
    buf = torch.empty(count, **like)

    def check() -> float:
        buf.fill_(7.0 if ctx.rank == 0 else 0.0)
        dist.broadcast(buf, src=0)
        return _error(buf, _full(count, 7.0, like))

    return CollectiveOp("broadcast", count * buf.element_size(), lambda: dist.broadcast(buf, src=0), check)


def _op_all_gather(count: int, ctx: RankContext, like: dict[str, Any]) -> CollectiveOp:
    n = ctx.world_size
    chunk = max(1, count // n)
    inp, out = torch.empty(chunk, **like), torch.empty(chunk * n, **like)
    expected = torch.arange(1, n + 1, **like).repeat_interleave(chunk)

    def check() -> float:
        inp.fill_(ctx.rank + 1)
        _all_gather(out, inp)
        return _error(out, expected)

    return CollectiveOp("all_gather", out.numel() * out.element_size(), lambda: _all_gather(out, inp), check)


def _op_reduce_scatter(count: int, ctx: RankContext, like: dict[str, Any]) -> CollectiveOp:
    n = ctx.world_size
    chunk = max(1, count // n)
    inp, out = torch.empty(chunk * n, **like), torch.empty(chunk, **like)
    total = n * (n + 1) / 2

    def check() -> float:
        inp.fill_(ctx.rank + 1)
        _reduce_scatter(out, inp)
        return _error(out, _full(chunk, total, like))

    return CollectiveOp(
        "reduce_scatter", inp.numel() * inp.element_size(), lambda: _reduce_scatter(out, inp), check
    )


def _op_all_to_all(count: int, ctx: RankContext, like: dict[str, Any]) -> CollectiveOp:
    n, r = ctx.world_size, ctx.rank
    chunk = max(1, count // n)
    inp, out = torch.empty(chunk * n, **like), torch.empty(chunk * n, **like)
    sent = (r * n + torch.arange(1, n + 1, **like)).repeat_interleave(chunk)
    expected = (torch.arange(n, **like) * n + r + 1).repeat_interleave(chunk)

    def check() -> float:
        inp.copy_(sent)
        dist.all_to_all_single(out, inp)
        return _error(out, expected)

    return CollectiveOp(
        "all_to_all", inp.numel() * inp.element_size(), lambda: dist.all_to_all_single(out, inp), check
    )


def _op_send_recv(count: int, ctx: RankContext, like: dict[str, Any]) -> CollectiveOp:
    n, r = ctx.world_size, ctx.rank
    send, recv = torch.empty(count, **like), torch.empty(count, **like)

    def exchange() -> None:
        if ctx.backend == "nccl":
            # NCCL needs the pair grouped (ncclGroupStart/End), else both ranks' sends wait forever
            ops = [dist.P2POp(dist.isend, send, (r + 1) % n), dist.P2POp(dist.irecv, recv, (r - 1) % n)]
            works = dist.batch_isend_irecv(ops)
        else:
            works = [dist.isend(send, (r + 1) % n), dist.irecv(recv, (r - 1) % n)]
        for work in works:
            work.wait()

    def check() -> float:
        send.fill_(r + 1)
        recv.zero_()
        exchange()
        return _error(recv, _full(count, (r - 1) % n + 1, like))

    return CollectiveOp("send_recv", count * send.element_size(), exchange, check)


def _op_local_copy(count: int, ctx: RankContext, like: dict[str, Any]) -> CollectiveOp:
    del ctx
    src, dst = torch.empty(count, **like), torch.empty(count, **like)

    def check() -> float:
        src.copy_(torch.arange(count, **like))
        dst.copy_(src)
        return _error(dst, src)

    return CollectiveOp(comm_module.LOCAL_COPY, count * src.element_size(), lambda: dst.copy_(src), check)


_BUILDERS: dict[str, Callable[[int, RankContext, dict[str, Any]], CollectiveOp]] = {
    "all_reduce": _op_all_reduce,
    "all_gather": _op_all_gather,
    "reduce_scatter": _op_reduce_scatter,
    "broadcast": _op_broadcast,
    "all_to_all": _op_all_to_all,
    "send_recv": _op_send_recv,
    comm_module.LOCAL_COPY: _op_local_copy,
}


def build_op(collective: str, n_bytes: int, ctx: RankContext, dtype: torch.dtype) -> CollectiveOp:
    """The collective on buffers of about ``n_bytes`` (module docstring for the rounding)."""
    if collective not in _BUILDERS:
        raise InvalidInput(
            "collectives", collective, f"expected some of {', '.join(comm_module.COLLECTIVES)}"
        )
    like = {"device": ctx.device, "dtype": dtype}
    count = max(1, n_bytes // torch.empty((), dtype=dtype).element_size())
    return _BUILDERS[collective](count, ctx, like)


def tolerance(dtype: torch.dtype, world_size: int) -> float:
    """Largest error a checked run may show: the check values are integers up to ``n²``, exact
    in float32; in a 16-bit float they may round by one unit in the last place."""
    return float(torch.finfo(dtype).eps) * (world_size * world_size + 1)


def checked(op: CollectiveOp, rank: int, tol: float = 0.0) -> CollectiveOp:
    """``op`` after its one checked run; an error above ``tol`` on this rank is a
    :class:`RunFailure`."""
    error = op.check()
    if not math.isfinite(error) or error > tol:
        raise RunFailure(
            f"{op.collective} of {op.bytes} B gave a wrong result on rank {rank} "
            f"(largest error {error:g}); not timing it"
        )
    return op


def parse_collectives(names: Sequence[str], world_size: int) -> tuple[str, ...]:
    """The collectives ``names`` (checked by the request; ``all``: every one) in the canonical
    order; one rank has none (local copy only)."""
    if world_size == 1:
        return (comm_module.LOCAL_COPY,)
    return tuple(c for c in comm_module.COLLECTIVES if c in names or "all" in names)


# ---------------------------------------------------------------------------- the sweep


@dataclass(frozen=True)
class SweepSettings:
    collectives: tuple[str, ...]
    sizes: tuple[int, ...]
    dtype: torch.dtype
    warmup: int = 5
    reps: int = 20
    bootstrap: int = 200


def _time_op(op: CollectiveOp, ctx: RankContext, settings: SweepSettings) -> tuple[float, ...]:
    from infer_opt.profilers import timing

    barrier(ctx)
    m = timing.measure(op.run, device=ctx.device, warmup=settings.warmup, reps=settings.reps, time_cold=False)
    return m.samples_s


def _variance_notices(sweeps: Sequence[CollectiveSweep]) -> list[Notice]:
    out = []
    for s in sweeps:
        spreads = [(p.q3_s - p.q1_s) / p.time_s for p in s.points if p.time_s > 0]
        noisy = [x for x in spreads if x > VARIANCE_THRESHOLD]
        if noisy:
            out.append(
                Notice("comm_high_variance", {"sizes": len(noisy), "worst_rel_iqr": max(noisy)}, s.collective)
            )
        if s.parameters_at_bound:
            out.append(Notice("comm_fit_unpinned", {"parameters": list(s.parameters_at_bound)}, s.collective))
        out.extend(_side_notices(s))
    return out


def _side_notices(sweep: comm_module.CollectiveSweep) -> list[Notice]:
    """A fit whose sizes all lie on one side of its crossover S* measured only one of its terms:
    the other is extrapolated (β from latency-bound sizes only, or α from bandwidth-bound ones)."""
    sizes = [p.bytes for p in sweep.points]
    star = sweep.crossover_bytes
    if not sizes or star is None or not math.isfinite(star):
        return []
    if max(sizes) < star:
        values = {"parameter": "beta", "largest": max(sizes), "crossover": star}
    elif min(sizes) > star:
        values = {"parameter": "alpha", "smallest": min(sizes), "crossover": star}
    else:
        return []
    return [Notice("comm_fit_one_side", values, sweep.collective)]


@dataclass
class _Collected:
    """What rank 0 has so far."""

    done: list[CollectiveSweep]
    current: str | None = None
    points: list[CommPoint] | None = None


def _result(ctx: RankContext, settings: SweepSettings, got: _Collected, complete: bool) -> CommResult:
    from infer_opt.profilers.device import device_key, device_name, dtype_name

    sweeps = list(got.done)
    if got.current is not None and got.points:
        # the collective under way has no fit yet: its sizes so far would not pin one
        factor = comm_module.bus_factor(got.current, ctx.world_size)
        sweeps.append(CollectiveSweep(got.current, factor, tuple(got.points)))
    notices = _variance_notices(sweeps)
    if ctx.world_size == 1:
        notices.insert(0, Notice("comm_single_rank", {"device": str(ctx.device)}))
    if not complete:
        measured = sum(len(s.points) for s in sweeps)
        total = len(settings.collectives) * len(settings.sizes)
        notices.insert(0, Notice("comm_partial", {"measured": measured, "planned": total}))
    return CommResult(
        world_size=ctx.world_size,
        backend=ctx.backend,
        device=str(ctx.device),
        device_name=device_name(ctx.device),
        dtype=dtype_name(settings.dtype),
        collectives=tuple(sweeps),
        nnodes=ctx.nnodes,
        device_key=device_key(ctx.device, settings.dtype),
        warmup=settings.warmup,
        reps=settings.reps,
        complete=complete,
        warnings=tuple(notices),
    )


def _measure_size(
    ctx: RankContext, settings: SweepSettings, collective: str, n_bytes: int
) -> tuple[int, list[Sequence[float]] | None]:
    """One collective at one size on this rank: built, checked, timed; rank 0 gets every
    rank's samples."""
    op = build_op(collective, n_bytes, ctx, settings.dtype)
    checked(op, ctx.rank, tolerance(settings.dtype, ctx.world_size))
    return op.bytes, gather_to_reporter(ctx, _time_op(op, ctx, settings))


def _sweep_all(
    ctx: RankContext,
    settings: SweepSettings,
    got: _Collected,
    progress: Progress | None,
    on_update: Callable[[CommResult], None] | None,
) -> None:
    total = len(settings.collectives) * len(settings.sizes)
    for i, collective in enumerate(settings.collectives):
        got.current, got.points = collective, []
        for j, n_bytes in enumerate(settings.sizes):
            if progress is not None:
                progress(i * len(settings.sizes) + j, total, f"{collective} {n_bytes} B")
            actual, samples = _measure_size(ctx, settings, collective, n_bytes)
            if samples is not None:
                got.points.append(comm_module.comm_point(collective, actual, samples))
                if on_update is not None:
                    on_update(_result(ctx, settings, got, complete=False))
        if ctx.reporter:
            got.done.append(
                comm_module.sweep(collective, ctx.world_size, got.points, bootstrap=settings.bootstrap)
            )
        got.current, got.points = None, None


def run_sweep(
    ctx: RankContext,
    settings: SweepSettings,
    *,
    progress: Progress | None = None,
    on_update: Callable[[CommResult], None] | None = None,
) -> CommResult | None:
    """Run the sweep on this rank (module docstring). Rank 0 returns the result and gets the
    partial result after every size through ``on_update``; the other ranks return ``None``.
    An interrupt ends the sweep: rank 0 returns what it has (``complete=False``). Any other
    failure hands ``on_update`` what rank 0 has, then propagates."""
    got = _Collected(done=[])
    shown = progress if ctx.reporter else None
    try:
        _sweep_all(ctx, settings, got, shown, on_update if ctx.reporter else None)
    except KeyboardInterrupt:
        return _result(ctx, settings, got, complete=False) if ctx.reporter else None
    except BaseException:
        if ctx.reporter and on_update is not None:
            on_update(_result(ctx, settings, got, complete=False))
        raise
    if shown is not None:
        shown(1, 1, "done")
    return _result(ctx, settings, got, complete=True) if ctx.reporter else None


#: a rank holds about this many buffers of the largest message (input, output, the check's copy)
BUFFERS_PER_SIZE = 3


def default_max_bytes(device: torch.device) -> int:
    """64 MiB on a GPU, 16 MiB on the CPU."""
    return DEFAULT_MAX_BYTES_CUDA if device.type == "cuda" else DEFAULT_MAX_BYTES_CPU


def _settings(ctx: RankContext, request: CommRequest) -> SweepSettings:
    """The sweep the request asks for on this job (the buffers checked against this node's
    memory on the CPU, before any is allocated)."""
    from infer_opt.profilers.device import parse_dtype

    largest = int(request.max_size) if request.max_size is not None else default_max_bytes(ctx.device)
    if ctx.device.type == "cpu":
        from infer_opt.profilers.distributed import check_machine

        check_machine(ctx.local_world_size, "nproc", BUFFERS_PER_SIZE * largest, "max_size", request.max_size)
    dtype = parse_dtype(request.dtype, ctx.device)
    element = torch.empty((), dtype=dtype).element_size()
    return SweepSettings(
        collectives=parse_collectives(request.collective or ["all"], ctx.world_size),
        sizes=tuple(message_sizes(int(request.min_size), largest, request.factor, element)),
        dtype=dtype,
        warmup=request.warmup,
        reps=request.reps,
    )


def run(
    request: CommRequest,
    *,
    progress: Progress | None = None,
    on_update: Callable[[CommResult], None] | None = None,
    said: Callable[[str], None] = lambda line: None,
) -> CommResult | None:
    """``infer-opt comm`` on this rank: join the job (a job of one outside torchrun), check that
    every rank has the same request, :func:`run_sweep`, and cache a complete sweep's fit unless
    ``no_save`` (``said`` reports where). Rank 0 returns the result; the other ranks None, also
    when rank 0 reports a failure."""
    from infer_opt.profilers import distributed

    try:
        with distributed.rank_job(request.dist_backend, request.device, request.timeout) as ctx:
            distributed.check_same_arguments(
                ctx, {f: getattr(request, f) for f in request.__dataclass_fields__}
            )
            result = run_sweep(ctx, _settings(ctx, request), progress=progress, on_update=on_update)
    except distributed.ReportedByRankZero:
        return None
    if result is not None and result.complete and not request.no_save:
        from infer_opt.store import COMM

        try:
            said(f"saved the fit to {COMM.save(result).path}")
        except OSError as exc:
            said(f"could not save the fit to the cache ({exc.strerror}); use --out FILE.json")
    return result


# ---------------------------------------------------------------------------- saved fits


def comm_for(world_size: int, device_kind: str, path: Path | None = None) -> CommResult:
    """The comm sweep a ``--tp`` prediction prices its collectives with: ``path`` (a saved
    ``infer-opt comm --out FILE.json``), else the one cached for this world size on this kind of
    device (gloo on the CPU, NCCL on CUDA): the newest when several devices have one."""
    from infer_opt.results import load_result
    from infer_opt.store import COMM

    if path is not None:
        result = load_result(path, expect=("comm",), option="comm", what="a comm sweep").result
    else:
        backend = "nccl" if device_kind == "cuda" else "gloo"
        result = COMM.newest(f"{backend}-{world_size}ranks-")
        if result is None:
            why = f"no comm sweep over {world_size} ranks is saved: run infer-opt comm --nproc {world_size}"
            raise InvalidInput("tp", world_size, f"{why} first (or give --comm FILE)")
    measured_on = "cuda" if result.device.startswith("cuda") else "cpu"
    if measured_on != device_kind:
        raise InvalidInput(
            "comm",
            f"{result.backend} on {result.device_name or result.device}",
            f"the sweep was measured on {measured_on}; this prediction is for {device_kind}: "
            f"measure one there (infer-opt comm --nproc {world_size}) or give its --comm file",
        )
    if result.world_size != world_size:
        raise InvalidInput(
            "comm",
            result.world_size,
            f"the sweep was measured over {result.world_size} ranks; --tp is {world_size}",
        )
    return result
