"""Signing and serving as Amazon SNS does: messages signed per AWS's documentation (not by
the module under test) with a key whose certificate a real HTTPS server on 127.0.0.1 hands
out; the server counts connections and hits per path.
"""

from __future__ import annotations

import base64
import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

TOPIC = "arn:aws:sns:us-east-1:123456789012:newsletter-ses-events"
SES_BOUNCE = json.dumps({"notificationType": "Bounce", "bounce": {
    "bounceType": "Permanent", "bouncedRecipients": [{"emailAddress": "jane@example.com"}]}})


def new_signer(key: Any = None, days: tuple[int, int] = (-1, 30)) -> Signer:
    """``key`` (a new RSA key by default) and its self-signed certificate, valid over
    ``days`` from today."""
    key = key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = datetime.now(UTC)
    return Signer(key, certificate(key, now + timedelta(days=days[0]),
                                   now + timedelta(days=days[1])))


@dataclass(frozen=True)
class Signer:
    key: Any
    pem: bytes


def certificate(key: Any, not_before: datetime, not_after: datetime) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.us-east-1.amazonaws.com")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before).not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class Route:
    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    #: Answer 500 this many times before answering normally.
    fail_first: int = 0


class CertServer(ThreadingHTTPServer):
    """Serves ``routes`` over TLS; counts TCP connections and the hits on each path."""

    daemon_threads = True

    def __init__(self, context: Any) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.context = context
        self.routes: dict[str, Route] = {}
        self.hits: Counter[str] = Counter()
        self.paths: list[str] = []  # full request targets, query included
        self.connections = 0
        self.lock = threading.Lock()

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        with self.lock:
            self.connections += 1
        # The handshake happens in the handler's thread, on the first read.
        return self.context.wrap_socket(sock, server_side=True,
                                        do_handshake_on_connect=False), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up or spoke plain HTTP: not the test's concern

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.server_address[1]}{path}"


class _Handler(BaseHTTPRequestHandler):
    server: CertServer

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        with self.server.lock:
            self.server.hits[path] += 1
            self.server.paths.append(self.path)
            route = self.server.routes.get(path)
            failing = route is not None and route.fail_first > 0
            if route is not None and failing:
                route.fail_first -= 1
        if route is None:
            self.send_error(404)
            return
        status = 500 if failing else route.status
        self.send_response(status)
        for name, value in route.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(route.body)))
        self.end_headers()
        self.wfile.write(route.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


NOW = datetime.now(UTC).replace(microsecond=0)


def stamp(when: datetime) -> str:
    """SNS's format: UTC, milliseconds, Z."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def string_to_sign(fields: dict[str, Any]) -> bytes:
    """Per https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html:
    the listed keys in this (byte) order, each as "Key\\nValue\\n", Subject only if present."""
    if fields["Type"] == "Notification":
        names = ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"]
    else:
        names = ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn",
                 "Type"]
    return "".join(f"{name}\n{fields[name]}\n" for name in names if name in fields).encode()


def sign(fields: dict[str, Any], signer: Signer, version: str = "2",
         data: bytes | None = None) -> dict[str, Any]:
    # SignatureVersion 1 is SHA1withRSA by AWS's definition.
    digest = hashes.SHA1() if version == "1" else hashes.SHA256()  # noqa: S303
    raw = signer.key.sign(data if data is not None else string_to_sign(fields),
                          padding.PKCS1v15(), digest)
    return {**fields, "SignatureVersion": version,
            "Signature": base64.b64encode(raw).decode("ascii")}


def notification(cert_url: str, *, topic: str = TOPIC, message: str = SES_BOUNCE,
                 when: datetime = NOW, subject: str | None = None) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "Type": "Notification",
        "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
        "TopicArn": topic,
        "Message": message,
        "Timestamp": stamp(when),
        "SigningCertURL": cert_url,
        "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
    }
    if subject is not None:
        fields["Subject"] = subject
    return fields


def confirmation(cert_url: str, subscribe_url: str, *, kind: str = "SubscriptionConfirmation",
                 topic: str = TOPIC, when: datetime = NOW) -> dict[str, Any]:
    token = "2336412f37fb687f5d51e6e241d638b05824e9e2f6713b42abaeb86"
    return {
        "Type": kind,
        "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
        "Token": token,
        "TopicArn": topic,
        "Message": f"You have chosen to subscribe to the topic {topic}.\n"
                   "To confirm the subscription, visit the SubscribeURL included in this "
                   "message.",
        "SubscribeURL": subscribe_url,
        "Timestamp": stamp(when),
        "SigningCertURL": cert_url,
    }


def body(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields).encode()


@contextmanager
def cert_server(context: Any, routes: dict[str, Route]) -> Iterator[CertServer]:
    """A :class:`CertServer` with ``routes``, serving in a thread until the block ends."""
    server = CertServer(context)
    server.routes.update(routes)
    thread = threading.Thread(target=server.serve_forever, args=(0.005,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
