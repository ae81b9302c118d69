"""Real servers on loopback for the delivery tests: an SMTP sink (aiosmtpd), a moto (AWS)
server, and the TLS certificates both sides need.

conftest.py registers this module as a plugin (pytest imports it first and rewrites its
asserts); besides its fixtures, a test module may import its helpers (``outgoing``,
``recipients``, ``FakeTime``).

moto keeps a sent message (``MotoServer.sent()``) as ``{"id", "source", "destinations",
"raw_data"}``, where a recipient usually appears twice (ToAddresses, then the headers); it keeps
no ``EmailTags`` nor ``ConfigurationSetName``: :attr:`SesInjection.requests` records the wire.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import os
import socket
import ssl
import threading
import time
import urllib.request
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any, Literal, cast

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from pipeline.config import SmtpSettings
from pipeline.transport import Outgoing
from pipeline.transport.smtp import SmtpTransport

#: SES's SMTP interface, when sending faster than the account's rate.
THROTTLED = (454, "4.7.0 Throttling failure: Maximum sending rate exceeded.")
#: SES's SMTP interface, once the day's quota is spent.
DAILY_QUOTA = (454, "4.7.0 Throttling failure: Daily message quota exceeded.")
#: A recipient that does not exist.
NO_SUCH_USER = (550, "5.1.1 <{address}>: Recipient address rejected: User unknown")

#: The envelope sender and subject of :func:`outgoing`.
SENDER = "weekly@example.org"
SUBJECT = "vLLM PR 周报 2026-W48：值得精读的 8 个 PR"

Phase = Literal["MAIL", "RCPT", "DATA"]
#: A scripted answer that hangs up instead of replying.
_DROP = ""


def bound_socket() -> socket.socket:
    """A TCP socket bound to a loopback port the kernel chose, not yet listening.

    A server is handed the socket itself: picking a free port, closing it and binding it
    again leaves a window in which another xdist worker can take the port.
    """
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


class _CountedSMTP(SMTP):
    """aiosmtpd's protocol, telling the sink when a connection opens and ends."""

    counted = False

    def connection_made(self, transport: Any) -> None:
        if not self.counted:  # not again for the TLS transport after STARTTLS
            refusal = self.event_handler.sink._admit()
            if refusal is not None:  # refused at the greeting, as Postfix does
                transport.write(refusal.encode() + b"\r\n")
                transport.close()
                return
            self.counted = True
        super().connection_made(transport)

    def connection_lost(self, error: Exception | None) -> None:
        if not self.counted:
            return
        session: Any = self.session
        peer = tuple(session.peer[:2]) if session else None
        super().connection_lost(error)
        self.event_handler.sink._closed_connection(peer)


class _OnSocket(Controller):
    """aiosmtpd's Controller serving on a bound socket (given port 0, it would connect to its
    own port to see that it is up)."""

    def __init__(self, handler: Any, sock: socket.socket, **kwargs: Any) -> None:
        self.bound = sock
        super().__init__(handler, hostname=sock.getsockname()[0], port=sock.getsockname()[1],
                         **kwargs)

    def factory(self) -> SMTP:
        return _CountedSMTP(self.handler, **self.SMTP_kwargs)

    def _create_server(self) -> Any:
        return self.loop.create_server(self._factory_invoker, sock=self.bound,
                                       ssl=self.ssl_context)


# -- SMTP ------------------------------------------------------------------------------------


class FakeTime:
    """A monotonic clock that only moves when someone sleeps: a sender's waits (and a sink's
    ``message_rate`` window, given its ``clock``) run out without the test sleeping."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []
        self.lock = threading.Lock()

    def clock(self) -> float:
        with self.lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.slept.append(seconds)
            self.now += seconds


@dataclass(frozen=True)
class Received:
    """One message the sink accepted."""

    mail_from: str
    rcpt_tos: tuple[str, ...]
    #: The message exactly as received (dot-stuffing undone), CRLF line endings.
    content: bytes
    queue_id: str
    #: (host, port) of the client connection that carried it.
    peer: tuple[str, int]
    #: The MAIL FROM parameters (``SMTPUTF8``, ``BODY=8BITMIME``, ``SIZE=…``).
    mail_options: tuple[str, ...] = ()

    def message(self) -> EmailMessage:
        return BytesParser(policy=policy.default).parsebytes(self.content)


def recipients(received: Iterable[Received]) -> Counter[str]:
    """How many messages each envelope recipient (lower-cased) got: one recipient a message."""
    counts: Counter[str] = Counter()
    for record in received:
        assert len(record.rcpt_tos) == 1, record.rcpt_tos
        counts[record.rcpt_tos[0].lower()] += 1
    return counts


@dataclass
class Pause:
    """A held final reply (:meth:`SmtpSink.pause_next`): ``reached`` is set once the message
    is in and the client waits; :meth:`release` lets the reply go."""

    #: Only a message to this (lower-cased) address is held; None: any message.
    address: str | None = None
    #: Only a message arriving after this many were accepted since the last ``clear()``.
    after: int = 0
    reached: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def wait(self, timeout: float = 30.0) -> bool:
        """Whether a message reached the pause within ``timeout`` seconds."""
        return self.reached.wait(timeout)

    def release(self) -> None:
        self.released.set()


class SmtpSink:
    """An aiosmtpd server on 127.0.0.1 that keeps what it accepts and fails on request.

    ``tls_context`` offers STARTTLS (``require_starttls`` refuses mail before it);
    ``implicit_tls`` speaks TLS from the first byte (port 465); ``users`` ({name: password})
    turns on AUTH, over TLS only unless ``auth_require_tls`` is False; ``auth_required``
    refuses MAIL before a login; ``auth_exclude`` hides mechanisms. ``smtputf8`` offers
    SMTPUTF8, which aiosmtpd does not by default; ``eight_bit_mime=False`` does not announce
    8BITMIME (aiosmtpd then decodes the data: a relay that must never get 8bit).

    Relay limits as Postfix's anvil enforces them: ``message_rate=(n, seconds)`` answers 450
    at MAIL once ``n`` messages were accepted within ``seconds`` (by ``clock``);
    ``max_connections=n`` greets the connection beyond ``n`` open ones with 421 and hangs up.
    """

    host = "127.0.0.1"
    # Reachable from the fixture without importing this module.
    THROTTLED = THROTTLED
    DAILY_QUOTA = DAILY_QUOTA
    NO_SUCH_USER = NO_SUCH_USER

    def __init__(self, *, tls_context: ssl.SSLContext | None = None,
                 require_starttls: bool = False, users: Mapping[str, str] | None = None,
                 auth_require_tls: bool = True, idle_timeout: float = 300.0,
                 smtputf8: bool = False, implicit_tls: ssl.SSLContext | None = None,
                 message_rate: tuple[int, float] | None = None,
                 max_connections: int | None = None, auth_required: bool = False,
                 auth_exclude: tuple[str, ...] = (), eight_bit_mime: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._socket = bound_socket()
        self._clock = clock
        self.port: int = self._socket.getsockname()[1]
        self.message_rate = message_rate
        self.max_connections = max_connections
        self._accepted_at: deque[float] = deque()
        self._open_connections = 0
        self._greetings: deque[str] = deque()
        #: Every EHLO/HELO name a client gave, in order.
        self.helo_names: list[str] = []
        #: Every AUTH attempt (mechanism, login), in order.
        self.auth_attempts: list[tuple[str, str]] = []
        #: Replies refused by a relay limit (``message_rate``, ``max_connections``).
        self.limited = 0
        #: The final reply to accepted data (SES's SMTP interface says ``250 Ok <id>``).
        self.accept_reply = "250 2.0.0 Ok: queued as {queue_id}"
        self._lock = threading.Lock()
        self._closed_changed = threading.Condition(self._lock)
        self._received: list[Received] = []
        self._attempts: Counter[str] = Counter()
        self._peers: set[tuple[str, int]] = set()
        self._closed: set[tuple[str, int]] = set()
        self._script: dict[tuple[Phase, str], deque[str]] = {}
        self._pauses: deque[Pause] = deque()
        self._issued: list[Pause] = []
        self._users = dict(users or {})
        kwargs: dict[str, Any] = {"timeout": idle_timeout, "enable_SMTPUTF8": smtputf8,
                                  "decode_data": not eight_bit_mime}
        if tls_context is not None:
            kwargs.update(tls_context=tls_context, require_starttls=require_starttls)
        if self._users:
            kwargs.update(authenticator=self._authenticate, auth_require_tls=auth_require_tls,
                          auth_required=auth_required,
                          auth_exclude_mechanism=list(auth_exclude))
        if implicit_tls is not None:
            kwargs.update(ssl_context=implicit_tls)
        self._controller = _OnSocket(_Handler(self), self._socket, server_hostname="sink.test",
                                     ready_timeout=5.0, **kwargs)

    def start(self) -> SmtpSink:
        self._controller.start()
        return self

    def stop(self) -> None:
        for pause in self._issued:  # a test that failed before releasing must not hang here
            pause.release()
        self._controller.stop()
        self._socket.close()

    def settings(self, *, starttls: bool = False, username: str = "",
                 **more: Any) -> SmtpSettings:
        """``[smtp]`` settings pointing at this sink (``more``: ``tls``, ``ca_file`` …)."""
        return SmtpSettings(host=self.host, port=self.port, starttls=starttls,
                            username=username, **more)

    # -- what it saw

    @property
    def received(self) -> list[Received]:
        """Every accepted message, in arrival order (a copy)."""
        with self._lock:
            return list(self._received)

    def for_recipient(self, address: str) -> list[Received]:
        return [r for r in self.received if address.lower() in (a.lower() for a in r.rcpt_tos)]

    def attempts(self, address: str) -> int:
        """How many times ``RCPT TO:<address>`` was given (accepted or not)."""
        with self._lock:
            return self._attempts[address.lower()]

    @property
    def peers(self) -> set[tuple[str, int]]:
        """The client connections that started a transaction."""
        with self._lock:
            return set(self._peers)

    def wait_closed(self, peer: tuple[str, int], timeout: float = 30.0) -> bool:
        """Whether the connection from ``peer`` ended, by either side, within ``timeout``."""
        with self._closed_changed:
            return self._closed_changed.wait_for(lambda: peer in self._closed, timeout)

    def wait_for(self, count: int, timeout: float = 5.0) -> list[Received]:
        """The messages received once ``count`` arrived, or ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        while len(received := self.received) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return received

    # -- scripting

    def fail_next(self, address: str, code: int, text: str, *, at: Phase = "RCPT",
                  times: int = 1) -> None:
        """Answer ``code text`` the next ``times`` times ``address`` reaches ``at`` (MAIL
        matches the sender); ``{address}`` in the text is filled in."""
        self._push(at, address, [f"{code} {text.format(address=address)}"] * times)

    def drop_next(self, address: str, *, at: Phase = "RCPT", times: int = 1) -> None:
        """Hang up without a reply; at DATA, after the body arrived and without keeping it."""
        self._push(at, address, [_DROP] * times)

    def refuse_connections(self, reply: str = "421 4.3.2 sink.test Service not available, "
                           "closing transmission channel", *, times: int = 1) -> None:
        """Greet the next ``times`` connections with ``reply`` and hang up."""
        with self._lock:
            self._greetings.extend([reply] * times)

    def pause_next(self, address: str | None = None, *, after: int = 0) -> Pause:
        """Keep the next message (for ``address``, once ``after`` were accepted) and hold its
        final reply until :meth:`Pause.release`: a client stopped mid-send for as long as the
        test needs, with no guess at how long that is."""
        pause = Pause(address.lower() if address else None, after)
        with self._lock:
            self._pauses.append(pause)
            self._issued.append(pause)
        return pause

    def clear(self) -> None:
        """Forget what was received and scripted."""
        with self._lock:
            self._received.clear()
            self._attempts.clear()
            self._peers.clear()
            self._script.clear()
            self._pauses.clear()
            self._greetings.clear()

    def _push(self, at: Phase, address: str, replies: list[str]) -> None:
        with self._lock:
            self._script.setdefault((at, address.lower()), deque()).extend(replies)

    def _take(self, at: Phase, address: str) -> str | None:
        with self._lock:
            queue = self._script.get((at, address.lower()))
            return queue.popleft() if queue else None

    def _admit(self) -> str | None:
        """The greeting that refuses a new connection, or None to serve it (and count it)."""
        with self._lock:
            if self._greetings:
                return self._greetings.popleft()
            if self.max_connections is not None \
                    and self._open_connections >= self.max_connections:
                self.limited += 1
                return "421 4.7.0 sink.test Error: too many connections from 127.0.0.1"
            self._open_connections += 1
            return None

    def _closed_connection(self, peer: tuple[str, int] | None) -> None:
        with self._closed_changed:
            self._open_connections -= 1
            if peer:
                self._closed.add(peer)
            self._closed_changed.notify_all()

    def _over_rate(self) -> bool:
        """Whether ``message_rate`` refuses another message now (a sliding window)."""
        if self.message_rate is None:
            return False
        most, seconds = self.message_rate
        with self._lock:
            horizon = self._clock() - seconds
            while self._accepted_at and self._accepted_at[0] < horizon:
                self._accepted_at.popleft()
            if len(self._accepted_at) < most:
                return False
            self.limited += 1
            return True

    def _authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str,
                      auth_data: Any) -> Any:
        login = auth_data.login.decode() if isinstance(auth_data, LoginPassword) else ""
        with self._lock:
            self.auth_attempts.append((mechanism, login))
        ok = (isinstance(auth_data, LoginPassword)
              and self._users.get(login) == auth_data.password.decode())
        # handled=False: aiosmtpd itself answers a failure ("535 5.7.8 ...").
        return AuthResult(success=ok, handled=False)


class _Handler:
    """aiosmtpd's hooks, run on the sink's event-loop thread. Not the sink itself: aiosmtpd
    takes every ``auth_*`` attribute of a handler for an AUTH mechanism."""

    def __init__(self, sink: SmtpSink) -> None:
        self.sink = sink

    async def handle_EHLO(self, server: Any, session: Any, envelope: Any, hostname: str,
                          responses: list[str]) -> list[str]:
        with self.sink._lock:
            self.sink.helo_names.append(hostname)
        session.host_name = hostname
        return responses

    async def handle_MAIL(self, server: Any, session: Any, envelope: Any, address: str,
                          mail_options: list[str]) -> str:
        with self.sink._lock:
            self.sink._peers.add(session.peer)
        if self.sink._over_rate():
            return "450 4.7.1 Error: too much mail from 127.0.0.1"
        scripted = self.sink._take("MAIL", address)
        if scripted is not None:
            return _answer(server, scripted)
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,
                          rcpt_options: list[str]) -> str:
        with self.sink._lock:
            self.sink._attempts[address.lower()] += 1
        scripted = self.sink._take("RCPT", address)
        if scripted is not None:
            return _answer(server, scripted)
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        for address in envelope.rcpt_tos:
            scripted = self.sink._take("DATA", address)
            if scripted is not None:
                return _answer(server, scripted)
        queue_id = uuid.uuid4().hex[:12].upper()
        content = envelope.original_content or envelope.content or b""
        record = Received(envelope.mail_from, tuple(envelope.rcpt_tos), bytes(content),
                          queue_id, tuple(session.peer[:2]), tuple(envelope.mail_options))
        rcpts = {a.lower() for a in envelope.rcpt_tos}
        with self.sink._lock:
            accepted = len(self.sink._received)  # before this one
            self.sink._received.append(record)
            self.sink._accepted_at.append(self.sink._clock())
            pause = next((p for p in self.sink._pauses if accepted >= p.after
                          and (p.address is None or p.address in rcpts)), None)
            if pause is not None:
                self.sink._pauses.remove(pause)
        if pause is not None:
            pause.reached.set()
            # Waiting in a worker thread keeps the loop serving every other connection.
            await asyncio.get_running_loop().run_in_executor(None, pause.released.wait, 60)
        return self.sink.accept_reply.format(queue_id=queue_id)


def _answer(server: Any, scripted: str) -> str:
    if scripted == _DROP:
        server.transport.abort()  # the status returned below goes nowhere
        return "421 4.3.0 gone"
    return scripted


@pytest.fixture
def smtp_server_factory() -> Iterator[Callable[..., SmtpSink]]:
    """Starts sinks with options (``tls_context``, ``users`` …), all stopped after the test."""
    started: list[SmtpSink] = []

    def start(**options: Any) -> SmtpSink:
        sink = SmtpSink(**options).start()
        started.append(sink)
        return sink

    try:
        yield start
    finally:
        for sink in started:
            sink.stop()


@pytest.fixture
def smtp_server(smtp_server_factory: Callable[..., SmtpSink]) -> SmtpSink:
    """A plain sink (no STARTTLS, no AUTH)."""
    return smtp_server_factory()


@pytest.fixture
def smtp_transport(smtp_server: SmtpSink) -> Iterator[SmtpTransport]:
    """An smtp transport to :func:`smtp_server`, closed after the test."""
    transport = SmtpTransport(smtp_server.settings(), None, timeout=5.0)
    yield transport
    transport.close()


def outgoing(recipient: str = "reader@example.com", *, cte: str = "8bit",
             tags: Mapping[str, str] | None = None) -> Outgoing:
    """A two-part message shaped like the real ones: UTF-8, RFC 2047 subject, CRLF; both parts
    in ``cte`` (``quoted-printable``: a body of ASCII only, for what 8bit changes). In 8bit the
    raw bytes keep a line that starts with "." (a transport must dot-stuff it)."""
    msg = EmailMessage(policy=policy.SMTP)
    msg["From"] = Address("vLLM PR Weekly", addr_spec=SENDER)
    msg["To"] = recipient
    msg["Subject"] = SUBJECT
    msg.set_content("本周值得精读：调度器重构。\n.hidden line that starts with a dot\n", cte=cte)
    msg.add_alternative("<p lang=\"zh\">本周值得精读：调度器重构。</p>", subtype="html",
                        cte=cte)
    return Outgoing(recipient=recipient, sender=SENDER, raw=msg.as_bytes(),
                    key=f"2026-W48/{recipient}",
                    tags={"issue": "2026-W48"} if tags is None else dict(tags))


@dataclass(frozen=True)
class Tls:
    """A throwaway CA and a certificate for 127.0.0.1 / localhost signed by it."""

    #: For the server (aiosmtpd ``tls_context``).
    server: ssl.SSLContext
    #: For the client: verifies certificates and host names, trusting only this CA.
    client: ssl.SSLContext
    ca_pem: bytes
    #: The CA certificate as a file: what ``[smtp] ca_file`` is given.
    ca_file: Path
    #: For a server whose certificate (signed by the same CA) names only
    #: ``elsewhere.test``: a host-name mismatch for a client connecting to 127.0.0.1.
    elsewhere: ssl.SSLContext


@pytest.fixture(scope="session")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    folder = tmp_path_factory.mktemp("tls")
    (cert_pem, key_pem), (other_pem, other_key), ca_pem = make_certificates()
    contexts = []
    for name, cert, key in (("cert", cert_pem, key_pem), ("elsewhere", other_pem, other_key)):
        (folder / f"{name}.pem").write_bytes(cert)
        (folder / f"{name}.key").write_bytes(key)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(folder / f"{name}.pem", folder / f"{name}.key")
        contexts.append(context)
    (folder / "ca.pem").write_bytes(ca_pem)
    client = ssl.create_default_context(cadata=ca_pem.decode("ascii"))
    return Tls(server=contexts[0], client=client, ca_pem=ca_pem, ca_file=folder / "ca.pem",
               elsewhere=contexts[1])


def make_certificates() -> tuple[tuple[bytes, bytes], tuple[bytes, bytes], bytes]:
    """((leaf, key) for 127.0.0.1 and localhost, (leaf, key) for elsewhere.test only, CA),
    PEM."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "newsletter test CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM

    def leaf(names: list[x509.GeneralName]) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, str(names[0].value))]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
                           critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        return cert.public_bytes(pem), key_pem

    here = leaf([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    elsewhere = leaf([x509.DNSName("elsewhere.test")])
    return here, elsewhere, ca.public_bytes(pem)


# -- AWS through moto -------------------------------------------------------------------------

REGION = "us-east-1"


@dataclass
class MotoServer:
    """A moto server on loopback; boto3 clients made in the test reach it by environment."""

    url: str
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)

    def sent(self) -> list[dict[str, Any]]:
        """Raw messages sent through SES since the last reset (shape: module docstring)."""
        with urllib.request.urlopen(f"{self.url}/moto-api/data.json", timeout=10) as answer:
            data = json.load(answer)
        return list(data.get("ses", {}).get("RawMessage", []))

    @staticmethod
    def parse(record: Mapping[str, Any]) -> EmailMessage:
        """One ``sent()`` record's message, parsed from bytes: the email package decodes an
        8-bit part of a *string* message as ``raw-unicode-escape`` ("\\u672c" for "本")."""
        raw = str(record["raw_data"]).encode("utf-8")
        return BytesParser(policy=policy.default).parsebytes(raw)

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def client(self, service: str = "sesv2") -> Any:
        """A boto3 client for set-up (the code under test builds its own); cached."""
        if service not in self._clients:
            import boto3

            session = boto3.session.Session(region_name=REGION, aws_access_key_id="testing",
                                            aws_secret_access_key="testing")
            # Any service by name: boto3-stubs overload ``client`` on literal names only.
            self._clients[service] = cast(Any, session).client(service, endpoint_url=self.url)
        return self._clients[service]

    @staticmethod
    def seed_objects(bucket: str, objects: Mapping[str, bytes]) -> None:
        """Put ``objects`` (key → bytes) straight into moto's memory (the server runs in this
        process): set-up puts over HTTP would check nothing; reads still go over HTTP."""
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        for key, data in objects.items():
            backend.put_object(bucket, key, data)

    def verify(self, identity: str) -> None:
        self.client().create_email_identity(EmailIdentity=identity)

    def inject(self, client: Any, answers: Mapping[str, Any] | None = None) -> SesInjection:
        return inject_ses(client, answers)


@pytest.fixture(scope="session")
def _moto_session() -> Iterator[MotoServer]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield MotoServer(f"http://{host}:{port}")
    finally:
        server.stop()


#: Variables that would send boto3 elsewhere or change its behaviour behind the test's back.
_AWS_NOISE = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
              "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS", "AWS_ENDPOINT_URL_SESV2",
              "AWS_ENDPOINT_URL_SES", "AWS_ENDPOINT_URL_S3", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
              "AWS_REGION", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
              "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE")


def aws_environment(monkeypatch: pytest.MonkeyPatch, endpoint_url: str) -> None:
    """Point boto3 at ``endpoint_url`` with dummy credentials and no local AWS config."""
    for name in _AWS_NOISE:
        monkeypatch.delenv(name, raising=False)
    nowhere = str(Path(os.devnull))
    monkeypatch.setenv("AWS_CONFIG_FILE", nowhere)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", nowhere)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint_url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@pytest.fixture
def moto_server(_moto_session: MotoServer, monkeypatch: pytest.MonkeyPatch,
                request: pytest.FixtureRequest) -> MotoServer:
    """The session's moto server, reset, with ``weekly@example.org`` verified for SES."""
    if request.node.get_closest_marker("aws") is None:  # reached by getfixturevalue
        pytest.fail(f"{request.node.nodeid} talks to moto without the aws mark "
                    "(pytest.param(..., marks=pytest.mark.aws))", pytrace=False)
    server = _moto_session
    server.reset()
    aws_environment(monkeypatch, server.url)
    server.verify(SENDER)
    return server


@pytest.fixture
def unused_port() -> Iterator[int]:
    """A loopback port that refuses connections: bound, never listening, held for the test."""
    with bound_socket() as sock:
        yield sock.getsockname()[1]


@pytest.fixture
def silent_server() -> Iterator[tuple[str, int]]:
    """(host, port) that accepts connections (in the kernel's backlog) and never answers."""
    with bound_socket() as sock:
        sock.listen(64)
        yield sock.getsockname()[:2]


# -- answers moto cannot give, injected on the wire -------------------------------------------


@dataclass
class SesInjection:
    """What :func:`inject_ses` saw; ``remove()`` takes the hook out again."""

    #: HTTP attempts per operation ("SendEmail": 3), answered here or passed to the server.
    calls: Counter[str] = field(default_factory=Counter)
    #: (operation, JSON request body) of every attempt, in order.
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    remove: Callable[[], None] = lambda: None


class _Body:
    """The raw stream botocore reads a response body from."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


def inject_ses(client: Any, answers: Mapping[str, Any] | None = None) -> SesInjection:
    """Answer sesv2 calls of ``client`` in AWS's wire format, before they reach the network:
    what moto lacks or cannot fail on demand.

    ``answers`` maps an operation to one answer (for every call) or a list (for the first
    calls; later ones reach the server). An answer is AWS's success body, or an error as
    boto3 reports it: ``{"Error": {"Code": ..., "Message": ...}}``, with the HTTP status of
    ``ResponseMetadata.HTTPStatusCode`` or else the one the service model gives the code.

    The hook sits on botocore's ``before-send`` event, once per HTTP attempt inside its retry
    loop, so botocore's own parser raises the ``ClientError`` AWS would cause and ``calls``
    counts real attempts.
    """
    from botocore.awsrequest import AWSResponse

    injection = SesInjection()
    pending: dict[str, deque[Mapping[str, Any]]] = {}
    always: dict[str, Mapping[str, Any]] = {}
    for operation, answer in (answers or {}).items():
        if isinstance(answer, Mapping):
            always[operation] = answer
        else:
            pending[operation] = deque(answer)
    model = client.meta.service_model
    lock = threading.Lock()

    def respond(answer: Mapping[str, Any], url: str) -> AWSResponse:
        headers = {"Content-Type": "application/json", "x-amzn-RequestId": str(uuid.uuid4())}
        if "Error" in answer:
            code = answer["Error"]["Code"]
            status = answer.get("ResponseMetadata", {}).get("HTTPStatusCode") or _status(code)
            headers["x-amzn-ErrorType"] = code
            body = {"message": answer["Error"].get("Message", "")}
        else:
            status, body = 200, dict(answer)
        # botocore copies any mapping into a HeadersDict; the stubs ask for its HTTPHeaders.
        return AWSResponse(url, status, cast(Any, headers), _Body(json.dumps(body).encode()))

    def _status(code: str) -> int:
        try:
            return int(model.shape_for(code).metadata["error"]["httpStatusCode"])
        except Exception:  # no such shape (e.g. the common "Throttling"): AWS answers 400
            return 400

    def before_send(request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        try:
            sent = json.loads(request.body or b"{}")
        except (TypeError, ValueError):
            sent = {}
        with lock:
            injection.calls[operation] += 1
            injection.requests.append((operation, sent))
            if operation in always:
                answer: Mapping[str, Any] | None = always[operation]
            else:
                queue = pending.get(operation)
                answer = queue.popleft() if queue else None
        return None if answer is None else respond(answer, request.url)

    unique = f"inject-ses-{uuid.uuid4().hex}"
    client.meta.events.register("before-send.sesv2", before_send, unique_id=unique)
    injection.remove = lambda: client.meta.events.unregister(
        "before-send.sesv2", unique_id=unique)
    return injection
