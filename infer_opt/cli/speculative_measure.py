"""``infer-opt speculative measure``: measure c_t, c_d, c_v(k) and c_m, then decide k."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from infer_opt.cli.common import (
    AutoDtypeOpt,
    CsvOpt,
    DeviceOpt,
    FormatOpt,
    JsonOpt,
    MarkdownOpt,
    OutOpt,
    PlotOpt,
    check_outputs,
    emit,
)
from infer_opt.cli.speculative import app, read_metrics
from infer_opt.errors import InvalidInput
from infer_opt.units import parse_float, parse_float_list, parse_int

#: --k-max, --context and repetitions above these would run for a very long time
MAX_K = 64
MAX_CONTEXT = 1 << 20
MAX_REPS = 10_000
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


def _alpha_inputs(alpha: str | None, alphas: str | None, metrics: Path | None) -> tuple[Any, Any, str | None]:
    given = [name for name, v in (("--alpha", alpha), ("--alphas", alphas), ("--metrics", metrics)) if v]
    if len(given) > 1:
        raise InvalidInput(given[1], "with " + given[0], "give one of --alpha, --alphas or --metrics")
    if alpha is not None:
        return parse_float(alpha, option="--alpha", low=0, high=1), None, None
    if alphas is not None:
        return None, parse_float_list(alphas, option="--alphas", low=0, high=1), "--alphas"
    if metrics is None:
        return None, None, None
    from infer_opt.cost_models import speculative as calc
    from infer_opt.profilers.spec_measure import defined_alphas

    try:
        counters = read_metrics(metrics)
        rates = calc.rates_from_counts(**counters)
    except InvalidInput as exc:
        where = exc.option if exc.option != "--file" else "--metrics"
        raise InvalidInput(where, exc.value, exc.expected) from None
    return None, defined_alphas([p.conditional for p in rates.positions]), f"--metrics {metrics.name}"


@app.command("measure", help=HELP)
def measure(
    target: Annotated[
        str, typer.Option("--target", help="Target model: built-in name or a factory returning DecoderLM.")
    ] = "gpt2-small",
    draft: Annotated[
        str, typer.Option("--draft", help="Draft model (a built-in is built with the target's vocabulary).")
    ] = "tiny",
    k_max: Annotated[str, typer.Option("--k-max", help="Measure c_v(k) for k = 1..K_MAX.")] = "8",
    context: Annotated[str, typer.Option("--context", help="KV-cache length the steps run over.")] = "128",
    device: DeviceOpt = "auto",
    dtype: AutoDtypeOpt = "auto",
    warmup: Annotated[str, typer.Option("--warmup", help="Untimed calls before each measurement.")] = "2",
    reps: Annotated[str, typer.Option("--reps", help="Timed repetitions per measurement.")] = "10",
    alpha: Annotated[
        str | None, typer.Option("--alpha", help="Predict the speedup for this constant α in [0, 1].")
    ] = None,
    alphas: Annotated[
        str | None, typer.Option("--alphas", help="Predict for per-position rates α_1,…,α_k.")
    ] = None,
    metrics: Annotated[
        Path | None,
        typer.Option(
            "--metrics", help="Predict from serving-engine counters (the from-metrics JSON format)."
        ),
    ] = None,
    k: Annotated[
        str | None, typer.Option("--k", help="Draft length for the prediction (default: the best k).")
    ] = None,
    simulate_acceptance: Annotated[
        bool,
        typer.Option(
            "--simulate-acceptance",
            help="Run the reference sampler with the two models' distributions to estimate α "
            "(random weights: a plumbing check, not a quality estimate).",
        ),
    ] = False,
    rounds: Annotated[str, typer.Option("--rounds", help="Rounds for --simulate-acceptance.")] = "32",
    seed: Annotated[str, typer.Option("--seed", help="Seed of the prompts and the sampler.")] = "0",
    json_out: JsonOpt = False,
    fmt: FormatOpt = None,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    plot: PlotOpt = None,
) -> None:
    k_top = parse_int(k_max, option="--k-max", low=1, high=MAX_K)
    n_context = parse_int(context, option="--context", low=0, high=MAX_CONTEXT)
    n_warmup = parse_int(warmup, option="--warmup", low=0, high=MAX_REPS)
    n_reps = parse_int(reps, option="--reps", low=1, high=MAX_REPS)
    k_given = None if k is None else parse_int(k, option="--k", low=1, high=k_top)
    n_rounds = parse_int(rounds, option="--rounds", low=1, high=MAX_ROUNDS)
    n_seed = parse_int(seed, option="--seed", low=0)
    a, rates, rates_source = _alpha_inputs(alpha, alphas, metrics)
    check_outputs(out, plot)

    from infer_opt.cli.kernels import progress_bar
    from infer_opt.profilers import device as devices
    from infer_opt.profilers.spec_measure import measure_speculative

    dev = devices.resolve_device(device)
    torch_dtype = devices.parse_dtype(dtype, dev)
    with progress_bar("speculative measure") as update:
        result = measure_speculative(
            target,
            draft,
            k_max=k_top,
            context=n_context,
            device=dev,
            dtype=torch_dtype,
            warmup=n_warmup,
            reps=n_reps,
            alpha=a,
            alphas=rates,
            alphas_source=rates_source,
            k=k_given,
            simulate=simulate_acceptance,
            simulate_rounds=n_rounds,
            seed=n_seed,
            progress=update,
        )
    emit(
        result,
        json_out=json_out,
        out=out,
        markdown=markdown,
        csv=csv,
        fmt=fmt,
        plot=plot,
        plot_fn=plot_measured,
    )


def plot_measured(result: Any, path: Path) -> Path:
    """Speedup vs k for several α, the break-even α per k, and c_v(k) measured vs fitted."""
    from infer_opt.profilers.spec_measure import plot_data
    from infer_opt.reports.plots import measure as plots

    return plots.plot_speculative(result, plot_data(result), path)
