"""The one tabular reader: CSV/TSV, unit-suffixed columns, errors naming file/line/column/value,
NaN/Infinity refused, extra columns reported, vectorised; strict JSON."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_opt.errors import InvalidInput
from infer_opt.inputs.tables import Field, read_json, read_table

FIELDS = (
    Field("name", "text"),
    Field("time", "duration", unit="ms", low=0.0, low_open=True),
    Field("tokens", "count", low=1),
    Field("weight", "number", required=False),
)


def read(text: str, **kwargs):
    return read_table(text, FIELDS, source="log.csv", **kwargs)


@pytest.mark.parametrize(
    ("header", "cell", "seconds"),
    [
        ("time", "12", 0.012),
        ("time_ms", "12", 0.012),
        ("time_us", "12", 12e-6),
        ("time_s", "12", 12.0),
        ("time_ns", "12", 12e-9),
        ("time", "12us", 12e-6),
        ("time_s", "3ms", 0.003),
        ("TIME_MS", " 12 ", 0.012),
    ],
)
def test_durations_take_their_unit_from_the_header_or_the_cell(header, cell, seconds):
    table = read(f"name,{header},tokens\na,{cell},3\n")
    assert table.frame["time"].tolist() == pytest.approx([seconds])
    assert table.headers["time"] == header.lower()


def test_tsv_blank_lines_comments_and_a_bom_are_read():
    text = "\ufeffname\ttime\ttokens\n# a comment\n\na\t1\t2\n\nb\t2\t3\n"
    table = read(text)
    assert table.frame["name"].tolist() == ["a", "b"] and table.frame["tokens"].tolist() == [2, 3]
    assert [table.line(i) for i in range(2)] == [4, 6]


def test_columns_in_any_order_and_extra_ones_reported():
    table = read("tokens,notes,time,name\n3,x,1,a\n")
    assert table.frame.columns.tolist() == ["name", "time", "tokens"]
    assert table.extra == ("notes",)
    (notice,) = table.notices()
    assert notice.code == "extra_columns" and notice["columns"] == ["notes"]


def test_a_file_without_a_header_takes_the_names_given():
    table = read_table("5\n7\n", (Field("length", "count", low=1),), source="x", names=["length"])
    assert table.frame["length"].tolist() == [5, 7] and table.line(1) == 2


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("", ["log.csv", "empty"]),
        ("name,tokens\na,1\n", ["log.csv line 1", "'time_ms'"]),
        ("name,time,time,tokens\na,1,1,1\n", ["line 1", "twice"]),
        ("name,time,tokens\na,nan,1\n", ["log.csv line 2, column time", "NaN", "'nan'"]),
        ("name,time,tokens\na,inf,1\n", ["line 2, column time", "finite"]),
        ("name,time,tokens\na,1e400,1\n", ["line 2, column time"]),
        ("name,time,tokens\na,1,inf\n", ["line 2, column tokens", "'inf'"]),
        ("name,time,tokens\na,1,1\nb,0,1\n", ["line 3, column time", "> 0", "'0'"]),
        ("name,time,tokens\na,1,1.5\n", ["line 2, column tokens", "integer", "'1.5'"]),
        ("name,time,tokens\na,1,0\n", ["line 2, column tokens", ">= 1"]),
        ("name,time,tokens\na,1," + "9" * 30 + "\n", ["line 2, column tokens"]),
        ("name,time,tokens\na,1\n", ["line 2", "expected 3 fields"]),
        ("name,time,tokens\na,1,1,1\n", ["line 2", "expected 3 fields"]),
        ("name,time,tokens\n\n\na,1,1\nb,1\n", ["line 5", "expected 3 fields"]),
        ("name,time,tokens\n,1,1\n", ["line 2, column name", "empty"]),
        ("name,time,tokens\na,,1\n", ["line 2, column time", "empty"]),
        ("name,time,tokens\na,3 parsecs,1\n", ["line 2, column time", "unknown duration unit"]),
        ("name,time,tokens,weight\na,1,1,abc\n", ["line 2, column weight", "expected a number", "'abc'"]),
    ],
)
def test_bad_files_name_the_file_line_column_and_value(text, needles):
    with pytest.raises(InvalidInput) as info:
        read(text)
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, (needle, message)


def test_blank_cells_where_allowed_are_missing_values():
    fields = (Field("name", "text"), Field("time", "duration", blank_ok=True))
    table = read_table("name,time_s\na,\nb,2\n", fields, source="m.csv")
    assert np.isnan(table.frame["time"][0]) and table.frame["time"][1] == 2.0


def test_a_million_rows_are_read_column_wise():
    n = 1_000_000
    text = "name,time_us,tokens\n" + "".join(f"r{i},{i % 97 + 1},{i % 5 + 1}\n" for i in range(n))
    table = read(text)
    assert len(table) == n and table.frame["tokens"].sum() == sum(i % 5 + 1 for i in range(n))
    assert table.frame["time"].iloc[96] == pytest.approx(97e-6)


@given(
    st.lists(
        st.tuples(st.integers(1, 10**9), st.floats(1e-6, 1e6, allow_nan=False)),
        min_size=1,
        max_size=30,
    )
)
def test_every_row_round_trips_with_its_line(rows):
    text = "name,time_s,tokens\n" + "".join(f"n{i},{t!r},{k}\n" for i, (k, t) in enumerate(rows))
    table = read(text)
    assert table.frame["tokens"].tolist() == [k for k, _ in rows]
    assert table.frame["time"].tolist() == [t for _, t in rows]
    assert [table.line(i) for i in range(len(rows))] == list(range(2, len(rows) + 2))


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ('{"drafts": NaN}', ["m.json: drafts", "NaN"]),
        ('{"a": {"b": [1, Infinity]}}', ["m.json: a.b[1]", "Infinity"]),
        ("[-Infinity]", ["m.json: [0]"]),
        ("{", ["m.json", "not valid JSON"]),
        ("[" * 100_000 + "]" * 100_000, ["nested too deeply"]),
        ('{"n": ' + "9" * 5000 + "}", ["m.json", "digits"]),
    ],
)
def test_strict_json_refuses_non_finite_numbers_naming_the_key(text, needles):
    with pytest.raises(InvalidInput) as info:
        read_json(text, source="m.json")
    for needle in needles:
        assert needle in str(info.value)


def test_strict_json_reads_ordinary_documents():
    assert read_json('{"a": [1, 2.5, "inf"]}', source="m.json") == {"a": [1, 2.5, "inf"]}
