"""``compare`` of two traces with their replays (trace/compare.py): each side's step bound,
critical path by cause and idle causes; what the headline says when one or both steps are
host-bound. Hand-made results: the analyzed fixture with its steps' replay figures replaced."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.reports.trace_compare import build_view
from infer_opt.results.trace import IdleCause
from infer_opt.results.trace_compare import TraceCompareResult
from infer_opt.trace.analyze import analyze
from infer_opt.trace.compare import compare_traces
from infer_opt.trace.critical import CAUSES

MODEL = Path(__file__).resolve().parent / "fixtures" / "model_step.json"
MS = 1e-3


@pytest.fixture(scope="module")
def base():
    return analyze([MODEL]).result


def _with(result, path, kernels=None, *, step=None, idle=(), device="H100"):
    """``result`` with every step's critical path ``path`` (ms by cause; the replayed span their
    sum), the kernel split ``kernels`` (ms) and a median step ``step`` (ms)."""
    causes = {c: path.get(c, 0.0) * MS for c in CAUSES}
    span = math.fsum(causes.values())
    split = {k: v * MS for k, v in (kernels or {}).items()}
    ranks = tuple(
        replace(
            rank,
            steps=tuple(
                replace(s, replayed_span_s=span, critical_path=causes, critical_kernels=split)
                for s in rank.steps
            ),
            step_time_median_s=(step or span / MS) * MS,
            step_time_spread_s=0.0,
        )
        for rank in result.ranks
    )
    return replace(result, ranks=ranks, idle_causes=tuple(idle), device_name=device)


H100 = {"host": 3.0, "launch": 0.4, "kernel": 0.3, "memcpy": 0.0}  # 3.7 ms, host 3.4 ms
MI300X = {"host": 2.5, "launch": 0.3, "kernel": 0.5}  # 3.3 ms, host 2.8 ms


def test_both_host_bound_the_headline_measures_the_hosts(base):
    late = (IdleCause("late launch", 3.2 * MS, 0.95),)
    b = _with(base, H100, {"matmul": 0.2, "other": 0.1}, idle=late)
    n = _with(base, MI300X, {"matmul": 0.4, "other": 0.1}, device="MI300X")
    n = replace(n, ops=tuple(replace(g, time_s=g.time_s * 1.25) for g in n.ops))
    r = compare_traces(b, n, base_name="h100", new_name="mi300x")
    assert r.base.bound == "host" and r.base.bound_share == pytest.approx(3.4 / 3.7)
    assert r.new.bound == "host" and r.new.bound_share == pytest.approx(2.8 / 3.3)
    assert r.base.host_on_path_s == pytest.approx(3.4 * MS)
    assert r.base.replayed_step_s == pytest.approx(3.7 * MS)
    assert r.base.idle_causes == late and r.new.idle_causes == ()
    assert r.compared == "kernel_time"
    assert r.headline.startswith("both steps are host-bound (host 92% and 85% of the critical path)")
    # 3.4 ms → 2.8 ms: the MI300X's host 1.21× faster; kernel time per step beside it
    assert (
        "host time on the critical path 3.4 ms → 2.8 ms per step (mi300x's host 1.21× faster)" in r.headline
    )
    assert "; mi300x took 1.25× more GPU kernel time per step than h100 (measured)" in r.headline
    assert "trace_compare_host_bound_path" in {w.code for w in r.warnings}
    same = compare_traces(b, b)
    assert "host time on the critical path 3.4 ms → 3.4 ms per step (the same within ±5%)" in same.headline


def test_the_critical_path_side_by_side_with_the_kernel_split(base):
    b = _with(base, H100, {"matmul": 0.2, "other": 0.1})
    n = _with(base, MI300X, {"matmul": 0.4, "other": 0.1})
    rows = {c.cause: c for c in compare_traces(b, n).critical_path}
    assert [c.cause for c in compare_traces(b, n).critical_path] == [
        "host", "launch", "kernel", "kernel: matmul", "kernel: other", "memcpy", "sync_wait", "comm",
    ]  # fmt: skip
    assert rows["host"].base_per_step_s == pytest.approx(3.0 * MS)
    assert rows["host"].new_per_step_s == pytest.approx(2.5 * MS)
    assert rows["host"].base_share == pytest.approx(3.0 / 3.7)
    assert rows["kernel: matmul"].new_per_step_s == pytest.approx(0.4 * MS)
    assert rows["kernel"].new_share == pytest.approx(0.5 / 3.3)


def test_one_side_host_bound_keeps_the_step_ratio_and_says_what_it_mixes(base):
    b = _with(base, H100)  # 3.7 ms, host-bound
    n = _with(base, {"host": 0.2, "launch": 0.1, "kernel": 1.5})  # 1.8 ms, device-bound
    r = compare_traces(b, n)
    assert r.new.bound == "device" and r.new.bound_share == pytest.approx(1.5 / 1.8)
    assert r.compared == "step"
    assert r.step_ratio == pytest.approx(1.8 / 3.7)
    assert r.headline.startswith("new ran 2.06× faster than base")
    assert (
        "but base's step is host-bound (host 92% of its critical path) and new's device-bound" in r.headline
    )


def test_both_device_bound_adds_nothing(base):
    dev = {"host": 0.1, "kernel": 2.0}
    r = compare_traces(_with(base, dev), _with(base, {"host": 0.1, "kernel": 1.0}))
    assert r.compared == "step" and "host-bound" not in r.headline
    assert r.headline.startswith("new ran 1.91× faster than base")


def test_without_a_replay_the_idle_rule_decides_and_no_path_is_shown(base):
    bare = _with(base, {})
    ranks = tuple(
        replace(rk, steps=tuple(replace(s, critical_path={}, bound="") for s in rk.steps))
        for rk in bare.ranks
    )
    bare = replace(bare, ranks=ranks)
    r = compare_traces(bare, bare)
    assert r.base.bound == "" and r.base.critical_path == {} and r.critical_path == ()
    assert r.compared == "step"  # the fixture's GPU idles 35% < 80%
    idle = replace(bare, ranks=tuple(replace(rk, idle_fraction=0.9) for rk in bare.ranks))
    r = compare_traces(idle, idle)
    assert r.compared == "kernel_time"
    assert r.headline.startswith("both steps are host-bound (the GPU idle 90% and 90% of the step)")
    assert "host time on the critical path" not in r.headline


def test_the_result_round_trips_and_the_view_shows_the_path(base):
    late = (IdleCause("late launch", 3.2 * MS, 0.95), IdleCause("host sync: x in aten::item", 0.1 * MS, 0.05))
    r = compare_traces(_with(base, H100, {"matmul": 0.3}, idle=late), _with(base, MI300X))
    again = TraceCompareResult.from_dict(r.to_dict())
    assert again == r
    view = build_view(r)
    assert view.tables[-1].title.startswith("Critical path by cause")
    summary = dict(view.summary)
    bound = "host-bound (91.9% of the critical path), replayed step 3.7 ms"
    assert summary["Base step bound (replayed)"] == bound
    assert summary["Base idle causes"].startswith("late launch 3.2")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.0, 5.0), min_size=6, max_size=6),
    st.lists(st.floats(0.0, 5.0), min_size=6, max_size=6),
)
def test_causes_sum_to_the_replayed_step_and_the_bound_is_the_larger_side(base, xs, ys):
    sides = [_with(base, dict(zip(CAUSES, v, strict=True))) for v in (xs, ys)]
    r = compare_traces(*sides)
    for side, col, v in ((r.base, "base", xs), (r.new, "new", ys)):
        total = math.fsum(getattr(c, f"{col}_per_step_s") for c in r.critical_path if ":" not in c.cause)
        assert total == pytest.approx(side.replayed_step_s, abs=1e-12)
        host = v[0] + v[1] + v[4]
        if abs(host - (sum(v) - host)) > 1e-9:
            assert side.bound == ("host" if host > sum(v) - host else "device")
        assert 0.5 <= side.bound_share <= 1.0 or sum(v) == 0
