"""Messages: a rendered layout + one recipient's links → the bytes a transport sends.

Per recipient only ``To``, the signed links and ``Message-ID`` change, so the common headers
are folded once per layout (the stdlib's SMTP policy refuses CR/LF in any value) and each
part's transfer encoding is chosen once, with links of the reserved length: what the size
budget weighed is what is sent. Links are filled only into the template's own slots; an
issue holding a placeholder anywhere else is refused whole (``BlockedError``). URL headers
are written verbatim, never broken inside a URL, and a header longer than a mail line (998
octets, RFC 5322) is a configuration error naming its setting.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email import policy
from email.headerregistry import Address
from email.utils import format_datetime, getaddresses
from typing import AnyStr
from urllib.parse import quote

from pipeline.config import DeliverySettings, SiteSettings
from pipeline.core.email.addresses import UnsendableAddress, to_header, wire_address
from pipeline.core.email.eightbit import eight_bit_body
from pipeline.core.email.mime import (
    EIGHT_BIT,
    choose_encoding,
    encode_body,
    encode_subject,
)
from pipeline.core.email.render import (
    LINK_RESERVE,
    PLACEHOLDERS,
    stray_placeholders,
    with_reserved_links,
)
from pipeline.core.issue.built_issue import BuiltIssue
from pipeline.errors import BlockedError, ConfigError
from pipeline.model import LANG_TAGS, LANGS, LAYOUTS, Outgoing, layout_langs
from subscribers.tokens import TOKEN_LENGTH, Keys, make_token, tagged_address

_POLICY = policy.SMTP.clone(max_line_length=78)
#: Octets a mail line may hold, CRLF aside (RFC 5322 section 2.1.1).
MAX_LINE = 998


@dataclass(frozen=True)
class Links:
    """One recipient's personal links."""

    unsubscribe: str
    preferences: str
    #: ``mailto:`` form of the unsubscribe link, when inbound mail is configured.
    unsubscribe_mailto: str | None = None


def parse_address(value: str, key: str) -> Address:
    """``Name <user@domain>`` → an Address with an IDNA domain; else a configuration error.

    The stdlib would write a Unicode domain as an RFC 2047 encoded word, which is no address."""
    pairs = getaddresses([value])
    if len(pairs) != 1 or "@" not in pairs[0][1] or any(c in value for c in "\r\n"):
        raise ConfigError(f"expected one address such as 'Name <user@example.org>', "
                          f"got {value!r}", key=key)
    name, addr = pairs[0]
    try:
        wire = wire_address(addr)
    except UnsendableAddress as exc:
        raise ConfigError(str(exc), key=key) from None
    if wire.needs_smtputf8:
        raise ConfigError(f"{addr}: the part before the @ must be ASCII (it would need "
                          "SMTPUTF8 on every message, which SES and many relays lack)", key=key)
    user, domain = wire.idna.rsplit("@", 1)
    return Address(display_name=name, username=user, domain=domain)


class Messages:
    """Builds every recipient's message for one built issue."""

    def __init__(self, built: BuiltIssue, site: SiteSettings, delivery: DeliverySettings,
                 keys: Keys) -> None:
        self.built = built
        self.keys = keys
        self.app_url = site.app_url.rstrip("/")
        if not self.app_url:
            raise ConfigError("needed for every message's unsubscribe and preferences links",
                              key="[site] app_url")
        self.sender = parse_address(delivery.from_, "[delivery] from")
        self.reply_to = (parse_address(delivery.reply_to, "[delivery] reply_to")
                         if delivery.reply_to else None)
        self.mailto = delivery.unsubscribe_mailto.strip()
        if self.mailto and ("@" not in self.mailto or any(c in self.mailto for c in "\r\n<>")):
            raise ConfigError("expected an address such as unsubscribe@example.org",
                              key="[delivery] unsubscribe_mailto")
        self.list_id = f"vLLM PR Weekly <vllm-pr-weekly.{self.sender.domain}>"
        self.archive_url = site.base_url.rstrip("/") + "/"
        self.subscribe_url = f"{self.app_url}/subscribe"
        try:  # List-Unsubscribe first: of the app URL's headers, it needs the most room
            # Any id: every token has one length (and must fit the mailto's local part).
            self._unsubscribe_header(self.links("0" * 24))
            self._static = {layout: self._static_headers(layout) for layout in LAYOUTS}
        except HeaderTooLong as exc:
            raise exc.config_error() or exc from None
        refuse_stray_placeholders(built)
        self.boundary = f"=_vpw_{hashlib.sha256(built.content_hash.encode()).hexdigest()[:24]}"
        self._parts = {
            key: tuple(_Part.of(self.boundary, kind, body, eight_bit=delivery.eight_bit)
                       for kind, body in (("text/plain", built.text(key)),
                                          ("text/html", built.html(key))))
            for key in built.keys
        }
        self._opening = (f'Content-Type: multipart/alternative; boundary="{self.boundary}"'
                         f"\r\n\r\n").encode()
        self._closing = f"--{self.boundary}--\r\n".encode()
        #: The layout of every rendering: each layout its own, each variant its layout's.
        self._layout_of = {**{layout: layout for layout in LAYOUTS},
                           **{v.key: v.variant.layout for v in built.variants}}

    @property
    def envelope_sender(self) -> str:
        return self.sender.addr_spec

    def links(self, subscriber_id: str) -> Links:
        """Signed links that never expire: old mail keeps working."""
        unsubscribe = make_token(self.keys, "unsubscribe", subscriber_id, None)
        preferences = make_token(self.keys, "preferences", subscriber_id, None)
        return Links(
            unsubscribe=f"{self.app_url}/unsubscribe?token={quote(unsubscribe)}",
            preferences=f"{self.app_url}/preferences?token={quote(preferences)}",
            unsubscribe_mailto=(f"mailto:{tagged_address(self.mailto, unsubscribe)}"
                                "?subject=unsubscribe" if self.mailto else None),
        )

    def _static_headers(self, layout: str, *, test: str = "") -> bytes:
        """The headers every copy of ``layout`` carries; ``test``: a test copy's label."""
        subject = self.built.issue.subject[layout]
        langs = layout_langs(layout)
        if test:
            subject = f"[TEST {test}] {subject}"
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
            ("Content-Language", ", ".join(LANG_TAGS[lang] for lang in LANGS if lang in langs)),
        ]
        return b"".join(_fold(name, value) for name, value in headers)

    def build(self, recipient: str, subscriber_id: str, layout: str, now: datetime,
              *, variant: str | None = None, test: bool = False,
              tags: Mapping[str, str] | None = None) -> Outgoing:
        """One recipient's message in their layout; ``variant`` (:meth:`BuiltIssue.choose`)
        swaps in that interest variant's parts."""
        if layout not in LAYOUTS:
            raise ConfigError(f"unknown layout {layout!r}; one of {', '.join(LAYOUTS)}")
        key = variant or layout
        if self._layout_of.get(key) != layout:
            raise ConfigError(f"{self.built.id} has no variant {key!r} of layout {layout}")
        links = self.links(subscriber_id)
        idempotency = (f"{self.built.id}/test-{key}-{recipient}" if test
                       else f"{self.built.id}/{subscriber_id}")
        message_id = f"<{self.built.id}.{secrets.token_hex(8)}@{self.sender.domain}>"
        personal = b"".join([
            to_header(recipient),  # never an encoded word inside the address
            _fold("Date", format_datetime(now)),
            _fold("Message-ID", message_id),
            self._unsubscribe_header(links),
            _ONE_CLICK,
        ])
        # A test copy's subject names what it is: the layout, or the variant's key.
        static = self._static_headers(layout, test=key) if test else self._static[layout]
        filled = (links.unsubscribe, links.preferences)  # in PLACEHOLDERS' order
        text, html = self._parts[key]
        raw = b"".join([static, personal, self._opening,
                        text.head, text.encode(filled),
                        html.head, html.encode(filled), self._closing])
        return Outgoing(recipient=recipient, sender=self.envelope_sender, raw=raw,
                        key=idempotency, tags=dict(tags or {"issue": self.built.id}))

    @staticmethod
    def _unsubscribe_header(links: Links) -> bytes:
        value = f"<{links.unsubscribe}>"
        if links.unsubscribe_mailto:
            value += f", <{links.unsubscribe_mailto}>"
        return _fold("List-Unsubscribe", value)


@dataclass(frozen=True)
class _Part:
    """One part of a layout: its headers, its body with the placeholders in, its encoding."""

    head: bytes
    body: str
    encoding: str
    html: bool
    #: An 8bit body folded once with room for links of the reserved length; else None.
    folded: bytes | None = None

    def encode(self, links: Sequence[str]) -> bytes:
        """The body as sent, ``links[i]`` in place of ``PLACEHOLDERS[i]``."""
        pairs = list(zip(PLACEHOLDERS, links, strict=True))
        if self.folded is not None and all(len(link.encode()) <= LINK_RESERVE
                                           for link in links):
            return _replaced(self.folded, [(p.encode(), link.encode()) for p, link in pairs])
        return encode_body(_replaced(self.body, pairs), self.encoding, html=self.html)

    @classmethod
    def of(cls, boundary: str, content_type: str, body: str, *, eight_bit: bool = False
           ) -> _Part:
        html = content_type == "text/html"
        encoding = choose_encoding(with_reserved_links(body), eight_bit=eight_bit, html=html)
        folded = None
        if encoding == EIGHT_BIT:
            # Folded with each placeholder padded to the reserved length (no fold point in
            # it), then the placeholders put back: any links up to that length fit.
            data = eight_bit_body(_replaced(body, _PADDING), html=html)
            if data is None:
                # It folds with the links in, not with room left for them (a line with no
                # fold point between two links): quoted-printable or base64 then.
                encoding = choose_encoding(with_reserved_links(body), html=html)
            else:
                folded = _replaced(data, [(pad.encode(), p.encode()) for p, pad in _PADDING])
        head = (f"--{boundary}\r\nContent-Type: {content_type}; charset=\"utf-8\"\r\n"
                f"Content-Transfer-Encoding: {encoding}\r\n\r\n").encode()
        return cls(head, body, encoding, html, folded)


#: Each placeholder and a stand-in as long as its link may be: no fold point in it, and in
#: no part otherwise (a placeholder stands only in a slot, at a quote or a line's end).
_PADDING = [(placeholder, placeholder.ljust(LINK_RESERVE, "%")) for placeholder in PLACEHOLDERS]


def _replaced(text: AnyStr, pairs: Iterable[tuple[AnyStr, AnyStr]]) -> AnyStr:
    """``text`` with each pair's first string replaced by its second, one pair after the other."""
    for old, new in pairs:
        text = text.replace(old, new)
    return text


class HeaderTooLong(ValueError):
    """A verbatim header whose line ``line`` (0: the first) is over :data:`MAX_LINE`."""

    def __init__(self, name: str, line: int, octets: int) -> None:
        super().__init__(f"header {name} is longer than a mail line may be")
        self.name, self.line, self.octets = name, line, octets

    def config_error(self) -> ConfigError | None:
        """The error naming the setting that made the line too long, if any (the mailto:
        is the second line of ``List-Unsubscribe``)."""
        key = ("[delivery] unsubscribe_mailto" if self.name == "List-Unsubscribe" and self.line
               else _CARRIED_BY.get(self.name))
        if key is None:
            return None
        token = (f", with its {TOKEN_LENGTH}-character token,"
                 if self.name == "List-Unsubscribe" else "")
        return ConfigError(f"too long for the {self.name} header that carries it{token} on "
                           f"one line: {self.octets} octets where a mail line holds "
                           f"{MAX_LINE} (RFC 5322); shorten it by {self.octets - MAX_LINE} "
                           "character(s) or more", key=key)


#: The setting each header carries, for :meth:`HeaderTooLong.config_error`.
_CARRIED_BY = {"List-Unsubscribe": "[site] app_url", "List-Help": "[site] app_url",
               "List-Subscribe": "[site] app_url", "List-Archive": "[site] base_url"}


def refuse_stray_placeholders(built: BuiltIssue) -> None:
    """Refuse an issue any of whose parts holds a personal-link placeholder outside a slot."""
    for key in built.keys:
        for kind, body in (("html", built.html(key)), ("txt", built.text(key))):
            if stray_placeholders(body, kind):
                raise BlockedError(
                    f"email-{key}.{kind} holds a personal-link placeholder outside the "
                    f"template's slots (text from the feed or the editor's file?); it would "
                    f"hand each recipient's signed link to whoever wrote it. Rebuild the "
                    f"issue (newsletter build --force) and proof it again")


def _fold(name: str, value: object) -> bytes:
    """One header, folded by the stdlib; CR or LF in a value raises ValueError.

    A non-ASCII subject goes through :func:`mime.encode_subject`: the policy's folder drops the
    space before an encoded word and writes words of 76 characters where RFC 2047 allows 75."""
    text = str(value)
    if "\r" in text or "\n" in text:
        raise ValueError(f"header {name} may not contain a line break")
    if name == "Subject" and not text.isascii():
        return f"{name}: {encode_subject(text, name)}\r\n".encode("ascii")
    if name in _VERBATIM and text.isascii():
        # URLs and ids go out as written: the policy would RFC 2047-encode a URL longer than
        # a line, and mailbox providers read List-Unsubscribe raw. Fold only between entries.
        line = f"{name}: " + text.replace(">, <", ">,\r\n <")
        for index, part in enumerate(line.split("\r\n")):
            if len(part) > MAX_LINE:
                raise HeaderTooLong(name, index, len(part))
        return (line + "\r\n").encode("ascii")
    return _POLICY.fold_binary(name, _POLICY.header_factory(name, text))


#: Headers whose ASCII values are written verbatim (never encoded, never broken inside a URL).
_VERBATIM = frozenset({"List-Unsubscribe", "List-Unsubscribe-Post", "List-Id", "Message-ID",
                       "Date", "To", "MIME-Version", "Content-Language", "List-Archive",
                       "List-Help", "List-Subscribe", "List-Post"})
_ONE_CLICK = b"List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n"
