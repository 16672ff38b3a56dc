"""Audit of ``infer-opt trace``'s figures on every shared trace (issue 41's goals):

1. **No rate above 1.1× its peak without a warning** naming the op and the likely cause: for
   every op group, its achieved FLOP/s and bytes/s against the peaks it is held to (a
   host↔device copy against the host link); each above :data:`RATE_SLACK` × its peak must have a
   ``rate_above_peak`` warning with that op, that resource and a cause.
2. **No "0" where the value is unknown**: in the JSON, a collective's size, ranks and bandwidths
   are ``null`` or positive (never 0), an op without a formula has no rate (``null``), an op
   without a bound no peak fraction, a spread over one step is ``null``; on the console, no
   collective row shows ``0 B`` or ``0`` ranks.

Each trace file is analysed alone (its device from its own table). Prints one line per trace
and the totals; exits 1 when a check fails.

    python benchmarks/bench_trace_figures.py [--traces ../shared/traces]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"


def rate_problems(result) -> tuple[int, list[str]]:
    """(rates above the margin, those without a warning naming op, resource and cause)."""
    from infer_opt.results.trace import shapes_text
    from infer_opt.trace.ops import group_peaks
    from infer_opt.trace.roofline import RATE_SLACK, peak_flops

    warned = {
        (w["op"], w["shapes"], w["resource"])
        for w in result.warnings
        if w.code == "rate_above_peak" and w.values.get("cause")
    }
    above, missing = 0, []
    if not (result.peaks.flops_per_s or result.peaks.bytes_per_s) or result.device_source == "unknown":
        return 0, []  # no roofline: no rate is judged
    for g in result.ops:
        own = group_peaks(g.family, result.peaks)
        for resource, rate, peak in (
            ("flops", g.achieved_flops_per_s, peak_flops(own, g.precision)),
            ("bytes", g.achieved_bytes_per_s, own.bytes_per_s),
        ):
            if rate is not None and peak > 0 and rate > RATE_SLACK * peak:
                above += 1
                if (g.name, shapes_text(g.shapes), resource) not in warned:
                    missing.append(f"{g.name} {shapes_text(g.shapes)} {resource} {rate / peak:.2f}×")
    return above, missing


def zero_problems(result, console: str) -> list[str]:
    """Unknown values shown as 0 (module docstring, check 2)."""
    data = json.loads(json.dumps(result.to_dict()))
    out = []
    for row in data.get("collectives", []):
        for key in ("bytes", "group_size", "algbw_bytes_per_s", "busbw_bytes_per_s"):
            if row.get(key) == 0:
                out.append(f"collective {row['collective']} {key} = 0")
    for g in data.get("ops", []):
        if g["bound"] == "unknown" and g.get("peak_fraction") == 0:
            out.append(f"op {g['name']} peak_fraction 0 with no bound")
        if g["flops"] == 0 and g["bytes"] == 0 and (g.get("achieved_flops_per_s") == 0):
            out.append(f"op {g['name']} achieved rate 0 with no formula")
    one_step = all(len(r["steps"]) < 2 for r in data.get("ranks", []))
    if one_step and any(g.get("time_spread_s") == 0 for g in data.get("ops", [])):
        out.append("a spread over one step given as 0")
    table = ""
    if "Collectives (measured)" in console:
        table = console.split("Collectives (measured)", 1)[1].split("\n\n", 1)[0]
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 3 and ("0 B" in cells or "0" in cells[3:4] or "0 B/s" in cells):
            out.append(f"console collective row: {line.strip()}")
    return out


def audit(path: Path) -> dict:
    from infer_opt.errors import InvalidInput
    from infer_opt.reports.render import render
    from infer_opt.trace.analyze import analyze

    start = time.perf_counter()
    try:
        result = analyze([path]).result
    except InvalidInput as err:
        return {"file": path.name, "error": str(err)}
    console = render(result, "console", width=120)
    above, missing = rate_problems(result)
    return {
        "file": path.name,
        "device": result.device_name or "unknown",
        "seconds": time.perf_counter() - start,
        "above": above,
        "missing": missing,
        "zeros": zero_problems(result, console),
        "warned": sum(1 for w in result.warnings if w.code == "rate_above_peak"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=SHARED)
    args = parser.parse_args()
    files = sorted(p for p in args.traces.glob("*.json*") if p.is_file())
    if not files:
        print(f"no traces under {args.traces}")
        return 2
    failed = 0
    totals = {"above": 0, "warned": 0, "missing": 0, "zeros": 0}
    for path in files:
        row = audit(path)
        if "error" in row:
            print(f"{row['file'][:70]:70}  refused: {row['error'][:80]}")
            continue
        bad = row["missing"] + row["zeros"]
        failed += bool(bad)
        for key in ("above", "warned"):
            totals[key] += row[key]
        totals["missing"] += len(row["missing"])
        totals["zeros"] += len(row["zeros"])
        print(
            f"{row['file'][:70]:70} {row['device'][:14]:14} {row['seconds']:6.2f}s "
            f"above-peak {row['above']:3} warned {row['warned']:3} "
            + ("ok" if not bad else "FAIL: " + "; ".join(bad[:4]))
        )
    print(
        f"\n{len(files)} traces: {totals['above']} rates above 1.1× peak, {totals['warned']} rate_above_peak "
        f"warnings, {totals['missing']} unwarned, {totals['zeros']} unknowns shown as 0; "
        f"{failed} trace(s) failing"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
