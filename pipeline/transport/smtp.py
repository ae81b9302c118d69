"""The ``smtp`` transport: any SMTP relay (SES's SMTP interface included) through smtplib.

Connections are pooled: a message takes an idle one, else opens a new one, and gives it back
once answered, so a run pays the TCP + TLS + AUTH handshake once per connection, not once per
recipient, with at most one connection per sending thread and at most ``[smtp]
max_connections``. A relay that limits connections per client below that (Postfix's
``smtpd_client_connection_count_limit``) greets the one too many with a 4xx (``421 too many
connections``): while other connections are open, the message waits for one of them instead
of failing; with none open, the greeting is a :class:`TemporaryFailure` like any other 4xx.
Every connection sets ``TCP_NODELAY``: with Nagle's algorithm, the last TLS record of each
message waited for the relay's delayed ACK, a pause on every message over STARTTLS.

What matters most is knowing, when something goes wrong, whether the server may already hold
the message. Each connection tracks how far the current transaction got:

``envelope``  MAIL / RCPT / the ``DATA`` command, before the server said 354. Nothing can have
              been accepted: after a dropped or idle-closed connection the message is tried
              again once, on a new connection (never another pooled one: the relay's idle
              timeout has closed those too); a second loss is a :class:`TemporaryFailure`.
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
* a refusal of *us*, which would refuse every message the same way and which no rerun cures →
  :class:`SendingMisconfigured` (exit 2), the message naming the setting to fix: a refused
  login (535; one mechanism, tried once per transport: a refusal is remembered and no other
  thread asks again), a certificate not trusted or not for the host, no AUTH offered while
  ``[smtp] username`` is set, STARTTLS not offered or refused (:class:`StartTlsRefused`), 530
  (TLS or a login wanted first), any 5xx to ``MAIL FROM`` (the sender), and a 5xx to ``RCPT``
  that is about us ("Relay access denied", "Client host rejected", "Sender address rejected",
  "Helo command rejected"); such a message never names the recipient, it is shown to the
  operator;
* any other 5xx to ``RCPT`` or to the message (one recipient per transaction) →
  :class:`PermanentFailure` for that recipient, with ``bounce=True`` when the reply says the
  mailbox does not exist (:func:`pipeline.core.mail_in.bounces.mailbox_gone`: ``550 5.1.1``, "User
  unknown"), so the list marks the address bounced; a policy refusal or a full mailbox
  fails this message only;
* a connection that cannot be opened (refused, unreachable, timed out) → :class:`SendingStopped`
  naming ``host:port`` (the relay may come back: exit 4); a 4xx greeting, e.g. "421 too many
  connections", is temporary.

TLS is ``[smtp] tls`` (:attr:`~pipeline.config.SmtpSettings.tls_mode`): ``starttls`` upgrades
after the greeting, ``implicit`` speaks TLS from the first byte (port 465), ``none`` neither.
The certificate is verified (chain and host name) against the context wiring builds from
``[smtp] ca_file`` (:func:`tls_context`), else the system's store. EHLO gives
:func:`default_helo_name` (``[smtp] helo_name``, else the ``[delivery] from`` domain), never
smtplib's guess at this machine's name; ``MAIL FROM`` is ``[smtp] return_path`` when set (where
delivery status notifications go), else the message's sender.

Addresses go out as :mod:`pipeline.core.email.addresses` writes them: the domain always in
IDNA form; a
non-ASCII local part with ``SMTPUTF8`` (and ``BODY=8BITMIME``) when the server offers it, else
the message is refused for that recipient alone (:class:`PermanentFailure`, naming the
address) before anything is sent. A sender the server cannot take stops the run (exit 2).

A message whose body is 8bit data (``[delivery] eight_bit``: a part sent as UTF-8 as it is)
goes with ``BODY=8BITMIME``, only to a relay that announces it (RFC 6152): re-encoding it
behind the editor's approval would change what the budget weighed. Told that parts may be
8bit (``eight_bit``), :meth:`SmtpTransport.verify` refuses such a relay before anything is
published, with the fix; a message met later is refused the same way (exit 2).
"""

from __future__ import annotations

import contextlib
import logging
import re
import smtplib
import socket
import ssl
import threading
import uuid
from email.utils import parseaddr
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pipeline.config import SmtpSettings, is_host_name
from pipeline.core.email.addresses import UnsendableAddress, redact_address, wire_address
from pipeline.core.mail_in.bounces import enhanced_status, mailbox_gone
from pipeline.errors import (
    ConfigError,
    PermanentFailure,
    SendingMisconfigured,
    SendingStopped,
    TemporaryFailure,
    TransportError,
    Unconfirmed,
)
from pipeline.transport import Outgoing, Transport

if TYPE_CHECKING:
    from _socket import _Address as _SourceAddress

    from _typeshed import ReadableBuffer

_log = logging.getLogger("newsletter.smtp")

__all__ = ["SmtpTransport", "StartTlsRefused", "default_helo_name", "tls_context"]

Phase = Literal["idle", "envelope", "body", "verdict"]

#: Texts that mean the *account* cannot send now, whatever code carries them.
_STOPPED = re.compile(
    r"daily message quota exceeded|account is paused|account paused|sending (?:is )?paused"
    r"|account (?:is )?suspended|quota exceeded|sending limit exceeded",
    re.IGNORECASE,
)
#: How much of a relay's reply is kept: enough for any real one.
_REPLY_CHARS = 300
_THROTTLED = re.compile(r"throttling|maximum sending rate exceeded", re.IGNORECASE)
#: A 5xx that asks for a login or TLS first (530 at MAIL or RCPT, whatever the code).
_NEEDS_AUTH = re.compile(r"authentication required|must issue a starttls|must (?:first )?"
                         r"authenticate", re.IGNORECASE)
#: 5xx replies to RCPT that are about us, not the recipient: every recipient would get the
#: same (Postfix "Relay access denied", Exim "relay not permitted", Sendmail "Relaying
#: denied", Exchange "Unable to relay"; Postfix rejects the sender and client at RCPT too).
_RELAY_REFUSED = re.compile(r"relay(?:ing)? (?:access )?(?:denied|not permitted|prohibited"
                            r"|not allowed)|unable to relay|client host rejected",
                            re.IGNORECASE)
_SENDER_REFUSED = re.compile(r"sender address rejected", re.IGNORECASE)
_HELO_REFUSED = re.compile(r"helo command rejected", re.IGNORECASE)
#: AUTH mechanisms in the order we pick one: PLAIN and LOGIN send the same secret (inside
#: TLS); CRAM-MD5 (MD5, and a stored clear password on the relay) only if nothing else is.
_MECHANISMS = ("PLAIN", "LOGIN", "CRAM-MD5")

#: Where common servers put their queue id in the final ``250`` reply.
_QUEUE_ID = (
    re.compile(r"queued as\s+<?([A-Za-z0-9][\w.@-]*)>?", re.IGNORECASE),  # Postfix, aiosmtpd
    re.compile(r"\bid=([\w.-]+)", re.IGNORECASE),                          # Exim
    re.compile(r"^ok\s+([0-9a-f][0-9a-f-]{15,})\s*$", re.IGNORECASE),      # SES SMTP interface
)

#: What a relay without 8BITMIME is told, and the fix.
_NO_8BITMIME = ("smtp {where}: the relay does not announce 8BITMIME and the issue's parts are "
                "8bit data: set [delivery] eight_bit = false, build the issue again and send it")

#: RFC 5321 4.5.2: a body line that starts with "." gets one more.
_LEADING_DOT = re.compile(rb"(?m)^\.")


class _Connection(smtplib.SMTP):
    """smtplib's client, with ``data()`` taken over to know how far a message got.

    ``sendmail`` is used as is; only ``data`` is replaced so that ``phase`` says whether the
    body left and ``final_reply`` keeps the server's last words (smtplib drops them).
    """

    phase: Phase = "idle"
    final_reply: bytes = b""
    #: Closed and no longer counted by the pool (set once, by :meth:`SmtpTransport._discard`).
    discarded: bool = False

    def connect(self, host: str = "localhost", port: int = 0,
                source_address: _SourceAddress | None = None) -> tuple[int, bytes]:
        """smtplib's connect, with Nagle's algorithm off. A message leaves in several writes
        (TLS records, then ``.``); with Nagle on, the kernel holds the last small one until
        the relay acknowledges the others, and relays delay that ACK.
        STARTTLS wraps this very descriptor (implicit TLS already did), so it stays set."""
        reply = super().connect(host, port, source_address)
        if self.sock is not None:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return reply

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


class _ImplicitTlsConnection(_Connection, smtplib.SMTP_SSL):
    """:class:`_Connection` over TLS from the first byte (``[smtp] tls = "implicit"``, port
    465): smtplib's ``SMTP_SSL`` socket, with the same ``data()``. Always given a context:
    ``SMTP_SSL``'s own default verifies nothing."""


class StartTlsRefused(SendingMisconfigured):
    """The relay will not do STARTTLS (not offered, or refused): it will refuse it on every
    later try as well, so it is the configuration's to fix (exit 2), before a run or mid-run."""


class _ConnectionLost(Exception):
    """Internal: the connection went away before the server could have taken the message."""


class SmtpTransport(Transport):
    """Sends each message with ``sendmail`` over a per-thread, reused SMTP connection.

    ``password`` comes from the environment (``NEWSLETTER_SMTP_PASSWORD``): the caller passes
    ``environ.get(...)``; it is required when ``settings.username`` is set. ``ssl_context``
    defaults to :func:`ssl.create_default_context` (the system's CAs, ``SSL_CERT_FILE``);
    wiring passes :func:`tls_context` of ``[smtp] ca_file``. ``helo_name`` is the EHLO name
    (wiring passes :func:`default_helo_name`); else ``[smtp] helo_name``, else ``localhost``.
    ``timeout`` bounds every socket operation, including the wait for the final reply.
    ``eight_bit``: messages may carry 8bit parts (``[delivery] eight_bit``), so the relay
    must announce 8BITMIME.
    """

    name = "smtp"
    reaches_mailboxes = True

    def __init__(self, settings: SmtpSettings, password: str | None, *,
                 timeout: float = 30.0, ssl_context: ssl.SSLContext | None = None,
                 helo_name: str | None = None, eight_bit: bool = False) -> None:
        if settings.username and not password:
            raise ConfigError("[smtp] username is set but NEWSLETTER_SMTP_PASSWORD is not "
                              "in the environment")
        if not (settings.username.isascii() and (password or "").isascii()):
            # smtplib writes AUTH credentials as ASCII only (it would fail mid-handshake).
            raise ConfigError("[smtp] username and NEWSLETTER_SMTP_PASSWORD must be ASCII "
                              "(smtplib sends nothing else in AUTH)")
        self.settings = settings
        self.timeout = timeout
        self.helo_name = helo_name or settings.helo_name or "localhost"
        self._password = password or ""
        self._ssl_context = ssl_context
        self._lock = threading.Lock()
        #: Signalled whenever a connection comes back or goes away.
        self._returned = threading.Condition(self._lock)
        #: Open connections nobody is using, and how many are open in all (idle or in use).
        self._idle: list[_Connection] = []
        self._count = 0
        self.eight_bit = eight_bit
        #: Connections open at once, at most (``[smtp] max_connections``; 0: no cap here).
        self._cap = settings.max_connections
        #: Whether the log has said once that the relay allows fewer connections than asked.
        self._told_cap = False
        #: Held while logging in: one login at a time, so a refused one is the only one.
        self._login_lock = threading.Lock()
        #: Why the relay refused us for good (a login, AUTH, TLS): no thread tries again.
        self._refusal: str | None = None

    @property
    def where(self) -> str:
        return f"{self.settings.host}:{self.settings.port}"

    # -- the Transport interface -------------------------------------------------------------

    def send(self, message: Outgoing) -> str:
        """Hand one message over; returns the server's queue id, else a generated one."""
        for attempt in (1, 2):
            # The retry opens a new connection: the pooled ones were idle as long as the
            # one just lost, and a relay's idle timeout has closed those too.
            conn = self._take(message.recipient, fresh=attempt == 2)
            try:
                reply = self._transact(conn, message)
            except _ConnectionLost as lost:
                self._discard(conn)
                if attempt == 2:
                    raise TemporaryFailure(
                        f"smtp {self.where}: connection lost before the message was sent, "
                        f"twice ({lost})", recipient=message.recipient) from lost.__cause__
                continue
            finally:
                self._give_back(conn)
            return _queue_id(reply) or f"smtp-{uuid.uuid4().hex}"
        raise AssertionError("unreachable")  # pragma: no cover

    def verify(self) -> None:
        """Connect, secure and log in once, then QUIT: what ``send`` and ``run`` check before
        anything is published or sent; with ``eight_bit``, the relay must announce 8BITMIME.
        Raises as the first message would."""
        conn = self._connect("")
        announces_8bitmime = conn.has_extn("8bitmime")
        with contextlib.suppress(smtplib.SMTPException, OSError):
            conn.quit()
        conn.close()
        if self.eight_bit and not announces_8bitmime:
            raise SendingMisconfigured(_NO_8BITMIME.format(where=self.where))

    def probe(self) -> None:
        """:meth:`verify`: the relay takes a connection, TLS and the login. SMTP relays
        announce no rate; pacing comes from ``[delivery] max_rate``."""
        self.verify()

    def describe(self) -> str:
        """``smtp host:port``, and how it is secured (never the login)."""
        mode = self.settings.tls_mode
        return f"smtp {self.where}" + {"starttls": " with STARTTLS",
                                       "implicit": " with implicit TLS"}.get(mode, "")

    def close(self) -> None:
        """QUIT every pooled connection (call once the sending threads are done)."""
        with self._lock:
            conns, self._idle = self._idle, []
            self._count -= len(conns)
        for conn in conns:
            conn.discarded = True
            try:
                conn.quit()
            except (smtplib.SMTPException, OSError):
                pass  # it is going away either way
            finally:
                conn.close()

    # -- connections -------------------------------------------------------------------------

    def _take(self, recipient: str, *, fresh: bool = False) -> _Connection:
        """An idle connection, else a new one while fewer than the cap are open, else the
        next one given back. A 4xx greeting while others are open is the relay's own limit:
        this message waits for one of those instead. ``fresh``: a new connection, never an
        idle one; at the cap, the longest idle one is closed to make room for it."""
        wait_for_open = False
        while True:
            with self._returned:
                while True:
                    while self._idle and not fresh:
                        conn = self._idle.pop()
                        if conn.sock is not None:
                            return conn
                        conn.discarded = True  # closed by the server while idle
                        self._count -= 1
                    room = not self._cap or self._count < self._cap
                    if self._count == 0 or (room and not wait_for_open):
                        self._count += 1
                        break
                    if self._idle:  # fresh, at the cap
                        stale = self._idle.pop(0)
                        stale.discarded = True
                        self._count -= 1
                        stale.close()
                        continue
                    self._returned.wait()
            try:
                return self._connect(recipient)
            except TemporaryFailure as exc:
                with self._returned:
                    self._count -= 1
                    self._returned.notify()
                    others = self._count
                if not (others and isinstance(exc.__cause__, smtplib.SMTPConnectError)):
                    raise
                if not self._told_cap:  # once: each refused greeting costs a connection
                    self._told_cap = True
                    _log.info("smtp %s refused one more connection (%s): messages wait for "
                              "the open ones; set [smtp] max_connections to the relay's limit "
                              "per client to stop asking", self.where, exc)
                wait_for_open, fresh = True, False
            except BaseException:
                with self._returned:
                    self._count -= 1
                    self._returned.notify()
                raise

    def _give_back(self, conn: _Connection) -> None:
        """Back to the pool, unless it was discarded (then its place is free)."""
        if conn.discarded:
            return
        if conn.sock is None:
            self._discard(conn)
            return
        with self._returned:
            self._idle.append(conn)
            self._returned.notify()

    def _discard(self, conn: _Connection) -> None:
        """Close ``conn`` and free its place in the pool (once, however often called)."""
        conn.close()
        with self._returned:
            if not conn.discarded:
                conn.discarded = True
                self._count -= 1
                self._returned.notify()

    def _connect(self, recipient: str) -> _Connection:
        """Open, greet, secure and log in. A refusal no rerun can cure is
        :class:`SendingMisconfigured` (and remembered: no other thread asks again); a 4xx
        is temporary; anything else stops the run, resumably."""
        self._refuse_again(recipient)
        try:
            return self._handshake(recipient)
        except SendingMisconfigured as exc:
            self._refusal = str(exc)
            raise

    def _handshake(self, recipient: str) -> _Connection:
        """:meth:`_connect`'s work, each failure mapped at this edge (keeping the cause)."""
        conn: _Connection | None = None
        try:
            conn = self._open_secured(recipient)
            if self.settings.username:
                self._login(conn, recipient)
        except SendingMisconfigured:
            _close(conn)
            raise
        except ssl.SSLCertVerificationError as exc:
            _close(conn)
            raise self._misconfigured(_untrusted(exc), recipient) from exc
        except ssl.SSLError as exc:
            _close(conn)
            if exc.reason == "WRONG_VERSION_NUMBER" and self.settings.tls_mode == "implicit":
                raise self._misconfigured(
                    'the relay does not speak TLS on connect (it greets in plain text): set '
                    '[smtp] tls = "starttls" for this port, or the port of implicit TLS '
                    "(465)", recipient) from exc
            raise SendingStopped(f"smtp {self.where}: cannot connect: TLS failed "
                                 f"({_describe(exc)})", recipient=recipient) from exc
        except smtplib.SMTPResponseException as exc:
            _close(conn)
            text = _reply(exc.smtp_code, exc.smtp_error)
            if 400 <= exc.smtp_code < 500 and not _STOPPED.search(text):
                raise TemporaryFailure(f"smtp {self.where}: server busy: {text}",
                                       recipient=recipient) from exc
            raise SendingStopped(f"smtp {self.where}: refused the connection: {text}",
                                 recipient=recipient) from exc
        except (smtplib.SMTPException, OSError) as exc:
            # Refused, unreachable, DNS, timed out: the relay may come back.
            _close(conn)
            raise SendingStopped(f"smtp {self.where}: cannot connect: {_describe(exc)}",
                                 recipient=recipient) from exc
        return conn

    def _open_secured(self, recipient: str) -> _Connection:
        """Connect (TLS from the first byte when implicit), EHLO, STARTTLS when asked."""
        s = self.settings
        # Given the host, smtplib connects, reads the greeting (SMTPConnectError unless
        # 220) and remembers the name TLS must verify the certificate against.
        conn: _Connection
        if s.tls_mode == "implicit":
            conn = _ImplicitTlsConnection(s.host, s.port, local_hostname=self.helo_name,
                                          timeout=self.timeout, context=self._context())
        else:
            conn = _Connection(s.host, s.port, local_hostname=self.helo_name,
                               timeout=self.timeout)
        try:
            conn.ehlo()
            if s.tls_mode == "starttls":
                self._secure(conn, recipient)
        except BaseException:
            conn.close()
            raise
        return conn

    def _context(self) -> ssl.SSLContext:
        return self._ssl_context or ssl.create_default_context()

    def _secure(self, conn: _Connection, recipient: str) -> None:
        """STARTTLS, then EHLO again. A server that does not offer STARTTLS, or answers it
        with anything but 220, will refuse it on every later try as well: that is the
        configuration's to fix (:class:`StartTlsRefused`), not a stop to run again."""
        # Name the switch the operator set: with ``tls`` set, ``starttls`` no longer decides.
        off = ('[smtp] tls = "none"' if self.settings.tls else "[smtp] starttls = false")
        if not conn.has_extn("starttls"):
            raise StartTlsRefused(f"smtp {self.where}: the server does not offer STARTTLS; "
                                  f"set {off} to send unencrypted (only to a relay on a "
                                  'trusted network), or [smtp] tls = "implicit" for a port '
                                  "that speaks TLS at once", recipient=recipient)
        try:
            conn.starttls(context=self._context())
        except smtplib.SMTPResponseException as exc:
            raise StartTlsRefused(f"smtp {self.where}: STARTTLS refused: "
                                  f"{_reply(exc.smtp_code, exc.smtp_error)}; check [smtp] "
                                  f"host and port, or set {off}",
                                  recipient=recipient) from exc
        conn.ehlo()

    def _login(self, conn: _Connection, recipient: str) -> None:
        """AUTH with one mechanism, once: smtplib's ``login()`` tries every mechanism the
        relay lists in turn (two failed logins per connection for one wrong password), and a
        relay that counts failures locks the account out. Logins take turns, so when one is
        refused every other thread learns it before trying (:meth:`_refuse_again`)."""
        s = self.settings
        with self._login_lock:
            self._refuse_again(recipient)
            offered = conn.esmtp_features.get("auth", "").strip()  # "PLAIN LOGIN"
            if not (conn.has_extn("auth") and offered):
                hint = ('relays hide AUTH before STARTTLS: set [smtp] tls = "starttls"'
                        if s.tls_mode == "none" else "check [smtp] host and port")
                raise self._misconfigured(f"the relay offers no AUTH, so cannot log in as "
                                          f"{s.username!r}: {hint}, or leave [smtp] username "
                                          "empty for a relay that needs no login", recipient)
            mechanism = _mechanism(offered)
            if mechanism is None:
                raise self._misconfigured(
                    f"the relay offers AUTH {offered}, none of PLAIN, LOGIN, CRAM-MD5: leave "
                    "[smtp] username empty or use another relay", recipient)
            conn.user, conn.password = s.username, self._password
            authobject = getattr(conn, "auth_" + mechanism.lower().replace("-", "_"))
            try:
                conn.auth(mechanism, authobject)
            except smtplib.SMTPAuthenticationError as exc:
                said = _reply(exc.smtp_code, exc.smtp_error)
                if 400 <= exc.smtp_code < 500:  # "454 Temporary authentication failure"
                    raise TemporaryFailure(f"smtp {self.where}: login as {s.username!r} "
                                           f"deferred: {said}", recipient=recipient) from exc
                raise self._misconfigured(f"login as {s.username!r} refused: {said}; check "
                                          "[smtp] username and NEWSLETTER_SMTP_PASSWORD",
                                          recipient) from exc

    def _refuse_again(self, recipient: str) -> None:
        """Raise the refusal another thread met (the relay would answer us the same)."""
        if self._refusal is not None:
            raise SendingMisconfigured(self._refusal, recipient=recipient)

    def _misconfigured(self, what: str, recipient: str) -> SendingMisconfigured:
        """The error for a refusal no rerun can cure, remembered at once (inside the login
        lock, so the next thread in sees it)."""
        self._refusal = f"smtp {self.where}: {what}"
        return SendingMisconfigured(self._refusal, recipient=recipient)

    # -- one transaction ---------------------------------------------------------------------

    def _envelope(self, conn: _Connection, message: Outgoing) -> tuple[str, str, list[str]]:
        """(sender, recipient, MAIL parameters) as this server may be given them."""
        try:
            rcpt = wire_address(message.recipient)
        except UnsendableAddress as exc:
            raise PermanentFailure(f"smtp {self.where}: {exc}",
                                   recipient=message.recipient) from exc
        # The envelope sender is where delivery status notifications go.
        envelope_sender = self.settings.return_path or message.sender
        try:
            sender = wire_address(envelope_sender)
        except UnsendableAddress as exc:
            raise SendingMisconfigured(f"smtp {self.where}: the sender {exc}; check "
                                       "[delivery] from and [smtp] return_path",
                                       recipient=message.recipient) from exc
        body = []
        if not message.raw.partition(b"\r\n\r\n")[2].isascii():  # a part is 8bit data
            if not conn.has_extn("8bitmime"):
                raise SendingMisconfigured(_NO_8BITMIME.format(where=self.where),
                                           recipient=message.recipient)
            body = ["BODY=8BITMIME"]
        if not (rcpt.needs_smtputf8 or sender.needs_smtputf8):
            return sender.idna, rcpt.idna, body
        if not conn.has_extn("smtputf8"):
            if sender.needs_smtputf8:
                raise SendingMisconfigured(
                    f"smtp {self.where}: the sender {envelope_sender} has a non-ASCII local "
                    "part and the server does not offer SMTPUTF8: set [smtp] return_path to "
                    "an ASCII address", recipient=message.recipient)
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
            return SendingStopped(redact_address(where, recipient), recipient=recipient)
        if _THROTTLED.search(said) or 400 <= code < 500:
            return TemporaryFailure(where, recipient=recipient)
        if 500 <= code < 600:
            about_us = self._about_us(stage, code, said)
            if about_us is not None:  # every message would be refused the same way
                return SendingMisconfigured(redact_address(f"{where}; {about_us}", recipient),
                                            recipient=recipient)
            # One recipient per transaction: a 5xx at RCPT or to the body is about this one.
            return PermanentFailure(where, recipient=recipient,
                                    bounce=mailbox_gone(said, code=code))
        if after_body:  # a reply that is no reply (code -1) after the body went out
            return Unconfirmed(f"{where}; the server may have accepted it", recipient=recipient)
        return TemporaryFailure(where, recipient=recipient)

    def _about_us(self, stage: str, code: int, said: str) -> str | None:
        """The fix, when a 5xx refuses *us* (the login, TLS, the sender, relaying) rather
        than the recipient; None when it is about the recipient or this message."""
        if code == 530 or _NEEDS_AUTH.search(said):
            if "starttls" in said.lower():
                return ('the relay wants TLS first: set [smtp] tls = "starttls"'
                        if self.settings.tls_mode == "none" else "the relay wants TLS first")
            return ("the relay wants a login first: set [smtp] username (and "
                    "NEWSLETTER_SMTP_PASSWORD)")
        if stage == "MAIL" and (code == 552 or enhanced_status(said) == "5.3.4"):
            return ("the relay refuses a message this size: lower [issue] size_budget_kb, or "
                    "raise the relay's message size limit")
        if stage == "MAIL" or (stage == "RCPT" and _SENDER_REFUSED.search(said)):
            return ("the relay refuses the sender: check [delivery] from and [smtp] "
                    "return_path (the relay must allow this sender)")
        if stage == "RCPT" and _HELO_REFUSED.search(said):
            return f"the relay refuses the EHLO name {self.helo_name!r}: set [smtp] helo_name"
        if stage == "RCPT" and _RELAY_REFUSED.search(said):
            return ("the relay will not relay for us: log in ([smtp] username), or have the "
                    "relay allow this host and sender")
        return None


def tls_context(ca_file: Path | None) -> ssl.SSLContext | None:
    """The context that verifies the relay against ``[smtp] ca_file`` (a PEM of one or more
    CA certificates: a private CA), resolved by the caller; None (the system's store, and
    ``SSL_CERT_FILE``) when there is none. A file that cannot serve is a ConfigError now,
    before anything is published or sent, rather than a failed handshake later."""
    if ca_file is None:
        return None
    key = "[smtp] ca_file"
    if not ca_file.is_file():
        raise ConfigError(f"no such file: {ca_file}", key=key)
    try:
        return ssl.create_default_context(cafile=str(ca_file))
    except ssl.SSLError as exc:
        raise ConfigError(f"{ca_file} holds no PEM CA certificate ({exc.reason or exc})",
                          key=key) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {ca_file}: {_describe(exc)}", key=key) from None


def default_helo_name(settings: SmtpSettings, from_address: str) -> str:
    """The EHLO name: ``[smtp] helo_name``, else the domain of ``[delivery] from`` in its
    IDNA form. Never smtplib's default (this machine's name, often ``[127.0.0.1]`` in a
    container), which relays and spam filters hold against the sender."""
    if settings.helo_name:
        return settings.helo_name
    address = parseaddr(from_address)[1]
    try:
        domain = wire_address(address).idna.rpartition("@")[2] if "@" in address else ""
    except UnsendableAddress:
        domain = ""
    if not domain or not is_host_name(domain):
        raise ConfigError(f"the domain of [delivery] from ({from_address!r}) is no host name "
                          "to greet a relay with: set [smtp] helo_name", key="[smtp] helo_name")
    return domain


def _mechanism(offered: str) -> str | None:
    """The one AUTH mechanism to try from the relay's list (``"LOGIN PLAIN"``)."""
    names = set(offered.upper().split())
    return next((m for m in _MECHANISMS if m in names), None)


def _untrusted(exc: ssl.SSLCertVerificationError) -> str:
    """The fix for a certificate the context refused."""
    reason = exc.verify_message or exc.reason or str(exc)
    reason = " ".join(str(reason).split()).rstrip(".")
    if "mismatch" in reason.lower():
        return (f"the relay's certificate is not for this host ({reason}): set [smtp] host to "
                "a name the certificate holds")
    return (f"the relay's certificate is not trusted ({reason}): set [smtp] ca_file to the "
            "CA that signed it")


def _close(conn: smtplib.SMTP | None) -> None:
    if conn is not None:
        conn.close()


def _reply(code: int, text: bytes | str) -> str:
    """One line: ``454 4.7.0 Throttling failure: …`` (multi-line replies joined), printable
    only (a relay's escape codes never reach the terminal) and at most ``_REPLY_CHARS``
    long (the reason is kept in the ledger and the report for every recipient)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    line = " ".join("".join(c if c.isprintable() else " " for c in f"{code} {text}").split())
    return line if len(line) <= _REPLY_CHARS else line[:_REPLY_CHARS - 1] + "…"


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
