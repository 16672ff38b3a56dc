"""The kernel table of a trace: one row per kernel name, with the family each belongs to and
where that family came from.

A GPU event's family is its op group's (:func:`infer_opt.trace.ops.attribute`: the op that owns
the event has a FLOP/byte formula, whose family :func:`infer_opt.trace.ops.category` names;
``family_source`` ``"op"``), else the one its name gives
(:func:`infer_opt.trace.kernel_names.kernel_family`; ``"name"``), else none (``None``, never a
guess). A kernel name whose events got families from several places takes the one with the most
time. The family coverage is the share of GPU time (kernels, memcpy, memset of the analyzed
windows; not sync waits) whose family came from an op, from a name, or from nowhere.

Pure: numpy and the standard library.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from infer_opt.results.trace import CoverageRow, KernelRow
from infer_opt.trace import ops as to
from infer_opt.trace.events import SYNC, TraceEvents
from infer_opt.trace.kernel_names import kernel_family

SOURCES = ("op", "name", "none")


def _op_families(events: TraceEvents, att: to.Attribution, owners: np.ndarray) -> list[str]:
    out = []
    for op in owners.tolist():
        cost = att.costs.get(op) if op >= 0 else None
        works = cost is not None and (cost.flops > 0 or cost.bytes > 0)
        out.append(to.category(getattr(cost, "family", "")) if works else "")
    return out


def kernel_totals(
    events: TraceEvents, mask: np.ndarray | None, causal: str
) -> dict[tuple[str, str, str], tuple[int, float]]:
    """(kernel name, family, source) → (calls, summed µs) over the kept events of one rank."""
    gpu = events.gpu
    keep = gpu.kind != SYNC
    if mask is not None:
        keep &= np.asarray(mask, dtype=bool)
    idx = np.flatnonzero(keep)
    if not len(idx):
        return {}
    att = to.attribute(events, None, causal)
    owners, by_owner = np.unique(att.owner[idx], return_inverse=True)
    names, by_name = np.unique(gpu.name[idx], return_inverse=True)
    op_family = np.array([*_op_families(events, att, owners), ""], dtype=object)[by_owner.reshape(-1)]
    name_family = np.array([*(kernel_family(events.name_of(n)) or "" for n in names), ""], dtype=object)
    name_family = name_family[by_name.reshape(-1)]
    from_op = op_family != ""
    family = np.where(from_op, op_family, name_family)
    source = np.where(from_op, "op", np.where(name_family != "", "name", "none"))
    pairs = np.stack([by_name.reshape(-1), np.unique(family, return_inverse=True)[1].reshape(-1)], axis=1)
    keys, inverse = np.unique(pairs, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    time_us = np.bincount(inverse, weights=gpu.dur_us[idx], minlength=len(keys))
    calls = np.bincount(inverse, minlength=len(keys))
    first = np.full(len(keys), -1, dtype=np.int64)
    first[inverse[::-1]] = np.arange(len(inverse))[::-1]
    out: dict[tuple[str, str, str], tuple[int, float]] = {}
    for k in range(len(keys)):
        e = int(first[k])
        key = (events.name_of(names[keys[k][0]]), str(family[e]), str(source[e]))
        c, t = out.get(key, (0, 0.0))
        out[key] = (c + int(calls[k]), t + float(time_us[k]))
    return out


def kernel_table(
    traces: Sequence[TraceEvents], masks: Sequence[np.ndarray | None], *, causal: str = "half"
) -> tuple[tuple[KernelRow, ...], tuple[CoverageRow, ...]]:
    """(kernel rows, most time first; the family coverage by source) over every rank."""
    return kernel_rows([kernel_totals(ev, mask, causal) for ev, mask in zip(traces, masks, strict=True)])


def kernel_rows(
    per_rank: Sequence[dict[tuple[str, str, str], tuple[int, float]]],
) -> tuple[tuple[KernelRow, ...], tuple[CoverageRow, ...]]:
    """The kernel rows and family coverage from each rank's :func:`kernel_totals` (the map
    over ranks sends these, not the events)."""
    from infer_opt.trace.fold import Exact

    summed: dict[tuple[str, str, str], tuple[int, Exact]] = {}
    for found in per_rank:
        for key, (c, t) in found.items():
            c0, t0 = summed.setdefault(key, (0, Exact()))
            t0.add(t)  # exact: the ranks' order cannot change a bit
            summed[key] = (c0 + c, t0)
    totals = {key: (c, float(t)) for key, (c, t) in summed.items()}
    all_us = math.fsum(t for _, t in totals.values())
    if all_us <= 0 and not totals:
        return (), ()
    by_name: dict[str, list[tuple[float, int, str, str]]] = {}
    for (name, family, source), (c, t) in totals.items():
        by_name.setdefault(name, []).append((t, c, family, source))
    rows = []
    for name, parts in by_name.items():
        t, _, family, source = max(parts, key=lambda p: (p[0], p[1], p[2]))
        time_us = math.fsum(p[0] for p in parts)
        rows.append(
            KernelRow(
                name=name,
                calls=sum(p[1] for p in parts),
                time_s=time_us / 1e6,
                fraction=time_us / all_us if all_us > 0 else 0.0,
                family=family or None,
                family_source=source if family else None,
            )
        )
    rows.sort(key=lambda r: (-r.time_s, r.name))
    return tuple(rows), _coverage(totals, all_us)


def _coverage(
    totals: dict[tuple[str, str, str], tuple[int, float]], all_us: float
) -> tuple[CoverageRow, ...]:
    if all_us <= 0:
        return ()
    shares = {s: math.fsum(t for (_, _, src), (_, t) in totals.items() if src == s) for s in SOURCES}
    rows = [CoverageRow(s, t / 1e6, t / all_us) for s, t in shares.items() if t > 0]
    rows.sort(key=lambda r: (-r.time_s, r.reason))
    return tuple(rows)


def family_fraction(rows: Sequence[CoverageRow]) -> float | None:
    """The share of GPU time with a family (from an op or a name); None without GPU time."""
    if not rows:
        return None
    return math.fsum(r.fraction for r in rows if r.reason != "none")


__all__ = ["SOURCES", "family_fraction", "kernel_rows", "kernel_table", "kernel_totals"]
