"""The subscription app: ``newsletter serve``, a small ASGI app at ``[site] app_url``.

    GET  /subscribe              the form          POST /subscribe          ask to join
    GET  /confirm?token=…        a Confirm button  POST /confirm?token=…    confirm
                                                   POST /confirm/resend     new link (expired)
    GET  /unsubscribe?token=…    one button        POST /unsubscribe?token= RFC 8058 one-click
    GET  /preferences?token=…    layout, areas,    POST /preferences?token= save
                                 leave
    POST /webhooks/ses           SES bounces and complaints through Amazon SNS
    GET  /healthz                for a load balancer

Why it is shaped like this:

* **GET never changes anything.** Mail scanners and link previewers fetch every link in a
  message; confirming or unsubscribing on GET would let them do it for the reader. Each
  link opens a page with one button; the button POSTs. The one exception the other way is
  RFC 8058: a mail provider's one-click POST to the ``List-Unsubscribe`` URL unsubscribes at
  once and gets a 200, no further step.
* **No per-visitor CSRF token**, because the form also lives on the static archive. Instead:
  a POST to /subscribe whose ``Origin`` (or, without one, ``Referer``) is not the archive's or
  the app's own is refused, a hidden honeypot field catches form-filling bots, and requests
  are limited per client and per address (in the store, so several processes share them).
  Token-carrying POSTs need none of this: the token is the authority.
* **No enumeration.** /subscribe answers the same page, with the same status, for a new,
  pending, active, unsubscribed, bounced, complained or removed address, and gives it
  before it looks the address up: the answer waits only for the form check and the
  per-client limit, and the store and the mail are handled after it (:class:`MailQueue`),
  for every state alike. So neither the page, nor its timing, nor a mail transport that is
  down (the mail is tried again, then logged as not sent; the person asks again) tells
  anything. Only the
  mail the address itself receives differs. (On AWS Lambda the function returns only once
  that work is done, Mangum running it before it hands the answer back: nothing is lost,
  but there the time does include it.)
* **Nothing secret is logged.** Tokens are bearer credentials and live in query strings, so
  uvicorn's access log is off and our own log line names the path only.
* **Small pages, no JavaScript**, bilingual, with a strict Content-Security-Policy (the one
  inline stylesheet is allowed by its hash), ``Referrer-Policy: no-referrer`` (a token must
  not leak to the archive through a link), ``no-store`` and ``frame-ancestors 'none'``.

The work itself (store, tokens, mail) is in :mod:`subscribers.subscriptions`; the app only
speaks HTTP: the handlers are :mod:`pipeline.web.routes`, the pages
:mod:`pipeline.web.pages`, the work left for after the answer :mod:`pipeline.web.mail_queue`;
this module assembles them. Blocking calls run in Starlette's thread pool.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute, Mount, Route

from pipeline.core.email.render import Footer
from pipeline.web.mail_queue import MailQueue
from pipeline.web.pages import Pages
from pipeline.web.routes import SNS_WINDOW, Routes
from pipeline.web.signups import SignupQueue
from pipeline.web.sns import SnsVerifier
from pipeline.week import now as clock_now
from subscribers.subscriptions import Subscriptions

__all__ = ["SNS_WINDOW", "MailQueue", "create_app"]


def create_app(subscriptions: Subscriptions, *, app_url: str, base_url: str,
               verifier: SnsVerifier | None = None,
               clock: Callable[[], datetime] = clock_now,
               mail_queue: MailQueue | None = None, footer: Footer | None = None,
               signups: SignupQueue | None = None) -> Starlette:
    """The app over ready-made parts; :func:`pipeline.web.wired.open_app` wires them from the
    settings, tests pass their own (a verifier that trusts a loopback certificate host, a
    fixed clock, a queue they can wait on). The queue is also ``app.state.mail_queue``."""
    queue = mail_queue or MailQueue()
    handlers = Routes(subscriptions, Pages(app_url, base_url, footer), app_url=app_url,
                      base_url=base_url, verifier=verifier, clock=clock, queue=queue,
                      signups=signups)
    routes: list[BaseRoute] = [
        Route("/subscribe", handlers.subscribe_page, methods=["GET"]),
        Route("/subscribe", handlers.subscribe, methods=["POST"]),
        Route("/confirm", handlers.confirm_page, methods=["GET"]),
        Route("/confirm", handlers.confirm, methods=["POST"]),
        Route("/confirm/resend", handlers.resend, methods=["POST"]),
        Route("/unsubscribe", handlers.unsubscribe_page, methods=["GET"]),
        Route("/unsubscribe", handlers.unsubscribe, methods=["POST"]),
        Route("/preferences", handlers.preferences, methods=["GET", "POST"]),
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
