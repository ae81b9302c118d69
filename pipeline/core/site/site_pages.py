"""Site pages across issues: one page per reviewed PR and one per area, newest first.

Area names are feed text: :func:`~pipeline.core.issue.interests.area_slug` is the one way a
name becomes a path segment, so ``../x`` or ``<script>`` can only be a page's text, never its
place.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any
from urllib.parse import quote

import pendulum

from pipeline.core.issue.interests import area_slug
from pipeline.core.shipped import strings
from pipeline.model import Issue, Item
from pipeline.week import first_and_last_day

#: An area's Atom feed carries its latest reviews in full; its page lists them all.
AREA_FEED_ENTRIES = 50
#: Reviews on one page of an area; the first page is the area's index, the rest
#: ``areas/<slug>/page/<n>/index.html``, each linked to the one before and after.
AREA_PAGE_SIZE = 50


def pr_key(pr: int) -> str:
    return f"pr/{pr}/index.html"


def area_key(slug: str, name: str = "index.html") -> str:
    return f"areas/{slug}/{name}"


def url_of(base: str, key: str) -> str:
    """The URL of an archive key under ``base``: a path from the site's root when ``base`` is
    ``""``, absolute when it is ``[site] base_url``."""
    return f"{base}/{quote(key, safe='/')}"


def headline_dates(start: datetime, end: datetime, tz: str) -> dict[str, str]:
    """An issue's days as a headline: ``2026 年 11 月 23 日 – 29 日`` and ``23–29 Nov 2026``
    (``end`` exclusive); the month and year are repeated only where they change."""
    first, last = first_and_last_day(start, end, tz)
    zh = f"{first.year} 年 {first.month} 月 {first.day} 日 – "
    if first.year != last.year:
        zh += f"{last.year} 年 {last.month} 月 {last.day} 日"
        en = f"{first.format('D MMM YYYY', locale='en')} – {last.format('D MMM YYYY', locale='en')}"
    elif first.month != last.month:
        zh += f"{last.month} 月 {last.day} 日"
        en = f"{first.format('D MMM', locale='en')} – {last.format('D MMM YYYY', locale='en')}"
    else:
        zh += f"{last.day} 日"
        en = f"{first.day}–{last.day} {last.format('MMM YYYY', locale='en')}"
    return {"zh": zh, "en": en}


class IssueView:
    """One issue as the web templates read it."""

    def __init__(self, issue: Issue, base: str) -> None:
        """``base``: where its links start, the site's root as a path (``""``)."""
        self.issue = issue
        self.base = base
        self.url = self.page_url()
        #: The end of the week (the Monday it goes out): stable, so re-publishing is a no-op.
        self.published = pendulum.instance(issue.week.end).in_timezone(issue.week.tz)

    def page_url(self, variant: str = "index.html") -> str:
        return f"{self.base}/issues/{self.id}/{variant}"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.issue, name)  # id, items, subject, preheader, number

    def day(self, item: Item) -> str:
        """The day ``item`` was first reviewed, in the issue's zone (``2026-11-23``)."""
        return pendulum.instance(item.reviewed_at).in_tz(self.issue.week.tz).format("YYYY-MM-DD")

    @cached_property
    def ranges(self) -> dict[str, str]:
        return headline_dates(self.issue.week.start, self.issue.week.end, self.issue.week.tz)

    def number_label(self, lang: str) -> str:
        """``第 3 期`` / ``No. 3``; "" for an unnumbered issue (a week before issue No. 1)."""
        return strings()[lang]["issue_number"].format(n=self.number) if self.number else ""

    def headline(self, lang: str) -> str:
        """The number (when there is one) and the days: how the index names an issue."""
        label = self.number_label(lang)
        return f"{label} · {self.ranges[lang]}" if label else self.ranges[lang]

    def title(self, item: Item, lang: str) -> str:
        text = (item.zh or item.en) if lang == "zh" else (item.en or item.zh)
        return text.title if text else f"#{item.pr}"


@dataclass(frozen=True)
class Appearance:
    """One review of a PR: the item as one issue carried it."""

    issue: IssueView
    item: Item


@dataclass(frozen=True)
class PrPage:
    """Every review of one PR across the archive, newest first."""

    pr: int
    reviews: tuple[Appearance, ...]

    @property
    def key(self) -> str:
        return pr_key(self.pr)

    @property
    def latest(self) -> Appearance:
        return self.reviews[0]


@dataclass(frozen=True)
class AreaPage:
    """Every review tagged with one area (or with names sharing its slug), newest first."""

    slug: str
    names: tuple[str, ...]
    reviews: tuple[Appearance, ...]

    @property
    def name(self) -> str:
        return " / ".join(self.names)

    def key(self, file: str = "index.html") -> str:
        return area_key(self.slug, file)

    @property
    def page_count(self) -> int:
        return max(1, -(-len(self.reviews) // AREA_PAGE_SIZE))

    def page_key(self, n: int) -> str:
        """Page ``n`` (from 1) of the area's reviews: its index, then ``page/<n>/``."""
        return self.key() if n == 1 else self.key(f"page/{n}/index.html")

    def page(self, n: int) -> tuple[Appearance, ...]:
        """The reviews of page ``n``, newest first."""
        return self.reviews[(n - 1) * AREA_PAGE_SIZE: n * AREA_PAGE_SIZE]


def appearances(views: Iterable[IssueView]) -> list[Appearance]:
    """Every item of every issue, newest issue first, rank order within an issue."""
    return [Appearance(view, item) for view in sorted(views, key=lambda v: v.id, reverse=True)
            for item in view.items]


def pr_pages(found: Iterable[Appearance]) -> list[PrPage]:
    """One page per PR number, in PR order (stable output, whatever the issue order)."""
    by_pr: dict[int, list[Appearance]] = {}
    for seen in found:
        by_pr.setdefault(seen.item.pr, []).append(seen)
    return [PrPage(pr, tuple(by_pr[pr])) for pr in sorted(by_pr)]


def area_pages(found: Iterable[Appearance]) -> list[AreaPage]:
    """One page per area slug, in slug order; a review appears once per slug."""
    reviews: dict[str, list[Appearance]] = {}
    names: dict[str, set[str]] = {}
    for seen in found:
        for name in seen.item.areas:
            names.setdefault(area_slug(name), set()).add(name)
        for slug in dict.fromkeys(map(area_slug, seen.item.areas)):
            reviews.setdefault(slug, []).append(seen)
    return [AreaPage(slug, tuple(sorted(names[slug])), tuple(reviews[slug]))
            for slug in sorted(reviews)]
