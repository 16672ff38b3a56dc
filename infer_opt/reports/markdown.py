"""GitHub-flavoured markdown renderer: one view (what ``--markdown`` writes), or a whole
report (title, "what matters", environment, one numbered section per result with its
figures linked relatively)."""

from __future__ import annotations

from infer_opt.messages import text
from infer_opt.reports.render import (
    COMMANDS_INTRO,
    Document,
    Figure,
    Highlight,
    Markup,
    Renderer,
    grouped_highlights,
    report_blocks,
)
from infer_opt.reports.view import Table, View

_MARKS = {"bad": "❌ ", "good": "✅ ", "info": ""}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """Inline code that survives backticks in the text."""
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def table_markdown(table: Table) -> str:
    header = "| " + " | ".join(_cell(c.header) for c in table.columns) + " |"
    rule = "|" + "|".join(("---:" if c.align == "right" else ":---") for c in table.columns) + "|"
    lines = [header, rule]
    for row in table.rows:
        lines.append("| " + " | ".join(_cell(c.format(row.get(c.key))) for c in table.columns) + " |")
    return "\n".join(lines)


def _figure(figure: Figure) -> str:
    alt = figure.caption.replace("[", "(").replace("]", ")")
    return f"![{alt}]({figure.link.replace(' ', '%20')})"


def view_blocks(view: View, figures: list[Figure] | None = None) -> list[str]:
    """The body of a view as markdown blocks: summary list, verdict, figures, tables with
    captions, notes, warnings."""
    parts = []
    if view.summary:
        parts.append("\n".join(f"- **{key}:** {value}" for key, value in view.summary))
    if figures:
        if view.verdict:
            parts.append(f"**{view.verdict}**")
        parts.extend(_figure(f) for f in figures)
    for table in view.tables:
        block = f"**{table.title}**\n\n{table_markdown(table)}"
        if table.caption:
            block += f"\n\n_{table.caption}_"
        parts.append(block)
    if view.verdict and not figures:
        parts.append(f"**{view.verdict}**")
    # a ">" line between items keeps each note its own paragraph inside one quote
    if view.notes:
        parts.append("\n>\n".join(f"> {note}" for note in view.notes))
    if view.warnings:
        parts.append("\n>\n".join(f"> ⚠️ {text(w)}" for w in view.warnings))
    return parts


def render(view: View, heading_level: int = 2) -> str:
    """One view as markdown: heading, summary list, tables with captions, notes, warnings."""
    return "\n\n".join([f"{'#' * heading_level} {view.title}", *view_blocks(view)]) + "\n"


def highlights_markdown(items: list[Highlight]) -> str:
    """A bullet per highlight; several about one topic nest under it."""
    lines = []
    for topic, group in grouped_highlights(items):
        if len(group) == 1:
            lines.append(f"- {_MARKS[group[0].level]}**{topic}:** {group[0].text}")
            continue
        lines.append(f"- **{topic}**")
        lines.extend(f"  - {_MARKS[h.level]}{h.text}" for h in group)
    return "\n".join(lines)


def _commands(commands: list[str]) -> str:
    lines = "\n".join(f"$ {c}" for c in commands)
    return f"{COMMANDS_INTRO}\n\n```console\n{lines}\n```"


MARKDOWN = Markup(
    heading=lambda text, level: f"{'#' * level} {text}",
    highlights=highlights_markdown,
    view=view_blocks,
    commands=_commands,
    provenance=lambda words: f"_{words}._",
    code=_code,
    plain=str,
)


class MarkdownRenderer(Renderer):
    name = "markdown"
    extensions = (".md", ".markdown")
    description = "GitHub-flavoured markdown (tables, relative image links)"

    def render(self, doc: Document) -> str:
        if not doc.is_report and len(doc.sections) == 1:
            section = doc.sections[0]
            parts = [f"## {section.view.title}", *view_blocks(section.view, section.figures)]
        else:
            parts = report_blocks(doc, doc.title or "infer-opt report", MARKDOWN)
        return "\n\n".join(parts) + "\n"
