"""Machine translation: the :class:`Translator` interface, its record, and the memory's.

Off by default (``[translate] backend = "none"``). Machine translation comes last in
the precedence of texts (editor, feed, GitHub title, machine); a translator only turns one
text into another language. The flow around it lives in
:mod:`pipeline.stages.machine_translation`:

    protect (translate_guard) → memory lookup → Translator.translate → restore → clean_html
                                   hit: no call                      GuardError: rejected,
                                                                     not remembered

Adapters, each converting its own errors at its edge into :class:`TranslateError` (keeping the
cause) and letting anything unexpected through; :func:`pipeline.wiring.open_translator` picks
one from the settings:

- ``openai`` (:mod:`pipeline.translate.openai`): any OpenAI-compatible
  ``/v1/chat/completions`` endpoint (a vLLM server is the natural one).
- ``aws`` (:mod:`pipeline.translate.aws`): Amazon Translate ``TranslateText`` through boto3.

The memory (:mod:`pipeline.translate.memory`, SQLite in the data folder) keys each result by
the sha256 of the source text, the backend, the model and the target language: a re-run makes
no call and yields identical text, and changing the model translates afresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pipeline.resource import Resource

__all__ = [
    "API_KEY_VARIABLE",
    "LANGUAGE_NAMES",
    "MEMORY_FILE",
    "Memory",
    "Translation",
    "Translator",
]

#: The one secret of machine translation, read from the environment only.
API_KEY_VARIABLE = "NEWSLETTER_TRANSLATE_API_KEY"
#: The memory's file name inside ``[paths] data_dir``.
MEMORY_FILE = "translations.sqlite3"
#: How prompts name the languages (and the languages a translator is asked for).
LANGUAGE_NAMES = {"zh": "Simplified Chinese", "en": "English"}


class Translator(Resource, Protocol):
    """Turns one text into another language in one call.

    ``text`` holds ``⟦n⟧`` placeholders that must come back unchanged (the guard checks).
    ``source`` and ``target`` are ``zh`` or ``en``. Raises :class:`TranslateError` and nothing
    else for a failure of the service; safe to call from several threads.
    """

    #: ``openai`` or ``aws``: recorded as ``machine:<name>``.
    name: str
    #: The model (``amazon-translate`` for aws); part of the memory's key.
    model: str

    def translate(self, text: str, source: str, target: str) -> str: ...


class Memory(Protocol):
    """Accepted translations, keyed by the source text, the backend, the model and the target
    language (:class:`pipeline.translate.memory.TranslationMemory` is the one kept on disk).
    Storage failures raise :class:`OutputError`."""

    def get(self, source_text: str, *, backend: str, model: str, target: str) -> str | None:
        """The remembered translation, or None."""
        ...

    def put(self, source_text: str, text: str, *, backend: str, model: str,
            target: str) -> None:
        """Remember a translation (replacing what was there for the same key)."""
        ...


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
