"""``infer-opt speculative measure``: measure c_t, c_d, c_v(k) and c_m, then decide k."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infer_opt.cli.common import (
    AutoDtypeOpt,
    DeviceOpt,
    option,
    progress_bar,
    reps_option,
    seed_option,
    warmup_option,
)
from infer_opt.cli.output import with_output
from infer_opt.cli.speculative import app
from infer_opt.cli.types import Count, InputFile, Number, NumberList
from infer_opt.requests import MAX_K, MAX_SIZE, SpeculativeMeasureRequest

# Rich keeps single newlines in help text, so each paragraph is one (concatenated) line.
HELP = (
    "Measure the costs of speculative decoding for a target/draft pair on this device and turn them "
    "into decisions: predicted speedup per α and k, the best k, and the break-even α.\n\n"
    "c_t = one target decode step, c_d = one draft step, c_v(k) = one target pass over k+1 new "
    "positions (fitted as a + b·k), c_m = the KV-cache rollback/commit of a round; "
    "S = c_t·E[N] / (k·c_d + c_v(k) + c_m), E[N] = (1 - α^(k+1))/(1 - α); S = 1 at the break-even α.\n\n"
    "Models: built-ins (a built-in draft is built with the target's vocabulary) or a factory returning "
    "infer_opt.profilers.models.DecoderLM. Costs are measurements; speedups are predictions.\n\n"
    "Examples:\n\n"
    "  infer-opt speculative measure\n\n"
    "  infer-opt speculative measure --target llama-small --draft llama-tiny --k-max 6 --alpha 0.8\n\n"
    "  infer-opt speculative measure --metrics metrics.json --plot spec.png --json > spec.json\n\n"
    "  infer-opt speculative measure --target tiny --simulate-acceptance\n"
)


TargetOpt = option(str, "--target", help="Target model: built-in name or a factory returning DecoderLM.")
DraftOpt = option(str, "--draft", help="Draft model (a built-in is built with the target's vocabulary).")
KMaxOpt = option(int, "--k-max", parse=Count(1, MAX_K), help="Measure c_v(k) for k = 1..K_MAX.")
ContextOpt = option(int, "--context", parse=Count(0, MAX_SIZE), help="KV-cache length the steps run over.")
WarmupOpt = warmup_option("Untimed calls before each measurement.")
RepsOpt = reps_option("Timed repetitions per measurement.")
AlphaOpt = option(
    float | None, "--alpha", parse=Number(0, 1), help="Predict the speedup for this constant α in [0, 1]."
)
AlphasOpt = option(
    Any, "--alphas", parse=NumberList(low=0, high=1), help="Predict for per-position rates α_1,…,α_k."
)
MetricsOpt = option(
    Path | None,
    "--metrics",
    parse=InputFile(),
    help="Predict from serving-engine counters (the from-metrics JSON format).",
)
KOpt = option(
    int | None, "--k", parse=Count(1, MAX_K), help="Draft length for the prediction (default: the best k)."
)
SimulateOpt = option(
    bool,
    "--simulate-acceptance",
    help="Run the reference sampler with the two models' distributions to estimate α "
    "(random weights: a plumbing check, not a quality estimate).",
)
RoundsOpt = option(int, "--rounds", parse=Count(1, 100_000), help="Rounds for --simulate-acceptance.")
SeedOpt = seed_option("the prompts and the sampler")


@app.command("measure", help=HELP)
@with_output(plot=True)
def measure(
    target: TargetOpt = "gpt2-small",
    draft: DraftOpt = "tiny",
    k_max: KMaxOpt = 8,
    context: ContextOpt = 128,
    device: DeviceOpt = "auto",
    dtype: AutoDtypeOpt = "auto",
    warmup: WarmupOpt = 2,
    reps: RepsOpt = 10,
    alpha: AlphaOpt = None,
    alphas: AlphasOpt = None,
    metrics: MetricsOpt = None,
    k: KOpt = None,
    simulate_acceptance: SimulateOpt = False,
    rounds: RoundsOpt = 32,
    seed: SeedOpt = 0,
) -> Any:
    from infer_opt.profilers.speculative_costs import run

    request = SpeculativeMeasureRequest(
        target=target, draft=draft, k_max=k_max, context=context, device=device, dtype=dtype, warmup=warmup,
        reps=reps, alpha=alpha, alphas=alphas, metrics=metrics, k=k, simulate_acceptance=simulate_acceptance,
        rounds=rounds, seed=seed,
    )  # fmt: skip
    with progress_bar("speculative measure") as update:
        return run(request, progress=update)
