"""``infer-opt profile``: where one model step's time goes, per operator, against the roofline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import typer

from infer_opt import steps
from infer_opt.cli import profile_tp
from infer_opt.cli._click import ParameterSource, get_current_context
from infer_opt.cli.common import (
    AutoDtypeOpt,
    DeviceOpt,
    HfConfigOpt,
    ModelArg,
    ThreadsOpt,
    option,
    progress_bar,
    reps_option,
    runs_option,
    warmup_option,
)
from infer_opt.cli.distributed import TimeoutOpt
from infer_opt.cli.output import Outcome, Output, with_output
from infer_opt.cli.profile_tp import TpOpt
from infer_opt.cli.types import Choice, Count, InputFile, TracePath
from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.requests import MAX_SIZE, ProfileRequest
from infer_opt.steps import MODES

HELP = """Profile one step of a model: time, FLOPs and bytes per aten operator,
grouped by operator, category and module, each op placed against the device's
fitted roofline, and Amdahl's law over the categories.

coverage = Σ per-op time / step time (the rest is host/launch overhead);
per category f: 1/(1-f) if free, 1/((1-f) + f/s) at its roofline bound.

MODEL: a built-in (tiny, the default; gpt2-small, llama-tiny, llama-small);
a factory, package.module:factory or path/to/file.py:factory, returning
(model, example_inputs) (see examples/my_model.py); or hf:<model_type>,
built from its config with random weights (pip install 'infer-opt\\[hf]'): its
causal LM, or with :base the model without its head (hf:bert:base, hf:qwen2:base).

--runs N: N independent passes over the step (each with its own warm-up), every op,
category and the step keeping each run's median; 1 for a look, 3 or more for anything
you will compare (infer-opt compare tests changes against the spread between runs).

Examples:

  infer-opt profile

  infer-opt profile gpt2-small --seq-len 256 --top 20 --plot gpt2.png

  infer-opt profile --mode decode --context 256

  infer-opt profile --mode generate --new-tokens 32 --json > gen.json

  infer-opt profile --threads 1 --runs 3 --out base.json

  infer-opt profile examples/my_model.py:make_model --by module

  infer-opt profile gpt2-small --tp 2 --trace traces/

  torchrun --nproc-per-node 4 -m infer_opt profile llama-small --tp 4 --device cuda
"""

GROUPS = ("op", "category", "module")
#: the shape options only some modes read (:func:`ignored_shape_options`)
SHAPE_LENGTHS = ("seq_len", "context", "new_tokens")

ModeOpt = option(
    str,
    "--mode",
    parse=Choice(MODES),
    help="prefill (a forward over T tokens), decode (one token over a KV cache of --context "
    "tokens) or generate (greedy, --new-tokens tokens: TTFT and time per token).",
)
BatchOpt = option(int, "--batch", parse=Count(1, MAX_SIZE), help="Batch size B.")
SeqLenOpt = option(
    int, "--seq-len", parse=Count(1, MAX_SIZE), help="Sequence length T (prefill; the prompt for generate)."
)
ContextOpt = option(int, "--context", parse=Count(0, MAX_SIZE), help="KV-cache length for --mode decode.")
NewTokensOpt = option(
    int, "--new-tokens", parse=Count(1, MAX_SIZE), help="Tokens to generate for --mode generate."
)


@dataclass(frozen=True)
class StepShape:
    """The step a model runs (``profile``, ``predict``): its options ``--batch``, ``--seq-len``,
    ``--mode``, ``--context``, ``--new-tokens``, an option group for :func:`with_output`."""

    batch: BatchOpt = 1
    seq_len: SeqLenOpt = 128
    mode: ModeOpt = "prefill"
    context: ContextOpt = 128
    new_tokens: NewTokensOpt = 32


ModesOpt = option(
    list[str] | None, "--mode", parse=Choice(MODES), help="prefill, decode or generate (repeatable)."
)


@dataclass(frozen=True)
class StepShapes(StepShape):
    """:class:`StepShape` for a command that runs several modes (``validate``): ``--mode``
    repeatable (none given: prefill), fewer ``--new-tokens`` by default."""

    mode: ModesOpt = None  # type: ignore[assignment]
    new_tokens: NewTokensOpt = 8


def given(names: Sequence[str]) -> list[str]:
    """Which of the running command's parameters ``names`` the user gave on the command line
    (not left at their defaults)."""
    ctx = get_current_context(silent=True)
    if ctx is None:
        return []
    return [name for name in names if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]


def ignored_shape_options(modes: Sequence[str], names: Sequence[str] = SHAPE_LENGTHS) -> list[Notice]:
    """The shape options given on the command line that none of ``modes`` reads: each is
    ignored, and said so (``option_ignored``) rather than dropped in silence."""
    return [
        Notice(
            "option_ignored",
            {
                "option": "--" + name.replace("_", "-"),
                "modes": list(modes),
                "instead": steps.not_read(name),
            },
        )
        for name in given(names)
        if not steps.reads(name, modes)
    ]


WarmupOpt = warmup_option("Untimed calls before timing (on a CPU for 0.1 s at least, unless 0).")
RepsOpt = reps_option("Timed repetitions (step timing and operator pass).")
RooflineOpt = option(
    Path | None,
    "--roofline",
    parse=InputFile(),
    help="Roofline fit to use (from infer-opt roofline --out). Default: the fit saved for this device "
    "and dtype, else a ~10 s calibration now (then saved).",
)
TopOpt = option(int, "--top", parse=Count(1, 10_000), help="Rows in the operator table.")
ByOpt = option(str, "--by", parse=Choice(GROUPS), help="Main table: op (with shapes), category or module.")
TraceOpt = option(
    Path | None,
    "--trace",
    parse=TracePath(),
    help="Write the raw torch.profiler trace (Chrome/Perfetto JSON); with --tp a folder, one "
    "rank<r>.json per rank.",
)
RunsOpt = runs_option(
    "Independent passes over the step, each with its own warm-up. 1 for a look; 3 or more for anything "
    "you will compare."
)


@with_output(plot=True, csv=False)
def profile(
    model: ModelArg = "tiny",
    device: DeviceOpt = "auto",
    dtype: AutoDtypeOpt = "auto",
    shape: StepShape = StepShape(),
    warmup: WarmupOpt = 3,
    reps: RepsOpt = 20,
    roofline: RooflineOpt = None,
    top: TopOpt = 15,
    by: ByOpt = "op",
    trace: TraceOpt = None,
    threads: ThreadsOpt = None,
    hf_config: HfConfigOpt = None,
    tp: TpOpt = 1,
    timeout: TimeoutOpt = "60s",
    runs: RunsOpt = 1,
    *,
    output: Output,
) -> Any:
    from infer_opt.profilers import model_profile

    request = ProfileRequest(
        model, device=device, dtype=dtype, **asdict(shape), warmup=warmup, reps=reps, runs=runs,
        roofline=roofline, trace=trace, threads=threads, hf_config=hf_config,
    )  # fmt: skip
    ignored = ignored_shape_options((shape.mode,))
    if profile_tp.wanted(tp):
        if runs > 1:
            raise InvalidInput("runs", runs, "--tp profiles one run per rank; drop --runs (or --tp)")
        arguments = {**asdict(shape), "model": model, "device": device, "dtype": dtype, "warmup": warmup,
                     "reps": reps, "threads": threads, "tp": tp}  # fmt: skip
        outcome = profile_tp.profile_tp(
            request.settings(), tp=tp, timeout_s=timeout, arguments=arguments, roofline=roofline, trace=trace,
            top=top, by=by,
        )  # fmt: skip
        return outcome if outcome is None else replace(outcome, warnings=(*outcome.warnings, *ignored))
    if trace is not None and trace.is_dir():
        raise InvalidInput("trace", str(trace), "is a folder; without --tp give a file name")
    output.check_distinct((("--trace", trace),))
    with progress_bar("profile") as update:
        result = model_profile.run(request, progress=update)
    if trace is not None:
        typer.echo(f"wrote {trace}", err=True)
    return Outcome(result, view={"top": top, "by": by}, warnings=ignored, error=_interrupted(result, output))


def _interrupted(result: Any, output: Output) -> Any:
    """Ctrl-C during ``--runs``: the finished runs are shown and written (exit 130)."""
    from infer_opt.errors import Interrupted

    stopped = next((n for n in result.warnings if n.code == "runs_interrupted"), None)
    if stopped is None:
        return None
    files = [str(p) for p in output.out if str(p) != "-"]
    kept = f"kept in {', '.join(files)}" if files else "shown above (give --out FILE.json to keep them)"
    done, asked = stopped["done"], stopped["asked"]
    return Interrupted(f"interrupted after {done} of {asked} runs: those runs are {kept}")


def register(app: typer.Typer) -> None:
    app.command("profile", help=HELP)(profile)
