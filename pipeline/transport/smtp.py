"""The ``smtp`` transport: any SMTP relay (SES's SMTP interface included) through smtplib.

One connection per sending thread (``threading.local``), opened on first use and reused for
every later message from that thread, so a run pays the TCP + STARTTLS + AUTH handshake once
per worker, not once per recipient.

What matters most is knowing, when something goes wrong, whether the server may already hold
the message. Each connection tracks how far the current transaction got:

``envelope``  MAIL / RCPT / the ``DATA`` command, before the server said 354. Nothing can have
              been accepted: a dropped or idle-closed connection is reopened once and the
              message tried again; a second loss is a :class:`TemporaryFailure`.
``body``      the message is being written. The server cannot accept it before the final
              ``<CRLF>.<CRLF>``, which is the last thing written, so a write that fails means
              "not accepted": :class:`TemporaryFailure` (the sender retries with backoff).
``verdict``   the whole body went out and we wait for the final reply. A timeout or a
              dropped connection here is :class:`Unconfirmed`: the server may have queued it,
              and sending it again could deliver it twice.

Replies are mapped at this edge, keeping the smtplib exception as the cause:

* "Daily message quota exceeded", "Account is paused", "sending paused", "account suspended"
  (whatever the code: SES's SMTP interface says ``454 Throttling failure: Daily message quota
  exceeded``) → :class:`SendingStopped`;
* "Throttling" / "Maximum sending rate exceeded" or any 4xx (421, 450, 451, 452, 454 …) →
  :class:`TemporaryFailure`;
* a 5xx to RCPT or to the message (550, 551, 553, 554 …) → :class:`PermanentFailure` for that
  recipient; a 5xx to ``MAIL FROM`` refuses the *sender*, so it would refuse every message:
  :class:`SendingStopped` rather than a list marked failed one recipient at a time;
* a connection that cannot be opened, secured or logged into → :class:`SendingStopped` naming
  ``host:port`` (a 4xx greeting, e.g. "421 too many connections", is temporary); a server
  that will not do STARTTLS → :class:`StartTlsRefused`, a configuration error before a run.

Addresses go out as :mod:`pipeline.core.addresses` writes them: the domain always in IDNA form; a
non-ASCII local part with ``SMTPUTF8`` (and ``BODY=8BITMIME``) when the server offers it, else
the message is refused for that recipient alone (:class:`PermanentFailure`, naming the
address) before anything is sent. A sender the server cannot take stops the run.
"""

from __future__ import annotations

import contextlib
import re
import smtplib
import socket
import ssl
import threading
import uuid
from typing import TYPE_CHECKING, Literal

from pipeline.config import SmtpSettings
from pipeline.core.addresses import UnsendableAddress, wire_address
from pipeline.errors import (
    ConfigError,
    PermanentFailure,
    SendingStopped,
    TemporaryFailure,
    TransportError,
    Unconfirmed,
)
from pipeline.transport import Outgoing, Transport

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

__all__ = ["SmtpTransport", "StartTlsRefused"]

Phase = Literal["idle", "envelope", "body", "verdict"]

#: Texts that mean the *account* cannot send now, whatever code carries them.
_STOPPED = re.compile(
    r"daily message quota exceeded|account is paused|account paused|sending (?:is )?paused"
    r"|account (?:is )?suspended",
    re.IGNORECASE,
)
_THROTTLED = re.compile(r"throttling|maximum sending rate exceeded", re.IGNORECASE)

#: Where common servers put their queue id in the final ``250`` reply.
_QUEUE_ID = (
    re.compile(r"queued as\s+<?([A-Za-z0-9][\w.@-]*)>?", re.IGNORECASE),  # Postfix, aiosmtpd
    re.compile(r"\bid=([\w.-]+)", re.IGNORECASE),                          # Exim
    re.compile(r"^ok\s+([0-9a-f][0-9a-f-]{15,})\s*$", re.IGNORECASE),      # SES SMTP interface
)

#: RFC 5321 4.5.2: a body line that starts with "." gets one more.
_LEADING_DOT = re.compile(rb"(?m)^\.")


class _Connection(smtplib.SMTP):
    """smtplib's client, with ``data()`` taken over to know how far a message got.

    ``sendmail`` is used as is; only ``data`` is replaced so that ``phase`` says whether the
    body left and ``final_reply`` keeps the server's last words (smtplib drops them).
    """

    phase: Phase = "idle"
    final_reply: bytes = b""

    def data(self, msg: ReadableBuffer | str) -> tuple[int, bytes]:
        # sendmail hands bytes; keep smtplib's contract (str or any buffer) anyway
        msg = msg.encode("ascii") if isinstance(msg, str) else bytes(msg)
        self.phase = "envelope"
        self.putcmd("data")
        code, reply = self.getreply()
        if code != 354:
            # smtplib raises here without resetting; reset so the connection stays usable
            # (after 421 the server is closing it anyway).
            if code != 421:
                with contextlib.suppress(smtplib.SMTPServerDisconnected):
                    self.rset()
            raise smtplib.SMTPDataError(code, reply)
        body = _LEADING_DOT.sub(b"..", msg)
        if not body.endswith(b"\r\n"):
            body += b"\r\n"
        self.phase = "body"
        self.send(body + b".\r\n")
        self.phase = "verdict"
        code, reply = self.getreply()
        self.final_reply = reply
        return code, reply

    def begin(self) -> None:
        """Reset the per-message state before a new transaction."""
        self.phase = "envelope"
        self.final_reply = b""


class StartTlsRefused(SendingStopped):
    """``[smtp] starttls = true`` and the server will not do STARTTLS. Mid-run it stops the
    run like any connection that cannot be opened; before the run (:meth:`SmtpTransport.verify`)
    it is the configuration error it is (exit 2)."""

    exit_code = 2


class _ConnectionLost(Exception):
    """Internal: the connection went away before the server could have taken the message."""


class SmtpTransport(Transport):
    """Sends each message with ``sendmail`` over a per-thread, reused SMTP connection.

    ``password`` comes from the environment (``NEWSLETTER_SMTP_PASSWORD``): the caller passes
    ``environ.get(...)``; it is required when ``settings.username`` is set. ``ssl_context``
    defaults to :func:`ssl.create_default_context` (tests pass one that trusts their own CA).
    ``timeout`` bounds every socket operation, including the wait for the final reply.
    """

    name = "smtp"
    reaches_mailboxes = True

    def __init__(self, settings: SmtpSettings, password: str | None, *,
                 timeout: float = 30.0, ssl_context: ssl.SSLContext | None = None) -> None:
        if settings.username and not password:
            raise ConfigError("[smtp] username is set but NEWSLETTER_SMTP_PASSWORD is not "
                              "in the environment")
        self.settings = settings
        self.timeout = timeout
        self._password = password or ""
        self._ssl_context = ssl_context
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[_Connection] = []

    @property
    def where(self) -> str:
        return f"{self.settings.host}:{self.settings.port}"

    # -- the Transport interface -------------------------------------------------------------

    def send(self, message: Outgoing) -> str:
        """Hand one message over; returns the server's queue id, else a generated one."""
        for attempt in (1, 2):
            conn = self._connection(message.recipient)
            try:
                reply = self._transact(conn, message)
            except _ConnectionLost as lost:
                self._discard(conn)
                if attempt == 2:
                    raise TemporaryFailure(
                        f"smtp {self.where}: connection lost before the message was sent, "
                        f"twice ({lost})", recipient=message.recipient) from lost.__cause__
                continue
            return _queue_id(reply) or f"smtp-{uuid.uuid4().hex}"
        raise AssertionError("unreachable")  # pragma: no cover

    def verify(self) -> None:
        """Connect, secure and log in once, then QUIT: what ``send`` and ``run`` check before
        anything is published or sent. Raises as the first message would."""
        conn = self._connect("")
        with contextlib.suppress(smtplib.SMTPException, OSError):
            conn.quit()
        conn.close()

    def probe(self) -> None:
        """:meth:`verify`: the relay takes a connection, STARTTLS and the login."""
        self.verify()

    def describe(self) -> str:
        """``smtp host:port``, and whether STARTTLS is asked for (never the login)."""
        return f"smtp {self.where}" + (" with STARTTLS" if self.settings.starttls else "")

    def max_rate(self) -> float | None:
        """SMTP relays do not announce a rate; pacing comes from ``[delivery] max_rate``."""
        return None

    def close(self) -> None:
        """QUIT every thread's connection (call once the sending threads are done)."""
        with self._lock:
            conns, self._open = self._open, []
        for conn in conns:
            try:
                conn.quit()
            except (smtplib.SMTPException, OSError):
                pass  # it is going away either way
            finally:
                conn.close()

    # -- connections -------------------------------------------------------------------------

    def _connection(self, recipient: str) -> _Connection:
        conn: _Connection | None = getattr(self._local, "conn", None)
        if conn is not None and conn.sock is not None:
            return conn
        if conn is not None:
            self._discard(conn)
        conn = self._connect(recipient)
        self._local.conn = conn
        with self._lock:
            self._open.append(conn)
        return conn

    def _discard(self, conn: _Connection) -> None:
        conn.close()
        with self._lock:
            if conn in self._open:
                self._open.remove(conn)
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None

    def _connect(self, recipient: str) -> _Connection:
        """Open, greet, secure and log in; failures stop the run (or are temporary on 4xx)."""
        s = self.settings
        conn: _Connection | None = None
        try:
            # Given the host, smtplib connects, reads the greeting (SMTPConnectError unless
            # 220) and remembers the name STARTTLS must verify the certificate against.
            conn = _Connection(s.host, s.port, timeout=self.timeout)
            conn.ehlo()
            if s.starttls:
                self._secure(conn, recipient)
            if s.username:
                conn.login(s.username, self._password)
        except StartTlsRefused:
            _close(conn)
            raise
        except smtplib.SMTPAuthenticationError as exc:
            _close(conn)
            raise SendingStopped(f"smtp {self.where}: login as {s.username!r} refused: "
                                 f"{_reply(exc.smtp_code, exc.smtp_error)}",
                                 recipient=recipient) from exc
        except smtplib.SMTPResponseException as exc:
            _close(conn)
            text = _reply(exc.smtp_code, exc.smtp_error)
            if 400 <= exc.smtp_code < 500 and not _STOPPED.search(text):
                raise TemporaryFailure(f"smtp {self.where}: server busy: {text}",
                                       recipient=recipient) from exc
            raise SendingStopped(f"smtp {self.where}: refused the connection: {text}",
                                 recipient=recipient) from exc
        except (smtplib.SMTPException, OSError) as exc:
            # Refused, unreachable, DNS, timed out, certificate rejected.
            _close(conn)
            raise SendingStopped(f"smtp {self.where}: cannot connect: {_describe(exc)}",
                                 recipient=recipient) from exc
        return conn

    def _secure(self, conn: _Connection, recipient: str) -> None:
        """STARTTLS, then EHLO again. A server that does not offer STARTTLS, or answers it
        with anything but 220, will refuse it on every later try as well: that is the
        configuration's to fix (:class:`StartTlsRefused`), not a stop to run again."""
        if not conn.has_extn("starttls"):
            raise StartTlsRefused(f"smtp {self.where}: the server does not offer STARTTLS; "
                                  "set [smtp] starttls = false to send unencrypted (only to a "
                                  "relay on a trusted network)", recipient=recipient)
        try:
            conn.starttls(context=self._ssl_context or ssl.create_default_context())
        except smtplib.SMTPResponseException as exc:
            raise StartTlsRefused(f"smtp {self.where}: STARTTLS refused: "
                                  f"{_reply(exc.smtp_code, exc.smtp_error)}; check [smtp] "
                                  "host and port, or set [smtp] starttls = false",
                                  recipient=recipient) from exc
        conn.ehlo()

    # -- one transaction ---------------------------------------------------------------------

    def _envelope(self, conn: _Connection, message: Outgoing) -> tuple[str, str, list[str]]:
        """(sender, recipient, MAIL parameters) as this server may be given them."""
        try:
            rcpt = wire_address(message.recipient)
        except UnsendableAddress as exc:
            raise PermanentFailure(f"smtp {self.where}: {exc}",
                                   recipient=message.recipient) from exc
        try:
            sender = wire_address(message.sender)
        except UnsendableAddress as exc:
            raise SendingStopped(f"smtp {self.where}: the sender {exc}",
                                 recipient=message.recipient) from exc
        if not (rcpt.needs_smtputf8 or sender.needs_smtputf8):
            return sender.idna, rcpt.idna, []
        if not conn.has_extn("smtputf8"):
            if sender.needs_smtputf8:
                raise SendingStopped(f"smtp {self.where}: the sender {message.sender} has a "
                                     "non-ASCII local part and the server does not offer "
                                     "SMTPUTF8", recipient=message.recipient)
            raise PermanentFailure(f"smtp {self.where}: {message.recipient}: the local part "
                                   "is not ASCII and the server does not offer SMTPUTF8 "
                                   "(RFC 6531)", recipient=message.recipient)
        options = ["SMTPUTF8"] + (["BODY=8BITMIME"] if conn.has_extn("8bitmime") else [])
        return sender.idna, rcpt.idna, options

    def _transact(self, conn: _Connection, message: Outgoing) -> bytes:
        """MAIL, RCPT, DATA; returns the final reply text or raises a mapped error."""
        sender, to, options = self._envelope(conn, message)
        rcpt = message.recipient  # errors name the address as the list keeps it
        conn.begin()
        try:
            conn.sendmail(sender, [to], message.raw, options)
        except smtplib.SMTPRecipientsRefused as exc:
            code, text = exc.recipients.get(to) or next(iter(exc.recipients.values()))
            if code == 421:  # smtplib closed the connection: the server is going away
                raise _ConnectionLost(_reply(code, text)) from exc
            raise self._refused("RCPT", code, text, rcpt) from exc
        except smtplib.SMTPSenderRefused as exc:
            if exc.smtp_code == 421:
                raise _ConnectionLost(_reply(exc.smtp_code, exc.smtp_error)) from exc
            raise self._refused("MAIL", exc.smtp_code, exc.smtp_error, rcpt) from exc
        except smtplib.SMTPDataError as exc:
            if exc.smtp_code == 421 and conn.phase == "envelope":
                raise _ConnectionLost(_reply(exc.smtp_code, exc.smtp_error)) from exc
            raise self._refused("DATA", exc.smtp_code, exc.smtp_error, rcpt,
                                after_body=conn.phase == "verdict") from exc
        except smtplib.SMTPResponseException as exc:
            # e.g. smtplib's own 500 "Line too long." after it closed the connection.
            self._discard(conn)
            if conn.phase == "verdict":
                raise Unconfirmed(f"smtp {self.where}: unreadable answer after the message "
                                  f"was sent ({_reply(exc.smtp_code, exc.smtp_error)})",
                                  recipient=rcpt) from exc
            raise TemporaryFailure(f"smtp {self.where}: "
                                   f"{_reply(exc.smtp_code, exc.smtp_error)}",
                                   recipient=rcpt) from exc
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            # getreply() turns a read timeout into SMTPServerDisconnected("... timed out").
            if conn.phase == "verdict":
                self._discard(conn)
                raise Unconfirmed(f"smtp {self.where}: no answer after the message was sent "
                                  f"({_describe(exc)}); the server may have accepted it",
                                  recipient=rcpt) from exc
            if conn.phase == "body":
                self._discard(conn)
                raise TemporaryFailure(f"smtp {self.where}: connection lost while sending "
                                       f"the message ({_describe(exc)})",
                                       recipient=rcpt) from exc
            raise _ConnectionLost(_describe(exc)) from exc
        finally:
            conn.phase = "idle"
        return conn.final_reply

    def _refused(self, stage: str, code: int, text: bytes | str, recipient: str, *,
                 after_body: bool = False) -> TransportError:
        """The error for a reply that refused the message at ``stage``."""
        said = _reply(code, text)
        where = f"smtp {self.where}: {stage} refused: {said}"
        if _STOPPED.search(said):
            return SendingStopped(where, recipient=recipient)
        if _THROTTLED.search(said) or 400 <= code < 500:
            return TemporaryFailure(where, recipient=recipient)
        if 500 <= code < 600:
            if stage == "MAIL":  # the sender is refused: every message would be
                return SendingStopped(where, recipient=recipient)
            return PermanentFailure(where, recipient=recipient)
        if after_body:  # a reply that is no reply (code -1) after the body went out
            return Unconfirmed(f"{where}; the server may have accepted it", recipient=recipient)
        return TemporaryFailure(where, recipient=recipient)


def _close(conn: smtplib.SMTP | None) -> None:
    if conn is not None:
        conn.close()


def _reply(code: int, text: bytes | str) -> str:
    """One line: ``454 4.7.0 Throttling failure: …`` (multi-line replies joined)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return " ".join(f"{code} {text}".split())


def _describe(exc: BaseException) -> str:
    """A one-line reason for a socket-level failure ("Connection refused", "timed out")."""
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host ({exc.strerror or exc})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__


def _queue_id(reply: bytes) -> str | None:
    """The id a server names in its final ``250`` reply, if it names one."""
    text = reply.decode("utf-8", "replace").strip()
    for line in text.splitlines():
        for pattern in _QUEUE_ID:
            found = pattern.search(line.strip())
            if found:
                return found.group(1)
    return None
