"""Mail in: where the mails people send to the newsletter wait. One small interface, two
adapters.

An SES receipt rule stores each inbound mail, raw, under an S3 prefix (``s3.py``); by default
the same raw files sit in a local folder (``local.py``), where a hand-dropped ``.eml`` goes
too. A handled mail is moved aside to ``processed/`` or ``ignored/``, out of the next run's
way. Adapters raise only :class:`InboxError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal, Protocol, get_args

from pipeline.errors import NewsletterError
from pipeline.resource import Resource

__all__ = ["OUTCOMES", "SETUP_NOTIFICATION", "InboundMail", "Inbox", "InboxError", "Outcome",
           "check_move", "is_mail_name", "mail_key"]

#: The object SES writes under the prefix when the receipt rule is created: not a mail.
SETUP_NOTIFICATION = "AMAZON_SES_SETUP_NOTIFICATION"

Outcome = Literal["processed", "ignored"]

#: Where a mail is moved once handled: ``<inbox>/processed/`` or ``<inbox>/ignored/``.
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)


class InboxError(NewsletterError):
    """The inbox cannot be read or a mail cannot be moved aside. Exit 1: the input is fine,
    the machine's state is not; mails already handled stay handled."""

    exit_code = 1

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"inbox {where}: {message}")


@dataclass(frozen=True)
class InboundMail:
    """One raw mail waiting in the inbox; ``key`` is its name inside the inbox, what
    :meth:`Inbox.move_aside` takes."""

    key: str
    raw: bytes = field(repr=False)


class Inbox(Resource, Protocol):
    """Where inbound mail waits. An adapter may subclass this to inherit ``with`` support
    (``__exit__`` closes it)."""

    def pending(self) -> Iterator[InboundMail]:
        """The mails not yet moved aside, oldest first. Never SES's setup notification,
        never what is already in ``processed/`` or ``ignored/``."""

    def move_aside(self, key: str, outcome: Outcome) -> None:
        """Move the mail to ``processed/`` or ``ignored/``; one already gone is fine."""

    def describe(self) -> str:
        """Where this inbox is (a folder, ``s3://bucket/prefix/``): for messages, and part
        of each mail's once-only key, so it must not change between runs."""


def is_mail_name(name: str) -> bool:
    """A waiting mail's name: not a sub-folder's content, a dotfile, an editor's or a
    copier's temporary file, or SES's setup notification."""
    return (bool(name) and "/" not in name and not name.startswith((".", "~"))
            and not name.endswith(("~", ".tmp", ".part")) and name != SETUP_NOTIFICATION)


def check_move(key: str, outcome: str) -> None:
    """Refuse an unknown outcome, or a key that is not a waiting mail's name: a bug in the
    caller, never a path outside the inbox."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; known: {', '.join(OUTCOMES)}")
    if not is_mail_name(key) or "\\" in key:
        raise ValueError(f"not a waiting mail's name: {key!r}")


def mail_key(where: str, key: str) -> str:
    """The once-only key of the mail ``key`` of the inbox described as ``where``."""
    return "mail:" + hashlib.sha256((where + key).encode("utf-8")).hexdigest()
