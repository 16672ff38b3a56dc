"""Issue 43: a command's CLI options and its API function's parameters are one request's fields
(:mod:`infer_opt.requests`): the same names, the same defaults and the same refusals."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

import infer_opt
from infer_opt import requests
from infer_opt.cli.app import _load_command
from infer_opt.errors import InvalidInput
from tests.helpers import assert_one_line_error, invoke

#: command -> its API function and its request
COMMANDS = {
    "attention check": ("attention_check", requests.AttentionCheckRequest),
    "attention memory": ("attention_memory", requests.AttentionMemoryRequest),
    "attention window": ("window_bound", requests.AttentionWindowRequest),
    "calibrate": ("calibrate", requests.CalibrateRequest),
    "buckets": ("buckets", requests.BucketsRequest),
    "amdahl": ("amdahl", requests.AmdahlRequest),
    "profile": ("profile", requests.ProfileRequest),
    "predict": ("predict", requests.PredictRequest),
    "kernels": ("kernels", requests.KernelsRequest),
    "roofline": ("fit_roofline", requests.RooflineRequest),
    "validate": ("validate", requests.ValidateRequest),
    # group 2: measuring
    "speculative verify": ("speculative_verify", requests.SpeculativeVerifyRequest),
    "speculative measure": ("speculative_measure", requests.SpeculativeMeasureRequest),
    "speculative run": ("speculative_run", requests.SpeculativeRunRequest),
    "ab": ("ab", requests.AbRequest),
    "comm": ("comm", requests.CommRequest),
    # group 1: calculators
    "amortize": ("amortize", requests.AmortizeRequest),
    "speculative speedup": ("spec_speedup", requests.SpecSpeedupRequest),
    "speculative acceptance": ("acceptance", requests.AcceptanceRequest),
    "speculative plans": ("spec_plans", requests.PlansRequest),
    "speculative from-metrics": ("spec_from_metrics", requests.FromMetricsRequest),
    "amortize measure": ("amortize_measure", requests.AmortizeMeasureRequest),
    # group 3: traces and engine settings
    "trace": ("load_trace", requests.TraceRequest),
    "tune capture-sizes": ("tune_capture_sizes", requests.TuneCaptureSizesRequest),
    "tune speculative": ("tune_speculative", requests.TuneSpeculativeRequest),
    "compare": ("compare", requests.CompareRequest),
    "report": ("report", requests.ReportRequest),
}
#: how a result is shown or written: the API returns the result itself
OUTPUT = {"json_out", "out", "markdown", "csv", "fmt", "plot"}
#: the command line's own options, and why the API has none
CLI_ONLY = {
    "calibrate": {
        "from_trace": "a calibration from GPU traces (validate_trace)",
        "trace": "with --from-trace",
    },
    "profile": {
        "top": "rows of the table shown",
        "by": "the table shown",
        "tp": "starts its ranks through torchrun: a launch, not a call",
        "timeout": "how long --tp waits for its ranks",
    },
    "predict": {"top": "rows of the table shown"},
    "validate": {"against": "a trace's ops, not a grid (validate_trace)", "unseen_device": "with --against"},
    # group 2: measuring
    "comm": {"nproc": "starts its ranks through torchrun: a launch, not a call"},
    # group 1: calculators
    "speculative speedup": {"plot_grid": "a figure written: the API returns the result"},
    # group 3: traces and engine settings
    "trace": {
        "top": "rows of the tables shown",
        "augment": "writes the trace back annotated: an output file",
        "augment_what_if": "with --augment",
    },
    "report": {
        "html": "writes FILE.html beside --out: an output file",
        "no_plots": "the plots are files beside --out",
    },
}
#: an argument's name on the command line (its help's metavar) -> the API's parameter
RENAMED = {"trace": {"traces": "paths"}}
#: a refusal's name on the command line (an argument's metavar) -> the API's parameter
REFUSED_AS = {"RESULT.JSON...": "results"}
#: per command, a bad value for each kind of check its options have: (flag, as typed, as passed)
BAD = {
    "attention check": [("--heads", "129", 129), ("--dtype", "float16", "float16")],
    "attention memory": [("--heads", "0", 0)],
    "attention window": [("--dropped-mass", "1", 1), ("--value-norm", "-1", -1)],
    "calibrate": [("--shapes", "huge", "huge"), ("--reps", "2", 2), ("--threads", "0", 0)],
    "buckets": [
        ("FILE", "/no/such/lengths.txt", "/no/such/lengths.txt"),
        ("--bounds", "8,4", [8, 4]),
        ("--batch-size", "0", 0),
        ("--cost", "cubic", "cubic"),
        ("--compile-cost", "3parsecs", "3parsecs"),
    ],
    "amdahl": [
        ("--fraction", "1.5", 1.5),
        ("--speedup", "0", 0),
        ("--part", "attention", ["attention"]),
        ("--added", "-1", -1),
        ("--target-speedup", "0", 0),
    ],
    "profile": [
        ("--batch", "0", 0),
        ("--mode", "sideways", "sideways"),
        ("--threads", "0", 0),
        ("--roofline", "/no/such/fit.json", "/no/such/fit.json"),
        ("--trace", "", ""),
    ],
    "predict": [
        ("--context", "-1", -1),
        ("--sweep", "depth=1,2", "depth=1,2"),
        ("--tp", "65", 65),
        ("--mode", "up", "up"),
        ("--calibration", "/no/such/cal.json", "/no/such/cal.json"),
    ],
    "kernels": [
        ("--dtype", "float99", "float99"),
        ("--warmup", "-1", -1),
        ("--reps", "0", 0),
        ("--max-time", "0", 0),
        ("--runs", "0", 0),
        ("--resume", "/no/such/base.json", "/no/such/base.json"),
    ],
    "validate": [
        ("--mode", "sideways", ["sideways"]),
        ("--grid", "depth=1", ["depth=1"]),
        ("--passes", "11", 11),
        ("--calibration", "", ""),
    ],
    "roofline": [
        ("MEASUREMENTS", "/no/such/k.json", "/no/such/k.json"),
        ("--suite", "huge", "huge"),
        ("--bootstrap", "-1", -1),
        ("--warmup", "1e9s", "1e9s"),
        ("--reps", "auto-ish", "auto-ish"),
        ("--peak-flops", "fast", "fast"),
        ("--peak-bandwidth", "-1", -1),
        ("--save", "", ""),
    ],
    # group 2: measuring
    "speculative verify": [("--vocab", "1", 1), ("--alpha-target", "1", 1)],
    "speculative measure": [
        ("--k-max", "0", 0),
        ("--alpha", "2", 2),
        ("--alphas", "0.5,2", [0.5, 2]),
        ("--metrics", "/no/such/m.json", "/no/such/m.json"),
    ],
    "speculative run": [
        ("--k", "65", 65),
        ("--sweep-k", "3..1", "3..1"),
        ("--temperature", "0", 0),
        ("--threads", "0", 0),
    ],
    "ab": [
        ("--rounds", "0", 0),
        ("--threshold", "2", 2),
        ("--significance", "1", 1),
        ("--dir", "lengths.txt", "lengths.txt"),
    ],
    "comm": [
        ("--collective", "all_sum", ["all_sum"]),
        ("--min-size", "4parsecs", "4parsecs"),
        ("--factor", "1", 1),
        ("--timeout", "0", 0),
        ("--dist-backend", "mpi", "mpi"),
    ],
    # group 1: calculators
    "amortize": [
        ("--compile-cost", "3parsecs", "3parsecs"),
        ("--eager", "-1", -1),
        ("--calls", "-1", -1),
        ("--buckets", "/no/such/buckets.csv", "/no/such/buckets.csv"),
        ("--requests", "0", 0),
    ],
    "speculative speedup": [
        ("--k", "0", 0),
        ("--alpha", "1.5", 1.5),
        ("--alphas", "0.5,2", [0.5, 2]),
        ("--target-cost", "0", 0),
        ("--verify-cost-model", "12ms+k", "12ms+k"),
        ("--k-max", "0", 0),
    ],
    "speculative acceptance": [
        ("--p", "0.5,x", "0.5,x"),
        ("--p-file", "/no/such/p.npy", "/no/such/p.npy"),
        ("--p-temperature", "0", 0),
    ],
    "speculative plans": [("FILE", "/no/such/rounds.csv", "/no/such/rounds.csv")],
    "speculative from-metrics": [
        ("--drafts", "0", 0),
        ("--accepted-per-position", "1,-1", [1, -1]),
        ("--prometheus", "/no/such/m.prom", "/no/such/m.prom"),
        ("--overhead", "-1", -1),
        ("--verify-cost-model", "k*", "k*"),
    ],
    "amortize measure": [
        ("--bounds", "8,4", [8, 4]),
        ("--batch-sizes", "0", [0]),
        ("--calls-per-bucket", "1,-1", [1, -1]),
        ("--lengths", "/no/such/lengths.txt", "/no/such/lengths.txt"),
        ("--requests", "0", 0),
        ("--warmup", "-1", -1),
        ("--backend", "fast", "fast"),
        ("--resume", "/no/such/sweep.json", "/no/such/sweep.json"),
    ],
    # group 3: traces and engine settings
    "trace": [
        ("--steps", "5-3", "5-3"),
        ("--peak-flops", "fast", "fast"),
        ("--peak-bandwidth", "-1", -1),
        ("--causal-flops", "most", "most"),
        ("--matmul-fraction", "0", 0),
        ("--capture", "/no/such/capture.json", "/no/such/capture.json"),
        ("--workers", "0", 0),
        ("--roofline", "/no/such/fit.json", "/no/such/fit.json"),
        ("--what-if", "gemm*", ["gemm*"]),
    ],
    "tune capture-sizes": [
        ("--cost-file", "cost.csv@0", ["cost.csv@0"]),
        ("--batches", "/no/such/b.csv", "/no/such/b.csv"),
        ("--max-captures", "0", 0),
        ("--memory-per-capture", "lots", "lots"),
        ("--current", "1,-1", [1, -1]),
        ("--eager-overhead", "3parsecs", "3parsecs"),
    ],
    "tune speculative": [
        ("--alphas", "0.8,1.5", [0.8, 1.5]),
        ("--overhead", "-1ms", "-1ms"),
        ("--batch-sizes", "8,4", [8, 4]),
        ("--k-max", "65", 65),
        ("--prometheus", "/no/such/a.prom", "/no/such/a.prom"),
        ("--draft-cost-file", "/no/such/d.csv", ["/no/such/d.csv"]),
    ],
    "compare": [
        ("BASE", "/no/such/base.json", "/no/such/base.json"),
        ("--threshold", "2", 2),
        ("--significance", "1", 1),
        ("--seed", "-1", -1),
    ],
    "report": [("RESULT.JSON...", "/no/such/r.json", ["/no/such/r.json"])],
}
TRACE = Path(__file__).parent / "trace" / "fixtures" / "model_step.json"
RESULT = Path(__file__).parent / "reports" / "fixtures" / "profile.json"
#: what a command needs besides the bad value (a required argument), as typed and as passed
NEEDS = {
    "buckets": (["lengths.txt"], {"file": [12, 40]}),
    "attention memory": (
        ["--tq", "8", "--tk", "8", "--heads", "2", "--head-dim", "8"],
        {"tq": 8, "tk": 8, "heads": 2, "head_dim": 8},
    ),
    "attention window": (
        ["--dropped-mass", "0.5", "--value-norm", "1"],
        {"dropped_mass": 0.5, "value_norm": 1},
    ),
    # group 2: measuring
    "ab": (["--base", "infer-opt kernels", "--new", "infer-opt kernels"], {"base": "x", "new": "x"}),
    # group 3: traces and engine settings
    "trace": ([str(TRACE)], {"paths": str(TRACE)}),
    "tune speculative": (
        ["--target-cost-file", str(TRACE), "--draft-cost-file", str(TRACE)],
        {"target_cost_file": [str(TRACE)], "draft_cost_file": [str(TRACE)]},
    ),
    "compare": ([str(TRACE)], {"base": str(TRACE), "new": str(TRACE)}),
    "report": ([], {"results": [str(RESULT)]}),
}
#: checks no typed value fails (any string, a flag, repeatable strings)
UNCHECKED = (requests.Text, requests.Flag, requests.Strings)


def _options(command: str) -> dict[str, object]:
    group, _, sub = command.partition(" ")
    loaded = _load_command(group)
    loaded = loaded.commands[sub] if sub else loaded
    renamed = RENAMED.get(command, {})
    return {renamed.get(p.name, p.name): p for p in loaded.params if p.name not in OUTPUT}


def _api(command: str) -> inspect.Signature:
    return inspect.signature(getattr(infer_opt, COMMANDS[command][0]))


def _fields(command: str) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(COMMANDS[command][1])}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_is_a_parameter_of_the_api_and_a_field_of_the_request(command):
    options = set(_options(command))
    only = set(CLI_ONLY.get(command, {}))
    assert only <= options  # what is said to be the command line's is one of its options
    assert set(_api(command).parameters) == options - only
    assert set(_fields(command)) == options - only


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_has_the_api_default(command):
    request = COMMANDS[command][1]
    api = _api(command).parameters
    for name, param in _options(command).items():
        if name in CLI_ONLY.get(command, {}):
            continue
        if param.required:  # a required argument: none in the request either
            assert _fields(command)[name].default is dataclasses.MISSING, name
            continue
        default = param.default
        if isinstance(default, str) and hasattr(param.type, "parse"):
            default = param.type.convert(default, param, None)
        # the default as the command line gives it, made into the request, is the API's
        needs = NEEDS.get(command, ([], {}))[1]
        assert getattr(request(**{**needs, name: default}), name) == getattr(request(**needs), name), name
        assert api[name].default == _fields(command)[name].default, name


@pytest.mark.parametrize(
    ("command", "flag", "typed", "passed"),
    [(command, *row) for command, rows in sorted(BAD.items()) for row in rows],
)
def test_a_bad_value_is_refused_alike(command, flag, typed, passed, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lengths.txt").write_text("12\n40\n")
    name = REFUSED_AS.get(flag, flag.removeprefix("--").replace("-", "_").lower())
    args, kwargs = NEEDS.get(command, ([], {}))
    with pytest.raises(InvalidInput) as caught:
        getattr(infer_opt, COMMANDS[command][0])(**{**kwargs, name: passed})
    assert caught.value.option == name
    argv = [*command.split(), typed] if flag.isupper() else [*command.split(), *args, flag, typed]
    assert_one_line_error(invoke(*argv), f"Error: {flag}: {caught.value.expected} (got ")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_refusals_cover_every_kind_of_check(command):
    fields = _fields(command)
    checked = {type(f.metadata["check"]) for f in fields.values()} - set(UNCHECKED)
    tried = {
        type(
            fields[REFUSED_AS.get(flag, flag.removeprefix("--").replace("-", "_").lower())].metadata["check"]
        )
        for flag, *_ in BAD[command]
    }
    assert checked <= tried, checked - tried


@pytest.mark.parametrize(
    ("checker", "typed", "value"),
    [
        (requests.Duration("us"), "2", 2e-6),
        (requests.Duration("ms"), "1.5ms", 1.5e-3),
        (requests.Warmup(10, 60.0), "200ms", (None, 0.2)),
        (requests.Reps(10), "auto", None),
        (requests.Sweep(), "seq-len=1,2", ("seq_len", (1, 2))),
        (requests.Bounds(), "128,256", (128, 256)),
        (requests.PartSpec(), "a=0.5:2", requests.PartSpec().parse("a=0.5:2", "")),
    ],
)
def test_a_parsed_value_is_taken_back_unchanged(checker, typed, value):
    """The CLI hands the request what its option type parsed: checked again, it is the same."""
    parsed = checker.check(typed, "--x")
    assert parsed == value
    assert checker.check(parsed, "--x") == value


def test_every_command_of_the_cli_is_in_the_parity_table():
    """A command added to the CLI without its request and API function fails here: the table
    above is every command of ``infer-opt`` (a group's subcommands; the group itself only when
    it runs on its own)."""
    from infer_opt.cli._click import click
    from infer_opt.cli.app import COMMANDS as CLI_COMMANDS

    leaves = set()
    for name in CLI_COMMANDS:
        command = _load_command(name)
        if hasattr(command, "list_commands"):
            leaves |= {f"{name} {sub}" for sub in command.list_commands(click.Context(command))}
            if command.invoke_without_command:  # `amortize` is a command and a group
                leaves.add(name)
        else:
            leaves.add(name)
    assert leaves == set(COMMANDS)
