"""Speed of ``infer-opt trace``: whole processes, as a user runs each.

1. The largest shared trace: the whole ``infer-opt trace FILE --json`` (read, timeline, op
   groups, coverage, what-ifs) against HTA 0.5 (``TraceAnalysis`` load +
   ``get_temporal_breakdown``), medians of alternated runs.
2. A synthetic trace of at most ``--gb`` GiB (uncompressed; the CLI reads inputs up to 1 GiB)
   generated into /tmp: the whole command, wall time and peak RSS, median of ``--runs``.

    python benchmarks/bench_trace_speed.py [--runs 3] [--gb 1.0] [--hta-python /work/hta-venv/bin/python]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"

OURS = "import sys; from infer_opt.cli.app import main; sys.argv[0] = 'infer-opt'; main()"
HTA = (
    "import sys, logging; logging.disable(logging.CRITICAL); from hta.trace_analysis import TraceAnalysis; "
    "TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)"
)


def timed(cmd: list[str]) -> tuple[float, float, float]:
    """(wall seconds, peak RSS GiB, user + system CPU seconds) of the child."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: its output goes nowhere
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)  # the analysis' warnings too
        os.execvp(cmd[0], cmd)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{cmd[:3]} failed ({status})")
    return wall, usage.ru_maxrss / (1 << 20), usage.ru_utime + usage.ru_stime


def synthetic(path: Path, gigabytes: float) -> int:
    """A Kineto-like trace of cpu_op / cuda_runtime / kernel / flow / python_function events."""
    import orjson

    target = int(gigabytes * (1 << 30))
    written, n, ts = 0, 0, 0.0
    with open(path, "wb") as f:
        f.write(b'{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],\n'
                b'"traceEvents": [\n')  # fmt: skip
        while written < target:
            batch = []
            for _ in range(2000):
                c = n
                batch += [
                    {
                        "ph": "X",
                        "cat": "python_function",
                        "name": "nn.Module: Linear_0",
                        "pid": 1,
                        "tid": 1,
                        "ts": ts,
                        "dur": 9.5,
                        "args": {"Python id": c, "Python parent id": 1},
                    },
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "aten::addmm",
                        "pid": 1,
                        "tid": 1,
                        "ts": ts + 0.25,
                        "dur": 8.5,
                        "args": {
                            "External id": c,
                            "Record function id": 0,
                            "Ev Idx": c,
                            "Input Dims": [[4096], [32, 4096], [4096, 4096], [], []],
                            "Input type": [
                                "c10::BFloat16",
                                "c10::BFloat16",
                                "c10::BFloat16",
                                "Scalar",
                                "Scalar",
                            ],
                            "Input Strides": [[1], [4096, 1], [1, 4096], [], []],
                            "Concrete Inputs": ["", "", "", "1", "1"],
                        },
                    },
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": "cudaLaunchKernel",
                        "pid": 1,
                        "tid": 1,
                        "ts": ts + 1.5,
                        "dur": 4.125,
                        "args": {"External id": c, "cbid": 211, "correlation": c},
                    },
                    {"ph": "s", "id": c, "pid": 1, "tid": 1, "ts": ts + 1.5, "cat": "ac2g", "name": "ac2g"},
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
                        "pid": 0,
                        "tid": 7,
                        "ts": ts + 6.0,
                        "dur": 7.75,
                        "args": {
                            "External id": c,
                            "queued": 0,
                            "device": 0,
                            "context": 1,
                            "stream": 7,
                            "correlation": c,
                            "registers per thread": 168,
                            "shared memory": 180224,
                            "blocks per SM": 0.25,
                            "warps per SM": 2.0,
                            "grid": [32, 1, 1],
                            "block": [384, 1, 1],
                            "est. achieved occupancy %": 0,
                        },
                    },
                    {
                        "ph": "f",
                        "id": c,
                        "pid": 0,
                        "tid": 7,
                        "ts": ts + 6.0,
                        "cat": "ac2g",
                        "name": "ac2g",
                        "bp": "e",
                    },
                ]
                n += 1
                ts += 10.0
            chunk = orjson.dumps(batch)[1:-1] + b",\n"
            if written + len(chunk) > target - 200:  # at most the target, the closing included
                n -= 2000
                break
            f.write(chunk)
            written += len(chunk)
        last = b'{"ph": "X", "cat": "user_annotation", "name": "end", "pid": 1, "tid": 1, "ts": 0, "dur": 1}'
        f.write(last + b'\n], "traceName": "synthetic"}\n')
    return n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--hta-python", default="/work/hta-venv/bin/python")
    parser.add_argument("--skip-synthetic", action="store_true")
    a = parser.parse_args()
    largest = max(SHARED.glob("*.json.gz"), key=lambda p: p.stat().st_size)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / largest.name).symlink_to(largest.resolve())
        ours, hta = [], []
        for _ in range(a.runs):  # alternated
            ours.append(timed([sys.executable, "-c", OURS, "trace", str(largest), "--json"])[0])
            hta.append(timed([a.hta_python, "-c", HTA, tmp])[0])
    mo, mh = statistics.median(ours), statistics.median(hta)
    print(f"largest shared trace: {largest.name} ({largest.stat().st_size / 1e6:.1f} MB gz)")
    print(f"  infer-opt trace --json (whole): median {mo:.2f} s {[f'{x:.2f}' for x in ours]}")
    print(f"  HTA load + temporal breakdown: median {mh:.2f} s {[f'{x:.2f}' for x in hta]}")
    print(f"  infer-opt is {mh / mo:.1f}x faster")
    if a.skip_synthetic:
        return
    path = Path("/tmp/infer_opt_synthetic_trace.json")
    kernels = synthetic(path, a.gb)
    runs = [timed([sys.executable, "-c", OURS, "trace", str(path), "--json"]) for _ in range(a.runs)]
    wall, rss, cpu = (statistics.median(r[i] for r in runs) for i in range(3))
    print(f"synthetic trace: {path.stat().st_size / (1 << 30):.3f} GiB, {kernels} kernels, "
          f"infer-opt trace --json: median {wall:.1f} s {[f'{r[0]:.1f}' for r in runs]}, "
          f"CPU {cpu:.1f} s, peak RSS {rss:.2f} GiB")  # fmt: skip
    path.unlink()


if __name__ == "__main__":
    main()
