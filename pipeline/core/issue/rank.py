"""Rank: each PR's reviews → one :class:`Item` with a tier, an order, and the reason why.

The tier comes from the editor's file, else a ``priority:<tier>`` category, else the verdict
the review opens with (:mod:`pipeline.core.issue.verdict`), in the PR's original language
first. Inside a tier, :func:`ordered` puts what a reader would weigh first; ``why`` quotes
what the verdict was read from and says the order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

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
from pipeline.core.issue.verdict import Vocabulary, opening_of, parse_verdict
from pipeline.model import LANGS, Item, Lang, Pair, Problem, Text, Verdict


@dataclass(frozen=True)
class Tier:
    name: str
    label: Pair[str]


TIERS: tuple[Tier, ...] = (
    Tier("must-read", Pair("必读", "Must read")),
    Tier("medium", Pair("中等优先级", "Medium priority")),
    Tier("skim", Pair("可略读", "Skim")),
    Tier("unrated", Pair("未评级", "Unrated")),
)
TIER_NAMES: tuple[str, ...] = tuple(t.name for t in TIERS)
TIER_BY_NAME: dict[str, Tier] = {t.name: t for t in TIERS}
_READINGS = ("full", "scoped", "conditional")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.'/-]*")


def reading_minutes(text: str) -> int:
    """Minutes to read ``text``, at least 1: the pace is the same in either language."""
    return max(1, math.ceil(reading_time(text)))


def reading_time(text: str) -> float:
    """Minutes to read ``text``, unrounded: 300 Chinese characters or 200 words a minute."""
    return len(HAN.findall(text)) / 300 + len(_WORD.findall(HAN.sub(" ", text))) / 200


def rank(groups: Sequence[PullGroup], editorial: Editorial | None = None,
         vocabulary: Vocabulary | None = None) -> tuple[list[Item], list[Problem]]:
    """Rank the week's PRs; return the items in reading order and the problems found."""
    editorial = editorial or Editorial()
    problems = [Problem("editor-unknown-pr", "warning", pr=pr,
                        message=f"the editor's file names PR #{pr}, which has no review "
                                "this week")
                for pr in sorted(set(editorial.entries) - {group.pr for group in groups})]
    items: list[Item] = []
    for group in groups:
        entry = editorial.get(group.pr)
        if entry is None or not entry.hide:  # hidden: listed by hidden_prs, not ranked
            items.append(_rank_one(group, entry, vocabulary, problems))
    return ordered(items), [*problems, *week_questions(items)]


def hidden_prs(groups: Sequence[PullGroup], editorial: Editorial) -> tuple[int, ...]:
    """The week's PRs the editor's file hides, in PR order: shown as information, never as
    a problem."""
    return tuple(sorted(group.pr for group in groups
                        if (entry := editorial.get(group.pr)) and entry.hide))


def week_questions(items: Sequence[Item]) -> list[Problem]:
    """What the proof report asks of the week: a tier holding most of it orders nothing, and
    many unrated reviews suggest wording the vocabulary does not know."""
    tiers = [item.tier for item in items]
    count, must, unrated = len(tiers), tiers.count("must-read"), tiers.count("unrated")
    if count < 4:
        return []
    questions = []
    if must * 2 > count:
        questions.append(Problem(
            "mostly-must-read", "warning",
            message=(f"{must} of the week's {count} items are must-read: a tier that holds most "
                     "of an issue orders nothing; is each one a must-read? (the editor's file "
                     "can set priority)")))
    if unrated * 4 >= count:
        questions.append(Problem(
            "many-unrated", "warning",
            message=(f"{unrated} of the week's {count} items have no verdict the vocabulary "
                     "knows: their reviews may word it in a new way (docs/ranking.md: "
                     "[issue] verdicts adds words)")))
    return questions


def ordered(items: Sequence[Item]) -> list[Item]:
    """``items`` in reading order: full reads before scoped ones, then the bigger change
    (GitHub's lines changed when every item of the tier has them, else the review's length),
    then the PR number; each ``why`` ends with the rule that placed it."""
    result: list[Item] = []
    for tier in TIER_NAMES:
        group = [item for item in items if item.tier == tier]
        sized = all(item.github is not None for item in group)
        sizes = {item.pr: _size(item, sized) for item in group}
        group.sort(key=lambda item: (_READINGS.index(item.reading), -sizes[item.pr], item.pr))
        result.extend(_with_order(item, sized, sizes[item.pr]) for item in group)
    return result


def _size(item: Item, sized: bool) -> float:
    """GitHub's lines changed (``sized``), else how long the longer of the item's reviews
    takes to read, unrounded: whole minutes tie most weeks."""
    if sized and item.github:
        return item.github.additions + item.github.deletions
    return max(reading_time(text.body_text) for lang in LANGS
               if (text := item.text(lang)) is not None)


def _with_order(item: Item, sized: bool, size: float) -> Item:
    reason = item.reason or item.why
    if sized:
        zh = f"再按改动行数从多到少（本 PR {int(size):,} 行，据 GitHub）"
        en = f"then the bigger change first (this PR: {int(size):,} lines changed, per GitHub)"
    else:
        zh = f"再按评审篇幅从长到短（本篇约 {size:.1f} 分钟）"
        en = f"then the longer review first (this one: about {size:.1f} min)"
    return replace(item, reason=reason, why=Pair(
        f"{reason.zh}；同档内先读全文、再读限定范围的，{zh}",
        f"{reason.en}; within the tier, full reads before scoped ones, {en}"))


def _editor_texts(texts: dict[Lang, Text], entry: EditorEntry | None) -> dict[Lang, Text]:
    """The editor's title and body win over the feed's, field by field."""
    merged = dict(texts)
    for lang, given in (entry.texts if entry else {}).items():
        feed = texts.get(lang)
        title = given.title or (feed.title if feed else None)
        body_html = (clean_html(text_to_html(given.body)) if given.body
                     else feed.body_html if feed else None)
        if title and body_html:
            merged[lang] = Text(title, body_html, html_to_text(body_html), "editor")
    return merged


def _rank_one(group: PullGroup, entry: EditorEntry | None, vocabulary: Vocabulary | None,
              problems: list[Problem]) -> Item:
    """One PR's item; the questions it raises go to ``problems``."""
    texts = _editor_texts({lang: Text(r.title, r.body_html, html_to_text(r.body_html), "feed")
                           for lang, r in group.latest.items()}, entry)
    verdicts = {lang: parse_verdict(texts[lang].body_text, lang, vocabulary) for lang in texts}
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
    verdict = _verdict_of(group.pr, group.original_lang, verdicts, problems)

    priority, areas = _split_categories([c for r in group.latest.values() for c in r.categories])
    if priority and priority not in TIER_NAMES:
        problems.append(Problem(
            "unknown-priority", "warning", pr=group.pr,
            message=(f"PR #{group.pr}: category priority:{priority} names no tier "
                     f"({', '.join(TIER_NAMES)}); ignored")))
        priority = None

    tier, followed, (zh, en) = _tier_of(group, entry, priority, verdict, texts,
                                        verdicts.get("en"), problems)
    label = TIER_BY_NAME[tier].label
    scope = followed.scope if followed else None
    return Item(
        pr=group.pr,
        url=group.url,
        tier=tier,
        scope_note=scope,
        why=Pair(f"{label.zh}：{zh}", f"{label.en}: {en}"),
        reviewed_at=group.first_reviewed,
        areas=areas,
        reading_minutes=Pair(*(reading_minutes(texts[lang].body_text) if lang in texts else 0
                               for lang in LANGS)),
        zh=texts.get("zh"),
        en=texts.get("en"),
        original_lang=group.original_lang,
        scopes=Pair(*((found.scope if (found := verdicts.get(lang)) else None)
                      for lang in LANGS)),
        note=entry.note if entry and (entry.note.zh or entry.note.en) else None,
        reading=("conditional" if followed and followed.condition
                 else "scoped" if scope else "full"),
    )


def _tier_of(group: PullGroup, entry: EditorEntry | None, priority: str | None,
             verdict: Verdict | None, texts: dict[Lang, Text], english: Verdict | None,
             problems: list[Problem]) -> tuple[str, Verdict | None, tuple[str, str]]:
    """The item's tier, the verdict it follows (if one set it) and why, in (zh, en): the
    editor, then a priority category, then the review's verdict; the questions this raises
    go to ``problems``."""
    read = verdict if verdict and verdict.tier != "unrated" else None
    if entry and entry.priority:
        if read and read.tier != entry.priority:
            problems.append(Problem(
                "editor-overrides-verdict", "warning", pr=group.pr,
                message=(f"PR #{group.pr}: the editor's file says {entry.priority}, but the "
                         f"review opens “{read.clause}” ({read.tier})")))
        return entry.priority, None, ("由编辑指定（本周编辑文件）",
                                      "set by the editor (this week's editor's file)")
    if priority:
        return priority, None, (f"由订阅源分类 priority:{priority} 指定",
                                f"set by the feed category priority:{priority}")
    if read:
        if read.condition:
            problems.append(Problem(
                "verdict-conditional", "warning", pr=group.pr,
                message=(f"PR #{group.pr}: the verdict “{read.clause}” holds only for some "
                         f"readers ({read.condition}); ranked {read.tier} for everyone else")))
        return read.tier, read, _why_verdict(read, group.original_lang, english)
    original = texts.get(group.original_lang)
    opening = opening_of(original.body_text) if original else ""
    why_not = (f"its opening “{verdict.phrase}” reads more than one way" if verdict
               else f"it opens “{opening}”, which names no tier")
    problems.append(Problem(
        "unrated", "warning", pr=group.pr,
        message=f"PR #{group.pr}: no verdict: {why_not}; listed last"))
    return "unrated", None, _why_unrated(verdict, texts)


def _verdict_of(pr: int, original: Lang, verdicts: dict[Lang, Verdict | None],
                problems: list[Problem]) -> Verdict | None:
    """The verdict of the original language's review; else another language's (flagged); a
    review in another language that disagrees is reported, never followed."""
    verdict = verdicts.get(original)
    for lang, other in verdicts.items():
        if lang == original or not other or other.tier == "unrated":
            continue
        if verdict and verdict.tier != "unrated" and other.tier != verdict.tier:
            problems.append(Problem(
                "verdict-conflict", "warning", pr=pr,
                message=(f"PR #{pr}: the {lang} review says {other.tier} "
                         f"(“{other.clause}”) but the original {original} review says "
                         f"{verdict.tier} (“{verdict.clause}”); the tier follows the original")))
        elif not verdict or verdict.tier == "unrated":
            problems.append(Problem(
                "verdict-borrowed", "warning", pr=pr,
                message=(f"PR #{pr}: the original {original} review names no tier; the "
                         f"{lang} review's “{other.clause}” gives it ({other.tier})")))
            return other
    return verdict


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


_LANG_NAME = {"zh": "中文", "en": "英文"}


def _why_verdict(verdict: Verdict, original: Lang, english: Verdict | None
                 ) -> tuple[str, str]:
    """The whole opening clause the tier was read from, so an editor can spot a misreading.
    The English never quotes Chinese: it quotes the English review when that gives the same
    tier, else names the Chinese verdict's tier."""
    zh = f"{_LANG_NAME[verdict.lang]}评审开篇写道「{verdict.clause}」"
    english = english if english and english.tier == verdict.tier else None
    if english:
        whose = "English" if english is verdict else "English version of the"
        en = f"the {whose} review opens “{english.clause}”"
    else:
        tier_word = TIER_BY_NAME[verdict.tier].label.en.lower()
        en = f"the Chinese review opens with a {tier_word} verdict"
    if verdict.lang != original:
        zh += "（原文评审没有结论）"
        en += " (the original review names none)"
    if verdict.condition:
        zh += f"，只对部分读者（{verdict.condition}）而言如此；按对其他读者的说法排"
        en += " that holds for some readers only; ranked by what it says for everyone else"
    elif verdict.scope:
        zh += f"（限定范围：{verdict.scope}）"
        en_scope = english.scope if english else None
        en += f" (scoped: {en_scope})" if en_scope else " (scoped to part of the PR)"
    return zh, en


def _why_unrated(verdict: Verdict | None, texts: dict[Lang, Text]) -> tuple[str, str]:
    """Why no tier: a phrase that reads more than one way, or an opening that names none."""
    if verdict:
        opening = (f"the opening “{verdict.clause}”" if verdict.lang == "en"
                   else "the Chinese review's opening")
        return (f"{_LANG_NAME[verdict.lang]}评审开篇「{verdict.clause}」可作多种理解，排在最后",
                f"{opening} reads more than one way, so it comes last")
    zh_open, en_open = (opening_of(text.body_text) if (text := texts.get(lang)) else ""
                        for lang in LANGS)
    return (f"评审开篇是「{zh_open or en_open}」，没有可识别的结论，排在最后",
            f"the review opens “{en_open}”, which names no tier, so it comes last" if en_open
            else "the Chinese review's opening names no tier, so it comes last")
