from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.cost_models import bucketing as bk
from infer_opt.errors import InvalidInput
from infer_opt.results.buckets import BucketsResult

# ------------------------------------------------------------------ reference implementations


def _waste(lengths: list[int], bounds: tuple[int, ...], power: int) -> Fraction:
    """Σ (b(T)^p − T^p) / N over a raw list, exactly."""
    total = Fraction(0)
    for t in lengths:
        b = next(x for x in bounds if x >= t)
        total += b**power - t**power
    return total / len(lengths)


def _plain_dp(values: list[int], counts: list[int], k: int, power: int) -> list[int]:
    """The textbook O(K·D²) recurrence f_m(j) = min_i f_{m−1}(i) + w(i, j); returns f_m(D)."""
    d = len(values)
    inf = float("inf")
    pc, pp = [0], [0]
    for v, c in zip(values, counts, strict=True):
        pc.append(pc[-1] + c)
        pp.append(pp[-1] + c * v**power)

    def w(i: int, j: int) -> int:  # lengths i+1..j padded to values[j-1]
        return values[j - 1] ** power * (pc[j] - pc[i]) - (pp[j] - pp[i])

    f = [[inf] * (d + 1) for _ in range(k + 1)]
    f[0][0] = 0
    for m in range(1, k + 1):
        for j in range(1, d + 1):
            f[m][j] = min(f[m - 1][i] + w(i, j) for i in range(j))
    return [f[m][d] for m in range(k + 1)]


def _brute_force(values: list[int], counts: list[int], k: int, power: int) -> int:
    """Best total waste over every set of k bounds drawn from the distinct lengths that
    includes the largest (any other bound choice only adds waste)."""
    best = None
    for rest in itertools.combinations(values[:-1], k - 1):
        bounds = (*rest, values[-1])
        total = 0
        for v, c in zip(values, counts, strict=True):
            total += c * (next(b for b in bounds if b >= v) ** power - v**power)
        best = total if best is None else min(best, total)
    return best


samples = st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=30)
costs = st.sampled_from(["linear", "quadratic"])


# ------------------------------------------------------------------ reading samples


def test_reads_one_integer_per_line_with_blank_lines():
    sample = bk.parse_lengths_text("3\n1\n\n3\n 7 \n", source="x.txt")
    assert sample.values.tolist() == [1, 3, 7]
    assert sample.counts.tolist() == [1, 2, 1]
    assert sample.total == 4 and sample.distinct == 3


def test_reads_csv_with_length_and_count_and_extra_columns():
    text = "id,length,count\na,10,3\nb,20,0\nc,10,2\nd,5,1\n"
    sample = bk.parse_lengths_text(text, source="x.csv")
    assert sample.values.tolist() == [5, 10]
    assert sample.counts.tolist() == [1, 5]


def test_reads_csv_with_length_only():
    sample = bk.parse_lengths_text("length\n4\n4\n9\n", source="x.csv")
    assert sample.counts.tolist() == [2, 1]


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("", ["x", "empty"]),
        ("\n\n", ["x", "empty"]),
        ("12\n0\n5\n", ["x line 2", "'0'", "> 0"]),
        ("12\n\n-5\n", ["x line 3", "'-5'"]),
        ("12\n12.5\n", ["x line 2", "'12.5'", "integer"]),
        ("12\n1 2\n", ["x line 2", "'1 2'"]),
        ("12\nnan\n", ["x line 2", "'nan'"]),
        ("len,count\n3,1\n", ["x", "'length' column"]),
        ("length,count\n3,1\n4\n", ["x line 3", "expected 2 fields"]),
        ("length,count\n3,-1\n", ["x line 2, column count", "'-1'"]),
        ("length,count\nabc,1\n", ["x line 2, column length", "'abc'"]),
        ("length,count\n3,0\n", ["x", "empty"]),
        ("length\n", ["x", "empty"]),
        ("99999999999999999999\n", ["x line 1", "at most"]),
    ],
)
def test_malformed_samples_name_the_line_and_value(text, needles):
    with pytest.raises(InvalidInput) as info:
        bk.parse_lengths_text(text, source="x")
    message = str(info.value)
    for needle in needles:
        assert needle in message, (needle, message)


def test_integral_floats_are_accepted_as_lengths():
    assert bk.parse_lengths_text("12.0\n3\n", source="x").values.tolist() == [3, 12]


# ------------------------------------------------------------------ bounds


@pytest.mark.parametrize(
    ("bounds", "needle"),
    [
        ((), "at least one"),
        ((0, 4), "positive"),
        ((-2,), "positive"),
        ((4, 4), "strictly increasing"),
        ((8, 4), "4 after 8"),
        ((10**20,), "at most"),
        ((4, 2**31), "at most"),
    ],
)
def test_bounds_must_be_positive_and_strictly_increasing(bounds, needle):
    with pytest.raises(InvalidInput, match=needle):
        bk.validate_bounds(bounds)


def test_bucket_is_the_smallest_bound_at_or_above():
    assert bk.bucket_of(np.array([1, 2, 3, 4, 5]), (2, 4)).tolist() == [0, 0, 1, 1, 2]


# ------------------------------------------------------------------ expected padding


def test_small_worked_example():
    # lengths 1,2,3,4 with bounds 2,4 -> b = 2,2,4,4
    result = bk.analyze(bk.sample_from_lengths([1, 2, 3, 4]), (2, 4))
    assert result.expected_padding == 0.5  # (1+0+1+0)/4
    assert result.mean_length == 2.5
    assert result.relative_padding == 0.2
    assert result.expected_quadratic_padding == 2.5  # (3+0+7+0)/4
    assert result.mean_square_length == 7.5
    assert result.relative_quadratic_padding == pytest.approx(1 / 3)
    assert result.mean_padded_length == 3.0
    assert [s.count for s in result.per_bucket] == [2, 2]
    assert result.per_bucket[1].expected_padding == 0.5
    assert result.per_bucket[1].padding_fraction == pytest.approx(1 / 8)
    assert result.per_bucket[1].expected_quadratic_padding == 3.5
    assert result.per_bucket[1].lower == 3


def test_quadratic_padding_is_not_the_square_of_the_mean_padding():
    # lengths 1 and 100 in buckets 2 and 101: padding 1 each, so E[b − T]² = 1, but
    # E[b² − T²] = ((4 − 1) + (10201 − 10000)) / 2 = 102.
    result = bk.analyze(bk.sample_from_lengths([1, 100]), (2, 101))
    assert result.expected_padding == 1.0
    assert result.expected_quadratic_padding == 102.0
    assert result.expected_quadratic_padding != result.expected_padding**2


def test_empty_buckets_are_reported_with_zero_count():
    result = bk.analyze(bk.sample_from_lengths([5, 6]), (2, 4, 8))
    assert [s.count for s in result.per_bucket] == [0, 0, 2]
    assert result.per_bucket[0].expected_padding is None


def test_lengths_above_the_largest_bound_are_an_error():
    sample = bk.sample_from_lengths([1, 5, 9, 12, 12])
    with pytest.raises(InvalidInput) as info:
        bk.analyze(sample, (4, 8))
    message = str(info.value)
    assert "3 of 5 lengths" in message and "max length 12" in message and "--allow-unbucketed" in message


def test_unbucketed_lengths_are_counted_and_excluded_when_allowed():
    sample = bk.sample_from_lengths([1, 3, 9, 12, 12])
    result = bk.analyze(sample, (4,), allow_unbucketed=True)
    assert result.unbucketed_count == 3 and result.unbucketed_max == 12
    assert result.sample_size == 5 and result.bucketed_count == 2
    assert result.expected_padding == 2.0  # (3 + 1)/2 over the two bucketed lengths
    assert result.mean_length == 2.0


def test_all_lengths_unbucketed_is_an_error_even_when_allowed():
    with pytest.raises(InvalidInput, match="every length"):
        bk.analyze(bk.sample_from_lengths([9]), (4,), allow_unbucketed=True)


def test_counts_weight_the_sample():
    a = bk.analyze(bk.sample_from_lengths([1, 3], [3, 1]), (4,))
    b = bk.analyze(bk.sample_from_lengths([1, 1, 1, 3]), (4,))
    assert a.expected_padding == b.expected_padding == 2.5


# ------------------------------------------------------------------ batches padded to their longest


def _batch_brute_force(lengths: list[int], bounds: tuple[int, ...], n: int) -> tuple[Fraction, Fraction]:
    """Every ordered n-tuple drawn with replacement is equally likely."""
    pad = pad2 = Fraction(0)
    tuples = list(itertools.product(lengths, repeat=n))
    for draw in tuples:
        b = next(x for x in bounds if x >= max(draw))
        pad += n * b - sum(draw)
        pad2 += n * b * b - sum(t * t for t in draw)
    return pad / len(tuples), pad2 / len(tuples)


@pytest.mark.parametrize(
    ("lengths", "bounds", "n"),
    [
        ([1, 2, 3, 4], (2, 4), 2),
        ([1, 1, 5, 7, 7, 8], (4, 8), 3),
        ([3, 10, 11, 20], (10, 15, 20), 4),
        ([5], (8,), 3),
    ],
)
def test_batch_padding_matches_brute_force_enumeration(lengths, bounds, n):
    result = bk.analyze(bk.sample_from_lengths(lengths), bounds, batch_size=n)
    pad, pad2 = _batch_brute_force(lengths, bounds, n)
    assert result.batch.expected_padding == pytest.approx(float(pad), rel=1e-12)
    assert result.batch.expected_quadratic_padding == pytest.approx(float(pad2), rel=1e-12)
    assert result.batch.expected_tokens == pytest.approx(n * np.mean(lengths))


@settings(max_examples=40)
@given(lengths=st.lists(st.integers(1, 30), min_size=1, max_size=5), n=st.integers(1, 3), data=st.data())
def test_batch_padding_matches_brute_force_property(lengths, n, data):
    top = max(lengths)
    extra = data.draw(st.lists(st.integers(1, top), max_size=3))
    bounds = tuple(sorted({*extra, top}))
    result = bk.analyze(bk.sample_from_lengths(lengths), bounds, batch_size=n)
    pad, pad2 = _batch_brute_force(lengths, bounds, n)
    got = result.batch if n > 1 else result  # n = 1 is the per-request padding
    assert got.expected_padding == pytest.approx(float(pad), rel=1e-9, abs=1e-9)
    assert got.expected_quadratic_padding == pytest.approx(float(pad2), rel=1e-9, abs=1e-9)


@given(lengths=samples, n=st.integers(2, 64), data=st.data())
def test_batch_max_waste_is_at_least_the_per_request_waste(lengths, n, data):
    top = max(lengths)
    extra = data.draw(st.lists(st.integers(1, top + 10), max_size=4))
    bounds = tuple(sorted({*extra, top + data.draw(st.integers(0, 5))}))
    batch = bk.analyze(bk.sample_from_lengths(lengths), bounds, batch_size=n).batch
    assert batch.expected_padding >= batch.per_request_padding - 1e-9 * batch.expected_padded_tokens
    assert batch.expected_quadratic_padding >= batch.per_request_quadratic_padding * (1 - 1e-12) - 1e-9


# ------------------------------------------------------------------ bucket design


def test_optimal_bounds_small_example():
    # lengths 1,2,9,10: two buckets -> {2, 10} pads only 1 + 1 tokens
    table = bk.optimal_waste_table(bk.sample_from_lengths([1, 2, 9, 10]), 2)
    assert table.bounds(2) == (2, 10)
    assert table.total_waste[2] == 2
    assert table.bounds(1) == (10,)
    assert table.total_waste[1] == 9 + 8 + 1


def test_k_equal_to_distinct_lengths_has_no_waste():
    sample = bk.sample_from_lengths([3, 5, 5, 8])
    table = bk.optimal_waste_table(sample, 3, "quadratic")
    assert table.bounds(3) == (3, 5, 8) and table.total_waste[3] == 0


@settings(max_examples=80)
@given(lengths=st.lists(st.integers(1, 40), min_size=1, max_size=40), cost=costs, data=st.data())
def test_dp_equals_brute_force_over_all_k_subsets(lengths, cost, data):
    sample = bk.sample_from_lengths(lengths)
    values, counts = sample.values.tolist()[:8], sample.counts.tolist()[:8]
    sample = bk.sample_from_lengths(values, counts)
    k = data.draw(st.integers(1, len(values)))
    power = bk.COST_POWER[cost]
    table = bk.optimal_waste_table(sample, k, cost)
    for m in range(1, k + 1):
        assert table.total_waste[m] == _brute_force(values, counts, m, power)
        bounds = table.bounds(m)
        assert len(bounds) == m and bounds[-1] == values[-1]
        raw = [v for v, c in zip(values, counts, strict=True) for _ in range(c)]
        assert _waste(raw, bounds, power) == Fraction(table.total_waste[m], sample.total)


@settings(max_examples=40)
@given(
    lengths=st.lists(st.integers(1, 3000), min_size=1, max_size=60),
    counts=st.lists(st.integers(1, 1000), min_size=60, max_size=60),
    cost=costs,
    data=st.data(),
)
def test_hull_dp_equals_the_plain_quadratic_dp(lengths, counts, cost, data):
    sample = bk.sample_from_lengths(lengths, counts[: len(lengths)])
    k = data.draw(st.integers(1, sample.distinct))
    table = bk.optimal_waste_table(sample, k, cost)
    plain = _plain_dp(sample.values.tolist(), sample.counts.tolist(), k, bk.COST_POWER[cost])
    assert list(table.total_waste[1:]) == plain[1:]


@pytest.mark.parametrize("cost", ["linear", "quadratic"])
def test_hull_dp_equals_the_plain_dp_on_a_larger_sample(cost):
    rng = np.random.default_rng(7)
    sample = bk.sample_from_lengths(rng.lognormal(5, 1, 5000).astype(int) + 1)
    values, counts = sample.values.tolist()[:250], sample.counts.tolist()[:250]
    sample = bk.sample_from_lengths(values, counts)
    table = bk.optimal_waste_table(sample, 10, cost)
    assert list(table.total_waste[1:]) == _plain_dp(values, counts, 10, bk.COST_POWER[cost])[1:]


@given(lengths=samples, cost=costs, data=st.data())
def test_dp_never_worse_than_any_ladder_with_the_same_k(lengths, cost, data):
    sample = bk.sample_from_lengths(lengths)
    top = sample.max_length
    extra = data.draw(st.lists(st.integers(1, top + 20), max_size=8))
    ladder = tuple(sorted({*extra, top + data.draw(st.integers(0, 20))}))
    power = bk.COST_POWER[cost]
    k = min(len(ladder), sample.distinct)
    table = bk.optimal_waste_table(sample, k, cost)
    assert Fraction(table.total_waste[k], sample.total) <= _waste(lengths, ladder, power)


def test_fixed_step_and_power_of_two_ladders():
    assert bk.fixed_step_ladder(1000, 4) == (250, 500, 750, 1000)
    assert bk.fixed_step_ladder(10, 3) == (4, 7, 10)
    assert bk.power_of_two_ladder(bk.sample_from_lengths([100, 1000])) == (128, 256, 512, 1024)
    assert bk.power_of_two_ladder(bk.sample_from_lengths([1, 4])) == (1, 2, 4)


def test_optimize_reports_the_optimum_and_the_ladders():
    rng = np.random.default_rng(3)
    sample = bk.sample_from_lengths(rng.integers(1, 500, 2000))
    result = bk.optimize(sample, 4, cost="linear")
    opt = result.optimization
    assert len(result.bounds) == 4 and result.bounds[-1] == sample.max_length
    names = [row.name for row in opt.ladders]
    assert names == ["optimal (K = 4)", "fixed step (K = 4)", "powers of two"]
    best = opt.ladders[0]
    assert best.ratio_to_optimal == 1.0
    assert best.expected_waste == pytest.approx(result.expected_padding)
    for row in opt.ladders[1:]:
        assert row.expected_waste >= best.expected_waste or row.buckets_used > 4
        assert row.ratio_to_optimal >= 1.0


def test_optimize_with_given_bounds_compares_them():
    sample = bk.sample_from_lengths([10, 20, 30, 40, 50])
    result = bk.optimize(sample, 2, given_bounds=(25, 50))
    given = result.optimization.ladders[-1]
    assert given.name == "given --bounds" and given.bounds == (25, 50)
    assert given.expected_waste == pytest.approx((15 + 5 + 20 + 10 + 0) / 5)


def test_choosing_k_trades_waste_against_compile_cost():
    sample = bk.sample_from_lengths([10, 20, 30, 40, 50, 60, 70, 80])
    free = bk.optimize(sample, 5, compile_cost_s=0.0, token_cost_s=1e-6)
    assert free.optimization.k == 5
    dear = bk.optimize(sample, 5, compile_cost_s=1e6, token_cost_s=1e-6)
    assert dear.optimization.k == 1
    mid = bk.optimize(sample, 5, compile_cost_s=0.01, token_cost_s=1e-6, requests=1000)
    choices = mid.optimization.k_choices
    assert [c.k for c in choices] == [1, 2, 3, 4, 5]
    for c in choices:
        assert c.total_cost_s == pytest.approx(1000 * 1e-6 * c.expected_waste + c.k * 0.01)
    best = min(choices, key=lambda c: c.total_cost_s)
    assert mid.optimization.k == best.k
    assert len(mid.bounds) == best.k
    assert mid.optimization.requests == 1000
    assert "requests = 1000" in mid.optimization.objective


def test_default_request_count_is_the_sample_size():
    sample = bk.sample_from_lengths([10, 20, 30])
    result = bk.optimize(sample, 2, compile_cost_s=1.0, token_cost_s=1e-3)
    assert result.optimization.requests == 3
    assert "the sample size" in result.optimization.objective


@pytest.mark.parametrize(
    ("kwargs", "option", "needle"),
    [
        ({"k": 0}, "optimize", ">= 1"),
        ({"k": 4}, "optimize", "number of distinct lengths in the sample (3)"),
        ({"k": 2, "compile_cost_s": 1.0}, "token_cost", "together"),
        ({"k": 2, "token_cost_s": 1.0}, "compile_cost", "together"),
        ({"k": 2, "compile_cost_s": -1.0, "token_cost_s": 1.0}, "compile_cost", ">= 0"),
        ({"k": 2, "compile_cost_s": float("nan"), "token_cost_s": 1.0}, "compile_cost", ">= 0"),
        ({"k": 2, "cost": "cubic"}, "cost", "linear or quadratic"),
        ({"k": 2, "requests": 0}, "requests", ">= 1"),
    ],
)
def test_optimize_rejects_bad_input(kwargs, option, needle):
    sample = bk.sample_from_lengths([1, 2, 3, 3])
    k = kwargs.pop("k")
    with pytest.raises(InvalidInput) as info:
        bk.optimize(sample, k, **kwargs)
    assert info.value.option == option
    assert needle in str(info.value)


def test_result_round_trips_through_json():
    sample = bk.sample_from_lengths([1, 5, 9, 12, 30], [2, 1, 1, 3, 1])
    result = bk.optimize(sample, 3, compile_cost_s=1.0, token_cost_s=1e-3, batch_size=4)
    again = BucketsResult.from_dict(result.to_dict())
    assert again == result


def test_plot_data_area_is_the_expected_padding():
    sample = bk.sample_from_lengths([1, 2, 3, 4, 7], [1, 2, 1, 3, 1])
    data = bk.plot_data(sample, (2, 4, 8))
    q, t, b = map(np.array, (data.quantiles, data.lengths, data.padded))
    area = float(np.sum((q[1::2] - q[::2]) * (b[::2] - t[::2])))
    assert area == pytest.approx(bk.analyze(sample, (2, 4, 8)).expected_padding)
    assert sum(data.bin_counts) == sample.total
