"""Delivery status notifications (RFC 3464): what a mail server says, days later, about a
message it could not deliver. Pure; a mail that is no DSN gives None, never an error.

**Trust.** Anybody can write one and name anybody in ``Final-Recipient``, so its addresses
never find a subscriber: only the signed unsubscribe tokens of the *returned* message
(:attr:`Report.tokens`) say whose mail came back, once verified. Whoever holds such a token
can already unsubscribe its subscriber, so a forged DSN grants nothing new. Only ``failed``
recipients count; a 4.x.x status changes nothing.
"""

from __future__ import annotations

import contextlib
import email
import email.policy
import re
from dataclasses import dataclass, field
from email.message import Message
from email.parser import HeaderParser

from pipeline.core.mail_in.bounces import BounceKind, bounce_kind, enhanced_status

__all__ = ["Recipient", "Report", "is_report", "issue_of", "read_report"]

#: Only the first this many bytes of a part are read: a returned message can be large.
_MAX_PART = 1_000_000


@dataclass(frozen=True)
class Recipient:
    """One per-recipient block of a DSN; ``diagnostic`` may name the address: for deciding
    only, never for a report."""

    action: str
    status: str
    diagnostic: str = field(default="", repr=False)
    #: The mailbox that refused, lower case: only compared with the token's subscriber (one
    #: who forwards our mail to a dead mailbox has a live one of their own).
    final: str = field(default="", repr=False)

    @property
    def bounce(self) -> BounceKind | None:
        """What this recipient's failure says about the address, if anything."""
        if self.action != "failed":
            return None
        return bounce_kind(self.status or enhanced_status(self.diagnostic) or "",
                           self.diagnostic)


@dataclass(frozen=True)
class Report:
    """A DSN as read: its recipients, and the returned message's unsubscribe tokens
    (distinct, lower case) and ``Message-ID``."""

    recipients: tuple[Recipient, ...]
    tokens: tuple[str, ...] = field(default=(), repr=False)
    message_id: str | None = None

    @property
    def bounce(self) -> BounceKind | None:
        """The strongest verdict among the recipients."""
        kinds = {recipient.bounce for recipient in self.recipients}
        order: tuple[BounceKind, ...] = ("bounce-permanent", "bounce-transient")
        return next((kind for kind in order if kind in kinds), None)

    def refused(self, kind: BounceKind) -> tuple[str, ...]:
        return tuple(r.final for r in self.recipients if r.bounce == kind and r.final)

    @property
    def failed(self) -> bool:
        """Whether any recipient's ``Action`` is ``failed`` (whatever its status)."""
        return any(recipient.action == "failed" for recipient in self.recipients)


#: Our ``Message-ID`` (``Messages.build``): ``<2026-W48.<16 hex>@domain>``.
_OUR_MESSAGE_ID = re.compile(r"^<(\d{4}-W\d{2})\.[0-9a-f]{16}@[^>]+>$")


def issue_of(message_id: str | None) -> str | None:
    """The issue a ``Message-ID`` of ours names (``2026-W48``), else None."""
    found = _OUR_MESSAGE_ID.match(message_id or "")
    return found.group(1) if found else None


def is_report(message: Message) -> bool:
    """Whether ``message`` is a delivery status notification (RFC 3464's content type;
    RFC 6533's ``global-delivery-status`` too)."""
    try:
        return (message.get_content_type() == "multipart/report"
                and str(message.get_param("report-type", "")).strip().lower()
                in ("delivery-status", "global-delivery-status"))
    except Exception:  # a hostile Content-Type the parser trips over: not a report
        return False


def read_report(mail: bytes | Message) -> Report | None:
    """The DSN in ``mail``, or None when it is none. Never raises."""
    try:
        message = (email.message_from_bytes(mail, policy=email.policy.default)
                   if isinstance(mail, bytes) else mail)
        return _read(message) if is_report(message) else None
    except Exception:  # the email package can trip over hostile input: no DSN then
        return None


def _read(message: Message) -> Report:
    recipients: list[Recipient] = []
    returned: Message | None = None
    # The report's own parts only: a delivery-status part inside the returned message (a
    # DSN about a DSN) is not this report's word.
    for part in message.get_payload() if message.is_multipart() else []:
        if not isinstance(part, Message):
            continue
        kind = part.get_content_type()
        if kind in ("message/delivery-status", "message/global-delivery-status"):
            recipients.extend(_recipients(part))
        elif returned is None and kind in ("message/rfc822", "message/global",
                                           "text/rfc822-headers",
                                           "message/global-headers"):
            returned = _returned_headers(part)
    if returned is None:
        return Report(tuple(recipients))
    return Report(tuple(recipients), _tokens(returned), _message_id(returned))


# -- the delivery-status part


def _recipients(part: Message) -> list[Recipient]:
    """The per-recipient blocks: those with an ``Action`` or a ``Final-Recipient``, not the
    per-message one (Reporting-MTA, Arrival-Date, …)."""
    return [Recipient(_first_word(block.get("Action")),
                      enhanced_status(_text(block.get("Status"))) or "",
                      _text(block.get("Diagnostic-Code")), _address(block.get("Final-Recipient")))
            for block in _blocks(part)
            if _first_word(block.get("Action")) or block.get("Final-Recipient") is not None]


def _blocks(part: Message) -> list[Message]:
    """The field blocks of a ``message/delivery-status`` part; one the stdlib left as text
    (a transfer encoding, a hand-made report) is split on blank lines here."""
    payload = part.get_payload()
    if isinstance(payload, list):
        return [block for block in payload if isinstance(block, Message)]
    return [HeaderParser().parsestr(block.strip() + "\n")
            for block in re.split(r"\r?\n[ \t]*\r?\n", _decoded(part)) if block.strip()]


def _decoded(part: Message) -> str:
    """A part's content, decoded as UTF-8, at most :data:`_MAX_PART` bytes of it."""
    raw = part.get_payload(decode=True)
    return (raw if isinstance(raw, bytes) else b"")[:_MAX_PART].decode("utf-8", "replace")


def _address(value: object) -> str:
    """``rfc822; Jane@Example.org`` → ``jane@example.org`` ("" for another address type)."""
    kind, _, address = _text(value).partition(";")
    if kind.strip().lower() not in ("rfc822", "utf-8") or "@" not in address:
        return ""
    return address.strip().strip("<>").lower()


def _first_word(value: object) -> str:
    words = _text(value).split()
    return words[0].lower().rstrip(";") if words else ""


def _text(value: object) -> str:
    return "" if value is None else " ".join(str(value).split())


# -- the returned message


def _returned_headers(part: Message) -> Message:
    """The returned message's headers, attached whole or given as text."""
    payload = part.get_payload()
    if isinstance(payload, list) and payload and isinstance(payload[0], Message):
        return payload[0]
    return HeaderParser().parsestr(_decoded(part))


_URL_TOKEN = re.compile(r"[?&]token=([a-z2-7]{56})(?![a-z0-9])", re.I)
_TAG_TOKEN = re.compile(r"\+([a-z2-7]{56})@", re.I)


def _tokens(headers: Message) -> tuple[str, ...]:
    """The tokens of every ``List-Unsubscribe`` of the returned message, read raw."""
    texts = [re.sub(r"\s+", "", _raw(value)) for name, value in headers.items()
             if str(name).strip().lower() == "list-unsubscribe"]
    return tuple(dict.fromkeys(match.group(1).lower() for text in texts
                               for pattern in (_URL_TOKEN, _TAG_TOKEN)
                               for match in pattern.finditer(text)))


def _message_id(headers: Message) -> str | None:
    value = headers.get("Message-ID")
    text = "".join(_raw(value).split()) if value is not None else ""
    return text[:998] or None


def _raw(value: object) -> str:
    text = str(value)
    with contextlib.suppress(UnicodeError):  # 8-bit bytes kept as surrogates
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text
