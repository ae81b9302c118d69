"""Transports: how one finished message leaves. One small interface, three adapters.

    class Transport(Protocol):
        name: str
        def send(self, message: Outgoing) -> str      # the id the transport gives it
        def max_rate(self) -> float | None            # its own limit, messages/s, if known
        def close(self) -> None

``send`` is called from several threads at once and must be safe for that. It raises only
the :class:`~pipeline.errors.TransportError` subclasses, each mapped at the adapter's edge
(keeping the cause):

* :class:`PermanentFailure` — this recipient will never take the message: recorded, the run
  goes on;
* :class:`TemporaryFailure` — throttled or busy: the sender retries with backoff and jitter;
* :class:`Unconfirmed` — it may have been accepted (a timeout after the data went out): the
  sender records it as unconfirmed and never retries it blindly;
* :class:`SendingStopped` — the account cannot send now: the run stops, resumable (exit 4).

``outbox`` (here) writes one ``.eml`` per message; ``smtp`` and ``ses`` live in their own
modules so that boto3 is imported only by the SES adapter.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pipeline.errors import ConfigError, SendingStopped
from pipeline.output import write_file


@dataclass(frozen=True)
class Outgoing:
    """One finished message for one recipient."""

    #: The envelope recipient (one per message: a bounce names exactly one subscriber).
    recipient: str
    #: The envelope sender (the address part of ``From``).
    sender: str
    #: The whole RFC 5322 message, CRLF line endings.
    raw: bytes
    #: A stable name for this message: ``<issue>/<subscriber id>`` or ``<issue>/test-<layout>``.
    key: str
    #: Tags a transport may attach (SES message tags): e.g. {"issue": "2026-W48"}.
    tags: Mapping[str, str] = field(default_factory=dict)


class Transport(Protocol):
    name: str

    def send(self, message: Outgoing) -> str: ...

    def max_rate(self) -> float | None: ...

    def close(self) -> None: ...


_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]")


class OutboxTransport:
    """Writes each message to ``<folder>/<key>.eml``: the embedded default, and a proof.

    A file is written to a temporary name and renamed, so a crash never leaves half a
    message; the id returned is the file's name.

    Nothing that goes wrong here is about the recipient: a full disk, a read-only mount or
    a folder without permission (ENOSPC, EROFS, EACCES, EDQUOT, ...) would refuse every
    later message alike. So any ``OSError`` is :class:`SendingStopped`: the run stops
    resumably (exit 4) with the claims it had not handed over released, and a re-run once
    the disk has room sends the rest. The temporary file of the failed write is removed.
    """

    name = "outbox"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def send(self, message: Outgoing) -> str:
        name = _UNSAFE.sub("_", message.key.replace("/", "--")) + ".eml"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_file(self.folder / name, message.raw, suffix=".eml")
        except OSError as exc:
            raise SendingStopped(f"outbox {self.folder}: cannot write {name}: "
                                 f"{_why(exc)}", recipient=message.recipient) from exc
        return f"outbox:{name}"

    def max_rate(self) -> float | None:
        return None

    def close(self) -> None:
        pass


def _why(exc: OSError) -> str:
    """``No space left on device (ENOSPC)``: the words, and the name to search for."""
    code = errno.errorcode.get(exc.errno or 0)
    words = exc.strerror or str(exc)
    return f"{words} ({code})" if code else words


def require_secret(environ: Mapping[str, str], transport: str) -> None:
    """Real transports carry signed links: they refuse to start without a secret."""
    if not environ.get("NEWSLETTER_SECRET"):
        raise ConfigError(f"the {transport} transport needs NEWSLETTER_SECRET in the "
                          "environment (it signs every unsubscribe and preferences link)")
