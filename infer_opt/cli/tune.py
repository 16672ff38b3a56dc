"""``infer-opt tune ...``: engine settings from measurements (CUDA-graph capture sizes, the
speculation length per batch size)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

from infer_opt.cli.common import BeforeOpt, deprecated, option
from infer_opt.cli.output import with_output
from infer_opt.cli.types import CostSource, Count, CountList, Duration, InputFile, NumberList, Size
from infer_opt.errors import InvalidInput
from infer_opt.requests import TuneCaptureSizesRequest, TuneSpeculativeRequest
from infer_opt.results.tune_capture_sizes import TuneCaptureSizesResult
from infer_opt.results.tune_speculative import TuneSpeculativeResult

app = typer.Typer(
    help="Engine settings from measurements: CUDA-graph capture sizes, draft length per batch size.",
    no_args_is_help=True,
    add_completion=False,
)

CAPTURE_HELP = (
    "The CUDA-graph capture list that minimises the expected decode step time over the batch sizes a "
    "server saw: batch b runs at the smallest captured size c >= b at cost t(c); above the largest it "
    "runs uncaptured at t(b) + --eager-overhead (or --eager-cost-file). Exact dynamic program over every "
    "size up to the largest observed or measured one (any cost curve), at most --max-captures sizes "
    "(or within --memory-budget); compared with the "
    "current list (--current, or the engine's default list). A Prometheus histogram is coarse: mass "
    "inside a bucket is placed at its upper edge to choose, and the answer is given as a range.\n\n"
    "Examples:\n\n"
    "  infer-opt tune capture-sizes --batches b.csv --cost-file cost.csv --max-captures 8 "
    "--eager-overhead 2ms\n\n"
    "  infer-opt tune capture-sizes --prometheus b.prom --before a.prom --cost-file p.json "
    "--eager-overhead 1ms\n"
)
SPEC_HELP = (
    "The draft length k per batch size maximising S(k, b) = t(b)·E[N](k) / (k·t_d(b) + t(b·(k+1)) + c_m), "
    "E[N](k) from the per-position acceptance rates; k = 0 (S = 1) where speculation does not pay; "
    "the batch size from which it stops paying, and the expected gain over the distribution.\n\n"
    "Examples:\n\n"
    "  infer-opt tune speculative --alphas 0.8,0.7 --target-cost-file t.csv --draft-cost-file d.csv "
    "--batch-sizes 1,8,64\n\n"
    "  infer-opt tune speculative --prometheus b.prom --before a.prom --target-cost-file t.csv "
    "--draft-cost-file d.csv --batches b.csv\n"
)

BatchesOpt = option(
    Path | None, "--batches", parse=InputFile(), help="Batch-size distribution: CSV/TSV batch_size,count."
)
PrometheusOpt = option(
    Path | None,
    "--prometheus",
    parse=InputFile(),
    help="vLLM /metrics snapshot (with --before, the window between the two).",
)


def spread_values(args: list[str], flag: str = "--prometheus") -> list[str]:
    """``--prometheus A B`` as click takes it, ``--prometheus A --prometheus B``: the bare words
    right after the flag's value are more of its values (these commands take no positional
    argument, so a bare word there has no other meaning). ``--`` ends the options."""
    out: list[str] = []
    end = args.index("--") if "--" in args else len(args)
    i = 0
    while i < len(args):
        token = args[i]
        out.append(token)
        i += 1
        if i > end:
            continue
        if token == flag and i < end:
            out.append(args[i])
            i += 1
        elif not token.startswith(flag + "="):
            continue
        while i < end and not args[i].startswith("-"):
            out += [flag, args[i]]
            i += 1
    return out


def old_window(args: list[str], command: str) -> list[str]:
    """The window's old spelling, ``--prometheus BEFORE AFTER`` (or the flag twice), as
    ``--prometheus AFTER --before BEFORE``, said on stderr; kept for one release."""
    args = spread_values(args)
    end = args.index("--") if "--" in args else len(args)
    at = [i for i, t in enumerate(args[:end]) if t == "--prometheus" or t.startswith("--prometheus=")]
    if len(at) < 2:
        return args
    given = " ".join(" ".join(args[i : i + 1 + ("=" not in args[i])]) for i in at)
    if len(at) > 2 or any(t == "--before" or t.startswith("--before=") for t in args[:end]):
        raise InvalidInput("--prometheus", given, "give one snapshot, and --before SNAPSHOT for a window")
    deprecated(command, "--prometheus BEFORE AFTER", "--prometheus AFTER --before BEFORE")
    args[at[0]] = args[at[0]].replace("--prometheus", "--before", 1)
    return args


class SnapshotsCommand(TyperCommand):
    """A command that still takes the window's old spelling (:func:`old_window`)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, old_window(list(args), f"tune {self.name}"))


CostOpt = option(
    list[Any] | None,
    "--cost-file",
    parse=CostSource(),
    help=(
        "Step cost: CSV batch_size,time_ms (or tokens,time_ms), a predict --sweep batch result, or "
        "saved trace results, each as FILE@B with the batch size B it ran at (repeat --cost-file: two "
        "batch sizes at least; one trace is one point, not a curve)."
    ),
)
MaxCapturesOpt = option(
    int | None, "--max-captures", parse=Count(1, 1 << 16), help="At most N captured sizes."
)
MemPerCaptureOpt = option(
    float | None, "--memory-per-capture", parse=Size(), help="Graph memory per captured size (e.g. 6MiB)."
)
MemoryOpt = option(
    Path | None, "--memory", parse=InputFile(), help="Measured graph memory: CSV batch_size,bytes."
)
BudgetOpt = option(
    float | None, "--memory-budget", parse=Size(), help="Graph memory budget (needs --memory-per-capture)."
)
CurrentOpt = option(Any, "--current", parse=CountList(0), help="The current capture list, e.g. 1,2,4,8,16.")
EngineOpt = option(str, "--engine", help="vllm or sglang[@version]: its default list is the current one.")
MaxSizeOpt = option(
    int | None,
    "--engine-max-size",
    parse=Count(1, 1 << 20),
    help="The engine's largest capture size (vLLM: min(2·max_num_seqs, 512); SGLang: its "
    "cuda_graph_max_bs, chosen by GPU memory and TP, 160 assumed).",
)
EagerCostOpt = option(
    list[Any] | None,
    "--eager-cost-file",
    parse=CostSource(),
    help="Measured uncaptured cost: CSV batch_size,time_ms, or eager traces as FILE@B (two at least).",
)
EagerOverheadOpt = option(
    float | None, "--eager-overhead", parse=Duration("ms"), help="Uncaptured step = cost(b) + D (bare = ms)."
)
CaptureTimeOpt = option(
    float | None,
    "--capture-time",
    parse=Duration("s"),
    help="Time to capture one graph: the break-even of each extra capture.",
)


@app.command("capture-sizes", help=CAPTURE_HELP, cls=SnapshotsCommand)
@with_output(plot=True)
def capture_sizes(
    cost_file: CostOpt = None,
    batches: BatchesOpt = None,
    prometheus: PrometheusOpt = None,
    before: BeforeOpt = None,
    max_captures: MaxCapturesOpt = None,
    memory_per_capture: MemPerCaptureOpt = None,
    memory: MemoryOpt = None,
    memory_budget: BudgetOpt = None,
    current: CurrentOpt = None,
    engine: EngineOpt = "vllm",
    engine_max_size: MaxSizeOpt = None,
    eager_cost_file: EagerCostOpt = None,
    eager_overhead: EagerOverheadOpt = None,
    capture_time: CaptureTimeOpt = None,
) -> TuneCaptureSizesResult:
    from infer_opt.cost_models.capture_tuning import run

    request = TuneCaptureSizesRequest(
        cost_file=cost_file, batches=batches, prometheus=prometheus, before=before,
        max_captures=max_captures, memory_per_capture=memory_per_capture, memory=memory,
        memory_budget=memory_budget, current=current, engine=engine, engine_max_size=engine_max_size,
        eager_cost_file=eager_cost_file, eager_overhead=eager_overhead, capture_time=capture_time,
    )  # fmt: skip
    return run(request)


AlphasOpt = option(
    Any,
    "--alphas",
    parse=NumberList(low=0, high=1),
    help="Per-position conditional acceptance α_1..α_K, e.g. 0.8,0.7,0.6.",
)
TargetCostOpt = option(
    list[Any],
    "--target-cost-file",
    parse=CostSource(),
    help=(
        "Target step cost: CSV tokens,time_ms (verification of k drafts at batch b = b·(k+1) tokens), "
        "or trace results as FILE@T, T tokens per step (repeat: two sizes at least)."
    ),
)
DraftCostOpt = option(
    list[Any],
    "--draft-cost-file",
    parse=CostSource(),
    help="Draft step cost: CSV batch_size,time_ms, or trace results as FILE@B (repeat: two at least).",
)
OverheadOpt = option(
    float, "--overhead", parse=Duration("ms"), help="c_m: bookkeeping per round (bare = ms)."
)
BatchSizesOpt = option(
    Any,
    "--batch-sizes",
    parse=CountList(1, 1 << 20, increasing=True),
    help="Batch sizes to tune (instead of --batches).",
)
KMaxOpt = option(
    int | None, "--k-max", parse=Count(1, 64), help="Largest draft length (default: the number of α given)."
)


@app.command("speculative", help=SPEC_HELP, cls=SnapshotsCommand)
@with_output(plot=True)
def speculative(
    target_cost_file: TargetCostOpt,
    draft_cost_file: DraftCostOpt,
    alphas: AlphasOpt = None,
    prometheus: PrometheusOpt = None,
    before: BeforeOpt = None,
    overhead: OverheadOpt = 0.0,
    batches: BatchesOpt = None,
    batch_sizes: BatchSizesOpt = None,
    k_max: KMaxOpt = None,
) -> TuneSpeculativeResult:
    from infer_opt.cost_models.speculative_tuning import run

    request = TuneSpeculativeRequest(
        target_cost_file=target_cost_file, draft_cost_file=draft_cost_file, alphas=alphas,
        prometheus=prometheus, before=before, overhead=overhead, batches=batches, batch_sizes=batch_sizes,
        k_max=k_max,
    )  # fmt: skip
    return run(request)
