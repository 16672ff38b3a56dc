"""Statistics of ``infer-opt compare``: the run-level t test on log run medians (with its family
and device floors), the single-run path with its noise floor, the headlines, the A/A noise
floor, and the refusal of different experiments."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from infer_opt.cost_models import compare_runs
from infer_opt.errors import InvalidInput
from infer_opt.results.compare import (
    ALPHA,
    DEFAULT_FLOOR,
    DEFAULT_FLOOR_SHORT,
    NOISE,
    RUN_LEVEL,
    CompareResult,
)
from infer_opt.run_key import RunKey

FAST = dict(bootstrap=300)
#: no run-to-run noise assumed: single-run tests then see only the within-run spread
QUIET = compare_runs.Noise.given(0.0)


def _noisy(median: float, n: int, seed: int, rel: float = 0.03) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median * (1 + rel * rng.standard_normal(n)))


def _m(key: str, samples: list[float], group: str = "") -> compare_runs.Measured:
    return compare_runs.Measured.from_samples(key, samples, group=group)


def _runs(key: str, medians: list[float], group: str = "g") -> compare_runs.Measured:
    """A row measured in ``len(medians)`` runs, each of three identical samples."""
    samples = [v for m in medians for v in (m, m, m)]
    return compare_runs.Measured.from_samples(key, samples, group=group, run_medians_s=medians)


samples_st = st.lists(st.floats(1e-6, 1e-2), min_size=3, max_size=12)


# ----------------------------------------------------------------------------- floors


def test_floor_and_sigma_are_inverse_with_the_stated_numbers():
    # σ = ln(1.4) / (2.5758·√2) = 0.09236: two single runs differ by more than 40% in 1% of rows
    assert compare_runs.sigma_of_floor(0.40) == pytest.approx(
        math.log(1.4) / (2.5758293 * math.sqrt(2)), rel=1e-6
    )
    assert compare_runs.sigma_of_floor(0.40) == pytest.approx(0.09236, abs=1e-5)
    assert compare_runs.floor_of_sigma(compare_runs.sigma_of_floor(0.25)) == pytest.approx(0.25)
    assert stats.norm.sf(
        math.log(1.4) / (math.sqrt(2) * compare_runs.sigma_of_floor(0.4))
    ) * 2 == pytest.approx(0.01)


def test_default_noise_is_wider_for_microsecond_rows():
    noise = compare_runs.Noise()
    assert compare_runs.floor_of_sigma(noise.sigma("matmul", 1e-3)) == pytest.approx(DEFAULT_FLOOR)
    assert compare_runs.floor_of_sigma(noise.sigma("launch", 2e-6)) == pytest.approx(DEFAULT_FLOOR_SHORT)
    assert noise.variance_floor("matmul") == 0.0  # a guess for single runs, not a spread
    given = compare_runs.Noise.given(0.2)
    assert compare_runs.floor_of_sigma(given.sigma("x", 1e-9)) == pytest.approx(0.2)
    assert given.variance_floor("x") == pytest.approx(compare_runs.sigma_of_floor(0.2) ** 2)


# ----------------------------------------------------------------------------- single run


@settings(max_examples=25, deadline=None)
@given(samples_st)
def test_identical_samples_give_ratio_one_within_noise(samples):
    row, _ = compare_runs.compare_pair(_m("op", samples), _m("op", samples), compare_runs.Settings(**FAST))
    assert row.ratio == pytest.approx(1.0)
    assert row.ratio_low <= 1.0 <= row.ratio_high
    assert row.verdict == NOISE
    assert row.p_value == pytest.approx(1.0)
    assert row.floor is not None and row.runs_base == row.runs_new == 1


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(8, 30))
def test_a_two_fold_shift_clears_the_default_floor(seed, n):
    base = _noisy(1e-3, n, seed)
    new = _noisy(0.5e-3, n, seed + 1)
    row, _ = compare_runs.compare_pair(_m("op", base), _m("op", new), compare_runs.Settings(**FAST))
    assert row.verdict == compare_runs.FASTER and row.floor == pytest.approx(DEFAULT_FLOOR)
    assert row.ratio == pytest.approx(0.5, rel=0.1)
    assert row.ratio_high < 1 and row.p_value < 1e-3
    slower, _ = compare_runs.compare_pair(_m("op", new), _m("op", base), compare_runs.Settings(**FAST))
    assert slower.verdict == compare_runs.SLOWER


def test_no_single_run_verdict_below_the_floor_however_tight_the_samples():
    """Issue 17: within-run samples 0.1% apart, runs 16% apart — one run a side gives no verdict."""
    base = _noisy(1e-3, 40, 1, rel=0.001)
    new = [v * 1.16 for v in _noisy(1e-3, 40, 2, rel=0.001)]
    row, _ = compare_runs.compare_pair(_m("op", base), _m("op", new), compare_runs.Settings(**FAST))
    assert row.verdict == NOISE and row.ratio == pytest.approx(1.16, rel=0.01)
    # the interval includes one run's noise on each side, not just the samples' spread
    assert row.ratio_low < 1.0 < row.ratio_high
    measured = compare_runs.Noise("measured", {"g": compare_runs.sigma_of_floor(0.10)})
    row, _ = compare_runs.compare_pair(
        _m("op", base, "g"), _m("op", new, "g"), compare_runs.Settings(noise=measured, **FAST)
    )
    assert row.verdict == compare_runs.SLOWER and row.floor == pytest.approx(0.10)


@settings(max_examples=25, deadline=None)
@given(samples_st, samples_st)
def test_swapping_base_and_new_inverts_the_ratio(a, b):
    ab, _ = compare_runs.compare_pair(_m("op", a), _m("op", b), compare_runs.Settings(**FAST))
    ba, _ = compare_runs.compare_pair(_m("op", b), _m("op", a), compare_runs.Settings(**FAST))
    assert ab.ratio * ba.ratio == pytest.approx(1.0)
    assert ab.speedup == pytest.approx(ba.ratio)
    assert ab.p_value == pytest.approx(ba.p_value)
    assert 1 / ab.ratio_high == pytest.approx(ba.ratio_low) and 1 / ab.ratio_low == pytest.approx(
        ba.ratio_high
    )
    flipped = {compare_runs.FASTER: compare_runs.SLOWER, compare_runs.SLOWER: compare_runs.FASTER}
    assert ba.verdict == flipped.get(ab.verdict, ab.verdict)


def test_significant_but_small_change_is_within_threshold():
    base = _noisy(1e-3, 40, 3, rel=0.002)
    new = [v * 1.02 for v in _noisy(1e-3, 40, 4, rel=0.002)]
    row, _ = compare_runs.compare_pair(
        _m("op", base), _m("op", new), compare_runs.Settings(threshold=0.05, noise=QUIET, **FAST)
    )
    assert row.p_value < 0.05 and row.verdict == compare_runs.BELOW_THRESHOLD
    row, _ = compare_runs.compare_pair(
        _m("op", base), _m("op", new), compare_runs.Settings(threshold=0.01, noise=QUIET, **FAST)
    )
    assert row.verdict == compare_runs.SLOWER


def test_change_is_symmetric():
    assert compare_runs.change(2.0) == compare_runs.change(0.5) == pytest.approx(1.0)


def test_rows_only_on_one_side_are_flagged_in_order():
    base = [_m("a", [1.0, 1.1, 0.9]), _m("b", [2.0, 2.1, 1.9])]
    new = [_m("b", [2.0, 2.1, 1.9]), _m("c", [3.0, 3.1, 2.9])]
    rows, within = compare_runs.compare_rows(base, new, compare_runs.Settings(**FAST))
    assert [(r.key, r.verdict) for r in rows] == [
        ("a", compare_runs.ONLY_BASE),
        ("b", NOISE),
        ("c", compare_runs.ONLY_NEW),
    ]
    assert set(within) == {"b"}
    assert (rows[0].runs_base, rows[0].runs_new, rows[2].runs_base) == (1, 0, 0)


def test_without_samples_the_summary_gives_an_approximate_interval():
    base = compare_runs.Measured("op", "op", "", "", (), 1e-3, 0.95e-3, 1.05e-3, 20)
    new = compare_runs.Measured("op", "op", "", "", (), 0.5e-3, 0.48e-3, 0.52e-3, 20)
    row, within = compare_runs.compare_pair(base, new, compare_runs.Settings(**FAST))
    assert row.approximate and row.verdict == compare_runs.FASTER and row.ratio_low < 0.5 < row.ratio_high
    sd = compare_runs.approx_log_ratio_sd(base, new)
    # se(log median) ≈ 1.2533·(IQR/1.349)/(m·√n), per side in quadrature
    expected = math.hypot(
        *(1.2533 * (0.1 / 1.349) / (1.0 * math.sqrt(20)), 1.2533 * (0.04 / 1.349) / (0.5 * 4.4721))
    )
    assert sd == pytest.approx(expected, rel=1e-3) and within == pytest.approx(sd**2)
    # the interval is that spread plus one run's default noise on each side
    total = math.sqrt(sd**2 + 2 * compare_runs.sigma_of_floor(DEFAULT_FLOOR) ** 2)
    assert math.log(row.ratio_high / row.ratio_low) == pytest.approx(2 * 1.959964 * total, rel=1e-4)


def test_one_sample_per_side_is_never_significant():
    row, _ = compare_runs.compare_pair(_m("op", [1e-3]), _m("op", [0.2e-3]), compare_runs.Settings(**FAST))
    assert row.ratio == pytest.approx(0.2) and row.p_value is None and row.verdict == NOISE


def test_within_run_bootstrap_is_seeded_and_side_symmetric():
    a, b = _noisy(1e-3, 10, 9), _noisy(1.1e-3, 10, 10)
    assert compare_runs.bootstrap_log_median_variance(
        a, seed=3
    ) == compare_runs.bootstrap_log_median_variance(a, seed=3)
    assert compare_runs.bootstrap_log_median_variance(
        a, seed=3
    ) != compare_runs.bootstrap_log_median_variance(a, seed=4)
    ab = compare_runs.within_run_variance(_m("x", a), _m("x", b), seed=3)
    ba = compare_runs.within_run_variance(_m("x", b), _m("x", a), seed=3)
    assert ab == ba


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({"alpha": 0.0}, "alpha"), ({"alpha": 1.0}, "alpha"), ({"threshold": -0.1}, "threshold"),
     ({"bootstrap": 10}, "bootstrap")],
)  # fmt: skip
def test_rejects_bad_settings_naming_the_parameter(kwargs, needle):
    with pytest.raises(InvalidInput) as err:
        compare_runs.compare_rows(
            [_m("a", [1.0, 2.0])], [_m("a", [1.0, 2.0])], compare_runs.Settings(**kwargs)
        )
    assert err.value.option == needle


# ----------------------------------------------------------------------------- run level


def test_run_level_test_is_students_t_on_log_run_medians():
    base, new = [1.0, 1.02, 0.98], [1.1, 1.13, 1.08]
    test = compare_runs.run_level_test(np.log(base), np.log(new))
    ref = stats.ttest_ind(np.log(new), np.log(base), equal_var=True)
    assert test.p_value == pytest.approx(ref.pvalue) and test.df == 4
    assert test.d / test.se == pytest.approx(ref.statistic)
    ci = ref.confidence_interval(0.95)
    assert (test.low, test.high) == pytest.approx((ci.low, ci.high))


def test_worked_run_level_numbers():
    # logs base (0, 0.02, -0.02), new (0.1, 0.12, 0.08): d = 0.1, s² = 0.0016/4, se = 0.01633,
    # t = 6.124 on 4 df, p = 0.003602
    test = compare_runs.run_level_test([0.0, 0.02, -0.02], [0.1, 0.12, 0.08])
    assert test.d == pytest.approx(0.1) and test.se == pytest.approx(math.sqrt(0.0004 * 2 / 3))
    assert test.p_value == pytest.approx(0.003602, rel=1e-3) and test.spread == pytest.approx(0.02)
    floored = compare_runs.run_level_test([0.0, 0.02, -0.02], [0.1, 0.12, 0.08], variance_floor=0.05**2)
    assert floored.se == pytest.approx(0.05 * math.sqrt(2 / 3)) and floored.spread == pytest.approx(0.02)
    assert floored.p_value > 0.05


def test_run_level_rows_report_runs_and_spread_and_no_floor():
    row, _ = compare_runs.compare_pair(
        _runs("k", [1.0, 1.02, 0.98]), _runs("k", [0.5, 0.51, 0.49]), compare_runs.Settings(**FAST)
    )
    assert row.method == RUN_LEVEL and row.floor is None
    assert (row.runs_base, row.runs_new) == (3, 3) and row.between_run_cv == pytest.approx(0.02, rel=0.01)
    assert row.verdict == compare_runs.FASTER and row.ratio == pytest.approx(0.5, rel=0.01)


def test_a_row_is_held_to_its_familys_spread():
    """Three runs a side guess a row's spread poorly: a row that happened to land three times
    on the same value is judged with its family's median spread."""
    lucky = (_runs("lucky", [1.0, 1.0, 1.0]), _runs("lucky", [1.06, 1.06, 1.06]))
    alone, _ = compare_runs.compare_rows([lucky[0]], [lucky[1]], compare_runs.Settings(**FAST))
    assert alone[0].verdict == compare_runs.SLOWER
    noisy = [(_runs(f"n{i}", [1.0, 1.15, 0.9]), _runs(f"n{i}", [1.1, 0.95, 1.0])) for i in range(3)]
    rows, _ = compare_runs.compare_rows(
        [lucky[0], *(b for b, _ in noisy)], [lucky[1], *(n for _, n in noisy)], compare_runs.Settings(**FAST)
    )
    assert rows[0].verdict == NOISE and rows[0].between_run_cv == pytest.approx(0.0, abs=1e-12)


def test_a_measured_device_floor_bounds_the_run_level_spread():
    base, new = _runs("k", [1.0, 1.0, 1.0], "matmul"), _runs("k", [1.08, 1.08, 1.08], "matmul")
    assert (
        compare_runs.compare_pair(base, new, compare_runs.Settings(**FAST))[0].verdict == compare_runs.SLOWER
    )
    measured = compare_runs.Noise("measured", {"matmul": 0.10})
    assert (
        compare_runs.compare_pair(base, new, compare_runs.Settings(noise=measured, **FAST))[0].verdict
        == NOISE
    )


@settings(max_examples=40, deadline=None)
@given(
    st.floats(0.5, 2.0),
    st.integers(0, 2),
    st.sampled_from(["base", "new"]),
    st.integers(0, 10_000),
)
def test_one_drifted_run_never_makes_a_verdict(drift, which, side, seed):
    """Unchanged cases, one run of one side slower or faster across the board by any factor
    (plus 0.5% noise per case): t = 1 whatever the drift — no case and no headline flagged."""
    rng = np.random.default_rng(seed)
    cases = 12
    base, new = [], []
    for i in range(cases):
        runs_b = list(1e-3 * (1 + 0.005 * rng.standard_normal(3)))
        runs_n = list(1e-3 * (1 + 0.005 * rng.standard_normal(3)))
        target = runs_b if side == "base" else runs_n
        target[which] *= drift
        base.append(_runs(f"c{i}", runs_b, f"f{i % 3}"))
        new.append(_runs(f"c{i}", runs_n, f"f{i % 3}"))
    rows, within = compare_runs.compare_rows(base, new, compare_runs.Settings(**FAST))
    assert all(r.verdict in (NOISE, compare_runs.BELOW_THRESHOLD) for r in rows), [r.verdict for r in rows]
    levels = (
        compare_runs.suite_levels([base], {m.key for m in base}),
        compare_runs.suite_levels([new], {m.key for m in new}),
    )
    headline = compare_runs.geometric_mean_headline(rows, within, levels=levels)
    assert headline.verdict in (NOISE, compare_runs.BELOW_THRESHOLD)


@settings(max_examples=40, deadline=None)
@given(st.floats(1.05, 1.5), st.integers(0, 2), st.integers(0, 10_000), st.booleans())
def test_a_change_larger_than_the_drift_is_found_in_its_direction(drift, which, seed, faster):
    """One run of NEW drifts by ``drift`` across the board; one case changes by drift³ (larger
    than the drift) in either direction: that case is flagged the right way, the rest are not.
    (With 3 runs a side and its p adjusted over 9 rows, a change must stand about 8 of the
    drift's standard errors clear: a change of drift² against the drift is not always found.)"""
    rng = np.random.default_rng(seed)
    change = drift**3 if not faster else drift**-3
    base, new = [], []
    for i in range(9):
        runs_b = list(1e-3 * (1 + 0.003 * rng.standard_normal(3)))
        runs_n = list(1e-3 * (1 + 0.003 * rng.standard_normal(3)) * (change if i == 0 else 1.0))
        runs_n[which] *= drift
        base.append(_runs(f"c{i}", runs_b, "family"))
        new.append(_runs(f"c{i}", runs_n, "family"))
    rows, _ = compare_runs.compare_rows(base, new, compare_runs.Settings(**FAST))
    assert rows[0].verdict == (compare_runs.FASTER if faster else compare_runs.SLOWER)
    assert all(r.verdict != (compare_runs.FASTER if faster else compare_runs.SLOWER) for r in rows[1:])


def _aa_flags(simulations: int, cases: int, seed: int) -> tuple[float, int, int]:
    """A/A of ``cases`` cases in 3 families, 3 runs a side; each run drifts by a shared
    log-normal factor (σ 8%), each case by its own noise (σ 2%). Returns the share of rows
    flagged, the comparisons with any row flagged, and the headlines flagged."""
    rng = np.random.default_rng(seed)
    flagged, any_flag, headlines = 0, 0, 0
    for _ in range(simulations):
        sides = []
        for _side in range(2):
            drift = np.exp(0.08 * rng.standard_normal(3))
            sides.append(
                [
                    _runs(f"c{i}", list(1e-3 * drift * np.exp(0.02 * rng.standard_normal(3))), f"f{i % 3}")
                    for i in range(cases)
                ]
            )
        rows, within = compare_runs.compare_rows(*sides, compare_runs.Settings(**FAST))
        count = sum(r.verdict in (compare_runs.FASTER, compare_runs.SLOWER) for r in rows)
        flagged, any_flag = flagged + count, any_flag + (count > 0)
        keys = {m.key for m in sides[0]}
        levels = (compare_runs.suite_levels([sides[0]], keys), compare_runs.suite_levels([sides[1]], keys))
        headlines += compare_runs.geometric_mean_headline(rows, within, levels=levels).verdict in (
            compare_runs.FASTER,
            compare_runs.SLOWER,
        )
    return flagged / (simulations * cases), any_flag, headlines


def test_aa_false_alarms_stay_under_the_nominal_alpha():
    """150 simulated A/As of 33 cases, the drift shared by every case of a run: at most α of
    the comparisons flag any case (p adjusted over the table), at most α of the rows (when a
    large drift gets through, it flags many rows at once), and the headline (tested on run
    levels) at about the nominal rate."""
    rate, any_flag, headlines = _aa_flags(150, 33, seed=17)
    assert rate <= ALPHA
    assert any_flag <= 0.05 * 150 + 6  # binomial(150, 0.05): mean 7.5, sd 2.7
    assert headlines <= 0.05 * 150 + 6


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40))
def test_adjusted_p_values_are_benjamini_hochberg(p_values):
    ours = compare_runs.adjusted_p_values(p_values)
    assert ours == pytest.approx(stats.false_discovery_control(p_values, method="bh"))
    assert all(q >= p * (1 - 1e-12) for q, p in zip(ours, p_values, strict=True))


# ----------------------------------------------------------------------------- headlines


def test_headline_reports_speedup_with_its_uncertainty():
    base, new = _noisy(1e-3, 30, 5), _noisy(1e-3 / 1.5, 30, 6)
    h = compare_runs.pair_headline("step", _m("step", base), _m("step", new), compare_runs.Settings(**FAST))
    assert h.speedup == pytest.approx(1.5, rel=0.05)
    assert h.low < h.speedup < h.high and h.floor == pytest.approx(DEFAULT_FLOOR)
    assert h.verdict == compare_runs.FASTER and h.base_s == pytest.approx(np.median(base))
    # the standard error of the speedup: speedup × sd of the log ratio (delta method)
    assert h.speedup_std == pytest.approx(h.speedup * math.log(h.high / h.low) / (2 * 1.959964), rel=1e-4)


def test_geometric_mean_of_case_speedups_single_run():
    base = [_m("x", _noisy(1e-3, 20, 7)), _m("y", _noisy(2e-3, 20, 8))]
    new = [_m("x", [v / 2 for v in base[0].samples_s]), _m("y", [v / 8 for v in base[1].samples_s])]
    rows, within = compare_runs.compare_rows(base, new, compare_runs.Settings(**FAST))
    h = compare_runs.geometric_mean_headline(rows, within)
    assert h.speedup == pytest.approx(4.0)  # sqrt(2 · 8)
    assert h.cases == 2 and h.low <= 4.0 <= h.high and h.verdict == compare_runs.FASTER


def test_geometric_mean_on_run_levels():
    base = [_runs("x", [1.0, 1.1, 0.9]), _runs("y", [2.0, 2.2, 1.8])]
    new = [_runs("x", [0.5, 0.55, 0.45]), _runs("y", [0.25, 0.275, 0.225])]
    rows, within = compare_runs.compare_rows(base, new, compare_runs.Settings(**FAST))
    levels = (compare_runs.suite_levels([base], {"x", "y"}), compare_runs.suite_levels([new], {"x", "y"}))
    assert levels[0][1] == pytest.approx((math.log(1.1) + math.log(2.2)) / 2)
    h = compare_runs.geometric_mean_headline(rows, within, levels=levels)
    assert h.speedup == pytest.approx(4.0) and (h.runs_base, h.runs_new) == (3, 3) and h.floor is None
    assert h.verdict == compare_runs.FASTER and h.low < 4.0 < h.high


def test_rerun_command_sets_runs():
    assert compare_runs.rerun_command("infer-opt kernels --suite quick --out a.json") == (
        "infer-opt kernels --suite quick --out a.json --runs 3"
    )
    assert compare_runs.rerun_command("infer-opt profile --runs 1 --threads 1", runs=5) == (
        "infer-opt profile --threads 1 --runs 5"
    )
    assert (
        compare_runs.rerun_command("infer-opt profile --runs=2 'm y.py:f'")
        == "infer-opt profile 'm y.py:f' --runs 3"
    )
    assert compare_runs.rerun_command("") == ""


# ----------------------------------------------------------------------------- whole results


def test_kernel_suites_in_runs_compare_by_case_and_size():
    from tests.reports.fixtures import kernels_runs, kernels_runs_new

    result = compare_runs.compare_results(kernels_runs(), kernels_runs_new(), **FAST)
    by_key = {r.key: r for r in result.rows}
    assert by_key["matmul [n=64]"].verdict == compare_runs.FASTER
    # the ratio of geometric means of the run medians: 1.5 × the two sides' mean drifts
    drift = np.exp(np.mean(np.log([1.0, 1.04, 0.97])) - np.mean(np.log([1.02, 0.99, 1.05])))
    assert by_key["matmul [n=64]"].speedup == pytest.approx(1.5 * drift)
    assert by_key["copy [N=2^16]"].verdict == NOISE
    assert [r.verdict for r in result.rows].count(compare_runs.ONLY_BASE) == 1
    assert result.headline.cases == 5 and (result.runs_base, result.runs_new) == (3, 3)
    assert result.headline.floor is None and not [w for w in result.warnings if w.code == "single_run"]


def test_single_run_suites_say_so_and_suggest_the_command():
    from tests.reports.fixtures import kernels, kernels_new

    result = compare_runs.compare_results(
        kernels(), kernels_new(), commands=("infer-opt kernels --out base.json", ""), **FAST
    )
    by_key = {r.key: r for r in result.rows}
    # 1.5× on a 7 µs kernel is under the 100% default floor of microsecond rows; not on 180 µs
    assert (
        by_key["matmul [n=64]"].verdict == NOISE and by_key["matmul [n=256]"].verdict == compare_runs.FASTER
    )
    codes = {w.code: w for w in result.warnings}
    assert codes["single_run"]["base_command"] == "infer-opt kernels --out base.json --runs 3"
    assert "noise_floor_default" in codes and result.noise_source == "default"
    assert result.headline.verdict == NOISE and result.noise_floor == pytest.approx(DEFAULT_FLOOR)


def test_ab_rounds_pool_their_runs_per_side():
    from tests.reports.fixtures import kernels, kernels_new

    bases = [replace(kernels(), rows=tuple(replace(r, run_medians_s=()) for r in kernels().rows))] * 3
    news = [kernels_new()] * 2
    result = compare_runs.compare_results(bases, news, **FAST)
    assert (result.runs_base, result.runs_new) == (3, 2)
    row = next(r for r in result.rows if r.key == "matmul [n=64]")
    assert (row.runs_base, row.runs_new, row.base.n) == (3, 2, 15)
    assert row.verdict == compare_runs.FASTER  # no spread between identical rounds: the 1.5× is exact


def test_profiles_compare_step_ops_and_categories():
    from tests.reports.fixtures import profile

    base = profile()
    faster_step = replace(base.step, samples_s=tuple(s / 2 for s in base.step.samples_s))
    new = replace(base, step=faster_step)
    result = compare_runs.compare_results(base, new, **FAST)
    assert result.headline.speedup == pytest.approx(2.0) and result.headline.verdict == compare_runs.FASTER
    assert len(result.rows) == len(base.ops) and len(result.categories) == len(base.categories)
    assert all(r.verdict == NOISE for r in result.rows)


def test_refuses_different_experiments_and_says_what_differs():
    from tests.reports.fixtures import profile

    base = profile()
    new = replace(base, dtype="bfloat16", seq_len=256)
    with pytest.raises(InvalidInput) as err:
        compare_runs.compare_results(base, new, new_name="new.json", **FAST)
    text = str(err.value)
    assert "seq len (128 vs 256)" in text and "dtype (float32 vs bfloat16)" in text and "--force" in text
    forced = compare_runs.compare_results(base, new, force=True, **FAST)
    assert forced.differences == ("seq len (128 vs 256)", "dtype (float32 vs bfloat16)")
    assert forced.warnings[0].code == "compared_despite_differences"


@pytest.mark.parametrize("mode", ["prefill", "decode", "generate"])
def test_a_shape_the_mode_does_not_read_does_not_make_another_experiment(mode):
    """Two decode profiles that differ only in --seq-len (which a decode step ignores) are the
    same experiment; in a mode that reads it, the same difference is refused."""
    from infer_opt import steps
    from tests.reports.fixtures import profile

    base = replace(profile(), mode=mode)
    for name, value in (("seq_len", 512), ("context", 700), ("new_tokens", 9)):
        new = replace(base, **{name: value})
        said = compare_runs.differences("profile", base, new)
        assert bool(said) == steps.reads(name, (mode,)), (name, said)
    # another mode is another experiment whatever the shapes
    assert compare_runs.differences(
        "profile", base, replace(base, mode="decode" if mode != "decode" else "prefill")
    )


def test_refuses_different_kinds_and_uncomparable_kinds():
    from tests.reports.fixtures import fixture

    with pytest.raises(InvalidInput, match="is a kernels result but BASE is a profile result"):
        compare_runs.compare_results(fixture("profile"), fixture("kernels"), new_name="k.json")
    with pytest.raises(InvalidInput, match="compare works on two profile or two kernels results"):
        compare_runs.compare_results(fixture("amdahl"), fixture("amdahl"))


def test_repeated_keys_are_matched_in_order_not_dropped():
    base = [_m("a", [1.0, 1.1, 0.9]), _m("a", [2.0, 2.1, 1.9])]
    rows, _ = compare_runs.compare_rows(base, base, compare_runs.Settings(**FAST))
    assert [r.key for r in rows] == ["a", "a #2"] and all(r.ratio == pytest.approx(1.0) for r in rows)


def test_result_round_trips_through_json():
    from tests.reports.fixtures import fixture

    result = fixture("compare")
    assert CompareResult.from_dict(result.to_dict()) == result


# ----------------------------------------------------------------------------- A/A noise floor


def test_noise_floor_pools_the_spread_of_every_run_per_family():
    from tests.reports.fixtures import kernels_runs, kernels_runs_again

    record = compare_runs.noise_floor([kernels_runs(), kernels_runs_again()], command="infer-opt kernels")
    groups = {g.key: g for g in record.groups}
    assert set(groups) == {"matmul", "elementwise", "launch", "attention", compare_runs.OVERALL}
    # every case moves with the run: log drifts (1, 1.04, 0.97, 0.99, 1.06, 1.01), 5 df a row
    drifts = np.log([1.0, 1.04, 0.97, 0.99, 1.06, 1.01])
    sigma = math.sqrt(np.sum((drifts - drifts.mean()) ** 2) / 5)
    assert groups["matmul"].between_run_cv == pytest.approx(sigma) and groups["matmul"].df == 10
    assert groups[compare_runs.OVERALL].between_run_cv == pytest.approx(sigma)
    assert groups["matmul"].floor == pytest.approx(compare_runs.floor_of_sigma(sigma))
    assert record.runs == 6 and record.compared == "kernels"
    assert record.key == RunKey.of(kernels_runs()) and record.key.device_name
    noise = compare_runs.Noise.of_record(record, "here.json")
    assert noise.source == "measured" and noise.sigma("matmul", 1e-6) == pytest.approx(sigma)


def test_noise_floor_problems_keep_a_floor_to_its_own_run_key():
    from tests.reports.fixtures import fixture

    record = fixture("noise-floor")
    assert (
        compare_runs.noise_floor_problems(record) == ()
        and compare_runs.noise_floor_problems(record, record.key) == ()
    )
    other = replace(record.key, threads=4)
    (mismatch,) = compare_runs.noise_floor_problems(record, other)
    assert mismatch.code == "noise_floor_mismatch" and mismatch["field"] == "threads"
    broken = replace(record, runs=1, groups=(replace(record.groups[0], between_run_cv=float("nan")),))
    assert [n.code for n in compare_runs.noise_floor_problems(broken)] == [
        "noise_floor_empty",
        "noise_floor_not_finite",
    ]


def test_noise_floor_needs_two_runs():
    from tests.reports.fixtures import kernels

    with pytest.raises(InvalidInput) as err:
        compare_runs.noise_floor([kernels()])
    assert err.value.option == "rounds"


def test_every_notice_of_a_comparison_has_words():
    from infer_opt.messages import MESSAGES, text
    from tests.reports.fixtures import kernels, kernels_new, profile

    forced = compare_runs.compare_results(profile(), replace(profile(), dtype="bfloat16"), force=True, **FAST)
    single = compare_runs.compare_results(
        kernels(), kernels_new(), commands=("infer-opt kernels", "infer-opt kernels")
    )
    not_saved = compare_runs.Notice("noise_floor_not_saved", {"reason": "disk full"})
    notices = [*forced.warnings, *single.warnings, not_saved]
    assert {n.code for n in notices} == {
        "compared_despite_differences", "single_run", "noise_floor_default", "rows_in_one_run",
        "noise_floor_not_saved",
    }  # fmt: skip
    for notice in notices:
        assert notice.code in MESSAGES and text(notice)


def _step_halved(base):
    return replace(base, step=replace(base.step, samples_s=tuple(s / 2 for s in base.step.samples_s)))


def test_a_machine_that_moved_between_the_sides_withholds_every_verdict():
    """Issue 33 class 10: a profile compared with an unchanged rerun on a loaded machine was
    headlined 'faster' with five categories flagged. Each run times a fixed matmul before and
    after; when that probe moved more than PROBE_MOVE between the sides, no change is called."""
    from tests.reports.fixtures import profile

    base = replace(profile(), speed_probe_s=(1.0e-3, 1.0e-3))
    new = replace(_step_halved(base), speed_probe_s=(0.62e-3, 0.58e-3))  # the machine 40% faster
    result = compare_runs.compare_results(base, new, **FAST)
    assert result.machine_speed_ratio == pytest.approx(0.6)
    assert result.headline.verdict == compare_runs.WITHHELD
    assert compare_runs.FASTER not in {r.verdict for r in [*result.rows, *result.categories]}
    assert "machine_speed_moved" in {w.code for w in result.warnings}
    from infer_opt.reports.compare import headline_text

    assert headline_text(result).startswith("no verdict: the machine itself ran 40% faster")


@pytest.mark.parametrize("probes", [((1.0e-3,), (1.1e-3,)), ((), (2e-3,)), ((1e-3,), ())])
def test_a_steady_or_unrecorded_machine_keeps_the_verdict(probes):
    from tests.reports.fixtures import profile

    base = replace(profile(), speed_probe_s=probes[0])
    new = replace(_step_halved(base), speed_probe_s=probes[1])
    result = compare_runs.compare_results(base, new, **FAST)
    assert result.headline.verdict == compare_runs.FASTER
    assert "machine_speed_moved" not in {w.code for w in result.warnings}


@settings(max_examples=40, deadline=None)
@given(st.floats(0.5, 2.0))
def test_withholding_follows_the_probe_ratio_alone(ratio):
    from tests.reports.fixtures import profile

    base = replace(profile(), speed_probe_s=(1e-3,))
    new = replace(_step_halved(base), speed_probe_s=(ratio * 1e-3,))
    result = compare_runs.compare_results(base, new, **FAST)
    moved = abs(math.log(ratio)) > math.log1p(compare_runs.PROBE_MOVE)
    assert (result.headline.verdict == compare_runs.WITHHELD) == moved
    if not moved:
        plain = compare_runs.compare_results(
            replace(base, speed_probe_s=()), replace(new, speed_probe_s=()), **FAST
        )
        assert [r.verdict for r in result.rows] == [r.verdict for r in plain.rows]
