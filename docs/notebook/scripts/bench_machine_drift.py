"""How much does this machine's speed move while nothing else runs? (the floor under
``validate``'s step errors, docs/benchmarks.md "Machine drift")

For ``--seconds``, round after round: a hot 256×256 matmul (median of 20 calls), a hot
1×128 by 128×128 matmul (``dispatch``: a call that is almost all dispatch and library entry,
median of 20), a read of 8 MiB (median of 5) and three model steps (tiny decode at batch 5
over 700 tokens, tiny prefill at batch 3 × 200, llama-tiny decode; median of 7 each). Prints,
per series, the spread of the rounds (p90 / p10, p50 / p10) and of their medians over 5 s and
15 s windows (max / min), and the correlation of each step with the matmul probe over the
windows: how far a calibration made at one moment can be from a measurement made at another,
and how much of that a probe would see.

    python docs/notebook/scripts/bench_machine_drift.py [--seconds 120] [--threads 1] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from infer_opt.profilers import model_profile, models, timing
from infer_opt.profilers.device import cpu_model_name

STEPS = (("tiny", "decode", 5), ("tiny", "prefill", 3), ("llama-tiny", "decode", 5))


def _median_s(fn: Callable[[], object], n: int) -> float:
    return timing.measure(fn, warmup=0, reps=n, time_cold=False).median_s


def steps_of(
    steps: Sequence[tuple[str, str, int]] = STEPS, seq_len: int = 200, context: int = 700
) -> dict[str, Callable[[], object]]:
    """The steps (model, mode, batch) built as ``profile`` builds them, by "model mode"
    (also used by ``bench_gated_timing.py``)."""
    out = {}
    for name, mode, batch in steps:
        loaded = models.load_model(name, batch_size=batch, seq_len=seq_len)
        out[f"{name} {mode}"] = model_profile.build_step(
            loaded, mode, context=context, new_tokens=1, device="cpu"
        ).fn
    return out


def probe_ns(x: torch.Tensor, w: torch.Tensor) -> int:
    """The dispatch probe as the speed-level scripts take it: ten ``x @ w`` run, then ten timed."""
    for _ in range(10):
        torch.mm(x, w)
    begin = time.perf_counter_ns()
    for _ in range(10):
        torch.mm(x, w)
    return time.perf_counter_ns() - begin


def median_ns(fn: Callable[[], object], n: int) -> float:
    """The median of ``n`` back-to-back calls of ``fn``, each timed on its own."""
    times = []
    for _ in range(n):
        begin = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - begin)
    return statistics.median(times)


def rounds(seconds: float) -> list[dict[str, float]]:
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    x, w = torch.randn(1, 128), torch.randn(128, 128)
    buffer = torch.randn(2 * 2**20)
    steps = steps_of()
    for fn in steps.values():
        for _ in range(50):
            fn()
    out = []
    start = time.time()
    while time.time() - start < seconds:
        row = {"t": time.time() - start, "matmul": _median_s(lambda: a @ b, 20)}
        row["dispatch"] = _median_s(lambda: x @ w, 20)
        row["read"] = _median_s(buffer.sum, 5)
        for key, fn in steps.items():
            row[key] = _median_s(fn, 7)
        out.append(row)
    return out


def summary(rows: list[dict[str, float]]) -> dict[str, object]:
    keys = [k for k in rows[0] if k != "t"]
    t = np.array([r["t"] for r in rows])
    values = np.log(np.array([[r[k] for k in keys] for r in rows]))
    out: dict[str, object] = {
        "rounds": len(rows),
        "p90_over_p10": {
            k: float(np.exp(np.percentile(values[:, i], 90) - np.percentile(values[:, i], 10)))
            for i, k in enumerate(keys)
        },
        "p50_over_p10": {
            k: float(np.exp(np.percentile(values[:, i], 50) - np.percentile(values[:, i], 10)))
            for i, k in enumerate(keys)
        },
    }
    for window in (5, 15):
        bins = (t // window).astype(int)
        medians = np.array([np.median(values[bins == b], axis=0) for b in np.unique(bins)])
        out[f"max_over_min_{window}s"] = {
            k: float(np.exp(medians[:, i].max() - medians[:, i].min())) for i, k in enumerate(keys)
        }
        if len(medians) > 2:
            corr = np.corrcoef(medians.T)[0]
            out[f"corr_with_matmul_{window}s"] = {k: float(corr[i]) for i, k in enumerate(keys)}
    return out


def start(doc: str, seconds: float | None, reps: int | None = None) -> argparse.Namespace:
    """The options of a timed machine benchmark (``--seconds`` when given a default, ``--reps``
    likewise, ``--threads``, ``--out``), its thread count set and its header printed (also used
    by ``bench_speed_levels.py``, ``bench_gated_timing.py`` and ``bench_idle_decay.py``)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    if seconds is not None:
        parser.add_argument("--seconds", type=float, default=seconds)
    if reps is not None:
        parser.add_argument("--reps", type=int, default=reps)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"# {' '.join(sys.argv)}")
    print(
        f"# {dt.datetime.now().isoformat(timespec='seconds')}  {cpu_model_name()}  {os.cpu_count()} CPUs  "
        f"threads {args.threads}  torch {torch.__version__}  load average {os.getloadavg()[0]:.2f}"
    )
    return args


def main() -> None:
    args = start(__doc__, 120.0)
    rows = rounds(args.seconds)
    result = summary(rows)
    for key, value in result.items():
        if isinstance(value, dict):
            print(f"{key:24s} " + "  ".join(f"{k}: {v:.3f}" for k, v in value.items()))
        else:
            print(f"{key:24s} {value}")
    if args.out:
        args.out.write_text(json.dumps({"summary": result, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
