"""A long feed cut into documents of its own, each holding a run of its entries, so that
feedparser can read them on several cores.

feedparser spends about a third of a millisecond an entry in its own Python (0.13 s of a
200-review week), on one core. Its entries are independent of one another, so a feed whose
entries are siblings can be cut between two of them: each run is written with everything
before the first entry (the XML declaration, the doctype, the root and channel with their
attributes and namespaces, the feed's title and language) and the end tags of the elements
that hold the entries, and read as that feed would be.

Cut only where that is certain. The whole document is read first by expat (the parser under
feedparser's own): a document expat refuses, one whose entries are not all children of one
element, one with anything but entries after the first entry in that element (a channel's
``<language>`` written after its items would be missing from the first run), one in an
encoding other than an ASCII-compatible one (the end tags written here are ASCII), or one
with too few entries to share, is not cut, and ``collect`` reads it whole, as before.
"""

from __future__ import annotations

import bisect
import itertools
import re
from xml.parsers import expat

__all__ = ["split_entries"]

_ENTRIES = frozenset({"entry", "item"})
#: Encodings in which an ASCII end tag is those bytes (declared, or the HTTP charset).
_ASCII_COMPATIBLE = frozenset({"utf-8", "utf8", "us-ascii", "ascii", "iso-8859-1", "latin-1",
                               "latin1", "windows-1252", "cp1252"})
_DECLARED = re.compile(rb"""^(?:\xef\xbb\xbf)?<\?xml[^>]*?encoding\s*=\s*["']([^"']+)["']""")
_CHARSET = re.compile(r"charset\s*=\s*\"?([^\s;\"]+)", re.I)


def split_entries(data: bytes, parts: int, content_type: str | None = None
                  ) -> list[bytes] | None:
    """``data`` as up to ``parts`` documents of about the same size, each a run of its
    entries in order, or None when it is not to be cut (see the module)."""
    if parts < 2 or not _ascii_compatible(data, content_type):
        return None
    found = _entry_starts(data)
    if found is None or len(found[0]) < parts:
        return None
    starts, closing = found
    head, size = data[:starts[0]], len(data)
    cuts = [starts[i] for i in _run_starts(starts, size, parts)] + [size]
    return [head + data[begin:end] + (closing if end < size else b"")
            for begin, end in itertools.pairwise(cuts)]


def _ascii_compatible(data: bytes, content_type: str | None) -> bool:
    """Whether the end tags written here, in ASCII, are what the document's encoding (as
    declared, and as the HTTP charset says) would write."""
    if not data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
        return False  # UTF-16 or -32, or not markup at all
    declared = _DECLARED.match(data)
    charset = _CHARSET.search(content_type or "")
    names = ([declared.group(1).decode("ascii", "replace")] if declared else []) + (
        [charset.group(1)] if charset else [])
    return all(name.strip().lower() in _ASCII_COMPATIBLE for name in names)


def _entry_starts(data: bytes) -> tuple[list[int], bytes] | None:
    """The byte offset of every entry's start tag, and the end tags of the elements around
    them (innermost first); None when the entries cannot be cut apart safely."""
    parser = expat.ParserCreate()  # no namespace processing: the names as written
    stack: list[str] = []
    starts: list[int] = []
    holder: list[str] | None = None  # the path to the element that holds the entries
    closed = refused = False

    def start(name: str, _attributes: object) -> None:
        nonlocal holder, refused
        if closed:
            refused = True  # an element after the holder's end: only the last run has it
        elif holder is not None and len(stack) == len(holder):
            if stack != holder or name.rsplit(":", 1)[-1] not in _ENTRIES:
                refused = True  # a sibling that is no entry, or entries under another
                # element: this feed is read whole
            else:
                starts.append(parser.CurrentByteIndex)
        elif holder is None and name.rsplit(":", 1)[-1] in _ENTRIES and stack:
            holder = list(stack)
            starts.append(parser.CurrentByteIndex)
        stack.append(name)

    def end(_name: str) -> None:
        nonlocal closed
        if holder is not None and len(stack) == len(holder):
            closed = True  # the element holding the entries ends here
        stack.pop()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except expat.ExpatError:
        return None
    if refused or holder is None or not all(name.isascii() for name in holder):
        return None
    return starts, "".join(f"</{name}>" for name in reversed(holder)).encode("ascii")


def _run_starts(starts: list[int], size: int, parts: int) -> list[int]:
    """The index of the entry each run begins with: runs of about ``size / parts`` bytes,
    each holding at least one entry."""
    first = [0]
    for k in range(1, parts):
        target = starts[0] + (size - starts[0]) * k // parts
        at = bisect.bisect_left(starts, target)
        at = max(at, first[-1] + 1)
        if at >= len(starts):
            break
        first.append(at)
    return first
