"""An address's normal form: email-validator's, offline, with the reason when it is refused."""

from __future__ import annotations

import pytest
from email_validator import EmailNotValidError, validate_email

from subscribers.errors import InvalidAddress
from subscribers.model import email_key, normalise_email


@pytest.mark.parametrize(("given", "normal"), [
    ("Li.Wei@EXAMPLE.ORG", "Li.Wei@example.org"),  # the local part keeps its case
    ("  reader@example.org\n", "reader@example.org"),
    ("first.last+tag@Mail.Example.co.uk", "first.last+tag@mail.example.co.uk"),
    ("POSTMASTER@example.org", "postmaster@example.org"),  # RFC 2142: case-insensitive
    ("reader@XN--BCHER-KVA.example", "reader@bücher.example"),
    ("用户@例子.中国", "用户@例子.中国"),
    ("e\u0301@example.org", "\u00e9@example.org"),  # Unicode NFC
    ("a" * 64 + "@example.org", "a" * 64 + "@example.org"),
])
def test_the_normal_form(given, normal):
    assert normalise_email(given) == normal
    assert normalise_email(normal) == normal


@pytest.mark.parametrize(("given", "reason"), [
    ("dou..ble@example.org", "period"),
    (".start@example.org", "period"),
    ("reader@localhost", "period"),
    ('"with space"@example.org', "Quoting"),
    ("reader@example.org.", "period"),
    ("reader@ex ample.org", "invalid characters"),
    ("a" * 60 + "@" + ".".join(["y" * 60] * 4) + ".org", "too long"),
    ("no-at-sign", "@"),
    ("with@at@example.org", "invalid characters"),
    ("   ", "empty"),
])
def test_a_refused_address_says_why(given, reason):
    with pytest.raises(InvalidAddress) as refused:
        normalise_email(given)
    assert reason in refused.value.reason


def test_two_spellings_of_one_mailbox_share_a_key():
    assert email_key(normalise_email("Reader@EXAMPLE.org")) == \
        email_key(normalise_email("reader@example.ORG"))


_LOCAL_PARTS = ["reader", "Li.Wei", "POSTMASTER", "e\u0301", "用户", "a" * 64, "a" * 65, "dou..ble",
                "end.", "with space", '"quoted"', "a+b", "x@y", "", "Name <a", "a\u200b"]
_DOMAINS = ["example.org", "EXAMPLE.ORG", "XN--BCHER-KVA.example", "例子.中国", "localhost",
            "example.org.", "ex ample.org", "[127.0.0.1]", "", "a-.example", "xn--zz.example",
            "b>", ".".join(["y" * 60] * 4) + ".org", ".".join(["y" * 61] * 4) + ".o"]


@pytest.mark.parametrize("domain", _DOMAINS)
def test_each_address_is_judged_as_email_validator_judges_it_whole(domain):
    # The domain is checked apart from the local part (once per domain): every pairing must
    # still come out as validating the whole address would, accepted or refused.
    for local in _LOCAL_PARTS:
        address = f"{local}@{domain}"
        try:
            expected = validate_email(address, check_deliverability=False).normalized
        except EmailNotValidError:
            expected = None
        try:
            got = normalise_email(address)
        except InvalidAddress:
            got = None
        assert got == expected, address
