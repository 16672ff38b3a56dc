"""Does the host's time between launching ops carry across models as physical counts? (issue 40,
item 7.) For each HF trace of ``../shared/traces`` on the H100 and the MI300X, the host model
``h = c_launch + c_module · m (+ c_python · p)`` (:mod:`infer_opt.trace.host_fit`) fitted on the
OTHER HF traces of that GPU, applied to the held-out trace's own counts (module calls and Python
calls between its launching ops, from its ``python_function`` events), against its measured host
time (the sum of its intervals, waits at syncs left out) — and beside it the per-op median that
``predict`` uses today (:func:`infer_opt.trace.host_costs.summarize`'s overall median × ops).

    python benchmarks/bench_host_fit.py [--traces ../shared/traces]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu_model import DEFAULT, GPUS

from infer_opt.trace import host_costs, host_fit
from infer_opt.trace.reader import read_trace

HF = ("Falconsai", "Qwen", "timesformer", "bert-small", "owlv2")
MODELS = {"module": ("launch", "module"), "python": ("launch", "python")}


def rows(traces: Path) -> list[dict]:
    out = []
    for gpu, pattern in GPUS.items():
        paths = [p for p in sorted(traces.glob(pattern)) if any(m in p.name for m in HF)]
        loaded = {}
        for p in paths:
            samples = host_costs.issue_samples(read_trace(p))
            loaded[p] = (samples, host_fit.gap_counts(samples, host_fit.python_calls(p)))
        for held, (_, g) in loaded.items():
            others = [v for k, v in loaded.items() if k != held]
            real = float(g.issue_s.sum())
            median = host_costs.summarize([o[0] for o in others])[1] * g.issue_s.size
            row = {"gpu": gpu, "trace": held.name.split("__")[2], "real_s": real, "median_s": median,
                   "intervals": int(g.issue_s.size), "modules": int(g.modules.sum()),
                   "python_calls": int(g.python.sum())}  # fmt: skip
            for name, cols in MODELS.items():
                f = host_fit.fit([o[1] for o in others], cols)
                row[name] = (float(f.host_s(g.modules, g.python).sum()), f)
            out.append(row)
    return out


def table(found: list[dict]) -> str:
    pct = lambda v, r: f"{v * 1e3:.2f} ms ({100 * (v / r - 1):+.0f}%)"  # noqa: E731
    lines = ["| GPU | held-out trace | intervals | modules | Python calls | measured host | per-op median |"
             " launch + module | (c_launch, c_module µs) | launch + Python | (c_launch, c_python µs) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in found:
        (m, fm), (p, fp) = r["module"], r["python"]
        lines.append(
            f"| {r['gpu']} | {r['trace']} | {r['intervals']} | {r['modules']} | {r['python_calls']} | "
            f"{r['real_s'] * 1e3:.2f} ms | {pct(r['median_s'], r['real_s'])} | {pct(m, r['real_s'])} | "
            f"({fm.launch_s * 1e6:.1f}, {fm.module_s * 1e6:.1f}) | {pct(p, r['real_s'])} | "
            f"({fp.launch_s * 1e6:.1f}, {fp.python_s * 1e6:.2f}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT)
    args = parser.parse_args(argv)
    found = rows(args.traces)
    if not found:
        print(f"no HF traces under {args.traces}", file=sys.stderr)
        return 2
    print(table(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
