"""View of ``tune speculative``: the draft length per batch size and the vLLM settings."""

from __future__ import annotations

from infer_opt.reports.view import Column, Table, View, rows_of
from infer_opt.results.tune_speculative import TuneSpeculativeResult
from infer_opt.units import format_number, format_percent, format_ratio


def _summary(r: TuneSpeculativeResult) -> list[tuple[str, str]]:
    stop = (
        "never (speculation pays at every batch size given)"
        if r.stop_above_batch is None
        else f"from batch {r.stop_above_batch} on (k = 0)"
    )
    out = [
        ("Speculation stops paying", stop),
        ("Expected gain over the distribution", format_ratio(r.expected_gain)),
        ("num_speculative_tokens (fixed-k engine)", str(r.num_speculative_tokens)),
        ("Acceptance α_1..α_K", ", ".join(format_number(a) for a in r.alphas)),
    ]
    out += [(f"Flag ({engine})", flag) for engine, flag in r.flags.items()]
    out.append(("vLLM key", f"speculative_config.{r.vllm_key}"))
    out += [(f"Input: {name}", label) for name, label in r.inputs.items()]
    return out


def _table(r: TuneSpeculativeResult) -> Table:
    columns = [
        Column("batch_size", "Batch size", format_number, csv_header="batch_size"),
        Column("k", "Best k", format_number, csv_header="k", importance=2),
        Column("speedup", "Speedup S", format_ratio, csv_header="speedup", importance=2),
        Column("expected_tokens", "E[N]", format_number, csv_header="expected_tokens"),
        Column("share", "Share of steps", format_percent, csv_header="share"),
    ]
    return Table(
        "Draft length per batch size",
        columns,
        rows_of(r.table, columns),
        caption="k = 0: no speculation (S = 1).",
    )


def build_view(result: TuneSpeculativeResult) -> View:
    return View(
        title="Speculation length per batch size",
        summary=_summary(result),
        tables=[_table(result)],
        notes=[
            "Speedups are the model S(k, b) from the given costs and acceptance rates, not measurements.",
            f"vLLM key source: {result.vllm_key_source}.",
        ],
        warnings=list(result.warnings),
    )
