"""The reduce over ranks, folded as the summaries arrive: each rank's op groups, kernel totals
and kernel durations are added into running sums and dropped from its summary, and only the
running slowest rank's what-ifs are kept, so the driver holds a few kB per rank (its timeline,
collectives, coverage) rather than every rank's groups until the end.

Order cannot change a bit: sums are exact (:class:`fractions.Fraction` of the floats; their
float is the correctly rounded sum, what ``math.fsum`` gives), and whatever
:func:`infer_opt.trace.ops.merge_groups` takes "in rank order" — a group's first member, its
kernel names' order, the groups' order among equals — is taken by each rank's *position*
(rank id, then file index: the order the reduce sorts the summaries in), kept as the least
seen. Folding the summaries in any arrival order gives the merge of the sorted list exactly.

Partitioned by the device a summary was analysed with: the job's device is the first rank's,
known only at the end; ranks analysed with another are analysed again with it and folded
into its partition (the others are dropped). Pure: numpy and the standard library.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from infer_opt.results.trace import OpGroup, Peaks
from infer_opt.trace import ops as to

#: a rank without a rank id sorts after every rank with one (the reduce's order)
_NO_RANK = 1 << 30


class Exact:
    """A float sum kept exact (a non-finite term makes it a plain float sum)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Fraction | float = Fraction(0)

    def add(self, x: float) -> None:
        if isinstance(self.value, Fraction) and math.isfinite(x):
            self.value += Fraction(x)
        else:
            self.value = float(self.value) + x

    def __float__(self) -> float:
        return float(self.value)


@dataclass
class _Group:
    """One (op, shapes, dtype) group's running merge."""

    tag: tuple  # the least (position, index in its rank) seen: its order among equal groups
    first: OpGroup  # the member of the least position
    first_at: tuple
    members: int = 0
    calls: int = 0
    kernels: int = 0
    time_s: Exact = field(default_factory=Exact)
    flops: Exact = field(default_factory=Exact)
    nbytes: Exact = field(default_factory=Exact)
    spread: float | None = None
    names: dict[str, tuple] = field(default_factory=dict)  # kernel name → least (position, index)


@dataclass
class _Part:
    """The fold of the summaries analysed with one device."""

    groups: dict[tuple, _Group] = field(default_factory=dict)
    totals: dict[tuple, list] = field(default_factory=dict)  # key → [tag, calls, Exact µs]
    values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    ranks: int = 0
    lone: tuple[OpGroup, ...] | None = None  # the only rank's groups, as they are (one rank)


def position(s: Any, index: int) -> tuple[int, int]:
    """Where the reduce puts a summary: by rank id, then by file."""
    return (s.rank if s.rank is not None else _NO_RANK, index)


class RankFold:
    """The running reduce of :class:`~infer_opt.trace.ranks.RankSummary` s. ``files``: the
    map's inputs, in order (a summary's file index is its place there)."""

    def __init__(self, files: Sequence[str | os.PathLike[str]]) -> None:
        self._index: dict[str, int] = {}
        for i, f in enumerate(files):
            self._index.setdefault(os.fspath(f), i)
            self._index.setdefault(os.path.abspath(os.fspath(f)), i)
        self._parts: dict[str | None, _Part] = {}
        self._slowest: tuple | None = None  # (median, position, what_if, idle_causes)

    def take(self, found: Any) -> Any:
        """The map's hook: a summary folded and returned without what was folded; a capture
        or graph-replay trace (linked on the driver, maybe analysed again) and a failure as they are."""
        if not hasattr(found, "groups") or found.is_capture or found.graph_launches:
            return found
        return self.add(found)

    def add(self, s: Any) -> Any:
        """``s`` folded into its device's partition; ``s`` without its groups, kernel totals,
        kernel durations and what-ifs."""
        at = position(s, self._index.get(s.path, self._index.get(os.path.abspath(s.path), _NO_RANK)))
        part = self._parts.setdefault(_name(s.spec), _Part())
        part.ranks += 1
        part.lone = tuple(s.groups) if part.ranks == 1 else None
        for j, g in enumerate(s.groups):
            _add_group(part.groups, g, (at, j))
        for j, (key, (c, t)) in enumerate(s.kernel_totals.items()):
            row = part.totals.setdefault(key, [(at, j), 0, Exact()])
            row[0] = min(row[0], (at, j))
            row[1] += c
            row[2].add(t)
        part.values, part.counts = _union(part.values, part.counts, s.kernel_values, s.kernel_counts)
        median, was = s.timeline.step_time_median_s, self._slowest
        # over every device: a rank analysed again (the job's device) replaces its first analysis
        if was is None or at == was[1] or _slower((median, at), was[:2]):
            self._slowest = (median, at, s.what_if, s.idle_causes)
        return replace(
            s, groups=(), kernel_totals={}, kernel_values=s.kernel_values[:0],
            kernel_counts=s.kernel_counts[:0], what_if=(), idle_causes=(),
        )  # fmt: skip

    def _part(self, spec: Any) -> _Part:
        return self._parts.get(_name(spec), _Part())

    def groups(self, spec: Any, peaks: Peaks) -> tuple[OpGroup, ...]:
        """The merged op groups (:func:`~infer_opt.trace.ops.merge_groups` of the ranks, in
        rank order; one rank's as they are)."""
        part = self._part(spec)
        if part.ranks == 1 and part.lone is not None:
            return part.lone
        out = [(_merged(g, peaks), g.tag) for g in part.groups.values()]
        out.sort(key=lambda p: (-p[0].time_s, p[0].name, p[0].shapes, p[1]))
        return tuple(g for g, _ in out)

    def kernel_totals(self, spec: Any) -> dict[tuple[str, str, str], tuple[int, float]]:
        """The ranks' kernel totals summed (exactly), in the order the ranks first name them."""
        rows = sorted(self._part(spec).totals.items(), key=lambda kv: kv[1][0])
        return {key: (c, float(t)) for key, (_, c, t) in rows}

    def kernel_times(self, spec: Any) -> tuple[np.ndarray, np.ndarray]:
        """The ranks' kernel durations as (distinct values, counts)."""
        part = self._part(spec)
        return part.values, part.counts

    def slowest(self) -> tuple[tuple, tuple]:
        """The slowest rank's (longest median step, first in rank order) what-ifs and idle causes."""
        found = self._slowest
        return (found[2], found[3]) if found is not None else ((), ())


def _slower(a: tuple, b: tuple) -> bool:
    """``a`` (median, position) is picked over ``b`` by ``np.argmax`` over the sorted ranks
    (the largest median, a NaN first; among equals the least position)."""
    (ma, pa), (mb, pb) = a, b
    if math.isnan(mb):
        return math.isnan(ma) and pa < pb
    if math.isnan(ma) or ma > mb:
        return True
    return ma == mb and pa < pb


def _add_group(groups: dict[tuple, _Group], g: OpGroup, at: tuple) -> None:
    key = (g.name, g.shapes, g.dtype)
    m = groups.get(key)
    if m is None:
        m = groups[key] = _Group(tag=at, first=g, first_at=at)
    elif at < m.first_at:
        m.first, m.first_at = g, at
    m.tag = min(m.tag, at)
    m.members += 1
    m.calls += g.calls
    m.kernels += g.kernels
    m.time_s.add(g.time_s)
    m.flops.add(g.flops)
    m.nbytes.add(g.bytes)
    if g.time_spread_s is not None:
        m.spread = g.time_spread_s if m.spread is None else max(m.spread, g.time_spread_s)
    for k, name in enumerate(g.kernel_names):
        m.names[name] = min(m.names.get(name, (at, k)), (at, k))
    if len(m.names) > to.KERNEL_NAMES_KEPT:  # only the first few are ever shown
        kept = sorted(m.names.items(), key=lambda kv: kv[1])[: to.KERNEL_NAMES_KEPT]
        m.names = dict(kept)


def _merged(m: _Group, peaks: Peaks) -> OpGroup:
    """One group's merge, as :func:`~infer_opt.trace.ops.merge_groups` makes it."""
    first = m.first
    if m.members == 1:
        return first
    work = to._work(
        m.calls, float(m.time_s), float(m.flops), float(m.nbytes), first.bound != "unknown",
        first.precision, to.group_peaks(first.family, peaks),
    )  # fmt: skip
    names = tuple(sorted(m.names, key=m.names.__getitem__))
    return replace(first, **work, kernels=m.kernels, time_spread_s=m.spread, kernel_names=names)


def _union(
    values: np.ndarray, counts: np.ndarray, more: np.ndarray, more_counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    if not len(more):
        return values, counts
    distinct, where = np.unique(np.concatenate([values, more]), return_inverse=True)
    total = np.zeros(len(distinct), dtype=np.int64)
    np.add.at(total, where, np.concatenate([counts, more_counts]))
    return distinct, total


def _name(spec: Any) -> str | None:
    return spec.name if spec is not None else None


__all__ = ["Exact", "RankFold", "position"]
