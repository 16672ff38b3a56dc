"""Statistics of ``infer-opt compare``: ratio of medians with a bootstrap interval, the
Mann-Whitney verdict, the hyperfine headline, and the refusal of different experiments."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.cost_models import compare as cm
from infer_opt.errors import InvalidInput

FAST = dict(bootstrap=300)


def _noisy(median: float, n: int, seed: int, rel: float = 0.03) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median * (1 + rel * rng.standard_normal(n)))


def _m(key: str, samples: list[float]) -> cm.Measured:
    return cm.Measured.from_samples(key, samples)


samples_st = st.lists(st.floats(1e-6, 1e-2), min_size=3, max_size=12)


@settings(max_examples=25, deadline=None)
@given(samples_st)
def test_identical_samples_give_ratio_one_within_noise(samples):
    row, _ = cm.compare_pair(_m("op", samples), _m("op", samples), **FAST)
    assert row.ratio == pytest.approx(1.0)
    assert row.ratio_low <= 1.0 <= row.ratio_high
    assert row.verdict == cm.NOISE
    assert row.p_value == pytest.approx(1.0)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(8, 30))
def test_a_clear_two_fold_shift_is_detected(seed, n):
    base = _noisy(1e-3, n, seed)
    new = _noisy(0.5e-3, n, seed + 1)
    row, _ = cm.compare_pair(_m("op", base), _m("op", new), **FAST)
    assert row.verdict == cm.FASTER
    assert row.ratio == pytest.approx(0.5, rel=0.05)
    assert row.ratio_high < 1 and row.p_value < 1e-3
    slower, _ = cm.compare_pair(_m("op", new), _m("op", base), **FAST)
    assert slower.verdict == cm.SLOWER


@settings(max_examples=25, deadline=None)
@given(samples_st, samples_st)
def test_swapping_base_and_new_inverts_the_ratio(a, b):
    ab, _ = cm.compare_pair(_m("op", a), _m("op", b), **FAST)
    ba, _ = cm.compare_pair(_m("op", b), _m("op", a), **FAST)
    assert ab.ratio * ba.ratio == pytest.approx(1.0)
    assert ab.speedup == pytest.approx(ba.ratio)
    assert ab.p_value == pytest.approx(ba.p_value)
    flipped = {cm.FASTER: cm.SLOWER, cm.SLOWER: cm.FASTER}
    assert ba.verdict == flipped.get(ab.verdict, ab.verdict)


def test_swapped_interval_is_the_inverse_interval_up_to_resampling():
    a, b = _noisy(1e-3, 20, 1), _noisy(1.3e-3, 20, 2)
    ab, _ = cm.compare_pair(_m("op", a), _m("op", b), bootstrap=4000)
    ba, _ = cm.compare_pair(_m("op", b), _m("op", a), bootstrap=4000)
    assert 1 / ab.ratio_high == pytest.approx(ba.ratio_low, rel=0.03)
    assert 1 / ab.ratio_low == pytest.approx(ba.ratio_high, rel=0.03)


def test_significant_but_small_change_is_within_threshold():
    base = _noisy(1e-3, 40, 3, rel=0.002)
    new = [v * 1.02 for v in _noisy(1e-3, 40, 4, rel=0.002)]
    row, _ = cm.compare_pair(_m("op", base), _m("op", new), threshold=0.05, **FAST)
    assert row.p_value < 0.05 and row.verdict == cm.BELOW_THRESHOLD
    row, _ = cm.compare_pair(_m("op", base), _m("op", new), threshold=0.01, **FAST)
    assert row.verdict == cm.SLOWER


def test_change_is_symmetric():
    assert cm.change(2.0) == cm.change(0.5) == pytest.approx(1.0)


def test_rows_only_on_one_side_are_flagged_in_order():
    base = [_m("a", [1.0, 1.1, 0.9]), _m("b", [2.0, 2.1, 1.9])]
    new = [_m("b", [2.0, 2.1, 1.9]), _m("c", [3.0, 3.1, 2.9])]
    rows, draws = cm.compare_rows(base, new, **FAST)
    assert [(r.key, r.verdict) for r in rows] == [("a", cm.ONLY_BASE), ("b", cm.NOISE), ("c", cm.ONLY_NEW)]
    assert set(draws) == {"b"}


def test_without_samples_the_summary_gives_an_approximate_interval():
    base = cm.Measured("op", "op", "", "", (), 1e-3, 0.95e-3, 1.05e-3, 20)
    new = cm.Measured("op", "op", "", "", (), 0.5e-3, 0.48e-3, 0.52e-3, 20)
    row, _ = cm.compare_pair(base, new, **FAST)
    assert row.approximate and row.p_value is None
    assert row.verdict == cm.FASTER and row.ratio_low < 0.5 < row.ratio_high
    sd = cm.approx_log_ratio_sd(base, new)
    # se(log median) ≈ 1.2533·(IQR/1.349)/(m·√n), per side in quadrature
    expected = math.hypot(
        *(1.2533 * (0.1 / 1.349) / (1.0 * math.sqrt(20)), 1.2533 * (0.04 / 1.349) / (0.5 * 4.4721))
    )
    assert sd == pytest.approx(expected, rel=1e-3)


def test_headline_reports_speedup_with_its_uncertainty():
    base, new = _noisy(1e-3, 30, 5), _noisy(1e-3 / 1.5, 30, 6)
    h = cm.pair_headline("step", _m("step", base), _m("step", new), **FAST)
    assert h.speedup == pytest.approx(1.5, rel=0.05)
    assert 0 < h.speedup_std < 0.1 and h.low < h.speedup < h.high
    assert h.verdict == cm.FASTER and h.base_s == pytest.approx(np.median(base))


def test_geometric_mean_of_case_speedups():
    base = [_m("x", _noisy(1e-3, 20, 7)), _m("y", _noisy(2e-3, 20, 8))]
    new = [_m("x", [v / 2 for v in base[0].samples_s]), _m("y", [v / 8 for v in base[1].samples_s])]
    rows, draws = cm.compare_rows(base, new, **FAST)
    h = cm.geometric_mean_headline(rows, draws)
    assert h.speedup == pytest.approx(4.0)  # sqrt(2 · 8)
    assert h.cases == 2 and h.low <= 4.0 <= h.high


def test_bootstrap_is_seeded():
    a, b = _noisy(1e-3, 10, 9), _noisy(1.1e-3, 10, 10)
    assert np.array_equal(cm.bootstrap_log_ratios(a, b, seed=3), cm.bootstrap_log_ratios(a, b, seed=3))


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({"alpha": 0.0}, "--alpha"), ({"alpha": 1.0}, "--alpha"), ({"threshold": -0.1}, "--threshold"),
     ({"bootstrap": 10}, "bootstrap")],
)  # fmt: skip
def test_rejects_bad_settings(kwargs, needle):
    with pytest.raises(InvalidInput, match=needle):
        cm.compare_rows([_m("a", [1.0, 2.0])], [_m("a", [1.0, 2.0])], **kwargs)


# ----------------------------------------------------------------------------- whole results


def test_kernel_suites_compare_by_case_and_size():
    from tests.reports.fixtures import kernels, kernels_new

    result = cm.compare_results(kernels(), kernels_new(), **FAST)
    by_key = {r.key: r for r in result.rows}
    assert by_key["matmul [n=64]"].verdict == cm.FASTER
    assert by_key["matmul [n=64]"].speedup == pytest.approx(1.5)
    assert by_key["copy [N=2^16]"].verdict == cm.NOISE
    assert [r.verdict for r in result.rows].count(cm.ONLY_BASE) == 1
    assert result.headline.cases == 5


def test_profiles_compare_step_ops_and_categories():
    from tests.reports.fixtures import profile

    base = profile()
    faster_step = replace(base.step, samples_s=tuple(s / 2 for s in base.step.samples_s))
    new = replace(base, step=faster_step)
    result = cm.compare_results(base, new, **FAST)
    assert result.headline.speedup == pytest.approx(2.0)
    assert len(result.rows) == len(base.ops) and len(result.categories) == len(base.categories)
    assert all(r.verdict == cm.NOISE for r in result.rows)


def test_refuses_different_experiments_and_says_what_differs():
    from tests.reports.fixtures import profile

    base = profile()
    new = replace(base, dtype="bfloat16", seq_len=256)
    with pytest.raises(InvalidInput) as err:
        cm.compare_results(base, new, new_name="new.json", **FAST)
    text = str(err.value)
    assert "seq len (128 vs 256)" in text and "dtype (float32 vs bfloat16)" in text and "--force" in text
    forced = cm.compare_results(base, new, force=True, **FAST)
    assert forced.differences == ("seq len (128 vs 256)", "dtype (float32 vs bfloat16)")


def test_refuses_different_kinds_and_uncomparable_kinds():
    from tests.reports.fixtures import fixture

    with pytest.raises(InvalidInput, match="is a kernels result but BASE is a profile result"):
        cm.compare_results(fixture("profile"), fixture("kernels"), new_name="k.json")
    with pytest.raises(InvalidInput, match="compare works on two profile or two kernels results"):
        cm.compare_results(fixture("amdahl"), fixture("amdahl"))


def test_one_sample_per_side_is_never_significant():
    row, _ = cm.compare_pair(_m("op", [1e-3]), _m("op", [0.5e-3]), **FAST)
    assert row.ratio == pytest.approx(0.5) and row.p_value is None and row.verdict == cm.NOISE


def test_repeated_keys_are_matched_in_order_not_dropped():
    base = [_m("a", [1.0, 1.1, 0.9]), _m("a", [2.0, 2.1, 1.9])]
    rows, _ = cm.compare_rows(base, base, **FAST)
    assert [r.key for r in rows] == ["a", "a #2"] and all(r.ratio == pytest.approx(1.0) for r in rows)
