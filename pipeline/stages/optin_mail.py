"""The mails a sign-up request causes: "confirm your subscription", "you are already
subscribed" and, for an address that unsubscribed, "subscribe again from your preferences".

Bilingual, the layout's language first: the owner of an address someone typed must be able
to read "ignore this mail". Transactional, so built with the stdlib's ``EmailMessage`` and
no ``List-Unsubscribe``; quoted-printable, so an outbox ``.eml`` stays readable.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from typing import Any

import jinja2

from pipeline.config import Settings
from pipeline.core.email.addresses import wire_address
from pipeline.core.email.message import parse_address
from pipeline.core.email.mime import QUOTED_PRINTABLE
from pipeline.core.email.render import environment
from pipeline.model import LANG_TAGS, reading_order
from pipeline.transport import Outgoing, Transport
from subscribers.model import Subscriber

_POLICY = policy.SMTP.clone(max_line_length=78)

_log = logging.getLogger("newsletter.app")

SUBJECTS = {
    "confirm": {"zh": "请确认订阅 vLLM PR 周报",
                "en": "Confirm your subscription to vLLM PR Weekly"},
    "reminder": {"zh": "你已订阅 vLLM PR 周报", "en": "You are subscribed to vLLM PR Weekly"},
    "rejoin": {"zh": "重新订阅 vLLM PR 周报", "en": "Subscribe again to vLLM PR Weekly"},
}


class OptInMailer:
    """:class:`subscribers.subscriptions.Mailer` over a transport."""

    def __init__(self, settings: Settings, transport: Transport,
                 env: jinja2.Environment | None = None) -> None:
        self.transport = transport
        self.sender = parse_address(settings.delivery.from_, "[delivery] from")
        self.reply_to = (parse_address(settings.delivery.reply_to, "[delivery] reply_to")
                         if settings.delivery.reply_to else None)
        self.base_url = settings.site.base_url.rstrip("/")
        self.env = env or environment()

    def confirmation(self, subscriber: Subscriber, confirm_url: str,
                     expires_at: datetime) -> None:
        self._send("confirm", subscriber, {"url": confirm_url, "expires": expires_at})

    def reminder(self, subscriber: Subscriber, preferences_url: str) -> None:
        kind = "rejoin" if subscriber.status == "unsubscribed" else "reminder"
        self._send(kind, subscriber, {"url": preferences_url, "expires": None})

    def _send(self, kind: str, subscriber: Subscriber, context: dict[str, Any]) -> None:
        langs = reading_order(subscriber.layout)
        context = {**context, "kind": kind, "email": subscriber.email, "langs": langs,
                   "lang_tag": LANG_TAGS, "base_url": self.base_url,
                   "expires_text": _expires_text(context["expires"])}
        message = EmailMessage(policy=_POLICY)
        message["From"] = self.sender
        # An IDNA domain; a non-ASCII local part as UTF-8, never an encoded word.
        to = wire_address(subscriber.email)
        message["To"] = to.idna
        if self.reply_to is not None:
            message["Reply-To"] = self.reply_to
        message["Subject"] = " · ".join(SUBJECTS[kind][lang] for lang in langs)
        message["Date"] = format_datetime(datetime.now(UTC))
        message["Message-ID"] = make_msgid(domain=self.sender.domain)
        # Not a bulk mail, but an automatic one: vacation responders should stay quiet.
        message["Auto-Submitted"] = "auto-generated"
        text = self.env.get_template("mail/optin.txt.j2").render(context)
        html = self.env.get_template("mail/optin.html.j2").render(context)
        message.set_content(text, subtype="plain", charset="utf-8", cte=QUOTED_PRINTABLE)
        message.add_alternative(html, subtype="html", charset="utf-8", cte=QUOTED_PRINTABLE)
        sent = self.transport.send(Outgoing(
            recipient=subscriber.email,
            sender=self.sender.addr_spec,
            raw=message.as_bytes(policy=_POLICY.clone(utf8=to.needs_smtputf8)),
            key=f"{kind}/{subscriber.id}-{datetime.now(UTC):%Y%m%dT%H%M%S%f}",
            tags={"kind": kind},
        ))
        # Never the address, nor the link: its token is a credential.
        _log.info("%s mail: %s", kind, self.transport.location(sent))


def _expires_text(expires: datetime | None) -> dict[str, str] | None:
    if expires is None:
        return None
    when = expires.astimezone(UTC)
    return {"zh": when.strftime("%Y年%m月%d日 %H:%M UTC").replace("年0", "年").replace("月0", "月"),
            "en": when.strftime("%d %B %Y, %H:%M UTC").lstrip("0")}
