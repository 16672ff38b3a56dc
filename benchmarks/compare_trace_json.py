"""``trace --json``'s ``result`` of every shared trace (and the shared two ranks of one job, as
one folder) under two checkouts, compared exactly: a refactoring of the reduce must not change
a bit. ``python benchmarks/compare_trace_json.py run ROOT OUT`` writes ROOT's results into OUT;
``python benchmarks/compare_trace_json.py diff OUT_A OUT_B`` names every input whose differ."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"
PAIR = ("hta__timeline_analysis__sampled_rank-0.json.gz", "hta__trace_filter__sampled_rank-1.json.gz")


def inputs(tmp: Path) -> dict[str, Path]:
    """Every shared trace; the shared pair as one folder; a synthetic job of 6 ranks (the pair
    copied with jittered clocks, bench_many_ranks.py's make_job) — in fixed places under ``tmp``
    so that both checkouts' results name the same files."""
    from bench_many_ranks import make_job

    found = {p.name: p for p in sorted(SHARED.glob("*.json.gz"))}
    pair = tmp / "pair"
    pair.mkdir(exist_ok=True)
    for name in PAIR:
        if not (pair / name).is_symlink():
            (pair / name).symlink_to(SHARED.resolve() / name)
    found["PAIR"] = pair
    job = tmp / "job6"
    if not job.exists():
        job.mkdir()
        make_job(job, 6, 2000.0)
    found["JOB6"] = job
    return found


def run(root: str, out: str) -> None:
    Path(out).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(Path(root).resolve())}
    tmp = Path(tempfile.gettempdir()) / "compare_trace_json"
    tmp.mkdir(exist_ok=True)
    for name, path in inputs(tmp).items():
        cmd = [sys.executable, "-m", "infer_opt", "trace", str(path), "--json", "--workers", "1"]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        try:
            result = json.loads(done.stdout)["result"]
        except (ValueError, KeyError, TypeError):
            result = {"rc": done.returncode, "stderr": done.stderr[-500:]}
        Path(out, name + ".json").write_text(json.dumps(result, sort_keys=True))
        print(name, done.returncode, flush=True)


def diff(a: str, b: str) -> int:
    names = sorted(p.name for p in Path(a).glob("*.json"))
    bad = [n for n in names if Path(a, n).read_text() != Path(b, n).read_text()]
    print(f"{len(names) - len(bad)} of {len(names)} identical" + (f"; differ: {bad}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "run":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        run(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(diff(sys.argv[2], sys.argv[3]))
