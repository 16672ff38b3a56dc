"""Does the host's time between launching ops carry across models as physical counts? (issue 40,
item 7.) For each HF trace of ``../shared/traces`` on the H100 and the MI300X, the host model
``h = c_launch + c_module · m + c_python · p + c_op · o`` (:mod:`infer_opt.trace.host_fit`, with
some of the counts) fitted on the OTHER HF traces of that GPU, applied to the held-out trace's own
counts between its launching ops (module calls and Python calls from its ``python_function``
events, aten ops from its ``cpu_op`` events), against its measured host
time (the sum of its intervals, waits at syncs left out) — and beside it the per-op median that
``predict`` uses today (:func:`infer_opt.trace.host_costs.summarize`'s overall median × ops).

With ``--same-ops``: per GPU, the median host time of each top-level aten op (its ``cpu_op``
duration: dispatch, kernel launch and the ops below it) that at least three of the HF traces
call, per trace — whether one trace's host runs the same ops faster than the others'.

With ``--by-model DIR``: the same leave-one-model-out over one folder's traces of one GPU, a
trace's model being its file name up to ``-prefill`` / ``-decode`` (this project's H200 runs:
``docs/gpu_runs/2026-12-04-h200/traces/``, recorded without Python stacks: launch + aten ops).

    python benchmarks/bench_host_fit.py [--traces ../shared/traces] [--by-model DIR | --same-ops]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu_model import DEFAULT, GPUS

from infer_opt.trace import host_costs, host_fit
from infer_opt.trace.reader import read_trace

HF = ("Falconsai", "Qwen", "timesformer", "bert-small", "owlv2")
MODELS = {
    "launch + module": ("launch", "module"),
    "launch + Python": ("launch", "python"),
    "launch + aten ops": ("launch", "ops"),
    "launch + Python + aten ops": ("launch", "python", "ops"),
}


def rows(traces: Path) -> list[dict]:
    out = []
    for gpu, pattern in GPUS.items():
        paths = [p for p in sorted(traces.glob(pattern)) if any(m in p.name for m in HF)]
        loaded = {}
        for p in paths:
            events = read_trace(p)
            samples = host_costs.issue_samples(events)
            loaded[p] = (samples, host_fit.gap_counts(samples, host_fit.python_calls(p), events))
        for held, (_, g) in loaded.items():
            others = [v for k, v in loaded.items() if k != held]
            real = float(g.issue_s.sum())
            median = host_costs.summarize([o[0] for o in others])[1] * g.issue_s.size
            row = {"gpu": gpu, "trace": held.name.split("__")[2], "real_s": real, "median_s": median,
                   "intervals": int(g.issue_s.size), "modules": int(g.modules.sum()),
                   "python_calls": int(g.python.sum()), "ops": int(g.ops.sum())}  # fmt: skip
            for name, cols in MODELS.items():
                f = host_fit.fit([o[1] for o in others], cols)
                row[name] = (float(f.host_s(g.modules, g.python, g.ops).sum()), f)
            out.append(row)
    return out


def by_model(folder: Path) -> str:
    """Leave-one-model-out over ``folder``'s traces (module docstring): per trace its measured
    host time and the launch + aten-op model fitted on the other models' traces."""
    loaded = {}
    for p in sorted(folder.glob("*.json*")):
        events = read_trace(p)
        samples = host_costs.issue_samples(events)
        loaded[p.name.split(".json")[0]] = (
            samples,
            host_fit.gap_counts(samples, host_fit.python_calls(p), events),
        )
    model = lambda name: re.split(r"-(?:prefill|decode)", name)[0]  # noqa: E731
    lines = ["| held-out trace | intervals | aten ops per interval | measured host | per-op median |"
             " launch + aten ops (c_launch, c_op µs) |", "|---|---|---|---|---|---|"]  # fmt: skip
    for name, (_, g) in loaded.items():
        others = [v for k, v in loaded.items() if model(k) != model(name)]
        if not others:
            continue
        f = host_fit.fit([o[1] for o in others], ("launch", "ops"))
        real, n = float(g.issue_s.sum()), g.issue_s.size
        median = host_costs.summarize([o[0] for o in others])[1] * n
        fitted = float(f.host_s(g.modules, g.python, g.ops).sum())
        lines.append(f"| {name} | {n} | {g.ops.mean():.2f} | {real * 1e3:.2f} ms | {median * 1e3:.2f} ms "
                     f"({100 * (median / real - 1):+.0f}%) | {fitted * 1e3:.2f} ms "
                     f"({100 * (fitted / real - 1):+.0f}%) "
                     f"({f.launch_s * 1e6:.1f}, {f.op_s * 1e6:.2f}) |")  # fmt: skip
    return "\n".join(lines)


def same_ops(traces: Path) -> str:
    """Per GPU and top-level aten op called by >= 3 HF traces: its median host time per trace,
    and each trace's median ratio to the other traces' median over those ops (module docstring)."""
    import numpy as np

    lines = []
    for gpu, pattern in GPUS.items():
        per: dict[str, dict[str, tuple[float, int]]] = {}
        for p in sorted(traces.glob(pattern)):
            if not any(m in p.name for m in HF):
                continue
            t = read_trace(p)
            top = np.flatnonzero(t.ops.parent < 0)
            names = np.asarray(t.names, dtype=object)[t.ops.name[top]]
            durs = t.ops.dur_us[top]
            model = p.name.split("__")[2][:24]
            for name in np.unique(names):
                if str(name).startswith("aten::"):
                    mine = names == name
                    per.setdefault(str(name), {})[model] = (float(np.median(durs[mine])), int(mine.sum()))
        models = sorted({m for v in per.values() for m in v})
        common = sorted(n for n, v in per.items() if len(v) >= 3)
        lines += [f"**{gpu}** (µs, median host time of the op; calls in brackets)", "",
                  "| op | " + " | ".join(models) + " |", "|---" * (1 + len(models)) + "|"]  # fmt: skip
        ratios: dict[str, list[float]] = {m: [] for m in models}
        for n in common:
            v = per[n]
            cells = [f"{v[m][0]:.1f} ({v[m][1]})" if m in v else "—" for m in models]
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
            for m in v:
                others = [v[o][0] for o in v if o != m]
                ratios[m].append(v[m][0] / float(np.median(others)))
        cells = [f"{np.median(r):.2f}×" if r else "—" for r in ratios.values()]
        lines += ["| *median ratio to the others* | " + " | ".join(cells) + " |", ""]
    lines += ["Each trace's host intervals split: the launching op's own host time (its `cpu_op`, from the",
              "interval's start) and the rest (Python glue and the ops between):", "",
              "| GPU | trace | intervals | aten ops | Python calls | launching ops' own time "
              "| per launching op | per aten op | the rest | per Python call |",
              "|---" * 10 + "|"]  # fmt: skip
    for gpu, pattern in GPUS.items():
        for p in sorted(traces.glob(pattern)):
            if any(m in p.name for m in HF):
                lines.append(_split(gpu, p))
    return "\n".join(lines)


def _split(gpu: str, path: Path) -> str:
    """One trace's row of :func:`same_ops`' second table."""
    import numpy as np

    t = read_trace(path)
    s = host_costs.issue_samples(t)
    g = host_fit.gap_counts(s, host_fit.python_calls(path), t)
    order = np.lexsort((t.ops.ts_us, t.ops.tid))
    tid, ts, dur = t.ops.tid[order], t.ops.ts_us[order], t.ops.dur_us[order]
    own = np.zeros(s.issue_s.size)
    for k, (th, lo) in enumerate(zip(s.tid.tolist(), s.lo_us.tolist(), strict=True)):
        lane = np.flatnonzero(tid == th)
        i = lane[np.searchsorted(ts[lane], lo)]  # the launching op that starts the interval
        own[k] = min(float(dur[i]) * 1e-6, float(s.issue_s[k]))
    rest = s.issue_s - own
    n, ops, py = s.issue_s.size, int(g.ops.sum()), int(g.python.sum())
    o, r = own.sum(), rest.sum()
    return (f"| {gpu} | {path.name.split('__')[2][:24]} | {n} | {ops} | {py} | {o * 1e3:.2f} ms | "
            f"{o / n * 1e6:.1f} µs | {o / max(ops, 1) * 1e6:.2f} µs | {r * 1e3:.2f} ms | "
            f"{r / max(py, 1) * 1e6:.2f} µs |")  # fmt: skip


def _coefficients(f: host_fit.HostGapFit) -> str:
    values = {"launch": f.launch_s, "module": f.module_s, "python": f.python_s, "ops": f.op_s}
    return ", ".join(f"{values[c] * 1e6:.2f}" for c in f.columns)


def table(found: list[dict]) -> str:
    pct = lambda v, r: f"{v * 1e3:.2f} ms ({100 * (v / r - 1):+.0f}%)"  # noqa: E731
    head = "| GPU | held-out trace | intervals | modules | Python calls | aten ops | measured host |"
    head += " per-op median |"
    lines = [head + "".join(f" {name} |" for name in MODELS), "|---" * (8 + len(MODELS)) + "|"]
    for r in found:
        cells = [r["gpu"], r["trace"], r["intervals"], r["modules"], r["python_calls"], r["ops"],
                 f"{r['real_s'] * 1e3:.2f} ms", pct(r["median_s"], r["real_s"])]  # fmt: skip
        cells += [f"{pct(r[n][0], r['real_s'])} ({_coefficients(r[n][1])} µs)" for n in MODELS]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT)
    parser.add_argument("--by-model", type=Path, default=None)
    parser.add_argument("--same-ops", action="store_true")
    args = parser.parse_args(argv)
    if args.same_ops:
        print(same_ops(args.traces))
        return 0
    if args.by_model is not None:
        print(by_model(args.by_model))
        return 0
    found = rows(args.traces)
    if not found:
        print(f"no HF traces under {args.traces}", file=sys.stderr)
        return 2
    print(table(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
