"""View of ``infer-opt ab``: the two command lines and their alternated runs, then the
comparison (:mod:`infer_opt.reports.compare`) and, after an A/A, the noise it measured."""

from __future__ import annotations

from infer_opt.reports import compare as compare_view
from infer_opt.reports import noise_floor as noise_view
from infer_opt.reports.view import Column, Table, View
from infer_opt.results.ab import AbResult
from infer_opt.units import format_duration


def _runs_table(result: AbResult) -> Table:
    rows = [
        {"order": i + 1, "side": r.side, "round": r.round, "wall_s": r.wall_s, "file": r.file}
        for i, r in enumerate(result.runs)
    ]
    columns = [
        Column("order", "#", csv_header="order"),
        Column("side", "Side", align="left", csv_header="side"),
        Column("round", "Round", csv_header="round"),
        Column("wall_s", "Wall time", format_duration, csv_header="wall_s"),
        Column("file", "Result file", align="left", csv_header="file"),
    ]
    return Table("Runs, in the order they ran", columns, rows)


def build_view(result: AbResult) -> View:
    view = compare_view.build_view(result.comparison)
    head = [("Base command", result.base_command), ("New command", result.new_command)]
    if result.base_env:
        head.append(("Base environment", " ".join(result.base_env)))
    if result.new_env:
        head.append(("New environment", " ".join(result.new_env)))
    head.append(("Rounds", f"{result.rounds} (base then new, each a new process); files in {result.folder}"))
    tables = [*view.tables, _runs_table(result)]
    notes = list(view.notes)
    if result.noise_floor is not None:
        tables.append(noise_view.noise_table(result.noise_floor))
        saved = result.noise_saved_to or "not saved"
        head.append(("A/A", f"the same command on both sides: run-to-run noise measured ({saved})"))
        notes.append(noise_view.NOISE_NOTE)
    title = "A/A" if result.is_aa else "A/B"
    return View(
        title=f"{title}: {result.new_command} against {result.base_command}",
        summary=[*head, *view.summary[2:]],
        tables=tables,
        notes=notes,
        warnings=[*result.warnings, *view.warnings],
        verdict=view.verdict,
        verdict_ok=view.verdict_ok,
    )
