"""The ``smtp`` transport: any SMTP relay (SES's SMTP interface included) through smtplib.

Connections are pooled and reused, at most ``[smtp] max_connections`` open (0: one per
sending thread), so a run pays the TCP + TLS + AUTH handshake once per connection, not per
recipient.

What matters most, when something goes wrong, is whether the server may already hold the
message, so each connection tracks how far the transaction got (:data:`Phase`):

``envelope``  MAIL, RCPT, ``DATA`` before the 354: nothing can have been accepted. A lost
              connection is tried again once, on a new connection (a relay's idle timeout
              has closed the pooled ones too); a second loss is a :class:`TemporaryFailure`.
``body``      the message is being written; the server accepts nothing before the final
              ``<CRLF>.<CRLF>``, the last thing written: :class:`TemporaryFailure`.
``verdict``   the body went out and the final reply is awaited: a timeout or a loss here is
              :class:`Unconfirmed` (sending it again could deliver it twice).

Replies are mapped at this edge, keeping the smtplib exception as the cause: a quota or a
paused account (whatever the code) is :class:`SendingStopped`; throttling and any 4xx are
:class:`TemporaryFailure`; a refusal of *us* that every message would meet (a login, TLS,
the sender, relaying: see :meth:`SmtpTransport._about_us`) is :class:`SendingMisconfigured`
(exit 2) naming the setting to fix and never the recipient; any other 5xx is the recipient's
:class:`PermanentFailure`, a bounce when the mailbox is gone; a relay that cannot be reached
is :class:`SendingStopped` (exit 4).

TLS is ``[smtp] tls``: ``starttls``, ``implicit`` (port 465) or ``none``; the certificate is
verified against ``[smtp] ca_file`` (:func:`tls_context`), else the system's store. EHLO
says :func:`default_helo_name`, never smtplib's guess at this machine's name.

Addresses go out as :mod:`pipeline.core.email.addresses` writes them (the domain in IDNA
form); a non-ASCII local part needs ``SMTPUTF8``. A message whose body is 8bit data
(``[delivery] eight_bit``) goes with ``BODY=8BITMIME``, only to a relay that announces it
(RFC 6152): re-encoding it would change what the size budget weighed. Told that parts may be
8bit, :meth:`SmtpTransport.probe` refuses such a relay before anything is published.
"""

from __future__ import annotations

import contextlib
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
from pipeline.core.issue.sanitize import one_line
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
from pipeline.transport import (
    ACCOUNT_STOPPED,
    THROTTLED,
    Outgoing,
    Transport,
    without_addresses,
)

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

__all__ = ["SmtpTransport", "StartTlsRefused", "default_helo_name", "tls_context"]

Phase = Literal["envelope", "body", "verdict"]

#: A 5xx that asks for a login or TLS first (530 at MAIL or RCPT, whatever the code).
_NEEDS_AUTH = re.compile(r"authentication required|must issue a starttls|must (?:first )?"
                         r"authenticate", re.IGNORECASE)
#: 5xx replies to RCPT about us, not the recipient (Postfix, Exim, Sendmail, Exchange).
_RELAY_REFUSED = re.compile(r"relay(?:ing)? (?:access )?(?:denied|not permitted|prohibited"
                            r"|not allowed)|unable to relay|client host rejected",
                            re.IGNORECASE)

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
    """smtplib's client, with ``data()`` taken over so that ``phase`` says whether the body
    left and ``final_reply`` keeps the server's last words (smtplib drops them)."""

    phase: Phase = "envelope"
    final_reply: bytes = b""

    def data(self, msg: ReadableBuffer | str) -> tuple[int, bytes]:
        # sendmail hands bytes; keep smtplib's contract (str or any buffer) anyway
        msg = msg.encode("ascii") if isinstance(msg, str) else bytes(msg)
        self.putcmd("data")
        code, reply = self.getreply()
        if code != 354:
            return code, reply  # sendmail resets (closes, after 421) and raises SMTPDataError
        body = _LEADING_DOT.sub(b"..", msg)
        if not body.endswith(b"\r\n"):
            body += b"\r\n"
        self.phase = "body"
        self.send(body + b".\r\n")
        self.phase = "verdict"
        code, self.final_reply = self.getreply()
        return code, self.final_reply


class _ImplicitTlsConnection(_Connection, smtplib.SMTP_SSL):
    """:class:`_Connection` over TLS from the first byte (``[smtp] tls = "implicit"``).
    Always given a context: ``SMTP_SSL``'s own default verifies nothing."""


class StartTlsRefused(SendingMisconfigured):
    """The relay will not do STARTTLS (not offered, or refused), now or on any later try."""


class _ConnectionLost(Exception):
    """Internal: the connection went away before the server could have taken the message."""


class SmtpTransport(Transport):
    """Sends each message over a pooled connection. ``timeout`` bounds every socket
    operation, the wait for the final reply included; ``eight_bit``: parts may be 8bit."""

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
        self.where = f"{settings.host}:{settings.port}"
        self.timeout = timeout
        self.helo_name = helo_name or settings.helo_name or "localhost"
        self.eight_bit = eight_bit
        self._password = password or ""
        self._ssl_context = ssl_context
        self._pool = threading.Condition()  # signalled whenever a place in the pool frees
        self._idle: list[_Connection] = []  # open, and nobody is using them
        self._count = 0  # open in all, idle or in use
        self._login_lock = threading.Lock()  # one login at a time (see _login)
        #: Why the relay refused us for good (a login, AUTH, TLS): no thread tries again.
        self._refusal: str | None = None

    def send(self, message: Outgoing) -> str:
        """Hand one message over; returns the server's queue id, else a generated one."""
        for attempt in (1, 2):
            conn = self._take(message.recipient)
            try:
                reply = self._transact(conn, message)
                return _queue_id(reply) or f"smtp-{uuid.uuid4().hex}"
            except _ConnectionLost as lost:
                conn.close()
                # The pooled ones were idle as long as the one just lost: a relay's idle
                # timeout has closed those too, so the retry opens a new connection.
                self._drop_idle()
                if attempt == 2:
                    raise TemporaryFailure(
                        f"smtp {self.where}: connection lost before the message was sent, "
                        f"twice ({lost})", recipient=message.recipient) from lost.__cause__
            finally:
                self._give_back(conn)
        raise AssertionError("unreachable")  # pragma: no cover

    def probe(self) -> None:
        """Connect, secure and log in once, then QUIT, raising as the first message would;
        with ``eight_bit``, the relay must announce 8BITMIME. Relays announce no rate."""
        conn = self._connect("")
        announces_8bitmime = conn.has_extn("8bitmime")
        with contextlib.suppress(smtplib.SMTPException, OSError):
            conn.quit()
        conn.close()
        if self.eight_bit and not announces_8bitmime:
            raise SendingMisconfigured(_NO_8BITMIME.format(where=self.where))

    def describe(self) -> str:
        """``smtp host:port``, and how it is secured (never the login)."""
        tls = {"starttls": " with STARTTLS", "implicit": " with implicit TLS"}
        return f"smtp {self.where}" + tls.get(self.settings.tls_mode, "")

    def close(self) -> None:
        """QUIT every pooled connection (call once the sending threads are done)."""
        self._drop_idle(say_quit=True)

    def _take(self, recipient: str) -> _Connection:
        """An idle connection, else a new one while fewer than the cap are open, else the
        next one given back."""
        cap = self.settings.max_connections  # 0: no cap
        with self._pool:
            while not self._idle and 0 < cap <= self._count:
                self._pool.wait()
            if self._idle:
                return self._idle.pop()
            self._count += 1
        try:
            return self._connect(recipient)
        except BaseException:
            with self._pool:
                self._count -= 1
                self._pool.notify()
            raise

    def _give_back(self, conn: _Connection) -> None:
        """Back to the pool; a closed one leaves it, and its place is free."""
        with self._pool:
            if conn.sock is None:
                self._count -= 1
            else:
                self._idle.append(conn)
            self._pool.notify()

    def _drop_idle(self, *, say_quit: bool = False) -> None:
        """Close every idle connection (after a QUIT when ``say_quit``); their places free."""
        with self._pool:
            conns, self._idle = self._idle, []
            self._count -= len(conns)
            self._pool.notify_all()
        for conn in conns:
            if say_quit:
                with contextlib.suppress(smtplib.SMTPException, OSError):
                    conn.quit()  # it is going away either way
            conn.close()

    def _connect(self, recipient: str) -> _Connection:
        """Open, greet, secure and log in, each failure mapped."""
        self._refuse_again(recipient)
        try:
            return self._open(recipient)
        except ssl.SSLCertVerificationError as exc:
            raise self._misconfigured(_untrusted(exc), recipient) from exc
        except ssl.SSLError as exc:
            if exc.reason == "WRONG_VERSION_NUMBER" and self.settings.tls_mode == "implicit":
                raise self._misconfigured(
                    'the relay does not speak TLS on connect (it greets in plain text): set '
                    '[smtp] tls = "starttls" for this port, or the port of implicit TLS '
                    "(465)", recipient) from exc
            raise SendingStopped(f"smtp {self.where}: cannot connect: TLS failed "
                                 f"({_describe(exc)})", recipient=recipient) from exc
        except smtplib.SMTPResponseException as exc:
            text = _reply(exc.smtp_code, exc.smtp_error)
            if 400 <= exc.smtp_code < 500 and not ACCOUNT_STOPPED.search(text):
                hint = ("" if self.settings.max_connections else "; a relay that limits "
                        "connections per client wants [smtp] max_connections")
                raise TemporaryFailure(f"smtp {self.where}: server busy: {text}{hint}",
                                       recipient=recipient) from exc
            raise SendingStopped(f"smtp {self.where}: refused the connection: {text}",
                                 recipient=recipient) from exc
        except (smtplib.SMTPException, OSError) as exc:
            # Refused, unreachable, DNS, timed out: the relay may come back.
            raise SendingStopped(f"smtp {self.where}: cannot connect: {_describe(exc)}",
                                 recipient=recipient) from exc

    def _open(self, recipient: str) -> _Connection:
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
            # Nagle's algorithm off: a message leaves in several writes, and the kernel would
            # hold the last small one until the relay's delayed ACK. STARTTLS keeps the socket.
            if conn.sock is not None:
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.ehlo()
            if s.tls_mode == "starttls":
                self._secure(conn, recipient)
            if s.username:
                self._login(conn, recipient)
        except BaseException:
            conn.close()
            raise
        return conn

    def _context(self) -> ssl.SSLContext:
        """One context for every connection: loading the system's CA store is not free."""
        if self._ssl_context is None:
            self._ssl_context = ssl.create_default_context()
        return self._ssl_context

    def _secure(self, conn: _Connection, recipient: str) -> None:
        """STARTTLS, then EHLO again; not offered or refused is :class:`StartTlsRefused`."""
        # Name the switch the operator set: with ``tls`` set, ``starttls`` no longer decides.
        off = ('[smtp] tls = "none"' if self.settings.tls else "[smtp] starttls = false")
        if not conn.has_extn("starttls"):
            raise self._misconfigured(f"the server does not offer STARTTLS; set {off} to send "
                                      "unencrypted (only to a relay on a trusted network), or "
                                      '[smtp] tls = "implicit" for a port that speaks TLS at '
                                      "once", recipient, StartTlsRefused)
        try:
            conn.starttls(context=self._context())
        except smtplib.SMTPResponseException as exc:
            raise self._misconfigured(f"STARTTLS refused: {_reply(exc.smtp_code, exc.smtp_error)}"
                                      f"; check [smtp] host and port, or set {off}", recipient,
                                      StartTlsRefused) from exc
        conn.ehlo()

    def _login(self, conn: _Connection, recipient: str) -> None:
        """AUTH with one mechanism, once: smtplib's ``login()`` tries each mechanism in
        turn, and a relay that counts failures locks the account out. Logins take turns,
        so a refused one is the only one."""
        s = self.settings
        with self._login_lock:
            self._refuse_again(recipient)
            offered = conn.esmtp_features.get("auth", "").strip()  # "PLAIN LOGIN"
            if not offered:
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

    def _misconfigured(self, what: str, recipient: str,
                       kind: type[SendingMisconfigured] = SendingMisconfigured,
                       ) -> SendingMisconfigured:
        """A refusal of us no rerun can cure, remembered at once (inside the login lock, for
        a login) so that no other thread asks again."""
        self._refusal = f"smtp {self.where}: {what}"
        return kind(self._refusal, recipient=recipient)

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
        eight_bit = not message.raw.partition(b"\r\n\r\n")[2].isascii()  # a part is 8bit
        if eight_bit and not conn.has_extn("8bitmime"):
            raise SendingMisconfigured(_NO_8BITMIME.format(where=self.where),
                                       recipient=message.recipient)
        options = []
        if rcpt.needs_smtputf8 or sender.needs_smtputf8:
            if not conn.has_extn("smtputf8") and sender.needs_smtputf8:
                raise SendingMisconfigured(
                    f"smtp {self.where}: the sender {envelope_sender} has a non-ASCII local "
                    "part and the server does not offer SMTPUTF8: set [smtp] return_path to "
                    "an ASCII address", recipient=message.recipient)
            if not conn.has_extn("smtputf8"):
                raise PermanentFailure(f"smtp {self.where}: {message.recipient}: the local "
                                       "part is not ASCII and the server does not offer "
                                       "SMTPUTF8 (RFC 6531)", recipient=message.recipient)
            options.append("SMTPUTF8")
        if eight_bit or (options and conn.has_extn("8bitmime")):
            options.append("BODY=8BITMIME")
        return sender.idna, rcpt.idna, options

    def _transact(self, conn: _Connection, message: Outgoing) -> bytes:
        """MAIL, RCPT, DATA; returns the final reply text or raises a mapped error."""
        sender, to, options = self._envelope(conn, message)
        rcpt = message.recipient  # errors name the address as the list keeps it
        try:
            conn.sendmail(sender, [to], message.raw, options)
        except smtplib.SMTPRecipientsRefused as exc:
            raise self._refused("RCPT", conn.phase, *exc.recipients[to], rcpt) from exc
        except smtplib.SMTPSenderRefused as exc:
            raise self._refused("MAIL", conn.phase, exc.smtp_code, exc.smtp_error,
                                rcpt) from exc
        except smtplib.SMTPDataError as exc:
            raise self._refused("DATA", conn.phase, exc.smtp_code, exc.smtp_error,
                                rcpt) from exc
        except smtplib.SMTPResponseException as exc:
            # e.g. smtplib's own 500 "Line too long." after it closed the connection.
            conn.close()
            said = _reply(exc.smtp_code, exc.smtp_error)
            if conn.phase == "verdict":
                raise Unconfirmed(f"smtp {self.where}: unreadable answer after the message "
                                  f"was sent ({said})", recipient=rcpt) from exc
            raise TemporaryFailure(f"smtp {self.where}: {said}", recipient=rcpt) from exc
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            # getreply() turns a read timeout into SMTPServerDisconnected("... timed out").
            why = _describe(exc)
            if conn.phase == "envelope":
                raise _ConnectionLost(why) from exc
            conn.close()
            if conn.phase == "body":
                raise TemporaryFailure(f"smtp {self.where}: connection lost while sending "
                                       f"the message ({why})", recipient=rcpt) from exc
            raise Unconfirmed(f"smtp {self.where}: no answer after the message was sent "
                              f"({why}); the server may have accepted it",
                              recipient=rcpt) from exc
        finally:
            conn.phase = "envelope"  # where the next transaction on it starts
        return conn.final_reply

    def _refused(self, stage: str, phase: Phase, code: int, text: bytes | str,
                 recipient: str) -> TransportError | _ConnectionLost:
        """The error for a reply that refused the message at ``stage``."""
        said = _reply(code, text)
        if code == 421 and phase == "envelope":  # smtplib closed it: the server is going away
            return _ConnectionLost(said)
        where = f"smtp {self.where}: {stage} refused: {said}"
        words = without_addresses(said)  # "<x@y>: User unknown" names the mailbox
        if ACCOUNT_STOPPED.search(words):
            return SendingStopped(redact_address(where, recipient), recipient=recipient)
        if THROTTLED.search(words) or 400 <= code < 500:
            return TemporaryFailure(where, recipient=recipient)
        if 500 <= code < 600:
            about_us = self._about_us(stage, code, said)
            if about_us is not None:  # every message would be refused the same way
                return SendingMisconfigured(redact_address(f"{where}; {about_us}", recipient),
                                            recipient=recipient)
            # One recipient per transaction: a 5xx at RCPT or to the body is about this one.
            return PermanentFailure(where, recipient=recipient,
                                    bounce=mailbox_gone(said, code=code))
        if phase == "verdict":  # a reply that is no reply (code -1) after the body went out
            return Unconfirmed(f"{where}; the server may have accepted it", recipient=recipient)
        return TemporaryFailure(where, recipient=recipient)

    def _about_us(self, stage: str, code: int, said: str) -> str | None:
        """The fix when a 5xx refuses *us* (login, TLS, sender, relaying), not the recipient."""
        lowered = said.lower()
        if code == 530 or _NEEDS_AUTH.search(said):
            if "starttls" in lowered:
                return ('the relay wants TLS first: set [smtp] tls = "starttls"'
                        if self.settings.tls_mode == "none" else "the relay wants TLS first")
            return ("the relay wants a login first: set [smtp] username (and "
                    "NEWSLETTER_SMTP_PASSWORD)")
        if stage == "MAIL" and (code == 552 or enhanced_status(said) == "5.3.4"):
            return ("the relay refuses a message this size: lower [issue] size_budget_kb, or "
                    "raise the relay's message size limit")
        if stage == "MAIL" or (stage == "RCPT" and "sender address rejected" in lowered):
            return ("the relay refuses the sender: check [delivery] from and [smtp] "
                    "return_path (the relay must allow this sender)")
        if stage == "RCPT" and "helo command rejected" in lowered:
            return f"the relay refuses the EHLO name {self.helo_name!r}: set [smtp] helo_name"
        if stage == "RCPT" and _RELAY_REFUSED.search(said):
            return ("the relay will not relay for us: log in ([smtp] username), or have the "
                    "relay allow this host and sender")
        return None


def tls_context(ca_file: Path | None) -> ssl.SSLContext | None:
    """The context that verifies the relay against ``[smtp] ca_file`` (a private CA's PEM);
    None (the system's store) without one. A file that cannot serve is a ConfigError now,
    before anything is published, rather than a failed handshake later."""
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
    """``[smtp] helo_name``, else the ``[delivery] from`` domain in IDNA form; never
    smtplib's guess (often ``[127.0.0.1]`` in a container), which spam filters hold
    against the sender."""
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
    """The one AUTH mechanism to try from the relay's list (``"LOGIN PLAIN"``), in our order."""
    names = offered.upper().split()
    return next((name for name in ("PLAIN", "LOGIN", "CRAM-MD5") if name in names), None)


def _untrusted(exc: ssl.SSLCertVerificationError) -> str:
    """The fix for a certificate the context refused."""
    reason = exc.verify_message or exc.reason or str(exc)
    reason = " ".join(str(reason).split()).rstrip(".")
    if "mismatch" in reason.lower():
        return (f"the relay's certificate is not for this host ({reason}): set [smtp] host to "
                "a name the certificate holds")
    return (f"the relay's certificate is not trusted ({reason}): set [smtp] ca_file to the "
            "CA that signed it")


def _reply(code: int, text: bytes | str) -> str:
    """One printable line (a relay's escape codes never reach the terminal), cut at 300
    characters (enough for any real reply): the ledger keeps it for every recipient."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return one_line(f"{code} {text}", 300)


def _describe(exc: BaseException) -> str:
    """A one-line reason for a socket-level failure ("Connection refused", "timed out")."""
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host ({exc.strerror or exc})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__


def _queue_id(reply: bytes) -> str | None:
    """The id a server names in its final ``250`` reply, if it names one."""
    lines = reply.decode("utf-8", "replace").splitlines()
    found = (pattern.search(line.strip()) for line in lines for pattern in _QUEUE_ID)
    return next((match.group(1) for match in found if match), None)
