"""The replay of each trace's dependency graph (issue 40): accuracy, honesty and cost.

1. Self-replay: on every shared trace with GPU events that have launches, per step,
   ``|replayed − measured| / measured`` of the unedited replay; median and worst over all steps,
   the share of events the graph placed and what it could not place (by why).
2. Launch-bound honesty: replayed (dependencies kept) vs Amdahl for "matmul ops at their roofline
   bound" and CUDA graphs on the H100 and MI300X bert-small and Falconsai traces (goal: replayed
   matmuls ≤ 1.02×, CUDA graphs the large one), and for the largest category on timesformer
   (1% idle: replayed and Amdahl within 2%).
3. Cost: ``analyze()`` with and without the replay (graph, critical path, every what-if) on the
   largest shared trace, medians of alternated in-process runs.
4. ``--kernels-from``: each model traced on the H100 and the MI300X, one trace replayed with the
   other's kernel times, held against the other's measured step (all ten directed pairs).
5. Ranks replayed jointly (trace/replay_ranks.py) on the shared cross-rank pair (two ranks of a
   128-rank A100 job): matches kept and left out, iterations, and the unedited joint replay's
   largest |replayed − measured| GPU event end (exact: 0).
6. The straggler's replayed cost on that pair (trace/straggler_replay.py): per step, the waits'
   Amdahl bound beside the replayed saving with the straggler as fast as the median rank.
7. ``--gb N``: a synthetic trace (bench_trace_speed.synthetic) through ``analyze()`` with and
   without the replay in fresh processes: wall time and peak RSS.

    python benchmarks/bench_replay.py [--runs 5] [--gb 1.0]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"
LARGEST = "tracelens__mi300__google_owlv2-large-patch14-ensemble__1016001.json.gz"
HONESTY = [
    f"tracelens__{gpu}__{model}.json.gz"
    for model in ("gaunernst_bert-small-uncased__1016001", "Falconsai_nsfw_image_detection__1016002")
    for gpu in ("h100", "mi300")
]
DENSE = [
    f"tracelens__{gpu}__facebook_timesformer-base-finetuned-k400__1016002.json.gz"
    for gpu in ("h100", "mi300")
]


def self_replay() -> None:
    from infer_opt.trace.reader import read_trace
    from infer_opt.trace.replay import replay_rank, step_replays

    errors, rows = [], []
    for path in sorted(SHARED.glob("*.json.gz")):
        ev = read_trace(path)
        if not len(ev.gpu) or not (ev.gpu.launch >= 0).any():
            continue
        t = time.perf_counter()
        rr = replay_rank(ev)
        spent = time.perf_counter() - t
        steps = step_replays(ev, rr.graph, rr.replayed)
        e = [s.error for s in steps]
        errors += e
        unplaced = ", ".join(f"{k}: {v}" for k, v in rr.graph.unplaced.items()) or "—"
        rows.append(
            f"| {path.name[:60]} | {len(ev.gpu)} | {len(steps)} | {max(e):.2e} | "
            f"{rr.graph.placed_share():.1%} | {unplaced} | {spent:.2f} s |"
        )
    print("| trace | GPU events | steps | worst step error | placed | not placed (why) | replay + bounds |")
    print("|---|---:|---:|---:|---:|---|---:|")
    print("\n".join(rows))
    print(
        f"\nall {len(errors)} steps: median error {statistics.median(errors):.2e}, worst {max(errors):.2e}\n"
    )


def honesty() -> None:
    from infer_opt.trace.analyze import analyze

    print("| trace | what-if | Amdahl | replayed |")
    print("|---|---|---:|---:|")
    for name in HONESTY + DENSE:
        path = SHARED / name
        if not path.exists():
            continue
        found = analyze([path]).result.what_if
        wanted = [w for w in found if w.scenario in ("cuda_graphs", "faster_host")]
        wanted += [w for w in found if w.description == "matmul ops at their roofline bound"]
        if name in DENSE:
            wanted += [max((w for w in found if w.scenario == "category_at_bound"), key=lambda w: w.saved_s)]
        for w in dict.fromkeys(wanted):
            print(
                f"| {name[11:60]} | {w.description} | {w.amdahl_speedup:.3f}× | {w.replayed_speedup:.3f}× |"
            )
    print()


PAIRS = (
    "Falconsai_nsfw_image_detection__1016002",
    "facebook_timesformer-base-finetuned-k400__1016002",
    "gaunernst_bert-small-uncased__1016001",
    "google_owlv2-large-patch14-ensemble__1016001",
    "Qwen_Qwen1.5-0.5B-Chat__1016005",
)


def kernels_from() -> None:
    """Each model traced on both GPUs: one trace replayed with the other's kernels, held against
    the other's measured step (median step), beside Amdahl's estimate."""
    from infer_opt.trace.analyze import analyze

    print(
        "| model | trace | kernels of | its step | other's step | replayed (error) | Amdahl (error) | bound |"
    )
    print("|---|---|---|---:|---:|---:|---:|---|")
    errors: list[tuple[float, float]] = []
    for model in PAIRS:
        paths = {gpu: SHARED / f"tracelens__{gpu}__{model}.json.gz" for gpu in ("h100", "mi300")}
        if not all(p.exists() for p in paths.values()):
            continue
        for a, b in (("h100", "mi300"), ("mi300", "h100")):
            result = analyze([paths[a]], kernels_from=paths[b]).result
            w = next(x for x in result.what_if if x.scenario == "kernels_from")
            real = analyze([paths[b]]).result.ranks[0].step_time_median_s
            amdahl = w.step_s / w.amdahl_speedup
            e_r, e_a = w.replayed_step_s / real - 1, amdahl / real - 1
            errors.append((abs(e_r), abs(e_a)))
            bound = result.ranks[0].steps[0].bound
            print(
                f"| {model[:28]} | {a} | {b} | {w.step_s * 1e3:.2f} ms | {real * 1e3:.2f} ms | "
                f"{w.replayed_step_s * 1e3:.2f} ms ({e_r:+.1%}) | {amdahl * 1e3:.2f} ms ({e_a:+.1%}) | "
                f"{bound} |"
            )
    if errors:
        med_r = statistics.median(e for e, _ in errors)
        med_a = statistics.median(e for _, e in errors)
        worse = sum(r > a + 1e-9 for r, a in errors)
        print(f"\nmedian |error|: replayed {med_r:.1%}, Amdahl {med_a:.1%}; replay worse on {worse} pairs\n")


def joint_ranks() -> None:
    """The cross-rank pair replayed jointly, unedited: it must give every event its own end."""
    import numpy as np

    from infer_opt.trace import timeline as tt
    from infer_opt.trace.reader import read_trace
    from infer_opt.trace.replay_ranks import replay_ranks

    paths = [
        SHARED / "hta__timeline_analysis__sampled_rank-0.json.gz",
        SHARED / "hta__trace_filter__sampled_rank-1.json.gz",
    ]
    if not all(p.exists() for p in paths):
        return
    ev = {r: read_trace(p) for r, p in enumerate(paths)}
    t = time.perf_counter()
    joint = replay_ranks(ev, masks={r: tt.analyzed_mask(e, None) for r, e in ev.items()})
    spent = time.perf_counter() - t
    worst = max(
        float(np.max(np.abs(joint.gpu_times_us(r)[1] - (e.gpu.ts_us + e.gpu.dur_us)))) for r, e in ev.items()
    )
    waits = sorted(joint.waits_us.values())
    largest = waits[-1] / 1e3 if waits else 0.0
    print(
        f"joint replay of the cross-rank pair: {len(joint.collectives)} collectives matched, "
        f"{joint.inconsistent} left out (a member ended before the last peer started), "
        f"{joint.iterations} iterations, converged {joint.converged}, worst |end − measured| {worst:.3g} µs, "
        f"waits total {sum(waits) / 1e3:.2f} ms (largest {largest:.2f} ms), {spent:.2f} s\n"
    )


def straggler_cost() -> None:
    """The shared pair through analyze(): each step's straggler, what the others waited for it
    (the Amdahl bound) and its replayed saving (trace/straggler_replay.py), with and without
    the joint replay's time."""
    import tempfile

    from infer_opt.trace.analyze import analyze

    names = ["hta__timeline_analysis__sampled_rank-0.json.gz", "hta__trace_filter__sampled_rank-1.json.gz"]
    if not all((SHARED / n).exists() for n in names):
        return
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            (Path(tmp) / n).symlink_to((SHARED / n).resolve())
        spent = {}
        for joint in (False, True):
            t = time.perf_counter()
            cross = analyze([tmp], workers=1, keep_events=False, joint_replay=joint).result.cross_rank
            spent[joint] = time.perf_counter() - t
    print(f"joint replay check: {cross.joint_replay}")
    for st in cross.straggler:
        ms = [x * 1e3 for x in (st.cost_s, st.replayed_step_s, st.replayed_step_s_if_on_time)]
        print(
            f"step #{st.step}: straggler rank {st.rank}, others waited {ms[0]:.2f} ms (Amdahl bound); "
            f"replayed step {ms[1]:.2f} ms, on time {ms[2]:.2f} ms (k = {st.on_time_scale:.3f}): "
            f"saving {st.replayed_saving_s * 1e3:.3f} ms — {st.replayed_vs_waits}"
        )
    print(f"analyze() of the pair: {spent[False]:.2f} s without the joint replay, {spent[True]:.2f} s with\n")


def cost(runs: int) -> None:
    from infer_opt.trace import analyze as a

    path = SHARED / LARGEST
    original = a.trp.replay_rank
    a.analyze([path])  # warm: imports, caches of the formulas
    times: dict[str, list[float]] = {"with": [], "without": []}
    for _ in range(runs):
        for mode in ("with", "without"):
            a.trp.replay_rank = original if mode == "with" else (lambda *args, **kw: None)
            t = time.perf_counter()
            a.analyze([path])
            times[mode].append(time.perf_counter() - t)
    a.trp.replay_rank = original
    w, wo = statistics.median(times["with"]), statistics.median(times["without"])
    ratio = f"{w / wo:.2f}× (median of {runs})"
    print(f"{LARGEST}: analyze() with the replay {w:.2f} s, without {wo:.2f} s: {ratio}\n")


CHILD = """
import resource, sys, time
from infer_opt.trace import analyze as a
if sys.argv[2] == "without":
    a.trp.replay_rank = lambda *args, **kw: None
t = time.perf_counter(); a.analyze([sys.argv[1]]); dt = time.perf_counter() - t
print(f"{dt:.1f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f}")
"""


def synthetic(gb: float) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_trace_speed import synthetic as make

    path = Path(f"/tmp/bench_replay_{gb:g}.json")
    if not path.exists():
        make(path, gb)
    for mode in ("with", "without"):
        out = subprocess.run([sys.executable, "-c", CHILD, str(path), mode], capture_output=True, text=True)
        wall, rss = out.stdout.split()
        print(f"synthetic {gb:g} GiB, analyze() {mode} the replay: {wall} s, peak RSS {rss} GiB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--gb", type=float, default=0.0)
    args = parser.parse_args()
    self_replay()
    honesty()
    kernels_from()
    joint_ranks()
    straggler_cost()
    cost(args.runs)
    if args.gb > 0:
        synthetic(args.gb)


if __name__ == "__main__":
    main()
