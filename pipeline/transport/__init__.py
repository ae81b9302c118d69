"""Transports: how one finished message leaves. One small interface, three adapters.

``send`` is called from several threads at once. It raises only these
:class:`~pipeline.errors.TransportError` subclasses, mapped at the adapter's edge:
:class:`PermanentFailure` (this recipient, never: the run goes on), :class:`TemporaryFailure`
(the sender retries with backoff), :class:`Unconfirmed` (it may have been accepted: never
retried blindly) and :class:`SendingStopped` (the run stops, resumable: exit 4).
:func:`pipeline.wiring.open_transport` builds the one ``[delivery] transport`` names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Protocol

from pipeline.errors import ConfigError
from pipeline.model import Outgoing
from pipeline.resource import Resource

__all__ = ["ACCOUNT_STOPPED", "THROTTLED", "Outgoing", "Transport", "require_secret",
           "without_addresses"]

#: Words that mean the *account* cannot send now, whatever code carries them: a stop. Not a
#: bare "quota exceeded": that is also one reader's full mailbox (552 5.2.2).
ACCOUNT_STOPPED = re.compile(
    r"daily message quota exceeded|account is paused|account paused|sending (?:is )?paused"
    r"|account (?:is )?suspended|sending quota exceeded|sending limit exceeded",
    re.IGNORECASE,
)
#: Words that mean "slower, please": a temporary failure, whatever code carries them.
THROTTLED = re.compile(r"throttling|maximum sending rate exceeded", re.IGNORECASE)
#: An address in a server's words: a refused recipient's name ("throttling-alerts@…") says
#: nothing about the account, so the two patterns above never read it.
_ADDRESS = re.compile(r"\S+@\S+")


def without_addresses(said: str) -> str:
    """``said`` with each address in it blanked: what ACCOUNT_STOPPED and THROTTLED read."""
    return _ADDRESS.sub(" ", said)


class Transport(Resource, Protocol):
    """How a message leaves; subclass it for ``with`` support, or match it by shape."""

    #: Which adapter, as the send report records it (never a reason to branch).
    name: str
    #: True when messages reach real mailboxes: their links must then be https, and
    #: :meth:`probe` asks the server; False for a transport that writes files.
    reaches_mailboxes: bool

    def send(self, message: Outgoing) -> str:
        """Hand one message over; the id the transport gives it."""

    def probe(self) -> float | None:
        """Check, before the first message, that the transport will take mail at all,
        raising as the first message would; its own limit in messages/s, if it knows one."""

    def describe(self) -> str:
        """Which transport, and where to, in one line (never a login or a password)."""

    def location(self, message_id: str) -> str:
        """Where a sent message can be found, for a log line (the outbox's file)."""
        return message_id

    def close(self) -> None:
        """Release connections and clients (call once the sending threads are done)."""


def require_secret(environ: Mapping[str, str], transport: str) -> None:
    """Real transports carry signed links: they refuse to start without a secret."""
    if not environ.get("NEWSLETTER_SECRET"):
        raise ConfigError(f"the {transport} transport needs NEWSLETTER_SECRET in the "
                          "environment (it signs every unsubscribe and preferences link)")
