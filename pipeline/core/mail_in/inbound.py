"""What an inbound mail asks for: unsubscribe (a token address), subscribe (a command), a
bounce (a DSN about one of our messages), or nothing. Pure; ``inbox process`` acts on it.

**Trust.** SES prepends its verdict headers and a sender can write look-alikes below, so
only the topmost of each is read. A subscribe is ignored when SES calls the mail spam or a
virus, DMARC failed, or SPF and DKIM both failed (a forwarded mail breaks SPF but keeps DKIM).
An unsubscribe or a DSN is honoured whatever those headers say: it acts only through a signed
token, and a spam filter's mistake must not keep anyone on the list.
"""

from __future__ import annotations

import contextlib
import email
import email.policy
import email.utils
import html
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, get_args

from pipeline.core.mail_in.dsn import is_report, read_report

if TYPE_CHECKING:
    from email.message import EmailMessage, MIMEPart

__all__ = ["ACTIONS", "LAYOUT_WORDS", "Action", "Verdict", "classify", "mask_address"]

Action = Literal["unsubscribe", "subscribe", "bounce", "ignored", "unrecognised"]

ACTIONS: tuple[Action, ...] = get_args(Action)

#: The words that may follow ``subscribe`` / ``订阅``, and the layout each asks for.
LAYOUT_WORDS: Mapping[str, str] = {
    "zh-en": "zh-en", "en-zh": "en-zh", "zh": "zh", "en": "en",
    "中文": "zh", "english": "en", "英文": "en", "双语": "zh-en", "bilingual": "zh-en",
}


@dataclass(frozen=True)
class Verdict:
    """What :func:`classify` made of one mail, and why (``reason``). A bounce's ``token`` is
    still to be verified."""

    action: Action
    reason: str
    token: str | None = field(default=None, repr=False)
    sender: str | None = None
    layout: str | None = None
    reference: str | None = field(default=None, repr=False)
    #: For ``bounce``: the mailboxes that refused (``Final-Recipient``), to compare with the
    #: token's subscriber, never to find one.
    refused: tuple[str, ...] = field(default=(), repr=False)


def classify(raw: bytes) -> Verdict:
    """Decide what one raw inbound mail asks for; never raises (broken mail is
    ``unrecognised``).

    A DSN is decided first, then the trust checks, then the command: a token address among the
    recipients is an ``unsubscribe``; a subject or first body line that is only ``subscribe``
    (or ``订阅``), maybe with a layout word, subscribes ``From``, unless the mail is
    ``Auto-Submitted`` (an auto-responder must not sign anybody up).
    """
    if not raw.strip():
        return Verdict("unrecognised", "empty")
    try:
        return _classify(raw)
    except Exception:  # the email package can trip over hostile input: never a crash
        return Verdict("unrecognised", "unparseable")


def _classify(raw: bytes) -> Verdict:
    message = email.message_from_bytes(raw, policy=email.policy.default)
    headers = _raw_headers(message)
    sender = _sender(message, headers)
    if is_report(message):  # a DSN: before the checks, as its token proves itself
        return _bounce(message, sender)
    if token := _token(headers):  # signed: it proves itself, whatever SES made of the mail
        return Verdict("unsubscribe", "token", token=token, sender=sender)
    if failed := _failed_check(headers):
        return Verdict("ignored", failed, sender=sender)
    where, layout = "subject", _subscribe_command(_subject(message, headers))
    if layout is None:
        where, layout = "first-line", _subscribe_command(_first_line(message))
    if layout is None:
        return Verdict("unrecognised", "no-command", sender=sender)
    if sender is None:
        return Verdict("ignored", "no-sender")
    auto = (_top(headers, "auto-submitted") or "no").split(";")[0].strip().lower()
    if auto != "no":
        return Verdict("ignored", "auto-submitted", sender=sender)
    return Verdict("subscribe", where, sender=sender, layout=layout or None)


_Headers = dict[str, list[str]]


def _raw_headers(message: EmailMessage) -> _Headers:
    """The headers as received, unparsed (parsing a hostile header can fail), by lower-case
    name, in order."""
    headers: _Headers = {}
    for name, value in message.raw_items():
        headers.setdefault(str(name).strip().lower(), []).append(re.sub(r"\r?\n", "", str(value)))
    return headers


def _top(headers: _Headers, name: str) -> str | None:
    """The topmost ``name``: SES prepends its own, a look-alike sits below."""
    return next(iter(headers.get(name, ())), None)


# -- checks

_SPF_FAILED = frozenset({"fail", "softfail", "permerror"})
_COMMENT = re.compile(r"\([^()]*\)")
_RESULT = re.compile(r"^\s*(spf|dkim|dmarc)\s*=\s*([a-z]+)", re.I)


def _failed_check(headers: _Headers) -> str | None:
    """The reason to ignore the mail, per :func:`classify`'s rule, or None."""
    if _first_word(_top(headers, "x-ses-virus-verdict")) == "fail":
        return "virus"
    if _first_word(_top(headers, "x-ses-spam-verdict")) == "fail":
        return "spam"
    results = _authentication_results(_top(headers, "authentication-results"))
    if "fail" in results.get("dmarc", ()):
        return "dmarc-fail"
    # Received-SPF: ``pass (spfCheck: …) client-ip=…``
    spf = (results.get("spf") or [_first_word(_top(headers, "received-spf")).rstrip(";")])[0]
    dkim = results.get("dkim", [])
    if (spf in _SPF_FAILED or "fail" in dkim) and not (spf == "pass" or "pass" in dkim):
        return "spf-fail" if spf in _SPF_FAILED else "dkim-fail"
    return None


def _first_word(value: str | None) -> str:
    words = (value or "").split()
    return words[0].lower() if words else ""


def _authentication_results(value: str | None) -> dict[str, list[str]]:
    """``amazonses.com; spf=pass (…) client-ip=…; dkim=pass header.i=@…; dmarc=pass …``
    → {"spf": ["pass"], "dkim": ["pass"], "dmarc": ["pass"]} (comments dropped)."""
    text, found = value or "", 1
    while found:  # nested comments, innermost first
        text, found = _COMMENT.subn(" ", text)
    results: dict[str, list[str]] = {}
    for name, result in (match.groups() for match in map(_RESULT.match, text.split(";")) if match):
        results.setdefault(name.lower(), []).append(result.lower())
    return results


# -- unsubscribe

_TOKEN_ADDRESS = re.compile(r"[^\s<>\"'@,;:+()\[\]]+\+([a-z2-7]{56})@[a-z0-9.-]+", re.I)
_RECEIVED_FOR = re.compile(r"\bfor\s+<?([^\s<>;]+@[^\s<>;]+)>?", re.I)
_RECIPIENT_HEADERS = ("to", "cc", "delivered-to", "x-original-to")


def _token(headers: _Headers) -> str | None:
    """The token of the first tagged unsubscribe address among the recipients."""
    places = [value for name in _RECIPIENT_HEADERS for value in headers.get(name, ())]
    places += _RECEIVED_FOR.findall(_top(headers, "received") or "")
    found = (_TOKEN_ADDRESS.search(value) for value in places)
    return next((match.group(1).lower() for match in found if match), None)


def _bounce(message: EmailMessage, sender: str | None) -> Verdict:
    """The verdict on a delivery status notification (see :class:`Verdict`)."""
    report = read_report(message)
    if report is None or not report.recipients:
        return Verdict("unrecognised", "dsn-unreadable", sender=sender)
    if (kind := report.bounce) is None:
        return Verdict("ignored", "dsn-temporary" if report.failed else "dsn-not-failed",
                       sender=sender)
    if not report.tokens:
        return Verdict("ignored", "dsn-unknown-message", sender=sender)
    if len(report.tokens) > 1:  # our messages carry one token, in both forms
        return Verdict("ignored", "dsn-several-tokens", sender=sender)
    return Verdict("bounce", kind, token=report.tokens[0], sender=sender,
                   reference=report.message_id, refused=report.refused(kind))


# -- subscribe

_REPLY_PREFIX = re.compile(
    r"^\s*(?:(?:re|fwd?|aw|wg|sv|vs|antw|rv|tr|回复|回覆|答复|转发|轉寄|转寄)\s*"
    r"(?:\[\d+\]|\(\d+\))?\s*[:：]\s*)+", re.I)
_TRAILING_PUNCTUATION = re.compile(r"[\s.!。！]+$")


def _subscribe_command(text: str | None) -> str | None:
    """The layout asked for ("" for none) when ``text`` is a subscribe command, else None."""
    words = _TRAILING_PUNCTUATION.sub("", _REPLY_PREFIX.sub("", text or "")).split()
    if not words:
        return None
    head, rest = words[0].casefold(), words[1:]
    if head.startswith("订阅") and head != "订阅":  # 订阅英文
        head, rest = "订阅", [head[len("订阅"):], *rest]
    if head not in ("subscribe", "订阅"):
        return None
    if not rest:
        return ""
    return LAYOUT_WORDS.get(rest[0].casefold()) if len(rest) == 1 else None


def _subject(message: EmailMessage, headers: _Headers) -> str | None:
    try:
        subject = message.get("Subject")
        return None if subject is None else str(subject)
    except Exception:  # a header the parser cannot decode: read it as UTF-8, crudely
        raw = _top(headers, "subject")
        return None if raw is None else _undo_surrogates(raw)


def _first_line(message: EmailMessage) -> str | None:
    try:
        text = _body_text(message)
    except Exception:  # a broken MIME structure: no body to read a command from
        return None
    return next((line for line in text.splitlines() if line.strip()), None)


def _body_text(message: EmailMessage) -> str:
    """The text/plain body, else the text/html one made text; "" when there is none."""
    part = message.get_body(preferencelist=("plain",))
    if part is not None:
        return _part_text(part)
    part = message.get_body(preferencelist=("html",))
    return _html_text(_part_text(part)) if part is not None else ""


def _part_text(part: MIMEPart) -> str:
    # An unknown charset or a broken transfer encoding: fall back to the bytes as UTF-8.
    with contextlib.suppress(Exception):
        content = part.get_content()
        if isinstance(content, str):
            return content
    payload = part.get_payload(decode=True)
    return payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""


_INVISIBLE = re.compile(r"(?is)<(head|script|style|title)\b.*?</\1\s*>|<!--.*?-->")
_BREAK = re.compile(r"(?i)<br\b[^>]*>|</?(?:p|div|li|tr|h[1-6]|blockquote|pre|table|ul|ol)"
                    r"\b[^>]*>")
_TAG = re.compile(r"<[^>]*>")


def _html_text(markup: str) -> str:
    """HTML → text, crudely: what is not shown dropped, blocks on lines of their own."""
    text = _BREAK.sub("\n", _INVISIBLE.sub(" ", markup))
    return html.unescape(_TAG.sub("", text))


def _sender(message: EmailMessage, headers: _Headers) -> str | None:
    """The bare address of ``From`` (the first, if several), or None."""
    try:
        addresses = getattr(message.get("From"), "addresses", ())
        candidates: list[str] = [a.addr_spec for a in addresses if a.username and a.domain]
    except Exception:  # an unparseable From: try the simpler parser on the raw text
        raw = _top(headers, "from")
        candidates = [email.utils.parseaddr(_undo_surrogates(raw))[1]] if raw else []
    for address in map(str.strip, candidates):
        local, _, domain = address.rpartition("@")
        if local and domain:
            return address
    return None


def _undo_surrogates(text: str) -> str:
    """A raw header holding 8-bit bytes (as surrogate escapes) read as UTF-8."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def mask_address(address: str | None) -> str:
    """``alice@example.org`` → ``a***@example.org``: enough to tell mails apart in a log,
    not enough to name anyone."""
    if not address:
        return "-"
    local, _, domain = address.rpartition("@")
    return f"{local[0]}***@{domain}" if local else "***"
