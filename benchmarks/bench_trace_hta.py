"""infer-opt's ``trace --hta-compat`` timeline against HolisticTraceAnalysis 0.5 on every shared trace.

HTA runs in its own virtual environment (``python -m venv /work/hta-venv &&
/work/hta-venv/bin/pip install HolisticTraceAnalysis==0.5.0``), one subprocess per trace, on a
folder holding only that trace (a link). Prints idle / compute / non-compute % and the
comm-compute overlap % side by side, their differences, and how HTA fails where it does.

    python benchmarks/bench_trace_hta.py [--hta-python /work/hta-venv/bin/python] [TRACE ...]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"

HTA_SCRIPT = r"""
import json, sys, logging
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
out = {}
try:
    t = TraceAnalysis(trace_dir=sys.argv[1])
    b = t.get_temporal_breakdown(visualize=False)
    row = b.iloc[0]
    out.update(idle=float(row["idle_time_pctg"]), compute=float(row["compute_time_pctg"]),
               non_compute=float(row["non_compute_time_pctg"]))
    try:
        o = t.get_comm_comp_overlap(visualize=False)
        out["overlap"] = float(o.iloc[0]["comp_comm_overlap_pctg"])
    except Exception as err:
        out["overlap_error"] = f"{type(err).__name__}: {str(err).replace(chr(10), ' ')[:80]}"
except Exception as err:
    out["error"] = f"{type(err).__name__}: {str(err).replace(chr(10), ' ')[:100]}"
print("HTA-RESULT " + json.dumps(out))
"""


def run_hta(python: str, trace: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / trace.name).symlink_to(trace.resolve())
        proc = subprocess.run([python, "-c", HTA_SCRIPT, tmp], capture_output=True, text=True, timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("HTA-RESULT "):
            return json.loads(line[len("HTA-RESULT ") :])
    return {"error": f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:100]}"}


def ours(trace: Path) -> dict:
    from infer_opt.trace.reader import read_trace
    from infer_opt.trace.timeline import rank_timeline

    try:
        r = rank_timeline(read_trace(trace), hta_compat=True)
    except Exception as err:  # what a user would see
        return {"error": f"{type(err).__name__}: {err}"}
    return {
        "idle": round(100 * r.idle_fraction, 2),
        "compute": round(100 * r.compute_fraction, 2),
        "non_compute": round(100 * r.non_compute_fraction, 2),
        "overlap": round(100 * r.overlap_fraction, 2),
        "has_comm": r.steps[0].comm_s > 0 if r.steps else False,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hta-python", default="/work/hta-venv/bin/python")
    parser.add_argument("traces", nargs="*", type=Path)
    a = parser.parse_args()
    traces = a.traces or sorted(SHARED.glob("*.json.gz"))
    print(
        "| trace | HTA idle/compute/non-compute % | infer-opt | max diff | HTA overlap % | infer-opt | diff |"
    )
    print("|---|---|---|---|---|---|---|")
    worst, worst_overlap, failures = 0.0, 0.0, []
    for trace in traces:
        h, o = run_hta(a.hta_python, trace), ours(trace)
        name = trace.name[:58]
        if "error" in h:
            failures.append((name, h["error"], "error" in o))
            mine = o.get("error") or f"{o['idle']:.2f}/{o['compute']:.2f}/{o['non_compute']:.2f}"
            print(f"| {name} | fails: {h['error']} | {mine} | | | | |")
            continue
        keys = ("idle", "compute", "non_compute")
        diff = max(abs(h[k] - o[k]) for k in keys)
        worst = max(worst, diff)
        hv = h.get("overlap", float("nan"))
        ov = o["overlap"] if o.get("has_comm") else float("nan")
        od = abs(hv - ov) if not (math.isnan(hv) or math.isnan(ov)) else float("nan")
        if not math.isnan(od):
            worst_overlap = max(worst_overlap, od)
        print(
            f"| {name} | {h['idle']:.2f}/{h['compute']:.2f}/{h['non_compute']:.2f} | "
            f"{o['idle']:.2f}/{o['compute']:.2f}/{o['non_compute']:.2f} | {diff:.2f} | "
            f"{hv:.2f} | {ov:.2f} | {od:.2f} |"
        )
    print(
        f"\nworst idle/compute/non-compute difference: {worst:.2f} points; worst overlap difference: "
        f"{worst_overlap:.2f} points"
    )
    for name, err, we_fail in failures:
        print(f"HTA fails on {name}: {err}" + ("  (infer-opt fails too)" if we_fail else ""))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
