from __future__ import annotations

import statistics

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.stats import Summary, variance_warning


def test_exact_order_statistics():
    s = Summary.from_samples([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.n, s.median_s, s.min_s, s.max_s, s.mean_s) == (5, 3.0, 1.0, 5.0, 3.0)
    assert (s.q1_s, s.q3_s, s.iqr_s) == (2.0, 4.0, 2.0)
    assert s.std_s == pytest.approx(statistics.stdev([1, 2, 3, 4, 5]))
    assert s.rel_iqr == pytest.approx(2.0 / 3.0)


def test_even_count_interpolates():
    s = Summary.from_samples([1.0, 2.0, 3.0, 4.0])
    assert s.median_s == 2.5
    assert s.q1_s == 1.75 and s.q3_s == 3.25


def test_one_sample():
    s = Summary.from_samples([2e-6])
    assert s.median_s == s.min_s == s.max_s == 2e-6
    assert s.iqr_s == 0.0 and s.std_s == 0.0 and s.rel_iqr == 0.0


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [1.0, float("inf")], [-1.0, 2.0]])
def test_rejects_bad_samples(bad):
    with pytest.raises(ValueError):
        Summary.from_samples(bad)


def test_zero_median_has_zero_relative_spread():
    assert Summary.from_samples([0.0, 0.0, 0.0]).rel_iqr == 0.0


@given(st.lists(st.floats(1e-9, 10.0), min_size=1, max_size=60))
def test_summary_matches_numpy_and_is_ordered(samples):
    s = Summary.from_samples(samples)
    assert s.min_s <= s.q1_s <= s.median_s <= s.q3_s <= s.max_s
    assert s.median_s == pytest.approx(float(np.median(samples)))
    assert s.iqr_s >= 0


def test_variance_warning_names_the_fix():
    noisy = Summary.from_samples([1.0, 1.3, 1.0, 1.3])
    text = variance_warning(noisy)
    assert text is not None and "IQR/median" in text and "--reps" in text and "--warmup" in text
    steady = Summary.from_samples([1.0, 1.01, 1.0, 1.02])
    assert variance_warning(steady) is None
    assert variance_warning(noisy, threshold=0.5) is None


def test_round_trips_through_result_json():
    from infer_opt.results import to_jsonable
    from infer_opt.results.base import _dataclass_from_dict

    s = Summary.from_samples([1.0, 2.0, 4.0])
    assert _dataclass_from_dict(Summary, to_jsonable(s)) == s
