"""The console renderer on narrow terminals: the key column never collapses, numbers keep
their width, columns are hidden by importance with a footnote, no line is wider than the
terminal; snapshots of every result kind at 60, 80 and 120 columns
(``UPDATE_SNAPSHOTS=1 pytest tests/reports/test_console.py`` rewrites them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len

from infer_opt.registry import KINDS
from infer_opt.reports.console import KEY_MAX_WIDTH, MAX_ROWS, layout
from infer_opt.reports.render import render
from infer_opt.reports.view import Column, Table, View, build_view
from tests.reports.fixtures import fixture

SNAPSHOTS = Path(__file__).parent / "console_snapshots"
UPDATE = os.environ.get("UPDATE_SNAPSHOTS") == "1"
WIDTHS = (60, 80, 120)


def _console(view_or_result: object, width: int) -> str:
    return render(view_or_result, "console", width=width)  # type: ignore[arg-type]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_console_snapshot(kind, width):
    text = _console(fixture(kind), width)
    path = SNAPSHOTS / f"{kind}-{width}.txt"
    if UPDATE or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_line_is_wider_than_the_terminal_and_every_key_shows(kind, width):
    result = fixture(kind)
    text = _console(result, width)
    # cells, not characters: 't̂' is two code points in one cell
    assert max(cell_len(line) for line in text.splitlines()) <= width
    for table in build_view(result).tables:
        plan = layout(table, width)
        key = next(p for p in plan.shown if p.is_key)
        for cell in key.cells:
            shown = cell[: KEY_MAX_WIDTH - 1].strip()
            assert shown == "" or shown.splitlines()[0][:8] in text, (table.title, cell)


def _table(columns: int, rows: int = 3, key: str = "attention_explicit[1×8×1024×64]") -> Table:
    cols = [Column("name", "Kernel", align="left")] + [
        Column(f"c{i}", f"Column {i}", lambda v: f"{v:g} ms") for i in range(columns - 1)
    ]
    data = [{"name": f"{key}-{r}", **{f"c{i}": 1234.5 + i for i in range(columns - 1)}} for r in range(rows)]
    return Table("T", cols, data)


def _render_table(table: Table, width: int) -> str:
    return _console(_view(table), width)


def _view(table: Table) -> object:
    from infer_opt.reports.render import Document, Section

    return Document([Section(View("V", tables=[table]))])


def test_a_table_that_fits_is_shown_whole_without_a_footnote():
    text = _render_table(_table(3), 120)
    assert "hidden" not in text and "Column 1" in text


def test_a_wide_table_hides_the_rightmost_columns_and_says_so():
    text = _render_table(_table(12), 80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "attention_explicit[1×8×1024×64]-0" in text  # the key is whole
    assert "1234.5 ms" in text  # numbers are never cut
    assert "columns hidden (" in text and "Column 10" in text.split("hidden")[1]
    assert "widen the terminal or use --format markdown" in text


def test_importance_decides_which_columns_go_first():
    table = _table(8)
    cols = list(table.columns)
    cols[1] = Column("c0", "Vital", lambda v: f"{v:g} ms", importance=5)
    table = Table("T", cols, table.rows)
    plan = layout(table, 70)
    assert "Vital" in [p.column.header for p in plan.shown]
    assert plan.hidden and all(c.importance == 0 for c in plan.hidden)


def test_a_marked_key_column_is_kept_even_when_it_is_not_first():
    cols = [Column("rank", "#"), Column("name", "Category", align="left", is_key=True)]
    cols += [Column(f"c{i}", f"Wide column header {i}") for i in range(10)]
    table = Table(
        "T", cols, [{"rank": 1, "name": "elementwise/activation", **{f"c{i}": 1.5 for i in range(10)}}]
    )
    plan = layout(table, 50)
    assert any(p.is_key and p.column.header == "Category" for p in plan.shown)
    assert "elementwise/activation" in _render_table(table, 50)


def test_a_terminal_too_narrow_for_two_columns_gets_one_block_per_row():
    text = _render_table(_table(4, key="k" * 30), 36)
    assert max(len(line) for line in text.splitlines()) <= 36
    assert "  Column 0: 1234.5 ms" in text
    assert "┏" not in text


def test_a_long_table_shows_its_first_rows_and_counts_the_rest():
    text = _render_table(_table(2, rows=MAX_ROWS + 5), 120)
    assert "… 5 more rows not shown" in text
    assert f"-{MAX_ROWS - 1}" in text and f"-{MAX_ROWS}" not in text


def test_a_long_key_ends_in_an_ellipsis_not_a_wrap():
    text = _render_table(_table(6, key="x" * 80), 80)
    lines = [line for line in text.splitlines() if "xxxx" in line]
    assert len(lines) == 3 and all("…" in line for line in lines)


def test_summary_values_wrap_under_their_column():
    view = View("V", summary=[("Key", "word " * 40)])
    from infer_opt.reports.render import Document, Section

    text = _console(Document([Section(view)]), 60)
    body = text.splitlines()[1:]
    assert len(body) > 1 and all(line.startswith("       ") for line in body[1:])
    assert all(len(line) <= 60 for line in body)


@given(
    width=st.integers(30, 200),
    n_columns=st.integers(1, 14),
    key=st.text(st.characters(codec="utf-8", exclude_categories=("C", "Z")), min_size=1, max_size=60),
    header=st.text(st.characters(codec="utf-8", exclude_categories=("C",)), min_size=1, max_size=30),
)
def test_no_table_is_ever_wider_than_the_terminal(width, n_columns, key, header):
    from rich.cells import cell_len

    cols = [Column("name", header, align="left")] + [
        Column(f"c{i}", f"{header} {i}", lambda v: f"{v:,.6g}") for i in range(n_columns - 1)
    ]
    rows = [{"name": key, **{f"c{i}": 10.0**i for i in range(n_columns - 1)}}]
    text = _render_table(Table("T", cols, rows), width)
    assert max(cell_len(line) for line in text.splitlines()) <= width


def test_amdahl_is_called_an_upper_bound_only_where_it_bounds_the_replay():
    """A what-if that only makes work faster replays to at most its Amdahl figure; CUDA graphs
    also remove host work between launches, so their replay can beat the Amdahl estimate over
    kernel gaps (seen on the shared two ranks of a 128-rank job: 1.824× replayed, 1.802× Amdahl).
    The summary calls Amdahl an upper bound only where it is one."""
    from dataclasses import replace

    base = fixture("trace")
    w = replace(base.what_if[0], speedup=1.5, amdahl_speedup=1.5, replayed_speedup=1.8, replayed_step_s=1.0)
    text = _console(replace(base, what_if=(w,)), 200)
    line = next(x for x in text.splitlines() if "Largest what-if" in x)
    assert "1.8× replayed" in line and "an upper bound" not in line
    bounded = replace(w, replayed_speedup=1.2)
    text = _console(replace(base, what_if=(bounded,)), 200)
    line = next(x for x in text.splitlines() if "Largest what-if" in x)
    assert "an upper bound" in line
