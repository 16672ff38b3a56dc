"""Wall time of ``infer-opt report p.json -o r.md`` on a saved profile, this tree against another
checkout of infer-opt (by default the commit before result kinds moved to ``infer_opt/results/``,
when rendering a profile still imported torch).

The other checkout is a ``git worktree`` run with ``PYTHONPATH`` pointing at it; the two are run
alternately, N times each, and the medians and their ratio are printed (goal: >= 1.5x faster).

    python benchmarks/bench_report_startup.py [--runs 15] [--before /tmp/before] [--commit 2fb0699]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _saved_profile(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT))
    from infer_opt.results import save_result
    from tests.reports.fixtures import FIXTURES

    return save_result(folder / "p.json", FIXTURES["profile"]())


def _worktree(path: Path, commit: str) -> None:
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit], check=True)


def _time(tree: Path, saved: Path, out: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "infer_opt", "report", str(saved), "-o", str(out)]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--before", type=Path, default=Path(tempfile.gettempdir()) / "infer-opt-before")
    parser.add_argument("--commit", default="2fb0699")
    args = parser.parse_args()
    _worktree(args.before, args.commit)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        saved = _saved_profile(folder)
        trees = {"before": args.before, "after": ROOT}
        times: dict[str, list[float]] = {name: [] for name in trees}
        for name, tree in trees.items():  # one untimed run each: file caches warm
            _time(tree, saved, folder / f"{name}.md")
        for _ in range(args.runs):
            for name, tree in trees.items():
                times[name].append(_time(tree, saved, folder / f"{name}.md"))
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        spread = f"min {min(t) * 1e3:.0f}, max {max(t) * 1e3:.0f}"
        print(f"{name:>6}: median {medians[name] * 1e3:7.0f} ms  ({spread})")
    print(f"after is {medians['before'] / medians['after']:.2f}x faster (goal >= 1.5x)")


if __name__ == "__main__":
    main()
