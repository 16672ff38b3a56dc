"""Running one command on every rank of a ``torch.distributed`` job started by torchrun.

Launching. ``torchrun --nproc-per-node N -m infer_opt <command> …`` (one node or many:
``--nnodes``, ``--rdzv-endpoint``) starts N processes with ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` set; :func:`init` joins them. The
convenience ``infer-opt <command> … --nproc N`` (:func:`launch`) starts the very same job
through torchrun's own launcher, :func:`torch.distributed.run.run` (elastic launch, c10d
rendezvous on a free local port) — no process pool, socket or launcher of our own.

Ranks. Every rank runs the same work; rank 0 alone reports (:func:`gather_to_reporter`
hands it the other ranks' results, with ``gather_object``). The process group gets the
store torchrun's agent hosts (``TORCHELASTIC_USE_AGENT_STORE``; else rank 0 hosts one, as
``env://`` does), gloo on the CPU and NCCL on CUDA (one GPU per rank, ``cuda:LOCAL_RANK``).

Failures end the run on every rank, with one report naming the rank (:func:`failures_reported`):

* a rank that raises writes ``error/<rank>`` (its one-line error) into the store, then
  destroys its process group — which ends, at once, any collective a peer is blocked in
  (gloo: "connection closed by peer"; NCCL: at the latest when ``--timeout`` expires);
* a rank whose collective failed looks in the store for a peer's report (up to
  :data:`PEER_REPORT_WAIT_S`) before blaming the communication itself;
* rank 0 raises the root cause (the lowest rank whose error was not a communication
  error; its own first); the other ranks raise :class:`ReportedByRankZero` and exit quietly
  (exit 0, so the launcher does not stop rank 0 before it has reported);
* a rendezvous that does not complete within ``--timeout`` is an error naming how many ranks
  joined; collectives time out after ``--timeout`` too (``init_process_group(timeout=…)``);
* arguments that differ across ranks are found by :func:`check_same_arguments`;
* SIGINT / SIGTERM (Ctrl-C at a terminal reaches the launcher, which passes it to every
  rank) raise ``KeyboardInterrupt``, so rank 0 keeps what it already received.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from infer_opt.errors import InferOptError, InvalidInput, RunFailure

DEFAULT_TIMEOUT_S = 60.0
#: how long a rank whose collective failed waits for a peer's report of the root cause
PEER_REPORT_WAIT_S = 5.0
_POLL_S = 0.05
#: what torchrun sets in each worker (MASTER_ADDR/PORT point at the rendezvous store)
ENV_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
#: words in an error that make it a communication failure rather than a rank's own error
_COMM_MARKERS = (
    "gloo",
    "nccl",
    "connection closed",
    "connection reset",
    "broken pipe",
    "processgroup",
    "c10d",
    "timed out",
    "socket",
)
BACKENDS = ("auto", "gloo", "nccl")


class ReportedByRankZero(InferOptError):
    """Raised on a rank other than 0 once its failure (or a peer's) has been handed to rank
    0, which reports it: the command exits quietly with :attr:`exit_code`."""

    exit_code = 0


class RankFailure(RunFailure):
    """The root cause of a failed distributed run, as rank 0 reports it: ``rank R: …``."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class RankContext:
    """This process's place in the job."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    nnodes: int
    backend: str
    device: torch.device
    timeout_s: float
    #: the rendezvous store, under this package's own prefix (error reports live here)
    store: Any

    @property
    def reporter(self) -> bool:
        """Whether this rank prints and writes (rank 0)."""
        return self.rank == 0


def launched() -> bool:
    """Whether this process is a worker of a torchrun job (its environment names a rank)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def env_rank() -> int:
    """This worker's rank from torchrun's environment (0 outside a job)."""
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def _env_int(name: str) -> int:
    value = os.environ.get(name)
    if value is None:
        missing = [k for k in ENV_KEYS if k not in os.environ]
        raise RunFailure(
            f"not started by torchrun: the environment lacks {', '.join(missing)}; run "
            "torchrun --nproc-per-node N -m infer_opt … or add --nproc N"
        )
    try:
        return int(value)
    except ValueError:
        raise RunFailure(f"torchrun's environment variable {name}={value!r} is not an integer") from None


def resolve_backend(backend: str, device: torch.device) -> str:
    """``auto`` = NCCL on CUDA, gloo on the CPU; an explicit choice is checked against the
    device and this torch build."""
    choice = backend.strip().lower()
    if choice not in BACKENDS:
        raise InvalidInput("backend", backend, f"expected one of {', '.join(BACKENDS)}")
    if choice == "auto":
        choice = "nccl" if device.type == "cuda" else "gloo"
    if choice == "nccl" and device.type != "cuda":
        raise InvalidInput("backend", backend, "NCCL runs on CUDA devices; use gloo on the CPU")
    available = dist.is_nccl_available() if choice == "nccl" else dist.is_gloo_available()
    if not available:
        raise InvalidInput("backend", choice, "this torch build does not include it")
    return choice


def check_gpus(device: str, ranks: int, option: str = "nproc") -> None:
    """A CUDA run needs one GPU per rank on this node (NCCL cannot put two ranks on one GPU):
    :class:`InvalidInput` naming ``option`` otherwise. Nothing to check on the CPU."""
    from infer_opt.profilers.device import resolve_device

    if resolve_device(device).type != "cuda":
        return
    count = torch.cuda.device_count()
    if ranks > count:
        raise InvalidInput(
            option,
            ranks,
            f"a CUDA run needs one GPU per rank: this node has {count} GPU(s) for {ranks} ranks "
            "(NCCL cannot put two ranks on one GPU); use --device cpu or fewer ranks",
        )


#: at most this many ranks per CPU core (more only wait on each other: a sweep would measure the scheduler)
RANKS_PER_CORE = 4
#: what one rank costs before it allocates anything (a Python process with torch loaded)
RANK_BASE_BYTES = 256 << 20


def available_memory() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo`` in bytes (None where it cannot be read)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_machine(
    ranks: int,
    option: str = "nproc",
    per_rank_bytes: float = 0.0,
    size_option: str | None = None,
    size_value: Any = None,
) -> None:
    """Refuse, before any rank starts, more ranks than this machine can hold: more than
    :data:`RANKS_PER_CORE` per CPU core, or ``ranks × (RANK_BASE_BYTES + per_rank_bytes)``
    above the memory available now. The message says what fits. ``size_option`` names the
    option that set ``per_rank_bytes`` (blamed when the rank count alone would fit)."""
    cores = os.cpu_count() or 1
    if ranks > RANKS_PER_CORE * cores:
        raise InvalidInput(
            option,
            ranks,
            f"this machine has {cores} CPU core(s): at most {RANKS_PER_CORE * cores} ranks "
            f"({RANKS_PER_CORE} per core) fit",
        )
    free = available_memory()
    if free is None:
        return
    need = ranks * (RANK_BASE_BYTES + per_rank_bytes)
    if need <= free:
        return
    fit = int(free // (RANK_BASE_BYTES + per_rank_bytes))
    gib = free / (1 << 30)
    if size_option is not None and ranks * RANK_BASE_BYTES <= free:
        most = max(0.0, free / ranks - RANK_BASE_BYTES)
        raise InvalidInput(
            size_option,
            per_rank_bytes if size_value is None else size_value,
            f"{ranks} rank(s) would need {need / (1 << 30):.3g} GiB, "
            f"{gib:.3g} GiB of memory is available: at most {most / (1 << 20):.0f} MiB of buffers "
            "per rank fit (each rank holds a few buffers of the largest size)",
        )
    raise InvalidInput(
        option,
        ranks,
        f"{ranks} ranks would need {need / (1 << 30):.3g} GiB, {gib:.3g} GiB of memory is "
        f"available: at most {fit} rank(s) fit",
    )


def rank_device(device: str, local_rank: int, local_world_size: int) -> torch.device:
    """The device of this rank: ``cuda:LOCAL_RANK`` for a CUDA run (one GPU per rank), the CPU
    otherwise. ``auto`` is CUDA when available."""
    from infer_opt.profilers.device import resolve_device

    base = resolve_device(device)
    if base.type != "cuda":
        return base
    check_gpus(device, local_world_size)
    return torch.device("cuda", local_rank)


def _store(rank: int, world_size: int, timeout_s: float) -> Any:
    """The rendezvous store: a client of torchrun's agent store, or (outside an elastic
    agent) hosted by rank 0, exactly as ``env://`` does it."""
    host, port = os.environ["MASTER_ADDR"], _env_int("MASTER_PORT")
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    return dist.TCPStore(
        host,
        port,
        world_size,
        is_master=rank == 0 and not agent_store,
        timeout=datetime.timedelta(seconds=timeout_s),
        multi_tenant=True,
    )


def init(backend: str, device: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> RankContext:
    """Join the job torchrun started (module docstring), or — in a process torchrun did not
    start — make a job of one rank. A rendezvous that does not complete within ``timeout_s``
    is a :class:`RunFailure` naming what was missing."""
    if not launched():
        return _single(backend, device, timeout_s)
    die_with_launcher()
    rank, world_size = _env_int("RANK"), _env_int("WORLD_SIZE")
    local_rank = _env_int("LOCAL_RANK")
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    dev = rank_device(device, local_rank, local_world_size)
    name = resolve_backend(backend, dev)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    try:
        store = _store(rank, world_size, timeout_s)
        dist.init_process_group(
            name,
            store=dist.PrefixStore("infer_opt_pg", store),
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    except (dist.DistError, RuntimeError) as exc:
        raise RunFailure(
            f"rank {rank}: the rendezvous did not complete within {timeout_s:g} s ({_one_line(exc)}); "
            f"are all {world_size} ranks started, and MASTER_ADDR:MASTER_PORT reachable from each? "
            "(--timeout sets the limit)"
        ) from exc
    _install_signal_handlers()
    return RankContext(
        rank=rank,
        world_size=world_size,
        local_rank=local_rank,
        local_world_size=local_world_size,
        nnodes=int(os.environ.get("GROUP_WORLD_SIZE", "1") or 1),
        backend=name,
        device=dev,
        timeout_s=timeout_s,
        store=dist.PrefixStore("infer_opt", store),
    )


#: after its launcher is gone, how long a rank may take to stop (and save) before it is ended
ORPHAN_GRACE_S = 5.0
_PR_SET_PDEATHSIG = 1


def die_with_launcher() -> None:
    """Make this rank end with the process that started it: the kernel sends SIGTERM when
    the parent dies (``prctl(PR_SET_PDEATHSIG)``, Linux), and a watchdog thread that sees
    the parent change (re-parented: the launcher was killed) sends SIGTERM to this rank
    (an interrupt: rank 0 keeps what it had), then ends it :data:`ORPHAN_GRACE_S` later."""
    import threading

    parent = os.getppid()
    with contextlib.suppress(Exception):  # not Linux, no libc: the watchdog still runs
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)  # the launcher died before the signal was set
    threading.Thread(target=_watch_parent, args=(parent,), name="infer-opt-orphan-watch", daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    with contextlib.suppress(Exception):
        os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(ORPHAN_GRACE_S)
    os._exit(1)


def _single(backend: str, device: str, timeout_s: float) -> RankContext:
    """A job of one rank in this process (an in-memory store, no rendezvous)."""
    dev = rank_device(device, 0, 1)
    name = resolve_backend(backend, dev)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    store = dist.HashStore()
    dist.init_process_group(
        name, store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=timeout_s)
    )
    _install_signal_handlers()
    return RankContext(0, 1, 0, 1, 1, name, dev, timeout_s, dist.PrefixStore("infer_opt", store))


def shutdown() -> None:
    """Leave the job: destroy the process group (if a failure has not already) and give
    SIGTERM back its default action."""
    if dist.is_initialized():
        dist.destroy_process_group()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _install_signal_handlers() -> None:
    """SIGTERM (what the launcher sends when it stops a job) raises ``KeyboardInterrupt``
    like SIGINT, so rank 0 keeps what it has instead of dying mid-write."""
    signal.signal(signal.SIGTERM, _interrupt)


@contextmanager
def rank_job(backend: str, device: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[RankContext]:
    """:func:`init`, then the body under :func:`failures_reported`, then :func:`shutdown`."""
    ctx = init(backend, device, timeout_s)
    try:
        with failures_reported(ctx):
            yield ctx
    finally:
        shutdown()


# ---------------------------------------------------------------------------- agreement and gathering


def check_same_arguments(ctx: RankContext, params: Mapping[str, Any]) -> None:
    """Every rank must run the same command: compare ``params`` (the parsed arguments) over
    ranks and raise :class:`InvalidInput` naming the first that differs, value per rank."""
    gathered: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(gathered, {k: repr(v) for k, v in params.items()})
    for key in params:
        values = [g.get(key) for g in gathered]
        if len(set(values)) > 1:
            per_rank = ", ".join(f"rank {r}: {v}" for r, v in enumerate(values))
            raise InvalidInput(key, params[key], f"must be the same on every rank ({per_rank})")


def gather_to_reporter(ctx: RankContext, obj: Any) -> list[Any] | None:
    """Every rank's ``obj`` on rank 0, in rank order; ``None`` on the other ranks."""
    out: list[Any] | None = [None] * ctx.world_size if ctx.reporter else None
    dist.gather_object(obj, out, dst=0)
    return out


def barrier(ctx: RankContext) -> None:
    """Wait for every rank (on CUDA, on this rank's device)."""
    if ctx.device.type == "cuda":
        dist.barrier(device_ids=[ctx.device.index])
    else:
        dist.barrier()


# ---------------------------------------------------------------------------- failures


def is_comm_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a failed collective rather than a rank's own
    error: a ``torch.distributed`` error, or a message naming the transport."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, dist.DistError):
            return True
        text = str(current).lower()
        if any(marker in text for marker in _COMM_MARKERS):
            return True
        current = current.__cause__ or current.__context__
    return False


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, InferOptError):
        text = str(exc)
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= 400 else text[:397] + "..."


def _report(exc: BaseException) -> dict[str, Any]:
    """What a rank writes into the store about its failure."""
    report: dict[str, Any] = {
        "time": time.time(),
        "comm": is_comm_error(exc),
        "exit_code": getattr(exc, "exit_code", 1),
        "message": _one_line(exc),
    }
    if isinstance(exc, InvalidInput):
        report["invalid"] = [exc.option, repr(exc.value), exc.expected]
    return report


def _publish(ctx: RankContext, report: Mapping[str, Any]) -> None:
    # the store may be gone with a dead launcher: then there is nobody to tell
    with contextlib.suppress(Exception):
        ctx.store.set(f"error/{ctx.rank}", json.dumps(report))


def _abort() -> None:
    """Destroy the process group so peers blocked in a collective with this rank fail now."""
    with contextlib.suppress(Exception):  # a broken group is what we are getting rid of
        if dist.is_initialized():
            dist.destroy_process_group()


def _peer_reports(ctx: RankContext, wait_s: float) -> dict[int, dict[str, Any]]:
    """Reports other ranks wrote, polling up to ``wait_s`` for one that names a rank's own
    error (not a failed collective)."""
    deadline = time.monotonic() + wait_s
    found: dict[int, dict[str, Any]] = {}
    while True:
        for peer in range(ctx.world_size):
            key = f"error/{peer}"
            if peer == ctx.rank or peer in found:
                continue
            try:
                if ctx.store.check([key]):
                    found[peer] = json.loads(ctx.store.get(key))
            except Exception:  # unreadable store: report what we have
                return found
        if any(not r.get("comm") for r in found.values()) or time.monotonic() >= deadline:
            return found
        time.sleep(_POLL_S)


def _root_cause(ctx: RankContext, exc: BaseException, own: dict[str, Any]) -> BaseException:
    """The error rank 0 reports: its own when it is not a communication failure, else the
    lowest rank's own error from the store, else the communication failure itself."""
    if not own["comm"]:
        if isinstance(exc, InferOptError) and not isinstance(exc, RunFailure):
            return exc
        return RankFailure(f"rank 0: {own['message']}", own["exit_code"] or 1)
    peers = _peer_reports(ctx, min(PEER_REPORT_WAIT_S, ctx.timeout_s))
    causes = sorted((r, p) for r, p in peers.items() if not p.get("comm"))
    if causes:
        rank, report = causes[0]
        if "invalid" in report:
            option, value, expected = report["invalid"]
            return InvalidInput(option, value, f"{expected} (on rank {rank})")
        return RankFailure(f"rank {rank}: {report['message']}", int(report.get("exit_code") or 1))
    return RankFailure(
        f"rank 0: a collective failed ({own['message']}); another rank may have died — see the launcher's log"
    )


def _handled(ctx: RankContext, exc: BaseException) -> BaseException:
    own = _report(exc)
    _publish(ctx, own)
    _abort()
    if not ctx.reporter:
        return ReportedByRankZero(f"rank {ctx.rank}: {own['message']} (reported by rank 0)")
    return _root_cause(ctx, exc, own)


@contextmanager
def failures_reported(ctx: RankContext) -> Iterator[None]:
    """Turn a failure on any rank into one report by rank 0 (module docstring). An
    interrupt stops this rank's collectives too (the process group is destroyed) and is
    re-raised."""
    try:
        yield
    except ReportedByRankZero:
        raise
    except KeyboardInterrupt:
        _abort()
        raise
    except Exception as exc:
        raise _handled(ctx, exc) from exc


# ---------------------------------------------------------------------------- --nproc


def launch(
    nproc: int,
    module_args: Sequence[str],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    module: str = "infer_opt",
    quiet: bool = True,
) -> int:
    """``infer-opt <command> … --nproc N``: start ``torchrun --standalone --nproc-per-node N
    -m infer_opt <command> …`` (``module_args``, without ``--nproc``) through torchrun's own
    :func:`torch.distributed.run.run`, and return the job's exit code (0 when every rank
    succeeded). When rank 0 has reported the failure itself, nothing more is said; a rank
    that died without a word (a signal, an exit before the rendezvous) is a
    :class:`RankFailure`. ``quiet`` silences the launcher's own log lines."""
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    if not isinstance(nproc, int) or nproc < 1:
        raise InvalidInput("nproc", nproc, "must be an integer >= 1")
    args = torchrun.parse_args(
        [
            "--standalone",
            f"--nproc-per-node={nproc}",
            "--max-restarts=0",
            f"--rdzv-conf=join_timeout={max(1, round(timeout_s))}",
            "-m",
            module,
            *module_args,
        ]
    )
    with _quiet_launcher(quiet):
        try:
            torchrun.run(args)
        except ChildFailedError as exc:
            return _child_failure(exc)
        except SignalException as exc:
            raise KeyboardInterrupt(str(exc)) from None
    return 0


@contextmanager
def _quiet_launcher(quiet: bool) -> Iterator[None]:
    """torchrun's agent logs its start-up, shutdown and failed workers; keep the terminal for
    rank 0's report unless told otherwise (``--debug``)."""
    if not quiet:
        yield
        return
    names = ("torch.distributed.elastic", "torch.distributed.run", "torch.distributed.launcher")
    saved = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def _child_failure(exc: Any) -> int:
    """The job's exit code after a failure; raises when no rank has said why."""
    failures = exc.failures
    others = {rank: f for rank, f in failures.items() if rank != 0}
    zero = failures.get(0)
    # rank 0's own report stands, unless it only stopped because the launcher stopped it
    # after another rank died (SIGTERM: rank 0 kept its partial result and said "interrupted")
    if zero is not None and zero.exitcode > 0 and (zero.exitcode != INTERRUPTED or not others):
        return int(zero.exitcode)
    if others:
        rank, failure = min(others.items(), key=lambda item: (item[1].timestamp, item[0]))
    else:
        rank, failure = exc.get_first_failure()
    raise RankFailure(_how_it_ended(rank, failure))


INTERRUPTED = 130


def _how_it_ended(rank: int, failure: Any) -> str:
    """``rank 1 was killed by SIGKILL`` / ``rank 1 exited with code 3``, and what was kept."""
    if failure.exitcode < 0:
        how = f"rank {rank} was killed by {failure.signal_name()}"
    elif failure.exitcode == INTERRUPTED:
        how = f"rank {rank} was interrupted"
    else:
        how = f"rank {rank} exited with code {failure.exitcode}"
    return f"{how} before the run finished (what rank 0 had measured is kept where it was written)"
