"""``newsletter inbox process``: what is done with the mails people send to the newsletter.

Three kinds of mail are understood:

* **Unsubscribe.** The ``mailto:`` of every issue's ``List-Unsubscribe`` is
  ``<local>+<token>@domain`` (:func:`subscribers.tokens.tagged_address`): a mail to it
  unsubscribes the token's subscriber. The token is signed, so it authenticates itself;
  the configured address is not needed to recognise it.
* **Subscribe.** A mail whose subject, or first line, is ``subscribe`` or ``订阅``
  (optionally followed by one layout word) starts the double opt-in for its ``From``
  address: a confirmation mail goes there, and nothing else happens until its owner
  confirms. A forged ``From`` therefore costs its real owner one ignorable mail, no more.
* **Bounce.** A delivery status notification (RFC 3464) that a mail server sends back,
  days later, to the envelope sender (``[smtp] return_path``) about one of our messages:
  when a recipient failed for good, the subscriber of the signed unsubscribe token in the
  returned message's ``List-Unsubscribe`` is marked ``bounced`` (the mailbox is gone) or
  has a transient bounce counted (any other permanent failure;
  ``[subscriptions] transient_bounce_limit`` in a row bounce it too). The addresses the
  notification names are never used: anyone can write one (:mod:`pipeline.core.mail_in.dsn`).

Everything else, and mail that SES's checks condemned
(:func:`~pipeline.core.mail_in.inbound.classify`),
is ignored. Each mail is then moved aside, out of the way of the next run: ``processed/`` or
``ignored/`` under the folder or the prefix.

**Once only.** Before acting on a mail, its key (:func:`~pipeline.inbox.mail_key`: ``mail:`` +
sha256 of the inbox and the mail's name) is recorded in the store
(:meth:`~subscribers.store.OnceKeys.first_time`). A run that crashed after acting but
before moving the mail aside finds the key on the next run, and only moves the mail. When the
confirmation mail cannot be sent, the key is forgotten again and the mail stays where it is,
for the next run to retry. A bounce is applied once per returned message
(:func:`bounce_key`), so the same notification delivered twice, or processed again after a
crash, does not count a transient bounce twice (a permanent one from a mailbox that is not
the subscriber's counts as transient, so bounces of both kinds are keyed). Unsubscribes
need no key: done again, they change nothing, while a key recorded just before a crash
would lose them.

:func:`~pipeline.core.mail_in.inbound.classify` is pure (bytes in, verdict out);
:func:`process` does
the I/O through the :class:`~pipeline.inbox.Inbox` and the
:class:`~subscribers.subscriptions.Subscriptions` it is given. No token and no whole address
is ever put in a report or an error message.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING

from pipeline.core.mail_in.dsn import issue_of
from pipeline.core.mail_in.inbound import Verdict, classify
from pipeline.errors import PermanentFailure, TransportError, Unconfirmed
from pipeline.inbox import Inbox, Outcome, mail_key
from subscribers.errors import InvalidAddress, TokenError
from subscribers.model import DEFAULT_LAYOUT

if TYPE_CHECKING:
    from subscribers.subscriptions import Subscriptions

__all__ = ["COUNTS", "InboxReport", "bounce_key", "process"]

#: The counts of an :class:`InboxReport`, in the order its summary names them.
COUNTS: tuple[str, ...] = ("unsubscribed", "subscribe", "bounce", "ignored", "unrecognised",
                           "bad-token", "duplicate", "retry-later")


@dataclass(frozen=True)
class InboxReport:
    """What one run did, in counts only: no token, no address.

    ``counts`` by :data:`COUNTS` (``subscribe`` counts requests, whatever their outcome;
    ``bounce`` the delivery status notifications applied to a subscriber; ``duplicate``
    mails were handled by an earlier run that stopped before moving them; ``retry-later``
    ones stayed in place because the confirmation mail could not be sent), ``ignored`` by
    reason, ``requests`` by :class:`~subscribers.subscriptions.RequestOutcome`, ``bounces``
    by kind (``permanent``, ``transient``).
    """

    inbox: str
    counts: Mapping[str, int] = field(default_factory=dict)
    ignored: Mapping[str, int] = field(default_factory=dict)
    requests: Mapping[str, int] = field(default_factory=dict)
    bounces: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        """``inbox data/inbox: 6 mails: 2 unsubscribed, 1 subscribe request
        (confirmation-sent 1), 1 bounce (permanent 1), 1 ignored (spam 1), 1 unrecognised``."""
        if not self.total:
            return f"inbox {self.inbox}: no mail waiting"
        parts = []
        for name in COUNTS:
            n = self.counts.get(name, 0)
            if not n:
                continue
            if name == "subscribe":
                parts.append(f"{n} subscribe request{'s' if n != 1 else ''}"
                             + _breakdown(self.requests))
            elif name == "bounce":
                parts.append(f"{n} bounce{'s' if n != 1 else ''}" + _breakdown(self.bounces))
            elif name == "ignored":
                parts.append(f"{n} ignored" + _breakdown(self.ignored))
            elif name == "bad-token":
                parts.append(f"{n} with a bad token")
            elif name == "retry-later":
                parts.append(f"{n} left for the next run")
            else:
                parts.append(f"{n} {name}")
        total = self.total
        return f"inbox {self.inbox}: {total} mail{'s' if total != 1 else ''}: {', '.join(parts)}"


def _breakdown(counts: Mapping[str, int]) -> str:
    shown = ", ".join(f"{name} {n}" for name, n in sorted(counts.items()) if n)
    return f" ({shown})" if shown else ""


def process(inbox: Inbox, subscriptions: Subscriptions, now: datetime, *,
            store_keys: bool = True) -> InboxReport:
    """Handle every waiting mail once, oldest first, and move it aside.

    ``unsubscribe`` → :meth:`Subscriptions.unsubscribe` (a token that does not verify:
    counted ``bad-token``, moved to ``ignored/``); ``subscribe`` →
    :meth:`Subscriptions.request` with ``source="mail"`` and the layout asked for (else
    the default), which mails the confirmation (an address that is not one: ``ignored``
    with reason "invalid-address"); ``bounce`` → :meth:`Subscriptions.bounce` (a token
    that does not verify: ``bad-token``; a subscriber removed since: ``ignored`` with reason
    "dsn-no-subscriber"). All three go to ``processed/``. ``ignored`` and
    ``unrecognised`` mails do nothing and go to ``ignored/``.

    With ``store_keys`` (the default) a subscribe mail is first recorded in the store by
    :func:`mail_key`, and a transient bounce by :func:`bounce_key`; a key already there
    means an earlier run acted on it (or on the same notification in another mail) and
    stopped before moving it: it is moved to ``processed/`` without acting again
    (``duplicate``).
    If sending the confirmation fails (any :class:`~pipeline.errors.TransportError`) the
    key is forgotten and the mail left in place (``retry-later``); the run goes on. Any
    other error forgets the key too, then stops the run. ``store_keys=False`` acts on
    every mail without recording anything (only for a store that cannot record).
    """
    counts: Counter[str] = Counter()
    ignored: Counter[str] = Counter()
    requests: Counter[str] = Counter()
    bounces: Counter[str] = Counter()
    handled = subscriptions.handled
    where = inbox.describe()
    for mail in inbox.pending():
        verdict = classify(mail.raw)
        if verdict.action in ("ignored", "unrecognised"):
            counts[verdict.action] += 1
            if verdict.action == "ignored":
                ignored[verdict.reason] += 1
            inbox.move_aside(mail.key, "ignored")
            continue
        key = _once_key(verdict, where, mail.key) if store_keys else None
        if key is not None and not handled.first_time(key, now):
            counts["duplicate"] += 1
            inbox.move_aside(mail.key, "processed")
            continue
        try:
            outcome = _act(verdict, subscriptions, now)
        except Unconfirmed:  # the mail may have left: do not send it twice
            outcome = _Acted("subscribe", "processed", "unconfirmed")
        except PermanentFailure:  # this address will never take it: stop trying
            outcome = _Acted("ignored", "ignored", "undeliverable")
        except TransportError:  # throttled, or the account paused: the next run retries
            if key is not None:
                handled.forget(key)
            counts["retry-later"] += 1
            continue
        except BaseException:
            if key is not None:
                with contextlib.suppress(Exception):
                    handled.forget(key)
            raise
        counts[outcome.category] += 1
        if outcome.detail:
            {"ignored": ignored, "bounce": bounces}.get(outcome.category,
                                                        requests)[outcome.detail] += 1
        inbox.move_aside(mail.key, outcome.folder)
    return InboxReport(where, MappingProxyType(dict(counts)),
                       MappingProxyType(dict(ignored)), MappingProxyType(dict(requests)),
                       MappingProxyType(dict(bounces)))


def _once_key(verdict: Verdict, where: str, name: str) -> str | None:
    """The once-only key of a mail to act on, or None for one that needs none: an
    unsubscribe changes nothing when done again after a crash (and a key recorded just
    before the crash would lose it)."""
    if verdict.action == "subscribe":
        return mail_key(where, name)
    if verdict.action == "bounce":  # a permanent one may be counted as transient too
        assert verdict.token is not None  # noqa: S101 - classify sets it for bounce
        return bounce_key(verdict.token, verdict.reference) or mail_key(where, name)
    return None


def bounce_key(token: str, message_id: str | None) -> str | None:
    """The once-only key of a transient bounce: ``dsn:`` + sha256 of the token and the
    returned message's ``Message-ID`` (each message we send has its own), so one message
    bounces at most once, whichever mail, run or inbox brings the notification. None
    without a ``Message-ID`` (the mail's own key is used then)."""
    if not message_id:
        return None
    return "dsn:" + hashlib.sha256(f"{token}\n{message_id}".encode()).hexdigest()


@dataclass(frozen=True)
class _Acted:
    category: str
    folder: Outcome
    detail: str | None = None


def _act(verdict: Verdict, subscriptions: Subscriptions, now: datetime) -> _Acted:
    if verdict.action == "bounce":
        return _bounce(verdict, subscriptions, now)
    if verdict.action == "unsubscribe":
        assert verdict.token is not None  # noqa: S101 - classify sets it for unsubscribe
        try:
            subscriptions.unsubscribe(verdict.token, now=now)
        except TokenError:
            return _Acted("bad-token", "ignored")
        return _Acted("unsubscribed", "processed")
    assert verdict.sender is not None  # noqa: S101 - classify sets it for subscribe
    try:
        outcome = subscriptions.request(verdict.sender, verdict.layout or DEFAULT_LAYOUT,
                                        source="mail", now=now)
    except InvalidAddress:
        return _Acted("ignored", "ignored", "invalid-address")
    return _Acted("subscribe", "processed", str(outcome))


def _bounce(verdict: Verdict, subscriptions: Subscriptions, now: datetime) -> _Acted:
    assert verdict.token is not None  # noqa: S101 - classify sets it for bounce
    try:
        applied = subscriptions.bounces.bounce(verdict.token, verdict.reason, now=now,
                                               refused=verdict.refused,
                                               issue_id=issue_of(verdict.reference))
    except TokenError:
        return _Acted("bad-token", "ignored")
    if applied is None:
        return _Acted("ignored", "ignored", "dsn-no-subscriber")
    return _Acted("bounce", "processed", applied[1].removeprefix("bounce-"))
