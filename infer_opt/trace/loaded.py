"""``infer_opt.load_trace(path)``: the ``trace`` analysis for Python users, with its tables as
pandas DataFrames (whole, never cut at a display's ``--top``), as HTA users expect::

    t = infer_opt.load_trace("rank0.json.gz", device="h100")
    t.result                 # the TraceResult (what ``infer-opt trace --json`` writes)
    t.ops                    # one row per (op, shapes, dtype) group
    t.kernels                # one row per GPU event of the analyzed steps, with its op
    t.kernel_names           # one row per kernel name: calls, time, share, family and its source
    t.steps, t.ranks         # the timeline per step and per rank
    t.critical_path          # seconds by cause on each step's critical path (kernel:<category> rows)
    t.idle_causes, t.what_ifs  # idle time by cause; the what-ifs, replayed beside Amdahl
    t.replay("gemm*=0.5x")   # every GPU event's measured and replayed start and end (a --what-if edit)

    t.stragglers, t.collective_skew, t.imbalance   # across ranks (two or more of one job)

``load_trace(folder, scheduler="tcp://host:8786")`` reads the ranks on a Dask cluster (the
workers read the files from a path they share); the kernels frame then reads the events again
here, when first asked for.

pandas is imported only when a frame is first asked for.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict
from functools import cached_property
from typing import Any

from infer_opt.errors import BadField, InvalidInput
from infer_opt.results.trace import TraceResult
from infer_opt.trace.analyze import Analysis, analyze, parse_steps
from infer_opt.trace.events import GPU_KIND_NAMES
from infer_opt.trace.op_costs import CAUSAL_CONVENTIONS


class LoadedTrace:
    """A trace analysis and its tables as DataFrames (built once, on first use)."""

    def __init__(self, analysis: Analysis):
        self.analysis = analysis
        self.result: TraceResult = analysis.result

    def __repr__(self) -> str:
        r = self.result
        device = r.device_name or "unknown device"
        return f"LoadedTrace({len(r.files)} file(s), {device}, {len(r.ops)} op groups)"

    @cached_property
    def ops(self) -> Any:
        import pandas as pd

        rows = [{k: v for k, v in asdict(g).items() if k != "kernel_names"} for g in self.result.ops]
        for row, g in zip(rows, self.result.ops, strict=True):
            row["kernel_names"] = " | ".join(g.kernel_names)
        return pd.DataFrame(rows)

    @cached_property
    def steps(self) -> Any:
        import pandas as pd

        return pd.DataFrame([{"rank": r.rank, **asdict(s)} for r in self.result.ranks for s in r.steps])

    @cached_property
    def ranks(self) -> Any:
        import pandas as pd

        keys = ("rank", "path", "idle_fraction", "compute_fraction", "non_compute_fraction",
                "overlap_fraction", "comm_fraction", "comm_overlapped_fraction", "step_time_median_s",
                "step_time_spread_s")  # fmt: skip
        return pd.DataFrame([{k: getattr(r, k) for k in keys} for r in self.result.ranks])

    @cached_property
    def stragglers(self) -> Any:
        """Per step, the rank the others waited for longest and its cost (empty: one rank)."""
        import pandas as pd

        cross = self.result.cross_rank
        return pd.DataFrame([asdict(s) for s in cross.straggler] if cross else [])

    @cached_property
    def collective_skew(self) -> Any:
        """One row per (matched collective, rank): skew, that rank's wait, the transfer."""
        import pandas as pd

        cross = self.result.cross_rank
        rows = []
        for m in cross.collectives if cross else ():
            common = {k: v for k, v in asdict(m).items() if k not in ("ranks", "wait_s")}
            rows += [{**common, "rank": r, "wait_s": w} for r, w in zip(m.ranks, m.wait_s, strict=True)]
        return pd.DataFrame(rows)

    @cached_property
    def imbalance(self) -> Any:
        """Per rank: median step time, compute and idle, and whether it is an outlier."""
        import pandas as pd

        cross = self.result.cross_rank
        return pd.DataFrame([asdict(r) for r in cross.imbalance] if cross else [])

    def _events(self) -> tuple[tuple, tuple]:
        if self.analysis.traces or not self.result.files:
            return self.analysis.traces, self.analysis.masks
        from infer_opt.trace.reader import read_trace
        from infer_opt.trace.timeline import analyzed_mask

        traces = tuple(read_trace(f) for f in self.result.files)
        return traces, tuple(analyzed_mask(ev, self.analysis.steps) for ev in traces)

    @cached_property
    def kernels(self) -> Any:
        import numpy as np
        import pandas as pd

        from infer_opt.trace.timeline import classify

        frames = []
        traces, masks = self._events()
        for rank, events, mask in zip(self.result.ranks, traces, masks, strict=True):
            g = events.gpu
            idx = np.flatnonzero(mask)
            names = np.array(events.names, dtype=object)
            op = g.op[idx]
            has_op = op >= 0
            op_names = np.full(len(idx), "", dtype=object)
            if len(events.ops) and has_op.any():
                op_names[has_op] = names[events.ops.name[op[has_op]]]
            step_numbers = np.array([s.number for s in events.steps] or [0])[np.maximum(g.step[idx], 0)]
            categories = np.array(["compute", "communication", "memory", "sync"], dtype=object)
            frames.append(
                pd.DataFrame(
                    {
                        "rank": rank.rank,
                        "step": np.where(g.step[idx] >= 0, step_numbers, -1),
                        "name": names[g.name[idx]] if len(idx) else [],
                        "kind": np.array(GPU_KIND_NAMES, dtype=object)[g.kind[idx]],
                        "category": categories[classify(events)[idx]],
                        "stream": g.stream[idx],
                        "ts_us": g.ts_us[idx],
                        "dur_us": g.dur_us[idx],
                        "correlation": g.correlation[idx],
                        "op": op_names,
                    }
                )
            )
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    @cached_property
    def kernel_names(self) -> Any:
        """One row per kernel name (``result.kernels``): calls, time, share, family, its source."""
        import pandas as pd

        keys = ("name", "calls", "time_s", "fraction", "family", "family_source")
        return pd.DataFrame([asdict(k) for k in self.result.kernels], columns=list(keys))

    @cached_property
    def critical_path(self) -> Any:
        """One row per (rank, step, cause): ``host``, ``launch``, ``kernel:<category>``, ``memcpy``,
        ``sync_wait``, ``comm`` (seconds; a step's rows sum to its replayed span)."""
        import pandas as pd

        rows = []
        for r in self.result.ranks:
            for s in r.steps:
                causes = {k: v for k, v in s.critical_path.items() if k != "kernel"}
                causes.update({f"kernel:{k}": v for k, v in s.critical_kernels.items()})
                rows += [{"rank": r.rank, "step": s.step, "cause": k, "time_s": v} for k, v in causes.items()]
        return pd.DataFrame(rows, columns=["rank", "step", "cause", "time_s"])

    @cached_property
    def idle_causes(self) -> Any:
        import pandas as pd

        return pd.DataFrame(
            [asdict(c) for c in self.result.idle_causes], columns=["cause", "time_s", "fraction"]
        )

    @cached_property
    def what_ifs(self) -> Any:
        import pandas as pd

        return pd.DataFrame([asdict(w) for w in self.result.what_if])

    def replay(self, what_if: str | None = None, *, rank: int = 0) -> Any:
        """Every GPU event of rank ``rank`` (position) with its measured and replayed start and
        end (µs, trace time): unedited, or with a ``--what-if`` edit (e.g. ``"host=2x"``)."""
        import pandas as pd

        from infer_opt.trace.replay import replay
        from infer_opt.trace.user_edits import edit_of

        if not 0 <= rank < len(self.analysis.traces):
            raise InvalidInput("rank", repr(rank), f"a position 0..{len(self.analysis.traces) - 1}")
        rr = self.analysis.replays[rank] if self.analysis.replays else None
        if rr is None:
            raise InvalidInput("replay", os.path.basename(self.analysis.traces[rank].path), "not replayed")
        events = self.analysis.traces[rank]
        rep = rr.replayed
        if what_if is not None:
            e = edit_of(events, rr, what_if, self.analysis.masks[rank], self.result.causal_flops)
            rep = replay(rr.graph, dur=e.dur, l1=e.l1, l2=e.l2, base=e.base, waits=e.waits, since=rr.replayed)
        g = events.gpu
        return pd.DataFrame(
            {
                "name": [events.names[i] for i in g.name.tolist()],
                "stream": g.stream,
                "step": g.step,
                "ts_us": g.ts_us,
                "end_us": g.ts_us + g.dur_us,
                "replayed_ts_us": rep.gpu_start_us(),
                "replayed_end_us": rep.gpu_end_us(),
            }
        )

    def to_frame(self) -> Any:
        """The result's main table, as :meth:`TraceResult.to_frame` gives it (the op groups
        as ``--csv`` writes them, every row); :attr:`ops` holds every field of each group."""
        return self.result.to_frame()


def load_trace(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    steps: str | None = None,
    device: str | None = None,
    peak_flops: float | None = None,
    peak_bandwidth: float | None = None,
    hta_compat: bool = False,
    causal_flops: str = "half",
    matmul_fraction: float = 0.7,
    capture: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None,
    scheduler: Any | None = None,
    workers: int | None = None,
    strict: bool = False,
) -> LoadedTrace:
    """Analyze trace file(s) as ``infer-opt trace`` does; bad input raises
    :class:`~infer_opt.errors.InvalidInput` naming the parameter, as the CLI refuses it.
    ``scheduler``: a Dask scheduler address (or ``distributed.Client``) to read the ranks on;
    ``workers``: local processes (default the cores); ``strict``: refuse when a rank cannot be read."""
    paths = _paths(paths)
    o = _check_options(
        steps=steps, device=device, peak_flops=peak_flops, peak_bandwidth=peak_bandwidth,
        hta_compat=hta_compat, causal_flops=causal_flops, matmul_fraction=matmul_fraction, workers=workers,
        strict=strict,
    )  # fmt: skip
    captures = [capture] if isinstance(capture, (str, os.PathLike)) else capture
    for p in captures or ():
        if not isinstance(p, (str, os.PathLike)) or not os.path.exists(p):
            raise InvalidInput("capture", repr(p), "an existing capture trace file (str or os.PathLike)")
    try:
        return LoadedTrace(
            analyze(
                paths,
                steps=parse_steps(o["steps"]),
                hta_compat=o["hta_compat"],
                device=o["device"],
                peak_flops=o["peak_flops"],
                peak_bandwidth=o["peak_bandwidth"],
                causal=o["causal_flops"],
                matmul_peak_fraction=o["matmul_fraction"],
                capture=list(captures) if captures is not None else None,
                scheduler=scheduler,
                workers=o["workers"],
                strict=o["strict"],
                keep_events=scheduler is None,
            )
        )
    except InvalidInput as err:  # the CLI's flag (--device) said as this function's parameter
        if isinstance(err, BadField) or err.option not in _PARAMETER:
            raise
        raise InvalidInput(_PARAMETER[err.option], err.value, err.expected) from None


#: the CLI's flags the analysis names, as load_trace's parameters
_PARAMETER = {"--steps": "steps", "--device": "device", "--peak-flops": "peak_flops",
              "--peak-bandwidth": "peak_bandwidth", "--hta-compat": "hta_compat",
              "--causal-flops": "causal_flops", "--matmul-fraction": "matmul_fraction",
              "--matmul-peak-fraction": "matmul_fraction", "TRACE": "paths",
              "--capture": "capture", "--scheduler": "scheduler",
              "--workers": "workers", "--strict": "strict"}  # fmt: skip
_PATHS = "a trace file or folder (a str or os.PathLike), or a list of them"


def _paths(paths: Any) -> list[str | os.PathLike[str]]:
    """``paths`` as a list of paths that exist; anything else refused naming ``paths``."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    elif isinstance(paths, (bytes, bytearray)) or not isinstance(paths, Iterable):
        raise InvalidInput("paths", repr(paths), _PATHS)
    paths = list(paths)
    if not paths:
        raise InvalidInput("paths", "[]", "give at least one trace file or folder")
    for p in paths:
        if not isinstance(p, (str, os.PathLike)) or isinstance(os.fspath(p), bytes):
            raise InvalidInput("paths", repr(p), _PATHS)
        if not os.path.exists(p):
            raise InvalidInput("paths", os.fspath(p), "file does not exist")
    return paths


def _check_options(**options: Any) -> dict[str, Any]:
    """Each option of :func:`load_trace` checked as the CLI's flag is (None passes), named as
    its parameter; the values the analysis takes."""
    from infer_opt import requests as r

    checks = {"steps": r.Text(), "device": r.Text(), "hta_compat": r.Flag(), "peak_flops": r.FlopRate(),
              "peak_bandwidth": r.Bandwidth(), "causal_flops": r.Choice(CAUSAL_CONVENTIONS),
              "matmul_fraction": r.Fraction(low=0.01), "workers": r.Count(1, 1024),
              "strict": r.Flag()}  # fmt: skip
    return {k: v if v is None else checks[k].check(v, k) for k, v in options.items()}


__all__ = ["LoadedTrace", "load_trace"]
