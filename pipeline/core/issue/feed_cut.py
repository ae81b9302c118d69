"""A feed's oversized entry texts, cut before feedparser reads them.

feedparser handles an entry's HTML itself (its sanitizer, its resolver of relative links,
its loose parser) at about two microseconds a character: a 3 MB review body took seven
seconds before any of the project's own code saw it, and a feed may be 20 MB. So a document
long enough to hold such a text is first read by the stdlib's C parser (expat, as
feedparser's own strict parse is), and only when some entry text is longer than the limit is
the document written again with that text cut; every other feed reaches feedparser byte for
byte as it came. Reading it twice costs a millisecond for the sample feed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

__all__ = ["cut_long_texts"]

#: The elements that hold an entry's body: Atom's content and summary, RSS's description
#: and content:encoded.
_TEXTS = frozenset({"content", "summary", "description", "encoded"})
_ENTRIES = frozenset({"entry", "item"})


def cut_long_texts(data: bytes, limit: int) -> tuple[bytes, dict[str, int]]:
    """``data`` with every entry text over ``limit`` characters cut to ``limit``, and each
    cut entry's longest text before the cut, by the id feedparser gives the entry.

    ``data`` itself, and no cuts, when no text is that long, or when the document is not XML
    expat reads (feedparser then judges it, and reports what is wrong as before).
    """
    if len(data) <= limit:
        return data, {}
    try:
        root = ET.fromstring(data)  # noqa: S314 (expat refuses entity bombs, as for feedparser)
    except ET.ParseError:
        return data, {}
    cut: dict[str, int] = {}
    for entry in root.iter():
        if _local(entry.tag) not in _ENTRIES:
            continue
        for element in entry.iter():
            text = element.text
            if (_local(element.tag) in _TEXTS and len(element) == 0 and text is not None
                    and len(text) > limit):
                key = _entry_id(entry)
                cut[key] = max(cut.get(key, 0), len(text))
                element.text = text[:limit]
    if not cut:
        return data, {}
    return ET.tostring(root, encoding="utf-8", xml_declaration=True), cut


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _entry_id(entry: ET.Element) -> str:
    """The entry's id as ``collect`` takes it from feedparser: its id (RSS: guid), else its
    link, else its title."""
    found: dict[str, str] = {}
    for child in entry:
        name = _local(child.tag)
        if name in ("id", "guid") and child.text and child.text.strip():
            found.setdefault("id", child.text.strip())
        elif name == "link":
            href = child.get("href") if child.get("rel", "alternate") == "alternate" else None
            link = href or (child.text or "").strip()
            if link:
                found.setdefault("link", link)
        elif name == "title" and child.text:
            found.setdefault("title", child.text.strip())
    return found.get("id") or found.get("link") or found.get("title", "")
