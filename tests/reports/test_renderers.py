"""The renderer layer: one registry, every renderer over every result kind, and exact
markdown/CSV snapshots (``UPDATE_SNAPSHOTS=1 pytest tests/reports`` rewrites them)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

import pytest

from infer_opt.cost_models.amdahl import Part, combined
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.registry import KINDS as REGISTRY
from infer_opt.registry import resolve
from infer_opt.reports.render import (
    RENDERERS,
    Document,
    Figure,
    Highlight,
    Renderer,
    Section,
    extension_map,
    format_for_path,
    get_renderer,
    render,
)
from infer_opt.reports.serialize import fields_table
from infer_opt.reports.view import Column, Table, View, build_view
from infer_opt.results import parse_envelope, result_class
from tests.helpers import assert_one_line_error, invoke
from tests.reports.fixtures import FIXTURES, fixture

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("UPDATE_SNAPSHOTS") == "1"
KINDS = sorted(REGISTRY)


def test_every_result_kind_has_a_fixture_a_result_class_and_a_view_builder():
    assert set(FIXTURES) == set(REGISTRY), "add a fixture in tests/reports/fixtures.py for new kinds"
    for kind, entry in REGISTRY.items():
        assert kind == result_class(kind).KIND
        assert callable(resolve(entry.view))


def test_a_kind_declares_its_highlights_and_the_top_its_view_builder_takes():
    import inspect

    for kind, entry in REGISTRY.items():
        assert entry.top == ("top" in inspect.signature(resolve(entry.view)).parameters), kind
        assert entry.highlights is None or callable(resolve(entry.highlights)), kind


def test_the_format_option_takes_the_renderer_registry_names():
    from infer_opt.cli.output import FORMATS

    assert tuple(RENDERERS) == FORMATS


def test_every_fixture_is_of_its_kind():
    for kind in KINDS:
        assert kind == fixture(kind).KIND


# ----------------------------------------------------------------------------- registry


def test_registry_names_are_the_renderers_own():
    for name in RENDERERS:
        cls = type(get_renderer(name))
        assert issubclass(cls, Renderer) and cls.name == name


@pytest.mark.parametrize(
    ("path", "fmt"),
    [("r.md", "markdown"), ("R.MARKDOWN", "markdown"), ("r.csv", "csv"), ("r.json", "json"),
     ("r.html", "html"), ("r.htm", "html"), ("r.txt", "console")],
)  # fmt: skip
def test_file_extension_picks_the_renderer(path, fmt):
    assert format_for_path(path) == fmt


def test_extensions_are_unique_and_lower_case():
    exts = [ext for name in RENDERERS for ext in type(get_renderer(name)).extensions]
    assert len(exts) == len(set(exts)) == len(extension_map())
    assert all(ext == ext.lower() and ext.startswith(".") for ext in exts)


def test_unknown_format_and_extension_are_one_line_errors():
    with pytest.raises(InvalidInput, match="--format: expected one of console, markdown, csv, json, html"):
        get_renderer("yaml")
    with pytest.raises(InvalidInput, match=r"--out: extension must be one of .*\.md.*\(got 'r\.yaml'\)"):
        format_for_path("r.yaml")


def test_a_new_format_is_one_renderer_and_one_registry_line(monkeypatch):
    class Upper(Renderer):
        name = "upper"
        extensions = (".up",)

        def render(self, doc: Document) -> str:
            return "\n".join(s.view.title.upper() for s in doc.sections)

    import infer_opt.reports.render as render_module

    monkeypatch.setattr(render_module, "Upper", Upper, raising=False)
    monkeypatch.setitem(RENDERERS, "upper", "infer_opt.reports.render:Upper")
    assert format_for_path("x.up") == "upper"
    assert render(fixture("amdahl"), "upper") == "AMDAHL'S LAW"


# ----------------------------------------------------------------------------- every renderer, every kind


class _Balanced(HTMLParser):
    VOID: ClassVar[set[str]] = {"meta", "img", "br", "hr", "link"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
        self.stack.pop()


def _csv_blocks(text: str) -> list[list[list[str]]]:
    blocks: list[list[list[str]]] = [[]]
    for row in csv.reader(io.StringIO(text)):
        if not row:
            blocks.append([])
        elif row[0].startswith("# "):
            if blocks[-1]:
                blocks.append([])
        else:
            blocks[-1].append(row)
    return [b for b in blocks if b]


@pytest.mark.parametrize("fmt", list(RENDERERS))
@pytest.mark.parametrize("kind", KINDS)
def test_every_renderer_renders_every_kind(kind, fmt):
    result = fixture(kind)
    view = build_view(result)
    text = render(result, fmt)
    assert text.endswith("\n")
    if fmt == "json":
        loaded = parse_envelope(json.loads(text))
        assert loaded.kind == kind and loaded.result.to_dict() == result.to_dict()
    elif fmt == "csv":
        blocks = _csv_blocks(text)
        tables = view.tables or [fields_table(result)]
        assert len(blocks) == len(tables)
        for block, table in zip(blocks, tables, strict=True):
            assert len(block) == len(table.rows) + 1
            assert all(len(row) == len(table.columns) for row in block)
    elif fmt == "html":
        parser = _Balanced()
        parser.feed(text)
        assert parser.stack == []
        assert text.count("<table>") == len(view.tables)
        assert "<script" not in text and "http" not in text.split("<style>")[0]
    else:
        assert view.title in text
        for table in view.tables:
            assert table.title in text


@pytest.mark.parametrize("kind", KINDS)
def test_markdown_tables_are_github_tables(kind):
    view = build_view(fixture(kind))
    lines = render(fixture(kind), "markdown").splitlines()
    for table in view.tables:
        at = lines.index(f"**{table.title}**")
        header, rule = lines[at + 2], lines[at + 3]
        n = len(table.columns)
        assert header.startswith("| ") and rule.count("|") == n + 1
        body = lines[at + 4 : at + 4 + len(table.rows)]
        assert all(row.replace("\\|", "").count("|") == n + 1 for row in body)


# ----------------------------------------------------------------------------- snapshots


def _check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"no snapshot {path.name}: run UPDATE_SNAPSHOTS=1 pytest tests/reports"
    assert text == path.read_text(encoding="utf-8"), f"{path.name} changed (UPDATE_SNAPSHOTS=1 to accept)"


@pytest.mark.parametrize("kind", KINDS)
def test_markdown_snapshot(kind):
    _check_snapshot(f"{kind}.md", render(fixture(kind), "markdown"))


@pytest.mark.parametrize("kind", KINDS)
def test_csv_snapshot(kind):
    _check_snapshot(f"{kind}.csv", render(fixture(kind), "csv"))


#: an ISO date or time of day, as the envelope's ``created`` would write it
DATE = re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)|(?<!\d)\d{2}:\d{2}:\d{2}(?!\d)")


def test_snapshots_never_hold_the_environment_or_the_date():
    for path in SNAPSHOTS.iterdir():
        text = path.read_text(encoding="utf-8")
        assert "environment" not in text and "created" not in text, path.name
        assert not DATE.search(text), (path.name, DATE.search(text))


def test_the_date_pattern_catches_any_year_and_time():
    assert DATE.search("at 2031-01-09") and DATE.search("created 1999-12-31T23:59:59")
    assert not DATE.search("1x128, 12:34 ratio, 2026 tokens")


# ----------------------------------------------------------------------------- views


def _views(kind: str) -> list[View]:
    """Every view of a fixture: the default, and each display option the kind's builder takes."""
    result = fixture(kind)
    views = [build_view(result)]
    if kind == "profile":
        views += [build_view(result, by=by) for by in ("module", "category")]
    return views


@pytest.mark.parametrize("kind", KINDS)
def test_every_row_has_every_column_key(kind):
    # renderers show a missing key as "—": in a view it is a typo, so here it is an error
    for view in _views(kind):
        for table in view.tables:
            keys = [c.key for c in table.columns]
            assert len(set(keys)) == len(keys), (table.title, keys)
            for i, row in enumerate(table.rows):
                missing = [k for k in keys if k not in row]
                assert not missing, (table.title, i, missing)


def test_no_stale_snapshots():
    expected = {f"{k}.{ext}" for k in KINDS for ext in ("md", "csv")}
    assert {p.name for p in SNAPSHOTS.iterdir()} == expected


# ----------------------------------------------------------------------------- documents


def _doc() -> Document:
    table = Table("T", [Column("a", "A", align="left"), Column("x", "X")], [{"a": "p|q", "x": 1.5}])
    warning = Notice.from_text("w")
    view = View("V", summary=[("k", "v")], tables=[table], notes=["n"], warnings=[warning], verdict="ok")
    return Document(
        [Section(view, figures=[Figure(Path("/nonexistent/f.png"), "r_assets/f.png", "V")])],
        title="Report",
        highlights=[
            Highlight("Check", "FAIL: x", "bad"),
            Highlight("Profile", "step 1 ms"),
            Highlight("Profile", "matmul 60%"),
        ],
        commands=["infer-opt amdahl -f 0.4 -s 4 --out a.json"],
    )


def test_report_markdown_nests_highlights_and_links_figures():
    text = get_renderer("markdown").render(_doc())
    assert text.startswith(
        "# Report\n\n## What matters\n\n- ❌ **Check:** FAIL: x\n- **Profile**\n  - step 1 ms\n"
    )
    assert "![V](r_assets/f.png)" in text
    assert "```console\n$ infer-opt amdahl -f 0.4 -s 4 --out a.json\n```" in text
    assert "| p\\|q | 1.5 |" in text


def test_html_embeds_figures_as_data_uris(tmp_path):
    png = tmp_path / "f.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    doc = _doc()
    doc.sections[0].figures = [Figure(png, "r_assets/f.png", "V")]
    text = get_renderer("html").render(doc)
    assert 'src="data:image/png;base64,iVBORw0KGgpmYWtl"' in text
    assert "r_assets/f.png" not in text
    assert '<li class="bad">❌ <b>Check:</b> FAIL: x</li>' in text


def test_console_plain_text_has_no_colour_codes_and_keeps_warnings_inline():
    text = get_renderer("console").render(_doc())
    assert "\x1b[" not in text
    assert "warning: w" in text and "What matters" in text
    assert all(line == line.rstrip() for line in text.splitlines())


def test_csv_of_several_sections_names_each_table():
    doc = _doc()
    doc.sections.append(Section(build_view(fixture("amdahl")), fixture("amdahl")))
    text = get_renderer("csv").render(doc)
    assert text.startswith("# V / T\na,x\np|q,1.5\n")
    assert "# Amdahl's law / Time by part\n" in text


def test_json_of_several_sections_is_a_list_of_envelopes():
    doc = Document([Section(build_view(fixture(k)), fixture(k)) for k in ("amdahl", "buckets")])
    data = json.loads(get_renderer("json").render(doc))
    assert [d["schema"] for d in data] == ["infer-opt/amdahl", "infer-opt/buckets"]


# ----------------------------------------------------------------------------- commands use the registry


def test_format_option_prints_any_format_on_stdout():
    md = invoke("amdahl", "-f", "0.4", "-s", "4", "--format", "markdown")
    assert md.exit_code == 0 and md.stdout == render(_amdahl_04(), "markdown")
    html = invoke("amdahl", "-f", "0.4", "-s", "4", "--format", "html").stdout
    assert html.startswith("<!DOCTYPE html>") and "<table>" in html
    assert invoke("amdahl", "-f", "0.4", "-s", "4", "--format", "json").json()["schema"] == "infer-opt/amdahl"


def test_out_extension_picks_the_format(tmp_path):
    files = [tmp_path / f"a.{ext}" for ext in ("md", "csv", "json", "html", "txt")]
    run = invoke("amdahl", "-f", "0.4", "-s", "4", *(arg for f in files for arg in ("--out", str(f))))
    assert run.exit_code == 0, run.stderr
    assert files[0].read_text().startswith("## Amdahl's law")
    assert files[1].read_text().startswith("name,fraction,speedup")
    assert json.loads(files[2].read_text())["schema"] == "infer-opt/amdahl"
    assert files[3].read_text().startswith("<!DOCTYPE html>")
    assert "Time by part" in files[4].read_text() and "\x1b[" not in files[4].read_text()


def test_format_errors_are_one_line():
    assert_one_line_error(invoke("amdahl", "-f", "0.4", "-s", "4", "--format", "yaml"), "--format", "'yaml'")
    assert_one_line_error(invoke("amdahl", "-f", "0.4", "-s", "4", "--json", "--format", "csv"), "--format")
    assert_one_line_error(invoke("amdahl", "-f", "0.4", "-s", "4", "--out", "a.yaml"), "--out", ".md")


def _amdahl_04():
    return combined([Part("part", 0.4, 4.0)])
