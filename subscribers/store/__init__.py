"""Where subscribers and the delivery ledger live: the store's interface, one Protocol per role.

Each consumer is typed against the roles it uses; :class:`SubscriberStore` is all of them.
The adapters (SQLite, DynamoDB) implement every role without inheriting; what they share is
in :mod:`subscribers.store.rules`.

The ledger makes delivery crash-safe: the send loop *claims* (issue, subscriber) in one
atomic write before the transport call, so only one caller ever wins it, and every ledger
write is durable when its method returns. A claim notes when its message is *handed over*: a
crash's claim never handed over is released, and only one caught in the transport call
becomes ``unconfirmed`` rather than being sent again.

Rules every implementation keeps, in every role:

* **Threads.** Every method may be called from several threads and processes at once.
* **Time.** Datetimes passed in are aware; those returned are UTC. The store never reads the
  clock: callers pass ``now``.
* **Errors.** Only :mod:`subscribers.errors`' are raised; a value outside the documented set
  (an unknown status, a naive datetime) is the caller's bug: ``ValueError``.
* **Addresses** are normalised with email-validator and unique case-insensitively.
* **Consent is not manufactured.** ``add`` never reactivates an ``unsubscribed``, ``bounced``
  or ``complained`` subscriber nor re-adds a suppressed address; only the person's own new
  consent (:meth:`Directory.set_status`) can.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from pipeline.resource import Resource
from subscribers.model import (
    DEFAULT_LAYOUT,
    AddResult,
    Lease,
    LedgerEntry,
    NewSubscriber,
    SentIssue,
    Subscriber,
)

if TYPE_CHECKING:
    from subscribers.shards import Shard

__all__ = ["DeliveryStore", "Directory", "Feedback", "Imports", "Interests", "Leases", "Ledger",
           "OnceKeys", "Quotas", "SentIssues", "SubscriberStore", "SubscriptionStore"]


class Directory(Protocol):
    """Who is on the list: subscribers, their consent, and the addresses removed for good."""

    def add(self, email: str, layout: str = DEFAULT_LAYOUT, *, status: str = "pending",
            source: str, now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """Store a new subscriber, or say why not; an existing one is returned unchanged, but a
        ``pending`` one becomes ``active`` when ``status="active"``."""

    def get(self, subscriber_id: str) -> Subscriber | None: ...

    def find(self, email: str) -> Subscriber | None: ...

    def iter_subscribers(self, status: str | None = None,
                         batch: int = 1000) -> Iterator[Subscriber]:
        """Every subscriber (of ``status``), in id order, in constant memory."""

    def count_by(self) -> dict[tuple[str, str], int]:
        """How many subscribers per (status, layout); pairs with none are left out."""

    def count_by_status(self) -> dict[str, int]:
        """How many subscribers per status; every status is present (0 if none)."""

    def set_status(self, subscriber_id: str, status: str, now: datetime, *,
                   source: str | None = None, client: str | None = None,
                   only_from: str | None = None) -> Subscriber:
        """Change a subscriber's status (becoming ``active`` records a new consent). With
        ``only_from``, only a subscriber in that status changes, checked in the same write."""

    def set_layout(self, subscriber_id: str, layout: str, now: datetime, *,
                   areas: Iterable[str] | None = None) -> Subscriber:
        """The preferences: the layout, and the areas followed unless ``areas`` is None."""

    def request_subscription(self, email: str, layout: str, *, source: str,
                             now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """A sign-up before any consent: a new address is stored ``pending``; one not
        ``active`` takes the layout and areas asked for; an ``active`` one is left as it is, a
        removed one not stored."""

    def record_mail_event(self, subscriber_id: str, kind: str, now: datetime, *,
                          transient_limit: int,
                          occurred_at: datetime | None = None) -> Subscriber:
        """Apply what the mail system said about an address (``rules.MAIL_EVENTS``). A transient
        bounce or delivery that happened before the latest one applied changes nothing."""

    def remove(self, email: str, now: datetime) -> bool:
        """Erase the subscriber and its ledger rows, keeping only a hashed suppression entry;
        False (and nothing suppressed) for an address not stored."""

    def is_suppressed(self, email: str) -> bool: ...


class Imports(Protocol):
    """Many addresses added at once: ``subscribers import``, the one caller that brings a list."""

    #: True when a batch is stored whole or not at all (SQLite); False when each entry is
    #: durable on its own (DynamoDB): what an interrupted import can say it left.
    atomic_batches: bool

    def add_many(self, entries: Sequence[NewSubscriber], *, status: str = "pending",
                 source: str, now: datetime) -> list[AddResult]:
        """:meth:`Directory.add` for each entry, in order, with the outcomes it would give one by
        one, in far fewer requests. Every address is checked before anything is written; an
        interruption leaves each entry either done as :meth:`Directory.add` would or not at all."""


class Interests(Protocol):
    """Which areas readers follow (the variants to render) and which exist to be followed."""

    def variant_choices(self) -> list[tuple[str, tuple[str, ...]]]:
        """The distinct (layout, areas) of ``active`` subscribers who follow any area, sorted:
        the variants a send renders besides the plain layouts."""

    def known_areas(self) -> tuple[str, ...]:
        """Every area noted so far, sorted: what a reader may pick from."""

    def note_areas(self, names: Iterable[str]) -> None:
        """Add ``names`` to the catalog; never removes one, so an area a reader follows stays
        pickable in a week without it."""


class Ledger(Protocol):
    """What became of each (issue, subscriber): claimed, sent, failed or unconfirmed."""

    def claim(self, issue_id: str, subscriber_id: str, now: datetime, *,
              retry: bool = False, retry_temporary: bool = False) -> bool:
        """Take (issue, subscriber) for sending; True for exactly one caller. ``retry`` takes
        over an ``unconfirmed`` row or a temporary failure, ``retry_temporary`` only the
        latter; ``sent``, ``sending`` and permanent failures never."""

    def mark_sent(self, issue_id: str, subscriber_id: str, message_id: str,
                  now: datetime) -> None:
        """Outcomes are recorded whatever the row said, even with no claim (the transport's answer
        is the truth), but a ``sent`` row is never downgraded."""

    def mark_failed(self, issue_id: str, subscriber_id: str, reason: str, permanent: bool,
                    now: datetime) -> None: ...

    def mark_unconfirmed(self, issue_id: str, subscriber_id: str, reason: str,
                         now: datetime) -> None: ...

    def release(self, issue_id: str, subscriber_id: str) -> bool: ...

    def mark_handed_over(self, issue_id: str, subscriber_id: str, handed: bool = True) -> None:
        """Note that a ``sending`` claim's message is (``handed``) or is no longer (a
        temporary failure: not taken) in the transport's hands."""

    def expire_in_flight(self, issue_id: str, now: datetime, *,
                         shard: Shard | None = None) -> int:
        """Resolve the ``sending`` rows an earlier run left: release those never handed over, turn
        the others ``unconfirmed``; how many became unconfirmed. Called holding the run's lease."""

    def ledger(self, issue_id: str, status: str | None = None) -> dict[str, LedgerEntry]: ...

    def ledger_entry(self, issue_id: str, subscriber_id: str) -> LedgerEntry | None:
        """For reports only: whether to send is :meth:`claim`'s to decide, never a read's."""

    def ledger_counts(self, issue_id: str) -> dict[str, int]: ...


class SentIssues(Protocol):
    """What each issue went out as: a sent week is replaced only by an explicit correction."""

    def sent_issue(self, issue_id: str) -> SentIssue | None:
        """What the issue went out as, or None while no send of it has begun (even an empty
        list's send freezes the week)."""

    def record_sent(self, issue_id: str, content_hash: str, now: datetime) -> SentIssue:
        """Note that the issue goes out as ``content_hash`` unless a version is noted already;
        the record as it now stands (a caller whose hash is not in it was beaten to the week)."""

    def record_correction(self, issue_id: str, content_hash: str, *, replacing: str,
                          corrected_on: str, reason: str) -> SentIssue | None:
        """Replace ``replacing`` by the correction, in one write conditional on the record still
        holding it (two corrections never both win); None when nothing of the issue was sent."""


class Feedback(Protocol):
    """Bounces and complaints noted on an issue's ledger rows: its bounce and complaint rates."""

    def record_feedback(self, message_id: str, kind: str, now: datetime) -> str | None:
        """Note a bounce or complaint on the row of the message SES called ``message_id`` (a
        complaint outranks a bounce); the issue's id, or None if no row has it."""

    def note_feedback(self, issue_id: str, subscriber_id: str, kind: str) -> bool:
        """The same on the row of (issue, subscriber); True if a row was there."""

    def feedback_counts(self, issue_id: str) -> dict[str, int]:
        """Ledger rows of the issue with each kind of feedback (every kind present)."""


class Leases(Protocol):
    """Named leases with an expiry: one holder at a time, taken over once it lapses."""

    def acquire_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> Lease:
        """Take or extend the lease ``name`` unless someone else holds it unexpired; the lease as
        it now stands (compare its ``owner`` to know who won)."""

    def renew_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> bool:
        """Extend a lease ``owner`` holds; False if it was lost (expired and taken over)."""

    def release_lease(self, name: str, owner: str) -> None:
        """Give the lease up, if ``owner`` still holds it."""


class OnceKeys(Protocol):
    """Keys of messages handled once: what makes at-least-once deliveries (SNS, an inbound mail
    picked up again) idempotent."""

    #: True when the store drops old handled-message keys and rate counters by itself
    #: (DynamoDB's TTL), so nobody need call :meth:`purge_seen`, a full scan there.
    expires_by_itself: bool

    def first_time(self, key: str, now: datetime) -> bool:
        """Record ``key`` as handled; True only for the first caller ever (per key)."""

    def forget(self, key: str) -> None:
        """Undo :meth:`first_time` for a key whose handling failed, so a retry is taken."""

    def purge_seen(self, before: datetime) -> int: ...


class Quotas(Protocol):
    """Fixed-window counters, shared by every process that uses the store."""

    def take_quota(self, key: str, now: datetime, *, limit: int,
                   window: timedelta) -> bool:
        """Count one use of ``key``; False once ``limit`` uses fall in the current window."""

    def return_quota(self, key: str) -> None:
        """Give back one use of ``key`` whose action then failed (a mail not sent)."""


class DeliveryStore(Directory, Interests, Ledger, SentIssues, Feedback, Protocol):
    """What the send loop and ``status`` use."""


class SubscriptionStore(Directory, Interests, Ledger, Feedback, OnceKeys, Quotas, Protocol):
    """What the subscription actions and their callers (the app, the inbox) use."""


class SubscriberStore(Directory, Imports, Interests, Ledger, SentIssues, Feedback, Leases,
                      OnceKeys, Quotas, Resource, Protocol):
    """Every role, and the store's own life (``close``, ``with``): what the wiring opens."""
