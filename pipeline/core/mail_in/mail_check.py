"""Whether a delivered message is fit for one-click unsubscribe: ``newsletter check-mail``.

RFC 8058 asks for an https ``List-Unsubscribe``, ``List-Unsubscribe-Post`` and a DKIM signature
covering both, aligned with ``From`` for Gmail and Yahoo. The relay signs, so this reads a
message as it *arrived*; only the ``DKIM-Signature`` tags are read, nothing is verified. Nothing
printed names the recipient or carries their token.
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass
from email.message import Message
from email.utils import getaddresses

from pipeline.errors import UsageError

__all__ = ["REQUIRED", "Check", "MailCheck", "NotAMail", "check_mail"]

#: The checks that must hold for a message to be fit to send.
REQUIRED = ("list-unsubscribe-https", "list-unsubscribe-post", "dkim-signature",
            "dkim-aligned", "dkim-covers")
_COVERED = ("List-Unsubscribe", "List-Unsubscribe-Post")
_ONE_CLICK = "List-Unsubscribe=One-Click"


class NotAMail(UsageError):
    """The input is not a mail message (no header block with a ``From``): exit 2."""


@dataclass(frozen=True)
class Check:
    """One check: ``name`` (stable, for tests and scripts), whether it ``passed``, and
    ``detail``, the line a person reads."""

    name: str
    passed: bool
    detail: str

    @property
    def required(self) -> bool:
        return self.name in REQUIRED

    def line(self) -> str:
        """``ok    …`` / ``FAIL  …`` (a required check) / ``warn  …`` (advice)."""
        word = "ok" if self.passed else ("FAIL" if self.required else "warn")
        return f"{word:<5} {self.detail}"


@dataclass(frozen=True)
class MailCheck:
    """Every check made on one message, in the order they are shown."""

    checks: tuple[Check, ...]

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if check.required and not check.passed)

    @property
    def fit(self) -> bool:
        return not self.failed

    def lines(self) -> list[str]:
        """One line per check, then the verdict and what was not checked."""
        failed = len(self.failed)
        verdict = ("fit to send: every required check holds" if not failed else
                   f"not fit to send: {failed} required check{'s' if failed != 1 else ''} failed")
        return [*(check.line() for check in self.checks), verdict,
                "(DKIM tags read only: no DNS lookup, no signature verified, no public "
                "suffix list)"]


def check_mail(raw: bytes) -> MailCheck:
    """Check one raw message. :class:`NotAMail` for input that is not one."""
    message = _parse(raw)
    from_domain = _from_domain(message)
    checks = _list_unsubscribe(message)
    signatures = [_tags(value) for value in _every(message, "DKIM-Signature")]
    if not signatures:
        return MailCheck((*checks, Check(
            "dkim-signature", False, "no DKIM-Signature: the relay did not sign the message "
            "(RFC 8058 §4 wants List-Unsubscribe and List-Unsubscribe-Post signed)")))
    index, tags = _judged(signatures, from_domain)
    d, s = tags.get("d", "").lower(), tags.get("s", "")
    which = f"{index + 1} of {len(signatures)}" if len(signatures) > 1 else "the only one"
    signed = Check("dkim-signature", bool(d),
                   f"DKIM-Signature d={d or '?'} s={s or '?'} judged ({which})")
    return MailCheck((*checks, signed, _aligned(d, from_domain),
                      *_coverage(_names(tags.get("h", "")), message)))


def _parse(raw: bytes) -> Message:
    if not raw.strip():
        raise NotAMail("not a mail: the file is empty")
    try:
        message = email.message_from_bytes(raw, policy=email.policy.compat32)
    except Exception as exc:  # the parser can trip over hostile bytes
        raise NotAMail(f"not a mail: it cannot be parsed ({type(exc).__name__})") from exc
    if not message.keys():
        raise NotAMail("not a mail: it has no header fields")
    if not _every(message, "From"):
        raise NotAMail("not a mail: it has no From header")
    return message


def _every(message: Message, name: str) -> list[str]:
    """Every value of header ``name``, unfolded, as received."""
    return [re.sub(r"\r?\n[ \t]*", " ", str(value)) for key, value in message.items()
            if key.strip().lower() == name.lower()]


def _from_domain(message: Message) -> str:
    addresses = [addr for _, addr in getaddresses(_every(message, "From")) if "@" in addr]
    return _ascii_domain(addresses[0].rpartition("@")[2]) if addresses else ""


def _ascii_domain(domain: str) -> str:
    domain = domain.strip().rstrip(".").lower()
    try:
        return domain.encode("idna").decode("ascii")
    except UnicodeError:
        return domain


def _list_unsubscribe(message: Message) -> list[Check]:
    values = _every(message, "List-Unsubscribe")
    entries = [entry.strip() for value in values for entry in re.findall(r"<([^>]*)>", value)]
    https = [entry for entry in entries if entry.lower().startswith("https://")]
    mailto = [entry for entry in entries if entry.lower().startswith("mailto:")]
    if not values:
        url = False, "no List-Unsubscribe header"
    elif len(values) > 1:
        # Which one a provider uses, and which one DKIM signed (the last), is anyone's
        # guess: a header added on the way may point the one-click POST elsewhere.
        url = False, (f"List-Unsubscribe appears {len(values)} times (one is ours; another "
                      "was added on the way)")
    elif https:
        url = True, f"List-Unsubscribe has an https URL ({_shown_url(https[0])})"
    else:
        url = False, ("List-Unsubscribe has no https URL (mailbox providers use only https "
                      "for one-click)")
    domain = mailto[0].partition("?")[0].rpartition("@")[2] if mailto else ""
    mail = Check("list-unsubscribe-mailto", bool(mailto),
                 f"List-Unsubscribe has a mailto: address (…@{domain})" if mailto else
                 "List-Unsubscribe has no mailto: address (optional; written when "
                 "[delivery] unsubscribe_mailto is set)")
    posts = [" ".join(value.split()) for value in _every(message, "List-Unsubscribe-Post")]
    post = Check("list-unsubscribe-post", posts == [_ONE_CLICK],
                 f"List-Unsubscribe-Post: {_ONE_CLICK}" if posts == [_ONE_CLICK] else
                 "no List-Unsubscribe-Post header" if not posts else
                 f"List-Unsubscribe-Post is not exactly one '{_ONE_CLICK}'")
    return [Check("list-unsubscribe-https", *url), mail, post]


def _shown_url(url: str) -> str:
    """The URL without its query or fragment: the token stays out of the output."""
    return re.split(r"[?#]", url, maxsplit=1)[0]


# -- DKIM-Signature


def _tags(value: str) -> dict[str, str]:
    """``v=1; a=rsa-sha256; d=example.org; h=From:To; …`` → {"v": "1", …}, whitespace
    removed from each value (RFC 6376 allows folding anywhere in them)."""
    tags: dict[str, str] = {}
    for name, eq, text in (part.partition("=") for part in value.split(";")):
        if eq and name.strip():
            tags.setdefault(name.strip(), re.sub(r"\s+", "", text))
    return tags


def _names(h: str) -> list[str]:
    return [name.lower() for name in h.split(":") if name]


def _is_aligned(d: str, from_domain: str) -> bool:
    """``d=`` is the From domain or a parent of it; a public suffix such as ``co.uk`` is not
    told apart without the public suffix list, which this offline check does not carry."""
    d = _ascii_domain(d)
    return bool(d and from_domain) and (
        d == from_domain or ("." in d and from_domain.endswith("." + d)))


def _judged(signatures: list[dict[str, str]], from_domain: str) -> tuple[int, dict[str, str]]:
    """The signature to judge: the first aligned one that covers both headers, else the
    first aligned one, else the first."""
    aligned = [(n, tags) for n, tags in enumerate(signatures)
               if _is_aligned(tags.get("d", ""), from_domain)]
    covering = [(n, tags) for n, tags in aligned
                if all(header.lower() in _names(tags.get("h", "")) for header in _COVERED)]
    return (covering or aligned or [(0, signatures[0])])[0]


def _aligned(d: str, from_domain: str) -> Check:
    if not from_domain:
        return Check("dkim-aligned", False, "the From header has no address to align d= with")
    if not _is_aligned(d, from_domain):
        return Check("dkim-aligned", False, f"d={d or '?'} is not aligned with the From domain "
                     f"{from_domain} (neither the same domain nor a parent of it)")
    how = "the From domain" if _ascii_domain(d) == from_domain else \
        f"a parent of the From domain {from_domain}"
    return Check("dkim-aligned", True, f"d={d} is {how}")


def _coverage(names: list[str], message: Message) -> list[Check]:
    missing = [header for header in _COVERED if header.lower() not in names]
    loose = [header for header in _COVERED
             if names.count(header.lower()) <= len(_every(message, header))]
    return [
        Check("dkim-covers", not missing,
              "h= covers List-Unsubscribe and List-Unsubscribe-Post" if not missing else
              f"h= does not cover {' and '.join(missing)} (a relay could change them and the "
              "signature would still hold)"),
        Check("dkim-oversigned", not loose,
              "h= oversigns both (named once more than they occur): nobody can add another"
              if not loose else f"h= does not oversign {' and '.join(loose)} (anyone on the "
              "way could add another; OversignHeaders)"),
    ]
