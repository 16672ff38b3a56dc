"""The renderer layer: one :class:`Renderer` per output format, all rendering one
:class:`Document`, picked by name (``--format``) or by a file's extension through the one
table :data:`~infer_opt.registry.RENDERERS` (the pyinstrument pattern: a session, one
``render()`` per format).

A document is one result (what every command prints or writes) or several (``infer-opt
report``): each :class:`Section` holds the result's :class:`~infer_opt.reports.view.View`
(its rows built once by the kind's view builder), the saved envelope when the result came
from a file, and the figures written for it. Adding a format is one new renderer class and
one line in :data:`~infer_opt.registry.RENDERERS`.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from infer_opt.errors import InvalidInput
from infer_opt.registry import RENDERERS
from infer_opt.reports.view import Table, View, build_view
from infer_opt.results import Result


@dataclass(frozen=True)
class Figure:
    """A PNG written for a section: where it is on disk and how the document links to it."""

    path: Path
    link: str
    caption: str


@dataclass(frozen=True)
class Highlight:
    """One line of a report's "what matters" summary: what it is about (``topic``) and the
    finding; ``bad`` ones (a failed check, a slowdown) are shown first and marked."""

    topic: str
    text: str
    level: Literal["info", "good", "bad"] = "info"


@dataclass
class Section:
    """One result in a document."""

    view: View
    result: Result | None = None
    #: the saved envelope (``command``, ``environment``, ``created``) when loaded from a file
    envelope: dict[str, Any] | None = None
    figures: list[Figure] = field(default_factory=list)
    #: the file the result was read from
    source: str | None = None

    @property
    def command(self) -> str | None:
        return None if self.envelope is None else self.envelope.get("command")


@dataclass
class Document:
    """What a renderer renders: one or more sections, and for a multi-result report a
    title, the "what matters" highlights, an environment view and the commands to rerun."""

    sections: list[Section]
    title: str | None = None
    highlights: list[Highlight] = field(default_factory=list)
    #: environment block (its summary and tables), shown after the highlights
    about: View | None = None
    #: the command lines that produced the sections, in the order they ran
    commands: list[str] = field(default_factory=list)

    @classmethod
    def of(
        cls, result: Result, envelope: dict[str, Any] | None = None, options: dict[str, Any] | None = None
    ) -> Document:
        """The document of a single result (what a command prints or writes); ``options`` are
        its view's display options."""
        return cls([Section(build_view(result, **(options or {})), result, envelope)])

    @property
    def is_report(self) -> bool:
        return self.title is not None


def grouped_highlights(items: list[Highlight]) -> list[tuple[str, list[Highlight]]]:
    """Consecutive highlights about the same topic, grouped: ``[(topic, [items...]), ...]``."""
    groups: list[tuple[str, list[Highlight]]] = []
    for item in items:
        if groups and groups[-1][0] == item.topic:
            groups[-1][1].append(item)
        else:
            groups.append((item.topic, [item]))
    return groups


def titled_tables(doc: Document) -> list[tuple[str, Table]]:
    """Every table of the document with a title that says which section it belongs to."""
    single = len(doc.sections) == 1
    return [
        (table.title if single else f"{s.view.title} / {table.title}", table)
        for s in doc.sections
        for table in s.view.tables
    ]


class Renderer(ABC):
    """Formats a :class:`Document` as text. Subclasses set ``name`` (the ``--format``
    value), ``extensions`` (file suffixes that pick them) and implement :meth:`render`."""

    name: ClassVar[str]
    extensions: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = ""

    @abstractmethod
    def render(self, doc: Document) -> str:
        """The whole document in this format."""


#: what a report says before its sections list the commands that produced them
COMMANDS_INTRO = "The commands that produced these results, in the order they ran:"


@dataclass(frozen=True)
class Markup:
    """How a report format (markdown, HTML) writes each part of a report: a heading of a level
    (1 = the title), the "what matters" list, a view's blocks ``view(view, figures)``, the
    command lines, a provenance line from its words, inline code and plain (escaped) text."""

    heading: Callable[[str, int], str]
    highlights: Callable[[list[Highlight]], str]
    view: Callable[..., list[str]]
    commands: Callable[[list[str]], str]
    provenance: Callable[[str], str]
    code: Callable[[str], str]
    plain: Callable[[str], str]


def provenance(section: Section, markup: Markup) -> str | None:
    """Which command produced a section, the file it was saved in and when (None if unknown)."""
    bits = []
    if section.command:
        bits.append(f"Produced by {markup.code(section.command)}")
    if section.source:
        bits.append(f"saved in {markup.code(section.source)}")
    created = (section.envelope or {}).get("created")
    if created:
        bits.append(f"at {markup.plain(created)}")
    return markup.provenance(", ".join(bits)) if bits else None


def report_blocks(doc: Document, title: str, markup: Markup) -> list[str]:
    """A report's blocks in reading order — title, "what matters", the environment, the
    commands, then each section under a heading (numbered when there are several) with where
    it came from — written in ``markup``."""
    blocks = [markup.heading(title, 1)]
    if doc.highlights:
        blocks += [markup.heading("What matters", 2), markup.highlights(doc.highlights)]
    if doc.about is not None:
        blocks += [markup.heading(doc.about.title, 2), *markup.view(doc.about, None)]
    if doc.commands:
        blocks.append(markup.commands(doc.commands))
    numbered = len(doc.sections) > 1
    for i, section in enumerate(doc.sections, start=1):
        if doc.is_report or numbered:
            blocks.append(markup.heading(f"{i}. {section.view.title}" if numbered else section.view.title, 2))
        line = provenance(section, markup)
        if line:
            blocks.append(line)
        blocks += markup.view(section.view, section.figures)
    return blocks


def renderer_class(name: str, option: str = "--format") -> type[Renderer]:
    if name not in RENDERERS:
        raise InvalidInput(option, name, f"expected one of {', '.join(RENDERERS)}")
    module_name, _, class_name = RENDERERS[name].partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def extension_map() -> dict[str, str]:
    """File suffix (lower case, with the dot) -> format name, from the renderers' own lists."""
    return {ext: name for name in RENDERERS for ext in renderer_class(name).extensions}


def format_for_path(path: str | Path, option: str = "--out") -> str:
    """The format a file name asks for, e.g. ``report.md`` -> ``markdown``."""
    suffix = Path(path).suffix.lower()
    known = extension_map()
    if suffix not in known:
        raise InvalidInput(option, str(path), f"extension must be one of {', '.join(known)}")
    return known[suffix]


def get_renderer(name: str, option: str = "--format", **options: Any) -> Renderer:
    """An instance of the renderer called ``name`` (options go to its constructor)."""
    return renderer_class(name, option)(**options)


def render(doc: Document | Result, fmt: str, **options: Any) -> str:
    """Shortcut: ``render(result, "markdown")``."""
    if isinstance(doc, Result):
        doc = Document.of(doc)
    return get_renderer(fmt, **options).render(doc)
