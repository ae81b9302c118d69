"""An address as the wire may carry it: envelope (SMTP, SES) and the ``To`` header.

The list keeps each address as email-validator normalised it, which allows Unicode on both
sides of the ``@`` (RFC 6531/6532): ``reader@例子.中国``, ``用户@example.com``. The wire is
stricter:

* the **domain** always travels in its IDNA (punycode) form, ``reader@xn--fsqu00a.xn--fiqs8s``:
  every server and SES take that;
* a **non-ASCII local part** has no ASCII form at all. Only a server that offers SMTPUTF8 may
  be given it (with ``MAIL FROM:<…> SMTPUTF8``), and the ``To`` header then carries it as
  UTF-8; SES does not support SMTPUTF8 and neither does a server that does not offer it, so
  for them it is a permanent failure of that one recipient, named, before any call.

Never an RFC 2047 encoded word inside an address: ``=?utf-8?b?…?=@example.com`` is no
address, and the stdlib's SMTP policy writes exactly that for a non-ASCII local part.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from functools import lru_cache

from email_validator import EmailNotValidError, validate_email

__all__ = ["UnsendableAddress", "WireAddress", "redact_address", "to_header", "wire_address"]


@dataclass(frozen=True)
class WireAddress:
    """One address in the forms the wire needs."""

    #: The address as the list keeps it.
    address: str
    #: The address with its domain in IDNA form; it holds the non-ASCII local part, if any.
    idna: str
    #: True when the local part is not ASCII: only SMTPUTF8 can carry it.
    needs_smtputf8: bool


class UnsendableAddress(ValueError):
    """The address cannot be written on the wire at all (no valid IDNA form)."""


@lru_cache(maxsize=4096)
def wire_address(address: str) -> WireAddress:
    """The wire forms of ``address``; :class:`UnsendableAddress` if it has none.

    An ASCII address is returned as is, without a look at it (the common case, and the list
    validated it on the way in); any other goes through email-validator, which gives the
    IDNA 2008 form of the domain (the ``idna`` package, UTS 46) and says whether the local
    part needs SMTPUTF8.
    """
    if address.isascii():
        return WireAddress(address, address, False)
    try:
        valid = validate_email(address, check_deliverability=False)
    except EmailNotValidError as exc:
        raise UnsendableAddress(f"{address}: not an address that can be sent to ({exc})") \
            from exc
    return WireAddress(address, f"{valid.local_part}@{valid.ascii_domain}",
                       not valid.local_part.isascii())


def to_header(address: str) -> bytes:
    """The ``To`` header for one recipient: the address with an IDNA domain, written as is.

    ASCII unless the local part is not; then it is UTF-8, which only an SMTPUTF8 server is
    given (RFC 6532 3.2): the transports refuse the message for anyone else.
    """
    try:
        shown = wire_address(address).idna
    except UnsendableAddress:
        shown = address  # refused by the transport, by name; the header is never used
    if any(c in shown for c in "\r\n"):
        raise ValueError("header To may not contain a line break")
    return f"To: {shown}\r\n".encode()


def redact_address(text: str, address: str) -> str:
    """``text`` (a server's reply, an error) with ``address`` taken out, as the list keeps
    it and in the IDNA form a server may quote back: for what is shown, logged or kept in a
    report, where no subscriber's address belongs."""
    forms = {address}
    with contextlib.suppress(UnsendableAddress):
        forms.add(wire_address(address).idna)
    for form in filter(None, forms):
        text = re.sub(re.escape(form), "<recipient>", text, flags=re.IGNORECASE)
    return text
