"""Warnings and verdict reasons as data: a code and the values behind it.

The core (cost models, profilers, checks) says *what* happened as a :class:`Notice` —
``Notice("high_variance", {"rel_iqr": 0.16})`` — and never how to say it; the report layer
(:mod:`infer_opt.messages`) turns a notice into words, and the JSON envelope carries
the code, its values and the words, so scripts can test for the code.

Codes are short snake_case strings, stable once released (scripts depend on them). Every
code the package emits has a message in :data:`infer_opt.messages.MESSAGES` (a
test checks).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

#: the code of a warning read back from a file that stored it as words
LEGACY_TEXT = "legacy_text"


@dataclass(frozen=True)
class Notice:
    """One warning or reason: ``code`` (what happened), ``values`` (the numbers and names
    the words need) and ``subject`` (what it is about: a case, an operator, a phase)."""

    code: str
    values: Mapping[str, Any] = field(default_factory=dict)
    subject: str | None = None

    def about(self, subject: str) -> Notice:
        """The same notice about ``subject`` (prefixed to an existing subject)."""
        return replace(self, subject=subject if self.subject is None else f"{subject}: {self.subject}")

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @classmethod
    def from_text(cls, text: str) -> Notice:
        """A warning saved as words by an infer-opt older than the codes (``legacy_text``)."""
        return cls(LEGACY_TEXT, {"text": text})


def about(notices: Iterable[Notice], subject: str) -> tuple[Notice, ...]:
    """Every notice of ``notices``, said about ``subject``."""
    return tuple(n.about(subject) for n in notices)


def has(notices: Iterable[Notice], code: str) -> bool:
    """Whether any notice has ``code``."""
    return any(n.code == code for n in notices)
