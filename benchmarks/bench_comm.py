"""Goals of issue 14, measured: ``infer-opt comm`` against an independent all_reduce, the α-β
fit's error, and the tensor-parallel step predicted against ``profile --tp``.

    python benchmarks/bench_comm.py [--nproc 2] [--rounds 5] [--model tiny] [--seq-len 128]

1. **all_reduce at 1 MiB**: per round, ``infer-opt comm --nproc N --collective all_reduce
   --min-size 1MiB --max-size 1MiB`` (A), ``torchrun … benchmarks/independent_all_reduce.py``
   (B, plain torch.distributed, nothing from infer_opt) and A again (the A/A repeat), the order
   of A and B alternating between rounds. Both report the slowest rank's median. Target: A within
   10% of B.
2. **α-β fit**: one default sweep (every collective, 4 B .. 16 MiB on the CPU) and each fit's
   median |t̂ − t|/t over its sizes; the sweep is saved for step 3.
3. **predict vs profile**: ``profile MODEL --tp N`` (prefill and decode) measured, against the
   prediction ``max_r compute_r + Σ t(S)`` with the collectives from step 2's fit and the
   compute of one rank's shard (a) timed alone on one thread, (b) the roofline's sum over its ops.
   ``profile MODEL --threads 1`` (N = 1) gives the speedup measured and predicted.

Prints markdown tables for docs/benchmarks.md. Each launch takes a few seconds of start-up; the
whole run takes a few minutes on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-3000:]}")
    try:
        return json.loads(done.stdout)  # an envelope (infer-opt --json)
    except json.JSONDecodeError:
        return json.loads(done.stdout.strip().splitlines()[-1])  # one JSON line (the reference script)


def ours_all_reduce(nproc: int, n_bytes: int, env: dict[str, str]) -> float:
    size = str(n_bytes)
    cmd = [sys.executable, "-m", "infer_opt", "comm", "--nproc", str(nproc), "--collective",
           "all_reduce", "--min-size", size, "--max-size", size, "--warmup", "5", "--reps", "20",
           "--no-save", "--json"]  # fmt: skip
    return _run(cmd, env)["result"]["collectives"][0]["points"][0]["time_s"]


def theirs_all_reduce(nproc: int, n_bytes: int, env: dict[str, str]) -> float:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "benchmarks/independent_all_reduce.py", "--bytes", str(n_bytes), "--warmup", "5",
           "--reps", "20"]  # fmt: skip
    return _run(cmd, env)["time_s"]


def part_all_reduce(args: argparse.Namespace, env: dict[str, str]) -> None:
    n_bytes = 1 << 20
    rows = []
    for r in range(args.rounds):
        first, second = (
            (ours_all_reduce, theirs_all_reduce) if r % 2 == 0 else (theirs_all_reduce, ours_all_reduce)
        )
        t1, t2 = first(args.nproc, n_bytes, env), second(args.nproc, n_bytes, env)
        a, b = (t1, t2) if first is ours_all_reduce else (t2, t1)
        rows.append((a, b, ours_all_reduce(args.nproc, n_bytes, env)))
    print(f"\n### all_reduce of 1 MiB over {args.nproc} gloo ranks ({args.rounds} rounds)\n")
    print("| round | infer-opt comm (A) | independent (B) | A again (A') | A/B | A/A' |")
    print("|---:|---:|---:|---:|---:|---:|")
    for i, (a, b, a2) in enumerate(rows):
        cells = [
            f"{a * 1e6:.0f} µs",
            f"{b * 1e6:.0f} µs",
            f"{a2 * 1e6:.0f} µs",
            f"{a / b:.3f}",
            f"{a / a2:.3f}",
        ]
        print(f"| {i + 1} | " + " | ".join(cells) + " |")
    ratios = [a / b for a, b, _ in rows]
    repeat = [a / a2 for a, _, a2 in rows]
    print(f"\nmedian A/B = {statistics.median(ratios):.3f} (target within 10%); "
          f"median A/A' = {statistics.median(repeat):.3f} (the noise floor)")  # fmt: skip


def part_fit(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "infer_opt", "comm", "--nproc", str(args.nproc), "--json"]
    result = _run(cmd, env)["result"]
    print(f"\n### α-β fit, every collective, 4 B .. 16 MiB, {args.nproc} gloo ranks\n")
    print("| collective | sizes | α | β | S* = α·β | median \\|t̂−t\\|/t | max |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    errors = []
    for c in result["collectives"]:
        if c["alpha_s"] is None:
            continue
        errors.append(c["fit_median_abs_rel_error"])
        cells = [
            c["collective"],
            str(len(c["points"])),
            f"{c['alpha_s'] * 1e6:.0f} µs",
            f"{c['beta_bytes_per_s'] / 1e9:.2f} GB/s",
            f"{c['crossover_bytes'] / 1024:.0f} KiB",
            f"{100 * c['fit_median_abs_rel_error']:.1f}%",
            f"{100 * c['fit_max_abs_rel_error']:.1f}%",
        ]
        print("| " + " | ".join(cells) + " |")
    print(f"\nmedian over collectives of the fit's median error: {100 * statistics.median(errors):.1f}%")
    return result


def _profile(model: str, mode: str, seq_len: int, env: dict[str, str], tp: int) -> float:
    extra = ["--tp", str(tp)] if tp > 1 else ["--threads", "1"]
    cmd = [sys.executable, "-m", "infer_opt", "profile", model, "--mode", mode, "--seq-len", str(seq_len),
           "--context", str(seq_len), "--reps", "20", "--json", *extra]  # fmt: skip
    result = _run(cmd, env)["result"]
    return max(r["step_time_s"] for r in result["ranks"]) if tp > 1 else result["step"]["median_s"]


def _predicted(model: str, mode: str, seq_len: int, tp: int, comm: Any) -> tuple[float, float, float]:
    """(compute timed alone, roofline compute, predicted communication) of one rank's step."""
    import torch

    from infer_opt.profilers import model_profile, tensor_parallel_predict

    torch.set_num_threads(1)
    loaded = tensor_parallel_predict.compute_shard(
        model, tp=tp, batch=1, seq_len=seq_len, device="cpu", dtype=torch.float32
    )
    step = tensor_parallel_predict.shard_step(loaded, mode=mode, context=seq_len, new_tokens=1, device="cpu")
    timed = tensor_parallel_predict.measured_compute_s(step, device="cpu", reps=20)
    fit = model_profile.resolve_fit("cpu", torch.float32).fit
    roof = (
        math.nan
        if fit is None
        else tensor_parallel_predict.roofline_compute_s(tensor_parallel_predict.rank_ops(loaded, step), fit)
    )
    pred = tensor_parallel_predict.predict_tp(
        loaded.config, tp=tp, mode=mode, batch=1, seq_len=seq_len, new_tokens=1,
        dtype_bytes=4, compute_per_rank_s=[0.0] * tp, comm=comm,
    )  # fmt: skip
    return timed, roof, pred.communication_s


def _predict_cli(args: argparse.Namespace, mode: str, env: dict[str, str], comm_file: str) -> float | None:
    """``infer-opt predict MODEL --tp N``: the calibrated operator model per rank + the α-β fit."""
    if not args.calibration:
        return None
    cmd = [sys.executable, "-m", "infer_opt", "predict", args.model, "--mode", mode, "--seq-len",
           str(args.seq_len), "--context", str(args.seq_len), "--tp", str(args.nproc), "--comm", comm_file,
           "--calibration", args.calibration, "--threads", "1", "--json"]  # fmt: skip
    return _run(cmd, env)["result"]["tensor_parallel"]["step_s"]


def part_predict(args: argparse.Namespace, env: dict[str, str], comm_data: dict[str, Any]) -> None:
    from infer_opt.results import save_result
    from infer_opt.results.comm import CommResult

    comm = CommResult.from_dict(comm_data)
    comm_file = str(save_result(Path(tempfile.mkdtemp(prefix="bench-comm-")) / "comm.json", comm))
    what = f"{args.model}, {args.seq_len} tokens"
    print(f"\n### predict --tp {args.nproc} vs profile --tp {args.nproc} ({what})\n")
    header = [
        "mode",
        "measured N=1",
        "measured N",
        "predict --tp (calibrated ops + α-β)",
        "error",
        "timed shard + α-β",
        "error",
        "roofline + α-β",
        "error",
        "speedup measured",
        "speedup (timed shard)",
    ]
    print("| " + " | ".join(header) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mode in ("prefill", "decode"):
        one = _profile(args.model, mode, args.seq_len, env, 1)
        measured = _profile(args.model, mode, args.seq_len, env, args.nproc)
        timed, roof, communication = _predicted(args.model, mode, args.seq_len, args.nproc, comm)
        p1, p2 = timed + communication, roof + communication
        calibrated = _predict_cli(args, mode, env, comm_file)
        cal_cells = (
            "— | —" if calibrated is None
            else f"{calibrated * 1e3:.2f} ms | {100 * (calibrated / measured - 1):+.0f}%"
        )  # fmt: skip
        print(f"| {mode} | {one * 1e3:.2f} ms | {measured * 1e3:.2f} ms | {cal_cells} | {p1 * 1e3:.2f} ms | "
              f"{100 * (p1 / measured - 1):+.0f}% | {p2 * 1e3:.2f} ms | {100 * (p2 / measured - 1):+.0f}% | "
              f"{one / measured:.2f}× | {one / p1:.2f}× |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: allreduce,fit,predict")
    parser.add_argument(
        "--calibration", default=None, help="an operator calibration at one thread: adds `predict --tp`"
    )
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    cache = tempfile.mkdtemp(prefix="bench-comm-")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "INFER_OPT_CACHE": cache}
    os.environ["INFER_OPT_CACHE"] = cache
    machine = platform.processor() or platform.machine()
    when = f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC"
    load = f"load average {os.getloadavg()[0]:.1f}"
    print(f"- date: {when}; {machine}, {os.cpu_count()} cores, {load}; Python {platform.python_version()}")
    print(f"- command: python benchmarks/bench_comm.py {' '.join(sys.argv[1:])}")
    if "allreduce" not in skip:
        part_all_reduce(args, env)
    if "fit" not in skip:
        comm = part_fit(args, env)
        if "predict" not in skip:
            part_predict(args, env, comm)


if __name__ == "__main__":
    main()
