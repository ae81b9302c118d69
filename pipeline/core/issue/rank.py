"""Rank: each PR's reviews → one :class:`Item` with a tier, an order, and the reason why.

Tiers, best first, are data (:data:`TIERS`): adding a phrase is a one-line change. A verdict
is looked for only at the start of the review's opening clause (up to the first ，。,.:;), so
"不必读" never reads as "必读", and a verdict quoted mid-text counts for nothing. The tier comes,
in order of precedence, from the editor (a later issue), a ``priority:<tier>`` category, then
the verdict of the PR's original language. Inside a tier, items follow the time of their first
review, then the PR number: a rule a reader can check, spelled out in ``why``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import pendulum

from pipeline.core.issue.collect import PullGroup
from pipeline.core.issue.editorial import EditorEntry, Editorial
from pipeline.core.issue.sanitize import (
    HAN,
    MAX_BODY_CHARS,
    MAX_NESTING,
    clean_html,
    html_to_text,
    text_to_html,
)
from pipeline.core.spread import Spread, one_by_one
from pipeline.model import LANGS, Item, Lang, Pair, Problem, Review, Text, Verdict


@dataclass(frozen=True)
class Tier:
    name: str
    label: Pair[str]
    #: Opening phrases per language, matched at the start of the opening clause.
    phrases: dict[str, tuple[str, ...]]


TIERS: tuple[Tier, ...] = (
    Tier("must-read", Pair("必读", "Must read"), {
        "zh": ("值得精读", "必读", "强烈推荐精读", "推荐精读"),
        "en": ("must read", "must-read", "a must-read", "essential reading",
               "worth a close read", "worth reading closely"),
    }),
    Tier("medium", Pair("中等优先级", "Medium priority"), {
        "zh": ("值得中等优先级精读", "中等优先级", "值得中等优先级阅读"),
        "en": ("worth a medium-priority read", "medium-priority read", "medium priority",
               "medium-priority"),
    }),
    Tier("skim", Pair("可略读", "Skim"), {
        "zh": ("值得一读", "可略读", "选读", "不必精读", "不必读", "略读", "可选读"),
        "en": ("skim", "worth a skim", "worth a look", "optional reading", "optional"),
    }),
    Tier("unrated", Pair("未评级", "Unrated"), {"zh": (), "en": ()}),
)
TIER_NAMES: tuple[str, ...] = tuple(t.name for t in TIERS)
TIER_BY_NAME: dict[str, Tier] = {t.name: t for t in TIERS}

# Longest phrase first, so "值得中等优先级精读" is not read as a shorter phrase.
_PHRASES: dict[str, list[tuple[str, str]]] = {
    lang: sorted(((p, t.name) for t in TIERS for p in t.phrases[lang]), key=lambda x: -len(x[0]))
    for lang in LANGS
}
_CLAUSE_END = re.compile(r"[，。,.:;：；！!？?\n]")
_SENTENCE_END = re.compile(r"[。.!！？?；;\n]")
_LEAD = re.compile(r"^[\s\"'“”「」『』【】\[\]()（）*_#>-]+")
_LABEL = re.compile(r"^(?:结论|评价|评级|verdict|bottom line|tl;dr)\s*[:：]\s*", re.I)
_SCOPE_OPENER = {
    "zh": re.compile(r"^(?:但是|但|不过|只是)\s*"),
    "en": re.compile(r"^(?:but|though|although)\s+", re.I),
}
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.'/-]*")


def parse_verdict(text: str, lang: Lang) -> Verdict | None:
    """The verdict that opens ``text`` (plain text), or None if it opens with none."""
    opening = _LABEL.sub("", _LEAD.sub("", text), count=1)
    clause = _CLAUSE_END.split(opening, maxsplit=1)[0].strip()
    folded = clause if lang == "zh" else clause.lower()
    for phrase, tier in _PHRASES[lang]:
        if not folded.startswith(phrase):
            continue
        rest = folded[len(phrase):]
        if lang == "en" and rest[:1].isalnum():
            continue  # "skimming" is not "skim"
        return Verdict(tier, clause[: len(phrase)], lang, _scope(opening[len(clause):], lang))
    return None


def _scope(after_clause: str, lang: Lang) -> str | None:
    """A scoped verdict's limit: "值得精读，但只需读 27 行…" → "只需读 27 行…"."""
    rest = after_clause.lstrip("，,:：;； ")
    opener = _SCOPE_OPENER[lang].match(rest)
    if not opener:
        return None
    scope = _SENTENCE_END.split(rest[opener.end():], maxsplit=1)[0].strip()
    return scope or None


def reading_minutes(text: str, lang: Lang) -> int:
    """Minutes to read ``text``: 300 Chinese characters or 200 words a minute, at least 1."""
    han = len(HAN.findall(text))
    words = len(_WORD.findall(HAN.sub(" ", text)))
    minutes = han / 300 + words / 200 if lang == "zh" else words / 200 + han / 300
    return max(1, math.ceil(minutes))


def text_from_review(review: Review) -> Text:
    return Text(review.title, review.body_html, html_to_text(review.body_html), "feed")


def rank(groups: Sequence[PullGroup], tz: str, editorial: Editorial | None = None,
         spread: Spread | None = None) -> tuple[list[Item], list[Problem]]:
    """Rank the week's PRs; return the items in reading order and the problems found.
    Each PR is ranked on its own: ``spread`` shares them out (one by one by default)."""
    editorial = editorial or Editorial()
    shown = [group for group in groups
             if not ((entry := editorial.get(group.pr)) and entry.hide)]
    ones = iter((spread or one_by_one)(
        lambda group: _rank_one(group, tz, editorial.get(group.pr)), shown))
    ranked: list[tuple[tuple[int, datetime, int], Item]] = []
    problems: list[Problem] = []
    seen = {group.pr for group in groups}
    for pr in sorted(set(editorial.entries) - seen):
        problems.append(Problem(
            "editor-unknown-pr", "warning", pr=pr,
            message=f"the editor's file names PR #{pr}, which has no review this week"))
    for group in groups:
        entry = editorial.get(group.pr)
        if entry and entry.hide:
            problems.append(Problem("hidden", "warning", pr=group.pr,
                                    message=f"PR #{group.pr} hidden by the editor's file"))
            continue
        item, found = next(ones)
        problems.extend(found)
        key = (TIER_NAMES.index(item.tier), item.reviewed_at, item.pr)
        ranked.append((key, item))
    ranked.sort(key=lambda pair: pair[0])
    return [item for _, item in ranked], problems


def _editor_texts(texts: dict[Lang, Text], entry: EditorEntry | None) -> dict[Lang, Text]:
    """The editor's title and body win over the feed's, field by field."""
    if not entry:
        return texts
    merged = dict(texts)
    for lang, given in entry.texts.items():
        feed = texts.get(lang)
        title = given.title or (feed.title if feed else None)
        body_html: str | None
        if given.body:
            body_html = clean_html(text_to_html(given.body))
        else:
            body_html = feed.body_html if feed else None
        if title and body_html:
            merged[lang] = Text(title, body_html, html_to_text(body_html), "editor")
    return merged


def _rank_one(group: PullGroup, tz: str, entry: EditorEntry | None = None
              ) -> tuple[Item, list[Problem]]:
    problems: list[Problem] = []
    texts = _editor_texts({lang: text_from_review(r) for lang, r in group.latest.items()},
                          entry)
    verdicts = {lang: parse_verdict(texts[lang].body_text, lang) for lang in texts}
    original = group.original_lang
    for lang, review in group.latest.items():
        if review.shortened_from:
            problems.append(Problem(
                "body-shortened", "warning", pr=group.pr,
                message=(f"PR #{group.pr}: the {lang} review's body is "
                         f"{review.shortened_from:,} characters; only its first "
                         f"{MAX_BODY_CHARS:,} are kept (a review is a few thousand)")))
        if review.flattened:
            problems.append(Problem(
                "body-flattened", "warning", pr=group.pr,
                message=(f"PR #{group.pr}: the {lang} review's body nests its markup deeper "
                         f"than {MAX_NESTING} levels; the deeper tags were dropped, their "
                         "text kept")))
    verdict = verdicts.get(original)

    for lang, other in verdicts.items():
        if lang != original and other and verdict and other.tier != verdict.tier:
            problems.append(Problem(
                "verdict-conflict", "warning", pr=group.pr,
                message=(f"PR #{group.pr}: the {lang} review says {other.tier} "
                         f"(“{other.phrase}”) but the original {original} review says "
                         f"{verdict.tier} (“{verdict.phrase}”); the tier follows the original"),
            ))

    categories = [c for r in group.latest.values() for c in r.categories]
    priority, areas = _split_categories(categories)
    if priority and priority not in TIER_NAMES:
        problems.append(Problem(
            "unknown-priority", "warning", pr=group.pr,
            message=(f"PR #{group.pr}: category priority:{priority} names no tier "
                     f"({', '.join(TIER_NAMES)}); ignored"),
        ))
        priority = None

    if entry and entry.priority:
        tier, source = entry.priority, "editor"
    elif priority:
        tier, source = priority, "category"
    elif verdict:
        tier, source = verdict.tier, "verdict"
    else:
        tier, source = "unrated", "none"
        problems.append(Problem(
            "unrated", "warning", pr=group.pr,
            message=f"PR #{group.pr}: the review opens with no verdict; listed last",
        ))

    item = Item(
        pr=group.pr,
        url=group.url,
        tier=tier,
        scope_note=verdict.scope if verdict else None,
        why=_why(tier, source, verdict, priority, group.first_reviewed, tz),
        reviewed_at=group.first_reviewed,
        areas=areas,
        reading_minutes=Pair(*(
            reading_minutes(texts[lang].body_text, lang) if lang in texts else 0
            for lang in LANGS
        )),
        zh=texts.get("zh"),
        en=texts.get("en"),
        original_lang=original,
        scopes=Pair(*((found.scope if (found := verdicts.get(lang)) else None)
                      for lang in LANGS)),
        note=entry.note if entry and (entry.note.zh or entry.note.en) else None,
    )
    return item, problems


def _split_categories(terms: Sequence[str]) -> tuple[str | None, tuple[str, ...]]:
    """``priority:<tier>`` (the first one) and the sorted, de-duplicated area tags."""
    priority = None
    areas: set[str] = set()
    for term in terms:
        folded = term.strip().lower()
        if folded.startswith("priority:"):
            priority = priority or folded.split(":", 1)[1].strip().replace(" ", "-")
        elif folded:
            areas.add(re.sub(r"\s+", "-", folded))
    return priority, tuple(sorted(areas))


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_LANG_NAME = Pair({"zh": "中文", "en": "英文"}, {"zh": "Chinese", "en": "English"})


def _why(tier: str, source: str, verdict: Verdict | None, priority: str | None,
         reviewed: datetime, tz: str) -> Pair[str]:
    label = TIER_BY_NAME[tier].label
    local = reviewed.astimezone(pendulum.timezone(tz))
    when_zh = f"{local.month} 月 {local.day} 日 {local:%H:%M}"
    # Named here, not by strftime's %a/%b: those follow the process's locale.
    when_en = (f"{_DAYS[local.weekday()]} {local.day} {_MONTHS[local.month - 1]} "
               f"{local:%H:%M}")
    if source == "editor":
        zh = f"{label.zh}：由编辑指定（本周编辑文件）"
        en = f"{label.en}: set by the editor (this week's editor's file)"
    elif source == "category":
        zh = f"{label.zh}：由订阅源分类 priority:{priority} 指定"
        en = f"{label.en}: set by the feed category priority:{priority}"
    elif source == "verdict" and verdict:
        scope_zh = f"（限定范围：{verdict.scope}）" if verdict.scope else ""
        scope_en = f" (scoped: {verdict.scope})" if verdict.scope else ""
        lang_zh = _LANG_NAME.zh[verdict.lang]
        zh = f"{label.zh}：{lang_zh}评审开篇结论为「{verdict.phrase}」{scope_zh}"
        gloss = f" ({label.en.lower()})" if verdict.lang == "zh" else ""
        en = (f"{label.en}: the {_LANG_NAME.en[verdict.lang]} review opens with the verdict "
              f"“{verdict.phrase}”{gloss}{scope_en}")
    else:
        return Pair(
            f"{label.zh}：评审开篇没有结论，排在最后；同档按首次评审时间排序（{when_zh}）",
            f"{label.en}: the review opens with no verdict, so it comes last; within the tier, "
            f"ordered by first review ({when_en})",
        )
    return Pair(
        f"{zh}；同档按首次评审时间排序（{when_zh}）",
        f"{en}; within the tier, ordered by first review ({when_en})",
    )
