"""Bilingual: ranked items → the :class:`Issue`, with every language gap made visible.

Every item should read in Chinese and in English. Texts come from the feed for now (the
editor's file, GitHub titles and machine translation join later, in DESIGN.md's precedence).
A missing language is a *blocking problem* recorded in the issue, not a build failure: the
editor sees it in the preview, and ``send`` refuses until it is filled.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from .model import LANGS, LAYOUTS, Issue, Item, Problem, Skipped, Week, layout_langs
from .rank import TIER_BY_NAME, TIER_NAMES

BRAND = {"zh": "vLLM PR 周报", "en": "vLLM PR Weekly"}
_SUBJECT_TITLE_MAX = 60
_LANG_NAMES = {"zh": "Chinese", "en": "English"}


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
    text = item.text(lang) or item.text("en" if lang == "zh" else "zh")
    title = text.title if text else f"#{item.pr}"
    if len(title) > _SUBJECT_TITLE_MAX:
        title = title[: _SUBJECT_TITLE_MAX - 1].rstrip() + "…"
    return title


def subject(layout: str, week: Week, items: Sequence[Item]) -> str:
    """One line, no control characters: the top item's headline in the layout's first
    language, after the newsletter's name and the week."""
    first = layout_langs(layout)[0]
    if layout == "zh-en":
        brand = "vLLM PR 周报 Weekly"
    elif layout == "en-zh":
        brand = "vLLM PR Weekly 周报"
    else:
        brand = BRAND[first]
    top = _title(items[0], first) if items else ""
    more = len(items) - 1
    tail = ""
    if more > 0:
        tail = f" 等 {len(items)} 篇" if first == "zh" else f" + {more} more"
    return f"{brand} · {week.id} · {top}{tail}"


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
