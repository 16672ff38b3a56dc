"""Bad input over every command, table-driven: each option's own type is handed values it
must refuse (empty, not a number, NaN, out of range, overflowing, empty list items, unusable
paths), and a list of cases that reach the core (files holding NaN or 1e308, numbers whose
results overflow). Every one must give one ``Error:`` line naming the option, exit 2, no
traceback, no hang, and never a number like ``inf%`` or ``nan×``."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from infer_opt.cli.app import COMMANDS, _load_command
from infer_opt.cli.types import (
    Choice,
    Count,
    CountList,
    Duration,
    Fraction,
    InputFile,
    Number,
    NumberList,
    OutputFile,
)
from tests.helpers import Run, invoke

#: values no option type accepts
ALWAYS_BAD = ["", "abc", "nan", "1e400", "9" * 400]
#: the arguments each leaf command needs to get as far as parsing its options
BASES: dict[tuple[str, ...], list[str]] = {
    ("profile",): [],
    ("kernels",): [],
    ("roofline",): ["{points}"],
    ("amdahl",): ["-f", "0.4", "-s", "4"],
    ("amortize",): ["--compile-cost", "3s", "--eager", "2ms", "--compiled", "1.5ms"],
    ("amortize", "measure"): [],
    ("buckets",): ["{lengths}", "--bounds", "128,1024"],
    ("speculative", "speedup"): ["--k", "3", "--alpha", "0.8", "--target-cost", "10", "--draft-cost", "1"],
    ("speculative", "acceptance"): ["--p", "0.5,0.5", "--q", "0.5,0.5"],
    ("speculative", "plans"): ["{plans}"],
    ("speculative", "from-metrics"): ["--drafts", "10", "--accepted-per-position", "8,5"],
    ("speculative", "measure"): [],
    ("speculative", "verify"): [],
    ("attention", "memory"): ["--tq", "8", "--tk", "8", "--heads", "2", "--head-dim", "4"],
    ("attention", "window"): ["--dropped-mass", "0.1", "--value-norm", "1"],
    ("attention", "check"): [],
    ("speculative", "run"): ["--target", "tiny"],
    ("report",): ["{result}"],
    ("compare",): ["{result}", "{result}"],
    ("ab",): ["--base", "infer-opt kernels --only tiny_add", "--new", "infer-opt kernels --only tiny_add"],
    ("comm",): [],
    ("calibrate",): [],
    ("predict",): [],
    ("validate",): [],
    ("trace",): ["{trace}"],
    ("tune", "capture-sizes"): [
        *("--batches", "{t_batches}", "--cost-file", "{t_cost}", "--eager-overhead", "1ms"),
    ],
    ("tune", "speculative"): [
        *("--alphas", "0.8", "--target-cost-file", "{t_cost}", "--draft-cost-file", "{t_cost}"),
        *("--batch-sizes", "1,8"),
    ],
}
#: options whose parsing needs no type (free text handled in the body) or that run work
SKIP = {"--help", "--install-completion", "--show-completion", "--hf-config", "--device", "--dtype"}


class Hang(Exception):
    pass


def _alarm(*_: object) -> None:
    raise Hang


def run_with_timeout(argv: list[str], seconds: int = 20) -> Run:
    """``invoke`` with an alarm: a bad value must be refused long before any work starts."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        return invoke(*argv)
    except Hang:
        pytest.fail(f"hung: infer-opt {' '.join(argv)}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def assert_clean_refusal(run: Run, flag: str | None) -> None:
    assert run.exit_code == 2, (run.exit_code, run.stdout[-500:], run.stderr[-500:])
    assert run.stdout == "", run.stdout[:300]
    assert not run.stderr.startswith("\n"), "the error starts with a blank line"
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), run.stderr[-800:]
    assert "Traceback" not in run.stderr
    assert len(lines[0]) < 400, lines[0]
    for shown in ("inf%", "nan%", "nan×", "inf×"):
        assert shown not in lines[0]
    if flag is not None:
        assert flag in lines[0], (flag, lines[0])


def _bad_values(param: object, paths: dict[str, str]) -> list[str]:
    kind = param.type  # type: ignore[attr-defined]
    values: list[str] = []
    if isinstance(kind, (Count, CountList)):
        values += [*ALWAYS_BAD, "2.5"]
        if kind.low is not None:
            values.append(str(kind.low - 1))
        if kind.high is not None:
            values += [str(kind.high + 1), "1e308"]
    elif isinstance(kind, (Number, NumberList)):
        values += ALWAYS_BAD
        bounds = kind.bounds
        if bounds.get("low") is not None:
            values.append(f"{bounds['low'] - 1:g}")
        if bounds.get("high") is not None:
            values.append(f"{bounds['high'] + 1:g}")
    elif isinstance(kind, Duration):
        values += [*ALWAYS_BAD, "-1", "3parsecs", "inf"]
    elif isinstance(kind, Fraction):
        values += ALWAYS_BAD + ["-1%"] + (["5"] if (kind.high or 0) <= 1 else [])
    elif isinstance(kind, Choice):
        values += ["", "nosuch"]
    elif isinstance(kind, InputFile):
        values += ["", paths["missing"], paths["folder"], "x" * 300]
    elif isinstance(kind, OutputFile):
        values += ["", " ", paths["folder"], "/proc/x/y.json", paths["under_file"], paths["missing_parent"]]
    if isinstance(kind, (NumberList, CountList)):
        values += ["1,,2", ",", "1,"]
    return values


def _leaves() -> Iterator[tuple[tuple[str, ...], object]]:
    for name in COMMANDS:
        command = _load_command(name)
        subs = getattr(command, "commands", {})
        if (name,) in BASES:
            yield (name,), command
        for sub, leaf in subs.items():
            if (name, sub) in BASES:
                yield (name, sub), leaf


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from infer_opt.cost_models.amdahl import Part, combined
    from infer_opt.results import save_result

    root = tmp_path_factory.mktemp("bad-input")
    (root / "folder").mkdir()
    (root / "a-file").write_text("x")
    lengths = root / "lengths.txt"
    lengths.write_text("12\n40\n100\n")
    plans = root / "plans.csv"
    plans.write_text("plan,time,tokens\nA,10,3\nB,8,2\n")
    points = root / "points.csv"
    points.write_text("name,flops,bytes,time_s\na,1e6,1e3,1e-5\nb,1e3,1e6,1e-5\nc,1,1,1e-6\n")
    result = save_result(root / "amdahl.json", combined([Part("p", 0.4, 4.0)]))
    (root / "t_batches.csv").write_text("batch_size,count\n1,5\n8,3\n")
    (root / "t_cost.csv").write_text("batch_size,time_ms\n1,2\n16,3\n")
    return {
        "folder": str(root / "folder"),
        "missing": str(root / "missing.csv"),
        "under_file": str(root / "a-file" / "out.json"),
        "missing_parent": str(root / "no" / "such" / "out.json"),
        "lengths": str(lengths),
        "plans": str(plans),
        "points": str(points),
        "result": str(result),
        "t_batches": str(root / "t_batches.csv"),
        "t_cost": str(root / "t_cost.csv"),
        "trace": str(Path(__file__).parents[1] / "trace" / "fixtures" / "model_step.json"),
    }


def _cases() -> list[tuple[tuple[str, ...], str, str]]:
    placeholder = {
        "missing": "MISSING",
        "folder": "FOLDER",
        "under_file": "UNDER_FILE",
        "missing_parent": "MISSING_PARENT",
    }
    cases = []
    for path, command in _leaves():
        for param in command.params:
            flags = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
            if not flags or getattr(param, "is_flag", False) or flags[0] in SKIP:
                continue
            for value in _bad_values(param, placeholder):
                cases.append((path, max(flags, key=len), value))
    return cases


CASES = _cases()


def test_the_table_covers_every_command_and_hundreds_of_values():
    covered = {path for path, _, _ in CASES}
    assert covered == set(BASES)
    every = {
        (name, *([sub] if sub else []))
        for name in COMMANDS
        for sub in (list(getattr(_load_command(name), "commands", {})) or [None])
    }
    assert every <= set(BASES), f"add these commands to BASES: {sorted(every - set(BASES))}"
    assert len(CASES) > 300


def _argv(path: tuple[str, ...], paths: dict[str, str], extra: list[str]) -> list[str]:
    base = [a.format(**paths) for a in BASES[path]]
    return [*path, *base, *extra]


def _value(value: str, paths: dict[str, str]) -> str:
    names = {
        "MISSING": "missing",
        "FOLDER": "folder",
        "UNDER_FILE": "under_file",
        "MISSING_PARENT": "missing_parent",
    }
    return paths[names[value]] if value in names else value


@pytest.mark.parametrize(
    ("path", "flag", "value"), CASES, ids=[f"{' '.join(p)} {f}={v[:12]!r}" for p, f, v in CASES]
)
def test_every_option_refuses_bad_values_in_one_line(paths, path, flag, value):
    base = BASES[path]
    if flag in base:  # replace the base's own value
        i = base.index(flag)
        argv = [*path, *[a.format(**paths) for a in base[:i]], flag, _value(value, paths)]
        argv += [a.format(**paths) for a in base[i + 2 :]]
    else:
        argv = _argv(path, paths, [flag, _value(value, paths)])
    assert_clean_refusal(run_with_timeout(argv), flag)


def _listed_options() -> list[tuple[tuple[str, ...], str]]:
    """Every option that takes a comma-separated list once (not repeatable), per command."""
    return [
        (path, max(param.opts, key=len))
        for path, command in _leaves()
        for param in command.params
        if param.param_type_name == "option" and getattr(param.type, "listed", False) and not param.multiple
    ]


LISTED = _listed_options()


def test_the_list_options_are_found():
    flags = {flag for _, flag in LISTED}
    assert {"--bounds", "--alphas", "--batch-sizes", "--calls-per-bucket"} <= flags and len(LISTED) >= 8


@pytest.mark.parametrize(("path", "flag"), LISTED, ids=[f"{' '.join(p)} {f}" for p, f in LISTED])
def test_a_list_option_given_twice_is_refused_not_overwritten(paths, path, flag):
    """``--bounds 128,256 --bounds 512`` would keep 512 alone: one line naming both, exit 2."""
    base = BASES[path]
    if flag in base:  # the base's own list goes
        i = base.index(flag)
        base = base[:i] + base[i + 2 :]
    argv = [*path, *[a.format(**paths) for a in base], flag, "1,2", f"{flag}=3"]
    run = run_with_timeout(argv)
    assert_clean_refusal(run, flag)
    assert "given more than once" in run.stderr and f"(got '{flag} 1,2 {flag}=3')" in run.stderr


def test_choice_errors_list_the_choices(paths):
    run = invoke("buckets", paths["lengths"], "--optimize", "2", "--cost", "cubic")
    assert_clean_refusal(run, "--cost")
    assert "linear" in run.stderr and "quadratic" in run.stderr


def _write(root: Path, name: str, text: str) -> str:
    path = root / name
    path.write_text(text)
    return str(path)


#: a factory that takes no shape: a grid or sweep over one would measure one step
FIXED_FACTORY = """
import torch
from infer_opt.profilers import models


def make():
    config = models.TransformerConfig("mini", 256, 32, 1, 2, 2, 64, 64)
    return models.DecoderLM(config).eval(), torch.zeros(1, 4, dtype=torch.long)
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bad-files")
    out = {}
    bucket_header = "bucket,compile_s,calls,saving_ms\n"
    for name, text in {
        "b_nan": bucket_header + "a,nan,1,1\n",
        "b_inf": bucket_header + "a,1,inf,1\n",
        "b_big": bucket_header + "a,1e308,1e308,1e308\n",
        "b_hugeint": bucket_header + "a,1," + "9" * 400 + ",1\n",
        "b_wide": bucket_header + "a,1,1,1,5\n",
        "l_nan": "1\nnan\n",
        "l_big": "1\n1e308\n",
        "l_csvnan": "length,count\n1,nan\n",
        "p_nan": "plan,time,tokens\na,nan,1\n",
        "p_inf": "plan,time,tokens\na,inf,1\n",
        "p_tiny": "plan,time_ms,tokens\na,-1,1\n",
        "m_nan": '{"drafts": NaN, "accepted_per_position": [1]}',
        "m_inf": '{"drafts": 10, "accepted_per_position": [Infinity]}',
        "m_deep": "[" * 100_000 + "]" * 100_000,
        "m_bigint": '{"drafts": ' + "9" * 5000 + ', "accepted_per_position": [1]}',
        "r_nan": "name,flops,bytes,time_s\na,1,1,nan\nb,1,1,1\nc,1,1,1\n",
        "r_tiny": "name,flops,bytes,time_s\na,1,1,5e-324\nb,1,1,1\nc,1,1,1\n",
        "v_big": "1e308,1e308",
        "res_nan": '{"schema": "infer-opt/amdahl", "version": 1, "result": {"added": NaN}}',
        "tc_nan": "batch_size,time_ms\n1,nan\n8,2\n",
        "tc_big": "batch_size,time_ms\n1,1e300\n8,2\n",
        "tb_zero": "batch_size,count\n1,0\n8,0\n",
        "tb_ok": "batch_size,count\n1,3\n8,2\n",
        "f_fixed": FIXED_FACTORY,
    }.items():
        suffix = ".json" if name.startswith(("m_", "res_")) else ".py" if name.startswith("f_") else ".csv"
        out[name] = _write(root, name + suffix, text)
    out.update(_saved_files(root))
    return out


def _mutated(result: object, root: Path, name: str, *changes: tuple[tuple[str | int, ...], object]) -> str:
    """``result`` saved with each ``(path, value)`` of ``changes`` set in its JSON."""
    import json

    from infer_opt.results import dumps

    data = json.loads(dumps(result))
    for where, value in changes:
        target = data["result"]
        for part in where[:-1]:
            target = target[part]
        target[where[-1]] = value
    return _write(root, name + ".json", json.dumps(data))


def _saved_files(root: Path) -> dict[str, str]:
    """Saved results whose every field has its type but not a value the kind allows."""
    from tests.profilers.synthetic_calibration import synthetic_calibration
    from tests.reports.fixtures import fixture

    cal = synthetic_calibration(families=True)
    profile, comm = fixture("profile"), fixture("comm")
    return {
        "c_ok": _mutated(cal, root, "c_ok"),
        "c_families_null": _mutated(cal, root, "c_families_null", (("families",), None)),
        "c_features": _mutated(cal, root, "c_features", (("families", 0, "points", 0, "features"), [1, 2])),
        "c_no_points": _mutated(cal, root, "c_no_points", (("families", 0, "points"), [])),
        "c_r_zero": _mutated(cal, root, "c_r_zero", (("roofline", "compute_rate_flops"), 0)),
        "c_threads_two": _mutated(cal, root, "c_threads_two", (("threads",), "two")),
        "c_threads_zero": _mutated(cal, root, "c_threads_zero", (("threads",), 0)),
        "c_tpu": _mutated(cal, root, "c_tpu", (("device",), "tpu")),
        "c_host_neg": _mutated(cal, root, "c_host_neg", (("host", "per_op_s"), -1e-6)),
        "p_ok": _mutated(profile, root, "p_ok"),
        "p_ops_null": _mutated(profile, root, "p_ops_null", (("ops",), None)),
        "p_step_null": _mutated(profile, root, "p_step_null", (("step",), None)),
        "p_median_zero": _mutated(profile, root, "p_median_zero", (("step", "run_medians_s"), [0.0, 0.002])),
        "p_median_neg": _mutated(profile, root, "p_median_neg", (("step", "median_s"), -0.001)),
        "s_alpha_neg": _mutated(comm, root, "s_alpha_neg", (("collectives", 0, "alpha_s"), -4.0)),
        "s_alpha_big": _mutated(comm, root, "s_alpha_big", (("collectives", 0, "alpha_s"), 1e308)),
        "s_beta_big": _mutated(comm, root, "s_beta_big", (("collectives", 1, "beta_bytes_per_s"), 1e300)),
        "s_nccl": _mutated(comm, root, "s_nccl", (("device",), "cuda:0"), (("backend",), "nccl")),
    }


#: a small Llama's --hf-config (4 heads of 24)
HF_LLAMA = [
    *("--hf-config", "hidden_size=96", "--hf-config", "num_attention_heads=4"),
    *("--hf-config", "num_hidden_layers=1", "--hf-config", "intermediate_size=64"),
]

CORE_CASES = [
    (["amortize", "--buckets", "{b_nan}"], "line 2, column compile_s"),
    (["amortize", "--buckets", "{b_inf}"], "line 2, column calls"),
    (["amortize", "--buckets", "{b_big}"], "line 2, column compile_s: must be within"),  # issue 42
    (["amortize", "--buckets", "{b_hugeint}"], "line 2, column calls"),
    (["amortize", "--buckets", "{b_wide}"], "line 2"),
    (["buckets", "{l_nan}", "--bounds", "8"], "line 2"),
    (["buckets", "{l_big}", "--bounds", "8"], "line 2"),
    (["buckets", "{l_csvnan}", "--bounds", "8"], "line 2, column count"),
    (["speculative", "plans", "{p_nan}"], "line 2, column time"),
    (["speculative", "plans", "{p_inf}"], "line 2, column time"),
    (["speculative", "plans", "{p_tiny}"], "line 2, column time_ms"),
    (["speculative", "from-metrics", "--file", "{m_nan}"], "drafts"),
    (["speculative", "from-metrics", "--file", "{m_inf}"], "accepted_per_position[0]"),
    (["speculative", "from-metrics", "--file", "{m_deep}"], "nested too deeply"),
    (["speculative", "from-metrics", "--file", "{m_bigint}"], "digits"),
    (["roofline", "{r_nan}", "--no-save"], "line 2, column time_s"),
    (["roofline", "{r_tiny}", "--no-save"], "line 2, column time_s"),
    (["speculative", "acceptance", "--p-file", "{v_big}", "--q", "0.5,0.5", "--normalize"], "--p-file"),
    (["compare", "{res_nan}", "{res_nan}"], "NaN"),
    (
        ["tune", "capture-sizes", "--batches", "{tb_ok}", "--cost-file", "{tc_nan}", "--eager-overhead", "1"],
        "line 2",
    ),
    (
        [
            "tune",
            "capture-sizes",
            "--batches",
            "{tb_zero}",
            "--cost-file",
            "{tc_big}",
            "--eager-overhead",
            "1",
        ],
        "no decode",
    ),
    (["amortize", "--compile-cost", "1e308", "--eager", "2", "--compiled", "1"], "--compile-cost"),
    (["amortize", "--compile-cost", "3e300", "--eager", "1e-300", "--compiled", "0"], "--compile-cost"),
    (["amdahl", "-f", "0.4", "-s", "1e-320"], "--speedup"),
    (["amdahl", "-f", "0.4", "-s", "1" + "0" * 400], "--speedup"),
    (
        [
            "attention",
            "memory",
            "--tq",
            "8",
            "--tk",
            "8",
            "--heads",
            "2",
            "--head-dim",
            "4",
            "--dtype",
            "1e308",
        ],
        "--dtype",
    ),
    (["attention", "window", "--dropped-mass", "0.9", "--value-norm", "1e308"], "--value-norm"),
    (
        [
            "speculative",
            "speedup",
            "--k",
            "3",
            "--alpha",
            "1",
            "--target-cost",
            "1e308",
            "--draft-cost",
            "1e-308",
            "--verify-cost",
            "1e-308",
        ],
        "--target-cost",
    ),
    (["speculative", "acceptance", "--p", "1e308,1e308", "--q", "0.5,0.5", "--normalize"], "--p"),
    (
        [
            "speculative",
            "acceptance",
            "--p",
            "1e308,1",
            "--q",
            "0,1",
            "--logits",
            "--p-temperature",
            "1e-308",
        ],
        "--p",
    ),
    (
        ["speculative", "speedup", "--k", "1e6", "--alpha", "0.5", "--target-cost", "1", "--draft-cost", "1"],
        "--k",
    ),
    (
        ["speculative", "speedup", "--alphas", "0.5,,0.3", "--target-cost", "1", "--draft-cost", "1"],
        "--alphas",
    ),
    (["buckets", "{l_nan}", "--bounds", "128,,256"], "--bounds"),
    (
        ["speculative", "from-metrics", "--drafts", "10", "--accepted-per-position", "8,,4"],
        "--accepted-per-position",
    ),
    (["kernels", "--only", ""], "--only"),
    (["kernels", "--warmup", "1e308"], "--warmup"),
    (["profile", "--warmup", "1e308"], "--warmup"),
    (["compare", "{res_nan}", "{res_nan}", "--threshold", "5"], "--threshold"),
    (["amortize", "measure", "--bounds", "10000000"], "--bounds"),
    (["roofline", "{r_nan}", "--fit-on", "a,,b", "--no-save"], "line 2"),
    (["amdahl", "-f", "0.4", "-s", "0.5", "--json", "--markdown", "-"], "--markdown"),
    (["amdahl", "-f", "0.4", "-s", "0.5", "--csv", "-", "--markdown", "-"], "--markdown"),
    # saved files validated whole when read: the option, the file, the field, what is allowed
    (["predict", "--calibration", "{c_families_null}"], "c_families_null.json field families: must be"),
    (["predict", "--calibration", "{c_features}"], "field families[0].points[0].features: must hold 3"),
    (["predict", "--calibration", "{c_no_points}"], "field families[0].points: must hold at least one"),
    (["predict", "--calibration", "{c_r_zero}"], "field roofline.compute_rate_flops: must be > 0"),
    (["predict", "--calibration", "{c_threads_two}"], 'field threads: must be an integer (got "two")'),
    (["predict", "--calibration", "{c_threads_zero}"], "field threads: must be an integer >= 1"),
    (["predict", "--calibration", "{c_tpu}"], 'field device: must be cpu, cuda or cuda:N (got "tpu")'),
    (["predict", "--calibration", "{c_host_neg}"], "c_host_neg.json field host.per_op_s: must be a finite"),
    (["validate", "--calibration", "{c_families_null}"], "--calibration: "),
    (["compare", "{p_ok}", "{p_ops_null}"], "p_ops_null.json: field ops: must be a list, not null"),
    (["compare", "{p_step_null}", "{p_ok}"], "p_step_null.json: field step: must be an object"),
    (["compare", "{p_ok}", "{p_median_zero}"], "field step.run_medians_s[0]: must be a finite number > 0"),
    (["compare", "{p_ok}", "{p_median_neg}"], "field step.median_s: must be a finite number > 0"),
    (["report", "{p_ops_null}"], "p_ops_null.json: field ops"),
    (["report", "{p_median_zero}", "{p_ok}"], "p_median_zero.json: field step.run_medians_s[0]"),
    (["report", "{c_families_null}"], "field families"),
    (
        ["predict", "--calibration", "{c_ok}", "--tp", "2", "--comm", "{s_alpha_neg}"],
        "--comm: ",  # α < 0 gave "communication −4 s"
    ),
    (["report", "{s_alpha_neg}"], "field collectives[0].alpha_s: must be a finite number >= 0"),
    (["report", "{s_alpha_big}"], "field collectives[0].alpha_s: must be at most twice"),
    (["report", "{s_beta_big}"], "field collectives[1].beta_bytes_per_s: must be within"),
    (
        ["predict", "--calibration", "{c_ok}", "--tp", "2", "--comm", "{s_alpha_big}"],
        "alpha_s: must be at most twice the sweep's smallest time",
    ),
    (
        ["predict", "--calibration", "{c_ok}", "--tp", "2", "--comm", "{s_nccl}"],
        "--comm: the sweep was measured on cuda; this prediction is for cpu",
    ),
    # --hf-config: what cannot be meant, refused before any model is built or measured
    (["predict", "hf:gpt2", "--calibration", "{c_ok}", "--hf-config", "n_layers=2"], "did you mean n_layer"),
    (["predict", "hf:gpt2", "--calibration", "{c_ok}", "--hf-config", "n_layer=-1"], "n_layer must be in [1"),
    (["predict", "hf:gpt2", "--calibration", "{c_ok}", "--hf-config", "vocab_size=0"], "vocab_size must be"),
    (["predict", "hf:gpt2", "--calibration", "{c_ok}", "--hf-config", "n_embd=1e9"], "n_embd must be"),
    (
        ["predict", "hf:gpt2", "--calibration", "{c_ok}", "--hf-config", "num_hidden_layers=100000"],
        "num_hidden_layers must be in [1, 1024]",
    ),
    (
        ["predict", "hf:gpt2", "--calibration={c_ok}", "--hf-config", "n_layer=2", "--hf-config=n_layer=3"],
        "n_layer is given twice",
    ),
    (
        ["predict", "hf:llama", "--calibration", "{c_ok}", *HF_LLAMA, "--hf-config", "num_key_value_heads=3"],
        "num_attention_heads (4) must be a multiple of num_key_value_heads (3)",
    ),
    (["profile", "hf:gpt2", "--hf-config", "n_layers=2"], "--hf-config: hf:gpt2's config has no key"),
    (["profile", "hf:llama", *HF_LLAMA, "--hf-config", "num_key_value_heads=3"], "--hf-config: "),
    (["validate", "hf:gpt2", "--calibration", "{c_ok}", "--hf-config", "n_head=0"], "--hf-config: n_head"),
    # options that would be accepted and ignored are refused before any work
    (["predict", "--calibration", "{c_ok}", "--comm", "{s_nccl}"], "--comm: prices the collectives of --tp"),
    (["predict", "--calibration", "{c_ok}", "--threads", "2"], "--threads"),
    (["calibrate", "--only", ""], "--only: an empty group name"),
    (["calibrate", "--only", "views,,host"], "--only: an empty group name"),
    (["speculative", "run", "--target", "tiny", "--sweep-k", "3,2"], "--sweep-k: list each value once"),
    (["speculative", "run", "--target", "tiny", "--sweep-k", "2,2"], "in increasing order"),
    (["validate", "{f_fixed}:make", "--calibration", "{c_ok}", "--grid", "seq-len=16,32"], "no seq_len"),
    (["validate", "{f_fixed}:make", "--calibration", "{c_ok}", "--grid", "batch=1,2"], "takes no batch_size"),
    (["predict", "{f_fixed}:make", "--calibration", "{c_ok}", "--sweep", "seq-len=8,16"], "takes no seq_len"),
    # ab: a side whose result cannot be compared is refused before either runs
    (["ab", "--base", "infer-opt calibrate --shapes tiny", "--new", "infer-opt calibrate"], "--base: ab"),
    (["ab", "--base", "infer-opt kernels", "--new", "infer-opt roofline"], "--new: ab compares"),
    (["ab", "--base", "infer-opt profile --tp 2", "--new", "infer-opt profile"], "profile --tp 2 gives none"),
]


@pytest.mark.parametrize(("argv", "needle"), CORE_CASES, ids=[" ".join(a)[:60] for a, _ in CORE_CASES])
def test_bad_input_reaching_the_core_is_one_line(files, argv, needle):
    run = run_with_timeout([a.format(**files) for a in argv], seconds=60)
    assert_clean_refusal(run, None)
    assert needle in run.stderr, (needle, run.stderr)


def test_debug_adds_the_traceback_and_keeps_exit_code_2():
    run = invoke("--debug", "amortize", "--compile-cost", "1e308", "--eager", "2", "--compiled", "1")
    assert run.exit_code == 2
    assert "Traceback" in run.stderr and run.stderr.rstrip().splitlines()[-1].startswith("Error: ")


def test_a_fast_command_never_hangs_on_huge_sizes():
    for argv in (
        ["speculative", "speedup", "--k", "1024", "--alpha", "1", "--target-cost", "1", "--draft-cost", "1",
         "--k-max", "1024"],
        ["speculative", "verify", "--vocab", "4", "--k", "3", "--trials", "1000"],
    ):  # fmt: skip
        run = run_with_timeout(argv, seconds=60)
        assert run.exit_code == 0, run.stderr


@pytest.mark.skipif(os.name != "posix", reason="needs /proc")
def test_the_error_section_of_the_readme_is_true():
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    assert "Error: --fraction: must be in [0, 1] (got '1.4')" in readme
    run = invoke("amdahl", "--fraction", "1.4", "--speedup", "2")
    assert run.stderr.strip() == "Error: --fraction: must be in [0, 1] (got '1.4')"


def test_the_readme_file_error_example_is_what_a_file_gives(tmp_path):
    log = tmp_path / "rounds.csv"
    log.write_text("plan,time_ms,tokens\n" + "a,10,3\n" * 5 + "a,-3,2\n")
    run = invoke("speculative", "plans", str(log))
    assert run.stderr.strip() == f"Error: {log} line 7, column time_ms: must be > 0 (got '-3')"
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    assert "Error: rounds.csv line 7, column time_ms: must be > 0 (got '-3')" in readme


def test_an_allocation_failure_is_one_line_exit_1(monkeypatch):
    import numpy as np

    def huge(*_args, **_kwargs):
        return np.empty(2**50)  # 8 PiB: numpy refuses at once

    monkeypatch.setattr("infer_opt.cost_models.amdahl.combined", huge)
    run = invoke("amdahl", "-f", "0.4", "-s", "4")
    assert run.exit_code == 1
    line = run.stderr.strip()
    assert line.startswith("Error: out of memory (tried to allocate 8.00 PiB)") and "kept" in line
    assert "\n" not in line and "Traceback" not in line
