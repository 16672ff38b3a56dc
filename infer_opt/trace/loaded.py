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
from dataclasses import asdict
from functools import cached_property
from typing import Any

from infer_opt.errors import BadField, InvalidInput
from infer_opt.requests import TraceRequest
from infer_opt.results.trace import TraceResult
from infer_opt.trace import analyze
from infer_opt.trace.analyze import Analysis
from infer_opt.trace.events import GPU_KIND_NAMES
from infer_opt.trace.reader import PARAM


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


def run(request: TraceRequest) -> LoadedTrace:
    """:func:`infer_opt.load_trace`: the analysis as ``infer-opt trace`` runs it, with its frames;
    a trace the reader refuses (``TRACE``) is said as the parameter ``paths``."""
    try:
        return LoadedTrace(analyze.run(request))
    except InvalidInput as err:
        if isinstance(err, BadField) or err.option != PARAM:
            raise
        raise err.under("paths", err.value) from None


__all__ = ["LoadedTrace", "run"]
