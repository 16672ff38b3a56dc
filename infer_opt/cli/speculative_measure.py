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
from infer_opt.errors import InvalidInput
from infer_opt.inputs.speculative import read_metrics

#: --k-max, --context and repetitions above these would run for a very long time
MAX_K = 64
MAX_CONTEXT = 1 << 20
MAX_ROUNDS = 100_000

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


def _alpha_inputs(
    alpha: float | None, alphas: tuple[float, ...] | None, metrics: Path | None
) -> tuple[Any, Any, str | None]:
    given = [
        name
        for name, v in (("--alpha", alpha), ("--alphas", alphas), ("--metrics", metrics))
        if v is not None
    ]
    if len(given) > 1:
        raise InvalidInput(given[1], "with " + given[0], "give one of --alpha, --alphas or --metrics")
    if alpha is not None:
        return alpha, None, None
    if alphas is not None:
        return None, list(alphas), "--alphas"
    if metrics is None:
        return None, None, None
    from infer_opt.cost_models import speculative as calc
    from infer_opt.cost_models.speculative_measure import defined_alphas

    try:
        counters = read_metrics(metrics)
        rates = calc.rates_from_counts(**counters)
    except InvalidInput as exc:
        where = exc.option if exc.option != "--file" else "--metrics"
        raise InvalidInput(where, exc.value, exc.expected) from None
    return None, defined_alphas([p.conditional for p in rates.positions]), f"--metrics {metrics.name}"


TargetOpt = option(str, "--target", help="Target model: built-in name or a factory returning DecoderLM.")
DraftOpt = option(str, "--draft", help="Draft model (a built-in is built with the target's vocabulary).")
KMaxOpt = option(int, "--k-max", parse=Count(1, MAX_K), help="Measure c_v(k) for k = 1..K_MAX.")
ContextOpt = option(int, "--context", parse=Count(0, MAX_CONTEXT), help="KV-cache length the steps run over.")
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
RoundsOpt = option(int, "--rounds", parse=Count(1, MAX_ROUNDS), help="Rounds for --simulate-acceptance.")
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
    if k is not None and k > k_max:
        raise InvalidInput("--k", k, f"must be a whole number in [1, {k_max}] (--k-max)")
    a, rates, rates_source = _alpha_inputs(alpha, alphas, metrics)
    from infer_opt.profilers import device as devices
    from infer_opt.profilers.speculative_measure import measure_speculative

    dev = devices.resolve_device(device)
    torch_dtype = devices.parse_dtype(dtype, dev)
    with progress_bar("speculative measure") as update:
        return measure_speculative(
            target, draft, k_max=k_max, context=context, device=dev, dtype=torch_dtype, warmup=warmup,
            reps=reps, alpha=a, alphas=rates, alphas_source=rates_source, k=k, simulate=simulate_acceptance,
            simulate_rounds=rounds, seed=seed, progress=update,
        )  # fmt: skip
