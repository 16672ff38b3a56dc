"""The Python API: lazy exports from ``infer_opt``, results as DataFrames and markdown."""

from __future__ import annotations

import subprocess
import sys

import pytest

import infer_opt
from infer_opt.api import EXPORTS
from infer_opt.errors import InvalidInput
from infer_opt.registry import KINDS
from infer_opt.reports.render import render
from infer_opt.reports.view import build_view
from tests.reports.fixtures import fixture


def test_import_infer_opt_imports_nothing_heavy():
    code = (
        "import sys, infer_opt\n"
        "print(','.join(m for m in ('numpy', 'pandas', 'torch', 'scipy', 'matplotlib', 'rich') "
        "if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_exported_name_resolves_and_is_listed():
    assert set(EXPORTS) <= set(infer_opt.__all__)
    for name in EXPORTS:
        assert getattr(infer_opt, name) is not None
        assert name in dir(infer_opt)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        infer_opt.nosuch  # noqa: B018


def test_amdahl_worked_example():
    result = infer_opt.amdahl(0.4, 4)
    assert result.speedup == pytest.approx(1 / 0.7)
    frame = result.to_frame()
    assert list(frame["name"]) == ["part", "untouched", "total"]
    assert frame["speedup"].iloc[0] == 4.0


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_has_a_frame_of_its_main_table(kind):
    result = fixture(kind)
    frame = result.to_frame()
    tables = build_view(result).tables
    if tables:
        main = KINDS[kind].frame  # the table the kind names, else its first
        first = next((t for t in tables if t.title == main), tables[0])
        assert list(frame.columns)[-len(first.columns) :] == [c.csv_header or c.key for c in first.columns]
        assert len(frame) >= len(first.rows)
    assert len(frame) > 0


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_markdown_repr_is_the_markdown_report(kind):
    result = fixture(kind)
    assert result._repr_markdown_() == render(result, "markdown")


def test_another_table_by_title_or_position():
    result = fixture("profile")
    titles = [t.title for t in build_view(result).tables]
    assert len(result.to_frame(titles[1])) == len(result.to_frame(1))
    with pytest.raises(InvalidInput, match="table"):
        result.to_frame("no such table")


def test_buckets_from_a_list_and_from_a_file(tmp_path):
    result = infer_opt.buckets([12, 40, 57, 100], [64, 128])
    assert result.to_frame()["count"].tolist() == [3, 1]
    path = tmp_path / "lengths.txt"
    path.write_text("12\n40\n57\n100\n")
    assert infer_opt.buckets(path, [64, 128]).to_frame()["count"].tolist() == [3, 1]
    with pytest.raises(InvalidInput, match="bounds"):
        infer_opt.buckets([1, 2])


def test_amortize_buckets_and_load_round_trip(tmp_path):
    from infer_opt.results import save_result
    from tests.reports.fixtures import AMORTIZE_CSV

    csv_path = tmp_path / "b.csv"
    csv_path.write_text(AMORTIZE_CSV)
    result = infer_opt.amortize_buckets(csv_path)
    save_result(tmp_path / "r.json", result)
    assert infer_opt.load(tmp_path / "r.json") == result


def test_profile_and_fit_from_python(tmp_path):
    from infer_opt.results import save_result

    result = infer_opt.profile("tiny", seq_len=16, warmup=0, reps=2, device="cpu", roofline=False)
    frame = result.to_frame()
    assert {"name", "time_s", "share"} <= set(frame.columns)
    with pytest.raises(InvalidInput, match="roofline"):  # a fit made elsewhere is refused
        infer_opt.profile(
            "tiny", seq_len=16, device="cpu", roofline=save_result(tmp_path / "f.json", fixture("roofline"))
        )
    fit = infer_opt.fit_roofline(save_result(tmp_path / "k.json", fixture("kernels")), bootstrap=0)
    assert len(fit.to_frame()) == len(fit.kernels)
