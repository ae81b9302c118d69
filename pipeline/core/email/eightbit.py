"""A part body as 8bit data (RFC 6152): UTF-8 as it is, lines of at most 998 octets.

Why: base64 sends mostly-Chinese HTML at 1.37 times its size and Gmail clips near 102 KB; as
8bit data a 25-review zh-en week stays whole. mjml writes the cards as one huge line, so an
HTML part is *folded*: a space becomes a line break where HTML reads both alike (never inside
``<pre>``, ``<style>``, ``<script>``, ``<textarea>``, ``<title>``, a comment or a quoted value),
and a line with no such space is cut between two CJK ideographs inside a ``<wbr`` tag, where
a line may break anyway (UAX #14). A text/plain part is never folded; a body that cannot be
8bit data gives None, and the caller encodes it as quoted-printable or base64.
"""

from __future__ import annotations

import bisect
import re

#: RFC 5322 §2.1.1: a line is at most 998 octets before its CRLF.
MAX_LINE_OCTETS = 998

#: Between two CJK unified ideographs (U+4E00–U+9FFF: three UTF-8 bytes, E4–E9 first).
_BETWEEN_IDEOGRAPHS = re.compile(
    rb"(?<=[\xe4-\xe9][\x80-\xbf][\x80-\xbf])(?=[\xe4-\xe9][\x80-\xbf][\x80-\xbf])")
#: What a cut between two ideographs puts in: the line break inside a ``<wbr>`` tag.
_WBR_OPEN, _WBR_CLOSE = b"<wbr", b">"


def fold_html(data: bytes) -> bytes | None:
    """``data`` (HTML, LF line ends) with every line at most :data:`MAX_LINE_OCTETS`; None
    when a line cannot be cut."""
    out: list[bytes] = []
    done = 0  # how much of ``data`` is in ``out``
    places: _Places | None = None
    line_start = 0
    for line_end in [*(m.start() for m in re.finditer(rb"\n", data)), len(data)]:
        start, lead = line_start, 0  # lead: the ">" a <wbr> cut puts at the line's start
        while lead + line_end - start > MAX_LINE_OCTETS:
            places = places or _Places(data)
            limit = start + MAX_LINE_OCTETS - lead
            space = places.last_space(start, limit)
            if space is not None:  # the space becomes the line break
                out += [data[done:space], b"\n"]
                done = start = space + 1
                lead = 0
                continue
            join = places.last_join(start, limit - len(_WBR_OPEN))
            if join is None:
                return None
            out += [data[done:join], _WBR_OPEN, b"\n", _WBR_CLOSE]
            done = start = join
            lead = len(_WBR_CLOSE)
        line_start = line_end + 1
    out.append(data[done:])
    return b"".join(out)


_ELEMENT = re.compile(rb"<(pre|textarea|style|script|title)\b[^>]*>.*?(?:</\1\s*>|\Z)",
                      re.S | re.I)
_COMMENT = re.compile(rb"<!--.*?(?:-->|\Z)|<[!?][^>]*>?", re.S)


class _Places:
    """Where a fold may go, decided at one offset by looking back from a line's end,
    rather than walking the whole part (the budget weighs every rendering)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.kept = _spans(_ELEMENT, data)
        self.comments = _spans(_COMMENT, data)

    def _tag(self, at: int) -> int | None:
        """Where the start tag holding ``at`` begins (outside its quotes), else None; -1
        when ``at`` is in text."""
        data = self.data
        opened, closed = data.rfind(b"<", 0, at), data.rfind(b">", 0, at)
        if opened <= closed:
            return -1
        if not data[opened + 1:opened + 2].isalpha() or at <= opened + 1:
            return None  # an end tag, or no tag at all
        inside = data[opened:at]
        if inside.count(b'"') % 2 or inside.count(b"'") % 2:
            return None  # inside a quoted value
        return opened

    def allowed(self, at: int, *, in_tag_ok: bool) -> bool:
        tag = self._tag(at)
        if tag is None or _inside(self.comments, at):
            return False
        return in_tag_ok if tag >= 0 else not _inside(self.kept, at)

    def last_space(self, start: int, limit: int) -> int | None:
        """The last fold point in ``(start, limit]``."""
        at = self.data.rfind(b" ", start + 1, limit + 1)
        while at > start:
            if self.allowed(at, in_tag_ok=True):
                return at
            at = self.data.rfind(b" ", start + 1, at)
        return None

    def last_join(self, start: int, limit: int) -> int | None:
        """The last ideograph boundary in text in ``(start, limit]``."""
        low = max(start - 2, 0)
        found = [low + m.start() for m in
                 _BETWEEN_IDEOGRAPHS.finditer(self.data[low:limit + 3])]
        for at in reversed(found):
            if start < at <= limit and self.allowed(at, in_tag_ok=False):
                return at
        return None


def _spans(pattern: re.Pattern[bytes], data: bytes) -> tuple[list[int], list[int]]:
    found = [(m.start(), m.end()) for m in pattern.finditer(data)]
    return [a for a, _ in found], [b for _, b in found]


def _inside(spans: tuple[list[int], list[int]], at: int) -> bool:
    starts, ends = spans
    index = bisect.bisect_right(starts, at) - 1
    return index >= 0 and at < ends[index]


def eight_bit_body(text: str, *, html: bool) -> bytes | None:
    """``text`` as an 8bit part body (UTF-8, CRLF line ends, ending in one), HTML folded;
    None when it cannot be 8bit data (a NUL, a bare CR, a line that cannot be made short)."""
    data = text.replace("\r\n", "\n").encode("utf-8")
    if b"\x00" in data or b"\r" in data:
        return None
    body = fold_html(data) if html else data
    if body is None or any(len(line) > MAX_LINE_OCTETS for line in body.split(b"\n")):
        return None
    if body and not body.endswith(b"\n"):
        body += b"\n"
    return body.replace(b"\n", b"\r\n")
