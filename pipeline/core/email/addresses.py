"""An address as the wire may carry it: envelope (SMTP, SES) and the ``To`` header.

The domain always travels in IDNA form; a non-ASCII local part has no ASCII form, so only a
server offering SMTPUTF8 may be given it, and anyone else refuses that recipient, by name,
before any call. Never an RFC 2047 encoded word inside an address.
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
    """The wire forms of ``address``; :class:`UnsendableAddress` if it has none."""
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
    """The ``To`` header for one recipient, its domain in IDNA form; UTF-8 only for a local
    part that is not ASCII, which only an SMTPUTF8 server is given (RFC 6532 3.2)."""
    try:
        shown = wire_address(address).idna
    except UnsendableAddress:
        shown = address  # refused by the transport, by name; the header is never used
    if any(c in shown for c in "\r\n"):
        raise ValueError("header To may not contain a line break")
    return f"To: {shown}\r\n".encode()


def redact_address(text: str, address: str) -> str:
    """``text`` (a server's reply) without ``address``, in either form a server may quote:
    no subscriber's address belongs in what is shown, logged or kept."""
    forms = {address}
    with contextlib.suppress(UnsendableAddress):
        forms.add(wire_address(address).idna)
    for form in filter(None, forms):
        text = re.sub(re.escape(form), "<recipient>", text, flags=re.IGNORECASE)
    return text
