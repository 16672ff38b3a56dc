from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.cost_models.amdahl import Part, amdahl_speedup, combined, part_curves, solve_required
from infer_opt.errors import InvalidInput

fractions = st.floats(min_value=0.0, max_value=1.0)
speedups = st.floats(min_value=1e-3, max_value=1e6)


def test_worked_example_from_spec():
    # f = 0.4, s = 4 -> 1/(0.6 + 0.1)
    assert amdahl_speedup(0.4, 4) == pytest.approx(1.4285714285714286, rel=1e-12)


def test_ceiling_and_infinite_speedup():
    result = combined([Part("p", 0.4, math.inf)])
    assert result.speedup == pytest.approx(1 / 0.6)
    assert result.ceiling == pytest.approx(1 / 0.6)


def test_whole_program_free_is_infinite_not_an_error():
    result = combined([Part("p", 1.0, math.inf)])
    assert math.isinf(result.speedup) and math.isinf(result.ceiling)


def test_several_parts_and_added_overhead():
    parts = [Part("a", 0.3, 3.0), Part("b", 0.2, 2.0)]
    result = combined(parts, added=0.05)
    expected = 1 / ((1 - 0.5) + 0.3 / 3 + 0.2 / 2 + 0.05)
    assert result.speedup == pytest.approx(expected)
    assert result.ceiling == pytest.approx(1 / (0.5 + 0.05))
    assert result.new_time == pytest.approx(0.75)


def test_required_speedup_for_reachable_target():
    s, reason = solve_required(0.6, 2.0)
    # 1/((0.4) + 0.6/s) = 2  ->  0.6/s = 0.1  ->  s = 6
    assert reason is None
    assert s == pytest.approx(6.0)
    assert amdahl_speedup(0.6, s) == pytest.approx(2.0)


@pytest.mark.parametrize("target", [2.5, 3.0, 10.0])
def test_target_at_or_above_ceiling_is_impossible(target):
    s, reason = solve_required(0.6, target)  # ceiling 1/0.4 = 2.5
    assert s is None
    assert reason.code == "target_above_ceiling" and reason["ceiling"] == pytest.approx(2.5)


def test_target_with_zero_fraction():
    s, reason = solve_required(0.0, 1.0)
    assert s is None and reason.code == "part_takes_no_time" and reason["target_holds"]


def test_per_part_required_holds_others_fixed():
    result = combined([Part("a", 0.3, 3.0), Part("b", 0.4, 1.0)], target=1.5)
    needed_b = result.parts[1].required_speedup
    assert amdahl_check([Part("a", 0.3, 3.0), Part("b", 0.4, needed_b)]) == pytest.approx(1.5)


def amdahl_check(parts):
    return combined(parts).speedup


@pytest.mark.parametrize(
    ("parts", "added", "needle"),
    [
        ([Part("a", 1.2, 2.0)], 0.0, "fraction must be in [0, 1]"),
        ([Part("a", -0.1, 2.0)], 0.0, "fraction must be in [0, 1]"),
        ([Part("a", 0.5, 0.0)], 0.0, "speedup must be > 0"),
        ([Part("a", 0.5, -2.0)], 0.0, "speedup must be > 0"),
        ([Part("a", 0.5, math.nan)], 0.0, "speedup must be > 0"),
        ([Part("a", 0.6, 2.0), Part("b", 0.6, 2.0)], 0.0, "sum to <= 1"),
        ([Part("a", 0.5, 2.0), Part("a", 0.1, 2.0)], 0.0, "distinct"),
        ([Part("a", 0.5, 2.0)], -0.1, "added overhead"),
        ([], 0.0, "at least one part"),
    ],
)
def test_rejects_invalid_input(parts, added, needle):
    with pytest.raises(InvalidInput, match=None) as info:
        combined(parts, added=added)
    assert needle in str(info.value)


def test_slowdown_is_flagged():
    result = combined([Part("a", 0.5, 0.5)])
    assert result.parts[0].slowdown
    assert result.speedup < 1


@given(fractions, speedups, speedups)
def test_monotone_in_part_speedup(f, s1, s2):
    lo, hi = sorted((s1, s2))
    assert amdahl_speedup(f, lo) <= amdahl_speedup(f, hi) * (1 + 1e-12)


@given(fractions, speedups)
def test_bounded_by_ceiling(f, s):
    result = combined([Part("p", f, s)])
    assert result.speedup <= result.ceiling * (1 + 1e-12)


@given(st.floats(min_value=0.01, max_value=0.99), st.floats(min_value=1.01, max_value=50))
def test_required_speedup_inverts_amdahl(f, target):
    s, reason = solve_required(f, target)
    if target >= 1 / (1 - f):
        assert s is None and reason.code == "target_above_ceiling"
    else:
        assert amdahl_speedup(f, s) == pytest.approx(target, rel=1e-9)


def test_curves_pass_through_the_given_point():
    result = combined([Part("a", 0.3, 3.0), Part("b", 0.4, 2.0)])
    for curve in part_curves(result):
        # interpolate isn't needed: evaluate the model at the given point through the curve's rest
        assert curve.at_end_to_end == pytest.approx(result.speedup)
        assert curve.end_to_end[-1] < curve.asymptote
        assert all(a <= b for a, b in zip(curve.end_to_end, curve.end_to_end[1:], strict=False))
