"""The editor's file: ``editorial/<week>.toml``, keyed by PR number.

    [53721]
    priority = "must-read"        # overrides the feed's category and the review's verdict
    note = "Start with the tests."  # shown to the readers of the language it is written in
    hide = true                    # leave this PR out of the issue

    [53721.zh]
    note = "先读测试。"             # a note for Chinese readers (and [53721.en] note, English)

    [53721.en]
    title = "…"                   # the editor's own text wins over the feed (source "editor")
    body = "…"                    # plain text; blank lines split paragraphs; `backticks` = code

A note shows only under its own language's label: a ``note`` at the PR's level belongs to
the language it is written in, and that language's own table wins over it. Validated
strictly: a misspelt key is an error naming the file and the key (exit 2).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.issue.sanitize import detect_lang, one_line, strip_unsafe
from pipeline.errors import ConfigError
from pipeline.model import LANGS, Lang, Pair

_ENTRY_KEYS = {"priority", "hide", "note", *LANGS}
_TEXT_KEYS = {"title", "body", "note"}
#: A PR number as a table name: 1 to 9 ASCII digits (``str.isdigit`` also takes "٣" and "²").
_PR_KEY = re.compile(r"[0-9]{1,9}")


@dataclass(frozen=True)
class EditorText:
    title: str | None = None
    body: str | None = None


@dataclass(frozen=True)
class EditorEntry:
    priority: str | None = None
    hide: bool = False
    note: Pair[str | None] = field(default_factory=lambda: Pair(None, None))
    texts: dict[Lang, EditorText] = field(default_factory=dict)


@dataclass(frozen=True)
class Editorial:
    """What the editor decided for one week (empty when there is no file)."""

    path: Path | None = None
    entries: dict[int, EditorEntry] = field(default_factory=dict)

    def get(self, pr: int) -> EditorEntry | None:
        return self.entries.get(pr)


def editorial_path(folder: Path, week_id: str) -> Path:
    return folder / f"{week_id}.toml"


def parse_editorial(text: str, path: Path, tiers: tuple[str, ...]) -> Editorial:
    """The editor's file ``path`` from its ``text``; ConfigError naming what is wrong."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    entries = {}
    for key, table in raw.items():
        where = f"{path.name} [{key}]"
        if not _PR_KEY.fullmatch(key) or int(key) == 0 or not isinstance(table, dict):
            raise ConfigError("expected a table named by a PR number, e.g. [53721]", key=where)
        entries[int(key)] = _entry(table, where, tiers)
    return Editorial(path, entries)


def _entry(table: dict[str, Any], where: str, tiers: tuple[str, ...]) -> EditorEntry:
    unknown = set(table) - _ENTRY_KEYS
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(sorted(unknown))}; known: "
                          f"{', '.join(sorted(_ENTRY_KEYS))}", key=where)
    priority = table.get("priority")
    if priority is not None and priority not in tiers:
        raise ConfigError(f"priority must be one of {', '.join(tiers)}, got {priority!r}",
                          key=where)
    for key, kind, what in (("hide", bool, "true or false"), ("note", str, "a string")):
        if key in table and not isinstance(table[key], kind):
            raise ConfigError(f"{key} must be {what}", key=where)
    texts: dict[Lang, EditorText] = {}
    # A note at the PR's level is in one language: an English one under 编者按 reads wrong.
    notes: dict[Lang, str | None] = {"zh": None, "en": None}
    if table.get("note"):
        notes[detect_lang(table["note"])] = table["note"]
    for lang in (lang for lang in LANGS if lang in table):
        sub = table[lang]
        if not isinstance(sub, dict) or set(sub) - _TEXT_KEYS or not all(
                isinstance(v, str) for v in sub.values()):
            raise ConfigError(f"[{lang}] takes title, body and note, as strings", key=where)
        texts[lang] = EditorText(_clean(sub.get("title")), _clean(sub.get("body"), lines=True))
        if sub.get("note"):
            notes[lang] = sub["note"]
    hide = table.get("hide", False)
    return EditorEntry(priority, hide, Pair(_clean(notes["zh"]), _clean(notes["en"])), texts)


def _clean(text: str | None, *, lines: bool = False) -> str | None:
    """The editor's text without characters that reorder or hide it; one line unless
    ``lines`` (a body keeps its line breaks)."""
    text = (strip_unsafe(text).strip() if lines else one_line(text)) if text else ""
    return text or None
