"""CUDA/HIP-graph replays: how much of their GPU time gets a family and a FLOP/byte formula,
without and with their capture trace (issue 41's goals).

For each shared capture + replay pair (vLLM FULL decode, vLLM PIECEWISE prefill/decode, SGLang
batch-32 decode) it runs the ``infer-opt trace`` analysis of the replay alone and with
``--capture``, and prints:

* the share of GPU time with a family (from an op's formula or from the kernel's name; goal
  ≥ 95 %) and with a FLOP/byte formula (goal ≥ 80 % once the capture is given),
* how many graph launches and GPU events were linked to the capture, and the wall time,
* where the formula-less time is once linked: the top op groups without a formula, with their
  recorded shapes (the measured reason a goal is missed).

``--all`` also prints the family coverage of every shared trace (the classifier on eager,
compiled and engine traces of both vendors).

    python benchmarks/bench_graph_replays.py [--traces ../shared/traces] [--all]
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from pathlib import Path

from infer_opt.trace.analyze import analyze

PAIRS = (
    ("vLLM FULL decode (bs 32)", "vllm_decode_full__graph_execution", "vllm_decode_full__capture_traces__"),
    (
        "vLLM PIECEWISE prefill+decode",
        "vllm_prefilldecode_piecewise__graph_execution",
        "vllm_prefilldecode_piecewise__capture_traces__",
    ),
    ("SGLang decode (bs 32)", "sglang_decode__sglang_Qwen3-8B_decode", "sglang_decode__capture_traces__"),
)
PREFIX = "tracelens__inference__"


def _shares(result) -> tuple[float, float]:
    family = math.fsum(c.fraction for c in result.family_coverage if c.reason != "none")
    formula = math.fsum(c.fraction for c in result.coverage if c.reason == "modelled")
    return family, formula


def _one(folder: Path, label: str, replay: str, capture: str) -> None:
    (rep,) = folder.glob(f"{PREFIX}{replay}.json.gz")
    (cap,) = folder.glob(f"{PREFIX}{capture}*.json.gz")
    t0 = time.perf_counter()
    alone = analyze([rep]).result
    t1 = time.perf_counter()
    linked = analyze([rep], capture=[cap]).result
    t2 = time.perf_counter()
    fam0, formula0 = _shares(alone)
    fam1, formula1 = _shares(linked)
    link = linked.captures[0]
    print(f"\n## {label}: {rep.name}\n   capture {cap.name}")
    print(f"  replay alone:   with a family {fam0:6.1%}   with a formula {formula0:6.1%}   ({t1 - t0:.2f} s)")
    print(f"  with --capture: with a family {fam1:6.1%}   with a formula {formula1:6.1%}   ({t2 - t1:.2f} s)")
    print(
        f"  linked: {link.replays_linked}/{link.replays} graph launches, "
        f"{link.kernels_linked}/{link.kernels} GPU events, labels {', '.join(link.labels) or '-'}"
    )
    gpu_s = math.fsum(c.time_s for c in linked.coverage) or 1.0
    missing = [g for g in linked.ops if g.bound == "unknown" and g.flops == 0 and g.bytes == 0]
    print("  GPU time without a formula once linked (top op groups, recorded input shapes):")
    for g in missing[:6]:
        print(f"    {g.time_s / gpu_s:6.1%}  {g.name}  {g.shapes[:90]}")


def _all(folder: Path) -> None:
    print("\n## Family coverage of every shared trace (kernel names and op formulas)")
    for path in sorted(folder.glob("*.json.gz")):
        r = analyze([path]).result
        if not r.family_coverage:
            print(f"  {'no GPU time':>8}  {path.name}")
            continue
        fam, formula = _shares(r)
        print(f"  {fam:8.1%}  (formula {formula:6.1%})  {path.name}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--traces", type=Path, default=Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"
    )
    parser.add_argument("--all", action="store_true", help="also the family coverage of every shared trace")
    args = parser.parse_args()
    if not args.traces.is_dir():
        print(f"no traces folder {args.traces}", file=sys.stderr)
        return 1
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"bench_graph_replays: Python {platform.python_version()}, {platform.machine()}, {when}")
    for label, replay, capture in PAIRS:
        _one(args.traces, label, replay, capture)
    if args.all:
        _all(args.traces)
    return 0


if __name__ == "__main__":
    sys.exit(main())
