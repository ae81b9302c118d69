"""Pre-flight: every check a send makes, made before anything is published or sent.

``run`` publishes, then sends: a misconfiguration only the send would find must stop it
before the archive holds an issue nobody received. Checks run cheapest first, the
transport's own probe last; test copies skip the week and gate checks (the editor proofs
early).
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
from pipeline.errors import BlockedError, ConfigError, StoppedError, TransportError, UsageError
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
    """What a send uses, every part checked; close it when the send is done."""

    #: Links signed with the public development key (outbox only).
    development: bool
    transport: Transport
    messages: Messages
    #: Messages per second for the whole list (None: unlimited).
    rate: float | None

    def close(self) -> None:
        self.transport.close()


_TOO_EARLY = {
    "send": "sent now, its later reviews would reach nobody",
    "publish": "published now, its archive page and feed entry would lack its later reviews",
}


def check_week(week: Week, at: datetime, *, allow_partial_week: bool = False,
               doing: str = "send") -> None:
    """Refuse (exit 2) to send or publish a week that has not ended: it would go out half-full."""
    if (early := not_started(week, at)) is not None:
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


def check_issue(settings: Settings, built: BuiltIssue, *, at: datetime,
                test_copies: bool = False, allow_missing_translations: bool = False,
                allow_partial_week: bool = False) -> None:
    """The week, the gates and the sizes (test copies skip them)."""
    if test_copies:
        return
    check_week(parse_week(built.id, settings.issue.timezone), at,
               allow_partial_week=allow_partial_week)
    check_gates(built, settings, allow_missing_translations=allow_missing_translations)
    check_sizes(settings, built)


def check_sizes(settings: Settings, built: BuiltIssue) -> None:
    """Each part, weighed as this send carries it, within the budget (exit 3 otherwise): with
    ``[delivery] eight_bit`` turned off since the build, an issue grows by up to a third."""
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
    """The transport's checks on one just opened; the first that fails closes it and raises."""
    url = settings.site.app_url
    try:
        # RFC 8058: mailbox providers ignore a one-click unsubscribe URL that is not https.
        if transport.reaches_mailboxes and urlsplit(url.strip()).scheme.lower() != "https":
            raise ConfigError(f"the {settings.delivery.transport} transport needs an https "
                              f"URL (RFC 8058 one-click unsubscribe), got {url!r}",
                              key="[site] app_url")
        messages = Messages(built, settings.site, settings.delivery, keys)
        rate = send_rate(settings, probe(transport))
    except BaseException:
        transport.close()
        raise
    _log.debug("transport: %s opened%s; rate %s", transport.describe(),
               " and probed" if transport.reaches_mailboxes else "",
               f"{rate:g}/s" if rate else "unlimited")
    return Delivery(development, transport, messages, rate)


def send_rate(settings: Settings, transports_own: float | None) -> float | None:
    """``[delivery] max_rate``, else the transport's own limit, else unlimited (None)."""
    return settings.delivery.max_rate or transports_own


def probe(transport: Transport) -> float | None:
    """Whether the transport takes mail at all, before the first message; its own rate
    limit, if it knows one. A refusal a rerun may cure is exit 4, with nothing sent."""
    try:
        return transport.probe()
    except TransportError as exc:
        if exc.exit_code == 2:
            raise
        raise StoppedError(f"{exc}; nothing was published or sent: run the same command "
                           "again once the transport takes mail") from exc


def _local(when: datetime, tz: str) -> str:
    return pendulum.instance(when).in_timezone(tz).format("ddd D MMM YYYY HH:mm") + f" {tz}"
