"""The reference: ``pipeline/core/email/message.py`` as it was before issue 17, kept verbatim but
for 8bit parts (issue 26, ``[delivery] eight_bit``): such a body is folded once with each
placeholder counted at the reserved length of a link, then filled (``_eight_bit_part``).

Each recipient's parts are filled in and encoded whole (``mime.encode_body``). Today's
:class:`pipeline.core.email.message.Messages` encodes each part once and splices the links in; the
tests (``test_message_splice.py``) and ``bench/bench_send.py`` hold it to these bytes.

Messages: a rendered layout + one recipient's links → the bytes a transport sends.

Each layout is rendered once, at build time. Per recipient only three things change: the
``To`` header, the signed unsubscribe and preferences links, and the ``Message-ID``. So the
headers that are the same for everyone are folded once per layout with the stdlib's SMTP
policy (display names, line folding, and refusal of CR/LF in any value; the subject is
encoded by ``mime.encode_subject``, every encoded word ≤ 75 characters), and each recipient's
message is those bytes plus its own headers and two parts with the links filled in: several
times faster than building an ``EmailMessage`` each time (``make bench``), with the same
result on the wire.

Each part goes out in whichever of quoted-printable and base64 is smaller for that layout
(``mime.choose_encoding``, decided once per layout on the part with links of the reserved
length), so what the size budget weighed is what is sent, and an ``.eml`` in the outbox stays
readable where quoted-printable wins.

Personal links are filled only into the template's own slots. ``render`` never lets text
from outside print a placeholder; should a built issue still hold one outside a slot (an
issue built before that rule), :class:`Messages` refuses the whole issue (``BlockedError``)
rather than hand a recipient's signed link to whoever wrote it.

Headers every message carries: ``From`` with display name, ``Reply-To`` when configured,
``To``, ``Subject``, ``Date``, ``Message-ID`` (SES replaces the last two; the id SES returns
is what the ledger records), ``List-Id``, ``List-Unsubscribe`` (the https one-click URL, plus
a ``mailto:`` carrying the token when inbound mail is configured) and
``List-Unsubscribe-Post: List-Unsubscribe=One-Click`` (RFC 8058), and the RFC 2369 headers
``List-Archive`` (the archive), ``List-Help`` and ``List-Subscribe`` (the subscribe page)
and ``List-Post: NO`` (nobody posts to this list).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from email import policy
from email.headerregistry import Address
from email.utils import format_datetime, getaddresses
from urllib.parse import quote

from pipeline.config import Settings
from pipeline.core.email.addresses import to_header
from pipeline.core.email.eightbit import eight_bit_body
from pipeline.core.email.mime import (
    EIGHT_BIT,
    QUOTED_PRINTABLE,
    choose_encoding,
    encode_body,
    encode_subject,
)
from pipeline.core.email.render import (
    LINK_RESERVE,
    PREFERENCES_PLACEHOLDER,
    UNSUBSCRIBE_PLACEHOLDER,
    stray_placeholders,
    with_reserved_links,
)
from pipeline.core.issue.built_issue import BuiltIssue
from pipeline.errors import BlockedError, ConfigError
from pipeline.model import LAYOUTS, Outgoing
from subscribers.tokens import Keys, make_token, tagged_address

_POLICY = policy.SMTP.clone(max_line_length=78)
_LIST_LABEL = "vllm-pr-weekly"


@dataclass(frozen=True)
class Links:
    """One recipient's personal links."""

    unsubscribe: str
    preferences: str
    #: ``mailto:`` form of the unsubscribe link, when inbound mail is configured.
    unsubscribe_mailto: str | None = None


def parse_address(value: str, key: str) -> Address:
    """``Name <user@domain>`` → an Address; anything else is a configuration error."""
    pairs = getaddresses([value])
    if len(pairs) != 1 or "@" not in pairs[0][1] or any(c in value for c in "\r\n"):
        raise ConfigError(f"expected one address such as 'Name <user@example.org>', "
                          f"got {value!r}", key=key)
    name, addr = pairs[0]
    user, domain = addr.rsplit("@", 1)
    return Address(display_name=name, username=user, domain=domain)


class Messages:
    """Builds every recipient's message for one built issue."""

    def __init__(self, built: BuiltIssue, settings: Settings, keys: Keys) -> None:
        self.built = built
        self.keys = keys
        self.app_url = settings.site.app_url.rstrip("/")
        if not self.app_url:
            raise ConfigError("needed for every message's unsubscribe and preferences links",
                              key="[site] app_url")
        self.sender = parse_address(settings.delivery.from_, "[delivery] from")
        self.reply_to = (parse_address(settings.delivery.reply_to, "[delivery] reply_to")
                         if settings.delivery.reply_to else None)
        self.mailto = settings.delivery.unsubscribe_mailto.strip()
        if self.mailto and ("@" not in self.mailto or any(c in self.mailto for c in "\r\n<>")):
            raise ConfigError("expected an address such as unsubscribe@example.org",
                              key="[delivery] unsubscribe_mailto")
        if self.mailto:  # the token must fit the address's local part: fail now, not per message
            self.links("0" * 24)
        domain = self.sender.domain
        self.list_id = f"vLLM PR Weekly <{_LIST_LABEL}.{domain}>"
        self.archive_url = settings.site.base_url.rstrip("/") + "/"
        self.subscribe_url = f"{self.app_url}/subscribe"
        refuse_stray_placeholders(built)
        self._encoding = {
            (key, kind): choose_encoding(with_reserved_links(body),
                                         eight_bit=settings.delivery.eight_bit,
                                         html=kind == "text/html")
            for key in built.keys
            for kind, body in (("text/plain", built.text(key)),
                               ("text/html", built.html(key)))
        }
        self.boundary = f"=_vpw_{hashlib.sha256(built.content_hash.encode()).hexdigest()[:24]}"
        self._static = {layout: self._static_headers(layout, test=False) for layout in LAYOUTS}
        # A test copy's subject names what it is: the layout, or the variant's key.
        self._static_test = {key: self._static_headers(key.split(".")[0], test=True,
                                                       label=key)
                             for key in built.keys}

    @property
    def envelope_sender(self) -> str:
        return self.sender.addr_spec

    def links(self, subscriber_id: str) -> Links:
        """Signed links that never expire: old mail keeps working."""
        unsubscribe = make_token(self.keys, "unsubscribe", subscriber_id, None)
        preferences = make_token(self.keys, "preferences", subscriber_id, None)
        mailto = None
        if self.mailto:
            mailto = f"mailto:{tagged_address(self.mailto, unsubscribe)}?subject=unsubscribe"
        return Links(
            unsubscribe=f"{self.app_url}/unsubscribe?token={quote(unsubscribe)}",
            preferences=f"{self.app_url}/preferences?token={quote(preferences)}",
            unsubscribe_mailto=mailto,
        )

    def _static_headers(self, layout: str, *, test: bool, label: str = "") -> bytes:
        subject = self.built.issue.subject[layout]
        if test:
            subject = f"[TEST {label or layout}] {subject}"
        headers: list[tuple[str, object]] = [("From", self.sender)]
        if self.reply_to:
            headers.append(("Reply-To", self.reply_to))
        headers += [
            ("Subject", subject),
            ("List-Id", self.list_id),
            ("List-Archive", f"<{self.archive_url}>"),
            ("List-Help", f"<{self.subscribe_url}>"),
            ("List-Subscribe", f"<{self.subscribe_url}>"),
            ("List-Post", "NO"),
            ("MIME-Version", "1.0"),
            ("Content-Language", "zh-CN, en" if "-" in layout
             else ("zh-CN" if layout == "zh" else "en")),
        ]
        return b"".join(_fold(name, value) for name, value in headers)

    def build(self, recipient: str, subscriber_id: str, layout: str, now: datetime,
              *, variant: str | None = None, test: bool = False,
              tags: Mapping[str, str] | None = None) -> Outgoing:
        """One recipient's message, in the layout they chose; ``variant`` names one of the
        built issue's interest variants of that layout (:meth:`BuiltIssue.choose`), whose
        parts then replace the layout's (the headers are the layout's)."""
        if layout not in LAYOUTS:
            raise ConfigError(f"unknown layout {layout!r}; one of {', '.join(LAYOUTS)}")
        key = variant or layout
        if key != layout and not any(v.key == key and v.variant.layout == layout
                                     for v in self.built.variants):
            raise ConfigError(f"{self.built.id} has no variant {key!r} of layout {layout}")
        links = self.links(subscriber_id)
        html, text = self.built.html(key), self.built.text(key)
        if self._encoding[key, "text/html"] != EIGHT_BIT:
            html = _fill(html, links)
        if self._encoding[key, "text/plain"] != EIGHT_BIT:
            text = _fill(text, links)
        list_unsubscribe = f"<{links.unsubscribe}>"
        if links.unsubscribe_mailto:
            list_unsubscribe += f", <{links.unsubscribe_mailto}>"
        idempotency = f"{self.built.id}/test-{key}-{recipient}" if test else \
            f"{self.built.id}/{subscriber_id}"
        message_id = f"<{self.built.id}.{secrets.token_hex(8)}@{self.sender.domain}>"
        personal = b"".join([
            to_header(recipient),  # never an encoded word inside the address
            _fold("Date", format_datetime(now)),
            _fold("Message-ID", message_id),
            _fold("List-Unsubscribe", list_unsubscribe),
            _fold("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
        ])
        static = self._static_test[key] if test else self._static[layout]
        raw = b"".join([
            static, personal,
            f'Content-Type: multipart/alternative; boundary="{self.boundary}"\r\n\r\n'.encode(),
            _part(self.boundary, "text/plain", text, self._encoding[key, "text/plain"], links),
            _part(self.boundary, "text/html", html, self._encoding[key, "text/html"], links),
            f"--{self.boundary}--\r\n".encode(),
        ])
        return Outgoing(recipient=recipient, sender=self.envelope_sender, raw=raw,
                        key=idempotency,
                        tags=dict(tags or {"issue": self.built.id}),
                        eight_bit=EIGHT_BIT in (self._encoding[key, "text/html"],
                                                self._encoding[key, "text/plain"]))


def refuse_stray_placeholders(built: BuiltIssue) -> None:
    """Refuse an issue whose parts (any layout's, any variant's) hold a personal-link
    placeholder outside a slot."""
    for key in built.keys:
        for kind, body in (("html", built.html(key)), ("txt", built.text(key))):
            if stray_placeholders(body, kind):
                raise BlockedError(
                    f"email-{key}.{kind} holds a personal-link placeholder outside the "
                    f"template's slots (text from the feed or the editor's file?); it would "
                    f"hand each recipient's signed link to whoever wrote it. Rebuild the "
                    f"issue (newsletter build --force) and proof it again")


def _fold(name: str, value: object) -> bytes:
    """One header, folded and encoded by the stdlib; CR or LF in a value raises ValueError.

    Unstructured non-ASCII text (the subject) is encoded as a whole by
    :func:`mime.encode_subject`: the policy's folder drops the space between an ASCII word and
    the encoded word after it ("MoRI-IO 连接器" arrives as "MoRI-IO连接器"), and the stdlib's
    ``Header`` writes 76-character encoded words where RFC 2047 allows 75.
    """
    text = value if isinstance(value, str) else str(value)
    if "\r" in text or "\n" in text:
        raise ValueError(f"header {name} may not contain a line break")
    if name == "Subject" and not text.isascii():
        return f"{name}: {encode_subject(text, name)}\r\n".encode("ascii")
    if name in _VERBATIM and text.isascii():
        # URLs and ids go out as written: the policy would RFC 2047-encode a URL longer than
        # a line, and mailbox providers read List-Unsubscribe raw. Fold only between entries.
        line = f"{name}: " + text.replace(">, <", ">,\r\n <")
        if any(len(part) > 998 for part in line.split("\r\n")):
            raise ValueError(f"header {name} is longer than a mail line may be")
        return (line + "\r\n").encode("ascii")
    return _POLICY.fold_binary(name, _POLICY.header_factory(name, text))


#: Headers whose ASCII values are written verbatim (never encoded, never broken inside a URL).
_VERBATIM = frozenset({"List-Unsubscribe", "List-Unsubscribe-Post", "List-Id", "Message-ID",
                       "Date", "To", "MIME-Version", "Content-Language", "List-Archive",
                       "List-Help", "List-Subscribe", "List-Post"})


def _fill(body: str, links: Links) -> str:
    return (body.replace(UNSUBSCRIBE_PLACEHOLDER, links.unsubscribe)
            .replace(PREFERENCES_PLACEHOLDER, links.preferences))


def _part(boundary: str, content_type: str, body: str, encoding: str, links: Links
          ) -> bytes:
    head = (f"--{boundary}\r\nContent-Type: {content_type}; charset=\"utf-8\"\r\n"
            f"Content-Transfer-Encoding: {encoding}\r\n\r\n").encode()
    if encoding == EIGHT_BIT:
        return head + _eight_bit_part(body, content_type == "text/html", links)
    return head + encode_body(body, encoding)


def _eight_bit_part(body: str, html: bool, links: Links) -> bytes:
    """``body`` (placeholders still in it) folded with each placeholder at the reserved
    length, then filled: its lines stay within 998 octets for any link up to that length."""
    if any(len(link.encode()) > LINK_RESERVE for link in (links.unsubscribe, links.preferences)):
        return encode_body(_fill(body, links), EIGHT_BIT, html=html)  # no room made: afresh
    grow = {p: LINK_RESERVE - len(p) for p in (UNSUBSCRIBE_PLACEHOLDER, PREFERENCES_PLACEHOLDER)}
    folded = eight_bit_body(body, html=html, grow=grow)
    assert folded is not None
    return (folded.replace(UNSUBSCRIBE_PLACEHOLDER.encode(), links.unsubscribe.encode())
            .replace(PREFERENCES_PLACEHOLDER.encode(), links.preferences.encode()))


def transfer_encoding(text: str, *, readable: bool = False) -> str:
    """The ``Content-Transfer-Encoding`` a mail body should use, by one rule for every mail
    this project writes: the smaller of quoted-printable and base64 for ``text``, or
    quoted-printable whatever its size when ``readable`` (a short transactional mail, such as
    the confirmation, whose one link a person may need to read from the ``.eml`` itself)."""
    return QUOTED_PRINTABLE if readable else choose_encoding(text)
