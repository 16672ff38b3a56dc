from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

import infer_opt
from infer_opt.cost_models import bucketing
from infer_opt.cost_models.amortization import (
    BucketInput,
    amortize,
    amortize_buckets,
    break_even,
    calls_from_lengths,
    net_gain,
    read_bucket_csv,
    time_curve,
)
from infer_opt.errors import InvalidInput
from infer_opt.results.amortize import AmortizeBucketsResult, AmortizeResult

# ------------------------------------------------------------------ one shape


def test_worked_example_from_spec():
    # C = 3 s, 2 ms -> 1.5 ms: break-even after 6000 calls, a gain needs strictly more
    be = break_even(3.0, 0.002, 0.0015)
    assert be.break_even_calls == 6000.0
    assert be.min_gaining_calls == 6001
    assert be.reason is None


def test_exactly_at_break_even_there_is_no_gain():
    at = amortize(3.0, 0.002, 0.0015, calls=6000)
    assert at.net_gain_s == 0.0
    assert at.compile is False
    after = amortize(3.0, 0.002, 0.0015, calls=6001)
    assert after.net_gain_s == pytest.approx(0.0005, rel=1e-12)
    assert after.compile is True


def test_net_gain_at_n_calls():
    result = amortize(3.0, 0.002, 0.0015, calls=10000)
    assert result.net_gain_s == 2.0  # 10000·0.5 ms − 3 s
    assert result.saving_s == 0.0005
    assert result.compile is True


def test_break_even_on_an_integer_is_not_lost_to_binary_rounding():
    # 0.3/(0.7 ms − 0.6 ms) is 3000 exactly; naive floats give 2999.99…
    assert 0.3 / (0.0007 - 0.0006) != 3000.0
    be = break_even(0.3, 0.0007, 0.0006)
    assert be.break_even_calls == 3000.0
    assert be.min_gaining_calls == 3001


@pytest.mark.parametrize(("eager", "compiled"), [(0.002, 0.002), (0.001, 0.0015)])
def test_compiled_not_faster_never_pays(eager, compiled):
    result = amortize(3.0, eager, compiled, calls=10**9)
    assert result.break_even_calls is None
    assert result.min_gaining_calls is None
    assert result.compile is False
    assert "never pays" in result.reason
    assert result.net_gain_s <= -3.0


def test_free_compile_pays_from_the_first_call():
    be = break_even(0.0, 0.002, 0.001)
    assert be.break_even_calls == 0.0 and be.min_gaining_calls == 1


def test_decision_unknown_without_a_call_count():
    result = amortize(3.0, 0.002, 0.0015)
    assert result.compile is None
    assert result.net_gain_s is None
    labels = [p.label for p in result.checkpoints]
    assert labels == ["break-even", "first gaining call count"]


def test_checkpoints_totals():
    result = amortize(3.0, 0.002, 0.0015, calls=10000)
    point = {p.label: p for p in result.checkpoints}["given --calls"]
    assert point.eager_total_s == 20.0
    assert point.compiled_total_s == 18.0
    assert point.net_gain_s == 2.0


@pytest.mark.parametrize(
    ("args", "option"),
    [
        ((-1.0, 0.002, 0.001), "compile_cost"),
        ((math.nan, 0.002, 0.001), "compile_cost"),
        ((1.0, -0.002, 0.001), "eager"),
        ((1.0, 0.002, math.inf), "compiled"),
    ],
)
def test_rejects_bad_durations(args, option):
    with pytest.raises(InvalidInput) as info:
        infer_opt.amortize(*args)
    assert info.value.option == option


def test_rejects_fractional_calls():
    with pytest.raises(InvalidInput, match="calls"):
        infer_opt.amortize(1.0, 0.002, 0.001, calls=2.5)


ms = st.integers(min_value=0, max_value=10**5).map(lambda k: k / 1000 * 1e-3)  # 0..100 ms in µs steps


@given(
    c=st.integers(min_value=0, max_value=10**4).map(lambda k: k / 100), te=ms, tc=ms, n=st.integers(0, 10**7)
)
def test_gain_iff_more_calls_than_break_even(c, te, tc, n):
    result = amortize(c, te, tc, calls=n)
    exact = n * (Fraction(f"{te:.15g}") - Fraction(f"{tc:.15g}")) - Fraction(f"{c:.15g}")
    assert result.compile == (exact > 0)
    if result.break_even_calls is None:
        assert tc >= te and not result.compile
    else:
        assert result.compile == (n >= result.min_gaining_calls)
        assert result.compile == (n > result.break_even_calls)


def test_time_curve_spans_break_even_and_calls():
    result = amortize(3.0, 0.002, 0.0015, calls=10000)
    curve = time_curve(result)
    assert curve.calls[0] == 0 and curve.calls[-1] == pytest.approx(12000)
    assert curve.compiled_s[0] == 3.0 and curve.eager_s[0] == 0.0
    never = time_curve(amortize(3.0, 0.001, 0.002))
    assert never.calls[-1] > 0


def test_result_round_trips_through_json():
    result = amortize(3.0, 0.002, 0.0015, calls=10000)
    assert AmortizeResult.from_dict(result.to_dict()) == result


# ------------------------------------------------------------------ buckets

BUCKETS_CSV = """bucket,compile_s,calls,eager_ms,compiled_ms
128,20,50000,2,1.5
256,25,40000,3.5,2.6
512,30,8000,7,5.5
1024,40,1000,15,12
2048,60,200,32,34
"""


def test_per_bucket_arithmetic_is_exact():
    rows = read_bucket_csv(BUCKETS_CSV, source="b.csv")
    result = amortize_buckets(rows, source="b.csv")
    by = {b.bucket: b for b in result.buckets}
    # net_i = n_i·(t_e − t_c) − C_i
    assert by["128"].net_gain_s == 5.0  # 50000·0.5 ms − 20 s
    assert by["256"].net_gain_s == 11.0  # 40000·0.9 ms − 25 s
    assert by["512"].net_gain_s == -18.0  # 8000·1.5 ms − 30 s
    assert by["1024"].net_gain_s == -37.0  # 1000·3 ms − 40 s
    assert by["2048"].net_gain_s == -60.4  # 200·(−2 ms) − 60 s
    assert by["128"].break_even_calls == 40000.0 and by["128"].min_gaining_calls == 40001
    assert by["256"].break_even_calls == pytest.approx(25 / 0.0009, rel=1e-15)
    assert by["256"].min_gaining_calls == 27778
    assert by["2048"].break_even_calls is None and "never pays" in by["2048"].reason
    assert [b.compile for b in result.buckets] == [True, True, False, False, False]
    assert result.total_net_gain_s == 16.0
    assert result.compile_all_net_gain_s == pytest.approx(-99.4, abs=1e-12)
    assert result.compile_none_net_gain_s == 0.0
    assert result.compiled_count == 2
    assert result.compile_cost_chosen_s == 45.0
    assert result.total_calls == 99200


def test_bucket_at_break_even_is_not_compiled():
    rows = [BucketInput("a", 3.0, 0.0005, calls=6000)]
    (bucket,) = amortize_buckets(rows).buckets
    assert bucket.net_gain_s == 0.0 and bucket.compile is False


def test_saving_column_may_be_negative_and_carry_units():
    text = "bucket,compile_s,calls,saving_ms\na,3s,6001,500us\nb,1,10,-2\n"
    rows = read_bucket_csv(text, source="s.csv")
    assert rows[0].compile_s == 3.0 and rows[0].saving_s == 0.0005
    assert rows[1].saving_s == -0.002
    result = amortize_buckets(rows)
    assert result.buckets[0].compile and not result.buckets[1].compile


def test_buckets_result_round_trips():
    result = amortize_buckets(read_bucket_csv(BUCKETS_CSV, source="b.csv"))
    assert AmortizeBucketsResult.from_dict(result.to_dict()) == result


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("bucket,compile_s,eager_ms,compiled_ms\na,1,2,1\n", ["b.csv", "missing column", "calls"]),
        ("bucket,compile_s,calls\na,1,2\n", ["b.csv", "eager_ms and compiled_ms (or saving_ms)"]),
        ("bucket,compile_s,calls,saving_ms,eager_ms,compiled_ms\na,1,2,1,2,1\n", ["not both"]),
        ("bucket,compile_s,calls,saving_ms\na,abc,2,1\n", ["b.csv line 2, column compile_s", "'abc'"]),
        (
            "bucket,compile_s,calls,saving_ms\na,1,2,1\nb,-4,2,1\n",
            ["line 3, column compile_s", ">= 0", "'-4'"],
        ),
        ("bucket,compile_s,calls,saving_ms\na,nan,2,1\n", ["column compile_s", "NaN"]),
        ("bucket,compile_s,calls,saving_ms\na,1,-2,1\n", ["column calls", "'-2'"]),
        ("bucket,compile_s,calls,saving_ms\na,1,NaN,1\n", ["column calls", "NaN"]),
        ("bucket,compile_s,calls,eager_ms,compiled_ms\na,1,2,x,1\n", ["column eager_ms", "'x'"]),
        ("bucket,compile_s,calls,eager_ms,compiled_ms\na,1,2,3,-1\n", ["column compiled_ms"]),
        ("bucket,compile_s,calls,saving_ms\na,1,2\n", ["b.csv line 2", "expected 4 fields"]),
        ("bucket,compile_s,calls,saving_ms\na,1,2,1\na,1,2,1\n", ["line 3, column bucket", "distinct"]),
        ("bucket,compile_s,calls,saving_ms\n", ["b.csv", "no buckets"]),
        ("", ["b.csv", "no buckets"]),
        ("bucket,compile_s,calls,saving_ms\na,1,2,3parsecs\n", ["column saving_ms", "unknown duration unit"]),
    ],
)
def test_malformed_bucket_csv_names_file_line_column_value(text, needles):
    with pytest.raises(InvalidInput) as info:
        read_bucket_csv(text, source="b.csv")
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, (needle, message)


# ------------------------------------------------------------------ calls from a length sample

BOUNDS_CSV = "bucket,compile_s,saving_ms\n8,1,1\n2,1,1\n4,1,1\n"


def test_calls_from_lengths_count_the_lengths_mapped_to_each_bound():
    rows = read_bucket_csv(BOUNDS_CSV, source="b.csv", calls_required=False)
    sample = bucketing.sample_from_lengths([1, 2, 3, 4, 5, 8, 8])
    mapped, n = calls_from_lengths(rows, sample, source="b.csv")
    assert n == 7
    assert [(r.bucket, r.calls, r.bound) for r in mapped] == [("2", 2.0, 2), ("4", 2.0, 4), ("8", 3.0, 8)]


def test_calls_from_lengths_scaled_to_requests():
    rows = read_bucket_csv(BOUNDS_CSV, source="b.csv", calls_required=False)
    sample = bucketing.sample_from_lengths([1, 3, 3, 7])
    mapped, _ = calls_from_lengths(rows, sample, requests=1000)
    assert [r.calls for r in mapped] == [250.0, 500.0, 250.0]
    result = amortize_buckets(mapped)
    assert result.total_calls == 1000.0
    assert result.buckets[1].net_gain_s == pytest.approx(500 * 0.001 - 1)


def test_lengths_above_every_bound_are_an_error():
    rows = read_bucket_csv(BOUNDS_CSV, source="b.csv", calls_required=False)
    sample = bucketing.sample_from_lengths([1, 9, 12, 12])
    with pytest.raises(InvalidInput) as info:
        calls_from_lengths(rows, sample, source="b.csv")
    assert "3 of 4 lengths" in str(info.value) and "max length 12" in str(info.value)


def test_calls_column_and_lengths_together_are_refused():
    rows = read_bucket_csv("bucket,compile_s,calls,saving_ms\n8,1,3,1\n", source="b.csv")
    with pytest.raises(InvalidInput, match="not both"):
        calls_from_lengths(rows, bucketing.sample_from_lengths([1]))


@pytest.mark.parametrize(
    ("bucket", "needle"), [("big", "'big'"), ("2.5", "integer upper bounds"), ("0", "'0'")]
)
def test_bucket_bounds_must_be_positive_integers_with_lengths(bucket, needle):
    rows = read_bucket_csv(
        f"bucket,compile_s,saving_ms\n{bucket},1,1\n", source="b.csv", calls_required=False
    )
    with pytest.raises(InvalidInput) as info:
        calls_from_lengths(rows, bucketing.sample_from_lengths([1]), source="b.csv")
    assert needle in str(info.value)


def test_net_gain_helper():
    assert net_gain(6001, 3.0, 0.0005) == pytest.approx(0.0005, rel=1e-12)


@pytest.mark.parametrize("saving", ["+-3", "--3", "-+3", "++3"])
def test_saving_with_two_signs_is_rejected(saving):
    # "+-3" used to read as +3 ms and "--3" as -3 ms: a typo silently picked a sign.
    text = f"bucket,compile_s,calls,saving_ms\na,1,10,{saving}\n"
    with pytest.raises(InvalidInput, match="saving_ms"):
        read_bucket_csv(text, source="b.csv")


@pytest.mark.parametrize(
    ("saving", "seconds"), [("-3", -3e-3), ("+3", 3e-3), ("3", 3e-3), (" -500us", -5e-4)]
)
def test_saving_with_one_sign(saving, seconds):
    text = f"bucket,compile_s,calls,saving_ms\na,1,10,{saving}\n"
    assert read_bucket_csv(text, source="b.csv")[0].saving_s == pytest.approx(seconds)
