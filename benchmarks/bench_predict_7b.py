"""Predicting a 7B Llama without its weights: time, peak memory, FLOPs (issue 13 goal).

Predicts ``hf:llama`` with the published Llama-2-7B sizes (hidden 4096, intermediate 11008,
32 layers, 32 heads, vocabulary 32000) for a prefill of ``--seq-len`` (2048) tokens, in this
process, and reports:

* the wall time of ``predict`` (recording on fake tensors + prediction; goal < 30 s),
* the process's peak resident memory, and its growth during the prediction (goal < 2 GiB;
  float32 weights alone would be 27 GB),
* the recorded FLOPs against ``2·P·T + 4·B·H·T²·d·L`` (goal: within a few percent).

    python benchmarks/bench_predict_7b.py [--calibration FILE] [--seq-len 2048] [--threads 1]

Without ``--calibration`` it uses the calibration cached for this CPU, dtype float32 and thread
count; without one it predicts from a synthetic calibration (the time and memory figures hold,
the predicted step time then means nothing and is marked so).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import torch

LLAMA_7B = {
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
}


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def synthetic() -> object:
    from infer_opt.results.calibration import CalibrationResult, DeviceRoofline, HostCalibration

    return CalibrationResult(
        device="cpu", device_name="synthetic", device_key="synthetic", dtype="float32", threads=1,
        warm_reuse_bytes=2**22, cold_reuse_bytes=2**29, roofline=DeviceRoofline(1e11, 2e10, 2e-6),
        host=HostCalibration(5e-7, 2e-6),
    )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", default=None)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from infer_opt.profilers import calibration as cal
    from infer_opt.profilers import predict as pr

    if args.calibration:
        calibration, source = cal.load_calibration(args.calibration), args.calibration
    else:
        calibration = cal.load_cached("cpu", torch.float32).result
        source = (
            str(cal.cache_path("cpu", torch.float32)) if calibration else "synthetic (no calibration saved)"
        )
        calibration = calibration or synthetic()
    before = peak_rss_gib()
    start = time.perf_counter()
    result = pr.predict(
        "hf:llama", calibration, calibration_source=source, mode="prefill", batch=1, seq_len=args.seq_len,
        hf_overrides=LLAMA_7B,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = peak_rss_gib()
    print(f"# {' '.join(sys.argv)}")
    print(
        f"model: hf:llama 7B sizes, {result.n_params / 1e9:.2f} B parameters, prefill {args.seq_len} tokens"
    )
    print(f"calibration: {source}")
    print(f"predict wall time: {wall:.1f} s (recording {result.record_s:.1f} s)   goal < 30 s")
    print(
        f"peak RSS: {after:.2f} GiB (before predicting {before:.2f} GiB, growth {after - before:.2f} GiB)"
        "   goal < 2 GiB"
    )
    rel = result.flops_vs_analytic
    print(
        f"FLOPs: recorded {result.flops:.4e}, 2·P·T + 4·B·H·T²·d·L = {result.flops_analytic:.4e}, "
        f"{100 * rel:+.2f}%"
        if rel is not None
        else "FLOPs: no analytic count"
    )
    label = "" if args.calibration or "synthetic" not in source else " (synthetic calibration: meaningless)"
    print(
        f"predicted step: {result.step_time_s:.3g} s ±{100 * result.rel_uncertainty:.0f}%, "
        f"{100 * result.extrapolated_share:.0f}% of the op time extrapolated{label}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
