"""GitHub-flavoured markdown renderer of a :class:`View`."""

from __future__ import annotations

from infer_opt.reports.view import Table, View


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table_markdown(table: Table) -> str:
    header = "| " + " | ".join(_cell(c.header) for c in table.columns) + " |"
    rule = "|" + "|".join(("---:" if c.align == "right" else ":---") for c in table.columns) + "|"
    lines = [header, rule]
    for row in table.rows:
        lines.append("| " + " | ".join(_cell(c.format(row.get(c.key))) for c in table.columns) + " |")
    return "\n".join(lines)


def render(view: View, heading_level: int = 2) -> str:
    """The view as markdown: heading, summary list, tables with captions, notes, warnings."""
    h = "#" * heading_level
    parts = [f"{h} {view.title}"]
    if view.summary:
        parts.append("\n".join(f"- **{key}:** {value}" for key, value in view.summary))
    for table in view.tables:
        block = f"**{table.title}**\n\n{table_markdown(table)}"
        if table.caption:
            block += f"\n\n_{table.caption}_"
        parts.append(block)
    if view.verdict:
        parts.append(f"**{view.verdict}**")
    if view.notes:
        parts.append("\n".join(f"> {note}" for note in view.notes))
    if view.warnings:
        parts.append("\n".join(f"> ⚠️ {w}" for w in view.warnings))
    return "\n\n".join(parts) + "\n"
