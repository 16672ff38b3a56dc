from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt import units
from infer_opt.errors import InvalidInput
from infer_opt.units import (
    format_bytes,
    format_duration,
    format_flop_rate,
    format_with_spread,
    parse_bandwidth,
    parse_duration,
    parse_float,
    parse_flops_rate,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("3s", 3.0),
        ("2ms", 2e-3),
        ("1.5ms", 1.5e-3),
        ("800us", 8e-4),
        ("800µs", 8e-4),
        ("120ns", 1.2e-7),
        ("1min", 60.0),
        ("0", 0.0),
        (" 2 ms ", 2e-3),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


def test_bare_number_uses_default_unit():
    assert parse_duration("2", default_unit="ms") == pytest.approx(2e-3)


@pytest.mark.parametrize(
    "text", ["3 parsecs", "ms", "-1ms", "nan", "inf", "1..2s", "1e308", "1e11s", "1e308ms"]
)
def test_parse_duration_rejects(text):
    with pytest.raises(InvalidInput):
        parse_duration(text, option="--eager")


def test_zero_rejected_when_asked():
    with pytest.raises(InvalidInput, match="> 0"):
        parse_duration("0ms", allow_zero=False)


def test_sizes_and_rates():
    assert parse_size("4GiB") == 4 * 2**30
    assert parse_size("1.5GB") == 1.5e9
    assert parse_bandwidth("1.2TB/s") == pytest.approx(1.2e12)
    assert parse_flops_rate("312TFLOP/s") == pytest.approx(3.12e14)
    assert parse_flops_rate("989 TFLOPS") == pytest.approx(9.89e14)


def test_parse_float_bounds_message():
    with pytest.raises(InvalidInput, match=r"\[0, 1\]"):
        parse_float("1.5", option="--alpha", low=0, high=1)
    assert parse_float("inf", option="-s", low=0, low_open=True, allow_inf=True) == math.inf


def test_formatting():
    assert format_duration(1.5e-3) == "1.5 ms"
    assert format_duration(0) == "0 s"
    assert format_duration(90) == "1.5 min"
    assert format_bytes(128 * 2**20) == "128 MiB"
    assert format_bytes(4 * 2**30) == "4 GiB"
    assert format_flop_rate(3.1e12) == "3.1 TFLOP/s"
    assert format_with_spread(1.523e-3, 4e-5) == "1.52 ms ± 40 µs"


@given(st.floats(min_value=1e-9, max_value=1e4))
def test_duration_round_trip(seconds):
    text = format_duration(seconds, sig=12).replace("µs", "us").replace(" ", "")
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-9)


@pytest.mark.parametrize("text", ["-0", "-0.0", "-0e5", -0.0])
def test_negative_zero_parses_as_plain_zero(text):
    value = parse_float(text, option="-f", low=0, high=1)
    assert value == 0 and math.copysign(1.0, value) == 1.0


def test_format_number_does_not_invent_digits_for_huge_floats():
    from infer_opt.units import format_number

    assert format_number(1e308) == "1e+308"
    assert format_number(2.0 * 0.01 * 1e308) == "2e+306"
    assert format_number(4.6116860141203e18) == "4.612e+18"
    assert format_number(123_456_789_012) == "123,456,789,012"  # exact integers below 1e15 stay whole
    assert format_number(12345.6) == "12,346"


@pytest.mark.parametrize("text", ["1e400", "9" * 400, "-1e999"])
def test_a_literal_that_overflows_a_float_is_refused_not_taken_as_inf(text):
    with pytest.raises(InvalidInput, match="too large"):
        units.parse_float(text, option="--x", allow_inf=True)


def test_inf_itself_is_taken_where_allowed():
    assert units.parse_float("inf", option="--x", allow_inf=True) == float("inf")


@pytest.mark.parametrize(
    ("text", "needle"), [("1e20", "[1, 10]"), ("1e308", "[1, 10]"), ("2.5", "whole number")]
)
def test_counts_out_of_range_name_the_range_not_a_format(text, needle):
    with pytest.raises(InvalidInput) as info:
        units.parse_int(text, option="--n", low=1, high=10)
    assert needle in str(info.value)


def test_examples_offer_inf_only_where_it_is_allowed():
    with pytest.raises(InvalidInput) as finite:
        units.parse_float("abc", option="--x")
    with pytest.raises(InvalidInput) as infinite:
        units.parse_float("abc", option="--x", allow_inf=True)
    assert "inf" not in finite.value.expected and "inf" in infinite.value.expected


def test_plural_counts_one_apart_from_every_other_count():
    said = [units.plural(n, "new token") for n in (0, 1, 2)]
    assert said == ["0 new tokens", "1 new token", "2 new tokens"]


def test_a_whole_number_past_what_a_float_holds_is_refused_with_the_real_bound():
    # "[0, +inf]" for 1e30 contradicted itself: the bound that refused it is 2^53
    with pytest.raises(InvalidInput) as exc:
        units.parse_int("1e30", option="--seed", low=0)
    assert "[0, 2^53]" in str(exc.value) and "inf" not in str(exc.value)
    assert units.parse_int(str(2**53), option="--seed", low=0) == 2**53
