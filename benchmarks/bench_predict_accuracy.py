"""How accurate is the calibrated predictor on this CPU? (SPEC §5.1, issue 13 goals)

1. Calibrates the operators at ``--threads`` (default 1) with ``infer-opt calibrate`` in a
   process of its own, timing it (goal: about 3 minutes at one thread) — or reads
   ``--calibration FILE``.
2. Validates, on shapes **off** the calibration grid, the built-in models and the example
   factory: prefill at batch 1 and 3 × sequence 40 and 200 (M = 40, 120, 200, 600 tokens: between
   the grid's 32/48, 96/128, 128/256 and 512/1024) and decode at batch 1 and 5 over contexts of
   200 and 700 (between the attention grid's 64/256 and 256/1024).
3. Prints per model and mode the step MAPE and p90, and over everything: the step MAPE for
   prefill and decode apart (goal ≤ 5% each) and the operator MAPE over operators of at least
   10 µs (goal ≤ 10%), with the sub-10 µs bucket and the host term.
4. ``--aa`` measures every point twice (A/A): the MAPE between the two measurements — per step,
   per operator (≥ 10 µs) and for the host term — is the noise floor no predictor can beat on
   this machine at this moment; the predictor's errors on the second pass are kept too
   (``aa_pass``).
5. ``--out`` also keeps one row per model and mode and pass (``rows``): the step MAPE and mean
   signed error, and the two speed probes' ratios to the calibration (matmul, dispatch).

    python benchmarks/bench_predict_accuracy.py [--threads 1] [--calibration FILE] [--quick] [--aa]
        [--reps 10] [--out results.json]

``--quick`` (a smoke test) validates tiny and llama-tiny only, two points each. The accuracy
needs a quiet machine: the script prints the load average before and after.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

import torch

from infer_opt.profilers import calibration as cal
from infer_opt.profilers import validate as validate_module
from infer_opt.profilers.device import cpu_model_name
from infer_opt.results.validate import NOISE_HOST, NOISE_OPS, SMALL_OP_S
from infer_opt.steps import Shape, StepSettings

EXAMPLE = "examples/my_model.py:make_model"
MODELS = ("tiny", "llama-tiny", "gpt2-small", "llama-small", EXAMPLE)
PREFILL = {"batch": (1, 3), "seq_len": (40, 200)}
DECODE = {"batch": (1, 5), "context": (200, 700)}
QUICK_PREFILL = {"batch": (1,), "seq_len": (40, 200)}
QUICK_DECODE = {"batch": (1,), "context": (200, 700)}


def calibration(args: argparse.Namespace) -> tuple[Any, str, float]:
    """The calibration to validate with: ``--calibration FILE``, or one made now by ``infer-opt
    calibrate`` in a process of its own (timed): calibrating in this process would leave it
    with gigabytes of freed buffers and read-buffers, and the first steps validated after it ran
    up to 1.6x slower than in a fresh process."""
    if args.calibration:
        return cal.load_calibration(args.calibration), args.calibration, 0.0
    path = cal.cache_path("cpu", torch.float32)
    command = [sys.executable, "-m", "infer_opt", "calibrate", "--threads", str(args.threads)]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    return cal.load_calibration(path), str(path), wall


def runs(models: tuple[str, ...], quick: bool) -> list[tuple[str, str, dict[str, tuple[int, ...]]]]:
    out = []
    for model in models:
        out.append((model, "prefill", QUICK_PREFILL if quick else PREFILL))
        if model != EXAMPLE:
            out.append((model, "decode", QUICK_DECODE if quick else DECODE))
    return out


def validate_all(calib: Any, source: str, args: argparse.Namespace) -> list[Any]:
    models = ("tiny", "llama-tiny") if args.quick else MODELS
    results = []
    for model, mode, grid in runs(models, args.quick):
        start = time.perf_counter()
        settings = StepSettings(model, "cpu", "float32", Shape(new_tokens=8), warmup=3, reps=args.reps)
        result = validate_module.validate(
            settings, calib, calibration_source=source, modes=(mode,), grid=grid
        )
        print(
            f"{model:34s} {mode:8s} step MAPE {pct(result.step_mape)} "
            f"p90 {pct(result.step_p90_abs_rel_error)}"
            f"  ops≥10µs MAPE {pct(result.op_mape)} (n={result.op_count})  <10µs {pct(result.small_op_mape)}"
            f"  host MAPE {pct(result.host.mape)}  probes {ratio(result.probe_slowdown)}"
            f" / {ratio(result.dispatch_probe_slowdown)}"
            f"  [{time.perf_counter() - start:.0f} s]",
            flush=True,
        )
        results.append(result)
    return results


def pct(value: float | None) -> str:
    return "   —  " if value is None else f"{100 * value:5.1f}%"


def ratio(value: float | None) -> str:
    return "  —  " if value is None else f"{value:.2f}×"


def overall(results: list[Any]) -> dict[str, Any]:
    """Pooled over every validation: step MAPE/p90 per mode, operators, small ops, host."""
    from infer_opt.cost_models.op_model import error_stats

    points = [p for r in results for p in r.points]
    ops = [o for r in results for o in r.ops]
    summary: dict[str, Any] = {}
    for mode in ("prefill", "decode"):
        chosen = [p for p in points if p.mode == mode]
        s = error_stats([p.predicted_s for p in chosen], [p.measured_s for p in chosen])
        summary[f"{mode}_step"] = {
            "n": s.n,
            "mape": s.mape,
            "p90": s.p90_abs_rel_error,
            "bias": s.mean_signed_rel_error,
        }
    large = [o for o in ops if o.measured_s >= SMALL_OP_S]
    small = [o for o in ops if o.measured_s < SMALL_OP_S]
    s = error_stats([o.predicted_s for o in large], [o.measured_s for o in large])
    summary["ops"] = {"n": s.n, "mape": s.mape, "p90": s.p90_abs_rel_error}
    s = error_stats([o.predicted_s for o in small], [o.measured_s for o in small])
    summary["small_ops"] = {"n": s.n, "mape": s.mape}
    hosts = [p for p in points if p.measured_host_s > 0]
    s = error_stats([p.predicted_host_s for p in hosts], [p.measured_host_s for p in hosts])
    summary["host"] = {"n": s.n, "mape": s.mape, "bias": s.mean_signed_rel_error}
    by_family: dict[str, list[float]] = {}
    for o in large:
        by_family.setdefault(o.family, []).append(abs(o.rel_error))
    for key in ("probe_slowdown", "dispatch_probe_slowdown"):
        slowdowns = [getattr(r, key) for r in results if getattr(r, key) is not None]
        if slowdowns:
            middle = statistics.median(slowdowns)
            summary[key] = {"median": middle, "min": min(slowdowns), "max": max(slowdowns)}
    summary["ops_by_family"] = {
        f: {"n": len(v), "mape": statistics.fmean(v)} for f, v in sorted(by_family.items())
    }
    return summary


def rows(results: list[Any], label: str) -> list[dict[str, Any]]:
    """One row per validation: its step MAPE and bias and its speed probes' ratios."""
    from infer_opt.cost_models.op_model import error_stats

    out = []
    for r in results:
        s = error_stats([p.predicted_s for p in r.points], [p.measured_s for p in r.points])
        out.append(
            {
                "pass": label,
                "model": r.model,
                "mode": r.points[0].mode if r.points else None,
                "step_mape": s.mape,
                "step_bias": s.mean_signed_rel_error,
                "probe_slowdown": r.probe_slowdown,
                "dispatch_probe_slowdown": r.dispatch_probe_slowdown,
            }
        )
    return out


def aa_noise(first: list[Any], second: list[Any]) -> dict[str, float | None]:
    """MAPE of the second measurement against the first — the noise floor no predictor can beat
    here: per mode for the step, over the operators of at least 10 µs (matched by point, name and
    shapes), and for the host term (validate's own comparison of passes, over every model)."""
    passes = []
    for results in (first, second):
        points: list[Any] = []
        ops: list[Any] = []
        for r in results:
            ops += [dataclasses.replace(o, point=len(points) + o.point) for o in r.ops]
            points += r.points
        passes.append((points, ops))
    noise = validate_module.pass_noise(passes)
    keys = {"prefill": "prefill", "decode": "decode", "ops": NOISE_OPS, "host": NOISE_HOST}
    return {name: noise[key].mape if key in noise else None for name, key in keys.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calibration", default=None, help="calibration file (default: calibrate now)")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: tiny and llama-tiny, two points each"
    )
    parser.add_argument("--aa", action="store_true", help="measure every point twice (noise floor)")
    parser.add_argument("--out", default=None, help="write the figures as JSON")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    print(f"# {' '.join(sys.argv)}")
    print(
        f"# {dt.datetime.now().isoformat(timespec='seconds')}  {cpu_model_name()}  {os.cpu_count()} CPUs  "
        f"threads {args.threads}  torch {torch.__version__}  python {platform.python_version()}"
    )
    print(f"# load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
    calib, source, wall = calibration(args)
    print(
        f"calibration: {source}  ({f'made now in {wall:.0f} s' if wall else 'read from file'}, "
        f"{sum(len(f.points) for f in calib.families)} shapes, {len(calib.families)} families)",
        flush=True,
    )
    results = validate_all(calib, source, args)
    summary = overall(results)
    table = rows(results, "first")
    if args.aa:
        print("A/A: measuring every point again", flush=True)
        again = validate_all(calib, source, args)
        summary["aa_mape"] = aa_noise(results, again)
        summary["aa_pass"] = {k: v for k, v in overall(again).items() if k != "ops_by_family"}
        table += rows(again, "A/A")
    load_after = os.getloadavg()
    print(f"# load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    print(json.dumps({"calibration_s": wall, **summary}, indent=1, default=float))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(
                {
                    "calibration_s": wall,
                    "load_before": load_before,
                    "load_after": load_after,
                    **summary,
                    "rows": table,
                },
                handle,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
