"""A review's verdict, read from its opening: which tier its author gives the PR.

The words are data (``templates/verdicts.toml`` plus ``[issue] verdicts``); this module is the
grammar that reads them, and docs/ranking.md says it in a table. A verdict counts only where
it is the verdict: it opens the review (past decoration, labels and short prefaces), is not
the subject of its sentence, a question or a quotation; negations are read first. A phrase
two careful editors would file differently reads as unrated: a confident wrong tier is worse
than none.
"""

from __future__ import annotations

import functools
import re
import tomllib
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.core.shipped import templates_dir
from pipeline.model import LANGS, Lang, Verdict

#: The tier of a phrase that names none with confidence.
AMBIGUOUS = "unrated"
_TIERS = ("must-read", "medium", "skim")

_OPEN_QUOTES = "“‘「『\"'《"
_CLOSE_QUOTES = "”’」』\"'》"
#: Ends a sentence: a full stop followed by a space or the end (not "block_pool.py"), or
#: one of these.
_SENTENCE_END = re.compile(r"[。！？!?\n]|(?<!tl)(?<!TL)(?<!Tl)[；;]|(?<![0-9])\.(?=\s|$)")
_CLAUSE_END = re.compile(r"[，,：:。！？!?、\n]|(?<!tl)(?<!TL)(?<!Tl)[；;]|\.(?=\s|$)|\s[—–-]\s")
_QUESTION = re.compile(r"(?:[?？]|[吗么呢][\s。.]*)$")
_CODE = re.compile(r"`[^`\n]*`")
#: Stars (filled ones counted) or a score out of five.
_RATING = re.compile(r"(?P<stars>[★⭐]{1,5})[☆✩]*(?:\s*[(（]\s*\d\s*/\s*5\s*[)）])?"
                     r"|(?P<score>[0-5])\s*/\s*5\b")
#: Markdown emphasis and strike marks, read as nothing outside code.
_EMPHASIS = re.compile(r"\*+|__+|~~")
#: Chinese that turns a verdict phrase into an attribute ("值得精读的部分…"), except when
#: what it qualifies is the PR itself ("值得精读的 PR").
_ZH_ATTRIBUTE = re.compile(
    r"^(?:的|之|地)(?!\s*(?:一个|这个|小|大|简单|中等)?\s*(?:pr|PR|改动|修复|提交|补丁|变更|优化|重构|"
    r"功能|特性))")


#: The word lists of verdicts.toml the grammar reads, each as (section, key suffix): its
#: phrases are ``[section] zh<suffix>`` and ``en<suffix>``, its name ``section<suffix>``.
_LISTS = (("labels", ""), ("prefaces", ""), ("prefaces", "_links"), ("modals", ""),
          ("modals", "_restricting"), ("followers", ""), ("subject_nouns", ""),
          ("negators", ""), ("recommends", ""), ("answers", "_yes"), ("answers", "_no"),
          ("conditions", ""), ("soft_conditions", ""), ("otherwise", ""), ("scopes", ""),
          ("scopes", "_limits"))


@dataclass(frozen=True)
class Vocabulary:
    """The words of ``templates/verdicts.toml`` (and an operator's additions), per language."""

    #: Phrase (folded) → tier (or :data:`AMBIGUOUS`), negations included.
    phrases: Mapping[Lang, Mapping[str, str]]
    #: The phrases listed as negations ("非必读"), folded: a verdict that negates itself.
    negations: Mapping[Lang, frozenset[str]]
    levels: Mapping[Lang, Mapping[str, str]]
    ratings: Mapping[str, str]
    #: Each list of :data:`_LISTS` by its name ("modals", "answers_yes").
    lists: Mapping[Lang, Mapping[str, tuple[str, ...]]]

    @classmethod
    def from_toml(cls, *texts: str) -> Vocabulary:
        """The vocabulary of these TOML documents, the later ones adding to the first (a
        phrase one files under another tier or as ambiguous moves there);
        :class:`ValueError` says what is wrong with one."""
        words: dict[str, dict[str, Any]] = {}
        phrases: dict[Lang, dict[str, str]] = {lang: {} for lang in LANGS}
        negations: dict[Lang, set[str]] = {lang: set() for lang in LANGS}
        for text in texts:
            data = tomllib.loads(text)  # a TOMLDecodeError is a ValueError
            _merge(words, data)
            tiers = data.get("tiers", {})
            if unknown := [tier for tier in tiers if tier not in _TIERS]:
                raise ValueError(f"[tiers.{unknown[0]}] is no tier ({', '.join(_TIERS)})")
            for lang in LANGS:  # later sections win: ambiguous over tiers, negations over both
                found = {phrase: tier for tier, by_lang in tiers.items()
                         for phrase in _list(by_lang, lang, f"tiers.{tier}")}
                found.update(dict.fromkeys(_list(data.get("ambiguous", {}), lang, "ambiguous"),
                                           AMBIGUOUS))
                negated = _tiers_of(data.get("negations", {}).get(lang, {}), f"negations.{lang}")
                phrases[lang].update((_fold(p, lang), t) for p, t in {**found, **negated}.items())
                negations[lang] -= {_fold(phrase, lang) for phrase in found}
                negations[lang] |= {_fold(phrase, lang) for phrase in negated}
        return cls(
            phrases=phrases,
            negations={lang: frozenset(found) for lang, found in negations.items()},
            levels={lang: _tiers_of(words.get("levels", {}).get(lang, {}), f"levels.{lang}")
                    for lang in LANGS},
            ratings=_tiers_of(words.get("ratings", {}), "ratings"),
            lists={lang: {section + suffix: _list(words.get(section, {}), lang + suffix, section)
                          for section, suffix in _LISTS}
                   for lang in LANGS},
        )


@functools.cache
def _pattern(words: tuple[str, ...], lang: Lang) -> re.Pattern[str]:
    """One expression matching any of ``words`` (longest first), whatever the case, the
    spaces or the hyphens between them."""
    ordered = sorted({_fold(w, lang) for w in words if w.strip()}, key=len, reverse=True)
    alternatives = "|".join(_loose(w, lang) for w in ordered) or r"(?!x)x"
    return re.compile(f"(?:{alternatives})", re.I)


@functools.cache
def shipped_vocabulary() -> Vocabulary:
    return Vocabulary.from_toml(_shipped_text())


def vocabulary_with(extra: str) -> Vocabulary:
    """The shipped vocabulary with an operator's additions (``[issue] verdicts``)."""
    return Vocabulary.from_toml(_shipped_text(), extra) if extra.strip() else shipped_vocabulary()


def _shipped_text() -> str:
    return (templates_dir() / "verdicts.toml").read_text(encoding="utf-8")


def parse_verdict(text: str, lang: Lang, vocabulary: Vocabulary | None = None
                  ) -> Verdict | None:
    """The verdict that opens ``text`` (plain text), or None if it opens with none."""
    return _Reader(text[:1200], lang, vocabulary or shipped_vocabulary()).read()


def opening_of(text: str, limit: int = 80) -> str:
    """What ``text`` opens with, for a reason that quotes it: its first clause (or the start
    of it), code spans whole."""
    first = _SENTENCE_END.split(_masked(text.strip()), maxsplit=1)[0]
    clause = text.strip()[: len(first)].strip()
    if len(clause) <= limit:
        return clause
    cut = clause[:limit]
    if cut.count("`") % 2:  # never leave a code span open
        cut = cut[: cut.rfind("`")]
    return cut.rstrip() + "…"


class _Reader:
    """One review's opening, read sentence by sentence."""

    def __init__(self, text: str, lang: Lang, vocabulary: Vocabulary) -> None:
        self.text, self.lang, self.words = text, lang, vocabulary
        self.lists = vocabulary.lists[lang]
        # Positions stay those of ``text``: code and emphasis are masked, not removed.
        self.masked = _EMPHASIS.sub(lambda m: " " * len(m[0]), _masked(text))

    def read(self) -> Verdict | None:
        """The first sentence's verdict; else, after a question, a quotation or a heading
        (or a one-line summary), one that opens the next sentence."""
        start, after_question, asked = 0, False, None
        for index in range(3):
            end = _end_of_sentence(self.masked, start)
            found = self._sentence(start, end, first=index == 0)
            if found is None and after_question:
                found = self._answer(start, end, asked) or self._later_clause(start, end)
            if isinstance(found, Verdict):
                return found
            if found is None and index > 0:
                return None
            # The first sentence said nothing (a summary): the second may open with it.
            after_question = self._is_question(start, end)
            asked = self._asked(start, end) if after_question else None
            start = end + 1
            if start >= len(self.masked):
                break
        return None

    def _is_question(self, start: int, end: int) -> bool:
        return bool(_QUESTION.search(self.masked[start:end + 1].rstrip()))

    def _asked(self, start: int, end: int) -> str | None:
        """The one tier a question asks about ("值得精读吗？"), or None (none, or two:
        "值得精读还是快速浏览？")."""
        tiers = {tier for at, tier, _ in self._tiers_in(start, end)
                 if at == start or not self.masked[at - 1].isalpha() or self.lang == "zh"}
        return tiers.pop() if len(tiers) == 1 else None

    def _answer(self, start: int, end: int, asked: str | None) -> Verdict | None:
        """"值得精读吗？答案是肯定的" → the asked tier; "…？并不。" → its negation; an answer
        that gives its own verdict later in the sentence says more, and wins."""
        if asked is None:
            return None
        pos = self._past_decoration(start, end)
        for name, yes in (("answers_no", False), ("answers_yes", True)):
            found = self._match(self.lists[name], pos)
            if found and self._ends_phrase(found.end(), end, loose=True):
                tier = asked if yes else _NEGATED[asked]
                later = self._later_clause(found.end(), end)
                return later or self._given(tier, found[0], start, found.end())
        return None

    # -- one sentence

    def _sentence(self, start: int, end: int, first: bool = False) -> Verdict | object | None:
        if self._is_question(start, end):
            return _SKIP  # "值得精读吗？" asks; the answer may follow
        pos = self._past_decoration(start, end)
        if pos >= end:
            return _SKIP
        if self.masked[pos] in _OPEN_QUOTES:
            return self._quoted(start, pos, end)
        pos, labelled = self._past_labels(pos, end)
        if pos >= end:
            return _SKIP if labelled else None  # a heading: "## 结论"
        if labelled and (level := self._level(start, pos, end)):
            return level
        pos = self._past_preface(pos, end)
        if self._match((*self.lists["conditions"], *self.lists["soft_conditions"]), pos):
            return self._conditional(start, pos, end)
        found = self._phrase_after_modal(pos, end)
        if found is None and first:
            # "重点看三处设计：值得精读": a later clause of the first sentence; after a verdict
            # only quoted (“…calls this a "must-read"…”), the next sentence.
            if later := self._later_clause(pos, end):
                return later
            quoted = any(self.masked[at - 1] in _OPEN_QUOTES
                         for at, _, _ in self._tiers_in(start + 1, end))
            return _SKIP if quoted else None
        if found is None:
            return None
        at, tier, phrase_end, restricted = found
        if tier is _SUBJECT:
            return self._later_clause(phrase_end, end) or _SKIP
        return self._verdict(tier, start, at, phrase_end, end, restricted)

    def _phrase_after_modal(self, pos: int, end: int) -> tuple[int, str, int, bool] | None:
        """The phrase at ``pos``, or after one modal word ("建议快速浏览", "Only worth…"),
        and whether that word restricts it ("only", "仅": "only worth it if you…")."""
        found = self._phrase_at(pos, end) or self._negated_phrase(pos, end)
        restricts = False
        if found is None and (modal := self._match(self.lists["modals"], pos)):
            restricts = self._is(modal[0], "modals_restricting")
            pos = self._skip(modal.end(), " ")
            found = self._phrase_at(pos, end)
        return (pos, found[0], found[1], restricts) if found else None

    def _verdict(self, tier: str, start: int, pos: int, phrase_end: int, end: int,
                 restricted: bool = False) -> Verdict:
        condition = self._condition_after(phrase_end, end, soft=restricted)
        otherwise = self._otherwise(phrase_end, end) if tier in _TIERS else None
        if condition is not None:
            tier = otherwise or "skim"
        elif otherwise and otherwise != tier:  # "must-read for X, skippable for everyone else"
            condition = self.text[phrase_end:end].strip(" ,，;；") or None
            tier = otherwise
        elif tier in _TIERS and self._is_negation(pos, phrase_end):
            tier = self._but_clause(phrase_end, end) or tier
        scope = None
        if not condition:  # "值得一读（中）": a level given in brackets says the tier
            scope = self._scope(phrase_end, end)
            tier = self._bracketed_level(phrase_end) or tier
        return self._given(tier, self.text[pos:phrase_end], start, phrase_end, scope, condition)

    def _bracketed_level(self, at: int) -> str | None:
        """A level in brackets right after the phrase: "值得一读（中）", "Worth a look (medium)"."""
        words = self.words.levels[self.lang]
        levels = _pattern(tuple(words), self.lang).pattern
        found = re.compile(rf"\s*[(（]\s*({levels})\s*[)）]", re.I).match(self.masked, at)
        return words[_fold(found[1], self.lang)] if found else None

    def _conditional(self, start: int, pos: int, end: int) -> Verdict | None:
        """"仅对维护 X 的同学值得精读，其他人可略读": the phrase comes after the condition."""
        found = next(self._tiers_in(pos, end), None)
        if found is None:
            return None
        at, _, phrase_end = found
        tier = self._otherwise(phrase_end, len(self.masked)) or "skim"
        return self._given(tier, self.text[at:phrase_end], start, phrase_end,
                           condition=self.text[pos:at].strip() or None)

    # -- pieces of a sentence

    def _past_decoration(self, pos: int, end: int) -> int:
        while pos < end and _is_decoration(self.masked[pos]):
            pos += 1
        list_mark = re.compile(r"\d{1,2}[.)、]\s*").match(self.masked, pos, end)
        return list_mark.end() if list_mark else pos

    def _past_labels(self, pos: int, end: int) -> tuple[int, bool]:
        labelled = False
        for _ in range(3):
            label = self._match(self.lists["labels"], pos)
            if not label:
                break
            after = label.end()
            while (after < end and _is_decoration(self.masked[after])
                   and self.masked[after] not in "【[(（】])）"):
                after += 1
            if after < end and self.masked[after] in ":：】]":
                after += 1
            elif after < end:
                break  # "建议精读": a phrase that starts like a label
            after, labelled = self._skip(after, " "), True
            if _RATING.match(self.masked, after):  # stars are no decoration after a label
                return after, labelled
            pos = self._past_decoration(after, end)
        return pos, labelled

    def _level(self, start: int, pos: int, end: int) -> Verdict | None:
        """"优先级：高", "Priority: low", "推荐指数：★★★☆☆", "Rating: 3/5": a level or a rating
        after a label."""
        if rating := _RATING.match(self.masked, pos):
            stars = len(rating["stars"]) if rating["stars"] else int(rating["score"])
            tier = self.words.ratings.get(str(stars))
            return self._given(tier, rating[0], start, rating.end()) if tier else None
        words = self.words.levels[self.lang]
        found = self._match(words, pos)
        if found and self._ends_phrase(found.end(), end):
            return self._given(words[_fold(found[0], self.lang)], found[0], start, found.end())
        return None

    def _past_preface(self, pos: int, end: int) -> int:
        preface = self._match(self.lists["prefaces"], pos)
        if not preface:
            return pos
        after = self._skip(preface.end(), ",，:： ")
        for _ in range(3):
            link = self._match(self.lists["prefaces_links"], after)
            if not link or not link[0].strip():
                break
            after = self._skip(link.end(), ",，:： ")
        return after

    def _phrase_at(self, pos: int, end: int, boundary: bool = True
                   ) -> tuple[str, int] | None:
        phrases = self.words.phrases[self.lang]
        found = self._match(phrases, pos)
        if not found or found.end() > end:
            return None
        if boundary and not self._ends_phrase(found.end(), end):
            rest = self.masked[found.end():]
            subject = (self._zh_subject(rest) if self.lang == "zh"
                       else re.match(r"\s+[A-Za-z]", rest))
            return (_SUBJECT, found.end()) if subject else None
        return phrases[_fold(found[0], self.lang)], found.end()

    def _tiers_in(self, start: int, stop: int, ambiguous: bool = False
                  ) -> Iterator[tuple[int, str, int]]:
        """Each tier phrase between ``start`` and ``stop``, anywhere: (start, tier, end);
        with ``ambiguous``, each phrase that reads more than one way too."""
        for at in range(start, stop):
            found = self._phrase_at(at, stop, boundary=False)
            if found and (ambiguous or found[0] in _TIERS):
                yield at, found[0], found[1]

    def _negated_phrase(self, pos: int, end: int) -> tuple[str, int] | None:
        """A negator and the verdict phrase it negates in its clause ("不必作为必读", "don't
        skim this one"): the tier that reading gives, and where the phrase ends."""
        negator = self._match(self.lists["negators"], pos)
        if not negator or not self._ends_phrase(negator.end(), end, loose=True):
            return None
        stop = _end_of_clause(self.masked, negator.end(), end)
        found = next(self._tiers_in(negator.end(), stop), None)
        return (_NEGATED[found[1]], found[2]) if found else None

    def _ends_phrase(self, at: int, end: int, loose: bool = False) -> bool:
        """Whether what follows a phrase leaves it the verdict (``loose``: only that it is
        not the inside of a word)."""
        rest = self.masked[at:end]
        if loose:
            return not rest[:1].isalnum() or self.lang == "zh"
        if not rest.strip() or rest[0] in _CLOSE_QUOTES:
            return not rest.strip() or rest[1:2] in ("", *",，;；:：。.!！)）")
        if self.lang == "zh":
            return not self._zh_subject(rest)
        if rest[0].isalnum() or (rest[:2].startswith("-") and rest[1:2].isalnum()):
            return False  # "skimming", "medium-sized"
        if not rest[0].isspace():
            return True  # punctuation
        last = (self.masked[:at].split() or [""])[-1]
        word = re.match(r"\s*([A-Za-z']+)", rest)
        return word is None or self._is(word[1], "followers") or self._is(last, "followers")

    def _zh_subject(self, rest: str) -> bool:
        """Whether what follows a Chinese phrase makes it part of a subject ("值得精读的部分",
        "必读清单")."""
        nouns = _pattern(self.lists["subject_nouns"], self.lang)
        return bool(_ZH_ATTRIBUTE.match(rest) or nouns.match(rest.lstrip()))

    def _is_negation(self, pos: int, phrase_end: int) -> bool:
        """Whether the verdict negates itself: a listed negation, or a negator opens it."""
        phrase = _fold(self.masked[pos:phrase_end], self.lang)
        return (phrase in self.words.negations[self.lang]
                or bool(self._match(self.lists["negators"], pos)))

    def _later_clause(self, at: int, end: int) -> Verdict | None:
        """A later clause of the sentence that opens with a verdict: after a phrase used as
        a subject ("值得精读的部分不多，快速浏览即可"), a quotation or a question's answer."""
        while (at := _end_of_clause(self.masked, at, end)) < end:
            at += 1
            start = self._past_decoration(self._skip(at, " "), end)
            but = self._match(self.lists["scopes"], start)
            pos = self._past_preface(self._skip(but.end(), " ,，") if but else start, end)
            found = self._phrase_after_modal(pos, end)
            if found and found[1] is not _SUBJECT:
                return self._verdict(found[1], start, found[0], found[2], end, found[3])
        return None

    def _but_clause(self, at: int, end: int) -> str | None:
        """"Not a must-read, but a solid medium-priority read": what the but clause says; a
        but that recommends without a tier ("…，但值得花十分钟看看") is a medium."""
        while (at := _end_of_clause(self.masked, at, end)) < end:
            at = self._skip(at + 1, " ")
            but = self._match(self.lists["scopes"], at)
            if not but:
                continue
            stop = _end_of_clause(self.masked, but.end(), end)
            found = next(self._tiers_in(but.end(), stop, ambiguous=True), None)
            if found:  # a tier, or a phrase that reads more than one way
                return found[1]
            if _pattern(self.lists["recommends"], self.lang).search(self.masked, but.end(), stop):
                return "medium"
        return None

    def _condition_after(self, at: int, end: int, soft: bool = False) -> str | None:
        """A condition in the rest of the verdict's sentence ("…, but only if you maintain
        X", "（仅对…）"), as written; a soft one ("if you…") too after a restricting word
        ("Only worth a close read if you…")."""
        words = (*self.lists["conditions"], *(self.lists["soft_conditions"] if soft else ()))
        found = _pattern(words, self.lang).search(self.masked, at, end)
        if not found or self.masked[:found.start()].lower().endswith("if "):
            return None  # "worth a look, if only for the helper" names no readers
        stop = _end_of_clause(self.masked, found.start(), end)
        return self.text[found.start():stop].strip(" )）") or None

    def _otherwise(self, at: int, end: int) -> str | None:
        """What a conditional verdict says for everyone else, if it says it."""
        stop = _end_of_sentence(self.masked, _end_of_sentence(self.masked, at) + 1)
        found = _pattern(self.lists["otherwise"], self.lang).search(self.masked, at, stop)
        if not found:
            return None
        # The clause the marker is in: "其他人可略读", "everyone else should still give it a
        # medium-priority look", "skippable for everyone else".
        clause_start = max(self.masked.rfind(c, at, found.start()) for c in ",，;；:：") + 1
        clause_end = _end_of_clause(self.masked, self._skip(found.end(), " ,，:："), stop)
        return next((tier for pos, tier, _ in self._tiers_in(max(clause_start, at), clause_end)
                     if not found.start() <= pos < found.end()), None)

    def _scope(self, at: int, end: int) -> str | None:
        """A scoped verdict's limit: "值得精读，但只需读 27 行…" → "只需读 27 行…"."""
        pos = self._skip(at, " ,，:：;；—–-")
        bracket = self.masked[pos:pos + 1] in ("(", "（")
        if bracket:
            pos = self._skip(pos + 1, " ")
        opener = self._match(self.lists["scopes"], pos)
        if not opener and not bracket:
            return None
        start = self._skip(opener.end() if opener else pos, " ,，")
        close = re.compile(r"[)）]").search(self.masked, start, end) if bracket else None
        scope = self.text[start:close.start() if close else end].strip()
        limits = self.lists["scopes_limits"]
        if not scope or not any(_fold(w, self.lang) in _fold(scope, self.lang) for w in limits):
            return None  # a caveat ("但 PR 描述不完整"), not a limit
        return scope

    def _quoted(self, start: int, pos: int, end: int) -> Verdict | object | None:
        """A sentence that opens with a quotation: the verdict in quotes for emphasis
        ("「值得精读」，…"), or a phrase mentioned, not given ("“必读”标签被滥用了")."""
        inner = pos + 1
        found = self._phrase_at(inner, end, boundary=False)
        if found and self.masked[found[1]:found[1] + 1] in _CLOSE_QUOTES:
            rest = self.masked[found[1] + 1:end].strip()
            if not rest or rest[0] in ",，;；:：。.!！—-":
                return self._verdict(found[0], start, inner, found[1], end)
        return self._later_clause(pos, end) or _SKIP

    # -- small helpers

    def _match(self, words: Iterable[str], pos: int) -> re.Match[str] | None:
        return _pattern(tuple(words), self.lang).match(self.masked, pos)

    def _is(self, word: str, name: str) -> bool:
        """Whether ``word`` is, whole, one of the list ``name``."""
        return bool(_pattern(self.lists[name], self.lang).fullmatch(word))

    def _skip(self, pos: int, chars: str) -> int:
        while pos < len(self.masked) and self.masked[pos] in chars:
            pos += 1
        return pos

    def _given(self, tier: str, phrase: str, start: int, phrase_end: int,
               scope: str | None = None, condition: str | None = None) -> Verdict:
        """The verdict, with the opening clause it came from as written (code spans whole)."""
        stop = _end_of_clause(self.masked, phrase_end, len(self.masked))
        clause = re.sub(r"\*+|~~", "", self.text[start:stop]).strip()
        return Verdict(tier, phrase.strip(), self.lang, scope, clause=clause, condition=condition)


_SKIP = object()
_SUBJECT = "subject"


#: What a negated verdict says: not a must-read (or medium) is a skim; not a skim ("don't
#: skim this one", "不建议跳过") is a must-read.
_NEGATED = {"must-read": "skim", "medium": "skim", "skim": "must-read"}


def _masked(text: str) -> str:
    """``text`` with each code span's inside blanked, same length: a full stop in
    `block_pool.py` ends nothing."""
    return _CODE.sub(lambda m: "`" + "x" * (len(m[0]) - 2) + "`", text)


def _end_of_sentence(text: str, start: int) -> int:
    found = _SENTENCE_END.search(text, start)
    return found.start() if found else len(text)


def _end_of_clause(text: str, start: int, end: int) -> int:
    found = _CLAUSE_END.search(text, start, end)
    return found.start() if found else end


def _is_decoration(char: str) -> bool:
    """Emoji (joiners and variation selectors included), symbols, markdown and list marks,
    brackets: what may stand before a verdict."""
    return (char.isspace() or char in "#>*_-—–+•·●▪◆◇■□▶►→=~|【】[]()（）"
            or unicodedata.category(char) in ("So", "Sk", "Cf", "Mn"))


def _fold(text: str, lang: Lang) -> str:
    """The form phrases are compared in: lower case, hyphens as spaces, and for Chinese no
    spaces at all ("本 PR" = "本PR")."""
    folded = re.sub(r"[\s\-‐‑–]+", " ", text.strip().lower())
    return folded.replace(" ", "") if lang == "zh" else folded


def _loose(folded: str, lang: Lang) -> str:
    """A folded phrase as an expression that matches it however it is spaced or hyphenated."""
    if lang == "zh":
        return r"\s*".join(re.escape(char) for char in folded)
    return r"[\s\-‐‑–]+".join(re.escape(word) for word in folded.split(" "))


def _merge(into: dict[str, Any], data: Mapping[str, Any], where: str = "") -> None:
    """``data`` added to ``into``: tables merged, lists extended, anything else replaced; a
    value of another shape than the shipped one is refused, naming what it should be."""
    for key, value in data.items():
        name = f"{where}.{key}" if where else key
        kept = into.get(key)
        if kept is not None and type(kept) is not type(value) and (
                isinstance(kept, dict | list) or isinstance(value, dict | list)):
            shape = ("a table" if isinstance(kept, dict) else "a list of phrases"
                     if isinstance(kept, list) else "a single value")
            raise ValueError(f"{name} must be {shape}")
        if isinstance(value, dict):
            _merge(into.setdefault(key, {}), value, name)
        elif isinstance(value, list):
            into[key] = [*(kept or []), *value]
        else:
            into[key] = value


def _list(section: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = section.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"[{where}] {key} must be a list of strings")
    return tuple(value)


def _tiers_of(table: Mapping[str, Any], where: str) -> dict[str, str]:
    for phrase, tier in table.items():
        if tier not in _TIERS:
            raise ValueError(f"[{where}] {phrase!r} = {tier!r} names no "
                              f"tier ({', '.join(_TIERS)})")
    return dict(table)
