"""Many ranks through the map-reduce (trace/ranks.py) on a Dask ``LocalCluster``: driver and
worker peak memory, wall time and time per rank as the rank count grows, 2 workers against 1,
and the local process pool for reference. Optionally traceinsight (HTA 0.6.1)'s straggler
output on the two shared ranks, from a separate venv.

The job is synthetic: the two shared ranks of a 128-rank job (``hta__timeline_analysis__sampled_
rank-0`` and ``hta__trace_filter__sampled_rank-1``) copied alternately into ``max(--ranks)``
files, each with its own rank id, the job's world size, and every timestamp shifted by a
per-rank jitter (uniform, ``--jitter-us``); written into a temp dir, never stored. Each
measurement runs in a fresh child process (a fresh cluster), so each peak is its own.

    python benchmarks/bench_many_ranks.py [--ranks 64,128,256,512] [--ti-python /tmp/ti/bin/python]

``--joint-replay``: instead, each size without and with the ranks' joint replay (the driver
holds every rank's graph): the driver's peak and the straggler's replayed figures.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / ".." / "shared" / "traces"
PAIR = ("hta__timeline_analysis__sampled_rank-0.json.gz", "hta__trace_filter__sampled_rank-1.json.gz")

CHILD = r"""
import json, resource, sys, time
mode, folder, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
joint = {"joint": True, "off": False}.get(sys.argv[4] if len(sys.argv) > 4 else "auto")
from infer_opt.trace.analyze import analyze
def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out = {}
if mode == "dask":
    from distributed import Client, LocalCluster
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, silence_logs=50)
    client = Client(cluster)
    out["driver_before_mib"] = peak_mib()
    start = time.perf_counter()
    found = analyze([folder], scheduler=client, keep_events=False, joint_replay=joint)
    out["wall_s"] = time.perf_counter() - start
    out["worker_peak_mib"] = sorted(client.run(peak_mib).values())
    client.close(); cluster.close()
else:
    out["driver_before_mib"] = peak_mib()
    start = time.perf_counter()
    found = analyze([folder], workers=workers, keep_events=False, joint_replay=joint)
    out["wall_s"] = time.perf_counter() - start
r = found.result
out["driver_peak_mib"] = peak_mib()
out["ranks"] = len(r.ranks)
out["stragglers"] = [[s.step, s.rank, s.cost_s] for s in r.cross_rank.straggler] if r.cross_rank else []
out["replayed"] = [[s.step, s.rank, s.replayed_step_s, s.replayed_step_s_if_on_time, s.replayed_saving_s,
                    s.on_time_scale] for s in r.cross_rank.straggler] if r.cross_rank else []
check = r.cross_rank.joint_replay if r.cross_rank else None
out["joint"] = check.__dict__ if check is not None else None
out["matched"] = len(r.cross_rank.collectives) if r.cross_rank else 0
print(json.dumps(out))
"""

TI = r"""
import json, logging, sys
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
t = TraceAnalysis(trace_dir=sys.argv[1])
found = t.get_potential_stragglers(num_candidates=1)
print(json.dumps({"potential_stragglers": [int(x) for x in found]}))
"""


def make_job(folder: Path, ranks: int, jitter_us: float, seed: int = 0) -> None:
    """``ranks`` files alternating the shared pair, each its own rank id and shifted clock."""
    import orjson

    docs = [json.loads(gzip.decompress((SHARED / name).read_bytes())) for name in PAIR]
    rng = np.random.default_rng(seed)
    for rank in range(ranks):
        doc = dict(docs[rank % 2])
        shift = float(rng.uniform(0, jitter_us))
        doc["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": rank, "world_size": ranks}
        doc["traceEvents"] = [
            {**e, "ts": e["ts"] + shift} if isinstance(e.get("ts"), (int, float)) else e
            for e in docs[rank % 2]["traceEvents"]
        ]
        (folder / f"rank{rank:05d}.json.gz").write_bytes(gzip.compress(orjson.dumps(doc), compresslevel=1))


def subset(job: Path, ranks: int, into: Path) -> Path:
    """The first ``ranks`` files of the job, as a folder of links (their world size is the job's)."""
    into.mkdir()
    for f in sorted(job.iterdir())[:ranks]:
        (into / f.name).symlink_to(f)
    return into


def child(mode: str, folder: Path, workers: int, joint: str = "auto") -> dict:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(folder), str(workers), joint],
        capture_output=True, text=True, env={**__import__("os").environ, **env}, check=False,
    )  # fmt: skip
    if run.returncode != 0:
        raise SystemExit(f"{mode} {folder} failed:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="64,128,256,512")
    parser.add_argument("--jitter-us", type=float, default=2000.0)
    parser.add_argument("--compare-at", type=int, default=128, help="ranks for 1 vs 2 workers")
    parser.add_argument("--ti-python", default=None, help="a python with traceinsight 0.6.1")
    parser.add_argument("--joint-replay", action="store_true", help="only: each size without and with it")
    args = parser.parse_args()
    if args.joint_replay:
        return joint_memory([int(x) for x in args.ranks.split(",")], args.jitter_us)
    counts = [int(x) for x in args.ranks.split(",")]
    with tempfile.TemporaryDirectory(prefix="many_ranks_") as tmp:
        job = Path(tmp) / "job"
        job.mkdir()
        start = time.perf_counter()
        make_job(job, max([*counts, args.compare_at]), args.jitter_us)
        print(f"made {max(counts)} ranks in {time.perf_counter() - start:.1f} s")
        print("ranks  wall_s  per_rank_ms  driver_before_MiB  driver_peak_MiB  worker_peak_MiB")
        for n in counts:
            found = child("dask", subset(job, n, Path(tmp) / f"n{n}"), 2)
            print(f"{n:5d}  {found['wall_s']:6.1f}  {1e3 * found['wall_s'] / n:11.1f}  "
                  f"{found['driver_before_mib']:17.0f}  {found['driver_peak_mib']:15.0f}  "
                  f"{found['worker_peak_mib']}")  # fmt: skip
        folder = Path(tmp) / f"n{args.compare_at}"
        if not folder.exists():
            subset(job, args.compare_at, folder)
        one = child("dask", folder, 1)
        two = child("dask", folder, 2)
        pool = child("local", folder, 2)
        print(f"{args.compare_at} ranks: 1 worker {one['wall_s']:.1f} s, 2 workers {two['wall_s']:.1f} s "
              f"(×{one['wall_s'] / two['wall_s']:.2f}); local pool of 2 {pool['wall_s']:.1f} s")  # fmt: skip
        pair = Path(tmp) / "pair"
        pair.mkdir()
        for name in PAIR:
            (pair / name).symlink_to(SHARED / name)
        ours = child("local", pair, 1)
        print(f"shared pair, ours: straggler per step [step, rank, cost_s] {ours['stragglers']}")
        if args.ti_python:
            ti = subprocess.run(
                [args.ti_python, "-c", TI, str(pair)], capture_output=True, text=True, check=False
            )
            print("shared pair, traceinsight 0.6.1:", ti.stdout.strip() or ti.stderr.strip()[-1500:])


def joint_memory(counts: list[int], jitter_us: float) -> None:
    """The driver's peak without and with the ranks' joint replay (every rank's graph sent
    back and replayed jointly on the driver: straggler_replay.py), and its figures."""
    with tempfile.TemporaryDirectory(prefix="many_ranks_") as tmp:
        job = Path(tmp) / "job"
        job.mkdir()
        make_job(job, max(counts), jitter_us)
        print("ranks  joint  wall_s  driver_peak_MiB  worker_peak_MiB  joint check / stragglers replayed")
        for n in counts:
            folder = subset(job, n, Path(tmp) / f"n{n}")
            for joint in ("off", "joint"):
                found = child("dask", folder, 2, joint)
                print(f"{n:5d}  {joint:5s}  {found['wall_s']:6.1f}  {found['driver_peak_mib']:15.0f}  "
                      f"{found['worker_peak_mib']}  {found['joint']} {found['replayed']}")  # fmt: skip


if __name__ == "__main__":
    main()
