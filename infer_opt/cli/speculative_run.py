"""``infer-opt speculative run``: run speculative decoding, measure it, and hold it against the model."""

from __future__ import annotations

from typing import Any

from infer_opt.cli.common import (
    MAX_REPS,
    AutoDtypeOpt,
    DeviceOpt,
    ThreadsOpt,
    option,
    progress_bar,
    reps_option,
    seed_option,
    warmup_option,
)
from infer_opt.cli.output import Outcome, with_output
from infer_opt.cli.speculative import app
from infer_opt.cli.types import Count, CountRange, Number
from infer_opt.errors import RunFailure
from infer_opt.requests import MAX_K, SpeculativeRunRequest

SeedOpt = seed_option("the prompt and the sampler")
WarmupOpt = warmup_option("Untimed decodings before timing.")
RepsOpt = reps_option("Timed decodings of each kind.")

HELP = """Run speculative decoding for real and compare the measured speedup with the cost model's.

A round: the draft proposes k tokens over its KV cache, the target verifies them in one forward
over k + 1 positions, the exact rule accepts or corrects (greedy: accept iff the draft is the
target's argmax), both caches are truncated to the committed tokens. Plain decoding of the same
target from the same prompt is timed alike. Measured speedup = plain time / speculative time;
predicted S = c_t·E[N] / (k·c_d + c_v(k) + c_m) with the costs measured in this run and the
realised α_i. With --greedy (the default) the output must equal plain greedy decoding token for
token (exit 1 otherwise).

Drafts: self:N (the target's first N layers, its final norm and LM head; it shares the target's
weights and the KV cache of those layers) or any model with the target's vocabulary (a built-in
draft is built with it). Batch 1, random weights, a seeded random prompt.

Examples:

  infer-opt speculative run --target gpt2-small --draft self:4 --k 3 --threads 1

  infer-opt speculative run --target tiny --draft self:1 --sweep-k 1..6 --plot run.png

  infer-opt speculative run --target llama-tiny --draft self:1 --temperature 1.0 --new-tokens 128 --json
"""


TargetOpt = option(str, "--target", help="Target model: built-in name or a factory returning DecoderLM.")
DraftOpt = option(
    str, "--draft", help="self:N (the target's first N layers) or a model sharing its vocabulary."
)
KOpt = option(int | None, "--k", parse=Count(1, MAX_K), help="Draft length (default 4).")
SweepKOpt = option(
    Any, "--sweep-k", parse=CountRange(1, MAX_K), help="Run every k in A..B (or a list 1,2,4); plot S vs k."
)
NewTokensOpt = option(int, "--new-tokens", parse=Count(1, 100_000), help="Tokens N to decode.")
GreedyOpt = option(bool, "--greedy", help="Greedy decoding (the default).")
TemperatureOpt = option(
    float | None, "--temperature", parse=Number(0, low_open=True), help="Sample at temperature T instead."
)
PromptLenOpt = option(int, "--prompt-len", parse=Count(1, 1 << 20), help="Random prompt tokens P.")
CostRepsOpt = option(
    int, "--cost-reps", parse=Count(1, MAX_REPS), help="Timed calls of each cost c_t, c_d, c_v(k), c_m."
)


@app.command("run", help=HELP)
@with_output(plot=True)
def run(
    target: TargetOpt = "gpt2-small",
    draft: DraftOpt = "self:4",
    k: KOpt = None,
    sweep_k: SweepKOpt = None,
    new_tokens: NewTokensOpt = 64,
    greedy: GreedyOpt = False,
    temperature: TemperatureOpt = None,
    prompt_len: PromptLenOpt = 32,
    seed: SeedOpt = 0,
    threads: ThreadsOpt = None,
    device: DeviceOpt = "auto",
    dtype: AutoDtypeOpt = "auto",
    warmup: WarmupOpt = 1,
    reps: RepsOpt = 5,
    cost_reps: CostRepsOpt = 20,
) -> Any:
    from infer_opt.profilers import speculative_run as core

    request = SpeculativeRunRequest(
        target=target, draft=draft, k=k, sweep_k=sweep_k, new_tokens=new_tokens, greedy=greedy,
        temperature=temperature, prompt_len=prompt_len, seed=seed, threads=threads, device=device,
        dtype=dtype, warmup=warmup, reps=reps, cost_reps=cost_reps,
    )  # fmt: skip
    with progress_bar("speculative run") as update:
        result = core.run(request, progress=update)
    if result.tokens_identical is False:
        failed = ", ".join(str(p.k) for p in result.points if p.tokens_identical is False)
        error = RunFailure(
            f"greedy speculative output differs from plain greedy output (k = {failed}; see above)"
        )
        return Outcome(result, error=error)
    stopped = next((n for n in result.warnings if n.code == "spec_run_interrupted"), None)
    if stopped is not None:  # Ctrl-C: the whole rounds are kept, shown and written to --out
        from infer_opt.errors import Interrupted

        kept = f"interrupted after {stopped['rounds']} of {stopped['asked']} rounds"
        return Outcome(result, error=Interrupted(f"{kept}: every k's timings of those rounds are kept"))
    return result
