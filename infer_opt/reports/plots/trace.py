"""Plot of ``infer-opt trace``: the timeline breakdown per step (or rank), the ops on the device's
roofline (log-log, with the peak lines), and the top ops by kernel time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from infer_opt.reports.plots import _style
from infer_opt.reports.profile import short_name
from infer_opt.reports.trace import _shapes
from infer_opt.results.trace import TraceResult

_BOUND_COLORS = {"compute": _style.PALETTE[1], "bandwidth": _style.PALETTE[0], "launch": _style.PALETTE[3]}
_UNKNOWN = "#9a9a9a"
TOP_OPS = 10


def _breakdown(ax, result: TraceResult) -> None:
    rows = []
    for rank in result.ranks:
        for s in rank.steps:
            step = "all" if s.step is None else f"#{s.step}"
            label = f"r{rank.rank} {step}" if len(result.ranks) > 1 else step
            exposed = s.comm_s * (1 - s.overlap_fraction)
            other = max(s.busy_s - s.compute_s - exposed, 0.0)
            rows.append((label, s.compute_s, exposed, other, s.idle_s))
    if not rows:
        ax.text(0.5, 0.5, "no GPU timeline", ha="center", va="center", transform=ax.transAxes)
        return
    rows = rows[:24]
    factor, unit = _style.time_unit(max(r[1] + r[2] + r[3] + r[4] for r in rows))
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    parts = ("compute", "comm (not overlapped)", "memcpy / sync", "idle")
    colors = (_style.PALETTE[0], _style.PALETTE[1], _style.PALETTE[3], "#d0d0d0")
    for j, (name, color) in enumerate(zip(parts, colors, strict=True)):
        values = np.array([r[j + 1] for r in rows]) / factor
        if values.any():
            ax.bar(x, values, bottom=bottom, color=color, label=name, width=0.7)
        bottom += values
    ax.set_xlim(-0.8, max(len(rows), 4) - 0.2)  # one step is a bar, not the whole axis
    ax.set_xticks(
        x,
        [r[0] for r in rows],
        rotation=45 if len(rows) > 8 else 0,
        ha="right" if len(rows) > 8 else "center",
    )
    ax.set_ylabel(f"time ({unit}, measured)")
    ax.set_title("Where each step's GPU time went" + (" (HTA conventions)" if result.hta_compat else ""))
    ax.legend(ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.18 if len(rows) > 8 else -0.1))


def _roofline(ax, result: TraceResult) -> None:
    ops = [g for g in result.ops if g.flops > 0 and g.bytes > 0 and g.time_s > 0]
    if not ops:
        ax.text(
            0.5,
            0.5,
            "no op with FLOPs and bytes from its shapes",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_axis_off()
        return
    intensity = np.array([g.flops / g.bytes for g in ops])
    rate = np.array([g.achieved_flops_per_s for g in ops])
    size = np.array([g.time_s for g in ops])
    size = 12 + 240 * size / size.max()
    colors = [_BOUND_COLORS.get(g.bound, _UNKNOWN) for g in ops]
    ax.scatter(intensity, rate, s=size, c=colors, alpha=0.7, edgecolors="white", linewidths=0.5)
    lo, hi = intensity.min() / 3, intensity.max() * 3
    xs = np.geomspace(lo, hi, 200)
    bw = result.peaks.bytes_per_s
    shown = [
        (p, v) for p, v in result.peaks.flops_per_s.items() if p in {g.precision for g in ops} or p == "*"
    ]
    for i, (precision, peak) in enumerate(shown[:3]):
        ys = np.minimum(peak, xs * bw) if bw > 0 else np.full_like(xs, peak)
        ax.plot(xs, ys, color="black", lw=1.2, ls=("-", "--", ":")[i], label=f"peak {precision} (datasheet)")
    if not shown and bw > 0:
        ax.plot(xs, xs * bw, color="black", lw=1.2, label="peak bandwidth")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte, from shapes)")
    ax.set_ylabel("achieved FLOP/s (measured)")
    ax.set_title("Ops on the device's roofline (size: kernel time; colour: bound)")
    present = {g.bound for g in ops}
    for bound, color in _BOUND_COLORS.items():  # only the bounds drawn: no colour without its dots
        if bound in present:
            ax.scatter([], [], c=color, s=30, label=bound)
    if present - set(_BOUND_COLORS):
        ax.scatter([], [], c=_UNKNOWN, s=30, label="bound unknown (no peaks for this device)")
    ax.legend(loc="lower right")


def _top_ops(ax, result: TraceResult) -> None:
    ops = result.ops[:TOP_OPS]
    if not ops:
        ax.text(0.5, 0.5, "no GPU ops", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    factor, unit = _style.time_unit(max(g.time_s for g in ops))
    y = np.arange(len(ops))[::-1]
    widths = [g.time_s / factor for g in ops]
    ax.barh(y, widths, color=[_BOUND_COLORS.get(g.bound, _UNKNOWN) for g in ops])
    labels = [f"{_cut(short_name(g.name), LABEL_CHARS - 18)} {_shapes(g.shapes, 16)}" for g in ops]
    # each label on its bar (inside a long one, after a short one): no tick labels to push the
    # figure's shared left margin, and so every panel, to the right
    most = max(widths)
    ax.set_xlim(0, most * 1.02)
    ax.set_yticks(y, [])
    ax.tick_params(axis="y", length=0)
    for yi, w, label in zip(y, widths, labels, strict=True):
        inside = w > 0.55 * most
        x, ha, colour = (w - most * 0.01, "right", "white") if inside else (w + most * 0.01, "left", "black")
        ax.text(x, yi, label, va="center", ha=ha, fontsize=8, color=colour)
    ax.set_xlabel(f"kernel time ({unit}, measured, summed over the analyzed steps)")
    ax.set_title(f"Top {len(ops)} ops by GPU kernel time")


#: an op's label on the bar chart about this long (its name cut, its shapes kept short), so a long
#: name does not push every panel right
LABEL_CHARS = 44


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def plot(result: TraceResult, path: Path) -> Path:
    heat = 1 if result.cross_rank is not None else 0  # and the rank × step heat map
    ratios = [1, 1.2, 1] + [1.1] * heat
    fig, axes = _style.figure(
        3 + heat, 1, figsize=(8.5, 13 + 4.5 * heat), gridspec_kw={"height_ratios": ratios}
    )
    _breakdown(axes[0], result)
    _roofline(axes[1], result)
    _top_ops(axes[2], result)
    if heat:
        from infer_opt.reports.plots.cross_rank import heatmap

        heatmap(axes[3], result)
    device = result.device_name or "unknown device"
    fig.suptitle(f"GPU trace on {device}", fontsize=13)
    fig.tight_layout(rect=(0, 0, 1, 0.985))  # room for the figure's title above the first panel's
    return _style.save(fig, path)
