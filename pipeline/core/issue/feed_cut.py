"""A feed's oversized entry texts, cut before feedparser reads them, without changing what
the feed means.

feedparser's time grows with every character of an entry and a feed may be 20 MB. So a long
document is first read as feedparser would read it, and only when an entry text is too long
is it handed over cut: each cut text kept up to the cut, its open elements closed. Any other
feed, or one the cut would leave unreadable, reaches feedparser byte for byte. A text is cut at
:data:`KEPT_FACTOR` times the body's limit, so what the sanitizer drops still leaves enough.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from xml.parsers import expat

from feedparser.encodings import convert_to_utf8  # type: ignore[import-untyped]
from feedparser.sanitizer import replace_doctype  # type: ignore[import-untyped]

__all__ = ["KEPT_FACTOR", "CutFeed", "cut_long_texts"]

#: A text is cut at this many times the body's limit (see the module).
KEPT_FACTOR = 2
#: The elements that hold an entry's body: Atom's content and summary, RSS's description
#: and content:encoded.
_TEXTS = frozenset({"content", "summary", "description", "encoded"})
_ENTRIES = frozenset({"entry", "item"})
_ID_FIELDS = frozenset({"id", "guid", "title", "link"})
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})


@dataclass(frozen=True)
class CutFeed:
    """A feed as feedparser is to read it."""

    data: bytes
    #: The HTTP Content-Type to read ``data`` with: None once it is transcoded to UTF-8.
    content_type: str | None
    #: Each cut entry's longest text before the cut, in characters, by the id feedparser
    #: gives the entry.
    cut: dict[str, int] = field(default_factory=dict)
    #: What feedparser said when it decided the encoding of a transcoded document.
    warning: str | None = None


def cut_long_texts(data: bytes, limit: int, content_type: str | None = None) -> CutFeed:
    """``data`` with every entry text over ``KEPT_FACTOR * limit`` characters cut there, read
    as feedparser reads ``data`` served with ``content_type`` (see the module)."""
    whole = CutFeed(data, content_type)
    kept = KEPT_FACTOR * limit
    if len(data) <= kept:  # no encoding has fewer bytes than characters
        return whole
    said: dict[str, object] = {}
    utf8 = convert_to_utf8({"content-type": content_type} if content_type else {}, data, said)
    if not said.get("encoding"):
        return whole  # no encoding fits: feedparser's loose parser reads it as it is
    _, read, _ = replace_doctype(utf8)
    try:
        scan = _Scan(read, kept)
    except expat.ExpatError:
        return whole
    if not scan.cuts:
        return whole
    shift = len(read) - len(utf8)  # only the doctype, before the root element, moved
    out, at = [], 0
    for start, end, replacement in scan.cuts:
        out += [utf8[at:start - shift], replacement]
        at = end - shift
    out.append(utf8[at:])
    cut = b"".join(out)
    try:  # markup from a doctype's entity may be cut apart: then read it whole
        expat.ParserCreate(None, " ").Parse(cut, True)
    except expat.ExpatError:
        return whole
    warning = said.get("bozo_exception") if said.get("bozo") else None
    return CutFeed(cut, None, scan.lengths, str(warning) if warning else None)


def _as_read(text: str) -> str:
    """``text`` as feedparser gives it: Latin-1 characters that are UTF-8 bytes read again as
    UTF-8, as it does to repair a wrong charset."""
    if text.isascii():
        return text
    try:
        again = text.encode("latin-1").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return text
    return text if "\ufffd" in again else again


@dataclass
class _Body:
    """An entry text being read: where it is, how long it is so far, and where it is cut."""

    depth: int
    length: int = 0
    #: Where the cut begins (a byte offset), and what replaces the rest of the text up to
    #: its end tag.
    cut_at: int | None = None
    tail: str = ""
    #: Whether feedparser reads the text as base64 (then cut as what it decodes to), and
    #: where the text begins and its pieces so far.
    base64: bool = False
    start: int | None = None
    pieces: list[str] = field(default_factory=list)


class _Scan:
    """expat over a UTF-8 document: the cuts to make, as (start, end, replacement) byte
    ranges in order, and each cut entry's longest text by entry id. It reads the document
    when made, and raises :class:`expat.ExpatError` if it is not well-formed."""

    def __init__(self, data: bytes, kept: int) -> None:
        self.kept = kept
        self.cuts: list[tuple[int, int, bytes]] = []
        self.lengths: dict[str, int] = {}
        self._stack: list[str] = []  # the qualified names of the open elements
        self._entry: int | None = None  # the depth of the entry being read
        self._fields: dict[str, str] = {}  # its id, link and title, as they come
        self._field: str | None = None
        self._text: list[str] = []
        self._pending: list[int] = []  # its texts' lengths, cut ones, until its id is known
        self._body: _Body | None = None
        self._cdata = False
        parser = self._parser = expat.ParserCreate(None, " ")  # namespaces, as feedparser's
        parser.namespace_prefixes = True
        parser.StartElementHandler = self._start
        parser.EndElementHandler = self._end
        parser.CharacterDataHandler = self._characters
        parser.StartCdataSectionHandler = self._cdata_start
        parser.EndCdataSectionHandler = self._cdata_end
        parser.Parse(data, True)

    def _at(self) -> int:
        return self._parser.CurrentByteIndex

    def _start(self, name: str, attributes: dict[str, str]) -> None:
        self._stack.append(_qualified(name))
        body = self._body
        if body is not None:
            if body.cut_at is None:  # feedparser decodes no markup
                body.base64 = False
            size = len(self._stack[-1]) + 2 + sum(
                len(_local(key)) + len(value) + 4 for key, value in attributes.items())
            if body.cut_at is None and body.length + size > self.kept:  # cut before it
                self._cut(body, "", self._stack[body.depth:-1])
            body.length += size
            return
        local, depth = _local(name), len(self._stack)
        if self._entry is None:
            if local in _ENTRIES:
                self._entry, self._fields, self._pending = depth, {}, []
        elif local in _TEXTS:
            self._body = _Body(depth, base64=_base64(attributes))
        elif depth == self._entry + 1 and local in _ID_FIELDS:
            self._field, self._text = local, []
            if local == "link" and attributes.get("rel", "alternate") == "alternate":
                self._fields.setdefault("href", attributes.get("href", ""))

    def _end(self, _name: str) -> None:
        name = self._stack.pop()
        depth = len(self._stack)
        body = self._body
        if body is not None:
            if depth >= body.depth:
                body.length += len(name) + 3
                return
            self._body = None
            self._parser.buffer_text = False
            if body.cut_at is not None:
                if body.base64:  # counted as what it decodes to, from its start
                    text = "".join(body.pieces)
                    body.length = len(_from_base64(text) or _as_read(text))
                self.cuts.append((body.cut_at, self._at(), body.tail.encode("utf-8")))
                self._pending.append(body.length)
        elif self._field is not None and depth == self._entry:
            self._fields.setdefault(self._field, "".join(self._text).strip())
            self._field = None
        elif depth + 1 == self._entry:
            if self._pending:
                key = _entry_id(self._fields)
                self.lengths[key] = max(self.lengths.get(key, 0), *self._pending)
            self._entry = None

    def _characters(self, text: str) -> None:
        body = self._body
        if body is None:
            if self._field is not None:
                self._text.append(text)
            return
        size = len(_as_read(text))
        kept = self.kept
        if body.base64:  # room for ``kept`` characters of what it decodes to
            body.start = self._at() if body.start is None else body.start
            body.pieces.append(text)
            kept = self.kept * 16 // 3
        if body.cut_at is None and body.length + size > kept:
            self._cut(body, _prefix(text, kept - body.length), self._stack[body.depth:])
        body.length += size

    def _cut(self, body: _Body, kept: str, open_: list[str]) -> None:
        """Cut ``body`` here: ``kept``, the start of the characters that begin here, then the
        end tags of ``open_``, the elements open inside the body."""
        if body.base64 and body.start is not None:  # what feedparser decodes, from its start
            text = "".join(body.pieces[:-1]) + kept
            body.tail = _base64_prefix(text, self.kept) or text[:self.kept].translate(_ESCAPES)
            body.cut_at = body.start
        else:
            text = kept + "]]>" if self._cdata else kept.translate(_ESCAPES)
            body.cut_at = self._at()
            body.tail = text + "".join(f"</{name}>" for name in reversed(open_))
        # Past the cut only the length counts: expat may hand the characters over in bulk.
        self._parser.buffer_text = True

    def _cdata_start(self) -> None:
        self._cdata = True
        if self._body is not None and self._body.base64 and self._body.start is None:
            self._body.start = self._at()

    def _cdata_end(self) -> None:
        self._cdata = False


def _base64(attributes: dict[str, str]) -> bool:
    """Whether feedparser decodes an entry text with these attributes as base64: Atom 0.3's
    ``mode="base64"``, or a type that is neither text nor XML."""
    kind = attributes.get("type", "text").lower()
    return attributes.get("mode") == "base64" or not (
        kind in ("text", "plain", "html", "xhtml") or kind.startswith("text/")
        or kind.endswith(("+xml", "/xml")))


def _from_base64(text: str) -> str | None:
    """What feedparser decodes a base64 text to; None when it cannot, and keeps the text."""
    try:
        return base64.decodebytes(text.strip().encode()).decode()
    except (ValueError, UnicodeDecodeError):
        return None


def _base64_prefix(text: str, chars: int) -> str | None:
    """The base64 of the first ``chars`` characters that the start of the base64 ``text``
    decodes to, whole characters only; None when it decodes to no UTF-8."""
    quanta = re.sub(r"[^A-Za-z0-9+/]", "", text)
    decoded = base64.b64decode(quanta[:len(quanta) // 4 * 4])
    for end in range(len(decoded), max(len(decoded) - 4, -1), -1):
        try:
            whole = decoded[:end].decode()
        except UnicodeDecodeError:
            continue
        return base64.b64encode(whole[:chars].encode()).decode("ascii")
    return None


def _prefix(text: str, room: int) -> str:
    """The start of ``text`` that feedparser reads as ``room`` characters."""
    read = _as_read(text)
    return text[:room] if read is text else read[:room].encode("utf-8").decode("latin-1")


def _qualified(name: str) -> str:
    """``uri local prefix`` (expat with namespaces and prefixes) → ``prefix:local``."""
    parts = name.split(" ")
    return f"{parts[2]}:{parts[1]}" if len(parts) == 3 else parts[-1]


def _local(name: str) -> str:
    return name.split(" ")[1] if " " in name else name


def _entry_id(fields: dict[str, str]) -> str:
    """The entry's id as ``collect`` takes it from feedparser: its id (RSS: guid), else its
    alternate link, else its title."""
    return (fields.get("id") or fields.get("guid") or fields.get("href")
            or fields.get("link") or fields.get("title", ""))
