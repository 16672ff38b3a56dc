"""``--what-if`` edits written by a user, each replayed on the dependency graph (pure; numpy).

Grammar (one edit per ``--what-if``; several in one run, each its own what-if):

- ``PATTERN=Fx`` — the GPU time of the events ``PATTERN`` names times ``F`` (``gemm*=0.5x``:
  half the time). ``PATTERN`` is a glob (``fnmatch``, case-insensitive) over each event's
  category (``matmul``, ``attention``, ``softmax``, ... ``memcpy``, ``comm``), its op's
  ``op_costs`` family (``gemm.nn``, ``softmax``, ...), its op's name (``aten::mm``) and its
  kernel's name; ``F`` ≥ 0.
- ``host=Sx`` — host work between runtime calls ``S`` times faster (``host=2x``); ``S`` > 0.
- ``sync:PATTERN=off`` — the host syncs whose call, or any op they sat in (``aten::item``, its
  parents), ``PATTERN`` names no longer wait for the device.

A pattern the trace does not have is refused in one line listing what it has.
"""

from __future__ import annotations

import fnmatch
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from infer_opt.errors import InvalidInput
from infer_opt.results.trace import StepTimeline, WhatIf
from infer_opt.trace import timeline as tt
from infer_opt.trace import whatif_replay as twr
from infer_opt.trace.events import TraceEvents
from infer_opt.trace.ops import attribute, category
from infer_opt.trace.replay import RankReplay

FLAG = "--what-if"
GRAMMAR = "PATTERN=Fx (GPU time × F, e.g. gemm*=0.5x), host=Sx (host S× faster), sync:PATTERN=off"
_EDIT = re.compile(r"^\s*(?:(sync):)?([^=]+?)\s*=\s*(?:(off)|([0-9]*\.?[0-9]+(?:e[-+]?\d+)?)\s*x)\s*$", re.I)


@dataclass(frozen=True)
class UserEdit:
    text: str
    kind: str  # gpu / host / sync
    pattern: str
    factor: float  # gpu: time ×; host: speed ×; sync: 0


def parse_edit(text: str) -> UserEdit:
    m = _EDIT.match(text)
    if m is None:
        raise InvalidInput(FLAG, text, f"expected {GRAMMAR}")
    sync, pattern, off, number = m.groups()
    pattern = pattern.strip()
    if sync:
        if not off:
            raise InvalidInput(FLAG, text, "a sync edit is sync:PATTERN=off")
        return UserEdit(text, "sync", pattern, 0.0)
    if off:
        raise InvalidInput(FLAG, text, f"only a sync can be turned off; expected {GRAMMAR}")
    factor = float(number)
    if pattern.lower() == "host":
        if factor <= 0:
            raise InvalidInput(FLAG, text, "host=Sx needs S > 0 (2x: host work twice as fast)")
        return UserEdit(text, "host", pattern, factor)
    return UserEdit(text, "gpu", pattern, factor)


def _labels(events: TraceEvents, causal: str) -> list[tuple[str, ...]]:
    """Each GPU event's names a pattern may match: category, family, op name, kernel name."""
    att = attribute(events, None, causal)
    cls = tt.classify(events).tolist()
    fixed = {tt.COMM: "comm", tt.MEMORY: "memcpy", tt.WAIT: "sync"}
    out = []
    g = events.gpu
    for j, op in enumerate(att.owner.tolist()):
        c = att.costs.get(op) if op >= 0 else None
        fam = getattr(c, "family", "") if c is not None else ""
        cat = fixed.get(cls[j]) or category(fam) or "other"
        op_name = events.name_of(events.ops.name[op]) if op >= 0 else ""
        out.append(tuple(x for x in (cat, fam, op_name, events.name_of(g.name[j])) if x))
    return out


def _has(names: Sequence[str], limit: int = 12) -> str:
    found = sorted(set(names))
    more = f" (+{len(found) - limit} more)" if len(found) > limit else ""
    return ", ".join(found[:limit]) + more


def _gpu_edit(events: TraceEvents, rr: RankReplay, e: UserEdit, mask: np.ndarray, causal: str) -> twr.Edit:
    labels = _labels(events, causal)
    pat = e.pattern.lower()
    hit = np.array([any(fnmatch.fnmatchcase(x.lower(), pat) for x in ls) for ls in labels], dtype=bool)
    if not (hit & mask).any():
        cats = [ls[0] for ls, m in zip(labels, mask.tolist(), strict=True) if m]
        ops = [ls[2] for ls, m in zip(labels, mask.tolist(), strict=True) if m and len(ls) > 3]
        raise InvalidInput(
            FLAG,
            e.text,
            f"no GPU event matches {e.pattern!r}; the trace has {_has(cats)}; ops {_has(ops, 8)}",
        )
    edit = twr.fresh(rr)
    idx = rr.graph.n_host + np.flatnonzero(hit)
    edit.dur[idx] = rr.graph.dur[idx] * e.factor
    return edit


def _ancestors(events: TraceEvents, op: int) -> list[str]:
    out = []
    while op >= 0:
        out.append(events.name_of(events.ops.name[op]))
        op = int(events.ops.parent[op])
    return out


def _sync_nodes(events: TraceEvents, rr: RankReplay, e: UserEdit) -> list[int]:
    la, g = events.launches, rr.graph
    pat, nodes, seen = e.pattern.lower(), [], []
    for h in np.flatnonzero(g.is_sync[: g.n_host]).tolist():
        names = [events.name_of(la.name[h]), *_ancestors(events, int(la.op[h]))]
        seen += names
        if any(fnmatch.fnmatchcase(n.lower(), pat) for n in names):
            nodes.append(h)
    if not nodes:
        has = _has(seen) if seen else "no host sync that waited for the device"
        raise InvalidInput(FLAG, e.text, f"no host sync matches {e.pattern!r}; the trace has {has}")
    return nodes


def user_what_if(
    events: TraceEvents,
    rr: RankReplay,
    text: str,
    timelines: Sequence[StepTimeline],
    mask: np.ndarray,
    *,
    steps: tuple[int, int] | None = None,
    causal: str = "half",
) -> WhatIf:
    """One user edit as a what-if: its Amdahl figure (the time it removes, per step, with no
    dependencies) beside its replay."""
    e = parse_edit(text)
    step = statistics.median(s.span_s for s in timelines)
    n = max(1, len(timelines))
    if e.kind == "gpu":
        edit = _gpu_edit(events, rr, e, mask, causal)
        sel = mask & (edit.dur[rr.graph.n_host :] != rr.graph.dur[rr.graph.n_host :])
        saved = float(np.sum((rr.graph.dur[rr.graph.n_host :] - edit.dur[rr.graph.n_host :])[sel])) * 1e-6 / n
        assumption = f"the GPU time of the events matching {e.pattern!r} × {e.factor:g}"
    elif e.kind == "host":
        edit = twr.faster_host_edit(rr, e.factor)
        saved = twr.host_work_s(events, rr, timelines) * (1 - 1 / e.factor)
        assumption = f"host work between runtime calls {e.factor:g}× as fast; runtime calls unchanged"
    else:
        nodes = _sync_nodes(events, rr, e)
        edit = twr.remove_sync_edit(rr, nodes)
        saved = twr.sync_wait_s(rr, nodes, n)
        assumption = f"the {len(nodes)} host syncs matching {e.pattern!r} no longer wait for the device"
    replayed = twr.replayed_step_s(events, rr, edit, steps)
    if saved < 0:  # a slower edit (F > 1): both figures below 1
        amdahl = step / (step - saved)
        w = WhatIf("user", text.strip(), saved, step, amdahl, assumption)
        return replace(w, amdahl_speedup=amdahl, replayed_step_s=replayed, replayed_speedup=step / replayed)
    w = twr._whatif("user", text.strip(), min(saved, step), step, assumption)
    return twr.with_replay(w, replayed, math.inf, amdahl_bound=e.kind == "gpu")


def edit_of(
    events: TraceEvents, rr: RankReplay, text: str, mask: np.ndarray, causal: str = "half"
) -> twr.Edit:
    """The edited graph inputs of one ``--what-if`` text (for a replayed timeline)."""
    e = parse_edit(text)
    if e.kind == "gpu":
        return _gpu_edit(events, rr, e, mask, causal)
    if e.kind == "host":
        return twr.faster_host_edit(rr, e.factor)
    return twr.remove_sync_edit(rr, _sync_nodes(events, rr, e))


__all__ = ["GRAMMAR", "UserEdit", "edit_of", "parse_edit", "user_what_if"]
