"""View of ``infer-opt compare``: the hyperfine-style headline (or "no significant difference"),
the noise a verdict had to beat, then per operator / case and per category the two medians,
their ratio with its interval, the runs on each side and their spread, the p-value and the
verdict, with a legend. Also the view of a saved noise floor (``noise-floor``)."""

from __future__ import annotations

import math
from collections import Counter

from infer_opt.cost_models.compare_runs import BELOW_THRESHOLD, FASTER, ONLY_BASE, ONLY_NEW, SLOWER, WITHHELD
from infer_opt.reports.view import Column, Formatter, Table, View
from infer_opt.results.compare import NOISE, CompareResult, CompareRow, Headline
from infer_opt.units import format_duration, format_percent, format_with_spread

_ROW_STYLE = {FASTER: "best", SLOWER: "bad", NOISE: "muted", BELOW_THRESHOLD: "muted", WITHHELD: "muted"}
_ORDER = (FASTER, SLOWER, BELOW_THRESHOLD, NOISE, WITHHELD, ONLY_BASE, ONLY_NEW)


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


def _pct(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{100 * value:.2g}%" if value < 0.1 else f"{100 * value:.0f}%"


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
    if row.verdict == WITHHELD:
        return "withheld (the machine's speed moved)"
    return row.verdict


def _plain(value: float, sig: int = 3) -> str:
    return f"{value:.{sig}g}"


def _runs(h: Headline) -> str:
    return f"{h.runs_base} + {h.runs_new} runs"


def headline_text(result: CompareResult) -> str:
    """hyperfine's sentence, ``NEW ran 1.52 ± 0.04 times faster than BASE``, when the test finds
    a difference; ``no significant difference between NEW and BASE (within ±3%)`` when not."""
    h = result.headline
    new, base = result.new_name, result.base_name
    what = f"{h.what}, {_runs(h)}" + (", approximate" if h.approximate else "")
    if h.verdict == NOISE:
        return f"no significant difference between {new} and {base} (within ±{_pct(h.within)}; {what})"
    if h.verdict == WITHHELD:
        moved = result.machine_speed_ratio or 1.0
        how = "slower" if moved > 1 else "faster"
        return (
            f"no verdict: the machine itself ran {_pct(abs(moved - 1))} {how} during {new} than during "
            f"{base} (its speed probe), so a difference of the step cannot be told from it ({what})"
        )
    if h.speedup >= 1:
        factor, std, how = h.speedup, h.speedup_std, "faster"
    else:
        factor, how = 1 / h.speedup, "slower"
        std = h.speedup_std * factor**2  # σ(1/s) ≈ σ(s)/s²
    text = f"{new} ran {format_with_spread(factor, std, _plain)} times {how} than {base} ({what})"
    if h.verdict == BELOW_THRESHOLD:
        text += f" — below the {format_percent(result.threshold, 0)} threshold"
    return text


def _method(h: Headline) -> str:
    if h.floor is None:
        return f"t test on {h.runs_base} + {h.runs_new} runs"
    return "one run a side: within-run bootstrap plus run-to-run noise"


def _headline_detail(result: CompareResult) -> str:
    h: Headline = result.headline
    level = f"{100 * result.confidence:g}%"
    text = f"{_factor(h.speedup)} ({level} CI {_factor(h.low)}–{_factor(h.high)})"
    if h.p_value is not None:
        text += f", {_p_eq(h.p_value)}"
    return f"{text} ({_method(h)}): {h.verdict}"


def _noise_line(result: CompareResult) -> str:
    """What a change had to beat: the single-run floor, or the runs' own spread."""
    h = result.headline
    source = {
        "measured": f"measured by an A/A on this machine, {result.noise_where}",
        "given": "given with --noise-floor",
        "default": "the stated default; no A/A measured here",
    }.get(result.noise_source, result.noise_source)
    if h.floor is not None:
        return (
            f"changes under {_pct(h.floor)} are not distinguishable on this machine from one run per side "
            f"(noise floor: {source})"
        )
    text = f"between-run spread {_pct(h.between_run_cv)}; changes under ±{_pct(h.resolution)} "
    text += f"not distinguishable with {_runs(h)}"
    if result.noise_source != "default":
        text += f"; one run's noise floor {_pct(result.noise_floor)} ({source})"
    return text


def _names(result: CompareResult) -> tuple[Formatter, Formatter]:
    """Operator names and shapes as the profile shows them (``addmm``, ``1×4×128×32 ×3``)."""
    if result.compared != "profile":
        return str, str
    from infer_opt.reports.profile import format_shapes, short_name

    return short_name, format_shapes


def _columns(result: CompareResult, first: str, detail: str | None) -> list[Column]:
    name_fmt, _ = _names(result)
    columns = [Column("label", first, name_fmt, align="left", csv_header="name")]
    if detail is not None:
        columns.append(Column("detail", detail, align="left", csv_header="detail"))
        columns.append(
            Column("group", "Category" if result.compared == "profile" else "Family", align="left")
        )
    return [
        *columns,
        Column("base_s", "Base", format_duration, csv_header="base_median_s"),
        Column("new_s", "New", format_duration, csv_header="new_median_s"),
        Column("ratio", "New/Base", _ratio, csv_header="ratio_new_over_base", importance=2),
        Column("ci", f"{100 * result.confidence:g}% CI", csv_header="ratio_ci"),
        Column("runs", "Runs", align="right", csv_header="runs_base+new"),
        Column("spread", "Spread", _pct, csv_header="between_run_cv"),
        Column("p_value", "p", _p, csv_header="p_value"),
        Column("q_value", "p adj.", _p, csv_header="p_adjusted"),
        Column("verdict", "Verdict", align="left", csv_header="verdict", importance=2),
    ]


def _table(
    title: str, rows: tuple[CompareRow, ...], result: CompareResult, first: str, detail: str | None
) -> Table:
    _, shapes_fmt = _names(result)
    table_rows = [
        {
            "label": r.label,
            "detail": shapes_fmt(r.shapes) if r.shapes else r.detail,
            "group": r.group,
            "base_s": r.base.median_s if r.base else None,
            "new_s": r.new.median_s if r.new else None,
            "ratio": r.ratio,
            "ci": _interval(r),
            "runs": f"{r.runs_base if r.base else '—'}+{r.runs_new if r.new else '—'}",
            "spread": r.between_run_cv,
            "p_value": r.p_value,
            "q_value": r.q_value,
            "verdict": row_verdict(r),
        }
        for r in rows
    ]
    highlight = {i: _ROW_STYLE[r.verdict] for i, r in enumerate(rows) if r.verdict in _ROW_STYLE}
    return Table(title, _columns(result, first, detail), table_rows, highlight=highlight)


def _counts(rows: tuple[CompareRow, ...]) -> str:
    counts = Counter(r.verdict for r in rows)
    return ", ".join(f"{counts[v]} {v}" for v in _ORDER if counts[v])


def _notes(result: CompareResult) -> list[str]:
    notes = [
        "New/Base = e^(mean log run median of NEW − of BASE) (one run a side: median(new)/median(base)); "
        "below 1 means NEW is faster. With ≥ 2 runs a side: Student's t test on the log run medians, the "
        "between-run variance pooled over both sides and at least its family's median (Spread: the row's "
        "own between-run standard deviation, ≈ CV). With one run on a side: a normal approximation from "
        "the within-run bootstrap plus one run's run-to-run noise, and no verdict under the noise floor. "
        f"A difference counts when p adj. (p adjusted for the table's rows, Benjamini–Hochberg) is under "
        f"α = {result.alpha:g}; changes under {format_percent(result.threshold, 0)} are 'within threshold'.",
    ]
    if result.compared == "profile":
        notes.append(
            "Operator rows: the per-step total of each operator/shape group over the repetitions (sum over "
            "its calls), so medians can differ slightly from the profile's sum of per-call medians."
        )
    if any(r.approximate for r in [*result.rows, *result.categories]) or result.headline.approximate:
        notes.append(
            "Rows marked ~ have no repetition samples: their within-run interval is approximate (normal "
            "approximation from the median and IQR)."
        )
    return notes


def build_view(result: CompareResult) -> View:
    h = result.headline
    profile = result.compared == "profile"
    summary = [("Base", result.base_name), ("New", result.new_name), ("Compared", result.subject)]
    if h.base_s is not None and h.new_s is not None:
        summary.append((h.what.capitalize(), f"{format_duration(h.base_s)} → {format_duration(h.new_s)}"))
    else:
        summary.append(("Overall", h.what))
    summary += [
        ("Speedup base/new", _headline_detail(result)),
        ("Runs", f"base {h.runs_base}, new {h.runs_new}"),
        ("Noise", _noise_line(result)),
        ("Operators" if profile else "Cases", _counts(result.rows)),
    ]
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
    return View(
        title=f"Compare: {result.new_name} against {result.base_name}",
        summary=summary,
        tables=tables,
        notes=_notes(result),
        warnings=list(result.warnings),
        verdict=headline_text(result),
        verdict_ok=not (h.verdict == SLOWER and math.isfinite(h.speedup)),
    )
