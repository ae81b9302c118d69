"""What both store backends agree on, written once: the status rules, the suppression hash,
the timestamp and areas text, the plan of many additions, and a stored record read back.

Both stores must give the same answers and store the same values (``store migrate`` copies
SQLite's text into DynamoDB as it is); tests/test_store.py holds both to these rules.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from subscribers.areas import clean_area, clean_areas
from subscribers.model import (
    FINAL_STATUSES,
    LAYOUTS,
    STATUSES,
    AddOutcome,
    AddResult,
    LedgerEntry,
    NewSubscriber,
    SentIssue,
    Subscriber,
    batch_subscriber_ids,
    email_key,
)

__all__ = ["BOUNCEABLE", "CONFIRMABLE", "IN_FLIGHT_REASON", "MAIL_EVENTS", "Additions", "MailState",
           "after_mail_event", "catalog_names", "check_known", "check_new_status", "decode_areas",
           "decode_time", "decode_time_or_none", "encode_areas", "encode_time", "existing_outcome",
           "plan_additions", "read_entry", "read_sent", "read_subscriber", "status_counts",
           "suppression_hash"]

#: What ``record_mail_event`` understands: a permanent bounce makes an address ``bounced``;
#: ``transient_limit`` transient ones in a row do too; a complaint makes it ``complained``
#: (nothing overrides that); a delivery ends a run of transient bounces. "In a row" is in the
#: order the events happened, not the order they arrive.
MAIL_EVENTS: tuple[str, ...] = ("bounce-permanent", "bounce-transient", "complaint", "delivery")

#: The statuses a bounce makes ``bounced``: a person's own ``unsubscribed`` is the better
#: record, and ``complained`` is never overridden.
BOUNCEABLE: tuple[str, ...] = ("pending", "active")


#: The one status a confirmation link makes ``active``: a link replayed after the address
#: left must never undo that. Callers pass ``set_status(..., only_from=CONFIRMABLE)``, which
#: each store checks in the same write that changes the status.
CONFIRMABLE = "pending"


@dataclass(frozen=True)
class MailState:
    """What a mail event reads and writes of a subscriber; ``mail_event_at`` is when the latest
    transient bounce or delivery applied happened (stored text; None: never)."""

    status: str
    transient_bounces: int = 0
    mail_event_at: str | None = None


def after_mail_event(state: MailState, kind: str, *, transient_limit: int,
                     occurred_at: str | None = None) -> MailState:
    """What one event of :data:`MAIL_EVENTS` makes of ``state`` (``occurred_at``: when it
    happened, as stored text; None: unknown, applied as it comes)."""
    check_known("mail event", MAIL_EVENTS, kind)
    if kind == "complaint":
        return replace(state, status="complained")
    bounced = "bounced" if state.status in BOUNCEABLE else state.status
    if kind == "bounce-permanent":
        return replace(state, status=bounced)
    at = state.mail_event_at
    if occurred_at is not None and at is not None and occurred_at < at:
        return state  # older than one already counted
    if kind == "bounce-transient":
        count = state.transient_bounces + 1
        return MailState(bounced if count >= transient_limit else state.status, count,
                         occurred_at or at)
    if state.transient_bounces == 0 and occurred_at is None:
        return state  # a delivery with no run of bounces to end and no time to note
    return MailState(state.status, 0, occurred_at or at)


#: Why ``expire_in_flight`` makes a handed-over claim an earlier run left ``unconfirmed``.
IN_FLIGHT_REASON = "in flight when an earlier run stopped: may or may not have been delivered"


def suppression_hash(normalised: str) -> str:
    """sha256 hex of the lower-cased normal form: a removed address refused, not kept."""
    return hashlib.sha256(email_key(normalised).encode("utf-8")).hexdigest()


def encode_time(when: datetime) -> str:
    """UTC, ISO 8601 with microseconds and ``Z``: fixed width, so it sorts as text."""
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError("datetimes must be timezone-aware (UTC)")
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def decode_time(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def decode_time_or_none(text: str | None) -> datetime | None:
    return decode_time(text) if text else None


def status_counts(by_status_and_layout: Mapping[tuple[str, str], int]) -> dict[str, int]:
    """Subscribers per status, every status present, from ``count_by``'s counts."""
    counts = dict.fromkeys(STATUSES, 0)
    for (status, _layout), n in by_status_and_layout.items():
        counts[status] += n
    return counts


def encode_areas(names: Iterable[str]) -> str:
    """A subscriber's areas as both stores keep them: cleaned, a compact JSON array, "" for
    none, so equal choices are equal text (what ``variant_choices`` groups on)."""
    cleaned = clean_areas(names)
    return json.dumps(list(cleaned), ensure_ascii=False, separators=(",", ":")) if cleaned else ""


def decode_areas(text: str | None) -> tuple[str, ...]:
    """Stored areas back, cleaned again; text that is not a JSON array of strings reads as no
    areas: interests only reorder an email, and a reader must never lose the email over them."""
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return ()
    if not isinstance(value, list):
        return ()
    return clean_areas(name for name in value if isinstance(name, str))


def catalog_names(names: Iterable[str]) -> set[str]:
    """The names ``note_areas`` adds, each cleaned as a reader's choice is."""
    return {cleaned for name in names if (cleaned := clean_area(name)) is not None}


def check_known(what: str, known: Sequence[str], *values: str | None) -> None:
    """A value (None aside) outside its documented set is the caller's bug: ValueError."""
    for value in values:
        if value is not None and value not in known:
            raise ValueError(f"unknown {what} {value!r}; known: {', '.join(known)}")


def check_new_status(layout: str, status: str) -> None:
    """ValueError (a caller's bug) for an unknown layout or a status no new subscriber has."""
    check_known("layout", LAYOUTS, layout)
    if status not in ("pending", "active"):
        raise ValueError("a new subscriber is 'pending' or 'active'")


def existing_outcome(present: Subscriber, status: str) -> AddOutcome:
    """What ``add`` (asking for ``status``) makes of an address already stored: a removed one
    is never brought back, a ``pending`` one becomes ``active`` only when that is asked."""
    if present.status in FINAL_STATUSES:
        return AddOutcome.REFUSED
    if present.status == "pending" and status == "active":
        return AddOutcome.ACTIVATED
    return AddOutcome.EXISTING


@dataclass
class Additions:
    """What :func:`plan_additions` decided: one result per entry, and the writes to make."""

    results: list[AddResult] = field(default_factory=list)
    created: list[Subscriber] = field(default_factory=list)
    #: ``pending`` subscribers to make ``active``, as they will stand.
    activated: list[Subscriber] = field(default_factory=list)


def plan_additions(entries: Sequence[tuple[str, NewSubscriber]], *, status: str, source: str,
                   now: datetime, existing: Mapping[str, Subscriber],
                   suppressed: set[str]) -> Additions:
    """Decide ``add`` for each (normalised address, entry) in turn, from what the store holds:
    both stores read, call this, then write what it returns, so their rules cannot drift apart."""
    new_ids = batch_subscriber_ids()
    when = now.astimezone(UTC)
    consent_at = when if status == "active" else None
    known = dict(existing)
    plan = Additions()
    for normal, entry in entries:
        if suppressed and suppression_hash(normal) in suppressed:
            plan.results.append(AddResult(AddOutcome.SUPPRESSED, None))
            continue
        key = email_key(normal)
        stored = known.get(key)
        if stored is None:
            outcome = AddOutcome.CREATED
            stored = Subscriber(id=next(new_ids), email=normal, status=status,
                                layout=entry.layout, consent_at=consent_at,
                                consent_source=source, created_at=when,
                                confirmed_at=consent_at, updated_at=when,
                                areas=clean_areas(entry.areas))
            plan.created.append(stored)
        elif (outcome := existing_outcome(stored, status)) is AddOutcome.ACTIVATED:
            stored = replace(stored, status="active", consent_at=when, consent_source=source,
                             confirmed_at=when, updated_at=when)
            plan.activated.append(stored)
        known[key] = stored
        plan.results.append(AddResult(outcome, stored))
    return plan


# -- a stored record read back, alike from either store ---------------------------------

def read_subscriber(item: Mapping[str, Any]) -> Subscriber:
    """A stored subscriber back: a SQLite row (as a dict) or a DynamoDB item, which leaves
    out what is unset."""
    return Subscriber(
        id=item["id"],
        email=item["email"],
        status=item["status"],
        layout=item["layout"],
        consent_at=decode_time_or_none(item.get("consent_at")),
        consent_source=item["consent_source"],
        created_at=decode_time(item["created_at"]),
        confirmed_at=decode_time_or_none(item.get("confirmed_at")),
        updated_at=decode_time(item["updated_at"]),
        consent_ip=item.get("consent_ip"),
        transient_bounces=int(item.get("transient_bounces", 0)),
        areas=decode_areas(item.get("areas")),
    )


def read_entry(item: Mapping[str, Any]) -> LedgerEntry:
    return LedgerEntry(
        issue_id=item["issue_id"],
        subscriber_id=item["subscriber_id"],
        status=item["status"],
        message_id=item.get("message_id"),
        reason=item.get("reason"),
        permanent=bool(item.get("permanent", False)),
        attempts=int(item.get("attempts", 1)),
        updated_at=decode_time(item["updated_at"]),
    )


def read_sent(item: Mapping[str, Any]) -> SentIssue:
    return SentIssue(item["issue_id"], item["content_hash"], item["first_hash"],
                     decode_time(item["first_sent_at"]), item.get("corrected_on"),
                     item.get("correction"))
