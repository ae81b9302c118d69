"""Feed HTML → the small, safe HTML an email and a web page can show, and its plain text.

Nothing from a feed reaches an output without passing :func:`clean_html` (or template
escaping). Our allowlist is short and enforced by nh3, so a change of parser cannot widen it.
For every way text enters, :func:`strip_unsafe` removes characters that reorder or hide text
and characters no document may carry, before sanitizing *and after* (nh3 decodes
``&#x202E;`` into the very character); nesting is capped, because the MJML compiler recurses
per level and a few thousand levels crash it.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from dataclasses import dataclass
from html.parser import HTMLParser
from itertools import pairwise

import markupsafe
import nh3

from pipeline.model import Lang

ALLOWED_TAGS = frozenset(
    {"a", "p", "br", "code", "pre", "em", "strong", "b", "i", "ul", "ol", "li", "blockquote"}
)
#: Tags removed together with everything inside them.
DROPPED_WITH_CONTENT = frozenset(
    {"script", "style", "iframe", "object", "embed", "noscript", "template", "svg", "math",
     "textarea", "select", "title", "head"}
)

_CLEANER = nh3.Cleaner(
    tags=set(ALLOWED_TAGS),
    clean_content_tags=set(DROPPED_WITH_CONTENT),
    attributes={"a": {"href", "title"}},
    url_schemes={"http", "https"},
    url_relative="deny",  # a relative link means nothing in an inbox
    link_rel="noopener noreferrer",
    strip_comments=True,
)

#: Han characters (CJK Unified Ideographs with extension A, the compatibility block and the
#: supplementary planes' extensions).
HAN = re.compile(r"[\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\U00020000-\U0002FA1F]")
_LATIN = re.compile(r"[A-Za-z]")
_TAG_SPLIT = re.compile(r"(<[^>]*>)")
_BACKTICK = re.compile(r"`([^`\n]+?)`")
#: Markdown's strong emphasis, as reviewers write it: ``**x**`` (not ``__x__``, which is
#: how Python names ``__init__``).
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_SPACE = re.compile(r"\s+")
_EMPTY_ANCHOR = re.compile(r"<a rel=\"noopener noreferrer\">(.*?)</a>", re.S)

#: Characters that reorder or hide text: the Arabic letter mark, zero-width space and joiners,
#: LRM/RLM, bidi embeddings and overrides (U+202A–202E), word joiner and invisible operators
#: (U+2060–2064), bidi isolates (U+2066–2069), the byte-order mark / zero-width no-break space.
_INVISIBLE = "\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
#: Noncharacters: U+FDD0–FDEF and the last two code points of every plane.
_NONCHARACTERS = "\ufdd0-\ufdef" + "".join(
    f"{chr(plane << 16 | 0xFFFE)}{chr(plane << 16 | 0xFFFF)}" for plane in range(17))
#: C0 controls but tab, LF and CR; DEL; C1 controls; line and paragraph separators.
_CONTROLS = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029"
_UNSAFE = re.compile(f"[{_CONTROLS}{_INVISIBLE}{_NONCHARACTERS}]")
#: What ends or breaks a line: becomes a space in a one-line text.
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")

#: Deepest nesting of elements a sanitized body keeps; deeper tags are dropped, their text
#: kept. No review nests lists and quotes this deep; the MJML compiler crashes near 10,000.
MAX_NESTING = 32
#: Nesting the raw fragment may reach before nh3 parses it. html5ever's time grows with the
#: square of the depth (160,000 nested ``<div>`` take minutes), so a linear pre-pass bounds
#: it; it is looser than :data:`MAX_NESTING` because it only estimates what the parser builds
#: (unclosed ``<p>`` and ``<li>``, legal HTML, count as nested here).
_RAW_NESTING = 256
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link",
                   "meta", "param", "source", "track", "wbr"})
_INLINE = frozenset({"a", "b", "i", "em", "strong", "code", "span"})
_RAW_TAG = re.compile(r"<(/?)([A-Za-z][^\s/>]*)[^>]*>")
#: A tag of nh3's output: attributes always double-quoted, so ``>`` inside one is no end.
_CLEAN_TAG = re.compile(r'<(/?)([A-Za-z][A-Za-z0-9]*)(?:[^>"]|"[^"]*")*>')


def strip_unsafe(text: str) -> str:
    """``text`` without characters that reorder or hide text, controls (tab, LF, CR stay) or
    noncharacters: removed, not balanced, as a U+202E turns the rest of a ``Subject:`` around."""
    return _UNSAFE.sub("", text)


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` as one line: line breaks and controls become spaces, runs of white space one
    space, unsafe characters (:func:`strip_unsafe`) gone, and at most ``limit`` characters
    (cut with "…"). For headlines, notes and tags, and for quoting what a server said."""
    line = _SPACE.sub(" ", strip_unsafe(_BREAKS.sub(" ", text))).strip()
    return line if limit is None or len(line) <= limit else line[:limit - 1] + "…"


#: The longest review body taken, in characters, markup included. A real review is a few
#: thousand and a feed may hold megabytes: past this a body is cut, and the cut said.
MAX_BODY_CHARS = 20_000


@dataclass(frozen=True)
class CleanBody:
    """A sanitized body, and what had to be done to it beyond the allowlist."""

    html: str
    #: The body's length before it was cut to :data:`MAX_BODY_CHARS`; 0 when it was not.
    shortened_from: int = 0
    #: Whether elements nested too deep were unwrapped (their text kept).
    flattened: bool = False


def clean_html(fragment: str) -> str:
    """Sanitize ``fragment`` to the allowlist and turn ``backticks`` into ``<code>``."""
    return clean_body(fragment, limit=None).html


def clean_body(fragment: str, limit: int | None = MAX_BODY_CHARS) -> CleanBody:
    """:func:`clean_html` of a review's body, cut to ``limit`` characters first (None: never),
    saying what was cut or flattened so the proof report can."""
    raw = strip_unsafe(fragment[:limit])
    bounded = _bound_raw_nesting(raw, _RAW_NESTING)
    # Again after nh3: it decodes character references (``&#1;``, ``&#x202E;``).
    sanitized = strip_unsafe(_CLEANER.clean(bounded))
    capped = cap_nesting(sanitized, MAX_NESTING)
    flattened = bounded is not raw or capped is not sanitized
    cleaned = _EMPTY_ANCHOR.sub(r"\1", capped)  # a link whose target was refused: keep the text
    shortened_from = len(fragment) if limit is not None and len(fragment) > limit else 0
    return CleanBody(code_spans(cleaned).strip(), shortened_from, flattened)


def _bound_raw_nesting(fragment: str, limit: int) -> str:
    """Drop the start tags of raw HTML that would open deeper than ``limit`` (and their end
    tags), erring deep; ``fragment`` itself (the same object) when nothing was dropped."""
    if fragment.count("<") <= limit:
        return fragment
    open_tags: list[str] = []
    open_count: Counter[str] = Counter()  # of open_tags, so that an end tag is no search
    dropped: Counter[str] = Counter()
    out: list[str] = []
    last = pos = 0
    while match := _RAW_TAG.search(fragment, pos):
        pos = match.end()
        closing, name = match[1], match[2].lower()
        if closing and dropped[name]:
            dropped[name] -= 1
        elif closing:
            if open_count[name]:  # close it, and whatever it left open
                top = ""
                while top != name:
                    top = open_tags.pop()
                    open_count[top] -= 1
            continue
        elif name in _VOID:
            continue
        elif len(open_tags) < limit:
            open_tags.append(name)
            open_count[name] += 1
            continue
        elif name in DROPPED_WITH_CONTENT:
            # Unwrapped, its content (a script's code) would show: drop it with the tag.
            out.append(fragment[last:match.start()])
            end = re.compile(f"</{re.escape(name)}", re.I).search(fragment, pos)
            close = fragment.find(">", end.end()) if end else -1
            last = pos = close + 1 if close >= 0 else len(fragment)
            continue
        else:
            dropped[name] += 1
        _unwrap(out, fragment[last:match.start()], name)
        last = pos
    if not last:  # nothing dropped
        return fragment
    out.append(fragment[last:])
    return "".join(out)


def _unwrap(out: list[str], text: str, name: str) -> None:
    """Append the text before a dropped tag, and a space for a block tag (one per run)."""
    if text:
        out.append(text)
    if name not in _INLINE and not (out and out[-1].endswith(" ")):
        out.append(" ")


def cap_nesting(fragment: str, limit: int = MAX_NESTING) -> str:
    """Sanitized HTML (every element closed and nested) with each element deeper than
    ``limit`` unwrapped: its text stays, a block's tags become a space."""
    depth = 0
    out: list[str] = []
    last = 0
    for match in _CLEAN_TAG.finditer(fragment):
        closing, name = match[1], match[2].lower()
        if name in _VOID:
            continue
        if closing:
            deep = depth > limit
            depth = max(depth - 1, 0)
        else:
            depth += 1
            deep = depth > limit
        if deep:
            _unwrap(out, fragment[last:match.start()], name)
            last = match.end()
    if not out:
        return fragment
    out.append(fragment[last:])
    return "".join(out)


def text_to_html(text: str) -> str:
    """Plain text (``type="text"``) → paragraphs; blank lines separate them."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    return "".join("<p>" + html.escape(p, quote=False).replace("\n", "<br>") + "</p>"
                   for p in paragraphs)


def plain_title(text: str) -> str:
    """A headline without markdown emphasis ("**Fix** x" → "Fix x"): a title is bold
    already. Backticks stay: they mark code (:func:`title_html`)."""
    return _BOLD.sub(r"\1", text)


def title_html(title: str) -> str:
    """A plain headline as HTML: escaped as the templates escape, its backticked code as
    ``<code>``."""
    return _BACKTICK.sub(r"<code>\1</code>", str(markupsafe.escape(title)))


def code_spans(fragment: str) -> str:
    """```x``` → ``<code>x</code>`` and ``**x**`` → ``<strong>x</strong>`` in text nodes
    only, never inside code, pre or a tag (nor inside a backticked span)."""
    out: list[str] = []
    depth = 0  # inside <code> or <pre>
    for part in _TAG_SPLIT.split(fragment):
        if part.startswith("<"):
            name = part[1:].lstrip("/").split()[0].rstrip(">").lower() if len(part) > 2 else ""
            if name in ("code", "pre"):
                depth += -1 if part.startswith("</") else 1
        elif depth <= 0:
            pieces = _BACKTICK.split(part)  # outside, code, outside, …
            part = "".join(_BOLD.sub(r"<strong>\1</strong>", piece) if i % 2 == 0
                           else f"<code>{piece}</code>" for i, piece in enumerate(pieces))
        out.append(part)
    return "".join(out)


def letter_counts(text: str) -> tuple[int, int]:
    """(Han characters, Latin letters) in ``text``: how Chinese or English a text reads."""
    return len(HAN.findall(text)), len(_LATIN.findall(text))


def detect_lang(text: str) -> Lang:
    """Chinese if Han characters make up a fifth of the letters, else English."""
    han, latin = letter_counts(text)
    return "zh" if han and han >= 0.2 * (han + latin) else "en"


def plain_line(text: str) -> str:
    """A headline as one safe line (it may reach ``Subject:``): tags dropped, entities
    decoded, no line break."""
    stripped = nh3.clean(_bound_raw_nesting(strip_unsafe(text), _RAW_NESTING), tags=set(),
                         clean_content_tags=set(DROPPED_WITH_CONTENT))
    return one_line(html.unescape(stripped))


class _TextWriter(HTMLParser):
    """Walks sanitized HTML and writes readable plain text for the text/plain part."""

    _BLOCKS = frozenset({"p", "ul", "ol", "pre", "blockquote", "li"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[str, bool]] = []  # (text, is a list item)
        self.in_li = False
        self.current: list[str] = []
        self.links: list[tuple[str | None, list[str]]] = []  # (href, text so far)
        self.ordinal: list[int] = []  # per open list: the last number, or -1 in a <ul>
        self.pre = 0

    def _flush(self) -> None:
        text = "".join(self.current)
        text = text.rstrip() if self.pre else _SPACE.sub(" ", text).strip()
        if text:
            self.blocks.append((text, self.in_li))
        self.current = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._BLOCKS:
            self._flush()
            self.in_li = tag == "li"
        if tag == "pre":
            self.pre += 1
        elif tag == "code" and not self.pre:
            self.current.append("`")
        elif tag == "br":
            self.current.append("\n" if self.pre else " ")
        elif tag in ("ol", "ul"):
            self.ordinal.append(0 if tag == "ol" else -1)
        elif tag == "li":
            if self.ordinal and self.ordinal[-1] >= 0:
                self.ordinal[-1] += 1
                self.current.append(f"{self.ordinal[-1]}. ")
            else:
                self.current.append("- ")
        elif tag == "a":
            self.links.append((dict(attrs).get("href"), []))

    def handle_endtag(self, tag: str) -> None:
        if tag == "code" and not self.pre:
            self.current.append("`")
        elif tag == "a" and self.links:
            href, label = self.links.pop()
            if href and href != "".join(label).strip():
                self.current.append(f" ({href})")
        if tag in self._BLOCKS:
            self._flush()
            self.in_li = False
        if tag == "pre":
            self.pre = max(0, self.pre - 1)
        if tag in ("ol", "ul") and self.ordinal:
            self.ordinal.pop()

    def handle_data(self, data: str) -> None:
        self.current.append(data)
        for _, label in self.links:
            label.append(data)


def html_to_text(fragment: str) -> str:
    """Sanitized HTML → plain text: blocks separated by blank lines (list items by a line
    break), code in backticks."""
    writer = _TextWriter()
    writer.feed(fragment)
    writer.close()
    writer._flush()
    blocks = writer.blocks
    out = [blocks[0][0]] if blocks else []
    for (_, after_li), (text, is_li) in pairwise(blocks):
        out += ["\n" if is_li and after_li else "\n\n", text]
    return "".join(out)
