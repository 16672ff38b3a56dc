"""Does ``compare`` stay quiet when nothing changed, and still find a real change? (issue 17)

Every measurement is a real ``infer-opt`` process, as a user would run it:

* **A/A, kernels**: ``infer-opt kernels --suite quick --threads 1 --runs 3`` twice back to
  back, then ``infer-opt compare``: cases flagged faster/slower (target: at most 1 of 33)
  and the headline (target: "no significant difference").
* **A/A, profile**: ``infer-opt profile --threads 1 --runs 3`` twice, then compare: operators
  flagged, categories flagged (target: none), headline (target: no significant difference).
* **Power**: ``infer-opt kernels --only matmul --runs 3`` at 1 thread, then at 2 threads,
  compared: the verdict and ratio of ``matmul n=1024`` (target: flagged faster, about 1.8×
  on the 2-core reference machine).

``--repeats N`` repeats the A/A pairs (the A/A repeat of docs/benchmarks.md); ``--smoke``
shrinks everything (a few kernels, 3 repetitions, a short model step) to check the script.
The planted 20% slowdown of one kernel is a test with a fake clock
(``tests/profilers/test_kernels.py``), not a benchmark.

    python benchmarks/bench_compare_aa.py [--repeats 2] [--skip-profile] [--smoke] [--keep DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGGED = ("faster", "slower")


def infer_opt(*args: str) -> list[str]:
    return [sys.executable, "-m", "infer_opt", *args]


def run(args: list[str]) -> str:
    """Run one command; its stdout (raises with its stderr when it fails)."""
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def measure(command: list[str], out: Path) -> float:
    start = time.perf_counter()
    run(infer_opt(*command, "--out", str(out)))
    return time.perf_counter() - start


def compare(base: Path, new: Path) -> dict[str, Any]:
    return json.loads(run(infer_opt("compare", str(base), str(new), "--json")))["result"]


def flagged(rows: list[dict[str, Any]]) -> list[str]:
    return [
        f"{r['label']} [{r['detail']}] {r['verdict']} {r['ratio']:.3g}×"
        for r in rows
        if r["verdict"] in FLAGGED
    ]


def headline(result: dict[str, Any]) -> str:
    h = result["headline"]
    interval = f"CI {h['low']:.3g}–{h['high']:.3g}"
    return f"{h['verdict']} (speedup {h['speedup']:.3g}, {interval}, p {h['p_value']:.2g})"


def aa(name: str, command: list[str], folder: Path, repeat: int) -> dict[str, Any]:
    """One A/A pair: the command twice back to back, then compared."""
    a, b = folder / f"{name}-aa{repeat}-1.json", folder / f"{name}-aa{repeat}-2.json"
    walls = [measure(command, a), measure(command, b)]
    result = compare(a, b)
    return {
        "what": f"A/A {name} #{repeat}",
        "rows": len([r for r in result["rows"] if r["ratio"] is not None]),
        "flagged": flagged(result["rows"]),
        "categories": flagged(result.get("categories", [])),
        "headline": headline(result),
        "wall_s": walls,
    }


def power(command: list[str], folder: Path) -> dict[str, Any]:
    one, two = folder / "matmul-1t.json", folder / "matmul-2t.json"
    measure([*command, "--threads", "1"], one)
    measure([*command, "--threads", "2"], two)
    result = compare(one, two)
    rows = {f"{r['label']} [{r['detail']}]": r for r in result["rows"]}
    target = rows.get("matmul [n=1024]") or next(iter(rows.values()))
    return {
        "what": "1 vs 2 threads, matmul",
        "case": f"{target['label']} [{target['detail']}]",
        "verdict": target["verdict"],
        "speedup": target["speedup"],
        "p_value": target["p_value"],
        "flagged": flagged(result["rows"]),
        "headline": headline(result),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=1, help="A/A pairs of each kind")
    parser.add_argument("--skip-profile", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: check that the script runs")
    parser.add_argument("--keep", type=Path, default=None, help="keep the result files in DIR")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-compare-aa-"))
    folder.mkdir(parents=True, exist_ok=True)
    kernels = ["kernels", "--suite", "quick", "--threads", "1", "--runs", "3"]
    profile = ["profile", "--threads", "1", "--runs", "3"]
    matmul = ["kernels", "--only", "matmul", "--runs", "3"]
    if args.smoke:
        kernels += ["--only", "tiny_add,copy", "--reps", "3", "--warmup", "1"]
        profile += ["--reps", "3", "--seq-len", "16"]
        matmul += ["--reps", "3", "--warmup", "1"]
    machine = platform.processor() or platform.machine()
    now = dt.datetime.now(dt.timezone.utc)
    print(
        f"# {now:%Y-%m-%d %H:%M} UTC, {machine}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}; files in {folder}"
    )
    results = [aa("kernels", kernels, folder, i + 1) for i in range(args.repeats)]
    if not args.skip_profile:
        results += [aa("profile", profile, folder, i + 1) for i in range(args.repeats)]
    results.append(power(matmul, folder))
    for item in results:
        print(json.dumps(item))
    print("\n| run | rows | flagged | categories flagged | headline |\n|---|---:|---:|---:|---|")
    for item in results:
        if item["what"].startswith("A/A"):
            print(f"| {item['what']} | {item['rows']} | {len(item['flagged'])} | {len(item['categories'])} | "
                  f"{item['headline']} |")  # fmt: skip
    last = results[-1]
    print(
        f"\npower: {last['case']}: {last['verdict']}, speedup {last['speedup']:.3g}, p {last['p_value']:.2g}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
