"""CUDA-graph capture sizes: the list that minimises the expected decode step time.

A batch of ``b`` sequences runs at the smallest captured size ``c >= b``, at cost ``t(c)``;
above the largest capture it runs uncaptured at ``t(b) + D`` (``D`` the eager overhead) or at
a measured eager cost ``t_e(b)``. Expected step = ``Σ_b p(b)·cost(b)``.

Which capture sizes are worth considering (any cost curve, monotone or not). Drop every capture
that serves no observed batch (the expected step is unchanged, the list shorter). A capture ``c``
that serves observed batches serves those in ``(c_prev, c]``; let ``v_j`` be the largest of them,
so ``v_j <= c < v_{j+1}`` (``c >= v_{j+1}`` would serve ``v_{j+1}`` too). Moving ``c`` anywhere in
the integer interval ``I_j = [v_j, v_{j+1} - 1]`` serves the same batches, leaves every other
capture serving the same batches and changes only the price ``t(c)`` those batches pay; so an
optimal list holds, for each of its captures, the cheapest size of its interval:
``c*_j = argmin_{c in I_j} t(c)`` at ``t*_j = t(c*_j)`` (ties: the smallest size). The top interval
``I_D = [v_D, max(v_D, largest measured size)]``: a size beyond both the data and the measured
table is priced by extrapolation alone (a falling last segment would make ever larger captures
look ever cheaper) and is not proposed. So the proposal is never slower than a current list
within that range and the capture limit; a current list that is cheaper only through such sizes
(or more captures than allowed) is kept (``capture_keep_current``). The curve is log-log linear,
hence monotone, between consecutive measured sizes (and beyond each end), so the minimum over
``I_j`` is at an end of ``I_j`` or at a measured size inside it (:func:`_cheapest_in_intervals`).
The problem is then the classic one over the ``D`` intervals with prices ``t*_j``: with
``P_j = Σ_{l<=j} p_l``, ``f_m(j) = min_{i<j} f_{m-1}(i) + (P_j - P_i)·t*_j`` is the cost of the
batches up to ``v_j`` with ``m`` captures the largest of which is ``c*_j``; the list's total adds
the uncaptured cost of the batches above ``v_j``. For a non-decreasing ``t*`` the run cost is
Monge and the optimal split is monotone in j: divide and conquer, O(D·log D) per layer
(:func:`_monotone_layer`); otherwise a lower envelope of lines, O(D·log D) per layer
(:func:`_hull_layer`). Without a binding limit on the number of captures the optimum needs no
layers at all (:func:`unconstrained`, O(D)): each batch pays the least ``t*`` from its own
interval up to the top capture; only the first :data:`MARGINAL_LAYERS` layers are then computed,
for the table of what each extra capture saves.

Worked check: p = {1: 0.5, 3: 0.5}, t(b) = 1 + b ms, one capture, D = 10 ms → {3}: 4 ms,
beats {1}: 0.5·2 + 0.5·(4 + 10) = 8 ms.

The cost curve between measured sizes is interpolated linearly in log(b)-log(t); outside the
measured range it is extended by the nearest segment's slope, and flagged as extrapolated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infer_opt.errors import InvalidInput
from infer_opt.inputs.prometheus import ITERATION_TOKENS, Histogram
from infer_opt.notices import Notice

#: the largest batch size (tokens per step) a list may hold
MAX_BATCH = 1 << 20


# ----------------------------------------------------------------------------- cost curve


@dataclass(frozen=True, eq=False)
class CostCurve:
    """Measured ``(size, time_s)`` points, strictly increasing sizes, times > 0."""

    sizes: np.ndarray
    times: np.ndarray
    source: str = "cost"

    def __call__(self, b: np.ndarray | Sequence[int] | int) -> np.ndarray:
        """``t(b)`` interpolated log-log (a single point: constant)."""
        x = np.log(np.asarray(b, dtype=np.float64))
        if len(self.sizes) == 1:
            return np.full(np.shape(x), float(self.times[0]))
        lx, ly = np.log(self.sizes.astype(np.float64)), np.log(self.times)
        y = np.interp(x, lx, ly)
        lo, hi = x < lx[0], x > lx[-1]
        slope_lo = (ly[1] - ly[0]) / (lx[1] - lx[0])
        slope_hi = (ly[-1] - ly[-2]) / (lx[-1] - lx[-2])
        y = np.where(lo, ly[0] + slope_lo * (x - lx[0]), y)
        y = np.where(hi, ly[-1] + slope_hi * (x - lx[-1]), y)
        return np.exp(y)

    def extrapolated(self, b: np.ndarray) -> np.ndarray:
        b = np.asarray(b)
        return (b < self.sizes[0]) | (b > self.sizes[-1])

    def measured(self, b: np.ndarray) -> np.ndarray:
        return np.isin(np.asarray(b), self.sizes)


def cost_curve(sizes: Sequence[float], times_s: Sequence[float], *, source: str = "cost") -> CostCurve:
    """A cost curve from points (sorted here; a repeated size is refused)."""
    s = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(times_s, dtype=np.float64)
    if s.size == 0:
        raise InvalidInput(source, "no rows", "the cost table needs at least one batch size")
    if not np.all(np.isfinite(s)) or (s < 1).any() or (s != np.floor(s)).any():
        raise InvalidInput(source, "batch sizes", "batch sizes must be whole numbers >= 1")
    if not np.all(np.isfinite(t)) or (t <= 0).any():
        raise InvalidInput(source, "times", "step times must be finite and > 0")
    order = np.argsort(s, kind="stable")
    s, t = s[order], t[order]
    dup = np.flatnonzero(np.diff(s) == 0)
    if dup.size:
        raise InvalidInput(source, int(s[dup[0]]), "each batch size may appear once in the cost table")
    return CostCurve(s.astype(np.int64), t, source)


def decreasing_notices(curve: CostCurve, code: str = "cost_decreasing") -> tuple[Notice, ...]:
    """A warning where the measured cost goes down as the batch grows."""
    drops = np.flatnonzero(np.diff(curve.times) < 0)
    if not drops.size:
        return ()
    i = int(drops[0])
    values = {
        "source": curve.source,
        "at": int(curve.sizes[i + 1]),
        "before": int(curve.sizes[i]),
        "time_s": float(curve.times[i + 1]),
        "before_s": float(curve.times[i]),
        "count": int(drops.size),
    }
    return (Notice(code, values),)


# ----------------------------------------------------------------------------- distribution


@dataclass(frozen=True, eq=False)
class Distribution:
    """Observed batch sizes (strictly increasing) with their probabilities (sum 1)."""

    sizes: np.ndarray
    probs: np.ndarray
    steps: float
    source: str = "batches"


def distribution(sizes: Sequence[int], counts: Sequence[float], *, source: str = "batches") -> Distribution:
    """Aggregate ``(size, count)`` pairs; sizes whole >= 1, counts >= 0, some > 0."""
    s = np.asarray(sizes, dtype=np.float64)
    c = np.asarray(counts, dtype=np.float64)
    if s.size == 0:
        raise InvalidInput(source, "no rows", "the batch-size distribution is empty")
    if (s < 1).any() or (s != np.floor(s)).any() or (s > MAX_BATCH).any():
        raise InvalidInput(source, "batch sizes", f"batch sizes must be whole numbers in [1, {MAX_BATCH}]")
    if not np.all(np.isfinite(c)) or (c < 0).any():
        raise InvalidInput(source, "counts", "counts must be finite and >= 0")
    values, inverse = np.unique(s.astype(np.int64), return_inverse=True)
    agg = np.zeros(len(values))
    np.add.at(agg, inverse, c)
    keep = agg > 0
    total = float(agg.sum())
    if total <= 0:
        raise InvalidInput(source, "all counts 0", "the distribution has no decode steps")
    return Distribution(values[keep], agg[keep] / total, total, source)


# ----------------------------------------------------------------------------- evaluation


@dataclass(frozen=True, eq=False)
class Problem:
    """Everything the expected step time of a list depends on, at the observed sizes."""

    dist: Distribution
    #: t(v) at each observed size (its own size's cost)
    captured: np.ndarray
    #: the uncaptured cost at each observed size: t(v) + D, or the eager table
    uncaptured: np.ndarray
    #: the cheapest size of each observed size's interval ``[v_j, v_{j+1} - 1]`` (module
    #: docstring) and its cost: what the DP chooses among
    capture_at: np.ndarray | None = None
    capture_cost: np.ndarray | None = None


def problem(
    dist: Distribution,
    curve: CostCurve,
    *,
    eager_overhead_s: float | None,
    eager: CostCurve | None,
) -> Problem:
    t = curve(dist.sizes)
    u = eager(dist.sizes) if eager is not None else t + (eager_overhead_s or 0.0)
    at, cost = _cheapest_in_intervals(dist.sizes, curve)
    return Problem(dist, t, u, at, cost)


def _cheapest_in_intervals(v: np.ndarray, curve: CostCurve) -> tuple[np.ndarray, np.ndarray]:
    """``argmin`` and ``min`` of ``t`` over each ``[v_j, v_{j+1} - 1]`` (the last up to the
    largest measured size, when above ``v_D``): ``t`` is monotone between measured sizes, so
    only the interval ends and the measured sizes inside need evaluating."""
    v = np.asarray(v, dtype=np.int64)
    top = max(int(v[-1]), min(int(curve.sizes[-1]), MAX_BATCH))
    highs = np.concatenate((v[1:] - 1, [top]))
    knots = curve.sizes[(curve.sizes >= v[0]) & (curve.sizes <= top)]
    points = np.unique(np.concatenate((v, highs, knots)))
    prices = curve(points)
    starts = np.searchsorted(points, v, side="left")
    mins = np.minimum.reduceat(prices, starts)
    seg = np.searchsorted(starts, np.arange(points.size), side="right") - 1
    hits = np.flatnonzero(prices == mins[seg])
    first = hits[np.unique(seg[hits], return_index=True)[1]]  # the smallest size at the minimum
    return points[first], mins


def expected_step(prob: Problem, capture_sizes: Sequence[int], curve: CostCurve) -> float:
    """``Σ p(b)·cost(b)`` under ``capture_sizes`` (any sizes, not only observed ones)."""
    v = prob.dist.sizes
    caps = np.asarray(sorted(capture_sizes), dtype=np.int64)
    if caps.size == 0:
        return float(np.dot(prob.dist.probs, prob.uncaptured))
    idx = np.searchsorted(caps, v, side="left")
    inside = idx < caps.size
    cost = prob.uncaptured.copy()
    cost[inside] = curve(caps[idx[inside]])
    return float(np.dot(prob.dist.probs, cost))


# ----------------------------------------------------------------------------- the DP


#: layers of the DP computed for the table of what each extra capture saves when the number of
#: captures is not the binding limit (the optimum itself comes from :func:`unconstrained`)
MARGINAL_LAYERS = 64


@dataclass(frozen=True)
class DPTable:
    """``best[m]`` = least expected step with exactly ``m`` captures (m = 0..layers), and the
    parents to rebuild each list; ``free``/``free_s``: the optimum with no limit on the number of
    captures (None when the limit binds, or not computed)."""

    best: tuple[float, ...]
    last: tuple[int, ...]
    parents: tuple[np.ndarray, ...]
    sizes: tuple[int, ...]
    free: tuple[int, ...] | None = None
    free_s: float = math.inf

    @property
    def layers(self) -> int:
        return len(self.best) - 1

    def capture_list(self, m: int) -> tuple[int, ...]:
        if m == 0:
            return ()
        if m > self.layers:
            assert self.free is not None and m == len(self.free)
            return self.free
        out, j = [], self.last[m]
        for level in range(m, 0, -1):
            out.append(self.sizes[j - 1])
            j = int(self.parents[level][j])
        return tuple(reversed(out))


def unconstrained(prob: Problem) -> tuple[float, tuple[int, ...]]:
    """The least expected step with any number of captures, and its (shortest) list, in O(D).

    With the top capture in interval ``J``, batch ``j <= J`` pays ``min_{j<=l<=J} t*_l`` at best
    (the next capture at or above ``v_j`` lies in one of those intervals) and exactly that when
    the list is the strict suffix minima of ``t*_1..t*_J``; batches above ``v_J`` pay their
    uncaptured cost. A stack of suffix minima (merged weights) gives every ``J``'s total."""
    p, t, u = prob.dist.probs, _prices(prob), prob.uncaptured
    tail = np.concatenate((np.cumsum((p * u)[::-1])[::-1], [0.0]))
    best, best_j = float(tail[0]), -1
    vals: list[float] = []
    weights: list[float] = []
    running = 0.0
    for j, (tj, pj) in enumerate(zip(t.tolist(), p.tolist(), strict=True)):
        w = pj
        while vals and vals[-1] >= tj:  # an equal price above serves both: one capture fewer
            running -= vals[-1] * weights[-1]
            w += weights.pop()
            vals.pop()
        vals.append(tj)
        weights.append(w)
        running += tj * w
        if running + tail[j + 1] < best:
            best, best_j = running + float(tail[j + 1]), j
    keep: list[int] = []
    for j in range(best_j + 1):
        while keep and t[keep[-1]] >= t[j]:
            keep.pop()
        keep.append(j)
    return best, tuple(
        int(prob.capture_at[j]) if prob.capture_at is not None else int(prob.dist.sizes[j]) for j in keep
    )


def _prices(prob: Problem) -> np.ndarray:
    return prob.captured if prob.capture_cost is None else prob.capture_cost


def optimal_lists(prob: Problem, k_max: int) -> DPTable:
    """Exact least expected step for at most ``k_max`` captures (module docstring): layers
    ``m = 0..k_max`` when the limit binds, else :func:`unconstrained` and the first
    :data:`MARGINAL_LAYERS` layers."""
    p, t, u = prob.dist.probs, _prices(prob), prob.uncaptured
    d = len(p)
    k_max = min(k_max, d)
    free_s, free = unconstrained(prob)
    layers = min(len(free), MARGINAL_LAYERS) if len(free) <= k_max else k_max
    prefix = np.concatenate(([0.0], np.cumsum(p)))
    tail = np.concatenate((np.cumsum((p * u)[::-1])[::-1], [0.0]))  # tail[j] = Σ_{l>=j} (0-based)
    tj = np.concatenate(([0.0], t))
    layer = np.full(d + 1, math.inf)
    layer[1:] = prefix[1:] * t  # one capture at c*_j covers v_1..v_j
    best = [float(tail[0])]
    last = [0]
    parents: list[np.ndarray] = [np.zeros(0, np.int32), np.zeros(d + 1, np.int32)]
    monotone = bool(np.all(np.diff(t) >= 0))
    for m in range(1, layers + 1):
        if m > 1:
            step = _monotone_layer if monotone else (_dense_layer if d <= 1500 else _hull_layer)
            layer, parent = step(layer, m, prefix, tj, d)
            parents.append(np.asarray(parent, dtype=np.int32))
        totals = layer[1:] + tail[1:]
        j = int(np.argmin(totals)) + 1
        best.append(float(totals[j - 1]))
        last.append(j)
    sizes = prob.capture_at if prob.capture_at is not None else prob.dist.sizes
    table_free = free if len(free) <= k_max and len(free) > layers else None
    return DPTable(tuple(best), tuple(last), tuple(parents), tuple(int(x) for x in sizes), table_free, free_s)


def _monotone_layer(
    prev: np.ndarray, m: int, prefix: np.ndarray, tj: np.ndarray, d: int
) -> tuple[np.ndarray, np.ndarray]:
    """``f_m(j) = P_j·t_j + min_{m-1<=i<j} (f_{m-1}(i) - P_i·t_j)`` for a non-decreasing t.

    The run cost ``w(i, j) = (P_j - P_i)·t_j`` is Monge then (``w(a,c) + w(b,d) - w(a,d) - w(b,c)
    = (P_b - P_a)(t_c - t_d) <= 0``), so the leftmost optimal ``i`` is non-decreasing in ``j``:
    divide and conquer (solve the middle ``j`` of each range, split the ``i`` range at its
    optimum), every range of one level evaluated in one numpy pass: O(D log D) per layer."""
    cur = np.full(d + 1, math.inf)
    parent = np.zeros(d + 1, dtype=np.int64)
    jl, jr = np.array([m]), np.array([d])
    il, ir = np.array([m - 1]), np.array([d - 1])
    while jl.size:
        mid = (jl + jr) // 2
        hi = np.minimum(ir, mid - 1)
        lengths = hi - il + 1
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        seg = np.repeat(np.arange(jl.size), lengths)
        flat = np.arange(int(lengths.sum())) - starts[seg] + il[seg]
        vals = prev[flat] - prefix[flat] * tj[mid[seg]]
        mins = np.minimum.reduceat(vals, starts)
        hits = np.flatnonzero(vals == mins[seg])
        first = hits[np.unique(seg[hits], return_index=True)[1]]
        opt = flat[first]
        cur[mid] = prefix[mid] * tj[mid] + mins
        parent[mid] = opt
        left, right = jl <= mid - 1, mid + 1 <= jr
        jl, jr, il, ir = (
            np.concatenate((jl[left], mid[right] + 1)),
            np.concatenate((mid[left] - 1, jr[right])),
            np.concatenate((il[left], opt[right])),
            np.concatenate((opt[left], ir[right])),
        )
    return cur, parent


def _dense_layer(
    prev: np.ndarray, m: int, prefix: np.ndarray, tj: np.ndarray, d: int
) -> tuple[np.ndarray, list[int]]:
    """The same minimum by brute force over i (any t), row by row."""
    cur = np.full(d + 1, math.inf)
    parent = [0] * (d + 1)
    for j in range(m, d + 1):
        cand = prev[m - 1 : j] - prefix[m - 1 : j] * tj[j]
        i = int(np.argmin(cand))
        cur[j] = prefix[j] * tj[j] + cand[i]
        parent[j] = m - 1 + i
    return cur, parent


def best_within(table: DPTable, k_max: int) -> int:
    """The number of captures (0..k_max) with the least expected step (ties: fewer)."""
    ks = range(min(k_max, table.layers) + 1)
    m = min(ks, key=lambda n: (round(table.best[n], 15), n))
    if table.free is not None and round(table.free_s, 15) < round(table.best[m], 15):
        return len(table.free)
    return m


def _hull_layer(
    prev: np.ndarray, m: int, prefix: np.ndarray, tj: np.ndarray, d: int
) -> tuple[np.ndarray, list[int]]:
    """The same minimum for any t: ``min_i (f_{m-1}(i) - P_i·x)`` at ``x = t_j`` is the lower
    envelope of lines whose slopes ``-P_i`` fall as ``i`` grows; lines join the envelope in that
    order and each query is a binary search over its breakpoints, O(D·log D)."""
    from bisect import bisect_right

    cur = np.full(d + 1, math.inf)
    parent = [0] * (d + 1)
    slopes: list[float] = []
    inters: list[float] = []
    ids: list[int] = []
    breaks: list[float] = []  # breaks[k]: where line k + 1 starts beating line k
    pv, pp, tv = prev.tolist(), prefix.tolist(), tj.tolist()
    for j in range(m, d + 1):
        a, c = -pp[j - 1], pv[j - 1]
        add = True
        while ids:
            if slopes[-1] == a:  # parallel: keep the lower
                if inters[-1] <= c:
                    add = False
                    break
            elif len(ids) < 2 or (c - inters[-1]) / (slopes[-1] - a) > breaks[-1]:
                break
            slopes.pop(), inters.pop(), ids.pop()
            if breaks:
                breaks.pop()
        if add:
            if ids:
                breaks.append((c - inters[-1]) / (slopes[-1] - a))
            slopes.append(a), inters.append(c), ids.append(j - 1)
        k = bisect_right(breaks, tv[j])
        cur[j] = pp[j] * tv[j] + inters[k] + slopes[k] * tv[j]
        parent[j] = ids[k]
    return cur, parent


# ----------------------------------------------------------------------------- engines

#: vLLM's default capture list, read in vLLM's source: ``VllmConfig._set_cudagraph_sizes`` in
#: ``vllm/config/vllm.py`` (vllm-project/vllm main at commit 000fc94b, and the same rule in an
#: earlier stored version of the file): ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)``
#: with ``max = min(max_num_seqs · (1 + num_speculative_tokens) · 2, 512)`` (1024 on data-center
#: Blackwell), then capped at ``max_num_batched_tokens``, which is itself appended when it is below
#: that cap. ``performance_mode="interactivity"`` (newer versions) captures every size 1..32 instead
#: of 1, 2, 4. The release each form shipped in is not checked here.
VLLM_SOURCE = "vLLM _set_cudagraph_sizes, main @000fc94b"
#: SGLang's default ``--cuda-graph-bs``, read in ``ServerArgs._generate_cuda_graph_batch_sizes``
#: (``python/sglang/srt/server_args.py``, the case without speculative decoding and with padding):
#: ``[1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) + range(512, max + 1, 32)``. The
#: top, ``cuda_graph_max_bs``, was 160 in older versions; newer ones choose it by GPU memory and
#: TP size (24/80 under 35 GB, 32/160 under 60 GB, 256/512 on 80–160 GB GPUs, for TP < 4 / TP >= 4),
#: so 160 is only a stand-in: give ``--engine-max-size``. SGLang's main branch has since moved the
#: setting into ``--cuda-graph-config`` (``decode.bs``); whether it still takes ``--cuda-graph-bs``
#: is not checked here.
SGLANG_SOURCE = "SGLang _generate_cuda_graph_batch_sizes"
#: said when SGLang's top is not given: it depends on the GPU
SGLANG_TOP_GUESS = "160 assumed, SGLang sets it by GPU memory and TP: give --engine-max-size"


def vllm_default(max_size: int) -> tuple[int, ...]:
    """``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)``, each <= ``max_size``."""
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, max_size + 1, 16)]
    return tuple(s for s in sizes if s <= max_size)


def sglang_default(max_size: int) -> tuple[int, ...]:
    """``[1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) + range(512, max + 1, 32)``."""
    sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_size + 1, 32)]
    return tuple(s for s in sizes if s <= max_size)


ENGINES = {"vllm": (vllm_default, VLLM_SOURCE, 512), "sglang": (sglang_default, SGLANG_SOURCE, 160)}


def engine_default(engine: str, max_size: int | None) -> tuple[tuple[int, ...], str]:
    """The engine's default list (``engine`` = ``vllm`` or ``sglang``, optionally ``@version``,
    which is recorded but does not change the list) and where it comes from."""
    name, _, version = engine.partition("@")
    if name not in ENGINES:
        raise InvalidInput("engine", engine, "expected vllm or sglang (optionally @version)")
    make, source, default_max = ENGINES[name]
    top = default_max if max_size is None else max_size
    if name == "sglang" and max_size is None:
        source = f"{source}; {SGLANG_TOP_GUESS}"
    label = f"{name} default up to {top} ({source}" + (f"; asked for {version}" if version else "") + ")"
    return make(top), label


def validate_list(sizes: Sequence[int], option: str = "current") -> tuple[int, ...]:
    """A capture list: whole numbers >= 1, no duplicates (sorted here)."""
    out = [int(s) for s in sizes]
    if any(s < 1 for s in out):
        raise InvalidInput(
            option, ",".join(map(str, out)), "capture sizes must be >= 1 (0 is not a batch size)"
        )
    if len(set(out)) != len(out):
        dup = next(s for s in out if out.count(s) > 1)
        raise InvalidInput(option, ",".join(map(str, out)), f"{dup} appears twice")
    return tuple(sorted(out))


def flags(capture_sizes: Sequence[int]) -> dict[str, str]:
    """The flags vLLM and SGLang take for this list."""
    listed = ", ".join(str(s) for s in capture_sizes)
    return {
        "vllm": f"--compilation-config '{{\"cudagraph_capture_sizes\": [{listed}]}}'",
        "sglang": "--cuda-graph-bs " + " ".join(str(s) for s in capture_sizes),
    }


# ----------------------------------------------------------------------------- Prometheus


def histogram_distributions(hist: Histogram, *, source: str) -> tuple[Distribution, Distribution, float]:
    """Mass inside each bucket ``(e_{k-1}, e_k]`` placed at its upper edge ``floor(e_k)``
    (pessimistic: every batch pads the most) and at its lower edge ``floor(e_{k-1}) + 1``
    (optimistic); the +Inf bucket at the last finite edge + 1 in both. Returns both and the
    share of steps in the +Inf bucket."""
    counts = np.diff(np.concatenate(([0.0], np.asarray(hist.cumulative))))
    edges = np.asarray(hist.edges)
    if counts.sum() <= 0:
        raise InvalidInput(
            "prometheus", source, f"{ITERATION_TOKENS} counts no steps: the histogram has no decode steps"
        )
    finite = np.isfinite(edges)
    last = float(edges[finite][-1]) if finite.any() else 1.0
    upper = np.where(finite, np.floor(edges), math.floor(last) + 1)
    lower_edges = np.concatenate(([0.0], edges[:-1]))
    lower = np.where(finite, np.floor(lower_edges) + 1, math.floor(last) + 1)
    keep = (counts > 0) & (upper >= 1)
    if not keep.any():
        raise InvalidInput("prometheus", source, 'every step is in the bucket le="0": no decode steps')
    lower = np.maximum(lower, 1)
    overflow = float(counts[~finite].sum() / counts.sum())
    hi = distribution(upper[keep], counts[keep], source=source)
    lo = distribution(np.minimum(lower[keep], upper[keep]), counts[keep], source=source)
    return hi, lo, overflow
