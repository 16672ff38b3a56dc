"""``infer-opt speculative ...``: speculative-decoding calculators and checks.

The group object lives here; its commands may be defined in this module or in sibling
modules that import ``app`` from here (they are imported by :mod:`infer_opt.cli.app`)."""

from __future__ import annotations

import math
import re
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
    Number,
    NumberList,
    OutputFile,
    Parsed,
    png_name,
)
from infer_opt.cost_models import speculative as model
from infer_opt.errors import InvalidInput
from infer_opt.inputs.speculative import read_metrics, read_plan_log, read_vector
from infer_opt.results.speculative import AcceptanceResult, Costs, MetricsResult, SpeedupResult
from infer_opt.units import parse_duration

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


class VerifyModel(Parsed):
    """``"12ms + 0.5ms*k"`` -> ``(0.012, 0.0005)`` seconds (see :func:`parse_verify_model`)."""

    name = "A+B*k"

    def parse(self, text: str, option: str) -> tuple[float, float]:
        return parse_verify_model(text, option)


VerifyModelOpt = option(
    Any,
    "--verify-cost-model",
    parse=VerifyModel(),
    help="c_v(k) as 'A + B*k', e.g. '12ms+0.5ms*k' (bare numbers = ms).",
)

_VERIFY_MODEL_EXPECTED = "expected 'A + B*k' with durations >= 0, e.g. '12ms+0.5ms*k' (bare numbers are ms)"
_K_TERM = re.compile(r"^(?:(?P<pre>.+?)\s*[*·×]?\s*k|k\s*[*·×]\s*(?P<post>.+))$", re.IGNORECASE)


def parse_verify_model(text: str, option: str = "--verify-cost-model") -> tuple[float, float]:
    """``"12ms + 0.5ms*k"`` -> ``(0.012, 0.0005)`` seconds: terms joined by ``+``, each a
    duration or a duration times ``k`` (``0.5ms*k``, ``k*0.5ms``, ``0.5ms·k``)."""
    terms = [t.strip() for t in re.split(r"(?<![eE])\+", str(text))]
    if not terms or any(t == "" for t in terms):
        raise InvalidInput(option, text, _VERIFY_MODEL_EXPECTED)
    base = per_k = 0.0
    for term in terms:
        match = _K_TERM.match(term)
        coefficient = (match.group("pre") or match.group("post")).strip() if match else term
        try:
            value = parse_duration(coefficient, option=option, default_unit="ms")
        except InvalidInput:
            shown = term if len(term) <= 40 else term[:30] + "…"
            raise InvalidInput(option, text, f"{_VERIFY_MODEL_EXPECTED}; {shown!r} is not") from None
        if match:
            per_k += value
        else:
            base += value
    return base, per_k


def parse_costs(
    target_cost: float | None,
    draft_cost: float | None,
    verify_cost: float | None,
    verify_cost_model: tuple[float, float] | None,
    overhead: float,
) -> Costs:
    """The per-round costs from the shared options; c_v = c_t (flagged as assumed) if neither
    ``--verify-cost`` nor ``--verify-cost-model`` is given."""
    if target_cost is None:
        raise InvalidInput(
            "--target-cost", "missing", "give c_t, the cost of one plain target step (e.g. 10ms)"
        )
    if draft_cost is None:
        raise InvalidInput("--draft-cost", "missing", "give c_d, the cost of one draft token (e.g. 1ms)")
    if verify_cost is not None and verify_cost_model is not None:
        raise InvalidInput(
            "--verify-cost", verify_cost, "give --verify-cost or --verify-cost-model, not both"
        )
    if verify_cost is not None:
        return Costs(target_cost, draft_cost, verify_cost, 0.0, overhead)
    if verify_cost_model is not None:
        base, per_k = verify_cost_model
        return Costs(target_cost, draft_cost, base, per_k, overhead)
    return Costs(target_cost, draft_cost, target_cost, 0.0, overhead, verify_assumed=True)


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


class KMax(Count):
    """``--k-max KMAX``: the sweep always starts at k = 1, so a range (``speculative run``'s
    ``--sweep-k A..B``) is refused with what to give instead."""

    name = "KMAX"

    def parse(self, text: str, option: str) -> int:
        _, dots, last = text.partition("..")
        if dots:
            example = last.strip() if last.strip().isdigit() else "8"
            raise InvalidInput(option, text, f"the sweep runs k = 1..KMAX: give KMAX alone, e.g. {example}")
        return super().parse(text, option)


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
    sweep_k: SweepKOpt = None,
    plot_grid: PlotGridOpt = None,
    *,
    output: Output,
) -> SpeedupResult:
    if (alpha is None) == (alphas is None):
        raise InvalidInput("--alpha", "both or neither", "give one constant --alpha or per-position --alphas")
    if k is None and alphas is None:
        raise InvalidInput("--k", "missing", "give the draft length --k (an integer >= 1)")
    k_val = len(alphas) if k is None else k
    if (
        alphas is not None
        and len(alphas) > k_val
        and sweep_k is None
        and output.plot is None
        and plot_grid is None
    ):
        raise InvalidInput(
            "--alphas", ",".join(f"{a:g}" for a in alphas),
            f"give exactly k = {k_val} rates (longer lists only with --k-max or --plot)",
        )  # fmt: skip
    costs = parse_costs(target_cost, draft_cost, verify_cost, verify_cost_model, overhead)
    rates = None if alphas is None else list(alphas)
    result = model.speculative_speedup(
        k_val, costs, alpha=alpha, alphas=rates, budget=budget, sweep_kmax=sweep_k
    )
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


def _vector(inline: tuple[float, ...] | None, file: Path | None, name: str) -> tuple[list[float], str]:
    if (inline is None) == (file is None):
        raise InvalidInput(f"--{name}", "both or neither", f"give --{name} (inline) or --{name}-file")
    if file is not None:
        return read_vector(file, f"--{name}-file"), f"--{name}-file"
    return list(inline), f"--{name}"  # type: ignore[arg-type]


def _temperatures(
    p_temperature: float | None, q_temperature: float | None, logits: bool
) -> list[float | None]:
    temps: list[float | None] = []
    for value, flag in ((p_temperature, "--p-temperature"), (q_temperature, "--q-temperature")):
        if value is not None and not logits:
            raise InvalidInput(flag, value, "a temperature applies only to logits; add --logits")
        temps.append((1.0 if value is None else value) if logits else None)
    return temps


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
    p_vals, p_name = _vector(p, p_file, "p")
    q_vals, q_name = _vector(q, q_file, "q")
    if not logits:
        for name, values in ((p_name, p_vals), (q_name, q_vals)):
            if any(math.isinf(v) for v in values):
                raise InvalidInput(name, ",".join(f"{v:g}" for v in values), "probabilities must be finite")
    temps = _temperatures(p_temperature, q_temperature, logits)
    if logits:
        p_vals = model.softmax(p_vals, temps[0], name=p_name).tolist()  # type: ignore[arg-type]
        q_vals = model.softmax(q_vals, temps[1], name=q_name).tolist()  # type: ignore[arg-type]
    p_arr, q_arr = model.validate_pair(p_vals, q_vals, normalize=normalize, names=(p_name, q_name))
    return model.acceptance_report(
        p_arr, q_arr, normalized=normalize, from_logits=logits, p_temperature=temps[0], q_temperature=temps[1]
    )


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
    rounds, notices = read_plan_log(file)
    return Outcome(model.compare_plans(rounds), warnings=notices)


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


def _counters(
    drafts: int | None, accepted_per_position: Any, draft_tokens: int | None, file: Path | None
) -> dict[str, Any]:
    """The counters from --file or from the options."""
    if file is not None:
        if drafts is not None or accepted_per_position is not None or draft_tokens is not None:
            raise InvalidInput("--file", str(file), "give the counters in --file or as options, not both")
        return read_metrics(file)
    if drafts is None or accepted_per_position is None:
        raise InvalidInput(
            "--drafts", "missing", "give --drafts and --accepted-per-position (or --file, or --prometheus)"
        )
    counters: dict[str, Any] = {"drafts": drafts, "accepted_per_position": list(accepted_per_position)}
    if draft_tokens is not None:
        counters["draft_tokens"] = draft_tokens
    return counters


def _prometheus_only(
    prometheus: Path | None, before: Path | None, model_name: str | None, **others: Any
) -> None:
    """--before and --model-name need --prometheus, which replaces the other counter options."""
    if prometheus is None:
        for flag, value in (("--before", before), ("--model-name", model_name)):
            if value is not None:
                raise InvalidInput(flag, str(value), "applies to --prometheus files only")
        return
    for flag, value in others.items():
        if value is not None:
            raise InvalidInput(flag, str(value), "give the counters as --prometheus or as this, not both")


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
    others = {"--drafts": drafts, "--accepted-per-position": accepted_per_position}
    _prometheus_only(
        prometheus, before, model_name, **others, **{"--draft-tokens": draft_tokens, "--file": file}
    )
    costs = None
    if target_cost is not None:
        costs = parse_costs(target_cost, draft_cost, verify_cost, verify_cost_model, overhead)
    elif any(c is not None for c in (draft_cost, verify_cost, verify_cost_model)) or overhead:
        raise InvalidInput(
            "--target-cost", "missing", "costs need c_t too (the cost of one plain target step)"
        )
    if prometheus is not None:
        from infer_opt.inputs.prometheus import metrics_from_prometheus

        return metrics_from_prometheus(prometheus, before=before, model_name=model_name, costs=costs)
    return model.rates_from_counts(
        **_counters(drafts, accepted_per_position, draft_tokens, file), costs=costs
    )


app.command("speedup", help=SPEEDUP_HELP)(speedup)
app.command("acceptance", help=ACCEPTANCE_HELP)(acceptance)
app.command("plans", help=PLANS_HELP)(plans)
app.command("from-metrics", help=METRICS_HELP)(from_metrics)
