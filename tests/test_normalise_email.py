"""``normalise_email``'s shortcut (a plain address at a domain already accepted) gives exactly
what email-validator gives, or refuses exactly what it refuses, with the same reason."""

from __future__ import annotations

import random

import pytest
from email_validator import EmailNotValidError, validate_email

from subscribers.errors import InvalidAddress
from subscribers.model import normalise_email

DOMAINS = ["example.org", "EXAMPLE.ORG", "Example.Com", "mail.example.co.uk", "a.b",
           "xn--bcher-kva.example", "XN--BCHER-KVA.example", "example.org.", ".example.org",
           "ex..ample.org", "-x.example.org", "x-.example.org", "localhost", "a@b.example",
           "example.test", "invalid", "example.local", "123.456", "1.2.3.4", "example.123",
           "x" * 63 + ".org", "x" * 64 + ".org", ".".join(["y" * 60] * 4) + ".org",
           "例子.中国", "bücher.example", "exa_mple.org", "example.onion", "ex ample.org",
           "sub.example.org", "EXAMPLE.org"]
LOCALS = ["reader", "Li.Wei", "a", "first.last+tag", "x!#$%&'*+-/=?^_`{|}~y", "POSTMASTER",
          "Info", "abuse", "usenet", "ftp", ".start", "end.", "dou..ble", '"quoted"',
          '"with space"', "用户", "Ünï", "e\u0301", "tab\there", "semi;colon", "(comment)",
          "a" * 64, "a" * 65, "a" * 200, "", "with@at", "<angle>", "back\\slash"]


def reference(text: str) -> str:
    stripped = text.strip()
    try:
        return validate_email(stripped, check_deliverability=False).normalized
    except EmailNotValidError as exc:
        return f"invalid: {exc}"


def ours(text: str) -> str:
    try:
        return normalise_email(text)
    except InvalidAddress as exc:
        return f"invalid: {exc.reason}"


@pytest.fixture(autouse=True)
def warm_domains():
    """Every domain seen once first, so the shortcut is taken wherever it can be."""
    for domain in DOMAINS:
        ours(f"warm@{domain}")


def test_every_pair_of_a_tricky_local_part_and_domain_matches_email_validator():
    for local in LOCALS:
        for domain in DOMAINS:
            address = f"{local}@{domain}"
            assert ours(address) == reference(address), address


def test_random_addresses_match_email_validator():
    pick = random.Random(17)
    alphabet = "aZ09.-_+!#'@\"() ü用\u0301"
    for _ in range(3000):
        local = "".join(pick.choice(alphabet) for _ in range(pick.randint(0, 12)))
        domain = pick.choice(DOMAINS) if pick.random() < 0.7 else "".join(
            pick.choice("abcXYZ09.-ü") for _ in range(pick.randint(1, 14)))
        address = f"{local}@{domain}"
        assert ours(address) == reference(address), address


def test_length_limits_are_kept_on_the_shortcut():
    domain = "example.org"
    longest = "a" * (254 - len(domain) - 1)
    assert ours(f"{longest}@{domain}") == f"{longest}@{domain}"
    assert ours(f"{longest}b@{domain}") == reference(f"{longest}b@{domain}")
    assert ours(f"{longest}b@{domain}").startswith("invalid: The email address is too long")


def test_blank_is_refused_as_before():
    with pytest.raises(InvalidAddress, match="empty"):
        normalise_email("   ")
