"""Where subscribers and the delivery ledger live: the store's interface, one role at a time.

The store does nine jobs, and each consumer needs only some of them, so the interface is
nine small Protocols, one per role:

* :class:`Directory`: subscribers, their consent, and the suppressed (removed) addresses;
* :class:`Imports`: many addresses added at once, with :class:`Directory`'s rules (an import);
* :class:`Interests`: the areas readers follow, as the email variants to render, and the
  catalog of areas the archive holds (what a reader may pick from);
* :class:`Ledger`: the per-issue delivery ledger;
* :class:`Feedback`: the bounces and complaints noted on it (SES's notifications, an SMTP
  relay's refusals, bounce notifications in the inbox);
* :class:`SentIssues`: what each issue went out as, so that a sent week is never replaced
  but by an explicit correction;
* :class:`Leases`: named leases, so two runs of one issue (or shard) never send side by side;
* :class:`OnceKeys`: keys of messages already handled (SNS deliveries, inbound mails);
* :class:`Quotas`: fixed-window rate counters (the subscription app's limits).

:class:`SubscriberStore` is all nine, and what the wiring opens (``pipeline.wiring.open_store``,
by ``[store] backend``); a consumer is typed against the roles it uses:
:class:`DeliveryStore` for the send loop and ``newsletter status``, :class:`SubscriptionStore`
for the subscription actions, :class:`Leases` alone for the run lock. The adapters,
:class:`~subscribers.store.sqlite.SqliteStore` (one file, one machine) and
:class:`~subscribers.store.dynamo.DynamoStore` (two DynamoDB tables, production), implement
every role without inheriting from any; what they share is in :mod:`subscribers.store.rules`.

The ledger is what makes delivery crash-safe. The send loop *claims* (issue, subscriber)
before it calls the transport; a claim is one atomic write (an insert that does nothing if
the row exists, or a compare-and-set update), never a read followed by a write, so two
threads or two processes can never both win it. Every ledger write is durable when its
method returns: a ``newsletter send`` killed with SIGKILL, or a machine that loses power,
leaves a ledger the next run can trust. A claim records when its message is *handed over*
(:meth:`Ledger.mark_handed_over`, right before the transport call): a claim a crash left that
was never handed over is released (nothing left, the next run sends it), and only one caught
in the transport call becomes ``unconfirmed`` rather than being sent again.

Rules every implementation keeps, in every role:

* **Threads.** Every method may be called from several threads at once (the send loop
  runs ``concurrency`` workers); several processes may use the same store too (a
  re-run after a crash, the subscription app).
* **Time.** Every datetime passed in must be timezone-aware; every datetime returned is
  UTC. The store never reads the clock: callers pass ``now``.
* **Errors.** The only exceptions raised are those of :mod:`subscribers.errors`:
  :class:`~subscribers.errors.InvalidAddress` for text that is not an address,
  :class:`~subscribers.errors.UnknownSubscriber` where a subscriber must exist, and
  :class:`~subscribers.errors.StoreError` when the storage itself fails. Passing a
  value outside the documented set (an unknown status or layout, a naive datetime) is
  a bug in the caller and raises ``ValueError``.
* **Addresses** are normalised with email-validator and unique case-insensitively;
  methods taking an address accept it in any case.
* **Consent is not manufactured.** ``add`` never reactivates an ``unsubscribed``,
  ``bounced`` or ``complained`` subscriber and never re-adds a removed (suppressed)
  address; only :meth:`Directory.set_status` (the subscriber's own new consent) can, and a
  confirmation link only for a ``pending`` one (:data:`~subscribers.store.rules.CONFIRMABLE`).
* **Ledger writes are durable when the method returns**, and a claim is exclusive
  across threads and processes.
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

__all__ = [
    "DeliveryStore",
    "Directory",
    "Feedback",
    "Imports",
    "Interests",
    "Leases",
    "Ledger",
    "OnceKeys",
    "Quotas",
    "SentIssues",
    "SubscriberStore",
    "SubscriptionStore",
]


class Directory(Protocol):
    """Who is on the list: subscribers, their consent, and the addresses removed for good."""

    def add(self, email: str, layout: str = DEFAULT_LAYOUT, *, status: str = "pending",
            source: str, now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """Store a new subscriber, or say why not; an existing one is returned unchanged,
        except that a ``pending`` one becomes ``active`` when ``status="active"``.
        ``areas`` (through :func:`~subscribers.areas.clean_areas`) are a new one's only."""
        ...

    def get(self, subscriber_id: str) -> Subscriber | None: ...

    def find(self, email: str) -> Subscriber | None: ...

    def iter_subscribers(self, status: str | None = None,
                         batch: int = 1000) -> Iterator[Subscriber]:
        """Every subscriber (of ``status``), in id order, in constant memory."""
        ...

    def count_by(self) -> dict[tuple[str, str], int]:
        """How many subscribers per (status, layout); pairs with none are left out."""
        ...

    def count_by_status(self) -> dict[str, int]:
        """How many subscribers per status; every status is present (0 if none)."""
        ...

    def set_status(self, subscriber_id: str, status: str, now: datetime, *,
                   source: str | None = None, client: str | None = None,
                   only_from: str | None = None) -> Subscriber:
        """Change a subscriber's status (becoming ``active`` records consent: ``now``,
        ``source``, ``client``); UnknownSubscriber if there is none. With ``only_from``, only
        a subscriber in that status changes, checked in the same write (a confirmation:
        :data:`~subscribers.store.rules.CONFIRMABLE`); any other is returned unchanged."""
        ...

    def set_layout(self, subscriber_id: str, layout: str, now: datetime, *,
                   areas: Iterable[str] | None = None) -> Subscriber:
        """The preferences: the layout, and the areas followed unless ``areas`` is None
        (stored through :func:`~subscribers.areas.clean_areas`; () follows none)."""
        ...

    def request_subscription(self, email: str, layout: str, *, source: str,
                             now: datetime, areas: Iterable[str] = ()) -> AddResult:
        """A sign-up asked for by someone (web form, inbound mail) before any consent:
        a new address is stored ``pending``; an existing one that is not ``active`` takes
        the layout and areas asked for (it receives nothing until it confirms, and keeps
        them through the confirmation); an ``active`` one is left as it is; a removed
        (suppressed) one is not stored."""
        ...

    def record_mail_event(self, subscriber_id: str, kind: str, now: datetime, *,
                          transient_limit: int,
                          occurred_at: datetime | None = None) -> Subscriber:
        """Apply what the mail system said about one address (see
        :data:`~subscribers.store.rules.MAIL_EVENTS`). ``occurred_at``: when it happened
        (SES's timestamp); a transient bounce or delivery older than the latest one applied
        changes nothing. None: applied as it comes."""
        ...

    def remove(self, email: str, now: datetime) -> bool:
        """Erase the subscriber and keep only a hashed suppression entry."""
        ...

    def is_suppressed(self, email: str) -> bool: ...


class Imports(Protocol):
    """Many addresses added at once: ``subscribers import``, the one caller that brings a
    list. A role of its own (not :class:`Directory`'s) because only the import needs it."""

    #: True when a batch is stored whole or not at all (SQLite: one transaction); False when
    #: each entry is durable on its own (DynamoDB), so an interrupted batch keeps its entries
    #: up to the interruption. What an interrupted import can say it left.
    atomic_batches: bool

    def add_many(self, entries: Sequence[NewSubscriber], *, status: str = "pending",
                 source: str, now: datetime) -> list[AddResult]:
        """:meth:`Directory.add` for each entry, in order, with the outcomes it would give
        one by one (an address twice is created, then present), in far fewer requests: an
        import's batch. Every address is checked before anything is written (InvalidAddress, and
        nothing of the batch stored, if one is not an address). Whether the batch is one
        transaction is :attr:`atomic_batches`; what it reports when it returns is durable,
        and an interruption leaves each entry either done as :meth:`Directory.add` would
        have done it or not done at all."""
        ...


class Interests(Protocol):
    """Which areas readers follow, as the variants of an issue to render, and which areas
    exist to be followed (the catalog, filled as issues are published)."""

    def variant_choices(self) -> list[tuple[str, tuple[str, ...]]]:
        """The distinct (layout, areas) of ``active`` subscribers who follow any area,
        sorted: what a send renders besides the plain layouts. One query or scan, never one
        request per subscriber."""
        ...

    def known_areas(self) -> tuple[str, ...]:
        """Every area noted so far, sorted: what a reader may pick from."""
        ...

    def note_areas(self, names: Iterable[str]) -> None:
        """Add ``names`` (each cleaned as a reader's choice is; unusable ones dropped) to
        the catalog. Never removes one: an area a reader follows stays pickable even in a
        week without it."""
        ...


class Ledger(Protocol):
    """What became of each (issue, subscriber): claimed, sent, failed or unconfirmed."""

    def claim(self, issue_id: str, subscriber_id: str, now: datetime, *,
              retry: bool = False, retry_temporary: bool = False) -> bool:
        """Take (issue, subscriber) for sending; True for exactly one caller."""
        ...

    def mark_sent(self, issue_id: str, subscriber_id: str, message_id: str,
                  now: datetime) -> None: ...

    def mark_failed(self, issue_id: str, subscriber_id: str, reason: str, permanent: bool,
                    now: datetime) -> None: ...

    def mark_unconfirmed(self, issue_id: str, subscriber_id: str, reason: str,
                         now: datetime) -> None: ...

    def release(self, issue_id: str, subscriber_id: str) -> bool: ...

    def mark_handed_over(self, issue_id: str, subscriber_id: str, handed: bool = True) -> None:
        """Note that a ``sending`` claim's message is (``handed``) or is no longer (a
        temporary failure: not taken) in the transport's hands."""
        ...

    def expire_in_flight(self, issue_id: str, now: datetime, *,
                         shard: Shard | None = None) -> int:
        """Resolve the ``sending`` rows an earlier run left (of ``shard`` only, if given):
        release those never handed over, turn the others ``unconfirmed``; how many became
        unconfirmed."""
        ...

    def ledger(self, issue_id: str, status: str | None = None) -> dict[str, LedgerEntry]: ...

    def ledger_entry(self, issue_id: str, subscriber_id: str) -> LedgerEntry | None: ...

    def ledger_counts(self, issue_id: str) -> dict[str, int]: ...


class SentIssues(Protocol):
    """What each issue went out as: written by the send before its first message is handed
    over, read by every command that could put another issue under the week's name
    (``build``, ``approve``, ``preview``, ``publish``, ``run``) and by ``status``."""

    def sent_issue(self, issue_id: str) -> SentIssue | None:
        """What the issue went out as, or None while no send of it has begun (see
        :meth:`record_sent`). A send that began freezes the week even if its list was
        empty: ``run`` had published the issue before it, so the archive showed it."""
        ...

    def record_sent(self, issue_id: str, content_hash: str, now: datetime) -> SentIssue:
        """Note that the issue goes out as ``content_hash``, before its first message is
        handed over, unless a version is noted already: one write that then changes
        nothing. The record as it now stands: a caller whose hash is not in it was beaten
        to the week by another issue."""
        ...

    def record_correction(self, issue_id: str, content_hash: str, *, replacing: str,
                          corrected_on: str, reason: str) -> SentIssue | None:
        """Replace the noted ``replacing`` by the correction ``content_hash`` (its day and
        the editor's reason kept beside it), in one write conditional on the record still
        holding ``replacing``, so that two corrections never both win. The record as it now
        stands; None when nothing of the issue was sent."""
        ...


class Feedback(Protocol):
    """What mailbox providers said about the messages of an issue (bounces, complaints),
    noted on its ledger rows: the issue's bounce and complaint rates."""

    def record_feedback(self, message_id: str, kind: str, now: datetime) -> str | None:
        """Note a bounce or complaint (``FEEDBACK``) on the ledger row of the message SES
        called ``message_id``; the issue's id, or None if no row has that id."""
        ...

    def note_feedback(self, issue_id: str, subscriber_id: str, kind: str) -> bool:
        """Note a bounce or complaint on the ledger row of (issue, subscriber), for a
        message known by those rather than by SES's id: an SMTP relay's refusal saying the
        mailbox is gone, a bounce notification returning the issue's message. A complaint
        outranks a bounce. True if a row was there to note it on."""
        ...

    def feedback_counts(self, issue_id: str) -> dict[str, int]:
        """Ledger rows of the issue with each kind of feedback (every kind present)."""
        ...


class Leases(Protocol):
    """Named leases with an expiry: one holder at a time, taken over once it lapses."""

    def acquire_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> Lease:
        """Take or extend the lease ``name`` for ``owner`` unless someone else holds it
        unexpired; the lease as it now stands (compare its ``owner`` to know who won)."""
        ...

    def renew_lease(self, name: str, owner: str, now: datetime, ttl: timedelta) -> bool:
        """Extend a lease ``owner`` holds; False if it was lost (expired and taken over)."""
        ...

    def release_lease(self, name: str, owner: str) -> None:
        """Give the lease up, if ``owner`` still holds it."""
        ...


class OnceKeys(Protocol):
    """Keys of messages handled once (``sns:<MessageId>``, ``mail:<object key>``): what makes
    at-least-once deliveries (SNS, an inbound mail picked up again) idempotent."""

    #: True when the store drops old handled-message keys and rate counters by itself
    #: (DynamoDB's TTL), so nobody need call :meth:`purge_seen`, a full scan there.
    expires_by_itself: bool

    def first_time(self, key: str, now: datetime) -> bool:
        """Record ``key`` as handled; True only for the first caller ever (per key)."""
        ...

    def forget(self, key: str) -> None:
        """Undo :meth:`first_time` for a key whose handling failed, so a retry is taken."""
        ...

    def purge_seen(self, before: datetime) -> int: ...


class Quotas(Protocol):
    """Fixed-window counters, shared by every process that uses the store."""

    def take_quota(self, key: str, now: datetime, *, limit: int,
                   window: timedelta) -> bool:
        """Count one use of ``key``; False once ``limit`` uses fall in the current window."""
        ...

    def return_quota(self, key: str) -> None:
        """Give back one use of ``key`` whose action then failed (a mail not sent)."""
        ...


class DeliveryStore(Directory, Interests, Ledger, SentIssues, Feedback, Protocol):
    """Who an issue goes to (and in which variant), what became of each send, and what the
    issue went out as: the send loop and ``status``."""


class SubscriptionStore(Directory, Interests, Ledger, Feedback, OnceKeys, Quotas, Protocol):
    """What the subscription actions and their callers (the app, the inbox) use: the list,
    the areas to pick from, the feedback on the ledger, the keys of messages handled, and
    the rate limits."""


class SubscriberStore(Directory, Imports, Interests, Ledger, SentIssues, Feedback, Leases,
                      OnceKeys, Quotas, Resource, Protocol):
    """Every role, and the store's own life (``close``, ``with``): what the wiring opens."""
