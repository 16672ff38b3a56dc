"""``infer-opt speculative ...``: speculative-decoding calculators and checks.

The group object lives here; its commands may be defined in this module or in sibling
modules that import ``app`` from here (they are imported by :mod:`infer_opt.cli.app`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infer_opt.cli.common import BeforeOpt, argument, option
from infer_opt.cli.output import Outcome, Output, with_output
from infer_opt.cli.types import (
    Count,
    CountList,
    Duration,
    InputFile,
    KMax,
    Number,
    NumberList,
    OutputFile,
    VerifyModel,
    png_name,
)
from infer_opt.cost_models import speculative as model
from infer_opt.requests import AcceptanceRequest, FromMetricsRequest, PlansRequest, SpecSpeedupRequest
from infer_opt.results.speculative import AcceptanceResult, MetricsResult, SpeedupResult

app = typer.Typer(
    help="Speculative decoding: expected committed tokens, speedup, acceptance, plan comparison.",
    no_args_is_help=True,
    add_completion=False,
)

# ------------------------------------------------------------------------------ shared options

DurationMs = Duration("ms")
TargetCostOpt = option(
    float | None,
    "--target-cost",
    parse=Duration("ms", allow_zero=False),
    help="c_t: one plain target decoding step (bare number = ms).",
)
DraftCostOpt = option(
    float | None, "--draft-cost", parse=DurationMs, help="c_d: one draft token (bare number = ms)."
)
VerifyCostOpt = option(
    float | None,
    "--verify-cost",
    parse=DurationMs,
    help="c_v(k): one verification pass of the target (bare number = ms). Default: c_t.",
)
OverheadOpt = option(
    float, "--overhead", parse=DurationMs, help="c_m: bookkeeping per round (bare number = ms), >= 0."
)


VerifyModelOpt = option(
    Any,
    "--verify-cost-model",
    parse=VerifyModel(),
    help="c_v(k) as 'A + B*k', e.g. '12ms+0.5ms*k' (bare numbers = ms).",
)

# ------------------------------------------------------------------------------------ speedup

SPEEDUP_HELP = (
    "Expected committed tokens per round and the speedup over plain decoding (a model\n"
    "prediction from the costs you give; bare durations are ms).\n\n"
    "E[N] = Σ_{i=0..k} Π_{j≤i} α_j (bonus token included); S = c_t·E[N] / (k·c_d + c_v(k) + c_m).\n\n"
    "Examples:\n\n"
    "  infer-opt speculative speedup --k 3 --alpha 0.8 --target-cost 10 --draft-cost 1 "
    "--verify-cost 12 --overhead 1\n\n"
    "  infer-opt speculative speedup --alphas 0.9,0.7,0.5 --target-cost 10 --draft-cost 1 "
    '--verify-cost-model "9ms+1ms*k"\n\n'
    "  infer-opt speculative speedup --alpha 0.8 --k 3 --target-cost 10 --draft-cost 1 --k-max 12 "
    "--plot s.png --plot-grid g.png\n"
)


KOpt = option(
    int | None,
    "--k",
    parse=Count(1, model.MAX_K),
    help="Draft length k, an integer >= 1 (default: the length of --alphas).",
)
AlphaOpt = option(
    float | None, "--alpha", parse=Number(0, 1), help="Constant per-position acceptance rate α in [0, 1]."
)
AlphasOpt = option(
    Any,
    "--alphas",
    parse=NumberList(low=0, high=1),
    help="Per-position conditional rates α_1,…,α_k in [0, 1] (longer lists for --k-max/--plot).",
)
BudgetOpt = option(
    int | None,
    "--budget",
    parse=Count(1),
    help="Tokens left before a length limit, L >= 1: report the expected min(N, L).",
)


SweepKOpt = option(
    int | None,
    "--k-max",
    parse=KMax(1, model.MAX_K),
    help="Sweep k = 1..KMAX and report the best draft length.",
)
PlotGridOpt = option(
    Path | None,
    "--plot-grid",
    parse=OutputFile(check=png_name),
    help="Write a heat map of S over (α, k) to FILE.png.",
)


@with_output(plot=True)
def speedup(
    k: KOpt = None,
    alpha: AlphaOpt = None,
    alphas: AlphasOpt = None,
    target_cost: TargetCostOpt = None,
    draft_cost: DraftCostOpt = None,
    verify_cost: VerifyCostOpt = None,
    verify_cost_model: VerifyModelOpt = None,
    overhead: OverheadOpt = 0.0,
    budget: BudgetOpt = None,
    k_max: SweepKOpt = None,
    plot_grid: PlotGridOpt = None,
    *,
    output: Output,
) -> SpeedupResult:
    request = SpecSpeedupRequest(
        target_cost=target_cost, draft_cost=draft_cost, verify_cost=verify_cost,
        verify_cost_model=verify_cost_model, overhead=overhead, k=k, alpha=alpha, alphas=alphas,
        budget=budget, k_max=k_max,
    )  # fmt: skip
    result = model.run_speedup(request, plotted=output.plot is not None or plot_grid is not None)
    if plot_grid is not None:
        from infer_opt.reports.plots import speculative as plots

        typer.echo(f"wrote {plots.plot_grid(result, plot_grid)}", err=True)
    return result


# --------------------------------------------------------------------------------- acceptance

ACCEPTANCE_HELP = f"""Acceptance of draft tokens x ~ q against the target p, the residual used after
a rejection, and the output distribution of the exact rule beside the wrong one.

a(x) = min(1, p(x)/q(x)); A = Σ min(p, q) = 1 - TV(p, q); r = max(p - q, 0)/(1 - A).

Distributions must sum to 1 within {model.DISTRIBUTION_TOLERANCE:g} (absolute) unless --normalize is given.

Example:

  infer-opt speculative acceptance --p 0.5,0.3,0.2 --q 0.2,0.5,0.3
"""


DistributionOpt = NumberList(allow_inf=True)
TemperatureType = Number(0, low_open=True)


POpt = option(Any, "--p", parse=DistributionOpt, help="Target distribution p, comma-separated.")
QOpt = option(
    Any, "--q", parse=DistributionOpt, help="Draft distribution q (as actually sampled), comma-separated."
)
PFileOpt = option(Path | None, "--p-file", parse=InputFile(), help="p from a .npy or CSV/text file.")
QFileOpt = option(Path | None, "--q-file", parse=InputFile(), help="q from a .npy or CSV/text file.")
LogitsOpt = option(
    bool, "--logits", help="The values are logits: p = softmax(z/T) with the temperatures below."
)
PTemperatureOpt = option(
    float | None,
    "--p-temperature",
    parse=TemperatureType,
    help="Target temperature T > 0 (with --logits; default 1).",
)
QTemperatureOpt = option(
    float | None,
    "--q-temperature",
    parse=TemperatureType,
    help="Draft temperature T > 0 (with --logits; default 1).",
)
NormalizeOpt = option(bool, "--normalize", help="Rescale p and q by their sums instead of requiring sum 1.")


@with_output()
def acceptance(
    p: POpt = None,
    q: QOpt = None,
    p_file: PFileOpt = None,
    q_file: QFileOpt = None,
    logits: LogitsOpt = False,
    p_temperature: PTemperatureOpt = None,
    q_temperature: QTemperatureOpt = None,
    normalize: NormalizeOpt = False,
) -> AcceptanceResult:
    request = AcceptanceRequest(
        p, q, p_file=p_file, q_file=q_file, logits=logits, p_temperature=p_temperature,
        q_temperature=q_temperature, normalize=normalize,
    )  # fmt: skip
    return model.run_acceptance(request)


# -------------------------------------------------------------------------------------- plans

PLANS_HELP = """Compare speculative plans from logged rounds: long-run cost per committed token
Σ time / Σ tokens per plan (never the mean of per-round ratios), tokens per round, best plan.

FILE is a CSV or TSV with a header naming the columns plan, time, tokens (time like 12ms; bare =
ms; a header time_us or time_s changes the unit of bare numbers; other columns are ignored, with a
warning).

Example:

  infer-opt speculative plans rounds.csv
"""


FileArg = argument(
    Path, parse=InputFile(), help="CSV of logged rounds: plan, time, tokens.", show_default=False
)


@with_output()
def plans(
    file: FileArg,
) -> Outcome:
    result, notices = model.run_plans(PlansRequest(file))
    return Outcome(result, warnings=notices)


# ------------------------------------------------------------------------------- from-metrics

METRICS_HELP = """Per-position acceptance from serving-engine counters, E[N], and (with costs) the
implied speedup. vLLM exports these as spec_decode_num_drafts and
spec_decode_num_accepted_tokens_per_pos; --prometheus reads them from its /metrics text (summed
over engines, one model_name; with --before, the interval between two snapshots).

u_i = acc_i/drafts; α_i = acc_i/acc_{i-1} (acc_0 = drafts); E[N] = 1 + Σ u_i;
draft acceptance rate = accepted / draft tokens.

Examples:

  infer-opt speculative from-metrics --drafts 1000 --accepted-per-position 820,610,400

  infer-opt speculative from-metrics --file metrics.json --target-cost 10 --draft-cost 1 --verify-cost 12

  infer-opt speculative from-metrics --prometheus after.prom --before before.prom --model-name my-model
"""

DraftsOpt = option(int | None, "--drafts", parse=Count(1), help="Number of draft rounds.")
AcceptedPerPositionOpt = option(
    Any,
    "--accepted-per-position",
    parse=CountList(0),
    help="Accepted count at draft positions 1..k, e.g. 820,610,400.",
)
DraftTokensOpt = option(
    int | None, "--draft-tokens", parse=Count(0), help="Total draft tokens proposed (optional)."
)
FileOpt = option(
    Path | None,
    "--file",
    parse=InputFile(),
    help="JSON with keys drafts, accepted_per_position and (optional) draft_tokens.",
)
PrometheusOpt = option(
    Path | None,
    "--prometheus",
    parse=InputFile(),
    help="vLLM's /metrics text (Prometheus exposition): the spec_decode counters, summed over engines.",
)
ModelNameOpt = option(
    str | None, "--model-name", help="The model_name label to read when the file has several models."
)


@with_output()
def from_metrics(
    drafts: DraftsOpt = None,
    accepted_per_position: AcceptedPerPositionOpt = None,
    draft_tokens: DraftTokensOpt = None,
    file: FileOpt = None,
    prometheus: PrometheusOpt = None,
    before: BeforeOpt = None,
    model_name: ModelNameOpt = None,
    target_cost: TargetCostOpt = None,
    draft_cost: DraftCostOpt = None,
    verify_cost: VerifyCostOpt = None,
    verify_cost_model: VerifyModelOpt = None,
    overhead: OverheadOpt = 0.0,
) -> MetricsResult:
    request = FromMetricsRequest(
        drafts=drafts, accepted_per_position=accepted_per_position, draft_tokens=draft_tokens, file=file,
        prometheus=prometheus, before=before, model_name=model_name, target_cost=target_cost,
        draft_cost=draft_cost, verify_cost=verify_cost, verify_cost_model=verify_cost_model,
        overhead=overhead,
    )  # fmt: skip
    return model.run_from_metrics(request)


app.command("speedup", help=SPEEDUP_HELP)(speedup)
app.command("acceptance", help=ACCEPTANCE_HELP)(acceptance)
app.command("plans", help=PLANS_HELP)(plans)
app.command("from-metrics", help=METRICS_HELP)(from_metrics)
