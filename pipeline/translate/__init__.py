"""Machine translation: the :class:`Translator` interface, its record, and the memory's.

Off by default, and the last source of a text (after the editor, the feed and the GitHub
title). A translation the guard refuses is never remembered. Adapters convert their own
errors into :class:`TranslateError`, keeping the cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pipeline.resource import Resource

__all__ = ["API_KEY_VARIABLE", "LANGUAGE_NAMES", "MEMORY_FILE", "Memory", "Translation",
           "Translator"]

#: The one secret of machine translation, read from the environment only.
API_KEY_VARIABLE = "NEWSLETTER_TRANSLATE_API_KEY"
#: The memory's file name inside ``[paths] data_dir``.
MEMORY_FILE = "translations.sqlite3"
#: How prompts name the languages (and the languages a translator is asked for).
LANGUAGE_NAMES = {"zh": "Simplified Chinese", "en": "English"}


class Translator(Resource, Protocol):
    """Turns one text (``⟦n⟧`` placeholders kept) from ``zh`` or ``en`` into the other.

    Raises :class:`TranslateError` and nothing else when the service fails; thread-safe.
    """

    #: ``openai`` or ``aws``: recorded as ``machine:<name>``.
    name: str
    #: The model (``amazon-translate`` for aws); part of the memory's key.
    model: str

    def translate(self, text: str, source: str, target: str) -> str: ...


class Memory(Protocol):
    """Accepted translations by source text, backend, model and target; storage failures
    raise :class:`OutputError`."""

    def get(self, source_text: str, *, backend: str, model: str, target: str) -> str | None:
        """The remembered translation, or None."""

    def put(self, source_text: str, text: str, *, backend: str, model: str,
            target: str) -> None:
        """Remember a translation (replacing what was there for the same key)."""


@dataclass(frozen=True)
class Translation:
    """The outcome of translating one text."""

    #: Restored, sanitized HTML (a one-line plain title for titles); None when rejected.
    text: str | None
    #: Provenance for ``issue.json``: ``machine:<backend>``.
    source: str
    #: Why the translation was refused (for the proof report); None when accepted.
    rejected: str | None
    #: Whether it came from the translation memory (no call was made).
    cached: bool
