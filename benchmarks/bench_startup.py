"""Start-up cost of a calculator command against the bare imports it cannot avoid.

Runs ``infer-opt amdahl -f 0.4 -s 4`` and ``python -c "import typer, rich, numpy"``
interleaved, N times each, and prints the medians and their ratio (target: <= 1.5).

    python benchmarks/bench_startup.py [--runs 21]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

BASELINE = [sys.executable, "-c", "import typer, rich, numpy"]


def _command(args: list[str]) -> list[str]:
    script = shutil.which("infer-opt")
    return [script, *args] if script else [sys.executable, "-m", "infer_opt", *args]


def _time(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    runs = parser.parse_args().runs
    cases = {
        "python -c 'import typer, rich, numpy'": BASELINE,
        "infer-opt amdahl -f 0.4 -s 4": _command(["amdahl", "-f", "0.4", "-s", "4"]),
        "infer-opt amdahl -f 0.4 -s 4 --json": _command(["amdahl", "-f", "0.4", "-s", "4", "--json"]),
        "infer-opt --help": _command(["--help"]),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for cmd in cases.values():  # warm the page cache
        _time(cmd)
    for _ in range(runs):
        for name, cmd in cases.items():
            samples[name].append(_time(cmd))
    base = statistics.median(samples[next(iter(cases))])
    print("| command | median (ms) | ratio to baseline |\n|---|---:|---:|")
    for name, values in samples.items():
        med = statistics.median(values)
        print(f"| `{name}` | {med * 1e3:.0f} | {med / base:.2f} |")


if __name__ == "__main__":
    main()
