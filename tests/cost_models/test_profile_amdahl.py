from __future__ import annotations

import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.cost_models.amdahl import amdahl_speedup
from infer_opt.cost_models.profile_amdahl import (
    CategoryTime,
    capped_bound,
    profile_amdahl,
    roofline_line,
)
from infer_opt.errors import InvalidInput


def test_worked_example_ranked_by_speedup_at_the_bound():
    # step 1 s: matmul 0.6 s (bound 0.3 s: s = 2), attention 0.2 s (bound 0.02 s: s = 10), rest unattributed
    result = profile_amdahl(
        [CategoryTime("attention", 0.2, 0.02), CategoryTime("matmul", 0.6, 0.3)], step_time_s=1.0
    )
    matmul, attention = result.opportunities
    assert matmul.category == "matmul"
    assert matmul.fraction == pytest.approx(0.6)
    assert matmul.part_speedup == pytest.approx(2.0)
    assert matmul.roofline_speedup == pytest.approx(1 / (0.4 + 0.3))
    assert matmul.ceiling_speedup == pytest.approx(2.5)
    assert attention.roofline_speedup == pytest.approx(1 / (0.8 + 0.02))
    assert attention.ceiling_speedup == pytest.approx(1.25)
    assert result.all_at_bound_speedup == pytest.approx(1 / (0.2 + 0.3 + 0.02))
    assert result.all_free_ceiling == pytest.approx(5.0)
    assert result.unattributed_fraction == pytest.approx(0.2)


def test_uses_the_amdahl_module():
    result = profile_amdahl([CategoryTime("x", 0.4, 0.1)], step_time_s=1.0)
    assert result.opportunities[0].roofline_speedup == amdahl_speedup(0.4, 4.0)


def test_per_op_total_above_the_step_normalises_the_fractions():
    result = profile_amdahl([CategoryTime("a", 0.9, 0.9), CategoryTime("b", 0.3, 0.3)], step_time_s=1.0)
    assert result.step_time_s == pytest.approx(1.2)
    assert sum(o.fraction for o in result.opportunities) == pytest.approx(1.0)
    assert result.unattributed_fraction == 0.0
    assert math.isinf(result.all_free_ceiling)


def test_zero_bound_means_free_and_zero_time_means_nothing_to_gain():
    free, idle = profile_amdahl(
        [CategoryTime("views", 0.1, 0.0), CategoryTime("idle", 0.0, 0.0)], 1.0
    ).opportunities
    assert free.part_speedup == math.inf and free.roofline_speedup == pytest.approx(free.ceiling_speedup)
    assert idle.roofline_speedup == 1.0 and idle.ceiling_speedup == 1.0


def test_an_op_faster_than_its_bound_is_not_slowed_down():
    assert capped_bound(1.0, 3.0) == 1.0
    assert capped_bound(3.0, 1.0) == 1.0


@pytest.mark.parametrize(
    ("categories", "step"),
    [
        ([CategoryTime("a", 0.5, 0.6)], 1.0),
        ([CategoryTime("a", -0.1, 0.0)], 1.0),
        ([CategoryTime("a", float("nan"), 0.0)], 1.0),
        ([CategoryTime("a", 0.1, 0.0)], -1.0),
        ([], 0.0),
    ],
)
def test_rejects_bad_input(categories, step):
    with pytest.raises(InvalidInput):
        profile_amdahl(categories, step)


times = st.floats(min_value=1e-6, max_value=10.0)


@given(st.lists(st.tuples(times, st.floats(min_value=0.0, max_value=1.0)), min_size=1, max_size=6), times)
def test_speedups_are_between_one_and_the_ceiling(parts, extra):
    cats = [CategoryTime(f"c{i}", t, t * r) for i, (t, r) in enumerate(parts)]
    result = profile_amdahl(cats, sum(c.time_s for c in cats) + extra)
    speedups = [o.roofline_speedup for o in result.opportunities]
    assert speedups == sorted(speedups, reverse=True)
    for o in result.opportunities:
        assert 1.0 - 1e-12 <= o.roofline_speedup <= o.ceiling_speedup * (1 + 1e-12)
    assert result.all_at_bound_speedup >= max(speedups) * (1 - 1e-12)
    assert result.all_at_bound_speedup <= result.all_free_ceiling * (1 + 1e-12)


def test_roofline_line_spans_the_points_and_the_ridge():
    line = roofline_line(100.0, 10.0, [0.5, 80.0])
    assert line.ridge_point == 10.0
    assert line.intensity[0] == pytest.approx(0.125) and line.intensity[-1] == pytest.approx(320.0)
    for i, attainable in zip(line.intensity, line.attainable_flops_per_s, strict=True):
        assert attainable == pytest.approx(min(100.0, 10.0 * i))


def test_pure_module_imports_no_torch():
    code = "import sys, infer_opt.cost_models.profile_amdahl; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
