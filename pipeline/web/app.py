"""The subscription app: ``newsletter serve``, a small ASGI app at ``[site] app_url``.

    GET  /subscribe              the form          POST /subscribe          ask to join
    GET  /confirm?token=…        a Confirm button  POST /confirm?token=…    confirm
                                                   POST /confirm/resend     new link (expired)
    GET  /unsubscribe?token=…    one button        POST /unsubscribe?token= RFC 8058 one-click
    GET  /preferences?token=…    layout, areas,    POST /preferences?token= save
                                 leave
    POST /webhooks/ses           SES bounces and complaints through Amazon SNS
    GET  /healthz                for a load balancer

* **GET never changes anything**: mail scanners fetch every link, so each opens a page whose
  one button POSTs; only RFC 8058's one-click POST unsubscribes at once.
* **No per-visitor CSRF token**, as the form also lives on the static archive: another
  site's POST to /subscribe is refused by ``Origin``/``Referer``, a honeypot catches bots,
  and requests are rate-limited. Token-carrying POSTs need none of this.
* **No enumeration.** /subscribe answers alike for every state an address can be in; the
  store and the mail come after the answer (:class:`MailQueue`).
* **Nothing secret is logged** (tokens live in query strings: uvicorn's access log is off);
  no JavaScript, a strict Content-Security-Policy, ``no-referrer``, ``no-store``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from datetime import datetime
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute, Mount, Route

from pipeline.config import Settings
from pipeline.core.email.render import Footer
from pipeline.web.mail_queue import MailQueue
from pipeline.web.pages import Pages
from pipeline.web.routes import SNS_WINDOW, Routes
from pipeline.web.signups import SignupQueue
from pipeline.web.sns import CertificateSource, SnsVerifier
from pipeline.week import now as clock_now
from pipeline.wiring import open_signup_queue, open_subscriptions, signing_keys
from subscribers.subscriptions import Subscriptions

__all__ = ["SNS_WINDOW", "MailQueue", "create_app", "open_app"]

log = logging.getLogger("newsletter.app")


def open_app(settings: Settings, environ: Mapping[str, str], stack: ExitStack) -> Starlette:
    """The app wired from the settings, the same for every host; its store and transport close
    with ``stack``."""
    _, development = signing_keys(environ)
    subscriptions = stack.enter_context(open_subscriptions(settings, environ))
    verifier = None
    if settings.ses.sns_topic_arns:
        verifier = SnsVerifier(CertificateSource(), settings.ses.sns_topic_arns,
                               max_age=SNS_WINDOW)
    else:
        log.info("POST /webhooks/ses is off: no [ses] sns_topic_arns")
    if development:
        log.warning("links are signed with the public development key: fine for the "
                    "local outbox, never for real mail (set NEWSLETTER_SECRET)")
    signups = open_signup_queue(settings)
    if signups is not None:
        log.info("sign-ups go to the queue %s", settings.subscriptions.queue_url)
    return create_app(subscriptions, app_url=settings.site.app_url,
                      base_url=settings.site.base_url, verifier=verifier,
                      footer=Footer.configured(settings.delivery, settings.site), signups=signups)


def create_app(subscriptions: Subscriptions, *, app_url: str, base_url: str,
               verifier: SnsVerifier | None = None,
               clock: Callable[[], datetime] = clock_now,
               mail_queue: MailQueue | None = None, footer: Footer | None = None,
               signups: SignupQueue | None = None) -> Starlette:
    """The app over ready-made parts, which :func:`open_app` wires from the settings."""
    queue = mail_queue or MailQueue()
    handlers = Routes(subscriptions, Pages(app_url, base_url, footer), verifier=verifier,
                      clock=clock, queue=queue, signups=signups)
    routes: list[BaseRoute] = [
        Route("/subscribe", handlers.subscribe_page, methods=["GET"]),
        Route("/subscribe", handlers.subscribe, methods=["POST"]),
        Route("/confirm", handlers.confirm_page, methods=["GET"]),
        Route("/confirm", handlers.confirm, methods=["POST"]),
        Route("/confirm/resend", handlers.resend, methods=["POST"]),
        Route("/unsubscribe", handlers.unsubscribe_page, methods=["GET"]),
        Route("/unsubscribe", handlers.unsubscribe, methods=["POST"]),
        Route("/preferences", handlers.preferences_page, methods=["GET"]),
        Route("/preferences", handlers.preferences, methods=["POST"]),
        Route("/webhooks/ses", handlers.ses_webhook, methods=["POST"]),
        Route("/healthz", handlers.healthz, methods=["GET"]),
    ]
    errors = {404: handlers.not_found, 405: handlers.not_allowed,
              ClientDisconnect: handlers.client_gone}
    prefix = urlsplit(app_url).path.rstrip("/")
    if prefix:  # app_url = https://example.org/api: the routes live under /api
        routes = [Mount(prefix, app=Starlette(routes=routes, exception_handlers=errors))]
    app = Starlette(routes=routes, exception_handlers=errors)
    app.state.mail_queue = queue
    #: For a host that carries out queued sign-ups itself (the Lambda function).
    app.state.subscriptions = subscriptions
    return app
