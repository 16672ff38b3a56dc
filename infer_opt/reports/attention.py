"""Views of the attention calculators: score-matrix memory/traffic and the window bound."""

from __future__ import annotations

from infer_opt.reports.view import Column, Table, View
from infer_opt.results.attention import AttentionMemoryResult, WindowBoundResult
from infer_opt.units import format_bytes, format_flops, format_number, format_ratio


def _intensity(value: float) -> str:
    return f"{format_number(value, 3)} FLOP/B"


def build_memory_view(result: AttentionMemoryResult) -> View:
    r = result
    shape = (
        f"B = {r.batch}, H = {r.heads}, T_q = {r.tq}, T_k = {r.tk}, d = {r.head_dim}, "
        f"{r.dtype} ({format_number(r.dtype_bytes)} B/element)" + (", causal" if r.causal else "")
    )
    summary = [
        ("Shape", shape),
        ("Score elements per head", f"{format_number(r.score_elements)} (T_q·T_k)"),
        ("Score matrix per head", format_bytes(r.score_bytes_per_head)),
        ("All score matrices (B·H of them)", format_bytes(r.score_bytes_total)),
        ("HBM traffic, explicit", format_bytes(r.traffic_explicit_bytes)),
        ("HBM traffic, tiled", format_bytes(r.traffic_tiled_bytes)),
        ("Explicit / tiled traffic", format_ratio(r.traffic_ratio)),
        ("FLOPs (both paths)", f"{format_flops(r.flops)} (QKᵀ + PV; softmax not included)"),
        (
            "Arithmetic intensity",
            f"explicit {_intensity(r.intensity_explicit)}, tiled {_intensity(r.intensity_tiled)}",
        ),
    ]
    rows = [{"tensor": t.name, "explicit": t.explicit_bytes, "tiled": t.tiled_bytes} for t in r.traffic]
    rows.append({"tensor": "total", "explicit": r.traffic_explicit_bytes, "tiled": r.traffic_tiled_bytes})
    table = Table(
        "Estimated HBM traffic per call",
        [
            Column("tensor", "Tensor", align="left", csv_header="tensor"),
            Column("explicit", "Explicit path", format_bytes, csv_header="explicit_bytes"),
            Column("tiled", "Tiled path", format_bytes, csv_header="tiled_bytes"),
        ],
        rows,
        caption="—: never leaves the chip on the tiled path",
        highlight={len(rows) - 1: "best"},
    )
    notes = [
        "Estimates from the shapes, not measurements. FLOPs count 2 per multiply-add in QKᵀ and PV; "
        "softmax (max, exp, sum, divide: a few per score) is not included.",
        "Tiled traffic is the ideal: Q, K, V read once and O written once; a kernel that re-reads K and V "
        "for every query block from HBM moves more. K and V have H heads (no grouped-query sharing).",
    ]
    if r.causal:
        notes.append(
            f"Causal: queries are the last T_q of the T_k positions, so {format_number(r.visible_pairs)} "
            f"(query, key) pairs are visible per head; FLOPs assume a kernel that skips fully masked "
            "blocks. The explicit path still materialises the full T_q × T_k matrices."
        )
    return View(
        title="Attention: score-matrix memory and HBM traffic", summary=summary, tables=[table], notes=notes
    )


def build_window_view(result: WindowBoundResult) -> View:
    summary = [
        ("Dropped attention mass δ", format_number(result.dropped_mass)),
        ("Value norm bound M", format_number(result.value_norm)),
        ("Output error bound 2·δ·M", format_number(result.bound)),
        ("Relative to M", format_number(result.relative_bound)),
    ]
    notes = [
        "Holds for every query whose dropped softmax mass is at most δ, when every value vector's norm "
        "is at most M (the output error is measured in the same norm). It is an upper bound, not an estimate."
    ]
    return View(title="Attention: window truncation bound", summary=summary, notes=notes)
