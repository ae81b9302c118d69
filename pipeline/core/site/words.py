"""The words of the search index: Chinese cut by jieba, and the list of every word a year holds.

Why: Pagefind cuts Chinese with jieba while indexing but cuts a *query* with the browser's
``Intl.Segmenter``, and the two disagree (内核 found 核对). So the words are cut here, Pagefind
is told the language is ``und`` (no cutting, no stemming), and the search page cuts a query
against the same words (:func:`vocabulary`). Every word is listed, as Pagefind drops a query
word that starts no word of a year's index; the page asks only the years that have each.
"""

from __future__ import annotations

import html as htmllib
import json
import re
import unicodedata
from collections.abc import Iterable
from importlib import metadata

from pipeline.core.issue.sanitize import HAN

#: :data:`~pipeline.core.issue.sanitize.HAN` as the search page's JavaScript reads it (with
#: the ``u`` flag).
HAN_JS = r"[\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\u{20000}-\u{2FA1F}]"
_RUN = re.compile(HAN.pattern + "+")
#: CJK punctuation (，。：「」 and the fullwidth forms' marks): set apart like a Han run.
_CJK_MARKS = re.compile(r"[\u3000-\u303F\uFF01-\uFF0F\uFF1A-\uFF20\uFF3B-\uFF40\uFF5B-\uFF65]+")
_TAG = re.compile(r"(<[^>]*>)")
#: Where Pagefind cuts a word into parts it also indexes (``Qwen4Exp`` → qwen, 4, exp), a
#: little more often than it does: a part too many only lets a year be asked.
_SEPARATOR = re.compile(r"[\W_]+")
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^\W\d_A-Za-z]+")


def segmenter_version() -> str:
    """The segmenter and its version: a new dictionary indexes every year again."""
    return f"rjieba {metadata.version('rjieba')}"


def cut(run: str) -> list[str]:
    """One run of Han characters as jieba's words (its HMM guesses missing ones: 竞态)."""
    import rjieba  # a dependency, but its dictionary loads on import: only when Chinese is cut

    return [word for word in rjieba.cut(run, hmm=True) if word.strip()]


def segment_text(text: str) -> str:
    """``text`` with its Han words and CJK punctuation set apart by spaces."""
    text = _CJK_MARKS.sub(lambda match: f" {match[0]} ", text)
    return _RUN.sub(lambda match: " " + " ".join(cut(match[0])) + " ", text)


def segment_html(html: str) -> str:
    """:func:`segment_text` over the text between the tags of ``html``."""
    return "".join(part if part.startswith("<") else segment_text(part)
                   for part in _TAG.split(html))


def normal(word: str) -> str:
    """A word as the search page compares it (its ``normal`` does the same)."""
    decomposed = unicodedata.normalize("NFD", word.lower())
    return "".join(ch for ch in decomposed if ch.isalnum())


def indexed_words(pages: Iterable[str]) -> set[str]:
    """The words of segmented records' text, each whole and cut into the parts Pagefind
    indexes, as :func:`normal` makes them."""
    tokens = {token for html in pages for token in html_text(html).split()}
    found: set[str] = set()
    for token in tokens:
        found.add(normal(token))
        for piece in _SEPARATOR.split(token):
            found.add(normal(piece))
            found.update(normal(part) for part in _PART.findall(piece))
    found.discard("")
    return found


def html_text(html: str) -> str:
    """The text of ``html``: its tags (and their attributes) as spaces, entities read."""
    return htmllib.unescape(_TAG.sub(" ", html))


def vocabulary(words: Iterable[str]) -> bytes:
    """A year's words as a sorted JSON list: the same records give the same bytes."""
    return (json.dumps(sorted(set(words)), ensure_ascii=False, separators=(",", ":"))
            + "\n").encode("utf-8")
