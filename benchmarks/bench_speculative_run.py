"""Speculative decoding, measured against its cost model (issue 15).

For k = 1..6 at one CPU thread: plain and speculative decoding of the same prompt, timed alike
(``infer_opt.profilers.speculative_run``), the measured speedup against the prediction
``S = c_t·E[N] / (k·c_d + c_v(k) + c_m)`` from costs measured in the same run and the realised
α_i, and the relative error (goal: within 10% for every k). Each configuration runs twice
(an A/A repeat) so the spread between two identical runs can be read beside the error.

To explain what is left, one more speculative decoding per k runs with every model forward
timed apart (not part of the timed repetitions): per round, the time inside the forwards and
the time outside them (sampling, the acceptance test and residual draw, cache truncation,
Python), against the model's round time k·c_d + c_v(k) + c_m.

    python benchmarks/bench_speculative_run.py                       # gpt2-small, self:4, greedy and T = 1
    python benchmarks/bench_speculative_run.py --quick               # smoke test: tiny, k = 1..2, seconds
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import time
from typing import Any

import numpy as np
import torch

from infer_opt.profilers import speculative_run
from infer_opt.profilers.models import random_tokens
from infer_opt.profilers.speculative_costs import ModelPair
from infer_opt.results.speculative_run import SpecRunResult


class TimedModel:
    """A model whose forwards are timed (host clock: the CPU runs them synchronously)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.lm_head = model.lm_head
        self.config = model.config
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, ids: torch.Tensor, cache: Any) -> torch.Tensor:
        start = time.perf_counter()
        out = self.model(ids, cache)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return out


def split_time(pair: ModelPair, result: SpecRunResult, k: int) -> dict[str, float]:
    """One untimed-by-the-harness speculative decoding with every forward timed: per round, the
    seconds in the draft's and the target's forwards and the seconds outside them."""
    target, draft = TimedModel(pair.target), TimedModel(pair.draft)
    timed = ModelPair(target, draft, pair.target_name, pair.draft_name, pair.vocab_size)
    prompt = random_tokens(1, result.prompt_len, pair.vocab_size, seed=result.seed)[0].tolist()
    t_cache, d_cache = speculative_run.new_caches(pair, result.prompt_len + result.new_tokens + k + 1)
    speculative_run.prefill_pair(pair, t_cache, d_cache, prompt)
    decoding = speculative_run.Decoding(result.temperature)
    rng = np.random.default_rng(result.seed)
    start = time.perf_counter()
    trace = speculative_run.decode_speculative(
        timed, t_cache, d_cache, prompt, result.new_tokens, k, decoding, rng
    )
    total = time.perf_counter() - start
    rounds = trace.rounds
    return {
        "round_s": total / rounds,
        "draft_s": draft.seconds / rounds,
        "target_s": target.seconds / rounds,
        "outside_s": (total - draft.seconds - target.seconds) / rounds,
        "draft_forwards": draft.calls / rounds,
    }


def run(pair: ModelPair, args: argparse.Namespace, temperature: float | None) -> SpecRunResult:
    return speculative_run.run_pair(
        pair,
        ks=list(range(1, args.k_max + 1)),
        new_tokens=args.new_tokens,
        prompt_len=args.prompt_len,
        temperature=temperature,
        seed=args.seed,
        warmup=1,
        reps=args.reps,
        cost_reps=args.cost_reps,
        sweep=True,
    )


def table(runs: list[SpecRunResult], splits: dict[int, dict[str, float]]) -> str:
    first = runs[0]
    lines = [
        "| k | α_1..α_k (run 1) | E[N] pred / meas | measured S | predicted S | rel. error "
        "| A/A: rel. error run 2 | round: model / measured / in forwards / outside (ms) |",
        "|---:|---|---|---:|---:|---:|---:|---|",
    ]
    for i, p in enumerate(first.points):
        alphas = ", ".join("—" if a is None else f"{a:.2f}" for a in p.alpha_per_position)
        others = ", ".join(f"{r.points[i].relative_error:+.1%}" for r in runs[1:])
        s = splits[p.k]
        measured_round = p.time.median_s / p.rounds
        lines.append(
            f"| {p.k} | {alphas} | {p.expected_tokens_predicted:.2f} / {p.expected_tokens_measured:.2f} "
            f"| {p.measured_speedup:.3f} | {p.predicted_speedup:.3f} | {p.relative_error:+.1%} | {others} "
            f"| {p.round_time_predicted_s * 1e3:.1f} / {measured_round * 1e3:.1f} / "
            f"{(s['draft_s'] + s['target_s']) * 1e3:.1f} / {s['outside_s'] * 1e3:.2f} |"
        )
    costs = ", ".join(f"{c.name} {c.median_s * 1e3:.3g} ms" for c in first.costs)
    plain = first.plain_time
    lines.append("")
    lines.append(
        f"Plain decoding {plain.median_s / first.new_tokens * 1e3:.1f} ms/token "
        f"(IQR/median {plain.rel_iqr:.0%}); costs over {first.cost_context} cached positions: {costs}."
    )
    identical = [r.tokens_identical for r in runs]
    lines.append(
        f"Greedy output identical to plain: {identical}; warnings: {[n.code for n in first.warnings]}"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--target", default="gpt2-small")
    parser.add_argument("--draft", default="self:4")
    parser.add_argument("--k-max", type=int, default=6)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--cost-reps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2, help="identical runs per configuration (A/A)")
    parser.add_argument("--temperatures", default="greedy,1.0", help="comma-separated: greedy or T")
    parser.add_argument("--quick", action="store_true", help="smoke test: tiny, k = 1..2, 12 tokens")
    args = parser.parse_args()
    if args.quick:
        args.target, args.draft, args.k_max, args.new_tokens = "tiny", "self:1", 2, 12
        args.prompt_len, args.reps, args.cost_reps, args.repeats = 4, 2, 2, 2
    torch.set_num_threads(args.threads)
    pair = speculative_run.load_run_pair(args.target, args.draft, device="cpu", dtype=torch.float32)
    cpu = platform.processor() or platform.machine()
    print(
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; {cpu}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s); {pair.target_name} / {pair.draft_name}, "
        f"prompt {args.prompt_len}, N = {args.new_tokens}, reps {args.reps}"
    )
    for text in args.temperatures.split(","):
        temperature = None if text.strip() == "greedy" else float(text)
        start = time.perf_counter()
        runs = [run(pair, args, temperature) for _ in range(args.repeats)]
        splits = {p.k: split_time(pair, runs[0], p.k) for p in runs[0].points}
        errors = [abs(p.relative_error) for r in runs for p in r.points]
        print(f"\n### {'greedy' if temperature is None else f'T = {temperature:g}'}\n")
        print(table(runs, splits))
        print(
            f"max |relative error| {max(errors):.1%}, median {statistics.median(errors):.1%}; "
            f"wall time {time.perf_counter() - start:.0f} s; load average {os.getloadavg()[0]:.2f}"
        )


if __name__ == "__main__":
    main()
