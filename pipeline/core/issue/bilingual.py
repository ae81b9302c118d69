"""Bilingual: ranked items → the :class:`Issue`, with every language gap made visible.

Texts come from the editor's file, the feed and machine translation, in that order. A
missing language is a *blocking problem* recorded in the issue, not a build failure: the
editor sees it in the preview and ``send`` refuses until it is filled. The GitHub title is a
headline only, never a :class:`Text`, so it cannot hide that problem.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from pipeline.core.issue.rank import TIER_BY_NAME, TIER_NAMES, reading_minutes
from pipeline.core.issue.sanitize import html_to_text, one_line
from pipeline.core.shipped import strings
from pipeline.model import (
    LANGS,
    LAYOUTS,
    Issue,
    Item,
    Lang,
    Problem,
    Skipped,
    Text,
    Week,
    layout_langs,
)
from pipeline.week import subject_days

#: Inboxes show about this much of a subject; every layout's subject fits it.
SUBJECT_MAX = 70
_LANG_NAMES = {"zh": "Chinese", "en": "English"}


@dataclass(frozen=True)
class MachineText:
    """An item's text machine-translated into one language, asked for before assembly."""

    #: The translated one-line title; None when refused or not asked.
    title: str | None = None
    #: The translated, sanitized body HTML; None when refused or not asked.
    body: str | None = None
    #: Provenance for ``issue.json``: ``machine:<backend>``.
    source: str = ""
    #: Why the guard refused the title or the body; None when both were accepted.
    rejected: str | None = None
    #: Why the backend gave no answer (its :class:`TranslateError`); None when it answered.
    failed: str | None = None


def missing_languages(items: Sequence[Item]) -> Iterator[tuple[Item, Lang, Lang, Text]]:
    """(item, source, target, the source text) for each language an item lacks and could be
    machine-translated into: the other language is there."""
    for item in items:
        for target in LANGS:
            source: Lang = "en" if target == "zh" else "zh"
            original = item.text(source)
            if item.text(target) is None and original is not None:
                yield item, source, target, original


def fill_missing(items: Sequence[Item], translations: Mapping[tuple[int, str], MachineText]
                 ) -> tuple[list[Item], list[Problem]]:
    """Give each item its missing language from ``translations`` (asked for before, by PR
    and target language); a rejected or failed one leaves it missing, and says why."""
    filled = {item.pr: item for item in items}
    problems: list[Problem] = []
    for item, _source, target, _original in missing_languages(items):
        machine = translations.get((item.pr, target))
        if machine is None:
            continue
        into = _LANG_NAMES[target]
        if machine.failed is not None:
            why = f"no machine translation into {into}: {machine.failed}"
        elif machine.rejected or not machine.title or not machine.body:
            why = f"the machine translation into {into} was rejected: {machine.rejected or 'empty'}"
        else:
            text = Text(machine.title, machine.body, html_to_text(machine.body), machine.source)
            current = filled[item.pr]
            minutes = replace(current.reading_minutes, **{target: reading_minutes(text.body_text)})
            filled[item.pr] = replace(current.with_text(target, text), reading_minutes=minutes)
            continue
        problems.append(Problem("translation-rejected", "warning", pr=item.pr,
                                message=f"PR #{item.pr}: {why}"))
    return [filled[item.pr] for item in items], problems


def compose(items: Sequence[Item], week: Week, repo: str, base_url: str,
            skipped: Sequence[Skipped], problems: Sequence[Problem], number: int = 0,
            hidden: Sequence[int] = ()) -> Issue:
    """Assemble the issue: subjects and preheaders per layout, and the problems, sorted."""
    found = [
        *problems,
        *(Problem("missing-language", "blocking", pr=item.pr,
                  message=(f"PR #{item.pr} has no {_LANG_NAMES[lang]} text; "
                           "add it to the feed or the editor's file"))
          for item in items for lang in LANGS if item.text(lang) is None),
        *(Problem("skipped-entry", "warning",
                  message=f"feed entry {entry.id} skipped: {entry.reason}") for entry in skipped),
    ]
    return Issue(
        id=week.id,
        week=week,
        repo=repo,
        items=tuple(items),
        subject={layout: subject(layout, week, items, number) for layout in LAYOUTS},
        preheader={layout: preheader(layout, items) for layout in LAYOUTS},
        skipped=tuple(skipped),
        problems=sort_problems(found),
        # index.html named: the link works on any static host, not only one with index pages.
        archive_url=f"{base_url.rstrip('/')}/issues/{week.id}/index.html",
        number=number,
        hidden=tuple(hidden),
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


def subject(layout: str, week: Week, items: Sequence[Item], number: int = 0) -> str:
    """One line of at most :data:`SUBJECT_MAX` characters, cut at a word or CJK boundary; the
    count of the others ("+ 7 more") goes first when it does not fit."""
    first = layout_langs(layout)[0]
    words = strings()[first]
    label = [words["issue_number"].format(n=number)] if number > 0 else []
    head = " · ".join([words["brand"], *label, subject_days(week)[first]]) + " · "
    if not items:
        return head.rstrip(" ·")
    tail = ""
    if len(items) > 1:
        tail = f" 等 {len(items)} 篇" if first == "zh" else f" + {len(items) - 1} more"
    # one_line again: whatever path a headline took, nothing may turn the subject around.
    headline = one_line(_title(items[0], first))
    if len(head) + len(headline) + len(tail) > SUBJECT_MAX:
        tail = ""
    top = cut_at_boundary(headline, SUBJECT_MAX - len(head) - len(tail))
    return f"{head}{top or f'#{items[0].pr}'}{tail}"


def cut_at_boundary(text: str, room: int) -> str:
    """``text`` in at most ``room`` characters: whole, or cut where a word or a CJK
    character ends, with "…". "" when not even one word fits."""
    if len(text) <= room:
        return text
    for end in range(room - 1, 0, -1):  # leave a character for the ellipsis
        if any(char.isspace() or unicodedata.east_asian_width(char) in "WF"
               for char in text[end - 1:end + 1]):
            kept = text[:end].rstrip(" ,;:·-–—，、：；（(")
            if kept:
                return kept + "…"
    return ""


def _counts(items: Sequence[Item], lang: str) -> str:
    counts = Counter(item.tier for item in items)
    labels = [(counts[name], TIER_BY_NAME[name].label) for name in TIER_NAMES if counts[name]]
    if lang == "zh":
        return "、".join(f"{count} 篇{label.zh}" for count, label in labels)
    return ", ".join(f"{count} {label.en.lower()}" for count, label in labels)


def preheader(layout: str, items: Sequence[Item]) -> str:
    """The line an inbox shows after the subject: how much there is to read, and how urgent."""
    texts = {
        "zh": f"本周 {len(items)} 篇 PR 评审：{_counts(items, 'zh')}。",
        "en": f"{len(items)} PR review{'' if len(items) == 1 else 's'} this week: "
              f"{_counts(items, 'en')}.",
    }
    return " ".join(texts[lang] for lang in layout_langs(layout))
