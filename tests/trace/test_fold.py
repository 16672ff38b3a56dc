"""The running reduce over ranks (trace/fold.py): folding the summaries in any arrival order
gives exactly the merge of the ranks in rank order, and the driver holds no rank's groups."""

from __future__ import annotations

import gc
import tracemalloc
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.results.trace import OpGroup, Peaks
from infer_opt.trace.fold import Exact, RankFold
from infer_opt.trace.kernel_table import kernel_rows
from infer_opt.trace.ops import merge_groups

PEAKS = Peaks({"bf16": 1e15}, 3e12, "test")


@dataclass(frozen=True)
class _Timeline:
    step_time_median_s: float


@dataclass(frozen=True)
class _Summary:
    """What the fold reads of a RankSummary."""

    path: str
    rank: int | None
    groups: tuple[OpGroup, ...]
    kernel_totals: dict = field(default_factory=dict)
    kernel_values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    kernel_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    timeline: Any = _Timeline(0.0)
    what_if: tuple = ()
    idle_causes: tuple = ()
    spec: Any = None
    is_capture: bool = False
    graph_launches: int = 0


_GROUP = st.builds(
    OpGroup,
    name=st.sampled_from(["aten::mm", "aten::add"]),
    shapes=st.sampled_from(["(2, 2)", "(4, 4)"]),
    dtype=st.sampled_from(["bf16", "fp32"]),
    calls=st.integers(1, 50),
    time_s=st.floats(1e-7, 1.0) | st.sampled_from([0.1, 0.2, 0.3]),  # equal times: the order among equals
    flops=st.floats(0, 1e12),
    bytes=st.floats(1, 1e10),
    achieved_flops_per_s=st.just(0.0),
    achieved_bytes_per_s=st.just(0.0),
    bound=st.sampled_from(["bandwidth", "unknown"]),
    peak_fraction=st.just(0.0),
    precision=st.just("bf16"),
    family=st.sampled_from(["matmul", "elementwise"]),
    kernels=st.integers(1, 100),
    time_spread_s=st.none() | st.floats(0, 1e-3),
    kernel_names=st.lists(st.sampled_from("abcdef"), max_size=3, unique=True).map(tuple),
)
_TOTALS = st.dictionaries(
    st.tuples(
        st.sampled_from(["k1", "k2", "k3"]), st.sampled_from(["", "matmul"]), st.sampled_from(["op", "name"])
    ),
    st.tuples(st.integers(1, 9), st.floats(0.001, 1e4) | st.sampled_from([0.1, 0.2, 0.3])),
    max_size=4,
)
_RANK = st.tuples(
    st.lists(_GROUP, max_size=4, unique_by=lambda g: (g.name, g.shapes, g.dtype)),
    _TOTALS,
    st.lists(st.sampled_from([1e-6, 2e-6, 5e-6, 1e-5]), max_size=5),
    st.sampled_from([0.1, 0.2]),  # the median step: ties among ranks
    st.booleans(),  # with a rank id (else: after every rank with one, in file order)
)


def _summaries(ranks: list) -> list[_Summary]:
    out = []
    for i, (groups, totals, durations, median, named) in enumerate(ranks):
        values, counts = np.unique(np.array(durations, dtype=float), return_counts=True)
        out.append(
            _Summary(
                path=f"r{i}.json", rank=(len(ranks) - i if named else None), groups=tuple(groups),
                kernel_totals=totals, kernel_values=values, kernel_counts=counts,
                timeline=_Timeline(median), what_if=(f"what-if of r{i}",),
            )
        )  # fmt: skip
    return out


def _folded(summaries: list[_Summary], order: list[int]) -> tuple:
    fold = RankFold([s.path for s in summaries])
    kept = [fold.take(summaries[i]) for i in order]
    assert all(not s.groups and not s.kernel_totals and not len(s.kernel_values) for s in kept)
    values, counts = fold.kernel_times(None)
    return (
        repr(fold.groups(None, PEAKS)),
        repr(kernel_rows([fold.kernel_totals(None)])),
        values.tolist(),
        counts.tolist(),
        fold.slowest(),
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(_RANK, min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_folding_in_any_arrival_order_gives_the_merge_of_the_ranks_in_rank_order(ranks, rnd):
    summaries = _summaries(ranks)
    # the reduce's order: by rank id, the ranks without one after, in file order
    ordered = sorted(summaries, key=lambda s: s.rank if s.rank is not None else 1 << 30)
    arrival = list(range(len(summaries)))
    rnd.shuffle(arrival)
    got = _folded(summaries, arrival)
    assert got == _folded(summaries, list(range(len(summaries))))
    groups = [s.groups for s in ordered]
    want = merge_groups(groups, peaks=PEAKS) if len(groups) > 1 else groups[0]
    assert got[0] == repr(want)
    assert got[1] == repr(kernel_rows([s.kernel_totals for s in ordered]))
    durations = [d for r in ranks for d in r[2]]
    values, counts = np.unique(np.array(durations, dtype=float), return_counts=True)
    assert (got[2], got[3]) == (values.tolist(), counts.tolist())
    medians = np.array([s.timeline.step_time_median_s for s in ordered])
    assert got[4] == (ordered[int(np.argmax(medians))].what_if, ())


def test_exact_sums_do_not_depend_on_the_order():
    terms = [1e16, 1.0, -1e16, 1.0, 3.3, 1e-9]
    a, b = Exact(), Exact()
    for t in terms:
        a.add(t)
    for t in reversed(terms):
        b.add(t)
    assert float(a) == float(b) == 5.300000001  # the correctly rounded sum (plain + gives 4.3...)
    assert sum(terms) != float(a)


def _big_rank(i: int, n_groups: int = 400) -> _Summary:
    """A rank of ``n_groups`` groups, the same keys on every rank (one model), its own times."""
    rng = np.random.default_rng(i)
    groups = tuple(
        OpGroup(
            f"aten::op{j}", f"({j}, 4096)", "bf16", 10, float(rng.uniform(1e-4, 1e-2)), 1e9, 1e8,
            None, None, "unknown", None, "bf16", "matmul", 10, 1e-5, (f"kernel_{j}_a", f"kernel_{j}_b"),
        )
        for j in range(n_groups)
    )  # fmt: skip
    totals = {(f"kernel_{j}_a", "matmul", "op"): (10, float(rng.uniform(1, 100))) for j in range(n_groups)}
    values = np.unique(rng.uniform(1e-6, 1e-3, 300))
    return _Summary(
        path=f"r{i}.json", rank=i, groups=groups, kernel_totals=totals, kernel_values=values,
        kernel_counts=np.ones(len(values), dtype=np.int64), timeline=_Timeline(float(rng.uniform())),
        what_if=tuple(f"what-if {i} {k}" for k in range(20)),
    )  # fmt: skip


def _peak_folding(ranks: int) -> int:
    """tracemalloc's peak while a map of ``ranks`` big summaries is folded (each summary made,
    folded and only its stripped remainder kept, as ``map_ranks`` does with ``consume``)."""
    fold = RankFold([f"r{i}.json" for i in range(ranks)])
    gc.collect()
    tracemalloc.start()
    try:
        kept = [fold.take(_big_rank(i)) for i in range(ranks)]
        fold.groups(None, PEAKS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept) == ranks
    return peak


def test_the_running_reduce_holds_no_ranks_groups():
    one = _peak_folding(4)
    many = _peak_folding(64)
    # holding every rank's groups would take ~16× the 4-rank peak; the fold holds one merge
    # (exact sums grow a few bytes per rank) and each rank's small remainder
    assert many < 2.5 * one, (one, many)
