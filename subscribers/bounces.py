"""What the list learns from mail that comes back, acted on in one place, whichever carrier
brings it: SES's notifications through SNS, a bounce mailed back, or an SMTP relay's "no such
mailbox" during a send.

The status follows :func:`subscribers.store.rules.after_mail_event`, and a bounce or complaint
of a known message is noted on its ledger row for the issue's rates. At-least-once carriers
(SNS redelivers) are made harmless here: a counted event is claimed once by its key first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from subscribers.errors import InvalidAddress, UnknownSubscriber
from subscribers.model import Subscriber
from subscribers.store import DeliveryStore, Directory, Feedback, OnceKeys
from subscribers.store.rules import MAIL_EVENTS, check_known
from subscribers.tokens import Keys, verify_token

__all__ = ["Bounces", "MailEvent", "mark_bounced"]


class MailEvent(Protocol):
    """One SES event, as ``pipeline.core.mail_in.ses_events`` reads it."""

    @property
    def kind(self) -> str: ...

    @property
    def address(self) -> str: ...

    @property
    def message_id(self) -> str | None: ...

    @property
    def occurred_at(self) -> datetime | None: ...


class _Store(Directory, Feedback, OnceKeys, Protocol):
    """The roles the bounce handling uses."""


class Bounces:
    """Bounces and complaints applied to the list, each carrier's way in."""

    def __init__(self, store: _Store, keys: Keys, *, transient_limit: int) -> None:
        self.store = store
        self.keys = keys
        self.transient_limit = transient_limit

    def notification(self, message_id: str, events: Sequence[MailEvent], now: datetime, *,
                     sent_at: datetime | None = None) -> int:
        """One verified SNS notification's SES ``events``, applied so that redeliveries change
        nothing twice; how many were applied to a subscriber. Each event carries when SES says it
        happened (else ``sent_at``): SNS keeps no order."""
        applied = 0
        for n, event in enumerate(events):
            key = f"sns:{message_id}:{n}"
            counted = event.kind == "bounce-transient"
            if counted and not self.store.first_time(key, now):
                continue  # counted on an earlier delivery of this message
            try:
                if self.mail_event(event.kind, event.address, now,
                                   message_id=event.message_id,
                                   occurred_at=event.occurred_at or sent_at) is not None:
                    applied += 1
            except Exception:
                if counted:
                    self.store.forget(key)
                raise
        return applied

    def mail_event(self, kind: str, address: str, now: datetime, *,
                   message_id: str | None = None,
                   occurred_at: datetime | None = None) -> Subscriber | None:
        """Apply an SES event to the subscriber with ``address``; None if there is none. A time
        after ``now`` is taken as ``now``, so one future stamp cannot make later events look old."""
        check_known("mail event", MAIL_EVENTS, kind)
        feedback = {"bounce-permanent": "bounce", "complaint": "complaint"}.get(kind)
        if feedback and message_id:
            self.store.record_feedback(message_id, feedback, now)
        try:
            subscriber = self.store.find(address)
        except InvalidAddress:
            return None
        if subscriber is None:
            return None
        occurred_at = min(occurred_at, now) if occurred_at else None
        return self.store.record_mail_event(subscriber.id, kind, now,
                                            transient_limit=self.transient_limit,
                                            occurred_at=occurred_at)

    def bounce(self, token: str, kind: str, *, now: datetime, refused: Sequence[str] = (),
               issue_id: str | None = None) -> tuple[Subscriber, str] | None:
        """Apply ``kind`` to the subscriber of the bounced message's unsubscribe ``token``.

        Only the token decides whose mail it was, never an address the notification names
        (anyone can write one). A permanent bounce from a mailbox in ``refused`` that is not
        the subscriber's (a dead forwarding address) counts as transient only."""
        if kind not in ("bounce-permanent", "bounce-transient"):
            raise ValueError(f"not a bounce: {kind!r}")
        subscriber = self.store.get(verify_token(self.keys, token, "unsubscribe", now))
        if subscriber is None:
            return None
        theirs = {_mailbox(address) for address in refused}
        if kind == "bounce-permanent" and theirs and _mailbox(subscriber.email) not in theirs:
            kind = "bounce-transient"
        try:
            if kind == "bounce-permanent":
                return mark_bounced(self.store, subscriber.id, issue_id, now), kind
            return self.store.record_mail_event(subscriber.id, kind, now,
                                                transient_limit=self.transient_limit), kind
        except UnknownSubscriber:  # removed meanwhile
            return None


def mark_bounced(store: DeliveryStore | _Store, subscriber_id: str, issue_id: str | None,
                 now: datetime) -> Subscriber:
    """The subscriber's mailbox does not exist: no later issue goes there, and the message of
    ``issue_id``, when known, counts in that issue's bounce rate."""
    if issue_id:
        store.note_feedback(issue_id, subscriber_id, "bounce")
    # A permanent bounce stops mail at once: the transient count's limit plays no part.
    return store.record_mail_event(subscriber_id, "bounce-permanent", now, transient_limit=1)


def _mailbox(address: str) -> str:
    """One spelling of a mailbox, so two compare equal: case aside, the domain in either form."""
    local, _, domain = address.strip().lower().rpartition("@")
    with contextlib.suppress(UnicodeError):
        domain = domain.encode("idna").decode("ascii")
    return f"{local}@{domain}"
