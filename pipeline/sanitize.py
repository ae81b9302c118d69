"""Feed HTML → the small, safe HTML an email and a web page can show, and its plain text.

Nothing from a feed reaches an output without passing :func:`clean_html` (or being escaped by
the templates). feedparser sanitizes too, but that is its policy, not ours: ours is a short
allowlist (paragraphs, lists, emphasis, code, http(s) links) enforced by nh3, so a change of
parser cannot widen it.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import nh3

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

#: Han characters (CJK unified ideographs, extension A, compatibility ideographs).
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")
_TAG_SPLIT = re.compile(r"(<[^>]*>)")
_BACKTICK = re.compile(r"`([^`\n]+?)`")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u2028\u2029]")
_SPACE = re.compile(r"\s+")
_EMPTY_ANCHOR = re.compile(r"<a rel=\"noopener noreferrer\">(.*?)</a>", re.S)


def clean_html(fragment: str) -> str:
    """Sanitize ``fragment`` to the allowlist and turn ``backticks`` into ``<code>``."""
    cleaned = _CLEANER.clean(_CONTROL.sub("", fragment))
    cleaned = _EMPTY_ANCHOR.sub(r"\1", cleaned)  # a link whose target was refused: keep the text
    return code_spans(cleaned).strip()


def text_to_html(text: str) -> str:
    """Plain text (``type="text"``) → paragraphs; blank lines separate them."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    return "".join(
        "<p>" + html.escape(p, quote=False).replace("\n", "<br>") + "</p>" for p in paragraphs
    )


def code_spans(fragment: str) -> str:
    """```x``` → ``<code>x</code>`` in text nodes only, never inside code, pre or a tag."""
    out: list[str] = []
    depth = 0  # inside <code> or <pre>
    for part in _TAG_SPLIT.split(fragment):
        if part.startswith("<"):
            name = part[1:].lstrip("/").split()[0].rstrip(">").lower() if len(part) > 2 else ""
            if name in ("code", "pre"):
                depth += -1 if part.startswith("</") else 1
            out.append(part)
        elif depth > 0:
            out.append(part)
        else:
            out.append(_BACKTICK.sub(r"<code>\1</code>", part))
    return "".join(out)


def letter_counts(text: str) -> tuple[int, int]:
    """(Han characters, Latin letters) in ``text``: how Chinese or English a text reads."""
    return len(HAN.findall(text)), len(_LATIN.findall(text))


def plain_line(text: str) -> str:
    """A headline as one safe line of text: tags dropped, entities decoded, no CR/LF.

    Titles end up in a ``Subject:`` header, so no line break may survive.
    """
    stripped = nh3.clean(text, tags=set(), clean_content_tags=set(DROPPED_WITH_CONTENT))
    return _SPACE.sub(" ", _CONTROL.sub(" ", html.unescape(stripped))).strip()


class _TextWriter(HTMLParser):
    """Walks sanitized HTML and writes readable plain text for the text/plain part."""

    _BLOCKS = frozenset({"p", "ul", "ol", "pre", "blockquote"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[str, bool]] = []  # (text, is a list item)
        self.in_li = False
        self.current: list[str] = []
        self.href: list[str | None] = []
        self.link_text: list[list[str]] = []
        self.ordinal: list[int] = []
        self.pre = 0

    def _flush(self) -> None:
        text = "".join(self.current)
        text = text if self.pre else _SPACE.sub(" ", text)
        if text.strip():
            self.blocks.append((text.strip() if not self.pre else text.rstrip(), self.in_li))
        self.current = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._BLOCKS or tag == "li":
            self._flush()
            self.in_li = tag == "li"
        if tag == "pre":
            self.pre += 1
        elif tag == "code" and not self.pre:
            self.current.append("`")
        elif tag == "br":
            self.current.append("\n" if self.pre else " ")
        elif tag == "ol":
            self.ordinal.append(0)
        elif tag == "ul":
            self.ordinal.append(-1)
        elif tag == "li":
            if self.ordinal and self.ordinal[-1] >= 0:
                self.ordinal[-1] += 1
                self.current.append(f"{self.ordinal[-1]}. ")
            else:
                self.current.append("- ")
        elif tag == "a":
            self.href.append(dict(attrs).get("href"))
            self.link_text.append([])

    def handle_endtag(self, tag: str) -> None:
        if tag == "code" and not self.pre:
            self.current.append("`")
        elif tag == "a" and self.href:
            href, label = self.href.pop(), "".join(self.link_text.pop()).strip()
            if href and href != label:
                self.current.append(f" ({href})")
        if tag in self._BLOCKS or tag == "li":
            self._flush()
            self.in_li = False
        if tag == "pre":
            self.pre = max(0, self.pre - 1)
        if tag in ("ol", "ul") and self.ordinal:
            self.ordinal.pop()

    def handle_data(self, data: str) -> None:
        self.current.append(data)
        for label in self.link_text:
            label.append(data)


def html_to_text(fragment: str) -> str:
    """Sanitized HTML → plain text: blocks separated by blank lines, code in backticks."""
    writer = _TextWriter()
    writer.feed(fragment)
    writer.close()
    writer._flush()
    out: list[str] = []
    for index, (text, is_li) in enumerate(writer.blocks):
        if index:
            out.append("\n" if is_li and writer.blocks[index - 1][1] else "\n\n")
        out.append(text)
    return "".join(out)
