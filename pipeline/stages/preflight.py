"""Pre-flight: every check a send makes, made before anything is published or sent.

``run`` publishes the issue and then sends it. A misconfiguration that only the send would
find (no ``NEWSLETTER_SECRET``, a malformed address, a relay that refuses the login) must
stop it *before* the archive holds an issue nobody received, so the checks live here, and
``send``, ``run`` and the test copies of ``send --to`` / ``preview --to`` all go through
:func:`pipeline.wiring.open_delivery`, which runs :func:`check_issue`, opens the transport and
hands it to :func:`check_delivery`; what that returns (the transport already probed, the
messages, the rate) is what the send then uses. Decide, then act. This module never builds
an adapter: each check asks the :class:`~pipeline.transport.Transport` interface.

In order, cheapest first, so the first problem named is the one to fix first:

1. the week: one that has not ended is refused unless ``--allow-partial-week`` (its
   reviews are still coming; sent now, the ledger would keep the rest from every reader),
   one that has not started says so;
2. the gates: blocking proof problems, approval (:func:`pipeline.stages.send.check_gates`),
   and each part weighed as this send carries it (:func:`check_sizes`);
3. the transport's own settings: a real transport needs ``NEWSLETTER_SECRET``, a password
   when ``[smtp] username`` is set, and an https ``[site] app_url`` (RFC 8058: mailbox
   providers ignore a one-click unsubscribe URL that is not https);
4. the message headers: ``From``, ``Reply-To``, ``unsubscribe_mailto``, ``app_url``;
5. the transport itself (:meth:`~pipeline.transport.Transport.probe`): SMTP connects,
   secures and logs in once; SES answers ``GetAccount`` (the account can send, the
   credentials are good); the outbox's folder takes a file.

Test copies skip 1 and 2 (the editor proofs a week before it ends, an unapproved issue
too) but not 3–5: a test copy shows what readers will get, through the same transport.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

import pendulum

from pipeline.config import Settings
from pipeline.core.email.message import Messages
from pipeline.core.email.render import Budget
from pipeline.errors import (
    BlockedError,
    ConfigError,
    NewsletterError,
    StoppedError,
    TransportError,
    UsageError,
)
from pipeline.model import Week
from pipeline.resource import Resource
from pipeline.stages.built import BuiltIssue
from pipeline.stages.send import check_gates
from pipeline.transport import Transport
from pipeline.week import parse_week
from subscribers.tokens import Keys

_log = logging.getLogger("newsletter.preflight")


@dataclass
class Delivery(Resource):
    """What a send uses, every part of it checked: close it when the send is done."""

    keys: Keys
    #: True when links are signed with the public development key (outbox only).
    development: bool
    transport: Transport
    messages: Messages
    #: Messages per second for the whole list (None: unlimited).
    rate: float | None

    def close(self) -> None:
        self.transport.close()


#: What a week's later reviews would miss, by what is done with it too early.
_TOO_EARLY = {
    "send": "sent now, its later reviews would reach nobody",
    "publish": "published now, its archive page and feed entry would lack its later reviews",
}


def check_week(week: Week, at: datetime, *, allow_partial_week: bool = False,
               doing: str = "send") -> None:
    """Refuse to send (or publish: ``doing``) a week that has not ended (exit 2): its issue
    would go out half-full, and for a send the ledger would then keep the rest from everyone
    who got it."""
    early = not_started(week, at)
    if early is not None:
        raise early
    if at < week.end and not allow_partial_week:
        raise UsageError(f"week {week.id} has not ended (it ends {_local(week.end, week.tz)}); "
                         f"{_TOO_EARLY[doing]}: wait, or pass --allow-partial-week")


def not_started(week: Week, at: datetime) -> UsageError | None:
    """The error for a week that lies ahead (rather than "no reviews"), else None."""
    if at >= week.start:
        return None
    return UsageError(f"week {week.id} has not started (it begins "
                      f"{_local(week.start, week.tz)}); there is nothing in it yet")


def require_https(settings: Settings) -> None:
    """RFC 8058's one-click unsubscribe must be an https URL; mailbox providers ignore an
    http one and the list then looks like it offers no easy way out."""
    url = settings.site.app_url
    if urlsplit(url.strip()).scheme.lower() != "https":
        raise ConfigError(f"the {settings.delivery.transport} transport needs an https URL "
                          f"(RFC 8058 one-click unsubscribe), got {url!r}",
                          key="[site] app_url")


def check_issue(settings: Settings, built: BuiltIssue, *, at: datetime,
                test_copies: bool = False, allow_missing_translations: bool = False,
                allow_partial_week: bool = False) -> None:
    """Checks 1 and 2, the week and the gates (test copies skip both)."""
    if test_copies:
        return
    check_week(parse_week(built.id, settings.issue.timezone), at,
               allow_partial_week=allow_partial_week)
    check_gates(built, settings, allow_missing_translations=allow_missing_translations)
    check_sizes(settings, built)


def check_sizes(settings: Settings, built: BuiltIssue) -> None:
    """Each part, weighed as this send will carry it, within the budget (exit 3 otherwise).

    The build fits every layout to ``[issue] size_budget_kb`` in the transfer encodings
    ``[delivery] eight_bit`` allowed then; issue.json does not say which. Sent with 8bit
    turned off since (a relay or SES that refused it), the same parts go as quoted-printable
    or base64, up to a third heavier, and a week the build filled to the brim would be
    clipped by Gmail in every inbox. Weighed again here, with the setting of this send, such
    an issue is refused with the fix, before anything is published or sent."""
    budget = Budget.configured(settings.issue, settings.delivery)
    for key in built.keys:
        for name, body, html in ((f"email-{key}.html", built.html(key), True),
                                 (f"email-{key}.txt", built.text(key), False)):
            weighs = budget.weigh(body, html=html)
            if weighs > budget.bytes:
                raise BlockedError(
                    f"{name} weighs {weighs / 1000:.1f} KB as this send would carry it "
                    f"([delivery] eight_bit = {str(budget.eight_bit).lower()}), over the "
                    f"{budget.bytes / 1000:.0f} KB budget it was built to: build the issue "
                    "again with this setting, proof and approve it, then send")


def check_delivery(settings: Settings, built: BuiltIssue, keys: Keys, development: bool,
                   transport: Transport) -> Delivery:
    """Checks 3 (the https link; the transport checked its own settings when it was made) to
    5 on a transport just opened; the first that fails raises, and closes the transport."""
    try:
        if transport.reaches_mailboxes:
            require_https(settings)
        messages = Messages(built, settings.site, settings.delivery, keys)
        rate = send_rate(settings, probe(transport))
    except BaseException:
        transport.close()
        raise
    _log.debug("transport: %s opened%s; rate %s", transport.describe(),
               " and probed" if transport.reaches_mailboxes else "",
               f"{rate:g}/s" if rate else "unlimited")
    return Delivery(keys, development, transport, messages, rate)


def send_rate(settings: Settings, transports_own: float | None) -> float | None:
    """``[delivery] max_rate`` when set, else the transport's own limit (what its probe
    said; SES: the account's MaxSendRate), else unlimited."""
    if settings.delivery.max_rate > 0:
        return settings.delivery.max_rate
    return transports_own


def probe(transport: Transport) -> float | None:
    """Ask the transport whether it will take mail at all, before the first message; its
    own rate limit, if it knows one.

    SMTP: connect, STARTTLS, login, QUIT. SES: ``GetAccount``. The outbox: its folder takes
    a file. A refusal that running again will not cure is exit 2 (a configuration error);
    one that may pass (the relay is down, the account paused, the disk full) is exit 4, and
    nothing has been published or sent.
    """
    try:
        return transport.probe()
    except NewsletterError as exc:
        raise _before_start(exc) from exc


def _before_start(exc: NewsletterError) -> NewsletterError:
    """A transport error met before anything went out, as the command line reports it."""
    if exc.exit_code == 2 or not isinstance(exc, TransportError):
        return exc
    return StoppedError(f"{exc}; nothing was published or sent: run the same command again "
                        "once the transport takes mail")


def _local(when: datetime, tz: str) -> str:
    return pendulum.instance(when).in_timezone(tz).format("ddd D MMM YYYY HH:mm") + f" {tz}"
