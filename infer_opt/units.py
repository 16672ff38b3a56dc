"""Parse and format durations, sizes, rates and counts.

One parser per quantity; every option that takes a duration goes through
:func:`parse_duration`, every printed duration through :func:`format_duration`.
A bare number is in the unit the option names (``default_unit``).
"""

from __future__ import annotations

import math
import re

from infer_opt.errors import InvalidInput

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_QUANTITY = re.compile(rf"^\s*(?P<num>{_NUMBER}|[-+]?inf(?:inity)?|nan)\s*(?P<unit>[A-Za-zµ/]*)\s*$")

DURATION_UNITS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "min": 60.0,
    "h": 3600.0,
}

SIZE_UNITS: dict[str, float] = {
    "b": 1.0,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "tb": 1e12,
    "kib": 2.0**10,
    "mib": 2.0**20,
    "gib": 2.0**30,
    "tib": 2.0**40,
}

_SI_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}


def _split(text: str, option: str, what: str, example: str | None = None) -> tuple[float, str]:
    match = _QUANTITY.match(str(text))
    if not match:
        raise InvalidInput(option, text, f"expected a {what} such as {example or _EXAMPLES[what]}")
    number = match.group("num")
    value = float(number)
    if math.isnan(value):
        raise InvalidInput(option, text, f"expected a {what}, not NaN")
    if math.isinf(value) and "inf" not in number.lower():
        raise InvalidInput(option, text, f"too large: {number[:20]}… does not fit a float (at most ~1.8e308)")
    return value, match.group("unit")


_EXAMPLES = {
    "duration": "3s, 1.5ms, 800us or 120ns",
    "size": "512MiB, 4GiB or 1e6 (bytes)",
    "bandwidth": "1.2TB/s or 900GB/s",
    "compute rate": "312TFLOP/s or 5e12 (FLOP/s)",
    "number": "0.4 or 3",
    "whole number": "8 or 1e3",
}


def _number_and_unit(text: str | float, option: str, what: str) -> tuple[float, str]:
    """A bare number (no unit), or the number and the unit ``text`` spells."""
    if isinstance(text, (int, float)):
        return float(text), ""
    return _split(text, option, what)


def _finite(out: float, text: str | float, option: str, what: str, *, positive: bool) -> float:
    """``out`` when finite and >= 0 (> 0 where ``positive``), else :class:`InvalidInput`."""
    if not math.isfinite(out) or out < 0 or (positive and out == 0):
        raise InvalidInput(option, text, f"{what} must be a finite number {'> 0' if positive else '>= 0'}")
    return out


#: the longest duration an option takes
MAX_DURATION_S = 1e10


def parse_duration(
    text: str | float,
    *,
    option: str = "duration",
    default_unit: str = "s",
    allow_zero: bool = True,
) -> float:
    """Parse a duration into seconds: ``"3s"`` -> 3.0, ``"800us"`` -> 8e-4.

    A bare number is in ``default_unit``. Negative, infinite or NaN durations are rejected.
    """
    value, unit = _number_and_unit(text, option, "duration")
    if math.isnan(value):
        raise InvalidInput(option, text, "expected a duration, not NaN")
    unit = unit or default_unit
    if unit not in DURATION_UNITS:
        raise InvalidInput(option, text, f"unknown duration unit {unit!r}; use one of ns, us, ms, s, min, h")
    seconds = value * DURATION_UNITS[unit]
    if math.isinf(seconds):
        raise InvalidInput(option, text, "expected a finite duration")
    if seconds > MAX_DURATION_S:  # (1e308 s: no measurement, and overflows what is made of it)
        raise InvalidInput(option, text, f"expected a duration of at most {MAX_DURATION_S:g} s (317 years)")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidInput(option, text, f"duration must be {bound}")
    return seconds


def parse_size(text: str | float, *, option: str = "size") -> float:
    """Parse a byte count: ``"4GiB"`` -> 4·2³⁰, ``"1.5GB"`` -> 1.5e9; bare numbers are bytes."""
    value, unit = _number_and_unit(text, option, "size")
    key = (unit or "b").lower()
    if key not in SIZE_UNITS:
        raise InvalidInput(option, text, f"unknown size unit {unit!r}; use B, KB, MB, GB, KiB, MiB, GiB")
    return _finite(value * SIZE_UNITS[key], text, option, "size", positive=False)


def parse_bandwidth(text: str | float, *, option: str = "bandwidth") -> float:
    """Parse bytes per second: ``"1.2TB/s"`` -> 1.2e12; bare numbers are bytes/s."""
    value, unit = _number_and_unit(text, option, "bandwidth")
    key = unit.lower().removesuffix("/s").removesuffix("ps")
    if key not in SIZE_UNITS and key != "":
        raise InvalidInput(option, text, f"unknown bandwidth unit {unit!r}; use e.g. GB/s or TB/s")
    return _finite(value * SIZE_UNITS.get(key, 1.0), text, option, "bandwidth", positive=True)


def parse_flops_rate(text: str | float, *, option: str = "compute rate") -> float:
    """Parse FLOP/s: ``"312TFLOP/s"``, ``"312 TFLOPS"`` -> 3.12e14; bare numbers are FLOP/s."""
    value, unit = _number_and_unit(text, option, "compute rate")
    key = unit.lower().replace("flop/s", "").replace("flops", "").replace("flop", "")
    if key not in _SI_PREFIX:
        raise InvalidInput(option, text, f"unknown rate unit {unit!r}; use e.g. TFLOP/s")
    return _finite(value * _SI_PREFIX[key], text, option, "compute rate", positive=True)


def parse_float(
    text: str | float,
    *,
    option: str,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
    what: str = "number",
) -> float:
    """Parse a plain number and check it lies in the stated interval."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        example = _EXAMPLES[what] + (" or inf" if allow_inf else "")
        value, unit = _split(text, option, what, example.replace(" or 3 or", ", 3 or"))
        if unit:
            raise InvalidInput(option, text, f"expected a plain {what} without a unit")
    if math.isnan(value):
        raise InvalidInput(option, text, "expected a number, not NaN")
    value += 0.0  # "-0" -> 0.0: a negative zero would print as "-0.0%"
    if math.isinf(value) and not allow_inf:
        raise InvalidInput(option, text, "expected a finite number")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        lo = "-inf" if low is None else _g(low)
        hi = ("inf" if allow_inf else "+inf") if high is None else _g(high)
        raise InvalidInput(option, text, f"must be in {left}{lo}, {hi}{right}")
    return value


def _items(text: str, option: str, what: str) -> list[str]:
    """The comma-separated items of ``text``; an empty item (``0.5,,0.3``) is an error."""
    raw = str(text)
    if raw.strip() == "":
        raise InvalidInput(option, text, f"expected a comma-separated list of {what}")
    items = [item.strip() for item in raw.split(",")]
    if any(item == "" for item in items):
        raise InvalidInput(option, text, f"empty item in the list; expected {what} separated by commas")
    return items


def parse_float_list(text: str, *, option: str, **bounds: object) -> list[float]:
    """Parse ``"0.9,0.7,0.5"`` into floats, each checked with :func:`parse_float` bounds."""
    return [parse_float(item, option=option, **bounds) for item in _items(text, option, "numbers")]  # type: ignore[arg-type]


def parse_int_list(text: str, *, option: str, low: int | None = None, high: int | None = None) -> list[int]:
    """Parse ``"128,256"`` into whole numbers, each in ``[low, high]``."""
    return [
        parse_int(item, option=option, low=low, high=high) for item in _items(text, option, "whole numbers")
    ]


def parse_fraction(text: str | float, *, option: str, low: float = 0.0, high: float | None = None) -> float:
    """A fraction given as ``5%`` or ``0.05`` -> 0.05, checked to lie in ``[low, high]``."""
    raw = str(text).strip()
    percent = raw.endswith("%")
    value = parse_float(raw[:-1] if percent else raw, option=option) / (100.0 if percent else 1.0)
    if value < low or (high is not None and value > high):
        hi = "+inf" if high is None else f"{100 * high:g}%"
        raise InvalidInput(option, text, f"must be in [{100 * low:g}%, {hi}] (e.g. 5% or 0.05)")
    return value


#: the largest whole number a float holds exactly: counts above it (a counter of 1e308) are not counts
MAX_WHOLE = 2**53


def parse_int(text: str | int, *, option: str, low: int | None = None, high: int | None = None) -> int:
    """Parse a whole number (``"8"``, ``"1e3"``) and check ``low <= n <= high``; ``"2.5"`` is rejected."""
    if isinstance(text, bool):
        raise InvalidInput(option, text, "expected a whole number")
    value = (
        parse_float(text, option=option, what="whole number") if not isinstance(text, int) else float(text)
    )
    lo = "-2^53" if low is None else str(low)  # the largest whole number a float holds exactly
    hi = "2^53" if high is None else str(high)
    if value != math.floor(value):
        raise InvalidInput(option, text, "expected a whole number")
    if abs(value) > MAX_WHOLE or (low is not None and value < low) or (high is not None and value > high):
        raise InvalidInput(option, text, f"must be a whole number in [{lo}, {hi}]")
    return int(value)


def _g(value: float) -> str:
    return f"{value:g}"


# ---------------------------------------------------------------------------- formatting


def round_sig(value: float, sig: int = 3) -> float:
    """Round to ``sig`` significant figures (0, inf and NaN pass through)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, sig - 1 - math.floor(math.log10(abs(value))))


def plural(n: int, word: str) -> str:
    """``1 token``, ``2 tokens``, ``0 tokens``."""
    return f"{n} {word}" + ("" if n == 1 else "s")


def format_number(value: float | None, sig: int = 4) -> str:
    """A plain number with ``sig`` significant figures and thousands separators when large."""
    if value is None:
        return "—"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 1e15:  # every digit past ``sig`` would be float noise, not information
        return f"{value:.{sig}g}"
    if abs(value) >= 10**sig:
        return f"{round(value):,}"
    text = f"{value:.{sig}g}"
    if "e" in text:
        return text
    return text


def format_ratio(value: float | None, sig: int = 4) -> str:
    """A dimensionless factor: ``1.429×``."""
    if value is None:
        return "—"
    if math.isinf(value):
        return "∞"
    return f"{value:.{sig}g}×"


def format_percent(fraction: float | None, digits: int = 1) -> str:
    """A fraction as a percentage: 0.4 -> ``40.0%``."""
    if fraction is None:
        return "—"
    return f"{100.0 * fraction:.{digits}f}%"


def _scaled(value: float, steps: list[tuple[float, str]], sig: int, sep: str = " ") -> str:
    if value is None:
        return "—"
    if not math.isfinite(value):
        return "∞" if value > 0 else ("-∞" if value < 0 else "nan")
    magnitude = abs(value)
    for factor, unit in steps:
        if magnitude >= factor * 0.9995:
            return f"{_sig(value / factor, sig)}{sep}{unit}"
    factor, unit = steps[-1]
    return f"{_sig(value / factor, sig)}{sep}{unit}"


def _sig(value: float, sig: int) -> str:
    """``sig`` significant figures without switching to exponent notation for values
    below 10⁴ (160 with 2 figures is ``160``, not ``1.6e+02``)."""
    rounded = round_sig(value, sig)
    if abs(rounded) >= 10**sig and abs(rounded) < 1e4:
        return f"{rounded:.0f}"
    return f"{rounded:.{sig}g}"


_DURATION_STEPS = [
    (3600.0, "h"),
    (60.0, "min"),
    (1.0, "s"),
    (1e-3, "ms"),
    (1e-6, "µs"),
    (1e-9, "ns"),
]
_BYTE_STEPS = [(2.0**40, "TiB"), (2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB"), (1.0, "B")]
_DEC_STEPS = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]


def format_duration(seconds: float | None, sig: int = 3) -> str:
    """Auto-scaled duration: 0.0015 -> ``1.5 ms``; 0 -> ``0 s``."""
    if seconds is None:
        return "—"
    if seconds == 0:
        return "0 s"
    if math.isfinite(seconds) and abs(seconds) >= 60:
        return _scaled(seconds, [*_DURATION_STEPS[:2], (1.0, "s")], sig)
    return _scaled(seconds, _DURATION_STEPS[2:], sig)


def format_bytes(n_bytes: float | None, sig: int = 3) -> str:
    """Auto-scaled binary size: 134217728 -> ``128 MiB``."""
    if n_bytes is None:
        return "—"
    if n_bytes == 0:
        return "0 B"
    return _scaled(n_bytes, _BYTE_STEPS, sig)


def format_si(value: float | None, unit: str, sig: int = 3) -> str:
    """Auto-scaled decimal quantity: (3.1e12, "FLOP/s") -> ``3.1 TFLOP/s``."""
    if value is None:
        return "—"
    if value == 0:
        return f"0 {unit}"
    return _scaled(value, _DEC_STEPS, sig, sep=" ") + unit


def format_flops(value: float | None, sig: int = 3) -> str:
    """FLOP count, decimal prefixes: 2.5e9 -> ``2.5 GFLOP``."""
    return format_si(value, "FLOP", sig)


def format_flop_rate(value: float | None, sig: int = 3) -> str:
    return format_si(value, "FLOP/s", sig)


def format_bandwidth(value: float | None, sig: int = 3) -> str:
    """Bytes per second with decimal prefixes, as vendors quote them: ``1.2 TB/s``."""
    return format_si(value, "B/s", sig)


def format_with_spread(center: float, spread: float, formatter: object = format_duration) -> str:
    """``1.52 ms ± 0.04 ms``: the spread decides how many digits the centre keeps."""
    fmt = formatter  # type: ignore[assignment]
    if not math.isfinite(spread) or spread <= 0 or center == 0 or not math.isfinite(center):
        return fmt(center)  # type: ignore[operator]
    # keep digits down to the leading digit of the spread: 1.523 ms ± 40 µs -> 1.52 ms
    digits = max(2, min(6, math.floor(math.log10(abs(center))) - math.floor(math.log10(spread)) + 1))
    return f"{fmt(center, digits)} ± {fmt(spread, 2)}"  # type: ignore[operator]
