"""``--kernels-from OTHER``: replay this trace with another GPU's kernel times (pure; numpy).

The same model traced on another device: its ops are matched to this trace's in order, by op
group (``ops._key``: op name, input shapes, dtype) — the i-th instance of a group here takes
the GPU time of the i-th instance of that group there (cycling when the other trace has fewer
steps). Each matched instance's kernels are scaled by ``their time there / their time here``;
GPU events without an op, and ops without a match, keep their time. The host, its launches and
syncs stay this trace's: a launch-bound step measures *this* host. Fewer than
:data:`MIN_MATCHED` of the instances matched: another model, refused in one line saying how
many matched.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from infer_opt.errors import InvalidInput
from infer_opt.results.trace import StepTimeline, WhatIf
from infer_opt.trace import timeline as tt
from infer_opt.trace import whatif_replay as twr
from infer_opt.trace.events import TraceEvents
from infer_opt.trace.ops import attribute
from infer_opt.trace.replay import RankReplay

FLAG = "--kernels-from"
MIN_MATCHED = 0.5


def op_instances(
    events: TraceEvents, mask: np.ndarray, causal: str
) -> dict[tuple, list[tuple[float, list[int]]]]:
    """Each op group -> its instances in launch order: (summed GPU µs, GPU event indices)."""
    keys = twr._event_keys(events, causal)
    owner = attribute(events, None, causal).owner
    work = mask & (tt.classify(events) != tt.WAIT)
    idx = np.flatnonzero(work & (owner >= 0))
    idx = idx[np.argsort(events.gpu.ts_us[idx], kind="stable")]
    by_op: dict[int, list[int]] = {}
    for j in idx.tolist():
        by_op.setdefault(int(owner[j]), []).append(j)
    out: dict[tuple, list[tuple[float, list[int]]]] = {}
    for js in by_op.values():
        key = keys[js[0]]
        if key is not None:
            out.setdefault(key, []).append((float(events.gpu.dur_us[js].sum()), js))
    return out


def kernels_from_what_if(
    events: TraceEvents,
    rr: RankReplay,
    other: TraceEvents,
    other_mask: np.ndarray,
    timelines: Sequence[StepTimeline],
    mask: np.ndarray,
    *,
    steps: tuple[int, int] | None = None,
    causal: str = "half",
) -> WhatIf:
    """This trace replayed with ``other``'s kernel times (module docstring)."""
    here = op_instances(events, mask, causal)
    there = op_instances(other, other_mask, causal)
    edit = twr.fresh(rr)
    h_n = rr.graph.n_host
    total = matched = 0
    for key, instances in here.items():
        total += len(instances)
        theirs = there.get(key)
        if not theirs:
            continue
        for i, (us, js) in enumerate(instances):
            their_us = theirs[i % len(theirs)][0]
            if us > 0:
                edit.dur[h_n + np.array(js)] *= their_us / us
            matched += 1
    if total == 0 or matched < MIN_MATCHED * total:
        name = os.path.basename(other.path)
        raise InvalidInput(
            FLAG, name, f"only {matched} of {total} op instances match by name and shapes: another model?"
        )
    step = statistics.median(s.span_s for s in timelines)
    n = max(1, len(timelines))
    g_dur = rr.graph.dur[h_n:]
    saved = float(np.sum((g_dur - edit.dur[h_n:])[mask])) * 1e-6 / n
    replayed = twr.replayed_step_s(events, rr, edit, steps)
    amdahl = step / (step - saved) if step > saved else float("inf")
    w = WhatIf(
        "kernels_from",
        f"the kernels of {os.path.basename(other.path)} ({matched} of {total} ops matched)",
        saved,
        step,
        amdahl,
        "each matched op's GPU time as the other trace measured it; this trace's host, launches and syncs",
    )
    return replace(w, amdahl_speedup=amdahl, replayed_step_s=replayed, replayed_speedup=step / replayed)


__all__ = ["MIN_MATCHED", "kernels_from_what_if", "op_instances"]
