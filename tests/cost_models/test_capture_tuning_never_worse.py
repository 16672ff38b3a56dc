"""``tune capture-sizes``: the proposal is never slower than the list it would replace, for any
cost curve (non-monotone included), and its gain is current / proposed expected step."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.cost_models import capture_sizes as cs
from infer_opt.cost_models import capture_tuning as ct


@st.composite
def setups(draw):
    observed = sorted(draw(st.sets(st.integers(1, 40), min_size=1, max_size=8)))
    counts = draw(st.lists(st.integers(1, 100), min_size=len(observed), max_size=len(observed)))
    measured = sorted(draw(st.sets(st.integers(1, 48), min_size=2, max_size=6)))
    times = draw(st.lists(st.floats(1e-3, 2e-2), min_size=len(measured), max_size=len(measured)))
    current = sorted(draw(st.sets(st.integers(1, 48), min_size=1, max_size=6)))
    max_captures = draw(st.one_of(st.none(), st.integers(len(current), 8)))
    return observed, counts, measured, times, current, max_captures, draw(st.floats(0.0, 5e-3))


def _inputs(observed, counts, measured, times, current, max_captures, overhead):
    return ct.Inputs(
        dist=cs.distribution(observed, counts),
        curve=cs.cost_curve(measured, times),
        current=tuple(current),
        current_source="--current",
        max_captures=max_captures,
        eager_overhead_s=overhead,
    )


@settings(max_examples=300, deadline=None)
@given(setups())
def test_the_proposal_is_never_slower_than_the_current_list(setup):
    observed, _, measured, _, current, max_captures, _ = setup
    result = ct.tune(_inputs(*setup))
    assert result.gain == pytest.approx(result.current.expected_step_s / result.proposed.expected_step_s)
    within = max(current) <= max(max(measured), max(observed))
    if within and (max_captures is None or len(current) <= max_captures):
        assert result.proposed.expected_step_s <= result.current.expected_step_s * (1 + 1e-12)
    if result.gain < 1:  # cheaper only through extrapolated sizes: kept, no flags to paste
        assert result.recommendation == "keep_current" and result.flags == {}


def test_a_flat_curve_with_a_cheaper_unobserved_size():
    # the case: t flat at 10 ms but 5% lower at 16, batches 1..13, vLLM's default list
    setup = (list(range(1, 14)), [1] * 13, [1, 2, 4, 8, 16], [0.01, 0.01, 0.01, 0.01, 0.0095])
    inp = ct.Inputs(
        dist=cs.distribution(*setup[:2]),
        curve=cs.cost_curve(*setup[2:]),
        current=cs.engine_default("vllm", 512)[0],
        current_source="vllm",
        eager_overhead_s=1e-3,
    )
    result = ct.tune(inp)
    assert result.capture_sizes == (16,)
    assert result.expected_step_s == pytest.approx(0.0095)
    # the default runs 1..8 at their own 10 ms and 9..13 at 16's 9.5 ms
    assert result.current.expected_step_s == pytest.approx((8 * 0.01 + 5 * 0.0095) / 13)
    assert result.gain == pytest.approx((8 * 0.01 + 5 * 0.0095) / 13 / 0.0095)
    assert result.recommendation == "proposed"


def test_a_decreasing_table_against_current_2():
    # t falls with the batch; batch 1 alone observed: capturing 2 (unobserved) beats capturing 1
    inp = _inputs([1], [10], [1, 2, 4], [0.010, 0.005, 0.004], [2], None, 1e-3)
    result = ct.tune(inp)
    assert result.capture_sizes == (4,)  # the cheapest size the table prices, 4 ms
    assert result.expected_step_s == pytest.approx(0.004)
    assert result.gain == pytest.approx(0.005 / 0.004)
