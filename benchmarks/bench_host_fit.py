"""Does the host's time between launching ops carry across models as physical counts? (issue 40,
item 7.) For each HF trace of ``../shared/traces`` on the H100 and the MI300X, the host model
``h = c_launch + c_module · m + c_python · p + c_op · o`` (:mod:`infer_opt.trace.host_fit`, with
some of the counts) fitted on the OTHER HF traces of that GPU, applied to the held-out trace's own
counts between its launching ops (module calls and Python calls from its ``python_function``
events, aten ops from its ``cpu_op`` events), against its measured host
time (the sum of its intervals, waits at syncs left out) — and beside it the per-op median that
``predict`` uses today (:func:`infer_opt.trace.host_costs.summarize`'s overall median × ops).

With ``--by-model DIR``: the same leave-one-model-out over one folder's traces of one GPU, a
trace's model being its file name up to ``-prefill`` / ``-decode`` (this project's H200 runs:
``docs/gpu_runs/2026-12-04-h200/traces/``, recorded without Python stacks: launch + aten ops).

    python benchmarks/bench_host_fit.py [--traces ../shared/traces] [--by-model DIR]
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
    args = parser.parse_args(argv)
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
