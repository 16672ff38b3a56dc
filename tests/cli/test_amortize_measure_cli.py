from __future__ import annotations

import pytest

from infer_opt.cli import amortize_measure
from infer_opt.results import load_result
from tests.helpers import assert_one_line_error, invoke

FAST = ("--device", "cpu", "--reps", "2", "--warmup", "0")


class IdentityCompiler:
    """Stands in for torch.compile (a real inductor compile takes tens of seconds here):
    returns the model itself, remembering which sequence lengths it 'compiled', and fails
    for the lengths in ``fail_for``."""

    def __init__(self, fail_for=()):
        self.fail_for = set(fail_for)
        self.seen: list[tuple[int, ...]] = []

    def __call__(self, model, *, dynamic, backend):
        def run(*args, **kwargs):
            shape = tuple(args[0].shape) if args else ()
            if len(shape) == 2 and shape[1] in self.fail_for:
                raise RuntimeError(f"no kernel for T={shape[1]}")
            return model(*args, **kwargs)

        return run


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def compiler(monkeypatch):
    fake = IdentityCompiler()
    monkeypatch.setattr(amortize_measure, "compile_fn", lambda: fake)
    return fake


def _measure(*args: str):
    return invoke("amortize", "measure", *FAST, *args)


def test_subcommand_dispatches_and_json_has_the_documented_keys(compiler):
    run = _measure("--bounds", "8,16", "--calls-per-bucket", "1000,10", "--json")
    assert run.exit_code == 0, run.stderr
    data = run.json()
    assert data["schema"] == "infer-opt/amortize-measure"
    result = data["result"]
    assert "total_net_gain_s" in result
    keys = {
        "bucket",
        "compile_s",
        "eager_s",
        "compiled_s",
        "calls",
        "break_even_calls",
        "net_gain_s",
        "compile",
    }
    assert [b["bucket"] for b in result["buckets"]] == ["1x8", "1x16"]
    for bucket in result["buckets"]:
        assert keys <= set(bucket)
        assert bucket["eager_s"] > 0 and bucket["compiled_s"] > 0 and bucket["compile_s"] >= 0
    assert [b["calls"] for b in result["buckets"]] == [1000, 10]
    assert result["compiler_startup_s"] is not None and result["pending"] == []


def test_the_group_calculator_still_works_beside_the_subcommand():
    run = invoke("amortize", "--compile-cost", "3s", "--eager", "2ms", "--compiled", "1.5ms", "--json")
    assert run.exit_code == 0, run.stderr
    assert run.json()["result"]["break_even_calls"] == 6000


def test_table_output_without_calls_gives_break_even_only(compiler):
    run = _measure("--bounds", "8")
    assert run.exit_code == 0, run.stderr
    assert "Compile amortization from measurements: tiny" in run.stdout
    assert "not reported on this device" in run.stdout
    assert "break-even number of calls" in run.stdout


def test_a_failing_bucket_is_reported_and_the_sweep_continues(monkeypatch):
    fake = IdentityCompiler(fail_for={16})
    monkeypatch.setattr(amortize_measure, "compile_fn", lambda: fake)
    run = _measure("--bounds", "8,16,32", "--calls-per-bucket", "1e6,1e6,1e6", "--json")
    assert run.exit_code == 0, run.stderr
    rows = {b["bucket"]: b for b in run.json()["result"]["buckets"]}
    assert rows["1x16"]["compile"] is False and "RuntimeError: no kernel for T=16" in rows["1x16"]["error"]
    assert rows["1x16"]["compile_s"] is None and rows["1x16"]["net_gain_s"] == 0
    assert rows["1x8"]["compiled_s"] > 0 and rows["1x32"]["compiled_s"] > 0
    assert run.json()["result"]["failed_count"] == 1


def test_results_are_saved_and_resume_skips_measured_buckets(compiler, tmp_path):
    path = tmp_path / "sweep.json"
    first = _measure("--bounds", "8", "--out", str(path))
    assert first.exit_code == 0, first.stderr
    before = load_result(path).result
    assert [b.bucket for b in before.buckets] == ["1x8"]

    second = _measure("--bounds", "8,16", "--resume", str(path), "--calls-per-bucket", "5,5")
    assert second.exit_code == 0, second.stderr
    assert "1 of 2 bucket(s) already measured" in second.stderr
    after = load_result(path).result
    assert [b.bucket for b in after.buckets] == ["1x8", "1x16"]
    assert after.buckets[0].eager == before.buckets[0].eager  # kept, not remeasured
    assert [b.calls for b in after.buckets] == [5, 5]


def test_resume_file_of_another_model_is_refused(compiler, tmp_path):
    path = tmp_path / "sweep.json"
    assert _measure("--bounds", "8", "--out", str(path)).exit_code == 0
    run = invoke("amortize", "measure", "llama-tiny", *FAST, "--bounds", "8,16", "--resume", str(path))
    assert_one_line_error(run, "--resume", "tiny", "llama-tiny")


def test_resume_file_of_another_kind_is_refused(tmp_path):
    path = tmp_path / "other.json"
    assert (
        invoke(
            "amortize", "--compile-cost", "3s", "--eager", "2", "--compiled", "1", "-o", str(path)
        ).exit_code
        == 0
    )
    assert_one_line_error(_measure("--resume", str(path)), "--resume", "expected an amortize measure result")


def test_lengths_give_the_calls(compiler, tmp_path):
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("\n".join(["5", "7", "8", "12"]))
    run = _measure("--bounds", "8,16", "--lengths", str(lengths), "--requests", "400", "--json")
    assert run.exit_code == 0, run.stderr
    result = run.json()["result"]
    assert [b["calls"] for b in result["buckets"]] == [300, 100]
    assert result["calls_source"].startswith("lengths.txt (4 lengths, scaled to 400 requests")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--calls-per-bucket", "1,2,3"), ("--calls-per-bucket", "one call count per bucket")),
        (("--bounds", "64,32"), ("--bounds", "strictly increasing")),
        (("--batch-sizes", "0"), ("--batch-sizes",)),
        (("--backend", "tvm"), ("--backend", "inductor")),
        (("--cuda-graphs",), ("--cuda-graphs", "CUDA device")),
        (("--requests", "10"), ("--requests", "--lengths")),
        (("--batch-sizes", "1,2", "--lengths", __file__), ("--lengths", "one --batch-sizes")),
        (("--resume", "missing.json"), ("--resume", "does not exist")),
    ],
)
def test_bad_input_is_one_line_exit_2(compiler, args, needles):
    assert_one_line_error(_measure(*args), *needles)


def test_unknown_model_is_one_line_exit_2(compiler):
    assert_one_line_error(invoke("amortize", "measure", "nope", *FAST), "MODEL", "unknown built-in model")
