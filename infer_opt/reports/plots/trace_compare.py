"""Plot of a trace comparison: the categories' kernel time per step, base against new, and the
ratio of the ops that changed most."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from infer_opt.reports.plots import _style
from infer_opt.reports.profile import short_name
from infer_opt.reports.trace import _shapes
from infer_opt.results.trace_compare import TraceCompareResult

TOP = 12


def plot(result: TraceCompareResult, path: Path) -> Path:
    fig, (left, right) = _style.figure(1, 2, figsize=(12, 5))
    cats = result.categories[:10]
    factor, unit = _style.time_unit(
        max([c.base_per_step_s for c in cats] + [c.new_per_step_s for c in cats] + [1e-9])
    )
    y = np.arange(len(cats))[::-1]
    left.barh(
        y + 0.2, [c.base_per_step_s / factor for c in cats], height=0.4, color=_style.PALETTE[0], label="base"
    )
    left.barh(
        y - 0.2, [c.new_per_step_s / factor for c in cats], height=0.4, color=_style.PALETTE[1], label="new"
    )
    left.set_yticks(y, [c.category for c in cats])
    left.set_xlabel(f"kernel time per step ({unit}, measured)")
    left.set_title("Categories")
    left.legend()
    ops = [o for o in result.ops if o.ratio is not None][:TOP]
    if ops:
        y = np.arange(len(ops))[::-1]
        colors = [
            _style.PALETTE[1]
            if o.verdict == "slower"
            else _style.PALETTE[2]
            if o.verdict == "faster"
            else "#9a9a9a"
            for o in ops
        ]
        right.barh(y, [o.ratio for o in ops], color=colors)
        right.axvline(1.0, color="black", lw=1)
        right.set_xscale("log")
        _style.plain_log_ticks(right.xaxis)
        right.set_yticks(y, [f"{short_name(o.name)} {_shapes(o.shapes, 18)}" for o in ops], fontsize=8)
        right.set_xlabel("new / base (grey: within the threshold or the spread)")
    right.set_title("Ops on both sides that moved most")
    fig.suptitle(textwrap.fill(result.headline, 140), fontsize=11)  # a long headline wraps
    fig.tight_layout()
    return _style.save(fig, path)
