"""Two trace analyses side by side (pure): ``compare_traces(base, new)``.

Ops are matched by (name, shapes, dtype); each side's figure is its kernel time per analyzed
window (summed over its steps and ranks, divided by their number). A change is called when
``|r − 1| >= threshold`` and the difference per step exceeds the spread between steps (the
larger side's max − min of that group's per-step time); where neither side has two steps the
spread is unknown and the verdict rests on the threshold alone (said in a warning). Categories
are the ops' families, as shares of each side's kernel time.

**What the step measures.** Each side carries the replay's verdict (trace/critical.py): the
critical path by cause, per step (the mean over every replayed step of every rank), the side
(``host``: host work, launches, sync waits; ``device``: kernels, memcpy, comm) holding most of it,
and the trace's idle causes. A side is host-bound by that verdict where it has a replay, else
when its GPU idles more than ``HOST_BOUND_IDLE`` of the step. Both host-bound: the step time
measures the two hosts, so the headline says how much host time on the critical path differs,
with the GPU kernel time per step beside it; one host-bound: the step ratio is kept and the
headline says it mixes a host and a GPU.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from infer_opt.errors import InvalidInput
from infer_opt.notices import Notice
from infer_opt.results.trace import OpGroup, TraceResult
from infer_opt.results.trace_compare import (
    CategoryShare,
    CauseChange,
    OpChange,
    TraceCompareResult,
    TraceSide,
)
from infer_opt.trace.critical import CAUSES, HOST_SIDE
from infer_opt.units import format_duration

THRESHOLD = 0.05
#: a step whose GPU is idle more than this share of it measures the host, not the GPU
HOST_BOUND_IDLE = 0.8
#: below this share of either side's kernel time in ops both ran, the two are different workloads
MATCHED_MIN = 0.5


def _windows(r: TraceResult) -> int:
    return max(sum(len(rank.steps) for rank in r.ranks), 1)


def _path(r: TraceResult) -> dict:
    """The mean critical path per step over every replayed step of every rank, its bound and the
    mean replayed span ({} where nothing was replayed)."""
    steps = [s for rank in r.ranks for s in rank.steps if s.critical_path]
    if not steps:
        return {}
    n = len(steps)
    causes = {c: math.fsum(s.critical_path.get(c, 0.0) for s in steps) / n for c in CAUSES}
    kinds = dict.fromkeys(k for s in steps for k in s.critical_kernels)
    kernels = {k: math.fsum(s.critical_kernels.get(k, 0.0) for s in steps) / n for k in kinds}
    total = math.fsum(causes.values())
    host = math.fsum(causes[c] for c in HOST_SIDE)
    bound = "host" if host > total - host else "device"
    share = min(1.0, max(host, total - host) / total) if total > 0 else 0.0
    return {
        "bound": bound,
        "bound_share": share,
        "replayed_step_s": math.fsum(s.replayed_span_s for s in steps) / n,
        "critical_path": causes,
        "critical_kernels": kernels,
    }


def _side(name: str, r: TraceResult) -> TraceSide:
    medians = [rank.step_time_median_s for rank in r.ranks] or [0.0]
    idle = [rank.idle_fraction for rank in r.ranks if rank.steps]
    return TraceSide(
        **_path(r),
        idle_causes=r.idle_causes,
        name=name,
        device_name=r.device_name,
        ranks=len(r.ranks),
        steps=_windows(r),
        step_median_s=float(statistics.median(medians)),
        step_spread_s=_largest(rank.step_time_spread_s for rank in r.ranks),
        kernel_time_per_step_s=math.fsum(g.time_s for g in r.ops) / _windows(r),
        idle_fraction=float(statistics.median(idle)) if idle else None,
    )


def _key(g: OpGroup) -> tuple[str, tuple, str]:
    return g.name, g.shapes, g.dtype


def _verdict(base: float, new: float, spread: float, threshold: float) -> str:
    if base <= 0 or new <= 0:
        return "same" if base == new else ("only_new" if base <= 0 else "only_base")
    ratio = new / base
    if abs(ratio - 1) < threshold:
        return "same"
    if spread > 0 and abs(new - base) <= spread:
        return "within_spread"
    return "slower" if ratio > 1 else "faster"


def compare_traces(
    base: TraceResult,
    new: TraceResult,
    *,
    base_name: str = "base",
    new_name: str = "new",
    threshold: float = THRESHOLD,
) -> TraceCompareResult:
    if not 0 <= threshold < 10 or math.isnan(threshold):
        raise InvalidInput("--threshold", str(threshold), "a fraction such as 5%")
    nb, nn = _windows(base), _windows(new)
    b = {_key(g): g for g in base.ops}
    n = {_key(g): g for g in new.ops}
    rows = []
    for key in dict.fromkeys([*b, *n]):
        gb, gn = b.get(key), n.get(key)
        tb = gb.time_s / nb if gb else None
        tn = gn.time_s / nn if gn else None
        spread = _largest([gb.time_spread_s if gb else None, gn.time_spread_s if gn else None])
        if gb is None:
            verdict = "only_new"
        elif gn is None:
            verdict = "only_base"
        else:
            verdict = _verdict(tb, tn, spread or 0.0, threshold)
        rows.append(
            OpChange(
                name=key[0],
                shapes=key[1],
                dtype=key[2],
                base_per_step_s=tb,
                new_per_step_s=tn,
                ratio=tn / tb if tb and tn else None,
                spread_s=spread,
                verdict=verdict,
                base_calls=gb.calls if gb else 0,
                new_calls=gn.calls if gn else 0,
            )
        )
    rows.sort(key=lambda r: -abs((r.new_per_step_s or 0.0) - (r.base_per_step_s or 0.0)))
    categories = _categories(base, new, nb, nn)
    sb, sn = _side(base_name, base), _side(new_name, new)
    ratio = sn.step_median_s / sb.step_median_s if sb.step_median_s > 0 else math.nan
    matched = _matched_fraction(b, n)
    host_bound = _host_bound(sb) and _host_bound(sn)
    warnings = _warnings(base, new, sb, sn, b, n, matched, host_bound)
    if host_bound:
        headline = _kernel_headline(sb, sn, threshold)
    else:
        headline = _headline(sb, sn, ratio, threshold) + _one_host_bound(sb, sn)
    return TraceCompareResult(
        base=sb,
        new=sn,
        step_ratio=ratio,
        threshold=threshold,
        ops=tuple(rows),
        categories=categories,
        headline=_caveats(headline, matched, sb, sn),
        warnings=tuple(warnings),
        matched_fraction=matched,
        compared="kernel_time" if host_bound else "step",
        critical_path=_causes(sb, sn),
    )


def _warnings(base, new, sb, sn, b, n, matched, host_bound) -> list[Notice]:
    """What the comparison warns of: other devices, one step, few matched ops, host-bound sides."""
    warnings = []
    if base.device_name != new.device_name:
        warnings.append(
            Notice(
                "trace_compare_devices",
                {"base": base.device_name or "unknown", "new": new.device_name or "unknown"},
            )
        )
    if sb.steps < 2 and sn.steps < 2:
        warnings.append(Notice("trace_compare_one_step", {}))
    if matched is not None and matched < MATCHED_MIN:
        values = {"matched": matched, "ops_both": sum(1 for k in b if k in n), "ops": len({*b, *n})}
        warnings.append(Notice("trace_compare_unmatched", values))
    if host_bound and sb.bound and sn.bound:
        shares = {"base": sb.bound_share, "new": sn.bound_share}
        warnings.append(Notice("trace_compare_host_bound_path", shares))
    elif host_bound and sb.idle_fraction is not None and sn.idle_fraction is not None:
        warnings.append(
            Notice("trace_compare_host_bound", {"base": sb.idle_fraction, "new": sn.idle_fraction})
        )
    return warnings


def _largest(values) -> float | None:
    """The largest known value; None when none is known (fewer than two steps everywhere)."""
    return max((v for v in values if v is not None), default=None)


def _host_bound(side: TraceSide) -> bool:
    if side.bound:  # the replay's verdict
        return side.bound == "host"
    return side.idle_fraction is not None and side.idle_fraction > HOST_BOUND_IDLE


def _why_host(side: TraceSide) -> str:
    if side.bound:
        return f"host {side.bound_share:.0%} of its critical path"
    return f"the GPU idle {side.idle_fraction:.0%} of it"


def _one_host_bound(b: TraceSide, n: TraceSide) -> str:
    """One side host-bound, the other not: the step ratio compares a host with a GPU."""
    hb, hn = _host_bound(b), _host_bound(n)
    if hb == hn:
        return ""
    host, dev = (b, n) if hb else (n, b)
    return (
        f"; but {host.name}'s step is host-bound ({_why_host(host)}) and {dev.name}'s device-bound: "
        f"the step ratio measures {host.name}'s host against {dev.name}'s GPU"
    )


def _host_difference(b: TraceSide, n: TraceSide, threshold: float) -> str:
    """How much host time on the critical path differs per step (both sides replayed)."""
    hb, hn = b.host_on_path_s, n.host_on_path_s
    if not (b.critical_path and n.critical_path) or hb <= 0 or hn <= 0:
        return ""
    head = f"host time on the critical path {format_duration(hb, 4)} → {format_duration(hn, 4)} per step "
    if abs(hn / hb - 1) < threshold:
        return head + f"(the same within ±{threshold:.0%}); "
    more = hn > hb
    return head + f"({n.name}'s host {hn / hb if more else hb / hn:.3g}× {'slower' if more else 'faster'}); "


def _causes(b: TraceSide, n: TraceSide) -> tuple[CauseChange, ...]:
    """The critical path by cause side by side, ``kernel`` split by category after it."""
    if not (b.critical_path and n.critical_path):
        return ()
    tb, tn = b.replayed_step_s, n.replayed_step_s
    rows = []
    for cause in CAUSES:
        rows.append((cause, b.critical_path.get(cause, 0.0), n.critical_path.get(cause, 0.0)))
        if cause == "kernel":
            kinds = dict.fromkeys([*b.critical_kernels, *n.critical_kernels])
            ordered = sorted(
                kinds, key=lambda k: -(b.critical_kernels.get(k, 0.0) + n.critical_kernels.get(k, 0.0))
            )
            rows += [
                (f"kernel: {k}", b.critical_kernels.get(k, 0.0), n.critical_kernels.get(k, 0.0))
                for k in ordered
            ]
    return tuple(
        CauseChange(c, vb, vn, vb / tb if tb > 0 else 0.0, vn / tn if tn > 0 else 0.0) for c, vb, vn in rows
    )


def _matched_fraction(b: dict, n: dict) -> float | None:
    """The smaller of the two sides' shares of kernel time in ops both ran (None: no kernel time)."""
    shares = []
    for own, other in ((b, n), (n, b)):
        total = math.fsum(g.time_s for g in own.values())
        if total > 0:
            shares.append(math.fsum(g.time_s for k, g in own.items() if k in other) / total)
    return min(shares) if shares else None


def _kernel_headline(b: TraceSide, n: TraceSide, threshold: float) -> str:
    """Both steps host-bound: the step measures the hosts (by how much their time on the critical
    path differs), and the GPU's kernel time per step is what the GPUs did."""
    kb, kn = b.kernel_time_per_step_s, n.kernel_time_per_step_s
    if b.bound and n.bound:
        why = f"host {b.bound_share:.0%} and {n.bound_share:.0%} of the critical path"
    elif b.idle_fraction is not None and n.idle_fraction is not None:
        why = f"the GPU idle {b.idle_fraction:.0%} and {n.idle_fraction:.0%} of the step"
    else:
        why = f"{_why_host(b)}; {_why_host(n)}"
    head = f"both steps are host-bound ({why}): the step time measures the host, not the GPU; "
    head += _host_difference(b, n, threshold)
    if kb <= 0 or kn <= 0:
        return head + "no kernel time to compare"
    ratio = kn / kb
    if abs(ratio - 1) < threshold:
        return head + f"kernel time per step: no difference beyond ±{threshold:.0%} (measured)"
    faster = ratio < 1
    return head + (
        f"{n.name} took {1 / ratio if faster else ratio:.3g}× {'less' if faster else 'more'} GPU kernel time "
        f"per step than {b.name} (measured)"
    )


def _caveats(headline: str, matched: float | None, b: TraceSide, n: TraceSide) -> str:
    out = headline
    if matched is not None and matched < MATCHED_MIN:
        out += (
            f"; only {matched:.0%} of the kernel time is in ops both ran: different workloads, not a change"
        )
    if b.device_name != n.device_name:
        out += f"; on different devices ({b.device_name or 'unknown'} → {n.device_name or 'unknown'})"
    return out


def _categories(base: TraceResult, new: TraceResult, nb: int, nn: int) -> tuple[CategoryShare, ...]:
    times: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for side, r in enumerate((base, new)):
        for g in r.ops:
            times[g.family or "other"][side] += g.time_s
    tb = math.fsum(t[0] for t in times.values()) or 1.0
    tn = math.fsum(t[1] for t in times.values()) or 1.0
    rows = [CategoryShare(c, t[0] / tb, t[1] / tn, t[0] / nb, t[1] / nn) for c, t in times.items()]
    rows.sort(key=lambda c: -(c.base_share + c.new_share))
    return tuple(rows)


def _headline(b: TraceSide, n: TraceSide, ratio: float, threshold: float) -> str:
    if not math.isfinite(ratio) or ratio <= 0:
        return "no step time on the base side: no verdict"
    spread = _largest([b.step_spread_s, n.step_spread_s]) or 0.0
    if abs(ratio - 1) < threshold or abs(n.step_median_s - b.step_median_s) <= spread:
        return (
            f"{n.name} and {b.name}: no difference in the step beyond ±{threshold:.0%} and the spread "
            "between steps"
        )
    faster = ratio < 1
    factor = 1 / ratio if faster else ratio
    return (
        f"{n.name} ran {factor:.3g}× {'faster' if faster else 'slower'} than {b.name} (median step, measured)"
    )


__all__ = ["THRESHOLD", "compare_traces"]
