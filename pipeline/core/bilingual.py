"""Bilingual: ranked items → the :class:`Issue`, with every language gap made visible.

Every item should read in Chinese and in English. Texts come from the editor's file, the feed
and machine translation, in DESIGN.md's precedence. The PR's own title from GitHub is a headline
only: it never becomes a :class:`Text`, so an item without English keeps its blocking
``missing-language`` problem; the templates show that title, marked, in the missing block.
A missing language is a *blocking problem* recorded in the issue, not a build failure: the
editor sees it in the preview, and ``send`` refuses until it is filled.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from pipeline.core.rank import TIER_BY_NAME, TIER_NAMES, reading_minutes
from pipeline.core.sanitize import html_to_text, one_line
from pipeline.errors import TranslateError
from pipeline.model import (
    LANGS,
    LAYOUTS,
    Issue,
    Item,
    Pair,
    Problem,
    Skipped,
    Text,
    Week,
    layout_langs,
)

if TYPE_CHECKING:
    from pipeline.translate import Translation

BRAND = {"zh": "vLLM PR 周报", "en": "vLLM PR Weekly"}
#: Inboxes show about this much of a subject; every layout's subject fits it.
SUBJECT_MAX = 70
_LANG_NAMES = {"zh": "Chinese", "en": "English"}


class Translate(Protocol):
    """Translate one text (sanitized HTML, or a one-line title); see pipeline/translate/."""

    def __call__(self, html: str, source: str, target: str, *, title: bool = False
                 ) -> Translation: ...


def fill_missing(items: Sequence[Item], translate: Translate | None
                 ) -> tuple[list[Item], list[Problem]]:
    """Give each item its missing language by machine translation, the last source in
    DESIGN.md's precedence (editor, feed, GitHub title, machine). A translation the guard
    rejects leaves the language missing, and the proof report says why."""
    if translate is None:
        return list(items), []
    filled: list[Item] = []
    problems: list[Problem] = []
    for item in items:
        for target in LANGS:
            source = "en" if target == "zh" else "zh"
            original = item.text(source)
            if item.text(target) is not None or original is None:
                continue
            try:
                title = translate(original.title, source, target, title=True)
                body = translate(original.body_html, source, target)
                rejected = title.rejected or body.rejected
            except TranslateError as exc:  # the backend is down: the build still succeeds
                problems.append(Problem(
                    "translation-rejected", "warning", pr=item.pr,
                    message=f"PR #{item.pr}: no machine translation into "
                            f"{_LANG_NAMES[target]}: {exc}"))
                continue
            if rejected or not title.text or not body.text:
                problems.append(Problem(
                    "translation-rejected", "warning", pr=item.pr,
                    message=(f"PR #{item.pr}: the machine translation into "
                             f"{_LANG_NAMES[target]} was rejected: {rejected or 'empty'}")))
                continue
            text = Text(title.text, body.text, html_to_text(body.text), body.source)
            minutes = {lang: item.reading_minutes.get(lang) for lang in LANGS}
            minutes[target] = reading_minutes(text.body_text, target)
            item = replace(item.with_text(target, text),
                           reading_minutes=Pair(minutes["zh"], minutes["en"]))
        filled.append(item)
    return filled, problems


def compose(items: Sequence[Item], week: Week, repo: str, base_url: str,
            skipped: Sequence[Skipped], problems: Sequence[Problem]) -> Issue:
    """Assemble the issue: subjects and preheaders per layout, and the problems, sorted."""
    found = list(problems)
    for item in items:
        for lang in LANGS:
            if item.text(lang) is None:
                found.append(Problem(
                    "missing-language", "blocking", pr=item.pr,
                    message=(f"PR #{item.pr} has no {_LANG_NAMES[lang]} text; "
                             f"add it to the feed or the editor's file"),
                ))
    for entry in skipped:
        found.append(Problem(
            "skipped-entry", "warning",
            message=f"feed entry {entry.id} skipped: {entry.reason}",
        ))
    return Issue(
        id=week.id,
        week=week,
        repo=repo,
        items=tuple(items),
        subject={layout: subject(layout, week, items) for layout in LAYOUTS},
        preheader={layout: preheader(layout, items) for layout in LAYOUTS},
        skipped=tuple(skipped),
        problems=sort_problems(found),
        # index.html named: the link works on any static host, not only one with index pages.
        archive_url=f"{base_url.rstrip('/')}/issues/{week.id}/index.html",
    )


def sort_problems(problems: Sequence[Problem]) -> tuple[Problem, ...]:
    """Blocking problems first, then by code, PR and layout: a stable, readable report."""
    return tuple(sorted(problems, key=lambda p: (
        p.severity != "blocking", p.code, p.pr or 0, p.layout or "", p.message)))


def _title(item: Item, lang: str) -> str:
    """The headline in ``lang``: its text, else (English) the PR's GitHub title, else the
    other language's."""
    text = item.text(lang)
    if text is None and lang == "en" and item.github and item.github.title:
        title = item.github.title
    else:
        text = text or item.text("en" if lang == "zh" else "zh")
        title = text.title if text else f"#{item.pr}"
    return " ".join(title.split())


def subject(layout: str, week: Week, items: Sequence[Item]) -> str:
    """One line of at most :data:`SUBJECT_MAX` characters: the newsletter's name in the
    layout's first language (one brand, not both), the week, and the top item's headline,
    shortened at a word or CJK-character boundary, never inside a word."""
    first = layout_langs(layout)[0]
    more = len(items) - 1
    tail = ""
    if more > 0:
        tail = f" 等 {len(items)} 篇" if first == "zh" else f" + {more} more"
    head = f"{BRAND[first]} · {week.id} · "
    if not items:
        return head.rstrip(" ·")
    # one_line again: whatever path a headline took, nothing may turn the subject around.
    top = cut_at_boundary(one_line(_title(items[0], first)),
                          SUBJECT_MAX - len(head) - len(tail))
    return f"{head}{top or f'#{items[0].pr}'}{tail}"


def cut_at_boundary(text: str, room: int) -> str:
    """``text`` in at most ``room`` characters: whole, or cut where a word or a CJK
    character ends, with "…". "" when not even one word fits."""
    if len(text) <= room:
        return text
    for end in range(room - 1, 0, -1):  # leave a character for the ellipsis
        before, after = text[end - 1], text[end]
        if after.isspace() or before.isspace() or _wide(before) or _wide(after):
            kept = text[:end].rstrip(" ,;:·-–—，、：；（(")
            if kept:
                return kept + "…"
    return ""


def _wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in "WF"


def _counts(items: Sequence[Item], lang: str) -> str:
    counts = Counter(item.tier for item in items)
    parts = []
    for name in TIER_NAMES:
        if counts[name]:
            label = TIER_BY_NAME[name].label
            parts.append(f"{counts[name]} 篇{label.zh}" if lang == "zh"
                         else f"{counts[name]} {label.en.lower()}")
    return ("、" if lang == "zh" else ", ").join(parts)


def preheader(layout: str, items: Sequence[Item]) -> str:
    """The line an inbox shows after the subject: how much there is to read, and how urgent."""
    texts = {
        "zh": f"本周 {len(items)} 篇 PR 评审：{_counts(items, 'zh')}。",
        "en": f"{len(items)} PR reviews this week: {_counts(items, 'en')}.",
    }
    return " ".join(texts[lang] for lang in layout_langs(layout))
