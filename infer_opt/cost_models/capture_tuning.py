"""``tune capture-sizes``: the optimal capture list against the current one, per-bucket waste,
the uncaptured batches, the break-even of each extra capture (:mod:`capture_sizes` holds the
math; this module assembles the result)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from infer_opt.cost_models import capture_sizes as cs
from infer_opt.cost_models.amortization import break_even
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.requests import TuneCaptureSizesRequest
from infer_opt.results.tune_capture_sizes import (
    CaptureBucket,
    CostPoint,
    ListCost,
    MarginalCapture,
    TuneCaptureSizesResult,
    Uncaptured,
)


@dataclass(frozen=True, eq=False)
class Memory:
    """Graph memory per captured size: a constant, or a measured (size, bytes) table
    interpolated linearly (held flat outside it)."""

    per_capture: float | None = None
    sizes: np.ndarray | None = None
    bytes_: np.ndarray | None = None
    source: str = "memory"

    def of(self, capture_sizes: Sequence[int]) -> float:
        if self.per_capture is not None:
            return self.per_capture * len(capture_sizes)
        assert self.sizes is not None and self.bytes_ is not None
        return float(np.interp(np.asarray(capture_sizes, float), self.sizes, self.bytes_).sum())


@dataclass(frozen=True)
class Inputs:
    """What ``tune capture-sizes`` was given (labels say measured / estimated)."""

    dist: cs.Distribution
    curve: cs.CostCurve
    current: tuple[int, ...]
    current_source: str
    engine: str = "vllm"
    #: the optimistic placement of a coarse histogram (None: exact counts)
    dist_low: cs.Distribution | None = None
    overflow_share: float = 0.0
    max_captures: int | None = None
    memory: Memory | None = None
    memory_budget: float | None = None
    eager_overhead_s: float | None = None
    eager: cs.CostCurve | None = None
    capture_time_s: float | None = None
    inputs: tuple[tuple[str, str], ...] = ()
    notices: tuple[Notice, ...] = ()


def _k_limit(inp: Inputs) -> int:
    d = len(inp.dist.sizes)
    k = d if inp.max_captures is None else min(inp.max_captures, d)
    if inp.memory_budget is not None:
        if inp.memory is None or inp.memory.per_capture is None:
            raise InvalidInput(
                "memory_budget",
                inp.memory_budget,
                "needs --memory-per-capture (a budget over a --memory table is not supported yet)",
            )
        fits = int(inp.memory_budget // inp.memory.per_capture) if inp.memory.per_capture > 0 else d
        if fits < 1:
            raise InvalidInput(
                "memory_budget",
                inp.memory_budget,
                f"no list fits: one capture takes {inp.memory.per_capture:g} bytes",
            )
        k = min(k, fits)
    return k


def tune(inp: Inputs) -> TuneCaptureSizesResult:
    """The list minimising the expected step (pessimistic placement for a histogram), with the
    current list, the range under the other placement, waste, audit and break-even."""
    if inp.eager is None and inp.eager_overhead_s is None:
        raise InvalidInput("eager_overhead", "missing", "give --eager-overhead D or --eager-cost-file FILE")
    prob = cs.problem(inp.dist, inp.curve, eager_overhead_s=inp.eager_overhead_s, eager=inp.eager)
    low = (
        None
        if inp.dist_low is None
        else cs.problem(inp.dist_low, inp.curve, eager_overhead_s=inp.eager_overhead_s, eager=inp.eager)
    )
    k = _k_limit(inp)
    table = cs.optimal_lists(prob, k)
    m = cs.best_within(table, k)
    chosen = table.capture_list(m)
    proposed = _list_cost(chosen, prob, low, inp)
    if low is not None:
        # the best any list could do if every batch sat at its bucket's lower edge
        low_table = cs.optimal_lists(low, k)
        floor = low_table.best[cs.best_within(low_table, k)]
        proposed = replace(
            proposed, expected_step_range_s=(min(floor, proposed.expected_step_s), proposed.expected_step_s)
        )
    current = _list_cost(inp.current, prob, low, inp)
    gain = current.expected_step_s / proposed.expected_step_s if proposed.expected_step_s > 0 else 1.0
    keep = gain <= 1.0  # the list found is no faster than the current one: no flags to paste
    kept = (Notice("capture_keep_current", {"gain": gain, "current": inp.current_source}),) if keep else ()
    return TuneCaptureSizesResult(
        engine=inp.engine,
        capture_sizes=chosen,
        expected_step_s=proposed.expected_step_s,
        current=current,
        proposed=proposed,
        gain=gain,
        memory_bytes=proposed.memory_bytes,
        uncaptured=(_uncaptured("proposed", chosen, inp.dist), _uncaptured("current", inp.current, inp.dist)),
        buckets=(
            *_buckets("proposed", chosen, prob, inp.curve),
            *_buckets("current", inp.current, prob, inp.curve),
        ),
        marginal=_marginal(table, m, inp),
        curve=_curve(inp),
        flags={} if keep else cs.flags(chosen),
        recommendation="keep_current" if keep else "proposed",
        distribution_source=inp.dist.source,
        cost_source=inp.curve.source,
        spread=_spread(inp),
        max_captures=inp.max_captures,
        memory_budget_bytes=inp.memory_budget,
        inputs=dict(inp.inputs),
        current_source=inp.current_source,
        eager=_eager_label(inp),
        warnings=(*inp.notices, *_notices(inp), *kept),
    )


def _spread(inp: Inputs) -> str:
    if inp.dist_low is None:
        return "exact"
    return (
        "histogram: mass inside a bucket at its upper edge (pessimistic, used to choose) and at "
        "its lower edge (optimistic); expected steps are given as that range"
    )


def _eager_label(inp: Inputs) -> str:
    if inp.eager is not None:
        return f"measured eager cost table {inp.eager.source}"
    return f"cost(b) + eager overhead {inp.eager_overhead_s:g} s (estimated)"


def _list_cost(sizes: Sequence[int], prob: cs.Problem, low: cs.Problem | None, inp: Inputs) -> ListCost:
    e = cs.expected_step(prob, sizes, inp.curve)
    rng = None
    if low is not None:
        e_low = cs.expected_step(low, sizes, inp.curve)
        rng = (min(e, e_low), max(e, e_low))
    top = max(sizes) if sizes else 0
    share = float(inp.dist.probs[inp.dist.sizes > top].sum())
    memory = None if inp.memory is None else inp.memory.of(sizes)
    return ListCost(tuple(int(s) for s in sizes), e, rng, memory, share)


def _uncaptured(name: str, sizes: Sequence[int], dist: cs.Distribution) -> Uncaptured:
    top = max(sizes) if sizes else 0
    above = dist.sizes > top
    return Uncaptured(name, tuple(int(b) for b in dist.sizes[above]), float(dist.probs[above].sum()))


def _buckets(name: str, sizes: Sequence[int], prob: cs.Problem, curve: cs.CostCurve) -> list[CaptureBucket]:
    caps = np.asarray(sorted(sizes), dtype=np.int64)
    v, p = prob.dist.sizes, prob.dist.probs
    idx = np.searchsorted(caps, v, side="left")
    out = []
    t_caps = curve(caps) if caps.size else np.array([])
    for i, bound in enumerate(caps.tolist()):
        inside = idx == i
        waste = math.fsum(p[inside] * (t_caps[i] - prob.captured[inside]))
        lower = 1 if i == 0 else int(caps[i - 1]) + 1
        out.append(CaptureBucket(name, int(bound), lower, float(p[inside].sum()), waste))
    return out


def _marginal(table: cs.DPTable, m: int, inp: Inputs) -> tuple[MarginalCapture, ...]:
    rows = []
    for n in range(1, min(m, table.layers) + 1):  # (an unbounded optimum: its first layers)
        e_prev, e_now = table.best[n - 1], table.best[n]
        saving = e_prev - e_now
        be = None
        if inp.capture_time_s is not None:
            be = break_even(inp.capture_time_s, e_prev, e_now).break_even_calls
        memory = None if inp.memory is None else inp.memory.of(table.capture_list(n))
        rows.append(MarginalCapture(n, e_now, saving, memory, be))
    return tuple(rows)


def _curve(inp: Inputs) -> tuple[CostPoint, ...]:
    v = inp.dist.sizes
    t = inp.curve(v)
    measured = inp.curve.measured(v)
    extra = inp.curve.extrapolated(v)
    return tuple(
        CostPoint(int(b), float(p), float(x), bool(mm), bool(ee))
        for b, p, x, mm, ee in zip(v, inp.dist.probs, t, measured, extra, strict=True)
    )


def _notices(inp: Inputs) -> list[Notice]:
    found = list(cs.decreasing_notices(inp.curve))
    extra = inp.curve.extrapolated(inp.dist.sizes)
    if extra.any():
        found.append(
            Notice(
                "cost_extrapolated",
                {
                    "count": int(extra.sum()),
                    "share": float(inp.dist.probs[extra].sum()),
                    "low": int(inp.curve.sizes[0]),
                    "high": int(inp.curve.sizes[-1]),
                },
            )
        )
    if inp.overflow_share > 0:
        found.append(Notice("histogram_overflow", {"share": inp.overflow_share}))
    return found


def _current(
    current: tuple[int, ...] | None, engine: str, max_size: int | None
) -> tuple[tuple[int, ...], str]:
    if current is not None:
        return cs.validate_list(current, "--current"), "--current (as given)"
    return cs.engine_default(engine, max_size)


def run(request: TuneCaptureSizesRequest) -> TuneCaptureSizesResult:
    """``infer-opt tune capture-sizes``: the request's files read (:mod:`infer_opt.inputs.tune`)
    and :func:`tune` on them."""
    from infer_opt.inputs.tune import batch_distribution, read_costs, read_memory, window

    r = request
    if r.memory_per_capture is not None and r.memory is not None:
        raise InvalidInput("--memory", str(r.memory), "give --memory-per-capture or --memory, not both")
    if r.eager_cost_file and r.eager_overhead is not None:  # (the measured table wins: the other is unused)
        raise InvalidInput(
            "--eager-overhead",
            f"{r.eager_overhead:g} s",
            "give --eager-cost-file FILE or --eager-overhead D, not both",
        )
    got = batch_distribution(r.batches, window(r.prometheus, r.before))
    curve, cost_label, cost_notices = read_costs(r.cost_file or [], "--cost-file")
    eager = read_costs(r.eager_cost_file, "--eager-cost-file")[0] if r.eager_cost_file else None
    mem = None
    if r.memory_per_capture is not None:
        mem = Memory(per_capture=r.memory_per_capture)
    elif r.memory is not None:
        sizes, nbytes = read_memory(r.memory)
        mem = Memory(sizes=sizes, bytes_=nbytes, source=r.memory.name)
    listed, listed_source = _current(r.current, r.engine, r.engine_max_size)
    inputs = (
        ("distribution", got["label"]),
        ("cost", cost_label),
        ("eager", "measured table" if eager is not None else "estimated: cost(b) + --eager-overhead"),
        (
            "memory",
            "none"
            if mem is None
            else ("--memory-per-capture (as given)" if r.memory is None else f"{r.memory.name} (measured)"),
        ),
        ("current", listed_source),
    )
    return tune(
        Inputs(
            dist=got["dist"],
            curve=curve,
            current=listed,
            current_source=listed_source,
            engine=r.engine.partition("@")[0],
            dist_low=got.get("dist_low"),
            overflow_share=got.get("overflow_share", 0.0),
            max_captures=r.max_captures,
            memory=mem,
            memory_budget=r.memory_budget,
            eager_overhead_s=r.eager_overhead,
            eager=eager,
            capture_time_s=r.capture_time,
            inputs=inputs,
            notices=(*got["notices"], *cost_notices),
        )
    )
