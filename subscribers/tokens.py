"""Signed tokens for the links in every email: confirm, unsubscribe, preferences.

HMAC-SHA256 over (key id, purpose, subscriber id, expiry), compared in constant time; several
keys valid at once, so a rotation breaks no link already in someone's inbox.

Binary layout (35 bytes)::

    0      1 byte    version (1) in the high nibble, purpose in the low nibble
                     (confirm=1, unsubscribe=2, preferences=3)
    1..2   2 bytes   key id: the first 2 bytes of sha256(key)
    3..6   4 bytes   expiry, unix seconds, big-endian; 0 = never
    7..18  12 bytes  subscriber id (its 24 hex characters, decoded)
    19..34 16 bytes  HMAC-SHA256(key, bytes 0..18), truncated

encoded as RFC 4648 base32, lower-case, unpadded: 56 characters of ``[a-z2-7]``, URL-safe,
fit for an email local part and proof against a mail server that changes its case (hence
not base64). A local part holds at most 64 characters (RFC 5321), so ``<local>+<token>@…``
leaves 7 for ``<local>`` (:func:`tagged_address` checks it).

Unsubscribe and preferences tokens never expire (old mail must keep working); confirmation
tokens do. A secret never appears in a message, an exception or a repr.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from pipeline.errors import ConfigError
from subscribers.errors import TokenError

__all__ = ["MAX_TAGGED_LOCAL_PART", "PURPOSES", "TOKEN_LENGTH", "Keys", "Purpose", "confirm_expiry",
           "make_token", "tagged_address", "verify_token"]

Purpose = Literal["confirm", "unsubscribe", "preferences"]

_VERSION = 1
_CODES: dict[Purpose, int] = {"confirm": 1, "unsubscribe": 2, "preferences": 3}
_PURPOSE_OF_CODE = {code: purpose for purpose, code in _CODES.items()}
#: The purposes a token can have, in the order of their codes.
PURPOSES: tuple[Purpose, ...] = tuple(_CODES)

_HEADER = struct.Struct(">B2sI12s")  # version|purpose, key id, expiry, subscriber id
_MAC_BYTES = 16
_RAW_BYTES = _HEADER.size + _MAC_BYTES  # 35: whole 5-byte base32 blocks, so no padding
#: Length of every token (56): its bytes in base32, unpadded.
TOKEN_LENGTH = _RAW_BYTES * 8 // 5
_BASE32 = re.compile(rf"^[A-Z2-7]{{{TOKEN_LENGTH}}}$")
_MAX_EXPIRY = 2**32 - 1
_SUBSCRIBER_ID = re.compile(r"[0-9a-fA-F]{24}")

#: Signs links in the local outbox only: public, so a real transport and
#: ``Keys.from_environ`` refuse it.
_DEVELOPMENT_SECRET = b"vllm-pr-weekly DEVELOPMENT key - local outbox only, never production"
#: A shorter secret (UTF-8 bytes) would be guessable offline from any one link.
MIN_SECRET_LENGTH = 32


def _key_id(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()[:2]


@dataclass(frozen=True)
class Keys:
    """The key that signs new tokens, and every key whose tokens are still accepted; the key
    bytes are kept out of ``repr`` and every message."""

    signing: bytes = field(repr=False)
    #: Keys that verify but no longer sign (``NEWSLETTER_SECRET_PREVIOUS``).
    previous: tuple[bytes, ...] = field(default=(), repr=False)
    #: True for the public development key: links it signs are forgeable by anyone.
    is_development: bool = False

    def __post_init__(self) -> None:
        if not self.signing:
            raise ValueError("a signing key is required")

    def __repr__(self) -> str:
        ids = ", ".join(_key_id(k).hex() for k in self.verifying)
        kind = "development" if self.is_development else "environment"
        return f"Keys({kind}, key ids: {ids})"

    @property
    def verifying(self) -> tuple[bytes, ...]:
        """Every accepted key, the signing one first."""
        return (self.signing, *self.previous)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Keys:
        """``NEWSLETTER_SECRET`` signs; ``NEWSLETTER_SECRET_PREVIOUS`` (comma-separated) still
        verifies, so links mailed before a rotation keep working."""
        current = environ.get("NEWSLETTER_SECRET", "").strip()
        if not current:
            raise ConfigError("NEWSLETTER_SECRET is not set (it signs every unsubscribe and "
                              "preferences link)")
        previous = [p.strip() for p in environ.get("NEWSLETTER_SECRET_PREVIOUS", "").split(",")
                    if p.strip()]
        for name, secret in [("NEWSLETTER_SECRET", current),
                             *(("NEWSLETTER_SECRET_PREVIOUS", p) for p in previous)]:
            if len(secret.encode()) < MIN_SECRET_LENGTH:
                raise ConfigError(f"{name} is too short: use at least {MIN_SECRET_LENGTH} "
                                  "random bytes (e.g. python -c \"import secrets; "
                                  "print(secrets.token_urlsafe(32))\")")
            if secret.encode() == _DEVELOPMENT_SECRET:
                raise ConfigError(f"{name} is the public development key; "
                                  "generate a secret of your own")
        older = tuple(dict.fromkeys(p.encode() for p in previous if p != current))
        return cls(signing=current.encode(), previous=older)

    @classmethod
    def development(cls) -> Keys:
        """The fixed, public key for the local outbox: proofs work without any setup."""
        return cls(signing=_DEVELOPMENT_SECRET, is_development=True)


def confirm_expiry(now: datetime, days: int = 7) -> datetime:
    """When a confirmation link sent at ``now`` stops working (7 days: a week to open the mail)."""
    _require_aware(now)
    return now.astimezone(UTC) + timedelta(days=days)


def make_token(keys: Keys, purpose: Purpose, subscriber_id: str,
               expires_at: datetime | None) -> str:
    """A 56-character token for ``purpose`` and ``subscriber_id``, signed with the current key;
    only a confirmation token expires."""
    if purpose not in _CODES:
        raise ValueError(f"unknown token purpose {purpose!r}; known: {', '.join(PURPOSES)}")
    if purpose == "confirm" and expires_at is None:
        raise ValueError("confirmation tokens expire: pass confirm_expiry(now)")
    if purpose != "confirm" and expires_at is not None:
        raise ValueError(f"{purpose} tokens never expire: pass expires_at=None")
    if not _SUBSCRIBER_ID.fullmatch(subscriber_id):
        raise ValueError("a subscriber id is 24 hex characters")
    expiry = 0
    if expires_at is not None:
        _require_aware(expires_at)
        expiry = int(expires_at.timestamp())
        if not 0 < expiry <= _MAX_EXPIRY:
            raise ValueError("expiry out of range (1970-2106)")
    header = _HEADER.pack((_VERSION << 4) | _CODES[purpose], _key_id(keys.signing), expiry,
                          bytes.fromhex(subscriber_id))
    return base64.b32encode(header + _mac(keys.signing, header)).decode("ascii").lower()


def verify_token(keys: Keys, token: str, purpose: Purpose, now: datetime) -> str:
    """The subscriber id a token was made for, or TokenError. Purpose and expiry are judged
    only once the signature holds, so an unsigned token learns nothing but "bad signature"."""
    if purpose not in _CODES:
        raise ValueError(f"unknown token purpose {purpose!r}; known: {', '.join(PURPOSES)}")
    _require_aware(now)
    text = token.strip().upper() if isinstance(token, str) else ""
    if not _BASE32.match(text):
        raise TokenError("malformed")
    raw = base64.b32decode(text)  # 35 bytes are exactly 7 base32 blocks: no padding
    header, mac = raw[: _HEADER.size], raw[_HEADER.size :]
    sid: bytes
    first, key_id, expiry, sid = _HEADER.unpack(header)
    if first >> 4 != _VERSION or (first & 0x0F) not in _PURPOSE_OF_CODE:
        raise TokenError("malformed")
    candidates = [k for k in keys.verifying if hmac.compare_digest(_key_id(k), key_id)]
    if not candidates:
        raise TokenError("unknown-key")
    # Every candidate is tried (two keys can share a 2-byte id), all of them (a list, not a
    # generator: no early exit on a match), so timing does not reveal which key matched.
    if not any([hmac.compare_digest(_mac(key, header), mac) for key in candidates]):
        raise TokenError("bad-signature")
    if _PURPOSE_OF_CODE[first & 0x0F] != purpose:
        raise TokenError("wrong-purpose")
    if expiry and now.timestamp() >= expiry:
        raise TokenError("expired", subscriber_id=sid.hex())
    return sid.hex()


#: The longest local part a tagged address may start from: 64 - len("+") - TOKEN_LENGTH.
MAX_TAGGED_LOCAL_PART = 64 - 1 - TOKEN_LENGTH


def tagged_address(address: str, token: str) -> str:
    """``unsub@example.org`` + token → ``unsub+<token>@example.org``: the ``mailto:``
    unsubscribe address. A local part too long for the token is a configuration mistake."""
    local, at, domain = address.strip().rpartition("@")
    if not at or not local or not domain or "+" in local:
        raise ConfigError(f"expected an address such as unsub@example.org, got {address!r}",
                          key="[delivery] unsubscribe_mailto")
    if len(local) > MAX_TAGGED_LOCAL_PART:
        raise ConfigError(f"the part before @ may be at most {MAX_TAGGED_LOCAL_PART} "
                          f"characters (it gets '+' and a {TOKEN_LENGTH}-character token), "
                          f"got {local!r}", key="[delivery] unsubscribe_mailto")
    return f"{local}+{token}@{domain}"


def _mac(key: bytes, header: bytes) -> bytes:
    return hmac.new(key, header, hashlib.sha256).digest()[:_MAC_BYTES]


def _require_aware(when: datetime) -> None:
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError("datetimes must be timezone-aware (UTC)")
