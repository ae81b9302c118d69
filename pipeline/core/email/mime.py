"""MIME encodings for what leaves as mail: a body's transfer encoding and an RFC 2047 subject.

A part goes out in the smallest of quoted-printable, base64 and (where the transport carries
it) 8bit data; the choice depends only on the text, and a tie goes to quoted-printable, which
keeps an ``.eml``'s links readable.
"""

from __future__ import annotations

import base64
import binascii

from pipeline.core.email.eightbit import eight_bit_body

QUOTED_PRINTABLE = "quoted-printable"
BASE64 = "base64"
#: UTF-8 as it is, lines folded to 998 octets (``eightbit.py``): only where the transport
#: carries 8bit data (SMTP's 8BITMIME, SES), and only when the caller asks for it.
EIGHT_BIT = "8bit"

#: RFC 2047 §2: an encoded word is at most 75 characters; a line holding one at most 76.
ENCODED_WORD_MAX = 75
ENCODED_LINE_MAX = 76


def encode_body(text: str, encoding: str, *, html: bool = False) -> bytes:
    """``text`` as the lines of a part body in ``encoding``, CRLF line ends: ASCII only in
    quoted-printable and base64; in 8bit, UTF-8 with an HTML part folded (ValueError when
    ``text`` cannot be 8bit data)."""
    if encoding == EIGHT_BIT:
        body = eight_bit_body(text, html=html)
        if body is None:
            raise ValueError("the part cannot be sent as 8bit data")
        return body
    data = text.replace("\r\n", "\n").encode("utf-8")
    if encoding == QUOTED_PRINTABLE:
        # istext: "\n" stays a line break; trailing spaces and "=" are escaped, lines ≤ 76.
        encoded = binascii.b2a_qp(data, quotetabs=False, istext=True, header=False)
        if encoded and not encoded.endswith(b"\n"):
            encoded += b"\n"
    elif encoding == BASE64:
        encoded = base64.encodebytes(data)
    else:
        raise ValueError(f"unknown transfer encoding {encoding!r}")
    return encoded.replace(b"\n", b"\r\n")


def choose_encoding(text: str, *, eight_bit: bool = False, html: bool = False) -> str:
    """The smallest of quoted-printable and base64 for ``text`` (quoted-printable on a tie:
    it stays readable), and of 8bit too when ``eight_bit`` and the part can be 8bit data."""
    return _sizes(text, eight_bit, html)[1]


def sent_size(text: str, *, eight_bit: bool = False, html: bool = False) -> int:
    """The bytes ``text`` weighs as a part body, in the encoding :func:`choose_encoding` picks."""
    return _sizes(text, eight_bit, html)[0]


def _sizes(text: str, eight_bit: bool = False, html: bool = False) -> tuple[int, str]:
    """(size, encoding) of the smallest encoding of ``text``."""
    options = [(len(encode_body(text, QUOTED_PRINTABLE)), QUOTED_PRINTABLE),
               (len(encode_body(text, BASE64)), BASE64)]
    if eight_bit:
        body = eight_bit_body(text, html=html)
        if body is not None:
            options.append((len(body), EIGHT_BIT))
    return min(options, key=lambda pair: (pair[0], pair[1] != QUOTED_PRINTABLE))


def encode_subject(text: str, header_name: str = "Subject") -> str:
    """``text`` as RFC 2047 encoded words, folded: the value after ``Subject: ``.

    Every space lives inside an encoded word, since a decoder drops the white space between two."""
    if text.isascii():
        return text
    words: list[str] = []
    room = ENCODED_LINE_MAX - len(header_name) - 2  # "Subject: " on the first line
    chunk = ""
    for char in text:
        if chunk and len(_word(chunk + char)) > min(room, ENCODED_WORD_MAX):
            words.append(_word(chunk))
            room, chunk = ENCODED_LINE_MAX - 1, ""  # a continuation line starts with a space
        chunk += char
    words.append(_word(chunk))
    return "\r\n ".join(words)


def _word(chunk: str) -> str:
    return f"=?utf-8?b?{base64.b64encode(chunk.encode('utf-8')).decode('ascii')}?="
