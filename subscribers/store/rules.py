"""What both store backends agree on: the status rules (an address's after a confirmation or
a mail event, a ledger row's after a claim, an outcome or a release), the suppression hash,
the timestamp text.

:class:`~subscribers.store.sqlite.SqliteStore` and :class:`~subscribers.store.dynamo.DynamoStore`
must give the same answers and store the same values (``newsletter store migrate`` copies
SQLite's text into DynamoDB as it is), so what they share is written once, here, and each
imports it; neither imports the other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from subscribers.areas import clean_area, clean_areas
from subscribers.model import (
    FINAL_STATUSES,
    LAYOUTS,
    STATUSES,
    AddOutcome,
    AddResult,
    NewSubscriber,
    Subscriber,
    batch_subscriber_ids,
    email_key,
)

__all__ = [
    "BOUNCEABLE",
    "CONFIRMABLE",
    "IN_FLIGHT_REASON",
    "MAIL_EVENTS",
    "Additions",
    "LedgerRow",
    "MailState",
    "after_claim",
    "after_confirmation",
    "after_mail_event",
    "after_outcome",
    "after_release",
    "catalog_names",
    "check_new_status",
    "decode_areas",
    "decode_time",
    "decode_time_or_none",
    "encode_areas",
    "encode_time",
    "plan_additions",
    "suppression_hash",
]

#: What :meth:`~subscribers.store.Directory.record_mail_event` understands: a permanent bounce
#: makes an address ``bounced``; a transient one is counted, and ``transient_limit`` of them in
#: a row make it ``bounced``; a complaint makes it ``complained`` (nothing overrides that); a
#: delivery ends a run of transient bounces. "In a row" is in the order the events happened
#: (``occurred_at``), not the order they arrive: a transient bounce or delivery older than
#: the latest one applied to the address is ignored.
MAIL_EVENTS: tuple[str, ...] = ("bounce-permanent", "bounce-transient", "complaint", "delivery")

#: The statuses a bounce ends in ``bounced``: a person's own ``unsubscribed`` is the better
#: record of an address that stops mail, and ``complained`` is never overridden.
BOUNCEABLE: tuple[str, ...] = ("pending", "active")


#: The one status a confirmation link makes ``active``. An address that has since left
#: (``unsubscribed``, ``bounced``, ``complained``) keeps its status: a link replayed within
#: its days must never undo that; an ``active`` one stays as it is (link scanners click
#: first). Callers pass it as ``set_status(..., only_from=CONFIRMABLE)``, which each store
#: checks in the same write that changes the status.
CONFIRMABLE = "pending"


def after_confirmation(status: str) -> str:
    """The status a confirmation leaves, from ``status``: tests/test_store.py holds both
    stores to it, status by status."""
    return "active" if status == CONFIRMABLE else status


@dataclass(frozen=True)
class MailState:
    """What a mail event reads and writes of a subscriber: the status, the transient bounces
    in a row, and when the latest transient bounce or delivery applied happened (stored
    text, :func:`encode_time`; None: never)."""

    status: str
    transient_bounces: int = 0
    mail_event_at: str | None = None


def after_mail_event(state: MailState, kind: str, *, transient_limit: int,
                     occurred_at: str | None = None) -> MailState:
    """What one event of :data:`MAIL_EVENTS` makes of ``state`` (``occurred_at``: when it
    happened, as stored text; None: unknown, applied as it comes). The rule written once:
    SQLite's ``UPDATE`` and DynamoDB's conditional updates each say it in their own language,
    and tests/test_store.py holds both to this function, state by state."""
    status, count, at = state.status, state.transient_bounces, state.mail_event_at
    in_order = occurred_at is None or at is None or at <= occurred_at
    if kind == "bounce-permanent":
        return replace(state, status="bounced") if status in BOUNCEABLE else state
    if kind == "complaint":
        return replace(state, status="complained")
    if kind == "bounce-transient":
        if not in_order:
            return state
        count += 1
        return MailState("bounced" if count >= transient_limit and status in BOUNCEABLE
                         else status, count, occurred_at or at)
    if kind == "delivery":
        if not in_order or (count == 0 and occurred_at is None):
            return state
        return MailState(status, 0, occurred_at or at)
    raise ValueError(f"unknown mail event {kind!r}; known: {', '.join(MAIL_EVENTS)}")


@dataclass(frozen=True)
class LedgerRow:
    """What the ledger's rules read and write of one (issue, subscriber) row; ``status``
    None: no row yet."""

    status: str | None = None
    permanent: bool = False
    attempts: int = 0


def after_claim(row: LedgerRow, *, retry: bool = False,
                retry_temporary: bool = False) -> LedgerRow | None:
    """The row :meth:`~subscribers.store.Ledger.claim` leaves, or None when it is refused
    (the row stays as it was). No row: created ``sending``, the first attempt. With
    ``retry`` an ``unconfirmed`` row or a temporary failure is taken over, with
    ``retry_temporary`` only a temporary failure; taking over counts one more attempt.
    ``sent``, ``sending`` and permanent failures are never taken. Both stores say this in
    their own language; tests/test_store.py holds each to it, row by row."""
    if row.status is None:
        return LedgerRow("sending", False, 1)
    temporary = row.status == "failed" and not row.permanent
    if (retry and (row.status == "unconfirmed" or temporary)) or (retry_temporary
                                                                  and temporary):
        return LedgerRow("sending", False, row.attempts + 1)
    return None


def after_outcome(row: LedgerRow, status: str, *, permanent: bool = False) -> LedgerRow:
    """The row ``mark_sent`` (``status`` ``sent``), ``mark_failed`` (``failed``) or
    ``mark_unconfirmed`` (``unconfirmed``) leaves: recorded whatever the row said, even with
    no claim (the transport's answer is the truth), except that a ``sent`` row is never
    downgraded; only a failure can be permanent; a row written without a claim counts one
    attempt."""
    if row.status == "sent" and status != "sent":
        return row
    return LedgerRow(status, permanent and status == "failed", row.attempts or 1)


def after_release(row: LedgerRow) -> LedgerRow:
    """The row ``release`` leaves: a ``sending`` claim is dropped (no row), any other
    stays."""
    return LedgerRow() if row.status == "sending" else row


#: The reason a ``sending`` claim an earlier run left, and handed over, becomes
#: ``unconfirmed`` with (:meth:`~subscribers.store.Ledger.expire_in_flight`).
IN_FLIGHT_REASON = "in flight when an earlier run stopped: may or may not have been delivered"


def suppression_hash(normalised: str) -> str:
    """What a suppression entry holds: sha256 hex of the lower-cased normal form."""
    return hashlib.sha256(email_key(normalised).encode("utf-8")).hexdigest()


def encode_time(when: datetime) -> str:
    """A datetime as stored: UTC, ISO 8601 with microseconds and ``Z`` (sorts as text)."""
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError("datetimes must be timezone-aware (UTC)")
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def decode_time(text: str) -> datetime:
    """A stored timestamp back as an aware UTC datetime."""
    return datetime.fromisoformat(text).astimezone(UTC)


def decode_time_or_none(text: str | None) -> datetime | None:
    """:func:`decode_time` for a column that may be empty (None, or an empty string)."""
    return decode_time(text) if text else None


def status_counts(by_status_and_layout: Mapping[tuple[str, str], int]) -> dict[str, int]:
    """Subscribers per status, every status present (0 if none), from ``count_by``'s
    counts per (status, layout)."""
    counts = dict.fromkeys(STATUSES, 0)
    for (status, _layout), n in by_status_and_layout.items():
        counts[status] += n
    return counts


def encode_areas(names: Iterable[str]) -> str:
    """A subscriber's areas as both stores keep them: :func:`~subscribers.areas.clean_areas`
    applied, then a compact JSON array (readable in ``sqlite3``, unambiguous whatever the
    names hold); no areas is the empty string, so "has interests" is ``areas != ''`` and two
    equal choices are equal text (what ``variant_choices`` groups on)."""
    cleaned = clean_areas(names)
    if not cleaned:
        return ""
    return json.dumps(list(cleaned), ensure_ascii=False, separators=(",", ":"))


def decode_areas(text: str | None) -> tuple[str, ...]:
    """Stored areas back as a tuple; cleaned again, so a value edited by hand reads as what
    could have been stored. Text that is not a JSON array of strings reads as no areas:
    interests only reorder an email, and a reader must never lose the email over them."""
    if not text:
        return ()
    try:
        value = json.loads(text)
    except ValueError:
        return ()
    if not isinstance(value, list):
        return ()
    return clean_areas(name for name in value if isinstance(name, str))


def catalog_names(names: Iterable[str]) -> set[str]:
    """The names ``note_areas`` adds to the catalog: each cleaned as a reader's choice is
    (so a catalog name is one a reader can hold), unusable ones dropped; no count limit."""
    return {cleaned for name in names if (cleaned := clean_area(name)) is not None}


# -- adding many ------------------------------------------------------------------------------

def check_new_status(layout: str, status: str) -> None:
    """What ``add`` and ``add_many`` refuse as a caller's bug (ValueError): an unknown
    layout, or a new subscriber neither ``pending`` nor ``active``."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    if status not in ("pending", "active"):
        raise ValueError("a new subscriber is 'pending' or 'active'")


@dataclass
class Additions:
    """What :func:`plan_additions` decided: one result per entry, in order, and the writes
    that make them true."""

    results: list[AddResult] = field(default_factory=list)
    #: New subscribers to insert, in entry order.
    created: list[Subscriber] = field(default_factory=list)
    #: ``pending`` subscribers to make ``active`` (as they will stand).
    activated: list[Subscriber] = field(default_factory=list)


def plan_additions(entries: Sequence[tuple[str, NewSubscriber]], *, status: str, source: str,
                   now: datetime, existing: Mapping[str, Subscriber],
                   suppressed: set[str]) -> Additions:
    """Decide ``add`` for each (normalised address, entry) in turn, from what the store holds
    (``existing`` by :func:`~subscribers.model.email_key`, the ``suppressed`` hashes among
    the entries'): the same outcome ``add`` called once per entry, in order, would give
    (so an address twice is created, then present). Pure: both stores read, call this, then
    write what it returns, so their rules cannot drift apart. New ids are drawn from
    :func:`~subscribers.model.batch_subscriber_ids`."""
    new_ids = batch_subscriber_ids()
    when = now.astimezone(UTC)
    consent_at = when if status == "active" else None
    known = dict(existing)
    plan = Additions()
    for normal, entry in entries:
        key = email_key(normal)
        if suppressed and suppression_hash(normal) in suppressed:
            plan.results.append(AddResult(AddOutcome.SUPPRESSED, None))
            continue
        present = known.get(key)
        if present is None:
            new = Subscriber(id=next(new_ids), email=normal, status=status,
                             layout=entry.layout, consent_at=consent_at,
                             consent_source=source, created_at=when,
                             confirmed_at=consent_at, updated_at=when,
                             areas=clean_areas(entry.areas))
            known[key] = new
            plan.created.append(new)
            plan.results.append(AddResult(AddOutcome.CREATED, new))
        elif present.status in FINAL_STATUSES:
            plan.results.append(AddResult(AddOutcome.REFUSED, present))
        elif present.status == "pending" and status == "active":
            active = replace(present, status="active", consent_at=when, consent_source=source,
                             confirmed_at=when, updated_at=when)
            known[key] = active
            plan.activated.append(active)
            plan.results.append(AddResult(AddOutcome.ACTIVATED, active))
        else:
            plan.results.append(AddResult(AddOutcome.EXISTING, present))
    return plan
