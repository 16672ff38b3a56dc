"""Self-contained HTML renderer: one file, a little CSS, tables as HTML tables, figures
embedded as base64 ``data:`` URIs (nothing to fetch, nothing beside the file)."""

from __future__ import annotations

import base64
from html import escape

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

CSS = """
body { font: 15px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328;
       max-width: 1100px; margin: 2rem auto; padding: 0 1.5rem; }
h1 { border-bottom: 1px solid #d0d7de; padding-bottom: .3rem; }
h2 { border-bottom: 1px solid #d0d7de; padding-bottom: .2rem; margin-top: 2.2rem; }
code, pre { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
            background: #f6f8fa; border-radius: 4px; }
code { padding: .1rem .3rem; }
pre { padding: .8rem 1rem; overflow-x: auto; }
table { border-collapse: collapse; margin: .4rem 0 .2rem; font-size: 13.5px; display: block;
        overflow-x: auto; }
th, td { border: 1px solid #d0d7de; padding: .25rem .6rem; }
th { background: #f6f8fa; }
td.r, th.r { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.l, th.l { text-align: left; }
tr.best td { background: #e6f4ea; font-weight: 600; }
tr.bad td { background: #fde7e9; }
tr.muted td { color: #6e7781; }
.caption { color: #57606a; font-size: 13px; font-style: italic; margin: 0 0 1rem; }
.table-title { font-weight: 600; margin: 1.2rem 0 0; }
ul.summary { padding-left: 1.2rem; }
.verdict { font-weight: 700; }
.verdict.ok { color: #1a7f37; } .verdict.fail { color: #cf222e; }
blockquote { margin: .6rem 0; padding: .1rem .9rem; color: #57606a; border-left: 4px solid #d0d7de; }
blockquote.warning { border-color: #d4a72c; background: #fff8c5; color: #3b2300; }
li.bad { color: #cf222e; font-weight: 600; } li.good { color: #1a7f37; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; }
figcaption { color: #57606a; font-size: 13px; }
.provenance { color: #57606a; font-size: 13px; }
"""

_MARKS = {"bad": "❌ ", "good": "✅ ", "info": ""}


def table_html(table: Table) -> str:
    align = ["r" if c.align == "right" else "l" for c in table.columns]
    head = "".join(
        f'<th class="{a}">{escape(c.header)}</th>' for c, a in zip(table.columns, align, strict=True)
    )
    body = []
    for i, row in enumerate(table.rows):
        style = table.highlight.get(i)
        cls = f' class="{style}"' if style else ""
        cells = "".join(
            f'<td class="{a}">{escape(c.format(row.get(c.key)))}</td>'
            for c, a in zip(table.columns, align, strict=True)
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    out = [f'<p class="table-title">{escape(table.title)}</p>']
    out.append(
        f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(body) + "\n</tbody>\n</table>"
    )
    if table.caption:
        out.append(f'<p class="caption">{escape(table.caption)}</p>')
    return "\n".join(out)


def figure_html(figure: Figure) -> str:
    try:
        data = base64.b64encode(figure.path.read_bytes()).decode("ascii")
        src = f"data:image/png;base64,{data}"
    except OSError:
        src = escape(figure.link)
    caption = escape(figure.caption)
    return f'<figure><img src="{src}" alt="{caption}"><figcaption>{caption}</figcaption></figure>'


def view_html(view: View, figures: list[Figure] | None = None) -> list[str]:
    parts = []
    if view.summary:
        items = "".join(f"<li><b>{escape(k)}:</b> {escape(v)}</li>" for k, v in view.summary)
        parts.append(f'<ul class="summary">{items}</ul>')
    if view.verdict:
        cls = "ok" if view.verdict_ok else "fail"
        parts.append(f'<p class="verdict {cls}">{escape(view.verdict)}</p>')
    parts.extend(figure_html(f) for f in figures or [])
    parts.extend(table_html(t) for t in view.tables)
    parts.extend(f"<blockquote>{escape(n)}</blockquote>" for n in view.notes)
    parts.extend(f'<blockquote class="warning">⚠️ {escape(text(w))}</blockquote>' for w in view.warnings)
    return parts


def highlights_html(items: list[Highlight]) -> str:
    out = []
    for topic, group in grouped_highlights(items):
        if len(group) == 1:
            h = group[0]
            out.append(
                f'<li class="{h.level}">{_MARKS[h.level]}<b>{escape(topic)}:</b> {escape(h.text)}</li>'
            )
            continue
        inner = "".join(f'<li class="{h.level}">{_MARKS[h.level]}{escape(h.text)}</li>' for h in group)
        out.append(f"<li><b>{escape(topic)}</b><ul>{inner}</ul></li>")
    return "<ul>" + "".join(out) + "</ul>"


def _commands(commands: list[str]) -> str:
    lines = "\n".join(f"$ {escape(c)}" for c in commands)
    return f"<p>{escape(COMMANDS_INTRO)}</p>\n<pre>{lines}</pre>"


HTML = Markup(
    heading=lambda text, level: f"<h{level}>{escape(text)}</h{level}>",
    highlights=highlights_html,
    view=view_html,
    commands=_commands,
    provenance=lambda words: f'<p class="provenance">{words}.</p>',
    code=lambda text: f"<code>{escape(text)}</code>",
    plain=escape,
)


class HtmlRenderer(Renderer):
    name = "html"
    extensions = (".html", ".htm")
    description = "one self-contained HTML page (figures embedded)"

    def render(self, doc: Document) -> str:
        title = doc.title or (doc.sections[0].view.title if doc.sections else "infer-opt")
        return (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + "\n".join(report_blocks(doc, title, HTML))
            + "\n</body>\n</html>\n"
        )
