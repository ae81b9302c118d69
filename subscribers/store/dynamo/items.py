"""What a DynamoDB item of the store looks like (key prefixes, attributes named as SQLite's
columns, so rules.read_subscriber reads either) and its JSON both ways, so an item is the same
whichever role wrote it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from subscribers.model import Lease, email_key, new_subscriber_id
from subscribers.store.rules import decode_time

#: Key prefixes of the subscribers table.
SUBSCRIBER_PREFIX = "sub#"
EMAIL_INDEX_PREFIX = "email#"
SUPPRESSION_PREFIX = "supp#"
SEEN_PREFIX = "seen#"
QUOTA_PREFIX = "quota#"
LEASE_PREFIX = "lease#"
#: What an issue went out as (``sent#<issue id>``): :class:`~subscribers.model.SentIssue`.
SENT_PREFIX = "sent#"
#: The one item holding the area catalog (attribute ``names``, a string set).
CATALOG_KEY = "catalog#areas"

#: How long a ``seen#`` key lives before TTL may delete it: well beyond the webhook's window
#: (a week), so ``purge_seen`` stays the rule and TTL only collects what nobody purged.
SEEN_RETENTION = timedelta(days=30)

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()
_NAMES = re.compile(r"#(\w+)")
_VALUES = re.compile(r":(\w+)")


#: Every attribute of a ``sub#`` item, a ledger item and a ``sent#`` item besides ``pk``,
#: named as SQLite's columns are: what ``store migrate`` copies.
SUBSCRIBER_FIELDS = ("id", "email", "email_key", "status", "layout", "consent_at",
                      "consent_source", "created_at", "confirmed_at", "updated_at",
                      "consent_ip", "transient_bounces", "areas", "mail_event_at")
LEDGER_FIELDS = ("issue_id", "subscriber_id", "status", "message_id", "reason", "permanent",
                  "attempts", "updated_at", "feedback", "handed_over")

SENT_FIELDS = ("issue_id", "content_hash", "first_hash", "first_sent_at", "corrected_on",
               "correction")


def new_record(normal: str, status: str, layout: str, source: str, stamp: str,
               consent_at: str | None, areas: str, subscriber_id: str | None = None,
               ) -> dict[str, Any]:
    """A new ``sub#`` item's attributes (a fresh id unless given); empty ``areas`` are left out,
    as :func:`serialise` leaves out every None."""
    return {"id": subscriber_id or new_subscriber_id(), "email": normal,
            "email_key": email_key(normal), "status": status, "layout": layout,
            "consent_at": consent_at, "consent_source": source, "created_at": stamp,
            "confirmed_at": consent_at, "updated_at": stamp, "consent_ip": None,
            "transient_bounces": 0, "areas": areas or None}


def pk_of(value: str) -> dict[str, Any]:
    return {"pk": {"S": value}}


def ledger_key(issue_id: str, subscriber_id: str) -> dict[str, Any]:
    return {"issue_id": {"S": issue_id}, "subscriber_id": {"S": subscriber_id}}


def serialise(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item in DynamoDB's JSON; None-valued attributes are left out (never NULL: an index
    key attribute must be a string or absent)."""
    return {name: _SERIALIZER.serialize(value) for name, value in item.items()
            if value is not None}


def plain_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _DESERIALIZER.deserialize(value) for name, value in item.items()}


def expression(*parts: str | None, **values: Any) -> dict[str, Any]:
    """ExpressionAttributeNames/Values for the ``#name`` and ``:name`` used: exactly those, as
    DynamoDB refuses unused ones."""
    text = " ".join(part for part in parts if part)
    names = {f"#{name}": name for name in _NAMES.findall(text)}
    used = {f":{name}": _SERIALIZER.serialize(values[name]) for name in _VALUES.findall(text)}
    params = {"ExpressionAttributeNames": names, "ExpressionAttributeValues": used}
    return {key: mapping for key, mapping in params.items() if mapping}


def epoch(when: datetime) -> int:
    """Epoch seconds for TTL, rounded up: an item never expires before ``when``."""
    return math.ceil(when.astimezone(UTC).timestamp())


def read_lease(name: str, item: Mapping[str, Any]) -> Lease:
    return Lease(name, item["owner"], decode_time(item["acquired_at"]),
                 decode_time(item["expires_at_iso"]))
