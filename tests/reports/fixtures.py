"""One deterministic result per result kind, for the renderer and plot tests.

Calculators and checks are computed by their core functions from fixed inputs. The
measured kinds (profile, kernels, roofline) are read from ``fixtures/<kind>.json``:
trimmed real CPU runs with rounded numbers, so the snapshots stay readable and never
depend on the machine; ``amortize-measure`` is built by its core function from
hand-made bucket measurements, ``speculative-measure`` is a frozen ``analyze`` output.
``compare`` compares two kernel runs made into three runs each (:func:`in_runs`); ``ab`` is an
A/A of them and ``noise-floor`` the noise it measured.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np

from infer_opt.results import Result, result_class
from infer_opt.results.amortize_measure import BucketSpec, MeasuredBucket
from infer_opt.results.speculative_run import SpecRunResult

DATA = Path(__file__).parent / "fixtures"

LENGTHS = [12, 40, 40, 57, 100, 100, 128, 130, 200, 256, 300, 333, 480, 512, 700, 1000]

AMORTIZE_CSV = """bucket,compile_s,calls,eager_ms,compiled_ms
128,20,50000,2,1.5
256,25,40000,3.5,2.6
512,30,8000,7,5.5
1024,40,1000,15,12
"""


def _from_json(kind: str) -> Result:
    data = json.loads((DATA / f"{kind}.json").read_text(encoding="utf-8"))
    return result_class(kind).from_dict(data)


def amdahl() -> Result:
    from infer_opt.cost_models.amdahl import Part, combined

    return combined([Part("attention", 0.35, 3.0), Part("mlp", 0.4, 1.2)], added=0.02, target=1.5)


def amortize() -> Result:
    from infer_opt.cost_models.amortization import amortize as run

    return run(3.0, 2e-3, 1.5e-3, 10_000)


def amortize_buckets() -> Result:
    from infer_opt.cost_models.amortization import amortize_buckets as run
    from infer_opt.cost_models.amortization import read_bucket_csv

    return run(read_bucket_csv(AMORTIZE_CSV, source="buckets.csv"), source="buckets.csv")


def buckets() -> Result:
    from infer_opt.cost_models.bucketing import optimize, sample_from_lengths

    sample = sample_from_lengths(LENGTHS, source="lengths.txt")
    return optimize(sample, 3, batch_size=4, given_bounds=(128, 256, 512, 1024))


def _costs():
    from infer_opt.results.speculative import Costs

    return Costs(target_s=10e-3, draft_s=1e-3, verify_base_s=12e-3, overhead_s=1e-3)


def speculative_speedup() -> Result:
    from infer_opt.cost_models.speculative import speculative_speedup as run

    return run(3, _costs(), alpha=0.8, sweep_kmax=8)


def speculative_acceptance() -> Result:
    from infer_opt.cost_models.speculative import acceptance_report

    return acceptance_report(np.array([0.5, 0.25, 0.15, 0.1]), np.array([0.4, 0.4, 0.1, 0.1]))


def speculative_plans() -> Result:
    from infer_opt.cost_models.speculative import PlanRound, compare_plans

    rounds = [
        PlanRound("k=2", 0.013, 2),
        PlanRound("k=2", 0.014, 3),
        PlanRound("k=4", 0.016, 1),
        PlanRound("k=4", 0.017, 5),
        PlanRound("plain", 0.010, 1),
    ]
    return compare_plans(rounds)


def speculative_metrics() -> Result:
    from infer_opt.cost_models.speculative import rates_from_counts

    return rates_from_counts(1000, [800, 600, 400], costs=_costs())


def attention_memory() -> Result:
    from infer_opt.cost_models.attention import attention_memory as run

    return run(1024, 1024, 16, 2, 64, dtype="float16", causal=True)


def attention_window() -> Result:
    from infer_opt.cost_models.attention import window_bound

    return window_bound(0.01, 2.0)


def attention_check() -> Result:
    from infer_opt.checks.mask_alignment import AttentionCase, AttentionCheckResult

    def case(name: str, path: str, mask: str, tq: int, error: float, *, wrong: bool = False) -> AttentionCase:
        matches = error <= 1e-5
        return AttentionCase(
            case=name,
            path=path,
            mask=mask,
            tq=tq,
            tk=128,
            causal_offset=128 - tq,
            max_abs_error=error,
            tolerance=1e-5,
            finite=True,
            matches_reference=matches,
            expected_to_fail=wrong,
            passed=(not matches) if wrong else matches,
        )

    cases = (
        case("decode", "sdpa", "none", 1, 2.4e-7),
        case("chunk", "sdpa", "bottom-right", 4, 3.1e-7),
        case("chunk", "blocked", "bottom-right", 4, 4.8e-7),
        case("chunk", "sdpa", "top-left (is_causal)", 4, 0.31, wrong=True),
    )
    return AttentionCheckResult(
        dtype="float32", batch=2, heads=4, head_dim=32, seed=0, device="cpu", cases=cases, passed=True,
        block_size=32, sdpa_is_causal_top_left=True, torch_version="2.13.0",
    )  # fmt: skip


def speculative_verify() -> Result:
    import infer_opt

    return infer_opt.speculative_verify(vocab=3, k=2, trials=2000, seed=0)


def _summary(median_s: float, rel: float = 0.02):
    from infer_opt.stats import Summary

    return Summary.from_samples([median_s * (1 - rel), median_s, median_s * (1 + rel)])


def amortize_measure() -> Result:
    from infer_opt.profilers import amortize_measure as amortize_measure_module

    def bucket(batch: int, seq_len: int, eager_s: float, compiled_s: float, compile_s: float):
        return MeasuredBucket(
            bucket=f"{batch}x{seq_len}", batch=batch, seq_len=seq_len,
            eager_s=eager_s, eager=_summary(eager_s), eager_cold_s=eager_s * 3,
            compiled_s=compiled_s, compiled=_summary(compiled_s),
            first_call_s=compile_s + eager_s, compile_s=compile_s, output_rel_error=2e-7,
            measure_s=compile_s + 1,
        )  # fmt: skip

    rows = [bucket(1, 128, 2e-3, 1.5e-3, 20.0), bucket(1, 512, 7e-3, 5.5e-3, 30.0)]
    failed = MeasuredBucket("1x2048", 1, 2048, 30e-3, _summary(30e-3), error="backend raised: out of memory")
    specs = [BucketSpec(1, 128), BucketSpec(1, 512), BucketSpec(1, 2048), BucketSpec(1, 4096)]
    return amortize_measure_module.build_result(
        [*rows, failed], model="tiny", device="cpu", device_name="Example CPU", dtype="float32",
        backend="inductor", cuda_graphs=False, warmup=3, reps=3,
        compile_caches="disabled: every compile is cold", requested=specs,
        calls={"1x128": 50_000, "1x512": 8_000, "1x2048": 100}, calls_source="calls.csv",
    )  # fmt: skip


def speculative_measure() -> Result:
    """Frozen output of ``speculative_measure.analyze`` on c_t = 10 ms, c_d = 1 ms, c_m = 0.2 ms,
    c_v(k) = 9 ms + 1 ms·k (k = 1..4), α = 0.8: its fit must not make the snapshot depend
    on the last bits of a least-squares solve."""
    return _from_json("speculative-measure")


def speculative_run() -> Result:
    """Hand-made timings and round counts through ``speculative_run.make_point``: gpt2-small-like costs
    (c_t = 38 ms, c_d = 20 ms, c_v(k) = 40 ms + 10 ms·k), greedy, 16 tokens, k = 1..3."""
    from infer_opt.notices import Notice
    from infer_opt.profilers import speculative_run as speculative_run_module
    from infer_opt.results.speculative_measure import MeasuredCost

    what = "over 40 cached"
    costs = [
        MeasuredCost("c_t", f"target decode step (1 token {what})", _summary(38e-3)),
        MeasuredCost("c_d", f"draft decode step (1 token {what})", _summary(20e-3)),
        *(
            MeasuredCost(
                f"c_v({k})", f"target verification: {k + 1} new positions {what}", _summary(40e-3 + 10e-3 * k)
            )
            for k in (1, 2, 3)
        ),
        MeasuredCost("c_m", "cache rollback/commit of both models (host time)", _summary(100e-9)),
    ]
    medians = speculative_run_module.cost_medians(costs)
    tokens = [7, 7, 3, 9, 9, 9, 1, 4, 4, 2, 8, 8, 8, 8, 5, 6]
    plain = _summary(16 * 38.5e-3)
    rounds = {1: (10, 9, [6]), 2: (8, 7, [6, 4]), 3: (7, 5, [4, 3, 2])}
    points = tuple(
        speculative_run_module.make_point(
            speculative_run_module.SpeculativeTrace(k, list(tokens), n, full, acc),
            _summary(16 * 38.5e-3 / s),
            plain,
            medians,
            new_tokens=16,
            plain_tokens=tokens,
        )
        for (k, (n, full, acc)), s in zip(rounds.items(), (1.02, 0.95, 0.88), strict=True)
    )
    return SpecRunResult(
        target="gpt2-small", draft="self:4", vocab_size=50257, device="cpu", device_name="Example CPU",
        dtype="float32", threads=1, prompt_len=32, new_tokens=16, temperature=None, seed=0, warmup=1,
        reps=3, cost_context=40, plain_time=plain, plain_tokens_per_s=16 / plain.median_s,
        plain_tokens=tuple(tokens), costs=tuple(costs), target_step_s=medians["c_t"],
        draft_step_s=medians["c_d"], bookkeeping_s=medians["c_m"], points=points, sweep=True,
        headline_k=1, draft_note="the target's first 4 of 12 layers with its final norm and LM head",
        warnings=(Notice("high_variance", {"rel_iqr": 0.14}, "c_v(2)"),),
    )  # fmt: skip


def profile() -> Result:
    return _from_json("profile")


def kernels() -> Result:
    return _from_json("kernels")


def roofline() -> Result:
    return _from_json("roofline")


def calibration() -> Result:
    """A synthetic operator calibration (two matmul families on their base roofline)."""
    return _from_json("calibration")


def predict() -> Result:
    """``predict`` of tiny decode with a batch sweep, from that calibration (record time fixed)."""
    return _from_json("predict")


def validate() -> Result:
    """A hand-made validation (four points, six operator comparisons, one on-grid notice) measured
    in two passes, the first 4% faster and the second 4% slower than the points' medians."""
    from infer_opt.profilers import validate as validate_module

    base = _from_json("validate")
    passes = []
    for factor in (0.96, 1.04):
        points = [
            replace(p, measured_s=p.measured_s * factor, measured_host_s=p.measured_host_s * factor)
            for p in base.points  # type: ignore[attr-defined]
        ]
        ops = [replace(o, measured_s=o.measured_s * factor) for o in base.ops]  # type: ignore[attr-defined]
        passes.append((points, ops))
    points, ops = validate_module.merge_passes(passes)
    return replace(
        base,  # type: ignore[arg-type]
        points=tuple(points),
        ops=tuple(ops),
        passes=2,
        noise=validate_module.pass_noise(passes),
        **validate_module.summarize(points, ops),
    )


def kernels_new() -> Result:
    """The kernel run of :func:`kernels` with the matmuls 1.5× faster and one case dropped."""
    base = kernels()
    rows = []
    for row in base.rows[:-1]:  # type: ignore[attr-defined]
        factor = 1 / 1.5 if row.family == "matmul" else 1.0
        samples = tuple(s * factor for s in row.samples_s)
        rows.append(replace(row, samples_s=samples, time_s=row.time_s * factor if row.time_s else None))
    return replace(base, rows=tuple(rows))


def in_runs(result: Result, drifts: tuple[float, ...], speed: dict[str, float] | None = None) -> Result:
    """``result``'s kernel rows as if measured in ``len(drifts)`` runs: run k's samples are
    the row's samples times ``drifts[k]`` (a drift shared by every case of the run) divided by
    ``speed[family]``; samples pooled, run medians kept."""
    from infer_opt.stats import Summary

    rows = []
    for row in result.rows:  # type: ignore[attr-defined]
        if row.time_s is None:
            rows.append(row)
            continue
        factor = 1.0 / (speed or {}).get(row.family, 1.0)
        runs = [[v * d * factor for v in row.samples_s] for d in drifts]
        samples = tuple(v for run in runs for v in run)
        summary = Summary.from_samples(samples)
        medians = tuple(float(np.median(run)) for run in runs)
        rows.append(
            replace(row, samples_s=samples, summary=summary, time_s=summary.median_s, run_medians_s=medians)
        )
    return replace(result, rows=tuple(rows), runs=len(drifts))


def kernels_runs() -> Result:
    """:func:`kernels` in three runs, the second 4% slower and the third 3% faster throughout."""
    return in_runs(kernels(), (1.0, 1.04, 0.97))


def kernels_runs_new() -> Result:
    """Three runs of :func:`kernels_new` (matmuls 1.5× faster, one case dropped) with their own drift."""
    return in_runs(kernels_new(), (1.02, 0.99, 1.05))


def kernels_runs_again() -> Result:
    """Three more runs of the unchanged suite (an A/A partner of :func:`kernels_runs`)."""
    return in_runs(kernels(), (0.99, 1.06, 1.01))


def compare() -> Result:
    from infer_opt.cost_models.compare_runs import compare_results

    return compare_results(
        kernels_runs(), kernels_runs_new(), base_name="base.json", new_name="new.json", bootstrap=500,
        commands=("infer-opt kernels --runs 3 --out base.json", "infer-opt kernels --runs 3 --out new.json"),
    )  # fmt: skip


AA_COMMAND = "infer-opt kernels --suite quick --threads 1"


def noise_floor() -> Result:
    from infer_opt.cost_models.compare_runs import noise_floor as measure

    return measure([kernels_runs(), kernels_runs_again()], command=AA_COMMAND)


def ab() -> Result:
    """An A/A of :data:`AA_COMMAND` (two rounds of three runs a side), as ``infer-opt ab`` saves it."""
    from infer_opt.cost_models.compare_runs import compare_results
    from infer_opt.results.ab import AbResult, AbRun

    comparison = compare_results(kernels_runs(), kernels_runs_again(), base_name="base", new_name="new")
    runs = tuple(
        AbRun(side, r, f"ab-runs/{side}-{r}.json", wall)
        for r, (b, n) in enumerate([(9.1, 9.4), (9.0, 9.2)], start=1)
        for side, wall in (("base", b), ("new", n))
    )
    return AbResult(
        base_command=AA_COMMAND, new_command=AA_COMMAND, base_env=(), new_env=(), rounds=2,
        folder="ab-runs", runs=runs, comparison=comparison, noise_floor=noise_floor(),
        noise_saved_to="~/.cache/infer-opt/noise/cpu-example-cpu-1t-float32-kernels.json",
    )  # fmt: skip


def comm() -> Result:
    """A 2-rank gloo sweep of two collectives, frozen (4 significant digits) from
    ``cost_models.comm.sweep`` over per-rank samples on t = α + S/β (all_reduce α = 150 µs,
    β = 1.2 GB/s; all_gather 120 µs, 0.9 GB/s), ±3% alternating, rank 1 slower, bootstrap 100:
    the snapshot must not depend on the last bits of a least-squares solve."""
    return _from_json("comm")


def profile_tp() -> Result:
    """``profile tiny --tp 2 --seq-len 64`` on 2 gloo ranks, trimmed and rounded."""
    return _from_json("profile-tp")


def tune_capture_sizes() -> Result:
    from infer_opt.cost_models import capture_sizes as cs
    from infer_opt.cost_models import capture_tuning as ct

    dist = cs.distribution([1, 3, 7, 13, 30, 64, 100], [50, 30, 20, 15, 10, 5, 3], source="batches.csv")
    curve = cs.cost_curve([1, 4, 16, 64], [2e-3, 2.2e-3, 2.8e-3, 4.5e-3], source="cost.csv")
    inputs = (("distribution", "batches.csv (as given)"), ("cost", "table cost.csv (as given)"))
    return ct.tune(
        ct.Inputs(
            dist=dist,
            curve=curve,
            current=(1, 2, 4, 8, 16, 32),
            current_source="--current (as given)",
            max_captures=3,
            memory=ct.Memory(per_capture=8 * 2**20),
            eager_overhead_s=2e-3,
            capture_time_s=0.5,
            inputs=inputs,
        )
    )


def tune_speculative() -> Result:
    from infer_opt.cost_models import capture_sizes as cs
    from infer_opt.cost_models import speculative_tuning as st

    target = cs.cost_curve([1, 64, 512, 4096], [10e-3, 12e-3, 40e-3, 300e-3], source="target.csv")
    draft = cs.cost_curve([1, 4096], [1e-3, 20e-3], source="draft.csv")
    dist = cs.distribution([1, 8, 64, 512, 2048], [40, 30, 20, 8, 2], source="batches.csv")
    return st.tune(
        [0.8, 0.7, 0.6], target, draft, dist, overhead_s=5e-4, inputs={"alphas": "--alphas (as given)"}
    )


def trace() -> Result:
    from infer_opt.trace.analyze import analyze

    path = Path(__file__).resolve().parents[1] / "trace" / "fixtures" / "model_step.json"
    return replace(analyze([path]).result, files=("model_step.json",))


def trace_compare() -> Result:
    from infer_opt.trace.compare import compare_traces

    base = fixture("trace")
    slower = tuple(replace(g, time_s=g.time_s * 1.5) if g.family == "matmul" else g for g in base.ops)
    return compare_traces(base, replace(base, ops=slower), base_name="base.json", new_name="new.json")


#: result kind -> a function building its fixture (every kind in infer_opt.registry needs one)
FIXTURES: dict[str, Callable[[], Result]] = {
    "amdahl": amdahl,
    "amortize": amortize,
    "amortize-buckets": amortize_buckets,
    "buckets": buckets,
    "speculative-speedup": speculative_speedup,
    "speculative-acceptance": speculative_acceptance,
    "speculative-plans": speculative_plans,
    "speculative-metrics": speculative_metrics,
    "attention-memory": attention_memory,
    "attention-window": attention_window,
    "attention-check": attention_check,
    "speculative-verify": speculative_verify,
    "profile": profile,
    "kernels": kernels,
    "roofline": roofline,
    "compare": compare,
    "ab": ab,
    "noise-floor": noise_floor,
    "amortize-measure": amortize_measure,
    "speculative-measure": speculative_measure,
    "speculative-run": speculative_run,
    "comm": comm,
    "profile-tp": profile_tp,
    "calibration": calibration,
    "predict": predict,
    "validate": validate,
    "validate-trace": lambda: __import__("tests.trace.gpu_traces", fromlist=["x"]).validate_trace_fixture(),
    "tune-capture-sizes": tune_capture_sizes,
    "tune-speculative": tune_speculative,
    "trace": trace,
    "trace-compare": trace_compare,
}


@cache
def fixture(kind: str) -> Result:
    """The (cached) fixture result of ``kind``."""
    return FIXTURES[kind]()
