"""The placeholder guard: what a machine translation must not touch, and the check that it
did not.

:func:`protect` replaces everything that is not prose with a numbered placeholder ``⟦1⟧``;
:func:`restore` puts the originals back and refuses (:class:`GuardError`) a translation that
lost, duplicated, altered or invented one, or reordered markup so that a tag no longer closes
what it opened. Moving a placeholder is allowed: word order differs between the languages.

Protected: HTML tags, ``<code>``/``<pre>`` elements and character references, URLs,
addresses, ``--flags``, PR references, file paths, identifiers, commit hashes, and every
figure with its sign and unit ("27 lines" turned into "72 lines" misleads as much as a
changed percentage). Ordinals, digits inside a word and plain acronyms stay prose.

Why ``⟦n⟧``: zh↔en translation swaps ASCII and CJK punctuation and an LLM reads ``<x>`` or
``{x}`` as markup; these brackets have no counterpart and never occur in prose. Brackets in
the source are protected too, so every bracket in the translator's text is ours.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["CLOSE", "OPEN", "GuardError", "Guarded", "placeholder", "protect", "restore"]

OPEN, CLOSE = "⟦", "⟧"


def placeholder(number: int) -> str:
    """The placeholder standing for the ``number``-th protected span (1-based)."""
    return f"{OPEN}{number}{CLOSE}"


@dataclass(frozen=True)
class Guarded:
    """A text ready for a translator, and what it stands for."""

    #: The source with each protected span replaced by its placeholder ``⟦1⟧``, ``⟦2⟧`` …
    text: str
    #: The protected originals, in order: ``spans[0]`` is ``⟦1⟧``.
    spans: tuple[str, ...]


class GuardError(ValueError):
    """A translation did not keep every placeholder exactly once, or broke the markup."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        #: One line for the proof report: which placeholder, standing for what, went wrong.
        self.reason = reason


# -- protect ---------------------------------------------------------------------------------

_TAG = re.compile(r"(<[^<>]*>)")
_TAG_NAME = re.compile(r"<\s*(/?)\s*([A-Za-z][A-Za-z0-9]*)")
#: Elements kept whole, content included.
_WHOLE = frozenset({"code", "pre"})
#: Block tags: touching ones (whitespace between them included) share one placeholder.
_BLOCK = frozenset({"p", "ul", "ol", "li", "blockquote", "pre"})
_VOID = frozenset({"br", "hr", "img", "wbr"})

_NOT_URL = r"\s<>\"'`\u0080-\U0010ffff"
_UNITS_SPACED = (r"%|％|ms|µs|μs|us|ns|GB|GiB|MB|MiB|KB|KiB|kB|TB|TiB|tok/s|tokens/s|it/s"
                 r"|req/s|QPS|qps|TFLOPS|GFLOPS|FLOPS|Gbps|GB/s|MB/s|GHz|MHz|pp")
_UNITS_TIGHT = r"×|x|X|s|B|K|M|G|T|k|h|min|W"

_PROSE = re.compile(
    r"(?P<entity>&(?:[A-Za-z][A-Za-z0-9]{1,31}|\#[0-9]{1,7}|\#[xX][0-9A-Fa-f]{1,6});)"
    r"|(?P<mark>⟦\s*\d*\s*⟧|[⟦⟧])"
    rf"|(?P<url>(?<![A-Za-z0-9_])(?:https?|ftp)://[^{_NOT_URL}]+)"
    r"|(?P<email>(?<![A-Za-z0-9_.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)"
    r"|(?P<ref>(?<![0-9_&#/])(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?\#[0-9]+(?![A-Za-z0-9_]))"
    r"|(?P<flag>(?<![A-Za-z0-9_-])--[A-Za-z][A-Za-z0-9_-]*)"
    r"|(?P<figure>(?<![A-Za-z0-9_.])(?:×\ ?)?[+\-−±~]?[0-9]+(?:[.,][0-9]+)*"
    rf"(?:\ ?(?:{_UNITS_SPACED})|(?:{_UNITS_TIGHT}))?(?![A-Za-z0-9_]|\.[A-Za-z0-9_]))"
    r"|(?P<word>(?<![A-Za-z0-9_])[A-Za-z0-9_~./][A-Za-z0-9_./:~-]*(?:\(\))?)"
)
_URL_TRAILING = ".,;:!?'\""
_URL_ENTITY_END = re.compile(r"&(?:gt|lt|quot|#39|#x27);")
_WORD_TRAILING = ".:-"

_CAMEL = re.compile(r"[a-z][0-9]*[A-Z]|[A-Z]{2,}[a-z]")
_PLURAL_ACRONYM = re.compile(r"[A-Z]{2,}s")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_HASH = re.compile(r"[0-9a-f]{7,40}|[0-9A-F]{7,40}")
_VERSION = re.compile(r"[vV]?[0-9]+(?:\.[0-9]+)+[A-Za-z0-9]*")
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,10}$")


def protect(html: str) -> Guarded:
    """Replace everything a translator must not touch with ``⟦n⟧`` placeholders.

    ``restore(protect(x), protect(x).text) == x`` for sanitized HTML or plain text.
    """
    spans: list[str] = []
    text: list[str] = []  # prose and placeholders
    block_run = False  # the last placeholder stands for block tags, only white space since

    def keep(span: str, *, block: bool = False) -> None:
        nonlocal block_run
        if block and block_run:  # the white space between block tags goes with them
            spans[-1] += (text.pop() if text[-1].isspace() else "") + span
        else:
            spans.append(span)
            text.append(placeholder(len(spans)))
        block_run = block

    parts = _TAG.split(html)
    i = 0
    while i < len(parts):
        part, end = parts[i], i
        if i % 2 == 0:  # text between tags
            for protected, piece in _scan_prose(part):
                if protected:
                    keep(piece)
                else:
                    text.append(piece)
                    block_run = block_run and piece.isspace()
        else:
            closing, name = _tag(part)
            if name in _WHOLE and not closing and not part.rstrip(">").endswith("/"):
                end = _matching_close(parts, i, name) or i  # code kept whole, when it closes
            keep("".join(parts[i:end + 1]), block=name in _BLOCK)
        i = end + 1
    return Guarded("".join(text), tuple(spans))


def _tag(tag: str) -> tuple[bool, str]:
    """(is a closing tag, lower-case name) of ``<…>``; name "" when it is no element tag."""
    match = _TAG_NAME.match(tag)
    return (bool(match[1]), match[2].lower()) if match else (False, "")


def _matching_close(parts: list[str], start: int, name: str) -> int | None:
    """The index in ``parts`` of the tag closing the ``name`` element opened at ``start``."""
    depth = 0
    for j in range(start, len(parts), 2):
        closing, other = _tag(parts[j])
        if other != name:
            continue
        depth += -1 if closing else 1
        if depth == 0:
            return j
    return None


def _scan_prose(text: str) -> Iterator[tuple[bool, str]]:
    """Split a text node into (protected, piece) pieces."""
    pos = start = 0  # start: where the current run of prose began
    while match := _PROSE.search(text, pos):
        kind, begin, end = match.lastgroup, match.start(), match.end()
        if kind == "url":
            end = begin + _url_length(match.group())
        elif kind == "word":
            word = match.group()
            trimmed = word if word.endswith("()") else word.rstrip(_WORD_TRAILING)
            end = begin + len(trimmed)
            if not trimmed or not _is_code_word(trimmed):
                pos = max(end, begin + 1)
                continue
        if begin > start:
            yield False, text[start:begin]
        yield True, text[begin:end]
        start = pos = end
    if start < len(text):
        yield False, text[start:]


def _url_length(url: str) -> int:
    """How much of a matched URL is the URL: trailing punctuation and quotes belong to prose."""
    if entity := _URL_ENTITY_END.search(url):
        url = url[: entity.start()]
    while url and (url[-1] in _URL_TRAILING
                   or (url[-1] == ")" and url.count(")") > url.count("("))):  # unbalanced
        url = url[:-1]
    return len(url)


def _is_code_word(word: str) -> bool:
    """Whether an ASCII run of letters, digits and ``_./:~-`` reads as code, not prose."""
    if not any(c.isalpha() for c in word):
        return False
    if word.endswith("()") or "::" in word or "_" in word:
        return True
    if "/" in word and _is_path(word):
        return True
    if any(_CAMEL.search(part) and not _PLURAL_ACRONYM.fullmatch(part)
           for part in re.split(r"[^A-Za-z0-9]+", word)):
        return True
    if any(max(map(len, dotted[0].split("."))) > 1 for dotted in _DOTTED.finditer(word)):
        return True
    return bool(_HASH.fullmatch(word) and re.search(r"[0-9]", word)
                and re.search(r"[A-Fa-f]", word)) or bool(_VERSION.fullmatch(word))


def _is_path(word: str) -> bool:
    """``a/b.py``, ``a/b/c``, ``/etc/x``, ``./x``, ``dir/`` — not ``and/or`` or ``E2E/Smoke``."""
    last = word.rsplit("/", 1)[-1]
    return (word.count("/") >= 2 or word.startswith(("/", "./", "../", "~/"))
            or word.endswith("/") or bool(_EXTENSION.search(last)))


# -- restore ---------------------------------------------------------------------------------

#: A placeholder as a translator may hand it back: spaces inside, or full-width digits.
_FOUND = re.compile(r"⟦\s*(\d{1,6})\s*⟧")
_SHOWN = 40


def restore(guarded: Guarded, translated: str) -> str:
    """Put every protected span back in ``translated``; :class:`GuardError` when a placeholder
    was lost, duplicated, altered or invented, or the markup no longer nests."""
    spans = guarded.spans
    found = list(_FOUND.finditer(translated))
    counts = Counter(int(m[1]) for m in found)
    problems: list[str] = []
    leftover = _FOUND.sub("", translated)
    if stray := re.search(r"[⟦⟧]", leftover):
        near = leftover[max(0, stray.start() - 8): stray.end() + 8].replace("\n", " ")
        problems.append(f"malformed placeholder near {near!r}")
    for number, span in enumerate(spans, 1):
        if counts[number] != 1:
            how = f"appears {counts[number]} times" if counts[number] else "was lost"
            problems.append(f"{placeholder(number)} ({_show(span)}) {how}")
    for number in sorted(n for n in counts if not 1 <= n <= len(spans)):
        problems.append(f"{placeholder(number)} was invented (the text has "
                        f"{_count(len(spans))})")
    if problems:
        raise GuardError("; ".join(problems))
    _check_markup(spans, [int(m[1]) for m in found])
    return _FOUND.sub(lambda m: spans[int(m[1]) - 1], translated)


def _show(span: str) -> str:
    one_line = " ".join(span.split())
    return repr(one_line if len(one_line) <= _SHOWN else one_line[: _SHOWN - 1] + "…")


def _count(n: int) -> str:
    return f"{n} placeholder" + ("" if n == 1 else "s") if n else "no placeholders"


def _tag_events(span: str) -> list[tuple[bool, str, str]]:
    """(closing, name, tag) for each element tag of a span of markup; code kept whole (its
    inner tags are balanced by construction) and non-markup spans have none."""
    if not span.startswith("<"):
        return []
    closing, name = _tag(span)
    if name in _WHOLE and not closing and _matching_close(_TAG.split(span), 1, name) is not None:
        return []
    events = []
    for tag in _TAG.findall(span):
        closing, name = _tag(tag)
        if name and name not in _VOID and not tag.rstrip(">").endswith("/"):
            events.append((closing, name, tag))
    return events


def _check_markup(spans: tuple[str, ...], order: list[int]) -> None:
    """Tags that pair up in the source must still pair up, properly nested, in the order the
    translation put their placeholders in."""
    pairs: dict[tuple[int, int], int] = {}  # (span number, tag index) → pair id
    stack: list[tuple[str, tuple[int, int]]] = []
    for number, span in enumerate(spans, 1):
        for index, (closing, name, _tag_text) in enumerate(_tag_events(span)):
            if not closing:
                stack.append((name, (number, index)))
            elif stack and stack[-1][0] == name:
                _, opened = stack.pop()
                pairs[opened] = pairs[(number, index)] = len(pairs) // 2
    if not pairs:
        return
    openers: dict[int, str] = {}
    stack_ids: list[int] = []
    for number in order:
        for index, (closing, _name, tag) in enumerate(_tag_events(spans[number - 1])):
            pair = pairs.get((number, index))
            if pair is None:
                continue
            if not closing:
                stack_ids.append(pair)
                openers[pair] = tag
            elif stack_ids and stack_ids[-1] == pair:
                stack_ids.pop()
            else:
                opener = openers.get(pair)
                where = (f"no longer closes {_show(opener)}" if opener
                         else "now comes before the tag it closes")
                raise GuardError(f"markup out of order: {placeholder(number)} "
                                 f"({_show(tag)}) {where}")
