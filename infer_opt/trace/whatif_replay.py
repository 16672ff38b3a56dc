"""What-ifs by replaying the edited dependency graph (:mod:`.graph`, :mod:`.replay`).

Each Amdahl what-if of :mod:`.whatif` is also answered by editing the graph and replaying it;
the step time is the median over the analyzed windows of the replayed span. The figures sit
side by side: ``amdahl_speedup`` (no dependencies; an upper bound) and ``replayed_speedup``
(dependencies kept). Edits:

- ``category_at_bound`` / ``matmul_at_peak_fraction``: each kernel of an op group of the family
  scaled by the group's ``bound / time`` (never slower);
- ``cuda_graphs``: in each step, the host calls on a thread between two syncs (a capturable
  region) become one graph launch: the first call stays, the others and the host work between
  them go (duration and gap 0), the region's kernels start a typical launch latency after it
  and a typical gap after their stream's previous event; a sync ends a region and stays. Both
  figures are held to the step's idle time plus the launch calls it removes; the replayed one
  may pass the gaps' Amdahl figure (the graph removes the host work between launches too);
- ``fusion``: the second op of each adjacent same-shape elementwise pair loses the time of the
  intermediate's write and read (``2 × bytes / b``);
- ``overlap``: collective kernels take no time on the path (fully hidden);
- ``faster_host``: host work between calls ``× 1/s`` (runtime calls unchanged);
- ``remove_sync``: a named host sync (call and the op it sat in) no longer waits;
- ``fused_attention``: each eager attention on the busiest stream (a batched matmul, a softmax
  within a few ops, a batched matmul; only elementwise ops between) becomes one flash kernel of
  its shape at its roofline bound ``max(F/R, Q/b)``, ``F = 4·B·S·S'·D``, ``Q`` its inputs and
  output (never longer than the pattern now).

A replayed saving is never above the Amdahl saving of the same edit (max-plus is 1-Lipschitz:
Δ of summed time saves at most Δ), and it is clamped there against rounding. Pure: numpy.
"""

from __future__ import annotations

import math
import statistics
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from infer_opt.results.trace import OpGroup, Peaks, StepTimeline, WhatIf
from infer_opt.trace import timeline as tt
from infer_opt.trace.events import TraceEvents
from infer_opt.trace.ops import TRANSFER, _key, _meaningful_parent, attribute, category
from infer_opt.trace.replay import RankReplay, replay, step_replays
from infer_opt.trace.whatif import _bound_s, _whatif, busiest_stream, fusion_links

AT_BOUND_SUFFIX = " ops at their roofline bound"
TRANSFER_DESCRIPTION = "host↔device copies at the link rate"
HOST_SPEEDUP = 2.0


@dataclass
class Edit:
    """An edited copy of the graph's inputs, and the most the edit may save per step (s)."""

    dur: np.ndarray
    l1: np.ndarray
    l2: np.ndarray
    base: np.ndarray
    waits: dict | None = None
    cap_s: float = math.inf


def fresh(rr: RankReplay) -> Edit:
    g = rr.graph
    return Edit(g.dur.copy(), g.l1.copy(), g.l2.copy(), g.base.copy())


def replayed_step_s(events: TraceEvents, rr: RankReplay, edit: Edit, steps: tuple[int, int] | None) -> float:
    """Median over the analyzed windows of the edited replay's span (s); an edit that changes
    nothing is not replayed."""
    g = rr.graph
    same = edit.waits is None and all(
        np.array_equal(a, b)
        for a, b in ((edit.dur, g.dur), (edit.l1, g.l1), (edit.l2, g.l2), (edit.base, g.base))
    )
    if same:
        spans = [s.replayed_s for s in step_replays(events, g, rr.replayed, steps)]
        return statistics.median(spans) if spans else 0.0
    rep = replay(g, dur=edit.dur, l1=edit.l1, l2=edit.l2, base=edit.base, waits=edit.waits, since=rr.replayed)
    spans = [s.replayed_s for s in step_replays(events, rr.graph, rep, steps)]
    return statistics.median(spans) if spans else 0.0


def _kernels(events: TraceEvents, mask: np.ndarray) -> np.ndarray:
    return np.flatnonzero(mask & (tt.classify(events) != tt.WAIT))


#: each trace's GPU events' op-group keys (``ops._key`` of their owner op, None without one)
_KEYS: weakref.WeakKeyDictionary[TraceEvents, dict[str, list]] = weakref.WeakKeyDictionary()


def _event_keys(events: TraceEvents, causal: str) -> list:
    found = _KEYS.setdefault(events, {})
    if causal not in found:
        att = attribute(events, None, causal)
        by_op: dict[int, tuple] = {}
        keys: list = []
        for op in att.owner.tolist():
            if op >= 0 and op not in by_op:
                by_op[op] = _key(events, att, op)
            keys.append(by_op.get(op) if op >= 0 else None)
        found[causal] = keys
    return found[causal]


def scale_groups(
    events: TraceEvents, rr: RankReplay, edit: Edit, mask: np.ndarray, ratio: dict[tuple, float], causal: str
) -> None:
    """Each GPU event of an op group in ``ratio`` (by ``ops._key``) scaled by its ratio."""
    keys, h_n = _event_keys(events, causal), rr.graph.n_host
    for j in _kernels(events, mask).tolist():
        r = ratio.get(keys[j]) if keys[j] is not None else None
        if r is not None:
            edit.dur[h_n + j] *= r


def at_bound_edit(
    events: TraceEvents,
    rr: RankReplay,
    groups: Sequence[OpGroup],
    peaks: Peaks,
    mask: np.ndarray,
    family: str,
    causal: str,
    efficiency: float = 1.0,
) -> Edit:
    edit = fresh(rr)
    ratio = {}
    for g in groups:
        if g.family == family and g.time_s > 0 and (g.flops > 0 or g.bytes > 0):
            ratio[(g.name, g.shapes, g.dtype)] = min(1.0, _bound_s(g, peaks, efficiency) / g.time_s)
    scale_groups(events, rr, edit, mask, ratio, causal)
    return edit


def _sync_calls(events: TraceEvents, rr: RankReplay) -> np.ndarray:
    from infer_opt.trace.graph import _sync_kind

    kinds = np.array([bool(_sync_kind(n)) for n in events.names], dtype=bool)
    la = events.launches
    return kinds[la.name] if len(la) else np.zeros(0, dtype=bool)


def cuda_graphs_edit(
    events: TraceEvents, rr: RankReplay, timelines: Sequence[StepTimeline], steps: tuple[int, int] | None
) -> Edit:
    """Capturable regions become one graph launch (module docstring)."""
    g, la = rr.graph, events.launches
    edit = fresh(rr)
    sync = _sync_calls(events, rr)
    step_of = np.full(len(la), -1)
    numbers = {s.step for s in timelines}
    for i, s in enumerate(events.steps):
        if s.number in numbers:
            step_of[(la.ts_us >= s.cpu_start_us) & (la.ts_us <= s.cpu_end_us)] = i
    top = (g.a1[: g.n_host] < 0).tolist()
    prev, removed = g.a2[: g.n_host].tolist(), 0.0
    step_l, sync_l = step_of.tolist(), sync.tolist()
    in_region = np.zeros(g.n, dtype=bool)
    for h in range(g.n_host):
        p = prev[h]
        if not top[h] or step_l[h] < 0 or sync_l[h] or p < 0 or sync_l[p] or step_l[p] != step_l[h]:
            continue
        removed += float(g.dur[h])
        edit.dur[h] = 0.0
        edit.l2[h] = 0.0
        in_region[h] = True
    nested = np.flatnonzero((g.a1[: g.n_host] >= 0) & in_region[np.maximum(g.a1[: g.n_host], 0)])
    edit.l1[nested] = 0.0
    in_region[nested] = True
    gpu = np.arange(g.n_host, g.n)
    launched = gpu[(g.a1[g.n_host :] >= 0) & in_region[np.maximum(g.a1[g.n_host :], 0)]]
    edit.l1[launched] = np.minimum(edit.l1[launched], g.typical["launch"])
    edit.l2[launched] = np.minimum(edit.l2[launched], g.typical["stream"])
    idle = statistics.median(s.idle_s for s in timelines) if timelines else 0.0
    edit.cap_s = idle + removed * 1e-6 / max(1, len(timelines))
    return edit


def fusion_edit(events: TraceEvents, rr: RankReplay, mask: np.ndarray, peaks: Peaks, causal: str) -> Edit:
    """The second op of each adjacent same-shape elementwise pair loses 2 × bytes / b."""
    edit = fresh(rr)
    if peaks.bytes_per_s <= 0:
        return edit
    att = attribute(events, None, causal)
    _, order = busiest_stream(events, mask)
    saved: dict[int, float] = {}
    for op, nbytes in fusion_links(events, att, order.tolist()):
        saved[op] = saved.get(op, 0.0) + nbytes / peaks.bytes_per_s * 1e6
    h_n = rr.graph.n_host
    for e in order.tolist():
        op = int(att.owner[e])
        if op in saved and saved[op] > 0:
            cut = min(saved[op], float(edit.dur[h_n + e]))
            edit.dur[h_n + e] -= cut
            saved[op] -= cut
    return edit


#: ops allowed between the two matmuls of an eager attention (scale, mask, dropout) and its span
ATTENTION_WINDOW = 6


def _is_bmm(c: object) -> bool:
    return c is not None and str(getattr(c, "family", "")).split(".")[0] == "bmm"


def _next_where(candidates: range, test) -> int:
    return next((k for k in candidates if test(k)), -1)


def attention_patterns(
    events: TraceEvents, mask: np.ndarray, causal: str
) -> list[list[tuple[int, list[int]]]]:
    """Eager attention on the busiest stream: a batched matmul, a softmax within the next few ops
    and a batched matmul after it (only elementwise ops between); each as its ops in order with
    their GPU events."""
    att = attribute(events, None, causal)
    _, order = busiest_stream(events, mask)
    seq: list[tuple[int, list[int]]] = []
    for e in order.tolist():
        op = int(att.owner[e])
        if seq and seq[-1][0] == op:
            seq[-1][1].append(e)
        else:
            seq.append((op, [e]))
    fam = [category(getattr(att.costs.get(op), "family", "")) if op >= 0 else "" for op, _ in seq]
    found, i = [], 0
    while i < len(seq):
        if not _is_bmm(att.costs.get(seq[i][0])):
            i += 1
            continue
        soft = _next_where(range(i + 1, min(len(seq), i + ATTENTION_WINDOW)), lambda k: fam[k] == "softmax")
        between = fam[i + 1 : soft] if soft > 0 else []
        window = range(soft + 1, min(len(seq), soft + ATTENTION_WINDOW)) if soft > 0 else range(0)
        end = _next_where(window, lambda k: _is_bmm(att.costs.get(seq[k][0])))
        if end < 0 or any(f not in ("elementwise", "") for f in between + fam[soft + 1 : end]):
            i += 1
            continue
        found.append(seq[i : end + 1])
        i = end + 1
    return found


def flash_us(events: TraceEvents, first_op: int, peaks: Peaks) -> float:
    """A flash kernel of the pattern's shape at its roofline bound (µs): F = 4·B·S·S'·D over the
    attention peak, Q = (2·B·S·D + 2·B·S'·D)·dtype bytes over the bandwidth."""
    from infer_opt.trace.devices import DTYPE_BYTES, normalize_dtype
    from infer_opt.trace.ops import group_peaks
    from infer_opt.trace.roofline import peak_flops

    args = events.ops.args[first_op]
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not (
        isinstance(dims, list)
        and len(dims) >= 2
        and all(isinstance(d, list) and len(d) >= 2 for d in dims[:2])
    ):
        return math.nan
    q, k = dims[0], dims[1]
    batch, s, d, s2 = math.prod(q[:-2]), q[-2], q[-1], k[-1]
    dtype = normalize_dtype(str(types[0])) if isinstance(types, list) and types else ""
    size = DTYPE_BYTES.get(dtype, 2)
    p = group_peaks("attention", peaks)
    rate = peak_flops(p, dtype or "bf16")
    flops, nbytes = 4.0 * batch * s * s2 * d, (2.0 * batch * s * d + 2.0 * batch * s2 * d) * size
    t = max(flops / rate if rate > 0 else 0.0, nbytes / p.bytes_per_s if p.bytes_per_s > 0 else 0.0)
    return t * 1e6


def fused_attention_edit(
    events: TraceEvents, rr: RankReplay, mask: np.ndarray, peaks: Peaks, causal: str
) -> tuple[Edit, int, float]:
    """Each eager attention pattern's kernels give way to one flash kernel of its shape (its time
    on the last kernel, never longer than the pattern now); (edit, patterns, µs saved)."""
    edit = fresh(rr)
    h_n, saved, n = rr.graph.n_host, 0.0, 0
    for pattern in attention_patterns(events, mask, causal):
        kernels = [h_n + e for _, es in pattern for e in es]
        now = float(edit.dur[kernels].sum())
        flash = flash_us(events, pattern[0][0], peaks)
        if not math.isfinite(flash) or flash >= now:
            continue
        edit.dur[kernels] = 0.0
        edit.dur[kernels[-1]] = flash
        saved += now - flash
        n += 1
    return edit, n, saved


def overlap_edit(events: TraceEvents, rr: RankReplay, mask: np.ndarray) -> Edit:
    edit = fresh(rr)
    comm = np.flatnonzero(mask & (tt.classify(events) == tt.COMM))
    edit.dur[rr.graph.n_host + comm] = 0.0
    return edit


def faster_host_edit(rr: RankReplay, speedup: float) -> Edit:
    edit = fresh(rr)
    g = rr.graph
    edit.l2[g.host_gap] = g.l2[g.host_gap] / speedup
    return edit


def _in_steps(events: TraceEvents, timelines: Sequence[StepTimeline]) -> np.ndarray:
    """The host calls in the analyzed steps' CPU windows (every call when the trace has none)."""
    la = events.launches
    numbers = {s.step for s in timelines}
    if not events.steps or None in numbers:
        return np.ones(len(la), dtype=bool)
    keep = np.zeros(len(la), dtype=bool)
    for s in events.steps:
        if s.number in numbers:
            keep |= (la.ts_us >= s.cpu_start_us) & (la.ts_us <= s.cpu_end_us)
    return keep


def host_work_s(events: TraceEvents, rr: RankReplay, timelines: Sequence[StepTimeline]) -> float:
    """Measured host work between calls (thread order) of the thread that launched the most,
    inside the analyzed steps' GPU windows, per step (s): what a faster host could save at most
    where the host bounds the step (its Amdahl figure)."""
    g, la = rr.graph, events.launches
    launches = events.gpu.launch[events.gpu.launch >= 0]
    if not launches.size:
        return 0.0
    tids, counts = np.unique(la.tid[launches], return_counts=True)
    main = la.tid == tids[int(np.argmax(counts))]
    h = np.flatnonzero(g.host_gap[: g.n_host] & main & _in_steps(events, timelines))
    gap_end = g.start[h]
    gap_start = gap_end - np.maximum(g.l2[h], 0.0)
    total = 0.0
    for s in timelines:
        lo, hi = s.start_s * 1e6 - g.t0_us, s.start_s * 1e6 - g.t0_us + s.span_s * 1e6
        total += float(np.sum(np.clip(np.minimum(gap_end, hi) - np.maximum(gap_start, lo), 0.0, None)))
    return total * 1e-6 / max(1, len(timelines))


def sync_names(events: TraceEvents, rr: RankReplay) -> dict[str, list[int]]:
    """Each host sync (``call in op``, the op past scalar-read plumbing; ``call`` at the top
    level) -> its host nodes."""
    la, g = events.launches, rr.graph
    out: dict[str, list[int]] = {}
    for h in np.flatnonzero(g.is_sync[: g.n_host]).tolist():
        op = _meaningful_parent(events, int(la.op[h]))
        name = events.name_of(la.name[h])
        out.setdefault(f"{name} in {op}" if op else name, []).append(h)
    return out


def remove_sync_edit(rr: RankReplay, nodes: Sequence[int]) -> Edit:
    """The syncs ``nodes`` no longer wait: they end after their typical own cost."""
    edit = fresh(rr)
    g = rr.graph
    waits = dict(g.waits)
    for h in nodes:
        waits[h] = ()
        edit.base[h] = min(float(g.dur[h]), g.typical["base"])
    edit.waits = waits
    return edit


def sync_wait_s(rr: RankReplay, nodes: Sequence[int], n_steps: int) -> float:
    g = rr.graph
    return float(sum(max(0.0, g.dur[h] - g.typical["base"]) for h in nodes)) * 1e-6 / max(1, n_steps)


def with_replay(w: WhatIf, replayed_s: float, cap_s: float, *, amdahl_bound: bool = True) -> WhatIf:
    """``w`` with its replayed figures; the replayed saving held to ``cap_s`` and (a duration
    edit) to Amdahl's."""
    step = w.step_s
    saved = min(max(0.0, step - replayed_s), cap_s, w.saved_s if amdahl_bound else math.inf)
    rs = step - saved
    return replace(
        w, amdahl_speedup=w.speedup, replayed_step_s=rs, replayed_speedup=step / rs if rs > 0 else math.inf
    )


def _family_of(w: WhatIf) -> str | None:
    if w.description == TRANSFER_DESCRIPTION:
        return TRANSFER
    if w.description.endswith(AT_BOUND_SUFFIX):
        return w.description[: -len(AT_BOUND_SUFFIX)]
    return None


def replayed_what_ifs(
    events: TraceEvents,
    rr: RankReplay,
    found: Sequence[WhatIf],
    groups: Sequence[OpGroup],
    peaks: Peaks,
    timelines: Sequence[StepTimeline],
    mask: np.ndarray,
    *,
    steps: tuple[int, int] | None = None,
    causal: str = "half",
    matmul_peak_fraction: float = 0.7,
    host_speedup: float = HOST_SPEEDUP,
) -> tuple[WhatIf, ...]:
    """Every what-if of ``found`` with its replayed figures, and the replay-only ones (a faster
    host, the costliest host sync removed)."""
    if not timelines:
        return tuple(found)
    out = []
    for w in found:
        edit: Edit | None = None
        if w.scenario == "category_at_bound" and _family_of(w) is not None:
            edit = at_bound_edit(events, rr, groups, peaks, mask, _family_of(w) or "", causal)
        elif w.scenario == "matmul_at_peak_fraction":
            edit = at_bound_edit(events, rr, groups, peaks, mask, "matmul", causal, matmul_peak_fraction)
        elif w.scenario == "cuda_graphs":
            edit = cuda_graphs_edit(events, rr, timelines, steps)
            held = (
                "; replayed, the graph also removes the host work between launches (held to the step's idle"
            )
            held += " time plus the launch calls it removes)"
            w = _whatif(w.scenario, w.description, min(w.saved_s, edit.cap_s), w.step_s, w.assumption + held)
        elif w.scenario == "fusion":
            edit = fusion_edit(events, rr, mask, peaks, causal)
        elif w.scenario == "overlap":
            edit = overlap_edit(events, rr, mask)
        if edit is None:
            out.append(replace(w, amdahl_speedup=w.speedup))
            continue
        graphs = w.scenario == "cuda_graphs"  # a graph also removes host work: its cap, not Amdahl's
        out.append(
            with_replay(w, replayed_step_s(events, rr, edit, steps), edit.cap_s, amdahl_bound=not graphs)
        )
    out += extra_what_ifs(events, rr, timelines, steps, host_speedup)
    out += fused_attention(events, rr, timelines, mask, peaks, steps, causal)
    out.sort(key=lambda x: (-x.saved_s, x.scenario, x.description))
    return tuple(out)


def fused_attention(
    events: TraceEvents,
    rr: RankReplay,
    timelines: Sequence[StepTimeline],
    mask: np.ndarray,
    peaks: Peaks,
    steps: tuple[int, int] | None,
    causal: str,
) -> list[WhatIf]:
    """Eager attention (matmul → softmax → matmul) as one flash kernel of its shape, replayed."""
    if peaks.bytes_per_s <= 0:
        return []
    edit, n, saved_us = fused_attention_edit(events, rr, mask, peaks, causal)
    if not n:
        return []
    step = statistics.median(s.span_s for s in timelines)
    w = _whatif(
        "fused_attention",
        f"fused attention: {n} eager matmul → softmax → matmul patterns as flash kernels",
        saved_us * 1e-6 / max(1, len(timelines)),
        step,
        "each pattern's kernels become one flash kernel of its shape at max(F/R, Q/b) (F = 4·B·S·S'·D, "
        "Q = its inputs and output), on the last kernel's stream slot; never longer than now",
    )
    return [with_replay(w, replayed_step_s(events, rr, edit, steps), math.inf)]


def extra_what_ifs(
    events: TraceEvents,
    rr: RankReplay,
    timelines: Sequence[StepTimeline],
    steps: tuple[int, int] | None,
    host_speedup: float,
) -> list[WhatIf]:
    """The replay-only scenarios: a faster host, and the host sync that waits the longest removed."""
    step = statistics.median(s.span_s for s in timelines)
    out = []
    work = host_work_s(events, rr, timelines)
    w = _whatif(
        "faster_host",
        f"host work between calls {host_speedup:g}× faster",
        work * (1 - 1 / host_speedup),
        step,
        "the framework's time between runtime calls divided by the speed-up; runtime calls unchanged",
    )
    out.append(
        with_replay(w, replayed_step_s(events, rr, faster_host_edit(rr, host_speedup), steps), math.inf)
    )
    keep = _in_steps(events, timelines)
    syncs = {
        k: v for k, v in ((k, [h for h in v if keep[h]]) for k, v in sync_names(events, rr).items()) if v
    }
    if syncs:
        name, nodes = max(syncs.items(), key=lambda kv: (sync_wait_s(rr, kv[1], 1), kv[0]))
        w = _whatif(
            "remove_sync",
            f"host sync removed: {name}",
            sync_wait_s(rr, nodes, len(timelines)),
            step,
            "the host no longer waits for the device there (the value it read is known without it)",
        )
        edit = remove_sync_edit(rr, nodes)
        out.append(with_replay(w, replayed_step_s(events, rr, edit, steps), math.inf, amdahl_bound=False))
    return out


__all__ = ["Edit", "replayed_step_s", "replayed_what_ifs"]
