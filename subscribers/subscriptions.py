"""How people join and leave: the actions behind the subscription app and inbound mail, so a
sign-up by form and one by mail follow the same rules.

* **Double opt-in.** Only the person who reads a mailbox can make it ``active``, and a link
  confirms only a ``pending`` address (replayed after a departure, it changes nothing).
* **No enumeration.** A request gets the same answer and takes the same store calls whatever
  the address's state: only the mail that address receives differs.
* **Limits** per mailbox per day (every spelling counted together) and per client per hour,
  counted in the store, so several app processes share them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from pipeline.errors import TransportError, Unconfirmed
from subscribers.areas import MAX_AREAS, clean_area
from subscribers.bounces import Bounces
from subscribers.errors import AreaChoiceError, TokenError, UnknownSubscriber
from subscribers.model import (
    DEFAULT_LAYOUT,
    LAYOUTS,
    Subscriber,
    email_key,
    new_subscriber_id,
    normalise_email,
)
from subscribers.store import OnceKeys, SubscriptionStore
from subscribers.store.rules import CONFIRMABLE, check_known
from subscribers.tokens import Keys, Purpose, confirm_expiry, make_token, verify_token

__all__ = ["Mailer", "Policy", "RequestOutcome", "Subscriptions"]


class Mailer(Protocol):
    """Sends the two mails a request can cause. Raises the transport's errors."""

    def confirmation(self, subscriber: Subscriber, confirm_url: str,
                     expires_at: datetime) -> None: ...

    def reminder(self, subscriber: Subscriber, preferences_url: str) -> None:
        """The preferences link, for an address a request cannot confirm (active, or
        unsubscribed: its preferences page can subscribe it again)."""


class RequestOutcome(StrEnum):
    """What a sign-up request did; for logs and tests only (the requester is told the same)."""

    #: A confirmation mail went to the address (new or pending).
    CONFIRMATION_SENT = "confirmation-sent"
    #: The address is active, or unsubscribed: it was mailed its preferences link instead.
    REMINDER_SENT = "reminder-sent"
    #: This address already had its confirmation mails for the day: nothing sent.
    THROTTLED = "throttled"
    #: The address was removed at its owner's request: nothing stored, nothing sent.
    SUPPRESSED = "suppressed"
    #: Nothing to send: the address bounced or complained (no link can bring it back), or
    #: a new confirmation was asked for one no longer pending.
    NOT_MAILED = "not-mailed"


#: What a sign-up request mails instead of a confirmation: the preferences link (nothing to
#: confirm), or nothing (it would bounce again, or its owner said stop).
_MAILED_PREFERENCES = ("active", "unsubscribed")
_MAILED_NOTHING = ("bounced", "complained")


@dataclass(frozen=True)
class Policy:
    """The limits of ``[subscriptions]``."""

    confirm_days: int = 7
    transient_bounce_limit: int = 3
    address_per_day: int = 3
    client_per_hour: int = 20


class Subscriptions:
    """The subscription actions over one store, one set of keys and one mailer."""

    def __init__(self, store: SubscriptionStore, keys: Keys, mailer: Mailer, *,
                 app_url: str, policy: Policy | None = None) -> None:
        self.store = store
        self.keys = keys
        self.mailer = mailer
        self.app_url = app_url.rstrip("/")
        self.policy = policy or Policy()
        self.bounces = Bounces(store, keys,
                               transient_limit=self.policy.transient_bounce_limit)

    @property
    def handled(self) -> OnceKeys:
        """Keys of messages handled once: SNS notifications, inbound mails."""
        return self.store

    def link(self, path: str, purpose: Purpose, subscriber_id: str, now: datetime) -> str:
        expires = confirm_expiry(now, self.policy.confirm_days) if purpose == "confirm" else None
        token = make_token(self.keys, purpose, subscriber_id, expires)
        return f"{self.app_url}/{path}?token={token}"

    def client_allowed(self, client: str | None, now: datetime) -> bool:
        """Whether ``client`` (an IP address) may make another request this hour; counts
        it. Unknown clients share one counter rather than escaping the limit."""
        key = "client:" + _digest(client or "unknown")
        return self.store.take_quota(key, now, limit=self.policy.client_per_hour,
                                     window=timedelta(hours=1))

    @staticmethod
    def check_request(email: str, layout: str = DEFAULT_LAYOUT) -> str:
        """The normalised address, or InvalidAddress: the one answer that may differ, since it
        says nothing about the list. Pure, so an answer given after it says nothing either."""
        check_known("layout", LAYOUTS, layout)
        return normalise_email(email)

    def request(self, email: str, layout: str = DEFAULT_LAYOUT, *, source: str,
                now: datetime, areas: Iterable[str] = ()) -> RequestOutcome:
        """Someone asked for ``email`` to receive the newsletter: a pending or new address gets a
        confirmation link, an active or unsubscribed one its preferences link, a gone one nothing.
        Every state takes the same steps, so the work done says nothing about the address."""
        normal = self.check_request(email, layout)
        subscriber = self.store.request_subscription(normal, layout, source=source, now=now,
                                                     areas=areas).subscriber
        allowed = self._take_address_quota(normal, now)
        if subscriber is None or subscriber.status in _MAILED_NOTHING:
            # Signed for an id nobody has, and never sent: the same work as the others.
            self.link("confirm", "confirm", new_subscriber_id(), now)
            return RequestOutcome.SUPPRESSED if subscriber is None else RequestOutcome.NOT_MAILED
        purpose: Purpose = ("preferences" if subscriber.status in _MAILED_PREFERENCES
                            else "confirm")
        url = self.link(purpose, purpose, subscriber.id, now)
        if not allowed:
            return RequestOutcome.THROTTLED
        return self._mail(subscriber, purpose, url, now)

    def resend(self, subscriber_id: str, *, now: datetime) -> RequestOutcome:
        """A new confirmation mail for an expired link's subscriber, if still ``pending``; limited
        like a request."""
        subscriber = self.store.get(subscriber_id)
        if subscriber is None:
            return RequestOutcome.SUPPRESSED
        if subscriber.status != CONFIRMABLE:
            return RequestOutcome.NOT_MAILED
        if not self._take_address_quota(subscriber.email, now):
            return RequestOutcome.THROTTLED
        url = self.link("confirm", "confirm", subscriber_id, now)
        return self._mail(subscriber, "confirm", url, now)

    def _take_address_quota(self, address: str, now: datetime) -> bool:
        return self.store.take_quota(_address_key(address), now,
                                     limit=self.policy.address_per_day,
                                     window=timedelta(days=1))

    def _mail(self, subscriber: Subscriber, purpose: Purpose, url: str,
              now: datetime) -> RequestOutcome:
        """Mail the link; one that surely did not leave does not count against the address's
        allowance."""
        try:
            if purpose == "preferences":
                self.mailer.reminder(subscriber, url)
                return RequestOutcome.REMINDER_SENT
            self.mailer.confirmation(subscriber, url, confirm_expiry(now, self.policy.confirm_days))
            return RequestOutcome.CONFIRMATION_SENT
        except Unconfirmed:
            raise
        except TransportError:
            self.store.return_quota(_address_key(subscriber.email))
            raise

    def verified(self, token: str, purpose: Purpose, now: datetime) -> str:
        """The subscriber id a link names, or TokenError; the store is not read."""
        return verify_token(self.keys, token, purpose, now)

    def subscriber_for(self, token: str, purpose: Purpose, now: datetime) -> Subscriber:
        """The link's subscriber: TokenError if it does not verify (nothing read),
        UnknownSubscriber if it was removed since."""
        subscriber_id = self.verified(token, purpose, now)
        subscriber = self.store.get(subscriber_id)
        if subscriber is None:
            raise UnknownSubscriber(subscriber_id=subscriber_id)
        return subscriber

    def expired_confirmation(self, token: str, now: datetime) -> str:
        """The subscriber an *expired* confirmation link was made for (its signature holds, so
        the id is genuine); TokenError for any other token, a still valid one too."""
        try:
            verify_token(self.keys, token, "confirm", now)
        except TokenError as exc:
            if exc.reason == "expired" and exc.subscriber_id:
                return exc.subscriber_id
            raise
        raise TokenError("wrong-purpose")

    def confirm(self, token: str, *, source: str, client: str | None,
                now: datetime) -> None:
        """Make the link's subscriber ``active`` only if it is ``pending``, in the same write.
        Nothing is returned, so the caller's answer cannot differ by the address's fate."""
        subscriber_id = self.verified(token, "confirm", now)
        with suppress(UnknownSubscriber):
            self.store.set_status(subscriber_id, "active", now, source=source, client=client,
                                  only_from=CONFIRMABLE)

    def unsubscribe(self, token: str, *, now: datetime) -> Subscriber | None:
        """Unsubscribe the link's subscriber at once (RFC 8058 one-click, the page's button,
        the ``mailto:`` address); None for one already removed."""
        try:
            subscriber = self.subscriber_for(token, "unsubscribe", now)
        except UnknownSubscriber:
            return None
        return self.leave(subscriber, now)

    def choose_areas(self, posted: Iterable[str], *,
                     held: Iterable[str] = ()) -> tuple[str, ...]:
        """The areas a form posted, as they will be stored; AreaChoiceError for one neither in
        the catalog nor already the reader's, or for too many."""
        cleaned = [(name, clean_area(name)) for name in posted if name.strip()]
        if not cleaned:
            return ()
        allowed = set(self.store.known_areas()) | set(held)
        unknown = tuple(name for name, area in cleaned if area is None or area not in allowed)
        if unknown:
            raise AreaChoiceError("unknown", unknown)
        chosen = tuple(sorted({area for _, area in cleaned if area is not None}))
        if len(chosen) > MAX_AREAS:
            raise AreaChoiceError("too-many", chosen)
        return chosen

    def leave(self, subscriber: Subscriber, now: datetime) -> Subscriber:
        """Off the list; ``bounced`` and ``complained`` stay so (they already get nothing),
        also when they became so after ``subscriber`` was read (checked in the same write)."""
        if subscriber.status in ("pending", "active"):
            return self.store.set_status(subscriber.id, "unsubscribed", now,
                                         only_from=subscriber.status)
        return subscriber

    def resubscribe(self, subscriber: Subscriber, *, client: str | None,
                    now: datetime) -> Subscriber:
        """Back on the list from the preferences page, only from ``unsubscribed`` (checked in
        the same write). Bounced and complained addresses need a fresh confirmation, which
        also proves the mailbox works."""
        return self.store.set_status(subscriber.id, "active", now, source="preferences",
                                     client=client, only_from="unsubscribed")


#: Domains whose mailboxes ignore dots in the part before the @ (Gmail, under both of its
#: names), each mapped to the one name its mailboxes are counted under.
_DOTS_IGNORED = {"gmail.com": "gmail.com", "googlemail.com": "gmail.com"}


def mailbox_key(address: str) -> str:
    """The mailbox an address reaches, for the daily allowance (no case, no ``+tag``, no dots
    at Gmail): else each spelling of one mailbox would be a way to flood it."""
    local, _, domain = email_key(address).rpartition("@")
    local = local.split("+", 1)[0]
    if domain in _DOTS_IGNORED:
        local, domain = local.replace(".", ""), _DOTS_IGNORED[domain]
    return f"{local}@{domain}"


def _address_key(address: str) -> str:
    return "address:" + _digest(mailbox_key(address))


def _digest(text: str) -> str:
    """A hash, so the quota table holds no address."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
