"""The records that flow through the weekly job, as frozen dataclasses.

Datetimes are timezone-aware UTC. Plain data only: the stages make and transform these
records, and only ``issue_json`` knows the on-disk shape.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Generic, Literal, TypeGuard, TypeVar

Lang = Literal["zh", "en"]
Severity = Literal["blocking", "warning"]

#: The languages every item is written in, in the order a ``zh-en`` layout shows them.
LANGS: tuple[Lang, ...] = ("zh", "en")

#: The layouts a subscriber may choose; the issue is rendered once for each.
LAYOUTS: tuple[str, ...] = ("zh-en", "en-zh", "zh", "en")

#: BCP 47 tags written on ``lang`` attributes.
LANG_TAGS: dict[str, str] = {"zh": "zh-CN", "en": "en"}

T = TypeVar("T")


def is_lang(value: object) -> TypeGuard[Lang]:
    """Whether ``value`` is one of :data:`LANGS`: how outside text becomes a Lang."""
    return value in LANGS


def layout_langs(layout: str) -> tuple[Lang, ...]:
    """The languages a layout shows, in order; ValueError for any other language."""
    parts = layout.split("-")
    langs = tuple(part for part in parts if is_lang(part))
    if len(langs) != len(parts):
        raise ValueError(f"layout {layout!r} names a language other than {', '.join(LANGS)}")
    return langs


def reading_order(layout: str) -> tuple[Lang, ...]:
    """Every language, the layout's own first (``en`` → ``("en", "zh")``)."""
    first = layout_langs(layout)
    return (*first, *(lang for lang in LANGS if lang not in first))


@dataclass(frozen=True)
class Pair(Generic[T]):
    """One value per language."""

    zh: T
    en: T

    def get(self, lang: str) -> T:
        return self.zh if lang == "zh" else self.en


@dataclass(frozen=True)
class Review:
    """One feed entry: the review of one pull request, in one language."""

    entry_id: str
    #: The PR link as the feed gave it.
    link: str
    pr: int
    lang: Lang
    #: Plain-text headline (one line, no markup).
    title: str
    #: Body after sanitizing, with ``backticks`` turned into ``<code>``.
    body_html: str
    published: datetime | None
    updated: datetime | None
    #: Raw category terms, as given.
    categories: tuple[str, ...] = ()
    #: The body's length in the feed when it was cut to ``sanitize.MAX_BODY_CHARS``, else 0.
    shortened_from: int = 0
    #: Whether elements of the body nested too deep were unwrapped (text kept).
    flattened: bool = False

    @property
    def first_seen(self) -> datetime:
        """When this review was first out: its week is decided by this."""
        return self._dated(self.published or self.updated)

    @property
    def last_changed(self) -> datetime:
        """When this review was last changed: the latest review per language wins."""
        return self._dated(self.updated or self.published)

    def _dated(self, when: datetime | None) -> datetime:
        if when is None:  # collect drops entries with neither
            raise ValueError(f"review {self.entry_id} has no date")
        return when


@dataclass(frozen=True)
class Skipped:
    """A feed entry that could not become part of an item, and why."""

    id: str
    link: str
    title: str
    reason: str


@dataclass(frozen=True)
class Problem:
    """Something the editor must see: ``blocking`` ones stop a send."""

    code: str
    severity: Severity
    message: str
    pr: int | None = None
    layout: str | None = None


@dataclass(frozen=True)
class Text:
    """One language's version of an item."""

    title: str
    body_html: str
    body_text: str
    #: Where it came from: ``feed``, ``editor``, ``github-title`` or ``machine:<backend>``.
    source: str = "feed"


@dataclass(frozen=True)
class Verdict:
    """A review's reading-priority verdict, as parsed from its opening clause."""

    tier: str
    #: The phrase that matched, as written in the review.
    phrase: str
    lang: Lang
    #: What a scoped verdict limits the reading to ("只需读 27 行中的 fixture 本体").
    scope: str | None = None
    #: The whole opening clause the verdict was read from, as written: what ``why`` quotes.
    clause: str = ""
    #: For a verdict that holds for some readers only, the condition ("only if you maintain
    #: X"); the tier is then what the review says for everyone else.
    condition: str | None = None


@dataclass(frozen=True)
class PullFacts:
    """What GitHub says about one pull request (:mod:`pipeline.sources.github` asks)."""

    title: str
    author: str
    #: "open", "closed" or "merged".
    state: str
    merged_at: datetime | None
    additions: int
    deletions: int
    changed_files: int
    labels: tuple[str, ...]
    #: Bracketed text of the title, as written, in order: ``[Bugfix][ROCm] x`` → Bugfix, ROCm.
    tags: tuple[str, ...]
    #: Paths of the changed files, when they were asked for.
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Item:
    """One pull request of the week, ranked, in both languages where it has them."""

    pr: int
    url: str
    tier: str
    #: The scope of a scoped verdict, in the language the tier was taken from.
    scope_note: str | None
    why: Pair[str]
    #: When the PR was first reviewed (UTC); decides its week.
    reviewed_at: datetime
    areas: tuple[str, ...]
    reading_minutes: Pair[int]
    zh: Text | None
    en: Text | None
    #: The language the PR was first reviewed in; its verdict decides the tier.
    original_lang: Lang = "zh"
    #: Scope notes per language, for each language block of the email.
    scopes: Pair[str | None] = field(default_factory=lambda: Pair(None, None))
    #: The editor's note to readers, per language (from the editor's file), or None.
    note: Pair[str | None] | None = None
    #: The PR's own facts from GitHub (``[github] enabled``), or None.
    github: PullFacts | None = None
    #: How much of the PR its tier asks a reader to read: ``full``, ``scoped`` (part of it)
    #: or ``conditional`` (a verdict for some readers only); it orders a tier.
    reading: str = "full"
    #: Why the tier, before ``rank.ordered`` adds the order to ``why``; None once read back.
    reason: Pair[str] | None = None

    def text(self, lang: str) -> Text | None:
        return self.zh if lang == "zh" else self.en

    def with_text(self, lang: Lang, text: Text | None) -> Item:
        return replace(self, zh=text) if lang == "zh" else replace(self, en=text)


@dataclass(frozen=True)
class Week:
    """An ISO week in a timezone: ``start`` inclusive, ``end`` exclusive, both UTC."""

    id: str
    start: datetime
    end: datetime
    tz: str

    def __contains__(self, when: datetime) -> bool:
        return self.start <= when < self.end


@dataclass(frozen=True)
class Issue:
    """Everything one week's newsletter says, before rendering."""

    id: str
    week: Week
    repo: str
    items: tuple[Item, ...]
    subject: dict[str, str]
    preheader: dict[str, str]
    skipped: tuple[Skipped, ...]
    problems: tuple[Problem, ...]
    archive_url: str
    #: "No. N": weeks since ``[issue] first_week``, the first being 1; 0 = unnumbered.
    number: int = 0
    #: The week's PRs the editor's file hid (``hide = true``), in PR order: the editor's
    #: decision, not a problem.
    hidden: tuple[int, ...] = ()
    #: Set only on an issue that replaces one already sent (``build --correct``).
    correction: Correction | None = None


@dataclass(frozen=True)
class Correction:
    """An explicit correction of an issue that already went out: what its page shows."""

    #: The day it was made, ``YYYY-MM-DD`` in the issue's timezone.
    on: str
    #: The editor's one-line reason.
    reason: str


@dataclass(frozen=True)
class SiteObject:
    """One file of the site, with the headers a host should serve it with."""

    #: Its path inside the archive (``index.html``, ``issues/2026-W48/index.html``).
    key: str
    data: bytes
    content_type: str
    cache_control: str

    @property
    def md5(self) -> str:
        return hashlib.md5(self.data, usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class Outgoing:
    """One finished message for one recipient, as a transport takes it."""

    #: The envelope recipient (one per message: a bounce names exactly one subscriber).
    recipient: str
    #: The envelope sender (the address part of ``From``).
    sender: str
    #: The whole RFC 5322 message, CRLF line endings.
    raw: bytes
    #: A stable name for this message: ``<issue>/<subscriber id>`` or ``<issue>/test-<layout>``.
    key: str
    #: Tags a transport may attach (SES message tags): e.g. {"issue": "2026-W48"}.
    tags: Mapping[str, str] = field(default_factory=dict)
