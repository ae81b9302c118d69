"""Link tokens: the byte layout, each refusal reason, expiry rules and key rotation."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import re
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.errors import ConfigError
from subscribers.errors import TokenError
from subscribers.model import new_subscriber_id
from subscribers.tokens import (
    PURPOSES,
    Keys,
    confirm_expiry,
    make_token,
    tagged_address,
    verify_token,
)

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
OLD = "old-secret-0123456789abcdef-0123456789"
NEW = "new-secret-fedcba9876543210-9876543210"
SID = "0123456789abcdef01234567"


def keys(current: str = NEW, previous: str | None = None) -> Keys:
    env = {"NEWSLETTER_SECRET": current}
    if previous is not None:
        env["NEWSLETTER_SECRET_PREVIOUS"] = previous
    return Keys.from_environ(env)


def token_for(purpose: str, k: Keys | None = None, sid: str = SID) -> str:
    expiry = confirm_expiry(NOW) if purpose == "confirm" else None
    return make_token(k or keys(), purpose, sid, expiry)  # type: ignore[arg-type]


def reason(k: Keys, token: str, purpose: str = "unsubscribe", now: datetime = NOW) -> str:
    with pytest.raises(TokenError) as caught:
        verify_token(k, token, purpose, now)  # type: ignore[arg-type]
    assert caught.value.exit_code == 2
    return caught.value.reason


@pytest.mark.parametrize("purpose", PURPOSES)
def test_round_trip_for_each_purpose(purpose):
    sid = new_subscriber_id()
    token = token_for(purpose, sid=sid)
    assert verify_token(keys(), token, purpose, NOW) == sid


def test_shape_is_56_lower_case_base32_characters_and_upper_case_is_accepted():
    token = token_for("unsubscribe")
    assert len(token) == 56 and re.fullmatch(r"[a-z2-7]{56}", token)
    local_part = tagged_address("unsub@example.org", token).split("@")[0]
    assert local_part == f"unsub+{token}" and len(local_part) <= 64
    assert verify_token(keys(), local_part.split("+")[1].upper(), "unsubscribe", NOW) == SID
    assert verify_token(keys(), token.upper(), "unsubscribe", NOW) == SID
    assert verify_token(keys(), f" {token}\n", "unsubscribe", NOW) == SID


def test_a_tagged_address_must_fit_the_64_character_local_part():
    token = token_for("unsubscribe")
    assert tagged_address("leave12@example.org", token) == f"leave12+{token}@example.org"
    with pytest.raises(ConfigError, match="at most 7"):
        tagged_address("unsubscribe@example.org", token)  # 68 characters before the @
    for wrong in ("example.org", "@example.org", "u+x@example.org"):
        with pytest.raises(ConfigError):
            tagged_address(wrong, token)


def test_the_byte_layout_is_as_documented():
    k = keys()
    expires = confirm_expiry(NOW)
    data = base64.b32decode(make_token(k, "confirm", SID, expires).upper())
    assert len(data) == 35
    assert data[0] == 0x11  # version 1, purpose confirm
    assert data[1:3] == hashlib.sha256(NEW.encode()).digest()[:2]
    assert int.from_bytes(data[3:7], "big") == int(expires.timestamp())
    assert data[7:19] == bytes.fromhex(SID)
    assert data[19:] == hmac.new(NEW.encode(), data[:19], hashlib.sha256).digest()[:16]
    codes = {p: base64.b32decode(token_for(p).upper())[0] for p in PURPOSES}
    assert codes == {"confirm": 0x11, "unsubscribe": 0x12, "preferences": 0x13}


def test_forged_truncated_and_garbage_tokens_say_why():
    k = keys()
    token = token_for("unsubscribe", k)
    data = bytearray(base64.b32decode(token.upper()))
    mac_flipped = data.copy()
    mac_flipped[-1] ^= 1
    other_subscriber = data.copy()
    other_subscriber[10] ^= 1
    never_expiring_confirm = data.copy()
    never_expiring_confirm[0] = 0x11

    def encode(raw: bytearray) -> str:
        return base64.b32encode(bytes(raw)).decode().lower()

    assert reason(k, encode(mac_flipped)) == "bad-signature"
    assert reason(k, encode(other_subscriber)) == "bad-signature"
    assert reason(k, encode(never_expiring_confirm), "confirm") == "bad-signature"
    assert reason(k, token[:-1]) == "malformed"
    assert reason(k, token[:40]) == "malformed"
    assert reason(k, token + "a") == "malformed"
    assert reason(k, "") == "malformed"
    assert reason(k, "hello") == "malformed"
    assert reason(k, "0" * 56) == "malformed"  # '0' is not in the base32 alphabet
    assert reason(k, token[:-1] + "=") == "malformed"
    assert reason(k, token.replace(token[5], "-", 1)) == "malformed"
    version_two = data.copy()
    version_two[0] = 0x22
    assert reason(k, encode(version_two)) == "malformed"
    unknown_purpose = data.copy()
    unknown_purpose[0] = 0x1F
    assert reason(k, encode(unknown_purpose)) == "malformed"


def test_a_confirmation_token_expires():
    k = keys()
    token = make_token(k, "confirm", SID, confirm_expiry(NOW, days=7))
    assert verify_token(k, token, "confirm", NOW + timedelta(days=7, seconds=-1)) == SID
    assert reason(k, token, "confirm", NOW + timedelta(days=7)) == "expired"
    assert reason(k, token, "confirm", NOW + timedelta(days=30)) == "expired"
    assert confirm_expiry(NOW) == NOW + timedelta(days=7)
    with pytest.raises(ValueError, match="expire"):
        make_token(k, "confirm", SID, None)


@pytest.mark.parametrize("purpose", ["unsubscribe", "preferences"])
def test_unsubscribe_and_preferences_tokens_never_expire(purpose):
    k = keys()
    token = token_for(purpose, k)
    assert base64.b32decode(token.upper())[3:7] == b"\0\0\0\0"
    assert verify_token(k, token, purpose, datetime(2105, 12, 31, tzinfo=UTC)) == SID
    with pytest.raises(ValueError, match="never expire"):
        make_token(k, purpose, SID, confirm_expiry(NOW))


def test_a_token_of_one_purpose_is_refused_for_another():
    k = keys()
    for made, asked in itertools.permutations(PURPOSES, 2):
        assert reason(k, token_for(made, k), asked) == "wrong-purpose", (made, asked)


def test_rotation_keeps_old_links_working_while_the_old_key_is_listed():
    old_token = token_for("unsubscribe", keys(OLD))
    assert verify_token(keys(NEW, OLD), old_token, "unsubscribe", NOW) == SID
    several = keys(NEW, f"some-other-old-secret-xyz-0123456789, {OLD} ,")
    assert verify_token(several, old_token, "unsubscribe", NOW) == SID
    assert reason(keys(NEW), old_token) == "unknown-key"
    # New tokens are signed with the current key, and the old key alone cannot read them.
    rotated = keys(NEW, OLD)
    fresh = token_for("unsubscribe", rotated)
    assert rotated.signing == NEW.encode()
    assert reason(keys(OLD), fresh) == "unknown-key"


def test_keys_sharing_a_key_id_are_both_tried():
    def colliding_secrets() -> tuple[str, str]:
        by_id: dict[bytes, str] = {}
        for n in itertools.count():
            secret = f"collision-search-secret-0123456789-{n}"
            key_id = hashlib.sha256(secret.encode()).digest()[:2]
            if key_id in by_id:
                return by_id[key_id], secret
            by_id[key_id] = secret
        raise AssertionError("itertools.count() never ends")

    first, second = colliding_secrets()
    token = token_for("preferences", keys(second))
    assert verify_token(keys(first, second), token, "preferences", NOW) == SID
    assert reason(keys(first), token, "preferences") == "bad-signature"


def test_the_environment_must_hold_a_real_secret():
    with pytest.raises(ConfigError, match="NEWSLETTER_SECRET is not set"):
        Keys.from_environ({})
    with pytest.raises(ConfigError, match="too short"):
        Keys.from_environ({"NEWSLETTER_SECRET": "hunter2"})
    with pytest.raises(ConfigError, match="NEWSLETTER_SECRET_PREVIOUS is too short"):
        Keys.from_environ({"NEWSLETTER_SECRET": NEW, "NEWSLETTER_SECRET_PREVIOUS": "abc"})
    development = Keys.development()
    assert development.is_development and not keys().is_development
    dev_secret = development.signing.decode()
    with pytest.raises(ConfigError, match="development key"):
        Keys.from_environ({"NEWSLETTER_SECRET": dev_secret})
    token = token_for("unsubscribe", development)
    assert verify_token(Keys.development(), token, "unsubscribe", NOW) == SID
    assert reason(keys(), token) == "unknown-key"


def test_a_secret_needs_32_bytes():
    """HMAC-SHA256 wants a 256-bit key; bytes are counted, not characters."""
    for short in ("x" * 31, "密" * 10):  # 31 and 30 bytes
        with pytest.raises(ConfigError, match="at least 32 random bytes"):
            Keys.from_environ({"NEWSLETTER_SECRET": short})
        with pytest.raises(ConfigError, match="NEWSLETTER_SECRET_PREVIOUS is too short"):
            Keys.from_environ({"NEWSLETTER_SECRET": NEW, "NEWSLETTER_SECRET_PREVIOUS": short})
    for enough in ("x" * 32, "密" * 11):
        assert not Keys.from_environ({"NEWSLETTER_SECRET": enough}).is_development


def test_no_secret_appears_in_an_error_or_a_repr():
    texts: list[str] = []
    k = keys(NEW, OLD)
    texts += [repr(k), str(k), repr(Keys.development())]
    token = token_for("confirm", k)
    for bad, purpose, now in [(token, "confirm", NOW + timedelta(days=8)),
                              (token, "unsubscribe", NOW), ("x" * 56, "confirm", NOW),
                              (token_for("confirm", keys("unlisted-secret-0000-0000-0000-0000")),
                               "confirm", NOW),
                              (token[:-2] + "aa", "confirm", NOW)]:
        with pytest.raises(TokenError) as caught:
            verify_token(k, bad, purpose, now)  # type: ignore[arg-type]
        texts += [str(caught.value), repr(caught.value)]
    for short in ("hunter2-hunter2", "hunter2"):
        with pytest.raises(ConfigError) as caught_config:
            Keys.from_environ({"NEWSLETTER_SECRET": short})
        texts.append(str(caught_config.value))
        assert short not in str(caught_config.value)
    for text in texts:
        for secret in (NEW, OLD, "unlisted-secret", Keys.development().signing.decode()):
            assert secret not in text
        assert token not in text  # a token is a credential too
    assert "Keys(environment, key ids: " in repr(k)
