"""The words of the search index: Chinese cut by jieba, and the list of every word a year holds.

Pure: HTML in, the same HTML with its Chinese words set apart by spaces out; the words of a
year's records out as the search page reads them. ``pipeline/core/site/search.py`` runs both
over each year's records before Pagefind reads them.

Why our own segmentation, and not Pagefind's: Pagefind's extended build cuts Chinese with
jieba while it indexes, but Pagefind 1.5 cuts a *query* with the browser's ``Intl.Segmenter``
(ICU's dictionary, another one) whenever the page's language is zh. The two disagree: ICU
cuts 内核 into 内 + 核, and Pagefind matches each piece as a prefix, so 内核 found 核对 and
锁内 (Pagefind issue 1237). So the words are decided here, once, with jieba (``rjieba``:
jieba-rs, the segmenter and dictionary Pagefind ships, ~20× faster than the pure-Python
jieba and with no cache file; imported only when a year is indexed, so a build never loads
its dictionary); Pagefind is told the language is undetermined (``und``), so it neither cuts
nor stems, and indexes the words as they stand between the spaces. The search page cuts a
query against the same words (:func:`vocabulary`), so a query word is an index word.

Why the list of every word (:func:`vocabulary`), not only the Chinese ones: Pagefind drops a
query word that starts no word of an index, or takes the longest indexed word it starts with
instead (kv-connector → kv), and it does so in each year's bundle alone; so a year without a
query's word answered with loose matches ("kv-connector" found 2025's "KV blocks"). The search
page asks only the years whose list has a word starting with each query word (a Pagefind
filter on the record's year), where Pagefind's match is strict.

Text only: tags and attribute values are left as they are (the record's meta values among
them). Non-Han text is untouched but set apart from a Han run, as is CJK punctuation, so
`_remote_agents加锁` is the identifier and 加锁, as a reader would type them.
"""

from __future__ import annotations

import html as htmllib
import json
import re
import unicodedata
from collections.abc import Iterable
from functools import cache
from importlib import metadata
from typing import Any

#: Han characters (CJK Unified Ideographs with extension A, the compatibility block and the
#: supplementary planes' extensions), as a regular-expression class both Python and the
#: search page's JavaScript (with the ``u`` flag) read the same way.
HAN = r"[\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\U00020000-\U0002FA1F]"
HAN_JS = r"[\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\u{20000}-\u{2FA1F}]"
_RUN = re.compile(HAN + "+")
#: CJK punctuation (，。：「」 and the fullwidth forms' marks): set apart like a Han run.
_CJK_MARKS = re.compile(r"[\u3000-\u303F\uFF01-\uFF0F\uFF1A-\uFF20\uFF3B-\uFF40\uFF5B-\uFF65]+")
_TAG = re.compile(r"(<[^>]*>)")
#: Where Pagefind cuts a word into the parts it also indexes (``Scheduler.schedule`` →
#: scheduler, schedule; ``Qwen4Exp`` → qwen, 4, exp), a little more often than it does: a
#: part too many only lets a year be asked, a part too few would hide its matches.
_SEPARATOR = re.compile(r"[\W_]+")
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^\W\d_A-Za-z]+")


@cache
def _segmenter() -> Any:
    import rjieba  # a dependency; its dictionary loads on import, so only here

    return rjieba


def segmenter_version() -> str:
    """The segmenter and its version: part of a year's digest, so a new dictionary indexes
    every year again."""
    try:
        return f"rjieba {metadata.version('rjieba')}"
    except metadata.PackageNotFoundError:
        return "rjieba unknown"


def cut(run: str) -> list[str]:
    """One run of Han characters as jieba's words (its HMM guesses words the dictionary
    lacks, such as 竞态 or 解阻)."""
    return [word for word in _segmenter().cut(run, hmm=True) if word.strip()]


def segment_text(text: str) -> str:
    """``text`` with each Han run cut into words, the words, the run and any CJK
    punctuation set apart by spaces."""
    text = _CJK_MARKS.sub(lambda match: f" {match[0]} ", text)
    return _RUN.sub(lambda match: " " + " ".join(cut(match[0])) + " ", text)


def segment_html(html: str) -> str:
    """:func:`segment_text` over the text between the tags of ``html``."""
    return "".join(part if part.startswith("<") else segment_text(part)
                   for part in _TAG.split(html))


def normal(word: str) -> str:
    """A word as the search page compares it: lower case, without accents, letters and
    digits only (the page's ``normal`` does the same to a query word)."""
    decomposed = unicodedata.normalize("NFD", word.lower())
    return "".join(ch for ch in decomposed if ch.isalnum())


def indexed_words(pages: Iterable[str]) -> set[str]:
    """The words of segmented records' text as :func:`normal` makes them, each whole and cut
    into its parts as Pagefind indexes them (each distinct token worked out once)."""
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
    """A year's words as the search page reads them: a JSON list, sorted (the bundle stays
    byte for byte the same for the same records)."""
    return (json.dumps(sorted(set(words)), ensure_ascii=False, separators=(",", ":"))
            + "\n").encode("utf-8")
