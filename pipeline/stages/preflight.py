"""Pre-flight: every check a send makes, made before anything is published or sent.

``run`` publishes the issue and then sends it. A misconfiguration that only the send would
find (no ``NEWSLETTER_SECRET``, a malformed address, a relay that refuses the login) must
stop it *before* the archive holds an issue nobody received, so the checks live here, and
``send``, ``run`` and the test copies of ``send --to`` / ``preview --to`` all go through
:func:`open_delivery`; what it returns (the transport already probed, the messages, the
rate) is what the send then uses. Decide, then act.

In order, cheapest first, so the first problem named is the one to fix first:

1. the week: one that has not ended is refused unless ``--allow-partial-week`` (its
   reviews are still coming; sent now, the ledger would keep the rest from every reader),
   one that has not started says so;
2. the gates: blocking proof problems, approval (:func:`pipeline.stages.send.check_gates`);
3. the transport's own settings: a real transport needs ``NEWSLETTER_SECRET``, a password
   when ``[smtp] username`` is set, and an https ``[site] app_url`` (RFC 8058: mailbox
   providers ignore a one-click unsubscribe URL that is not https);
4. the message headers: ``From``, ``Reply-To``, ``unsubscribe_mailto``, ``app_url``;
5. the transport itself: SMTP connects, secures and logs in once; SES answers
   ``GetAccount`` (the account can send, the credentials are good).

Test copies skip 1 and 2 (the editor proofs a week before it ends, an unapproved issue
too) but not 3–5: a test copy shows what readers will get, through the same transport.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pipeline.config import Settings
from pipeline.core.message import Messages
from pipeline.errors import ConfigError, NewsletterError, StoppedError, TransportError, UsageError
from pipeline.model import Week
from pipeline.stages.built import BuiltIssue
from pipeline.transport import Transport
from pipeline.week import parse_week
from pipeline.wiring import open_transport, send_rate, signing_keys
from subscribers.tokens import Keys

if TYPE_CHECKING:
    from mypy_boto3_sesv2 import SESV2Client

#: Transports whose mail reaches real mailboxes (the outbox writes files).
REAL_TRANSPORTS = frozenset({"smtp", "ses"})

_log = logging.getLogger("newsletter.preflight")


@dataclass
class Delivery:
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


def check_week(week: Week, at: datetime, *, allow_partial_week: bool = False) -> None:
    """Refuse to send a week that has not ended (exit 2): its issue would go out half-full
    and the ledger would then keep the rest from everyone who got it."""
    early = not_started(week, at)
    if early is not None:
        raise early
    if at < week.end and not allow_partial_week:
        raise UsageError(f"week {week.id} has not ended (it ends {_local(week.end, week.tz)}); "
                         "sent now, its later reviews would reach nobody: wait, or pass "
                         "--allow-partial-week")


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


def open_delivery(settings: Settings, environ: Mapping[str, str], built: BuiltIssue, *,
                  at: datetime, test_copies: bool = False,
                  allow_missing_translations: bool = False,
                  allow_partial_week: bool = False) -> Delivery:
    """Every check of a send, in the module's order; the first that fails raises (the
    transport, if opened, is closed again)."""
    from pipeline.stages.send import check_gates

    if not test_copies:
        check_week(parse_week(built.id, settings.issue.timezone), at,
                   allow_partial_week=allow_partial_week)
        check_gates(built, settings, allow_missing_translations=allow_missing_translations)
    keys, development = signing_keys(settings, environ)
    transport = open_transport(settings, environ, built.folder)
    try:
        if transport.name in REAL_TRANSPORTS:
            require_https(settings)
        messages = Messages(built, settings, keys)
        probe(transport)
        rate = send_rate(settings, transport)
    except BaseException:
        transport.close()
        raise
    _log.debug("transport: %s opened%s; rate %s", _describe(settings, transport),
               " and probed" if transport.name in REAL_TRANSPORTS else "",
               f"{rate:g}/s" if rate else "unlimited")
    return Delivery(keys, development, transport, messages, rate)


def _describe(settings: Settings, transport: Transport) -> str:
    """Which transport, and where to (never a login or a password)."""
    if transport.name == "smtp":
        smtp = settings.smtp
        return f"smtp {smtp.host}:{smtp.port}" + (" with STARTTLS" if smtp.starttls else "")
    if transport.name == "ses":
        named = settings.ses.configuration_set
        return "ses" + (f" (configuration set {named})" if named else "")
    return f"{transport.name} {getattr(transport, 'folder', '')}".rstrip()


def probe(transport: Transport) -> None:
    """Ask the transport whether it will take mail at all, before the first message.

    SMTP: connect, STARTTLS, login, QUIT. SES: ``GetAccount``. A refusal that running again
    will not cure is exit 2 (a configuration error); one that may pass (the relay is down,
    the account paused) is exit 4, and nothing has been published or sent.
    """
    if transport.name == "smtp":
        from pipeline.transport.smtp import SmtpTransport

        if isinstance(transport, SmtpTransport):
            try:
                transport.verify()
            except NewsletterError as exc:
                raise _before_start(exc) from exc
    elif transport.name == "ses":
        from pipeline.transport.ses import SesTransport

        if isinstance(transport, SesTransport):
            _probe_ses(transport.client)


def _before_start(exc: NewsletterError) -> NewsletterError:
    """A transport error met before anything went out, as the command line reports it."""
    if exc.exit_code == 2 or not isinstance(exc, TransportError):
        return exc
    return StoppedError(f"{exc}; nothing was published or sent: run the same command again "
                        "once the transport takes mail")


#: GetAccount answers that mean the credentials themselves are wrong.
_BAD_CREDENTIALS = frozenset({"UnrecognizedClientException", "InvalidClientTokenId",
                              "InvalidSignatureException", "SignatureDoesNotMatch",
                              "IncompleteSignature", "ExpiredTokenException"})


def _probe_ses(client: SESV2Client) -> None:
    """``GetAccount``: good credentials, SES reachable, sending enabled. A policy that
    allows sending but not ``GetAccount`` (AccessDenied), or an endpoint without it, says
    nothing either way: the send goes on and finds out with its first message."""
    from botocore.exceptions import BotoCoreError, ClientError

    from pipeline.aws import access_problem

    try:
        account = client.get_account()
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in _BAD_CREDENTIALS:
            raise ConfigError(f"ses: the AWS credentials are refused ({code})") from exc
        return
    except BotoCoreError as exc:
        problem = access_problem(exc, "SES")
        if problem is None:
            return
        if problem.startswith("no usable"):
            raise ConfigError(f"ses: {problem}") from exc
        raise StoppedError(f"ses: {problem}; nothing was published or sent: run the same "
                           "command again") from exc
    if account.get("SendingEnabled") is False:
        raise StoppedError("ses: sending is paused for this account (GetAccount: "
                           "SendingEnabled false); nothing was published or sent")


def _local(when: datetime, tz: str) -> str:
    import pendulum

    return pendulum.instance(when).in_timezone(tz).format("ddd D MMM YYYY HH:mm") + f" {tz}"
