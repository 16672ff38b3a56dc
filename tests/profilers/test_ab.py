"""``infer-opt ab``'s core: alternation order, each side's command and environment, failures
named by side and round, the comparison of the pooled rounds, and the A/A noise floor saved per
device. Commands are faked (a runner that writes result files), so nothing is timed."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

from infer_opt import store
from infer_opt.cost_models import compare_runs
from infer_opt.errors import Interrupted, InvalidInput, RunFailure
from infer_opt.profilers import ab
from infer_opt.requests import AbRequest
from infer_opt.results import load_result
from infer_opt.results.ab import AbResult
from infer_opt.results.compare import NOISE

KERNELS = Path(__file__).parents[1] / "reports" / "fixtures" / "kernels.json"


def kernels_envelope(speed: float = 1.0, drift: float = 1.0, families: tuple[str, ...] = ("matmul",)) -> dict:
    """The kernels fixture as a saved envelope, ``families`` ``speed`` times faster and every
    case ``drift`` times slower (one run's drift)."""
    data = json.loads(KERNELS.read_text(encoding="utf-8"))
    for row in data["rows"]:
        factor = drift / (speed if row["family"] in families else 1.0)
        row["samples_s"] = [v * factor for v in row["samples_s"]]
        row["time_s"] *= factor
        for key in ("median_s", "q1_s", "q3_s", "min_s", "max_s", "mean_s", "iqr_s", "std_s"):
            row["summary"][key] *= factor
    return {"schema": "infer-opt/kernels", "version": 1, "command": "fake", "result": data}


class FakeRunner:
    """Writes a kernels result for each command (``--speed X`` in the command makes the
    matmuls X times faster; run k drifts by ``drifts[k % len(drifts)]``) and records calls."""

    def __init__(self, drifts: tuple[float, ...] = (1.0, 1.03, 0.98)) -> None:
        self.calls: list[tuple[list[str], dict[str, str]]] = []
        self.drifts = drifts
        self.fail_at: int | None = None
        self.write = True

    def __call__(self, argv, env):
        self.calls.append((list(argv), dict(env)))
        if self.fail_at == len(self.calls):
            return (
                3,
                "Traceback (most recent call last):\n  ...\nRuntimeError: CUDA error: device-side assert\n",
            )
        speed = float(argv[argv.index("--speed") + 1]) if "--speed" in argv else 1.0
        drift = self.drifts[(len(self.calls) - 1) // 2 % len(self.drifts)]
        if self.write:
            out = Path(argv[argv.index("--out") + 1])
            out.write_text(json.dumps(kernels_envelope(speed, drift)), encoding="utf-8")
        return 0, ""


def _run(tmp_path, base="infer-opt kernels --only matmul", new="infer-opt kernels --only matmul --speed 2",
         runner=None, rounds=3, **kwargs):  # fmt: skip
    runner = runner or FakeRunner()
    result = ab.run(AbRequest(base=base, new=new, rounds=rounds, dir=tmp_path, **kwargs), runner=runner)
    return result, runner


def test_sides_alternate_with_their_environment_and_an_out_file_each(tmp_path):
    result, runner = _run(tmp_path, new_env=("OMP_NUM_THREADS=1",), rounds=2)
    outs = [argv[argv.index("--out") + 1] for argv, _ in runner.calls]
    assert [Path(o).name for o in outs] == ["base-1.json", "new-1.json", "base-2.json", "new-2.json"]
    argv, env = runner.calls[1]
    assert argv[:3] == [sys.executable, "-m", "infer_opt"] and argv[3:6] == ["kernels", "--only", "matmul"]
    assert env["OMP_NUM_THREADS"] == "1"
    assert runner.calls[0][1].get("OMP_NUM_THREADS") == os.environ.get("OMP_NUM_THREADS")
    assert [(r.side, r.round) for r in result.runs] == [("base", 1), ("new", 1), ("base", 2), ("new", 2)]
    assert result.new_env == ("OMP_NUM_THREADS=1",) and not result.is_aa


def test_rounds_are_pooled_and_a_real_change_is_found(tmp_path):
    result, _ = _run(tmp_path)
    comparison = result.comparison
    assert (comparison.runs_base, comparison.runs_new) == (3, 3)
    rows = {r.key: r for r in comparison.rows}
    assert rows["matmul [n=64]"].verdict == compare_runs.FASTER and rows[
        "matmul [n=64]"
    ].speedup == pytest.approx(2.0)
    assert rows["copy [N=2^16]"].verdict == NOISE and rows["copy [N=2^16]"].runs_base == 3
    assert result.noise_floor is None and result.noise_saved_to is None
    assert AbResult.from_dict(result.to_dict()) == result


def test_an_aa_measures_and_saves_the_noise_floor(tmp_path, monkeypatch):
    monkeypatch.setenv("INFER_OPT_CACHE", str(tmp_path / "cache"))
    same = "infer-opt kernels --suite quick --threads 1"
    result, _ = _run(tmp_path, base=same, new=same)
    assert result.is_aa and result.comparison.headline.verdict == NOISE
    record = result.noise_floor
    assert record.runs == 6 and {g.key for g in record.groups} >= {"matmul", compare_runs.OVERALL}
    # the fake's drift per round (1, 1.03, 0.98) hits both sides alike: that is the run-to-run noise
    logs = [math.log(d) for d in (1.0, 1.0, 1.03, 1.03, 0.98, 0.98)]
    mean = sum(logs) / 6
    sigma = math.sqrt(sum((x - mean) ** 2 for x in logs) / 5)
    matmul = next(g for g in record.groups if g.key == "matmul")
    assert matmul.between_run_cv == pytest.approx(sigma) and matmul.df == 10
    found = store.NOISE["kernels"].load(record.key)
    assert found.result == record and str(found.path) == result.noise_saved_to
    noise = store.noise_for([load_result(result.runs[0].file).result])
    assert noise.source == "measured" and noise.sigma("matmul", 1e-3) == pytest.approx(matmul.between_run_cv)
    assert noise.where == result.noise_saved_to


def test_aa_without_saving(tmp_path, monkeypatch):
    monkeypatch.setenv("INFER_OPT_CACHE", str(tmp_path / "cache"))
    same = "infer-opt kernels"
    result, _ = _run(tmp_path, base=same, new=same, save_floor=False)
    assert result.noise_floor is not None and result.noise_saved_to is None
    assert store.NOISE["kernels"].load(result.noise_floor.key).result is None


def test_a_failing_side_names_the_side_and_round_and_keeps_what_finished(tmp_path):
    runner = FakeRunner()
    runner.fail_at = 4
    with pytest.raises(RunFailure) as err:
        _run(tmp_path, runner=runner)
    text = str(err.value)
    assert text.startswith("the new command failed in round 2: exit status 3")
    assert "RuntimeError: CUDA error: device-side assert" in text
    assert f"kept in {tmp_path} (base-1.json, new-1.json, base-2.json)" in text
    assert (tmp_path / "base-2.json").exists()


def test_a_command_that_writes_nothing_is_named(tmp_path):
    runner = FakeRunner()
    runner.write = False
    with pytest.raises(RunFailure, match=r"the base command failed in round 1: it wrote no result"):
        _run(tmp_path, runner=runner)


def test_a_command_that_cannot_start_is_named(tmp_path):
    with pytest.raises(
        RunFailure, match=r"the base command failed in round 1: cannot start 'no-such-program-x'"
    ):
        _run(tmp_path, base="no-such-program-x --flag", runner=ab.subprocess_runner)


def test_ctrl_c_names_the_folder(tmp_path):
    def interrupted(argv, env):
        raise KeyboardInterrupt

    with pytest.raises(Interrupted, match="interrupted in round 1 \\(base\\): nothing finished"):
        _run(tmp_path, runner=interrupted)


def test_a_corrupt_cached_floor_is_reported_and_moved_aside(tmp_path, monkeypatch):
    monkeypatch.setenv("INFER_OPT_CACHE", str(tmp_path / "cache"))
    same = "infer-opt kernels"
    (tmp_path / "aa").mkdir()
    (tmp_path / "ab").mkdir()
    result, _ = _run(tmp_path / "aa", base=same, new=same, rounds=2)
    path = Path(result.noise_saved_to)
    path.write_text("{not json", encoding="utf-8")
    other, _ = _run(tmp_path / "ab", rounds=2)
    codes = [w.code for w in other.comparison.warnings]
    assert "calibration_cache_corrupt" in codes and other.comparison.noise_source == "default"
    assert path.with_name(path.name + ".corrupt").exists()


@pytest.mark.parametrize(
    ("args", "param"),
    [(("base", "", ()), "base"), (("new", "infer-opt 'unclosed", ()), "new"),
     (("base", "infer-opt kernels", ("NOEQUALS",)), "base_env"), (("new", "x", ("=v",)), "new_env")],
)  # fmt: skip
def test_bad_sides_name_the_parameter(args, param):
    with pytest.raises(InvalidInput) as err:
        ab.side(*args)
    assert err.value.option == param


def test_program_runs_this_infer_opt():
    assert ab.program(["infer-opt", "kernels"]) == [sys.executable, "-m", "infer_opt", "kernels"]
    assert ab.program(["/venv/bin/infer-opt", "kernels"]) == ["/venv/bin/infer-opt", "kernels"]
