"""View of ``infer-opt compare``: the hyperfine-style headline, then per operator / case and
per category the two medians, their ratio with its interval, the test's p-value and the
verdict, with a legend."""

from __future__ import annotations

import math
from collections import Counter

from infer_opt.cost_models.compare import (
    BELOW_THRESHOLD,
    FASTER,
    NOISE,
    ONLY_BASE,
    ONLY_NEW,
    SLOWER,
    CompareResult,
    CompareRow,
    Headline,
)
from infer_opt.reports.view import Column, Formatter, Table, View
from infer_opt.units import format_duration, format_percent, format_with_spread

_ROW_STYLE = {FASTER: "best", SLOWER: "bad", NOISE: "muted", BELOW_THRESHOLD: "muted"}
_ORDER = (FASTER, SLOWER, BELOW_THRESHOLD, NOISE, ONLY_BASE, ONLY_NEW)


def _factor(value: float) -> str:
    """``1.524`` -> ``1.52``: three significant figures, never scientific for a speedup."""
    return f"{value:.3g}" if 0.01 <= value < 1000 else f"{value:.2e}"


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{_factor(value)}×"


def _p(value: float | None) -> str:
    if value is None:
        return "—"
    return "< 1e-4" if value < 1e-4 else f"{value:.2g}"


def _p_eq(value: float) -> str:
    """``p = 0.16`` or ``p < 1e-4``."""
    text = _p(value)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def _interval(row: CompareRow) -> str:
    if row.ratio_low is None or row.ratio_high is None:
        return "—"
    if row.approximate and row.ratio_low == row.ratio_high:
        return "~ (no spread saved)"
    text = f"{_factor(row.ratio_low)}–{_factor(row.ratio_high)}"
    return f"~{text}" if row.approximate else text


def row_verdict(row: CompareRow) -> str:
    """``1.52× faster``, ``1.1× slower``, ``within threshold (+2.1%)``, ``within noise``."""
    if row.verdict == FASTER and row.speedup is not None:
        return f"{_factor(row.speedup)}× faster"
    if row.verdict == SLOWER and row.ratio is not None:
        return f"{_factor(row.ratio)}× slower"
    if row.verdict == BELOW_THRESHOLD and row.ratio is not None:
        return f"within threshold ({100 * (row.ratio - 1):+.1f}%)"
    return row.verdict


def _plain(value: float, sig: int = 3) -> str:
    return f"{value:.{sig}g}"


def headline_text(result: CompareResult) -> str:
    """hyperfine's sentence, ``NEW ran 1.52 ± 0.04 times faster than BASE``, qualified when
    the difference is within the noise or the threshold."""
    h = result.headline
    new, base = result.new_name, result.base_name
    if h.speedup >= 1:
        factor, std, how = h.speedup, h.speedup_std, "faster"
    else:
        factor, how = 1 / h.speedup, "slower"
        std = h.speedup_std * factor**2  # σ(1/s) ≈ σ(s)/s²
    text = f"{new} ran {format_with_spread(factor, std, _plain)} times {how} than {base} ({h.what}"
    text += ", approximate)" if h.approximate else ")"
    if h.verdict == NOISE:
        p = f": Mann-Whitney {_p_eq(h.p_value)}" if h.p_value is not None else ""
        text += f" — within noise{p}"
    elif h.verdict == BELOW_THRESHOLD:
        text += f" — below the {format_percent(result.threshold, 0)} threshold"
    return text


def _headline_detail(result: CompareResult) -> str:
    h: Headline = result.headline
    level = f"{100 * result.confidence:g}%"
    text = f"{_factor(h.speedup)} ({level} bootstrap CI {_factor(h.low)}–{_factor(h.high)})"
    if h.p_value is not None:
        text += f", Mann-Whitney U {_p_eq(h.p_value)}"
    return f"{text}: {h.verdict}"


def _names(result: CompareResult) -> tuple[Formatter, Formatter]:
    """Operator names and shapes as the profile shows them (``addmm``, ``1×4×128×32 ×3``)."""
    if result.compared != "profile":
        return str, str
    from infer_opt.reports.profile import format_shapes, short_name

    return short_name, format_shapes


def _table(
    title: str, rows: tuple[CompareRow, ...], result: CompareResult, first: str, detail: str | None
) -> Table:
    name_fmt, shapes_fmt = _names(result)
    columns = [Column("label", first, name_fmt, align="left", csv_header="name")]
    if detail is not None:
        columns.append(Column("detail", detail, align="left", csv_header="detail"))
        columns.append(
            Column("group", "Category" if result.compared == "profile" else "Family", align="left")
        )
    columns += [
        Column("base_s", "Base", format_duration, csv_header="base_median_s"),
        Column("new_s", "New", format_duration, csv_header="new_median_s"),
        Column("ratio", "New/Base", _ratio, csv_header="ratio_new_over_base", importance=2),
        Column("ci", f"{100 * result.confidence:g}% CI", csv_header="ratio_ci"),
        Column("p_value", "p", _p, csv_header="p_value"),
        Column("verdict", "Verdict", align="left", csv_header="verdict", importance=2),
    ]
    table_rows = [
        {
            "label": r.label,
            "detail": shapes_fmt(r.shapes) if r.shapes else r.detail,
            "group": r.group,
            "base_s": r.base.median_s if r.base else None,
            "new_s": r.new.median_s if r.new else None,
            "ratio": r.ratio,
            "ci": _interval(r),
            "p_value": r.p_value,
            "verdict": row_verdict(r),
        }
        for r in rows
    ]
    highlight = {i: _ROW_STYLE[r.verdict] for i, r in enumerate(rows) if r.verdict in _ROW_STYLE}
    return Table(title, columns, table_rows, highlight=highlight)


def _counts(rows: tuple[CompareRow, ...]) -> str:
    counts = Counter(r.verdict for r in rows)
    return ", ".join(f"{counts[v]} {v}" for v in _ORDER if counts[v])


def build_view(result: CompareResult) -> View:
    h = result.headline
    profile = result.compared == "profile"
    summary = [
        ("Base", result.base_name),
        ("New", result.new_name),
        ("Compared", result.subject),
    ]
    if h.base_s is not None and h.new_s is not None:
        summary.append((h.what.capitalize(), f"{format_duration(h.base_s)} → {format_duration(h.new_s)}"))
    else:
        summary.append(("Overall", h.what))
    summary.append(("Speedup base/new", _headline_detail(result)))
    what = "Operators" if profile else "Cases"
    summary.append((what, _counts(result.rows)))
    if result.categories:
        summary.append(("Categories", _counts(result.categories)))
    tables = [
        _table(
            "Operators (time per step)" if profile else "Kernel cases (time per call)",
            result.rows,
            result,
            "Operator" if profile else "Case",
            "Input shapes" if profile else "Size",
        )
    ]
    if result.categories:
        tables.append(_table("Categories (time per step)", result.categories, result, "Category", None))
    notes = [
        f"New/Base = median(new) / median(base): below 1 means NEW is faster. p: two-sided Mann-Whitney U "
        f"test on the repetition samples; a difference counts at α = {result.alpha:g}, and changes under "
        f"{format_percent(result.threshold, 0)} are 'within threshold'. CI: percentile bootstrap of the "
        f"ratio of medians ({result.bootstrap} replicates, seed {result.seed}).",
        "The test sees the noise within each run, not drift between runs (other load, clock speed, "
        "temperature): on a shared machine run BASE and NEW back to back, repeat the pair, or raise "
        "--threshold before trusting a small change.",
        *result.notes,
    ]
    warnings = []
    if result.differences:
        warnings.append(f"compared with --force although the runs differ in {', '.join(result.differences)}")
    only = [r for r in result.rows if r.verdict in (ONLY_BASE, ONLY_NEW)]
    if only:
        what = ("operator" if profile else "case") + ("s appear" if len(only) > 1 else " appears")
        warnings.append(f"{len(only)} {what} in only one run (listed as 'only in base' / 'only in new')")
    ok = not (h.verdict == SLOWER and math.isfinite(h.speedup))
    return View(
        title=f"Compare: {result.new_name} against {result.base_name}",
        summary=summary,
        tables=tables,
        notes=notes,
        warnings=warnings,
        verdict=headline_text(result),
        verdict_ok=ok,
    )
