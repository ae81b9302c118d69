"""Verify the Amazon SNS messages that reach ``POST /webhooks/ses``.

Anyone can POST there, and a forged "permanent bounce" would silently drop a subscriber, so
nothing in a body is believed until :class:`SnsVerifier` has checked, in this order: the body
is an SNS message; its ``TopicArn`` is ours (SNS signs *every* account's topics with the same
certificates, so a valid signature alone proves nothing; checked before any fetch); the
signature version; the ``SigningCertURL`` is HTTPS on an SNS host (else the sender picks the
key); the certificate is current RSA; the signature
(https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html); and the
``Timestamp`` is recent, which bounds replay.

Certificates are fetched following no redirect (it could leave the SNS host after the URL
check), up to a size limit, and kept per URL while valid.
"""

from __future__ import annotations

import base64
import binascii
import http.client
import json
import re
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from pipeline.core.issue.sanitize import one_line
from pipeline.errors import NewsletterError

__all__ = ["AWS_SNS_HOST", "MAX_CACHED_CERTIFICATES", "CertificateSource", "SnsError",
           "SnsMessage", "SnsReason", "SnsVerifier"]

SnsReason = Literal[
    "malformed", "topic-not-allowed", "bad-cert-url", "cert-unavailable", "subscribe-failed",
    "bad-signature", "unsupported-version", "stale",
]

#: Why a message was refused; the app picks its status code and log line from this.
_MESSAGES: dict[SnsReason, str] = {
    "malformed": "not an Amazon SNS message",
    "topic-not-allowed": "the message comes from a topic that is not configured",
    "bad-cert-url": "the URL is not an HTTPS URL on an allowed SNS host",
    "cert-unavailable": "the signing certificate cannot be used",
    "subscribe-failed": "the subscription could not be confirmed",
    "bad-signature": "the message's signature does not match",
    "unsupported-version": "the message uses an unknown signature version",
    "stale": "the message's timestamp is too old or in the future",
}

#: The ``Type`` values SNS sends to an HTTP(S) endpoint.
MESSAGE_TYPES = ("Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation")

#: SNS's hosts, ``sns.<region>.amazonaws.com[.cn]`` in every partition. The region part has a
#: region's shape, not "any label": ``sns.s3.amazonaws.com`` is an S3 bucket anyone can
#: write to. ASCII classes only (``\d`` would take other scripts' digits).
AWS_SNS_HOST = re.compile(
    r"^sns\.[a-z]{2}(?:-gov|-iso[a-z]*)?-[a-z]+-[0-9]{1,2}\.amazonaws\.com(?:\.cn)?$")

#: A signing certificate is about 2 KB; anything much larger is not one.
MAX_CERTIFICATE_BYTES = 64 * 1024
#: Certificates kept at most (the oldest go first): SNS uses a handful, and a query or a
#: fragment makes another URL for one, so a sender could otherwise grow the cache at will.
MAX_CACHED_CERTIFICATES = 16
#: How far ahead of our clock a timestamp may be (clocks drift; minutes, not more).
MAX_FUTURE_SKEW = timedelta(minutes=5)

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    # Version 1 is SHA1withRSA because AWS defined it so; SNS still signs with it when a topic
    # is not set to version 2, so refusing it would refuse genuine mail events.
    "1": hashes.SHA1,
    "2": hashes.SHA256,
}

_NOTIFICATION_KEYS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
_CONFIRMATION_KEYS = (
    "Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type",
)


class SnsError(NewsletterError):
    """A refused SNS message (or URL in one): one line, never the attacker-chosen body."""

    exit_code = 2

    def __init__(self, reason: SnsReason, detail: str = "") -> None:
        text = f"sns {reason}: {_MESSAGES[reason]}"
        if detail:
            text += f" ({one_line(detail, 120)})"
        super().__init__(text)
        self.reason: SnsReason = reason


@dataclass(frozen=True)
class SnsMessage:
    """The parts of an SNS message the app uses; only :meth:`SnsVerifier.verify` makes one
    that can be believed."""

    type: str
    message_id: str
    topic_arn: str
    #: The ``Message`` field: for SES events a JSON document, as a string.
    message: str
    #: Aware, UTC.
    timestamp: datetime
    subject: str | None
    #: Set for ``SubscriptionConfirmation`` and ``UnsubscribeConfirmation``.
    subscribe_url: str | None
    token: str | None


def _load(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # includes invalid UTF-8 (UnicodeDecodeError)
        raise SnsError("malformed", "the body is not JSON") from None
    if not isinstance(data, dict):
        raise SnsError("malformed", "the body is not a JSON object")
    return data


def _message_from(data: Mapping[str, Any]) -> SnsMessage:
    """The message's shape, or ``malformed``: a field its ``Type`` requires is missing or is
    not a string, or the ``Type`` is unknown."""
    kind = data.get("Type")
    if kind not in MESSAGE_TYPES:
        raise SnsError("malformed", "unknown or missing Type")
    subject = data.get("Subject")
    if subject is not None and not isinstance(subject, str):
        raise SnsError("malformed", "Subject is not a string")
    confirmation = kind != "Notification"
    return SnsMessage(
        type=kind, message_id=_require_text(data, "MessageId", nonempty=True),
        topic_arn=_require_text(data, "TopicArn", nonempty=True),
        message=_require_text(data, "Message"),
        timestamp=_parse_timestamp(_require_text(data, "Timestamp", nonempty=True)),
        subject=subject,
        subscribe_url=_require_text(data, "SubscribeURL", nonempty=True) if confirmation else None,
        token=_require_text(data, "Token", nonempty=True) if confirmation else None,
    )


def _require_text(data: Mapping[str, Any], key: str, *, nonempty: bool = False) -> str:
    value = data.get(key)
    if not isinstance(value, str) or (nonempty and not value):
        raise SnsError("malformed", f"{key} is missing or not a string")
    return value


def _parse_timestamp(text: str) -> datetime:
    """SNS writes ISO 8601 in UTC with milliseconds (``2012-04-26T20:45:04.751Z``)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise SnsError("malformed", "Timestamp is not an ISO 8601 time") from None
    if when.tzinfo is None:
        raise SnsError("malformed", "Timestamp has no time zone")
    return when.astimezone(UTC)


def _string_to_sign(data: Mapping[str, Any]) -> bytes:
    """"Key\\nValue\\n" for each signed key in AWS's order; Subject only when present."""
    keys = _NOTIFICATION_KEYS if data["Type"] == "Notification" else _CONFIRMATION_KEYS
    return "".join(
        f"{key}\n{data[key]}\n" for key in keys if data.get(key) is not None
    ).encode("utf-8")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Turns every redirect into an error: the URL was checked, its target was not."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass(frozen=True)
class _Cached:
    key: rsa.RSAPublicKey
    not_before: datetime
    not_after: datetime


class CertificateSource:
    """Fetches SNS signing certificates over HTTPS, only from an allowed host, and keeps the
    valid ones. Only a pattern other than AWS's (a test's loopback server) allows a port."""

    def __init__(self, *, host_pattern: re.Pattern[str] = AWS_SNS_HOST,
                 ssl_context: ssl.SSLContext | None = None, timeout: float = 5.0) -> None:
        self._host_pattern = host_pattern
        self._allow_port = host_pattern != AWS_SNS_HOST
        self._timeout = timeout
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=ssl_context or ssl.create_default_context()),
            _NoRedirect())
        self._lock = threading.Lock()
        self._cache: dict[str, _Cached] = {}

    def check_url(self, url: str, what: str = "SigningCertURL") -> str:
        """``url`` if it may be fetched, else ``bad-cert-url``: HTTPS on an allowed host, no
        user info (``sns.…@evil.org``), no characters ``urllib`` would drop after the check."""
        if not isinstance(url, str) or not url or any(
                not 0x21 <= ord(c) <= 0x7E for c in url):
            raise SnsError("bad-cert-url", f"{what} is empty or has invalid characters")
        try:
            parts = urllib.parse.urlsplit(url)
            port = parts.port
        except ValueError:
            raise SnsError("bad-cert-url", f"{what} is not a URL") from None
        host = parts.hostname or ""
        if parts.scheme != "https":
            raise SnsError("bad-cert-url", f"{what} is not https")
        if "@" in parts.netloc:
            raise SnsError("bad-cert-url", f"{what} has user info")
        if not self._host_pattern.fullmatch(host):
            raise SnsError("bad-cert-url", f"{what} host {host[:60]!r} is not allowed")
        if port is not None and not self._allow_port:
            raise SnsError("bad-cert-url", f"{what} names a port")
        if what == "SigningCertURL" and not parts.path.endswith(".pem"):
            raise SnsError("bad-cert-url", f"{what} does not name a .pem file")
        return url

    def public_key(self, url: str, *, now: datetime) -> rsa.RSAPublicKey:
        """The RSA key of the certificate at ``url``, valid at ``now``, else
        ``cert-unavailable``; one no longer valid is fetched again (SNS may have renewed it)."""
        self.check_url(url)
        with self._lock:
            entry = self._cache.get(url)
        if entry is None or not entry.not_before <= now <= entry.not_after:
            entry = self._load(url)
            if now > entry.not_after:
                raise SnsError("cert-unavailable", "the certificate has expired")
            if now < entry.not_before:
                raise SnsError("cert-unavailable", "the certificate is not valid yet")
            with self._lock:
                self._cache.pop(url, None)
                self._cache[url] = entry
                while len(self._cache) > MAX_CACHED_CERTIFICATES:
                    del self._cache[next(iter(self._cache))]
        return entry.key

    def get(self, url: str) -> None:
        """GET a ``SubscribeURL``, which confirms an SNS subscription."""
        self.check_url(url, "SubscribeURL")
        self._fetch(url, "subscribe-failed")

    def _load(self, url: str) -> _Cached:
        data = self._fetch(url, "cert-unavailable")
        try:
            cert = x509.load_pem_x509_certificate(data)
            key = cert.public_key()
        except ValueError:
            raise SnsError("cert-unavailable", "not a PEM X.509 certificate") from None
        if not isinstance(key, rsa.RSAPublicKey):
            raise SnsError("cert-unavailable", "the certificate's key is not RSA")
        return _Cached(key=key, not_before=cert.not_valid_before_utc,
                       not_after=cert.not_valid_after_utc)

    def _fetch(self, url: str, failed: SnsReason) -> bytes:
        """The body of a 2xx answer, at most :data:`MAX_CERTIFICATE_BYTES`, read within ``timeout``
        in total so a server dripping bytes cannot hold the request open."""
        if not url.startswith("https://"):  # check_url made sure; never file:, ftp:, data:
            raise SnsError(failed, "not https")
        deadline = time.monotonic() + self._timeout
        request = urllib.request.Request(  # noqa: S310 (https only, see above; no redirects)
            url, headers={"User-Agent": "vllm-pr-weekly"})
        body = bytearray()
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                while chunk := response.read1(16 * 1024):
                    body += chunk
                    if len(body) > MAX_CERTIFICATE_BYTES:
                        raise SnsError(failed, f"more than {MAX_CERTIFICATE_BYTES} bytes")
                    if time.monotonic() > deadline:
                        raise SnsError(failed, "too slow")
        except urllib.error.HTTPError as error:  # every non-2xx: no redirect is followed
            error.close()
            raise SnsError(failed, f"HTTP {error.code}") from None
        except urllib.error.URLError as error:
            raise SnsError(failed, str(error.reason)) from None
        except (OSError, ValueError, http.client.HTTPException) as error:
            # timeouts, resets, TLS errors, a truncated or garbled answer
            raise SnsError(failed, f"{type(error).__name__}: {error}") from None
        return bytes(body)


class SnsVerifier:
    """Checks SNS messages for the webhook; no ``topic_arns``, no message is believed."""

    def __init__(self, certificates: CertificateSource, topic_arns: Collection[str], *,
                 max_age: timedelta = timedelta(days=7)) -> None:
        self.certificates = certificates
        self.topic_arns = frozenset(topic_arns)
        self.max_age = max_age

    def verify(self, body: bytes, now: datetime) -> SnsMessage:
        """The message in ``body`` if it passes every check (see the module docstring, in
        that order), else :class:`SnsError` naming the first that failed."""
        data = _load(body)
        message = _message_from(data)
        version = data.get("SignatureVersion")
        signature = _require_text(data, "Signature", nonempty=True)
        cert_url = _require_text(data, "SigningCertURL", nonempty=True)
        self._check_topic(message)
        if not isinstance(version, str) or version not in _HASHES:
            raise SnsError("unsupported-version", f"SignatureVersion {str(version)[:8]!r}")
        key = self.certificates.public_key(cert_url, now=now)  # checks the URL first
        try:
            raw = base64.b64decode(signature, validate=True)
            key.verify(raw, _string_to_sign(data), padding.PKCS1v15(), _HASHES[version]())
        except (binascii.Error, ValueError, InvalidSignature):
            raise SnsError("bad-signature") from None
        age = now - message.timestamp
        if age > self.max_age:
            raise SnsError("stale", f"sent {_round(age)} ago")
        if -age > MAX_FUTURE_SKEW:
            raise SnsError("stale", f"sent {_round(-age)} in the future")
        return message

    def confirm_subscription(self, message: SnsMessage) -> None:
        """GET a verified confirmation's ``SubscribeURL``; topic and URL are checked again,
        so the app never requests a URL of the sender's choosing."""
        if message.type != "SubscriptionConfirmation" or not message.subscribe_url:
            raise ValueError("only a SubscriptionConfirmation can be confirmed")
        self._check_topic(message)
        self.certificates.get(message.subscribe_url)

    def _check_topic(self, message: SnsMessage) -> None:
        if message.topic_arn not in self.topic_arns:
            raise SnsError("topic-not-allowed", message.topic_arn[:100])


def _round(delta: timedelta) -> timedelta:
    return timedelta(seconds=round(delta.total_seconds()))
