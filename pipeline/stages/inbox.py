"""``newsletter inbox process``: what is done with the mails people send to the newsletter.

An unsubscribe (a mail to a signed token address) unsubscribes; a ``subscribe`` starts the
double opt-in for ``From`` (a forged one costs its owner one ignorable mail); a bounce acts on
the signed token of the returned message, never the addresses it names. Subscribes and
bounces are acted on once: their key is recorded first, so a run that crashed before moving
the mail only moves it next time. No token or whole address reaches a report or an error.
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
#: How the summary says a count, where it is not its name.
_SAID = {"subscribe": "subscribe request{s}", "bounce": "bounce{s}",
         "bad-token": "with a bad token", "retry-later": "left for the next run"}


@dataclass(frozen=True)
class InboxReport:
    """What one run did, in counts only (no token, no address): ``counts`` by
    :data:`COUNTS`, then ``ignored`` by reason, ``requests`` by outcome, ``bounces`` by kind."""

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
        details = {"subscribe": self.requests, "bounce": self.bounces,
                   "ignored": self.ignored}
        parts = [f"{n} " + _SAID.get(name, name).format(s="s" if n != 1 else "")
                 + _breakdown(details.get(name, {}))
                 for name in COUNTS if (n := self.counts.get(name, 0))]
        plural = "s" if self.total != 1 else ""
        return f"inbox {self.inbox}: {self.total} mail{plural}: {', '.join(parts)}"


def _breakdown(counts: Mapping[str, int]) -> str:
    shown = ", ".join(f"{name} {n}" for name, n in sorted(counts.items()) if n)
    return f" ({shown})" if shown else ""


def process(inbox: Inbox, subscriptions: Subscriptions, now: datetime) -> InboxReport:
    """Handle every waiting mail once, oldest first, and move it aside.

    A confirmation the transport could not send forgets its key and leaves the mail
    (``retry-later``); any other error forgets it too, then stops the run.
    """
    counts: Counter[str] = Counter()
    details: dict[str, Counter[str]] = {"ignored": Counter(), "subscribe": Counter(),
                                        "bounce": Counter()}
    handled = subscriptions.handled
    where = inbox.describe()
    for mail in inbox.pending():
        verdict = classify(mail.raw)
        key = _once_key(verdict, where, mail.key)
        if verdict.action in ("ignored", "unrecognised"):
            outcome = _Acted(verdict.action, "ignored", verdict.reason)
        elif key is not None and not handled.first_time(key, now):
            outcome = _Acted("duplicate", "processed")
        else:
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
        if outcome.detail and outcome.category in details:
            details[outcome.category][outcome.detail] += 1
        inbox.move_aside(mail.key, outcome.folder)
    frozen = {name: MappingProxyType(dict(counter)) for name, counter in details.items()}
    return InboxReport(where, MappingProxyType(dict(counts)), frozen["ignored"],
                       frozen["subscribe"], frozen["bounce"])


def _once_key(verdict: Verdict, where: str, name: str) -> str | None:
    """The once-only key of a mail to act on; None for an unsubscribe, which a key recorded
    just before a crash would lose."""
    if verdict.action == "subscribe":
        return mail_key(where, name)
    if verdict.action == "bounce":  # a permanent one may be counted as transient too
        assert verdict.token is not None  # noqa: S101 - classify sets it for bounce
        return bounce_key(verdict.token, verdict.reference) or mail_key(where, name)
    return None


def bounce_key(token: str, message_id: str | None) -> str | None:
    """The once-only key of a bounce, from the token and the returned message's
    ``Message-ID``: one message bounces at most once, whichever mail brings the notice."""
    if not message_id:
        return None
    return "dsn:" + hashlib.sha256(f"{token}\n{message_id}".encode()).hexdigest()


@dataclass(frozen=True)
class _Acted:
    category: str
    folder: Outcome
    detail: str | None = None


def _act(verdict: Verdict, subscriptions: Subscriptions, now: datetime) -> _Acted:
    if verdict.action == "subscribe":
        assert verdict.sender is not None  # noqa: S101 - classify sets it for subscribe
        try:
            outcome = subscriptions.request(verdict.sender, verdict.layout or DEFAULT_LAYOUT,
                                            source="mail", now=now)
        except InvalidAddress:
            return _Acted("ignored", "ignored", "invalid-address")
        return _Acted("subscribe", "processed", str(outcome))
    assert verdict.token is not None  # noqa: S101 - classify sets it for the other two
    try:
        if verdict.action == "unsubscribe":
            subscriptions.unsubscribe(verdict.token, now=now)
            return _Acted("unsubscribed", "processed")
        applied = subscriptions.bounces.bounce(verdict.token, verdict.reason, now=now,
                                               refused=verdict.refused,
                                               issue_id=issue_of(verdict.reference))
    except TokenError:
        return _Acted("bad-token", "ignored")
    if applied is None:
        return _Acted("ignored", "ignored", "dsn-no-subscriber")
    return _Acted("bounce", "processed", applied[1].removeprefix("bounce-"))
