"""A part body encoded once, each recipient's links spliced into the encoded bytes.

Every recipient of a layout gets the same part but for its links, so encoding the whole part
per recipient (``mime.encode_body``, ~70 % of a message's build time) redoes the same work.
:class:`SplicedBody` gives exactly the bytes ``encode_body`` gives for the body with its
placeholders replaced (in order, as ``str.replace`` one after the other would), while encoding
per recipient only a few lines around each link:

*base64* encodes 57 input bytes per 76-character line, each line on its own. Where each link
falls depends only on the links' lengths, so per tuple of lengths a plan is made once: the
lines that hold no link byte are encoded once, and per recipient only the lines a link
touches are encoded.

*quoted-printable* (``binascii.b2a_qp``) carries one thing from one byte to the next: the
column of the output line (where a soft line break goes). What a byte becomes also depends on
whether the byte after it is a line end, a NUL or the end of the data, and a line end rewrites
a space or tab just before it. So the body is cut right before each link and after it at the
first byte that is none of those (the link plus that short tail is encoded per recipient),
and each piece between links is encoded once per starting column (one column in practice:
links of one issue all have the same shape), starting from that column by encoding it behind
as many ``x`` and in front of one ``x`` standing for the link that follows.

*8bit* is the body as it is, folded once (``eightbit.py``) with each placeholder counted at
the reserved length of a link, so its lines stay within 998 octets whatever link of at most
that length replaces it; per recipient the links are put in place in the folded bytes. The
fold points are the ones the budget's weighing of the body with reserved links chose, so
what is sent weighs at most what was weighed. A link longer than the reserve folds the
filled body afresh.

When a link could change the result in a way a piece cannot see (a line break in a link,
a link that could form a placeholder with the text around it, a ``\\r`` in the body, which
``b2a_qp`` reads as a hint of the line ends to use), the whole body is encoded the ordinary
way: slower, never different.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pipeline.core.email.eightbit import eight_bit_body
from pipeline.core.email.mime import BASE64, EIGHT_BIT, QUOTED_PRINTABLE, encode_body

#: Bytes of input per base64 line (76 characters out).
_B64_LINE = 57
#: Next bytes that change how b2a_qp writes the byte before them (its one-byte lookahead).
_LOOKAHEAD = b"\n\r\x00"
#: Plans kept per body (one per tuple of link lengths; an issue's links have one length).
_MAX_PLANS = 8
_FIRST_MARKER = 0xE000  # private-use code points stand for the placeholders while splitting


@dataclass(frozen=True)
class _Window:
    """Input lines (base64) that hold link bytes: static bytes and link indexes, in order."""

    parts: tuple[bytes | int, ...]


class SplicedBody:
    """``encode_body(filled(body, links), encoding)``, computed mostly once."""

    def __init__(self, body: str, encoding: str, placeholders: Sequence[str], *,
                 html: bool = False, reserve: int = 0) -> None:
        if encoding not in (BASE64, QUOTED_PRINTABLE, EIGHT_BIT):
            raise ValueError(f"unknown transfer encoding {encoding!r}")
        self.body = body
        self.encoding = encoding
        self.placeholders = tuple(placeholders)
        self.html = html
        self.reserve = reserve
        self._eight: bytes | None = None
        if encoding == EIGHT_BIT:
            self._eight = eight_bit_body(body, html=html, grow={
                placeholder: reserve - len(placeholder.encode("utf-8"))
                for placeholder in self.placeholders})
            if self._eight is None:
                raise ValueError("the part cannot be sent as 8bit data")
        split = _split(body, self.placeholders)
        self._statics, self._slots = split or ([], [])
        self._plans: dict[tuple[int, ...], list[bytes | _Window]] = {}
        self._pieces: dict[tuple[int, int], tuple[bytes, int]] = {}
        # b2a_qp picks CRLF output when the first line ends in "\r\n": keep it out of pieces.
        self._spliceable = split is not None and not (
            encoding == QUOTED_PRINTABLE and any(b"\r" in s for s in self._statics))

    def encode(self, links: Sequence[str]) -> bytes:
        """The encoded body with ``links[i]`` in place of ``placeholders[i]``."""
        if self._eight is not None:
            return self._eight_bit(links)
        if not self._spliceable or not self._safe(links):
            return encode_body(self.reference_fill(links), self.encoding)
        data = [link.encode("utf-8") for link in links]
        if self.encoding == BASE64:
            return self._base64(data)
        return self._quoted_printable(data)

    def reference_fill(self, links: Sequence[str]) -> str:
        """The body with its placeholders replaced one after the other (the reference)."""
        body = self.body
        for placeholder, link in zip(self.placeholders, links, strict=True):
            body = body.replace(placeholder, link)
        return body

    def _safe(self, links: Sequence[str]) -> bool:
        """Whether filling in ``links`` piece by piece gives what filling the whole would:
        no link may be empty, hold a line break or a NUL, or share an occurrence with a
        placeholder replaced after it (one that would, holds the placeholder's first or
        last character, or lies inside it)."""
        if len(links) != len(self.placeholders):
            raise ValueError(f"expected {len(self.placeholders)} links, got {len(links)}")
        for index, link in enumerate(links):
            if not link or "\r" in link or "\n" in link or "\x00" in link:
                return False
            for later in self.placeholders[index + 1:]:
                if later[0] in link or later[-1] in link or link in later:
                    return False
        return True

    # -- 8bit ----------------------------------------------------------------------------------

    def _eight_bit(self, links: Sequence[str]) -> bytes:
        """The folded body with the links put in, one placeholder after the other as
        :meth:`reference_fill` does. No fold point lies in or next to a placeholder (they
        hold no space), so this is the filled body with the same folds; only a link too long
        for the room made, or holding a line break or NUL, folds the filled body afresh."""
        if len(links) != len(self.placeholders):
            raise ValueError(f"expected {len(self.placeholders)} links, got {len(links)}")
        data = [link.encode("utf-8") for link in links]
        if any(len(link) > self.reserve or b"\r" in link or b"\n" in link or b"\x00" in link
               for link in data):
            return encode_body(self.reference_fill(links), EIGHT_BIT, html=self.html)
        body = self._eight or b""
        for placeholder, link in zip(self.placeholders, data, strict=True):
            body = body.replace(placeholder.encode("utf-8"), link)
        return body

    # -- base64 --------------------------------------------------------------------------------

    def _base64(self, links: list[bytes]) -> bytes:
        lengths = tuple(len(link) for link in links)
        plan = self._plans.get(lengths)
        if plan is None:
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            plan = self._plans[lengths] = self._base64_plan(lengths)
        out: list[bytes] = []
        for step in plan:
            if isinstance(step, bytes):
                out.append(step)
            else:
                raw = b"".join(p if isinstance(p, bytes) else links[p] for p in step.parts)
                out.append(base64.encodebytes(raw).replace(b"\n", b"\r\n"))
        return b"".join(out)

    def _base64_plan(self, lengths: tuple[int, ...]) -> list[bytes | _Window]:
        """Encoded static lines and the windows of lines that hold link bytes."""
        layout: list[tuple[int, bytes | int]] = []  # (start, static bytes or link index)
        position = 0
        for index, static in enumerate(self._statics):
            layout.append((position, static))
            position += len(static)
            if index < len(self._slots):
                slot = self._slots[index]
                layout.append((position, slot))
                position += lengths[slot]
        total = position
        windows = _merged(
            ((start // _B64_LINE) * _B64_LINE,
             min(-(-(start + lengths[item]) // _B64_LINE) * _B64_LINE, total))
            for start, item in layout if isinstance(item, int))
        dummy = b"".join(item if isinstance(item, bytes) else b"\x00" * lengths[item]
                         for _, item in layout)
        plan: list[bytes | _Window] = []
        done = 0
        for start, end in [*windows, (total, total)]:
            if start > done:
                plan.append(base64.encodebytes(dummy[done:start]).replace(b"\n", b"\r\n"))
            if end > start:
                plan.append(_Window(_parts(layout, lengths, start, end)))
            done = end
        return plan

    # -- quoted-printable ----------------------------------------------------------------------

    def _quoted_printable(self, links: list[bytes]) -> bytes:
        statics, slots = self._statics, self._slots
        out: list[bytes] = []
        column = 0
        for index, static in enumerate(statics):
            # The static piece (less the tail a link before it took), then the next link.
            start = _tail_end(static) if index else 0
            piece = static[start:]
            last = index == len(statics) - 1
            if piece:
                key = (index, column)
                cached = self._pieces.get(key)
                if cached is None:
                    cached = self._pieces[key] = _qp_from(piece, column, last=last)
                encoded, column = cached
                out.append(encoded)
            if not last:
                following = statics[index + 1]
                tail = following[:_tail_end(following)]
                at_end = index + 1 == len(statics) - 1 and len(tail) == len(following)
                encoded, column = _qp_from(links[slots[index]] + tail, column, last=at_end)
                out.append(encoded)
        if out and not out[-1].endswith(b"\n"):
            out.append(b"\r\n")
        return b"".join(out)


def _split(body: str, placeholders: tuple[str, ...]) -> tuple[list[bytes], list[int]] | None:
    """The body's static byte runs and, between them, which link goes there; None when the
    body holds a character that stands in for a placeholder here."""
    markers = [chr(_FIRST_MARKER + i) for i in range(len(placeholders))]
    if any(m in body for m in markers):
        return None
    marked = body
    for placeholder, marker in zip(placeholders, markers, strict=True):
        marked = marked.replace(placeholder, marker)
    # encode_body turns CRLF into LF; no link holds either, so it can be done beforehand.
    text = marked.replace("\r\n", "\n")
    pieces = re.split(f"([{''.join(markers)}])", text) if markers else [text]
    statics = [s.encode("utf-8") for s in pieces[0::2]]
    slots = [ord(m) - _FIRST_MARKER for m in pieces[1::2]]
    return statics, slots


def _merged(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching ranges, in order, joined."""
    merged: list[tuple[int, int]] = []
    for start, end in ranges:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _parts(layout: list[tuple[int, bytes | int]], lengths: tuple[int, ...],
           start: int, end: int) -> tuple[bytes | int, ...]:
    """What fills input bytes ``start:end``: static slices and link indexes."""
    parts: list[bytes | int] = []
    for position, item in layout:
        size = len(item) if isinstance(item, bytes) else lengths[item]
        if position + size <= start or position >= end:
            continue
        if isinstance(item, int):
            parts.append(item)  # windows always hold whole links
        else:
            parts.append(item[max(start - position, 0):end - position])
    return tuple(parts)


def _tail_end(static: bytes) -> int:
    """How many leading bytes of the piece after a link go with the link: up to the first
    byte after which b2a_qp's output of what precedes it no longer depends on it."""
    index = 0
    while index < len(static) and static[index] in _LOOKAHEAD:
        index += 1
    return index


def _qp_from(data: bytes, column: int, *, last: bool) -> tuple[bytes, int]:
    """``data`` quoted-printable as it comes out when it starts at output ``column`` and is
    followed by a byte that is no line end (or by nothing when ``last``): CRLF line ends,
    and the output column after it.

    ``column`` literal ``x`` before it put the encoder at that column (at most 75 at a cut,
    so none of them wraps); one ``x`` after it is a literal at the very end, which b2a_qp
    never wraps, so exactly one byte to drop.
    """
    raw = binascii.b2a_qp(b"x" * column + data + (b"" if last else b"x"),
                          quotetabs=False, istext=True, header=False)
    encoded = raw[column:] if last else raw[column:-1]
    newline = encoded.rfind(b"\n")
    after = column + len(encoded) if newline < 0 else len(encoded) - newline - 1
    return encoded.replace(b"\n", b"\r\n"), after
