from __future__ import annotations

import json
import math

import pytest

from infer_opt.cost_models.amdahl import Part, combined
from infer_opt.errors import InvalidInput
from infer_opt.results import envelope, load_result, parse_envelope, save_result


def test_envelope_round_trip_keeps_infinity(tmp_path):
    result = combined([Part("p", 1.0, math.inf)])
    path = save_result(tmp_path / "r.json", result)
    raw = json.loads(path.read_text())  # strict JSON: no Infinity literals
    assert raw["schema"] == "infer-opt/amdahl" and raw["version"] == 1
    assert raw["result"]["speedup"] == "inf"
    loaded = load_result(path)
    assert loaded.result == result


def test_refuses_unknown_major_version():
    data = envelope(combined([Part("p", 0.5, 2.0)]))
    data["version"] = 99
    with pytest.raises(InvalidInput, match="unsupported schema version"):
        parse_envelope(data)


def test_refuses_non_infer_opt_json(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(InvalidInput, match="not an infer-opt result"):
        load_result(path)


def test_tolerates_missing_optional_keys():
    data = envelope(combined([Part("p", 0.5, 2.0)]))
    del data["result"]["target"], data["result"]["reason"]
    assert parse_envelope(data).result.target is None


def test_a_warning_saved_as_words_by_an_older_version_loads_as_a_legacy_notice():
    from infer_opt.messages import text
    from infer_opt.notices import Notice
    from infer_opt.results import parse_envelope

    row = {"name": "add", "family": "elementwise", "label": "1k", "size": 1e3, "dtype": "float32",
           "flops": 1e3, "bytes": 1.2e4, "warnings": ["high variance (IQR/median 16%)"]}  # fmt: skip
    data = {"schema": "infer-opt/kernels", "version": 1, "result": {
        "device": "cpu", "device_name": "cpu", "device_key": "cpu", "dtype": "float32", "suite": "quick",
        "settings": {}, "rows": [row]}}  # fmt: skip
    (loaded,) = parse_envelope(data).result.rows
    assert loaded.warnings == (Notice("legacy_text", {"text": "high variance (IQR/median 16%)"}),)
    assert text(loaded.warnings[0]) == "high variance (IQR/median 16%)"


def test_the_saved_command_is_quoted_as_a_shell_takes_it_back(monkeypatch):
    """``ab --base 'infer-opt kernels --only tiny_add'`` lost its quotes: the report's
    "commands that produced these results" did not reproduce them (issue 33, class 7)."""
    import shlex

    from infer_opt.results import base as results

    argv = ["/usr/bin/infer-opt", "ab", "--base", "infer-opt kernels --only tiny_add", "--new", "x y"]
    monkeypatch.setattr(results.sys, "argv", argv)
    monkeypatch.delenv(results.COMMAND_ENV, raising=False)
    line = results._command_line()
    assert shlex.split(line) == ["infer-opt", *argv[1:]]


def test_a_rank_saves_its_launchers_command(monkeypatch):
    """A rank of ``comm --nproc 2`` runs without --nproc; its result names the launcher's line."""
    from infer_opt.results import base as results

    monkeypatch.setattr(results.sys, "argv", ["infer-opt", "comm", "--max-size", "1MiB"])
    monkeypatch.setenv(results.COMMAND_ENV, "infer-opt comm --nproc 2 --max-size 1MiB")
    assert results._command_line() == "infer-opt comm --nproc 2 --max-size 1MiB"


def test_load_result_refuses_another_kind_naming_the_option(tmp_path):
    path = save_result(tmp_path / "r.json", combined([Part("p", 0.5, 2.0)]))
    assert load_result(path, expect=("amdahl",), option="--base").kind == "amdahl"
    with pytest.raises(InvalidInput) as err:
        load_result(path, expect=("roofline", "kernels"), option="--roofline")
    assert err.value.option == "--roofline" and err.value.value == str(path)
    assert "holds a 'amdahl' result; expected roofline or kernels" in str(err.value)
    with pytest.raises(InvalidInput, match="expected a roofline fit"):
        load_result(path, expect=("roofline",), option="--roofline", what="a roofline fit")


def test_load_result_says_every_file_problem_under_the_option(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for path, needle in ((bad, "not valid JSON"), (tmp_path / "none.json", "does not exist")):
        with pytest.raises(InvalidInput, match=needle) as err:
            load_result(path, option="--resume")
        assert err.value.option == "--resume" and err.value.value == str(path)
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": "infer-opt/amdahl", "version": 1, "result": {"speedup": "fast"}}')
    with pytest.raises(InvalidInput) as err:
        load_result(broken, option="--resume")
    assert err.value.option == "--resume" and "broken.json field" in str(err.value)


def test_the_environment_names_the_libraries_already_imported_and_imports_none(monkeypatch):
    import sys
    import types

    from infer_opt.results.base import environment_info

    monkeypatch.delitem(sys.modules, "transformers", raising=False)
    assert "transformers" not in environment_info() and "transformers" not in sys.modules
    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(__version__="4.49.0"))
    assert environment_info()["transformers"] == "4.49.0"  # an hf: model is that version's code
