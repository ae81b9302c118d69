"""Collect: feed bytes → reviews, and a week's reviews → one group per pull request.

Pure (``fetch`` does the I/O). The rules are the input contract of docs/architecture.md; the
feedparser traps they avoid:

* the PR is read from the ``alternate`` link with an anchored pattern, never ``entry.link``
  (which falls back to the id) nor PRs cited in the text;
* times come from the UTC ``*_parsed`` values once ``feed_date`` knows the raw date is real
  (feedparser normalises 30 February);
* a document that is not well-formed XML is refused even when feedparser recovers entries:
  it may be truncated, and a partial issue is worse than none.
"""

from __future__ import annotations

import calendar
import io
import re
import xml.sax
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import feedparser  # type: ignore[import-untyped]  # ships neither stubs nor py.typed

from pipeline.core.issue.feed_cut import cut_long_texts
from pipeline.core.issue.feed_date import date_problem
from pipeline.core.issue.sanitize import (
    MAX_BODY_CHARS,
    CleanBody,
    clean_body,
    detect_lang,
    html_to_text,
    one_line,
    plain_line,
    plain_title,
    text_to_html,
)
from pipeline.errors import FeedError
from pipeline.model import Lang, Review, Skipped, Week, is_lang

#: One entry as feedparser gives it: a ``FeedParserDict``, a ``dict`` subclass (hence
#: ``dict.get`` below to bypass its key aliasing), untyped like the rest of feedparser.
Entry = dict[str, Any]

_PR_LINK = re.compile(
    r"^https?://(?:www\.)?github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/pull/([0-9]+)"
    r"(?:/(?:files|commits|checks|changes))?/?(?:[?#]\S*)?$"
)
#: The longest PR number taken: GitHub's are far from a billion, and a longer run of digits is
#: a broken or hostile feed (5,000 digits exceed what ``int()`` converts).
MAX_PR_DIGITS = 9


@dataclass(frozen=True)
class Rejected:
    """An entry that cannot be used, with its time (None when it has none)."""

    skipped: Skipped
    when: datetime | None
    #: updated-else-published: which of two versions of one entry is the newer.
    changed: datetime | None = None


@dataclass(frozen=True)
class FeedResult:
    """What one feed yielded."""

    location: str
    reviews: tuple[Review, ...]
    rejected: tuple[Rejected, ...]
    #: Complaints that do not stop the run (e.g. a wrong declared encoding).
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class PullGroup:
    """Every usable review of one PR, with its latest review per language."""

    pr: int
    url: str
    #: When the PR was first reviewed: decides its week.
    first_reviewed: datetime
    #: Language of the earliest review: its verdict decides the tier.
    original_lang: Lang
    latest: dict[Lang, Review]


def parse_feed(data: bytes, location: str, repo: str, content_type: str | None = None
               ) -> FeedResult:
    """Parse one feed document; raise :class:`FeedError` if it is no usable feed."""
    if not data.strip():
        raise FeedError(location, "is empty")
    feed = cut_long_texts(data, MAX_BODY_CHARS, content_type)  # its time is per character
    headers = {"content-type": feed.content_type} if feed.content_type else None
    # A stream, never the bytes: feedparser opens a string that names a file or a URL, and a
    # feed whose whole body is "/etc/…" would read this machine's file.
    parsed = feedparser.parse(io.BytesIO(feed.data), response_headers=headers)
    exc = parsed.get("bozo_exception") if parsed.bozo else None
    if parsed.bozo and not isinstance(exc, feedparser.ThingsNobodyCaresAboutButMe):
        raise FeedError(location, f"not well-formed XML ({_describe(exc)})")
    warnings = tuple(f"feed {location}: {said}" for said in (exc, feed.warning) if said)
    if not parsed.get("version"):
        raise FeedError(location, "is not an RSS or Atom feed")
    feed_lang = _normalise_lang(parsed.feed.get("language"))
    found = [_review(entry, feed_lang, repo, feed.cut) for entry in parsed.entries]
    reviews = tuple(review for review in found if isinstance(review, Review))
    rejected = tuple(entry for entry in found if isinstance(entry, Rejected))
    return FeedResult(location, reviews, rejected, warnings)


def _describe(exc: BaseException | None) -> str:
    if isinstance(exc, xml.sax.SAXParseException):
        return f"line {exc.getLineNumber()}, column {exc.getColumnNumber()}: {exc.getMessage()}"
    return str(exc) or type(exc).__name__


def _time(entry: Entry, key: str) -> datetime | None:
    # dict.get, not entry.get: feedparser maps a missing updated_parsed to published_parsed.
    value = dict.get(entry, f"{key}_parsed")
    try:
        return datetime.fromtimestamp(calendar.timegm(value), UTC) if value else None
    except (OverflowError, ValueError, OSError):
        return None


def _date_problem(entry: Entry, published: datetime | None, updated: datetime | None
                  ) -> str | None:
    """Why a date feedparser read is not real (it normalises hour 99 and 30 February)."""
    for key, parsed in (("published", published), ("updated", updated)):
        raw = dict.get(entry, key)
        if parsed is not None and raw and (problem := date_problem(str(raw))):
            return f"{key} {problem}"
    return None


def _normalise_lang(tag: str | None) -> str | None:
    """``zh-cn``, ``zh_Hans`` → ``zh``; ``en-US`` → ``en``; other tags kept, lower-case."""
    tag = str(tag or "").strip().lower()
    return re.split(r"[-_]", tag, maxsplit=1)[0] if tag else None


def _alternate_link(entry: Entry) -> str:
    for link in entry.get("links", ()):
        if link.get("rel", "alternate") == "alternate" and link.get("href"):
            return str(link["href"]).strip()
    return ""


def _body(entry: Entry) -> CleanBody:
    for detail in (*entry.get("content", ()), entry.get("summary_detail")):
        if detail and str(detail.get("value", "")).strip():
            value = str(detail["value"])
            if detail.get("type") == "text/plain":
                # Cut before it becomes HTML: a plain text's length is its reader's.
                cut = clean_body(text_to_html(value[:MAX_BODY_CHARS]), limit=None)
                return replace(cut, shortened_from=len(value) if len(value) > MAX_BODY_CHARS
                               else 0)
            return clean_body(value)
    return CleanBody("")


def _title(entry: Entry) -> str:
    value = str(entry.get("title", ""))
    kind = (entry.get("title_detail") or {}).get("type")
    return plain_title(plain_line(value) if kind in ("text/html", "application/xhtml+xml")
                       else one_line(value))


def _entry_lang(entry: Entry, feed_lang: str | None) -> str | None:
    for detail in (*entry.get("content", ()), entry.get("title_detail"),
                   entry.get("summary_detail")):
        if detail and detail.get("language"):
            return _normalise_lang(detail["language"])
    return _normalise_lang(entry.get("language")) or feed_lang


def _review(entry: Entry, feed_lang: str | None, repo: str, cut: dict[str, int]
            ) -> Review | Rejected:
    """One entry as a review, or why not; ``cut`` holds what feed_cut shortened, by entry id."""
    link = _alternate_link(entry)
    title = _title(entry)
    entry_id = str(entry.get("id") or link or title)
    published, updated = _time(entry, "published"), _time(entry, "updated")
    if bad_date := _date_problem(entry, published, updated):
        published = updated = None  # a normalised date would place it in some week

    def reject(reason: str) -> Rejected:
        return Rejected(Skipped(entry_id, link, title, reason), published or updated,
                        updated or published)

    match = _PR_LINK.match(link)
    if not match:
        return reject("link is not a pull request" if link else "entry has no link")
    owner, name, number = match.groups()
    if f"{owner}/{name}".lower() != repo.lower():
        return reject(f"pull request of another repository ({owner}/{name})")
    if len(number) > MAX_PR_DIGITS or int(number) == 0:
        shown = number if len(number) <= 12 else f"{number[:12]}… ({len(number):,} digits)"
        return reject(f"pull request number {shown} is not 1 to {MAX_PR_DIGITS} digits above 0")
    if bad_date:
        return reject(bad_date)
    if published is None and updated is None:
        return reject("entry has no parseable date")
    body = _body(entry)
    if not body.html:
        return reject("entry has no review text")
    lang = _entry_lang(entry, feed_lang) or detect_lang(title + " " + html_to_text(body.html))
    if not is_lang(lang):
        return reject(f"language {lang!r} is neither Chinese nor English")
    categories = tuple(term for term in (
        one_line(str(tag.get("term") or "")) for tag in entry.get("tags", ())) if term)
    return Review(
        entry_id=entry_id, link=link, pr=int(number), lang=lang, title=title or f"#{int(number)}",
        body_html=body.html, published=published, updated=updated, categories=categories,
        shortened_from=cut.get(entry_id, body.shortened_from), flattened=body.flattened,
    )


def merge(results: Iterable[FeedResult]) -> tuple[list[Review], list[Rejected]]:
    """All feeds' entries, an id seen twice counted once, as its newest version. An id naming
    two PRs is a clash: each other PR's latest is rejected, so it shows in ``skipped``."""
    versions: dict[str, list[Review | Rejected]] = {}
    for result in results:
        entries: tuple[Review | Rejected, ...] = (*result.reviews, *result.rejected)
        for entry in entries:
            key = entry.entry_id if isinstance(entry, Review) else entry.skipped.id
            versions.setdefault(key, []).append(entry)
    reviews: list[Review] = []
    rejected: list[Rejected] = []
    for found in versions.values():
        newest = max(found, key=_changed)  # the first of equals, as read
        if isinstance(newest, Review):
            reviews.append(newest)
        else:
            rejected.append(newest)
        rejected.extend(_clashes(newest, found))
    return reviews, rejected


def _clashes(newest: Review | Rejected, found: list[Review | Rejected]) -> list[Rejected]:
    """The latest version of each other PR that ``found`` names under one id, rejected."""
    kept = _pr_of(newest)
    latest: dict[int, Review | Rejected] = {}
    for entry in sorted(found, key=_changed, reverse=True):  # newest first, equals as read
        pr = _pr_of(entry)
        if pr is not None and kept is not None and pr != kept:
            latest.setdefault(pr, entry)
    clashes = []
    for pr, entry in sorted(latest.items()):
        reason = (f"the same entry id is used for PR #{kept}, the newest version; "
                  f"this review of PR #{pr} is dropped")
        if isinstance(entry, Review):
            skipped = Skipped(entry.entry_id, entry.link, entry.title, reason)
            clashes.append(Rejected(skipped, entry.first_seen, entry.last_changed))
        else:
            clashes.append(replace(entry, skipped=replace(entry.skipped, reason=reason)))
    return clashes


def _pr_of(entry: Review | Rejected) -> int | None:
    """The PR an entry is about, also for a rejected one whose link still names one."""
    if isinstance(entry, Review):
        return entry.pr
    match = _PR_LINK.match(entry.skipped.link)
    return int(match[3]) if match and len(match[3]) <= MAX_PR_DIGITS else None


_NEVER = datetime.min.replace(tzinfo=UTC)


def _changed(entry: Review | Rejected) -> datetime:
    return entry.last_changed if isinstance(entry, Review) else entry.changed or _NEVER


def group_week(reviews: Sequence[Review], week: Week, repo: str) -> list[PullGroup]:
    """The PRs first reviewed in ``week``, each with its latest review per language (a
    translation posted after the week still joins its item)."""
    by_pr: dict[int, list[Review]] = {}
    for review in reviews:
        by_pr.setdefault(review.pr, []).append(review)
    groups = []
    for pr, items in by_pr.items():
        earliest = min(items, key=lambda r: (r.first_seen, r.entry_id))
        if earliest.first_seen in week:
            by_change = sorted(items, key=lambda r: (r.last_changed, r.entry_id))
            groups.append(PullGroup(pr, f"https://github.com/{repo}/pull/{pr}",
                                    earliest.first_seen, earliest.lang,
                                    {review.lang: review for review in by_change}))
    return sorted(groups, key=lambda g: (g.first_reviewed, g.pr))


def skipped_in_week(rejected: Iterable[Rejected], week: Week) -> list[Skipped]:
    """Rejected entries worth reporting: those of this week, and those with no date at all."""
    return [r.skipped for r in rejected if r.when is None or r.when in week]
