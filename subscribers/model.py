"""The records of the subscriber side, as frozen dataclasses (datetimes aware, UTC), and the
one address check. Plain data: nothing here does I/O.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import lru_cache

from email_validator import EmailNotValidError, validate_email

from pipeline.model import LAYOUTS
from subscribers.errors import InvalidAddress

__all__ = ["DEFAULT_LAYOUT", "FEEDBACK", "FINAL_STATUSES", "LAYOUTS", "LEDGER_STATUSES", "STATUSES",
           "AddOutcome", "AddResult", "Lease", "LedgerEntry", "NewSubscriber", "SentIssue",
           "Subscriber", "batch_subscriber_ids", "email_key", "new_subscriber_id",
           "normalise_email"]

#: A subscriber's state. Only ``active`` ones receive an issue.
STATUSES: tuple[str, ...] = ("pending", "active", "unsubscribed", "bounced", "complained")

#: Statuses an import or the CLI never changes: only the subscriber's own, new consent
#: (through the subscription app) brings them back.
FINAL_STATUSES: frozenset[str] = frozenset({"unsubscribed", "bounced", "complained"})

#: The layout a subscriber gets unless they chose another (Chinese first, then English).
DEFAULT_LAYOUT = "zh-en"

#: The state of one (issue, subscriber) delivery. ``sending`` is claimed before the
#: transport is called; ``unconfirmed`` means the transport may have taken the message
#: (a timeout, or a crash while it was in flight), so it is never re-sent without asking.
LEDGER_STATUSES: tuple[str, ...] = ("sending", "sent", "failed", "unconfirmed")


@dataclass(frozen=True)
class Subscriber:
    """One person on the list."""

    #: 24 lower-case hex characters (12 random bytes); tokens carry it in binary.
    id: str
    #: The address as email-validator normalised it (domain lower-cased, local part as given).
    email: str
    #: One of :data:`STATUSES`.
    status: str
    #: One of :data:`LAYOUTS`: which languages they read, in which order.
    layout: str
    #: When consent was given (a confirmation, or an operator's ``--confirmed``); None while
    #: the subscription is still pending.
    consent_at: datetime | None
    #: Where the subscription (and later its consent) came from: ``cli``,
    #: ``import:<file name>``, ``web``, ...
    consent_source: str
    created_at: datetime
    #: When the address was last confirmed (made ``active``); None if never.
    confirmed_at: datetime | None
    updated_at: datetime
    #: The client address the consent came from (the subscription app's confirm), if known.
    consent_ip: str | None = None
    #: Transient bounces in a row since the last delivery; at ``[subscriptions]
    #: transient_bounce_limit`` the address becomes ``bounced``.
    transient_bounces: int = 0
    #: The areas they follow, sorted: their email puts these first inside each tier.
    areas: tuple[str, ...] = ()


#: What SES can say about a delivered message afterwards, as the ledger notes it.
FEEDBACK: tuple[str, ...] = ("bounce", "complaint")


@dataclass(frozen=True)
class Lease:
    """Who holds a named lease (one run of an issue, or of one shard of it) until when."""

    name: str
    #: ``host:pid:random`` of the holder: enough for "who holds it" in an error message.
    owner: str
    acquired_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class LedgerEntry:
    """What happened to one issue for one subscriber. Holds no address: only the id."""

    issue_id: str
    subscriber_id: str
    #: One of :data:`LEDGER_STATUSES`.
    status: str
    #: The id the transport returned (SES's MessageId, the outbox file); set once ``sent``.
    message_id: str | None
    #: Why it failed or is unconfirmed, as the transport said it.
    reason: str | None
    #: For ``failed``: True if this recipient will never take it (no automatic retry).
    permanent: bool
    #: How many times it was claimed (1 on the first claim; a retry adds one).
    attempts: int
    updated_at: datetime


@dataclass(frozen=True)
class SentIssue:
    """What an issue went out as, noted before its first message is handed over, so that no
    later build can put another issue under the week's name without an explicit correction."""

    issue_id: str
    #: The ``content_hash`` of the issue its readers get now: the first one sent, or the
    #: correction that replaced it.
    content_hash: str
    #: The ``content_hash`` of the first message's issue (what the first readers got).
    first_hash: str
    #: When the first message was about to be handed over.
    first_sent_at: datetime
    #: The day of the correction now out (``YYYY-MM-DD`` in the issue's timezone), or None
    #: when the issue goes out as first built.
    corrected_on: str | None = None
    #: The editor's one-line reason for that correction.
    correction: str | None = None


class AddOutcome(StrEnum):
    """What :meth:`~subscribers.store.Directory.add` did with an address."""

    #: A new subscriber was stored.
    CREATED = "created"
    #: The address was already there; nothing changed.
    EXISTING = "existing"
    #: The address was there as ``pending`` and ``status="active"`` was asked: now active.
    ACTIVATED = "activated"
    #: The address was removed earlier; its hashed suppression entry keeps it out.
    SUPPRESSED = "suppressed"
    #: The address is ``unsubscribed``, ``bounced`` or ``complained``: never reactivated.
    REFUSED = "refused-reactivation"


@dataclass(frozen=True)
class AddResult:
    """The outcome of adding one address, and the subscriber as it now stands."""

    outcome: AddOutcome
    #: The subscriber as stored; None only when ``SUPPRESSED`` (no row).
    subscriber: Subscriber | None

    @property
    def created(self) -> bool:
        return self.outcome is AddOutcome.CREATED


@dataclass(frozen=True)
class NewSubscriber:
    """One address to add, as a row of an import gives it."""

    email: str
    #: One of :data:`LAYOUTS`.
    layout: str = DEFAULT_LAYOUT
    #: The areas a new subscriber follows (cleaned as stored); ignored for one present.
    areas: tuple[str, ...] = ()


def new_subscriber_id() -> str:
    """12 random bytes as 24 hex characters: tokens carry the id as 12 raw bytes, so the
    length must not change without a new token version."""
    return secrets.token_hex(12)


def batch_subscriber_ids() -> Iterator[str]:
    """Fresh ids for one import batch: a random prefix shared by the batch, then random bytes
    each. SQLite keeps subscribers in id order, so neighbours dirty a few pages, not one per row."""
    prefix = secrets.token_hex(6)
    drawn: set[str] = set()
    while True:
        suffix = secrets.token_hex(6)
        if suffix not in drawn:
            drawn.add(suffix)
            yield prefix + suffix


@lru_cache(maxsize=4096)
def normalise_email(text: str) -> str:
    """The address in email-validator's normal form, or :class:`InvalidAddress`.

    No DNS is consulted: the check must give the same answer offline. The local part keeps its
    case (uniqueness is case-insensitive separately); each domain is checked once.
    """
    stripped = text.strip()
    if not stripped:
        raise InvalidAddress(text, "empty")
    local, at, domain = stripped.partition("@")
    if not at:
        raise InvalidAddress(stripped, "An email address must have an @-sign.")
    try:
        name = validate_email(f"{local}@[127.0.0.1]", allow_domain_literal=True,
                              check_deliverability=False).local_part
        unicode_domain, ascii_domain = _domain(domain)
    except EmailNotValidError as exc:
        raise InvalidAddress(stripped, str(exc)) from exc
    normal = f"{name}@{unicode_domain}"
    if max(len(form.encode()) for form in (stripped, normal, f"{name}@{ascii_domain}")) > 254:
        raise InvalidAddress(stripped, "The email address is too long.")
    return normal


@lru_cache(maxsize=4096)
def _domain(domain: str) -> tuple[str, str]:
    """A domain's normal and ASCII (IDNA) forms, as email-validator checks them."""
    checked = validate_email(f"a@{domain}", check_deliverability=False)
    return checked.domain, checked.ascii_domain


def email_key(normalised: str) -> str:
    """The case-insensitive identity of a normalised address (what uniqueness is on)."""
    return normalised.lower()
