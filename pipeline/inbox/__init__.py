"""Mail in: the mails people send to the newsletter, and what ``newsletter inbox process``
does with them.

An SES receipt rule stores each inbound mail, raw, as one object under an S3 prefix
(``[inbox] source = "s3"``, ``bucket``, ``prefix``); by default the same raw files sit in a
local folder (``[inbox] dir``, ``data/inbox``), which is also where a hand-dropped ``.eml``
goes. Two kinds of mail are understood:

* **Unsubscribe.** The ``mailto:`` of every issue's ``List-Unsubscribe`` is
  ``<local>+<token>@domain`` (:func:`subscribers.tokens.tagged_address`): a mail to it
  unsubscribes the token's subscriber. The token is signed, so it authenticates itself;
  the configured address is not needed to recognise it.
* **Subscribe.** A mail whose subject, or first line, is ``subscribe`` or ``订阅``
  (optionally followed by one layout word) starts the double opt-in for its ``From``
  address: a confirmation mail goes there, and nothing else happens until its owner
  confirms. A forged ``From`` therefore costs its real owner one ignorable mail, no more.

Everything else, and mail that SES's checks condemned (:func:`classify`), is ignored. Each
mail is then moved aside, out of the way of the next run: ``processed/`` or ``ignored/``
under the folder or the prefix.

**Once only.** Before acting on a mail, its key (``mail:`` + sha256 of the inbox and the
mail's name) is recorded in the store (:meth:`~subscribers.store.sqlite.SqliteStore.first_time`).
A run that crashed after acting but before moving the mail aside finds the key on the next
run, and only moves the mail. When the confirmation mail cannot be sent, the key is
forgotten again and the mail stays where it is, for the next run to retry.

:func:`classify` is pure (bytes in, :class:`Verdict` out); :func:`process` does the I/O
through an :class:`Inbox` and :class:`~subscribers.subscriptions.Subscriptions`. boto3 is
only touched by :class:`S3Inbox`, imported lazily. No token and no whole address is ever
put in a report or an error message.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal, Protocol

from pipeline.core.inbound import Verdict, classify
from pipeline.errors import NewsletterError, PermanentFailure, TransportError, Unconfirmed
from subscribers.errors import InvalidAddress, TokenError
from subscribers.model import DEFAULT_LAYOUT

if TYPE_CHECKING:
    from pipeline.config import Settings
    from subscribers.subscriptions import Subscriptions

__all__ = [
    "COUNTS",
    "OUTCOMES",
    "SETUP_NOTIFICATION",
    "InboundMail",
    "Inbox",
    "InboxError",
    "InboxReport",
    "LocalInbox",
    "check_move",
    "is_mail_name",
    "mail_key",
    "open_inbox",
    "process",
]

#: The object SES writes under the prefix when the receipt rule is created: not a mail.
SETUP_NOTIFICATION = "AMAZON_SES_SETUP_NOTIFICATION"

Outcome = Literal["processed", "ignored"]

#: Where a mail is moved once handled: ``<inbox>/processed/`` or ``<inbox>/ignored/``.
OUTCOMES: tuple[Outcome, ...] = ("processed", "ignored")


#: The counts of an :class:`InboxReport`, in the order its summary names them.
COUNTS: tuple[str, ...] = ("unsubscribed", "subscribe", "ignored", "unrecognised",
                           "bad-token", "duplicate", "retry-later")


class InboxError(NewsletterError):
    """The inbox cannot be read or a mail cannot be moved aside (a folder without
    permission, a bucket that does not exist, no credentials). Exit 1: the input is fine,
    the machine's state is not; mails already handled stay handled."""

    exit_code = 1

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"inbox {where}: {message}")
        self.where = where


# -- the mails and where they wait ---------------------------------------------------------


@dataclass(frozen=True)
class InboundMail:
    """One raw mail waiting in the inbox. ``key`` is its name inside the inbox (a file
    name, or an object key without the prefix): what :meth:`Inbox.move_aside` takes."""

    key: str
    raw: bytes = field(repr=False)


class Inbox(Protocol):
    """Where inbound mail waits."""

    def pending(self) -> Iterator[InboundMail]:
        """The mails not yet moved aside, oldest first. Never SES's setup notification,
        never what is already in ``processed/`` or ``ignored/``."""
        ...

    def move_aside(self, key: str, outcome: Outcome) -> None:
        """Move the mail to ``processed/`` or ``ignored/``; one already gone is fine."""
        ...

    def describe(self) -> str:
        """Where this inbox is (a folder, ``s3://bucket/prefix/``): for messages, and part
        of each mail's once-only key, so it must not change between runs."""
        ...

    def close(self) -> None:
        """Release what the inbox holds (an S3 client it built)."""
        ...


def is_mail_name(name: str) -> bool:
    """A waiting mail's name: not a sub-folder's content, a dotfile, an editor's or a
    copier's temporary file, or SES's setup notification."""
    return (bool(name) and "/" not in name and not name.startswith((".", "~"))
            and not name.endswith(("~", ".tmp", ".part")) and name != SETUP_NOTIFICATION)


class LocalInbox:
    """Raw mails as files in ``folder`` (not its sub-folders). A missing folder is an
    empty inbox. Moving aside is an ``os.replace`` into ``processed/`` or ``ignored/``,
    atomic within the folder."""

    name = "local"

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def describe(self) -> str:
        return str(self.folder)

    def pending(self) -> Iterator[InboundMail]:
        for name in self._waiting():
            try:
                raw = (self.folder / name).read_bytes()
            except FileNotFoundError:  # moved aside by another run meanwhile
                continue
            except OSError as exc:
                raise InboxError(self.describe(),
                                 f"cannot read {name}: {exc.strerror or exc}") from exc
            yield InboundMail(name, raw)

    def _waiting(self) -> list[str]:
        """The mail files' names, oldest (modification time) first."""
        found: list[tuple[int, str]] = []
        try:
            with os.scandir(self.folder) as entries:
                for entry in entries:
                    if not is_mail_name(entry.name):
                        continue
                    try:
                        if entry.is_file(follow_symlinks=False):
                            found.append((entry.stat(follow_symlinks=False).st_mtime_ns,
                                          entry.name))
                    except FileNotFoundError:
                        continue
        except FileNotFoundError:
            return []  # no folder yet: nothing has arrived
        except OSError as exc:
            raise InboxError(self.describe(),
                             f"cannot list the folder: {exc.strerror or exc}") from exc
        return [name for _, name in sorted(found)]

    def move_aside(self, key: str, outcome: Outcome) -> None:
        check_move(key, outcome)
        target = self.folder / outcome
        try:
            target.mkdir(exist_ok=True)
            os.replace(self.folder / key, target / key)
        except FileNotFoundError:
            if (self.folder / key).exists():
                raise InboxError(self.describe(), f"cannot move {key} to {outcome}/") from None
            # already moved aside (by another run): nothing left to do
        except OSError as exc:
            raise InboxError(self.describe(), f"cannot move {key} to {outcome}/: "
                             f"{exc.strerror or exc}") from exc

    def close(self) -> None:
        pass


def check_move(key: str, outcome: str) -> None:
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; known: {', '.join(OUTCOMES)}")
    if not is_mail_name(key) or key in (".", "..") or "\\" in key:
        raise ValueError(f"not a waiting mail's name: {key!r}")


def open_inbox(settings: Settings) -> Inbox:
    """The deployment's inbox: ``[inbox] dir`` (resolved against the configuration's
    folder), or ``s3://[inbox] bucket/[inbox] prefix`` with AWS's own region, endpoint and
    credentials settings. The caller closes it."""
    s = settings.inbox
    if s.source == "s3":
        from pipeline.archive.s3 import s3_client
        from pipeline.inbox.s3 import S3Inbox

        return S3Inbox(s.bucket, s.prefix, s3_client(), owns_client=True)
    return LocalInbox(settings.resolve(s.dir))


# -- acting on the mails -------------------------------------------------------------------


def mail_key(where: str, key: str) -> str:
    """The once-only key of the mail ``key`` of the inbox described as ``where``."""
    return "mail:" + hashlib.sha256((where + key).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class InboxReport:
    """What one run did, in counts only: no token, no address.

    ``counts`` by :data:`COUNTS` (``subscribe`` counts requests, whatever their outcome;
    ``duplicate`` mails were handled by an earlier run that stopped before moving them;
    ``retry-later`` ones stayed in place because the confirmation mail could not be sent),
    ``ignored`` by reason, ``requests`` by :class:`~subscribers.subscriptions.RequestOutcome`.
    """

    inbox: str
    counts: Mapping[str, int] = field(default_factory=dict)
    ignored: Mapping[str, int] = field(default_factory=dict)
    requests: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        """``inbox data/inbox: 5 mails: 2 unsubscribed, 1 subscribe request
        (confirmation-sent 1), 1 ignored (spam 1), 1 unrecognised``."""
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
    with reason "invalid-address"). Both go to ``processed/``. ``ignored`` and
    ``unrecognised`` mails do nothing and go to ``ignored/``.

    With ``store_keys`` (the default) a mail to act on is first recorded in the store by
    :func:`mail_key`; a key already there means an earlier run acted on it and stopped
    before moving it: it is moved to ``processed/`` without acting again (``duplicate``).
    If sending the confirmation fails (any :class:`~pipeline.errors.TransportError`) the
    key is forgotten and the mail left in place (``retry-later``); the run goes on. Any
    other error forgets the key too, then stops the run. ``store_keys=False`` acts on
    every mail without recording anything (only for a store that cannot record).
    """
    counts: Counter[str] = Counter()
    ignored: Counter[str] = Counter()
    requests: Counter[str] = Counter()
    store = subscriptions.store
    where = inbox.describe()
    for mail in inbox.pending():
        verdict = classify(mail.raw)
        if verdict.action in ("ignored", "unrecognised"):
            counts[verdict.action] += 1
            if verdict.action == "ignored":
                ignored[verdict.reason] += 1
            inbox.move_aside(mail.key, "ignored")
            continue
        # An unsubscribe is idempotent: done again after a crash, it changes nothing, so
        # it needs no once-only key (and a key recorded before a crash would lose it).
        keyed = store_keys and verdict.action == "subscribe"
        key = mail_key(where, mail.key)
        if keyed and not store.first_time(key, now):
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
            if keyed:
                store.forget(key)
            counts["retry-later"] += 1
            continue
        except BaseException:
            if keyed:
                with contextlib.suppress(Exception):
                    store.forget(key)
            raise
        counts[outcome.category] += 1
        if outcome.detail and outcome.category == "ignored":
            ignored[outcome.detail] += 1
        elif outcome.detail:
            requests[outcome.detail] += 1
        inbox.move_aside(mail.key, outcome.folder)
    return InboxReport(where, MappingProxyType(dict(counts)),
                       MappingProxyType(dict(ignored)), MappingProxyType(dict(requests)))


@dataclass(frozen=True)
class _Acted:
    category: str
    folder: Outcome
    detail: str | None = None


def _act(verdict: Verdict, subscriptions: Subscriptions, now: datetime) -> _Acted:
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

