"""Bounces, complaints and deliveries from the ``Message`` of a verified SNS notification.

Both SES shapes are read (``notificationType`` and a configuration set's ``eventType``). Any
other type gives no event rather than an error: SES may add types, and a failing webhook
makes SNS retry for days. A bounce, complaint or delivery lacking what makes it one is a
:class:`ValueError`: ignoring it would hide a bounce. Only a ``Permanent`` bounce stops mail
for good; a ``not-spam`` complaint is no complaint.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parseaddr
from typing import Any, Literal, get_args

__all__ = ["EVENT_KINDS", "EventKind", "MailEvent", "events_from"]

EventKind = Literal["bounce-permanent", "bounce-transient", "complaint", "delivery"]

#: Every kind a :class:`MailEvent` can have.
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)


@dataclass(frozen=True)
class MailEvent:
    """What happened to one recipient of one message."""

    kind: EventKind
    #: The recipient, without a display name (``Jane <jane@example.org>`` → ``jane@…``).
    address: str
    #: ``mail.messageId``: the id SES returned when the message was sent.
    message_id: str | None
    #: ``Permanent/General``, ``Transient/MailboxFull``, a complaint's feedback type
    #: (``abuse``), or ``""``.
    detail: str
    #: The bounce's, complaint's or delivery's ``timestamp``, as SES wrote it.
    timestamp: str | None

    @property
    def occurred_at(self) -> datetime | None:
        """:attr:`timestamp` as an aware datetime (``2026-11-30T01:00:00.123Z``); None when
        it is missing or not an ISO 8601 time with a zone (then nothing orders the event)."""
        if not self.timestamp:
            return None
        try:
            when = datetime.fromisoformat(self.timestamp)
        except ValueError:
            return None
        return when.astimezone(UTC) if when.tzinfo is not None else None


def events_from(message: str) -> list[MailEvent]:
    """The mail events in an SES document, one per recipient; ``[]`` for another type, and
    a one-line :class:`ValueError` for a malformed document."""
    try:
        data = json.loads(message)
    except (ValueError, RecursionError):
        raise ValueError("SES event: not JSON") from None
    if not isinstance(data, dict):
        raise ValueError("SES event: not a JSON object")
    kind = data.get("eventType", data.get("notificationType"))
    if not isinstance(kind, str):
        raise ValueError("SES event: neither eventType nor notificationType is a string")
    read = {"Bounce": _bounces, "Complaint": _complaints, "Delivery": _deliveries}.get(kind)
    return read(data) if read else []


def _bounces(data: Mapping[str, Any]) -> list[MailEvent]:
    bounce = _part(data, "bounce")
    bounce_type = bounce.get("bounceType")
    if not isinstance(bounce_type, str) or not bounce_type:
        raise ValueError("SES event: a Bounce without bounceType")
    sub_type = bounce.get("bounceSubType")
    detail = f"{bounce_type}/{sub_type}" if isinstance(sub_type, str) and sub_type else bounce_type
    kind: EventKind = "bounce-permanent" if bounce_type == "Permanent" else "bounce-transient"
    return _events(kind, _recipient_objects(bounce, "bouncedRecipients"), data, detail, bounce)


def _complaints(data: Mapping[str, Any]) -> list[MailEvent]:
    complaint = _part(data, "complaint")
    feedback = complaint.get("complaintFeedbackType")
    if feedback == "not-spam":
        return []
    recipients = _recipient_objects(complaint, "complainedRecipients")
    detail = feedback if isinstance(feedback, str) else ""
    return _events("complaint", recipients, data, detail, complaint)


def _deliveries(data: Mapping[str, Any]) -> list[MailEvent]:
    delivery = _part(data, "delivery")
    recipients = delivery.get("recipients")
    if not isinstance(recipients, list):
        raise ValueError("SES event: delivery.recipients is not a list")
    return _events("delivery", recipients, data, "", delivery)


def _part(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    part = data.get(name)
    if not isinstance(part, dict):
        raise ValueError(f"SES event: a {name.capitalize()} without a {name} object")
    return part


def _recipient_objects(part: Mapping[str, Any], key: str) -> list[Any]:
    """``[{"emailAddress": …}, …]`` → the addresses, still unchecked."""
    recipients = part.get(key)
    if not isinstance(recipients, list):
        raise ValueError(f"SES event: {key} is not a list")
    if not all(isinstance(recipient, dict) for recipient in recipients):
        raise ValueError(f"SES event: an entry of {key} is not an object")
    return [recipient.get("emailAddress") for recipient in recipients]


def _events(kind: EventKind, addresses: list[Any], data: Mapping[str, Any], detail: str,
            part: Mapping[str, Any]) -> list[MailEvent]:
    mail = data.get("mail")
    if mail is not None and not isinstance(mail, dict):
        raise ValueError("SES event: mail is not an object")
    message_id = (mail or {}).get("messageId")
    timestamp = part.get("timestamp")
    return [MailEvent(kind=kind, address=_bare(address), detail=detail,
                      message_id=message_id if isinstance(message_id, str) else None,
                      timestamp=timestamp if isinstance(timestamp, str) else None)
            for address in addresses]


def _bare(address: Any) -> str:
    """``Jane Doe <jane@example.org>`` → ``jane@example.org``; anything else as given."""
    if not isinstance(address, str) or not address.strip():
        raise ValueError("SES event: a recipient address is missing or not a string")
    text = address.strip()
    bare = parseaddr(text)[1] if "<" in text else ""
    return bare or text
