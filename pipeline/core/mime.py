"""MIME encodings for what leaves as mail: a body's transfer encoding and an RFC 2047 subject.

Pure: text in, ASCII bytes or str out. Shared by the issue's messages (``message.py``), the
size budget (``render.py`` weighs a part as sent) and the opt-in mails (``optin_mail.py``).

*Transfer encoding.* A part goes out as whichever of quoted-printable and base64 is smaller
for that text: English HTML is ~1.02× its size in quoted-printable against 1.37× in base64,
while text that is mostly Chinese (three UTF-8 bytes a character, each ``=XX`` in
quoted-printable: ×3) is smaller in base64. The choice depends only on the text, so identical
input gives identical bytes. Quoted-printable also keeps an ``.eml`` readable: its links can
be followed from the file.

*Subjects.* The stdlib's ``Header`` writes 76-character encoded words for Chinese; RFC 2047
allows 75, and 76 for a whole line that carries one. :func:`encode_subject` writes
``=?utf-8?b?…?=`` words of at most 75 characters, lines of at most 76, never splitting a
character's UTF-8 bytes across two words.
"""

from __future__ import annotations

import base64
import binascii

QUOTED_PRINTABLE = "quoted-printable"
BASE64 = "base64"

#: RFC 2047 §2: an encoded word is at most 75 characters; a line holding one at most 76.
ENCODED_WORD_MAX = 75
ENCODED_LINE_MAX = 76
_PREFIX, _SUFFIX = "=?utf-8?b?", "?="


def encode_body(text: str, encoding: str) -> bytes:
    """``text`` as the lines of a part body in ``encoding``, CRLF line ends, ASCII only."""
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


def choose_encoding(text: str) -> str:
    """The smaller of quoted-printable and base64 for ``text`` (quoted-printable on a tie:
    it stays readable)."""
    return _sizes(text)[1]


def sent_size(text: str) -> int:
    """The bytes ``text`` weighs as a part body, in the encoding :func:`choose_encoding` picks."""
    return _sizes(text)[0]


def _sizes(text: str) -> tuple[int, str]:
    """(size, encoding) of the smaller encoding of ``text``."""
    return min((len(encode_body(text, QUOTED_PRINTABLE)), QUOTED_PRINTABLE),
               (len(encode_body(text, BASE64)), BASE64),
               key=lambda pair: (pair[0], pair[1] != QUOTED_PRINTABLE))


def encode_subject(text: str, header_name: str = "Subject") -> str:
    """``text`` as RFC 2047 encoded words, folded: the value after ``Subject: ``.

    ASCII text is returned as it is (the caller folds it). Every space lives inside an
    encoded word, since a decoder drops the whitespace between two of them.
    """
    if text.isascii():
        return text
    words: list[str] = []
    room = ENCODED_LINE_MAX - len(header_name) - 2  # "Subject: " on the first line
    chunk = ""
    for char in text:
        candidate = chunk + char
        if len(_word(candidate)) > min(room, ENCODED_WORD_MAX) and chunk:
            words.append(_word(chunk))
            room = ENCODED_LINE_MAX - 1  # a continuation line starts with one space
            chunk = char
        else:
            chunk = candidate
    words.append(_word(chunk))
    return "\r\n ".join(words)


def _word(chunk: str) -> str:
    return _PREFIX + base64.b64encode(chunk.encode("utf-8")).decode("ascii") + _SUFFIX
