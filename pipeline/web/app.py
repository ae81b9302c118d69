"""The subscription app: ``newsletter serve``, a small ASGI app at ``[site] app_url``.

    GET  /subscribe              the form          POST /subscribe          ask to join
    GET  /confirm?token=…        a Confirm button  POST /confirm?token=…    confirm
                                                   POST /confirm/resend     new link (expired)
    GET  /unsubscribe?token=…    one button        POST /unsubscribe?token= RFC 8058 one-click
    GET  /preferences?token=…    layout, leave     POST /preferences?token= save
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
  down (the mail is logged as not sent; the person asks again) tells anything. Only the
  mail the address itself receives differs. (On AWS Lambda the function returns only once
  that work is done, Mangum running it before it hands the answer back: nothing is lost,
  but there the time does include it.)
* **Nothing secret is logged.** Tokens are bearer credentials and live in query strings, so
  uvicorn's access log is off and our own log line names the path only.
* **Small pages, no JavaScript**, bilingual, with a strict Content-Security-Policy (the one
  inline stylesheet is allowed by its hash), ``Referrer-Policy: no-referrer`` (a token must
  not leak to the archive through a link), ``no-store`` and ``frame-ancestors 'none'``.

The work itself (store, tokens, mail) is in :mod:`subscribers.subscriptions`; this module
only speaks HTTP. Blocking calls run in Starlette's thread pool.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import logging
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from markupsafe import Markup
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from pipeline.core.render import environment, templates_dir
from pipeline.errors import TransportError, Unconfirmed
from pipeline.model import LAYOUTS
from pipeline.week import now as clock_now
from subscribers.errors import InvalidAddress, StoreError, TokenError, UnknownSubscriber
from subscribers.ses_events import events_from
from subscribers.sns import SnsError, SnsVerifier
from subscribers.subscriptions import Subscriptions

log = logging.getLogger("newsletter.app")

#: The layouts offered, as the archive's form names them.
LAYOUT_LABELS: tuple[tuple[str, str], ...] = (
    ("zh-en", "中文 + English"), ("en-zh", "English + 中文"), ("zh", "中文"), ("en", "English"),
)
#: Larger bodies are refused before they are read: a form is a few hundred bytes, an SNS
#: message at most 256 KB of payload plus its envelope.
MAX_FORM_BYTES = 8 * 1024
MAX_WEBHOOK_BYTES = 512 * 1024
#: How long an SNS message id is remembered (and so how old a message may be).
SNS_WINDOW = timedelta(days=7)
#: Ids older than the window are dropped every this many notifications (DynamoDB's TTL
#: drops them by itself too; there a purge is a scan, so not on every cold start).
PURGE_EVERY = 1000


class MailQueue:
    """Sign-up work carried out after the answer has gone: Starlette runs a response's
    background task once its last byte is sent (uvicorn), or before the function returns
    (Mangum, on Lambda), so nothing queued is lost with either host.

    What a job raises is logged here, never shown: the person was already told to check
    their inbox, and asking again is their remedy. :meth:`wait` lets a host (and the tests)
    wait until every queued job is done.
    """

    def __init__(self) -> None:
        self._pending = 0
        self._idle = threading.Condition()
        #: Jobs queued since start (for the tests: one per accepted request).
        self.queued = 0

    def put(self, job: Callable[[], object], what: str) -> BackgroundTask:
        """The background task that runs ``job`` in the thread pool; attach it to the
        response (``response.background``)."""
        with self._idle:
            self._pending += 1
            self.queued += 1
        return BackgroundTask(self._run, job, what)

    async def _run(self, job: Callable[[], object], what: str) -> None:
        try:
            log.info("%s: %s", what, await run_in_threadpool(job))
        except Unconfirmed:
            log.warning("%s: the mail may or may not have left", what)
        except (TransportError, StoreError) as exc:
            log.warning("%s: not done: %s", what, type(exc).__name__)
        finally:
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()

    def wait(self, timeout: float) -> bool:
        """Block until no job is queued or running; False if ``timeout`` seconds pass."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)


@dataclass(frozen=True)
class _Button:
    action: str
    zh: str
    en: str
    fields: dict[str, str]
    secondary: bool = False


@dataclass(frozen=True)
class _Link:
    url: str
    zh: str
    en: str


class _Pages:
    """Renders the bilingual pages and knows the headers every answer carries."""

    def __init__(self, app_url: str, base_url: str) -> None:
        self.env = environment()
        # Markup: the stylesheet is ours, and escaping its quotes would change the bytes
        # whose hash the policy allows (the browser would then drop every style).
        self.css = Markup(  # noqa: S704 - our own file, not input
            (templates_dir() / "app" / "app.css").read_text(encoding="utf-8"))
        self.text = tomllib.loads((templates_dir() / "app" / "pages.toml")
                                  .read_text(encoding="utf-8"))
        self.app_url = app_url.rstrip("/")
        self.base_url = base_url.rstrip("/")
        digest = base64.b64encode(hashlib.sha256(self.css.encode("utf-8")).digest()).decode()
        self.headers = {
            "Content-Security-Policy": (
                f"default-src 'none'; style-src 'sha256-{digest}'; img-src 'self' data:; "
                "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "X-Frame-Options": "DENY",
            "Cross-Origin-Opener-Policy": "same-origin",
            "Cross-Origin-Resource-Policy": "same-origin",
            "Permissions-Policy": "camera=(), microphone=(), geolocation=(), interest-cohort=()",
            "Cache-Control": "no-store",
        }
        if app_url.startswith("https://"):
            self.headers["Strict-Transport-Security"] = "max-age=31536000; includeSubDomains"

    def render(self, name: str, status_code: int = 200, *, template: str = "message",
               status: dict[str, str] | None = None, status_kind: str = "ok",
               referrer: str = "no-referrer", **context: Any) -> HTMLResponse:
        """A page. ``referrer``: pages whose address carries a token keep it to themselves
        (``no-referrer``); the form page says ``same-origin``, because under
        ``no-referrer`` browsers send ``Origin: null`` with its POST, which the origin
        check must refuse."""
        html = self.env.get_template(f"app/{template}.html.j2").render(
            page=self.text[name], css=self.css, app_url=self.app_url, base_url=self.base_url,
            status=status, status_kind=status_kind, layouts=LAYOUT_LABELS,
            button=context.pop("button", None), link=context.pop("link", None), **context)
        return HTMLResponse(html, status_code=status_code,
                            headers={**self.headers, "Referrer-Policy": referrer})

    def plain(self, text: str, status_code: int) -> Response:
        return PlainTextResponse(text, status_code=status_code, headers=self.headers)


def create_app(subscriptions: Subscriptions, *, app_url: str, base_url: str,
               verifier: SnsVerifier | None = None,
               clock: Callable[[], datetime] = clock_now,
               mail_queue: MailQueue | None = None) -> Starlette:
    """The app over ready-made parts; :func:`serve` wires them from the settings, tests
    pass their own (a verifier that trusts a loopback certificate host, a fixed clock, a
    queue they can wait on). The queue is also ``app.state.mail_queue``."""
    pages = _Pages(app_url, base_url)
    queue = mail_queue or MailQueue()
    notifications = itertools.count(1)
    allowed_origins = {_origin(app_url), _origin(base_url)}

    def client_of(request: Request) -> str | None:
        return request.client.host if request.client else None

    async def form_of(request: Request) -> dict[str, str] | None:
        """The urlencoded or multipart form (RFC 8058 allows both), or None when it is too
        large to be ours. The length is checked before a byte is read; an empty POST (a
        one-click client that sends no body) is an empty form."""
        length = request.headers.get("content-length", "0")
        if not length.isdigit() or int(length) > MAX_FORM_BYTES:
            return None
        if int(length) == 0:
            return {}
        await request.body()  # at most MAX_FORM_BYTES: the server stops at Content-Length
        form = await request.form(max_files=0, max_fields=20, max_part_size=MAX_FORM_BYTES)
        return {k: v for k, v in form.items() if isinstance(v, str)}

    def token_of(request: Request, form: dict[str, str] | None = None) -> str:
        return request.query_params.get("token") or (form or {}).get("token", "")

    def link_problem(exc: TokenError | UnknownSubscriber,
                     token: str | None = None) -> HTMLResponse:
        """The page for a link that cannot be acted on. An expired confirmation link
        (``token`` given) offers a new mail: its signature held, so it names whom to send
        it to. 410, not 404, for a subscriber gone since: the link was right (and behind
        CloudFront a 404 would be swapped for the archive's own 404 page)."""
        if isinstance(exc, TokenError) and exc.reason == "expired" and exc.subscriber_id \
                and token is not None:
            return pages.render("expired", 410, button=_Button(
                f"{pages.app_url}/confirm/resend", "发送新的确认邮件", "Send me a new link",
                {"token": token}))
        if isinstance(exc, UnknownSubscriber):
            return pages.render("gone", 410, link=_subscribe_link(pages))
        return pages.render("bad_link", 400, link=_subscribe_link(pages))

    async def mailing(action: Callable[[], object], what: str) -> HTMLResponse | None:
        """Run an action that sends a mail: None when the mail left (an *unconfirmed* send
        may have left, so it counts as sent for the page), else the "try again later"
        page. Nothing about the address is said either way."""
        try:
            await run_in_threadpool(action)
        except Unconfirmed:
            pass
        except TransportError as exc:
            log.warning("%s: mail not sent: %s", what, type(exc).__name__)
            return pages.render("unavailable", 503)
        return None

    # -- /subscribe ------------------------------------------------------------------------

    async def subscribe_page(request: Request) -> Response:
        layout = request.query_params.get("layout", "zh-en")
        return pages.render("subscribe", template="subscribe", email="",
                            layout=layout if layout in LAYOUTS else "zh-en",
                            referrer="same-origin")

    async def subscribe(request: Request) -> Response:
        if not _same_site(request, allowed_origins):
            return pages.render("forbidden", 403, link=_subscribe_link(pages))
        form = await form_of(request)
        if form is None:
            return pages.plain("Request too large", 413)
        email = form.get("email", "").strip()
        layout = form.get("layout", "zh-en")
        if layout not in LAYOUTS:
            layout = "zh-en"
        if form.get("website"):  # the honeypot: a person never sees the field
            log.info("subscribe: honeypot filled; nothing done")
            return pages.render("sent")
        now = clock()
        if not await run_in_threadpool(subscriptions.client_allowed, client_of(request), now):
            response = pages.render("too_many", 429)
            response.headers["Retry-After"] = "3600"
            return response
        try:
            subscriptions.check_request(email, layout)
        except InvalidAddress:
            return pages.render("invalid_email", 400, template="subscribe", email=email[:254],
                                layout=layout, referrer="same-origin")
        # The address's state is read only after the answer has gone (see the module's
        # docstring): the same page, status and work before it, whatever the address.
        response = pages.render("sent")
        response.background = queue.put(lambda: subscriptions.request(
            email, layout, source="web", now=now), "subscribe")
        return response

    # -- /confirm --------------------------------------------------------------------------

    async def confirm_page(request: Request) -> Response:
        token = token_of(request)
        try:
            subscriber = await run_in_threadpool(
                subscriptions.subscriber_for, token, "confirm", clock())
        except (TokenError, UnknownSubscriber) as exc:
            return link_problem(exc, token)
        if subscriber.status == "active":
            return pages.render("confirmed", link=_preferences_link(subscriptions, pages,
                                                                   subscriber.id, clock()))
        return pages.render("confirm", button=_Button(
            f"{pages.app_url}/confirm", "确认订阅", "Confirm subscription", {"token": token}))

    async def confirm(request: Request) -> Response:
        form = await form_of(request)
        if form is None:
            return pages.plain("Request too large", 413)
        token = token_of(request, form)
        now = clock()
        try:
            subscriber = await run_in_threadpool(lambda: subscriptions.confirm(
                token, source="web", client=client_of(request), now=now))
        except (TokenError, UnknownSubscriber) as exc:
            return link_problem(exc, token)
        log.info("confirm: subscriber confirmed")
        return pages.render("confirmed", link=_preferences_link(subscriptions, pages,
                                                               subscriber.id, now))

    async def resend(request: Request) -> Response:
        form = await form_of(request)
        if form is None:
            return pages.plain("Request too large", 413)
        token = token_of(request, form)
        now = clock()
        try:
            subscriber_id = subscriptions.expired_confirmation(token, now)
        except TokenError as exc:
            return link_problem(exc)
        if not await run_in_threadpool(subscriptions.client_allowed, client_of(request), now):
            return pages.render("too_many", 429)
        failed = await mailing(lambda: subscriptions.resend(subscriber_id, now=now), "resend")
        return failed or pages.render("resent")

    # -- /unsubscribe ----------------------------------------------------------------------

    async def unsubscribe_page(request: Request) -> Response:
        token = token_of(request)
        try:
            subscriber = await run_in_threadpool(
                subscriptions.subscriber_for, token, "unsubscribe", clock())
        except TokenError as exc:
            return link_problem(exc)
        except UnknownSubscriber:
            return pages.render("unsubscribed")  # removed: as unsubscribed as can be
        if subscriber.status not in ("pending", "active"):
            return pages.render("unsubscribed")
        return pages.render("unsubscribe", button=_Button(
            f"{pages.app_url}/unsubscribe?token={token}", "退订", "Unsubscribe",
            {"List-Unsubscribe": "One-Click"}))

    async def unsubscribe(request: Request) -> Response:
        """RFC 8058: the mail provider POSTs ``List-Unsubscribe=One-Click`` to the URL of
        the header; the page's button posts the same. Either way: done, 200, no next step.
        The token is in the URL, so a body that is too large or does not parse (a client's
        broken multipart) is no reason to keep anyone on the list."""
        try:
            form = await form_of(request)
        except (HTTPException, MultiPartException):  # a body that does not parse
            form = None
        token = token_of(request, form)
        now = clock()
        try:
            subscriber = await run_in_threadpool(lambda: subscriptions.unsubscribe(
                token, now=now))
        except TokenError as exc:
            return link_problem(exc)
        log.info("unsubscribe: done")
        link = (_preferences_link(subscriptions, pages, subscriber.id, now)
                if subscriber is not None else None)
        return pages.render("unsubscribed", link=link)

    # -- /preferences ----------------------------------------------------------------------

    async def preferences(request: Request) -> Response:
        form = None
        if request.method == "POST":
            form = await form_of(request)
            if form is None:
                return pages.plain("Request too large", 413)
        token = token_of(request, form)
        now = clock()
        status = None
        try:
            subscriber = await run_in_threadpool(
                subscriptions.subscriber_for, token, "preferences", now)
            if form is not None:
                action = form.get("action", "")
                if action == "layout" and form.get("layout") in LAYOUTS:
                    subscriber = await run_in_threadpool(lambda: subscriptions.set_layout(
                        token, form["layout"], now=now))
                    status = {"zh": "已保存", "en": "Saved"}
                elif action == "unsubscribe":
                    subscriber = await run_in_threadpool(
                        lambda: subscriptions.unsubscribe_by_preferences(token, now=now))
                    status = {"zh": "已退订", "en": "Unsubscribed"}
                elif action == "resubscribe":
                    subscriber = await run_in_threadpool(lambda: subscriptions.resubscribe(
                        token, client=client_of(request), now=now))
                    status = {"zh": "已重新订阅", "en": "Subscribed again"}
                else:
                    return pages.plain("Unknown action", 400)
        except (TokenError, UnknownSubscriber) as exc:
            return link_problem(exc)
        if status is None:
            status = _status_line(subscriber.status)
        return pages.render(
            "preferences", template="preferences", email=subscriber.email,
            layout=subscriber.layout, status=status,
            status_kind="ok" if subscriber.status == "active" else "warn",
            subscribed=subscriber.status in ("pending", "active"),
            can_resubscribe=subscriber.status == "unsubscribed",
            action=f"{pages.app_url}/preferences?token={token}")

    # -- /webhooks/ses ---------------------------------------------------------------------

    async def ses_webhook(request: Request) -> Response:
        if verifier is None:
            return pages.plain("Webhook not configured ([ses] sns_topic_arns)", 404)
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_WEBHOOK_BYTES):
            return pages.plain("Request too large", 413)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_WEBHOOK_BYTES:
                return pages.plain("Request too large", 413)
        now = clock()
        try:
            message = await run_in_threadpool(verifier.verify, body, now)
        except SnsError as exc:
            log.warning("webhook: refused: %s", exc.reason)
            code = {"malformed": 400, "cert-unavailable": 503}.get(exc.reason, 403)
            return pages.plain(f"Refused: {exc.reason}", code)
        if message.type == "SubscriptionConfirmation":
            try:
                await run_in_threadpool(verifier.confirm_subscription, message)
            except SnsError as exc:
                log.warning("webhook: subscription not confirmed: %s", exc.reason)
                return pages.plain("Could not confirm the subscription", 502)
            log.info("webhook: SNS subscription confirmed for %s", message.topic_arn)
            return pages.plain("Subscribed", 200)
        if message.type != "Notification":
            log.info("webhook: %s for %s", message.type, message.topic_arn)
            return pages.plain("OK", 200)
        store = subscriptions.store
        if (not getattr(store, "expires_by_itself", False)
                and next(notifications) % PURGE_EVERY == 0):  # keep the handled ids few
            await run_in_threadpool(store.purge_seen, now - SNS_WINDOW)
        return await run_in_threadpool(_apply_notification, subscriptions, pages, message, now)

    async def healthz(request: Request) -> Response:
        return pages.plain("ok", 200)

    async def not_found(request: Request, exc: Exception) -> Response:
        return pages.render("not_found", 404)

    async def not_allowed(request: Request, exc: Exception) -> Response:
        response = pages.plain("Method not allowed", 405)
        response.headers.update(getattr(exc, "headers", None) or {})  # Allow
        return response

    routes = [
        Route("/subscribe", subscribe_page, methods=["GET"]),
        Route("/subscribe", subscribe, methods=["POST"]),
        Route("/confirm", confirm_page, methods=["GET"]),
        Route("/confirm", confirm, methods=["POST"]),
        Route("/confirm/resend", resend, methods=["POST"]),
        Route("/unsubscribe", unsubscribe_page, methods=["GET"]),
        Route("/unsubscribe", unsubscribe, methods=["POST"]),
        Route("/preferences", preferences, methods=["GET", "POST"]),
        Route("/webhooks/ses", ses_webhook, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
    prefix = urlsplit(app_url).path.rstrip("/")
    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
    if prefix:  # app_url = https://example.org/api: the routes live under /api
        from starlette.routing import Mount

        app = Starlette(routes=[Mount(prefix, app=app)],
                        exception_handlers={404: not_found, 405: not_allowed})
    app.state.mail_queue = queue
    return app


def _apply_notification(subscriptions: Subscriptions, pages: _Pages, message: Any,
                        now: datetime) -> Response:
    """One verified SNS notification's SES events, applied so that SNS's redeliveries
    (it delivers at least once, and again after a 5xx) change nothing twice.

    Bounces, complaints and deliveries set a state: applying one again is harmless, so
    they are simply applied (a crash half-way loses nothing: SNS retries). A transient
    bounce is *counted*, so each one (message id + its place in the message) is claimed
    once before it is counted, and given back if counting fails. SNS keeps no order, so
    each event carries the time SES says it happened (else the notification's): an old
    delivery arriving after newer transient bounces does not reset their count.
    """
    try:
        events = events_from(message.message)
    except ValueError as exc:
        log.warning("webhook: not an SES event: %s", exc)
        return pages.plain("Ignored: not an SES event", 200)
    store = subscriptions.store
    applied = 0
    for n, event in enumerate(events):
        key = f"sns:{message.message_id}:{n}"
        counted = event.kind == "bounce-transient"
        if counted and not store.first_time(key, now):
            continue  # counted on an earlier delivery of this message
        try:
            if subscriptions.mail_event(event.kind, event.address, now,
                                        message_id=event.message_id,
                                        occurred_at=event.occurred_at or message.timestamp
                                        ) is not None:
                applied += 1
        except Exception:
            if counted:
                store.forget(key)
            raise
    log.info("webhook: %d event(s), %d applied", len(events), applied)
    return pages.plain("OK", 200)


def _preferences_link(subscriptions: Subscriptions, pages: _Pages, subscriber_id: str,
                      now: datetime) -> _Link:
    return _Link(subscriptions.link("preferences", "preferences", subscriber_id, now),
                 "订阅设置", "Your preferences")


def _subscribe_link(pages: _Pages) -> _Link:
    return _Link(f"{pages.app_url}/subscribe", "订阅表单", "Subscription form")


_STATUS_LINES = {
    "active": {"zh": "订阅中", "en": "Subscribed"},
    "pending": {"zh": "等待确认：请打开确认邮件中的链接", "en": "Waiting for your confirmation "
                "(see the confirmation mail)"},
    "unsubscribed": {"zh": "已退订", "en": "Unsubscribed"},
    "bounced": {"zh": "邮件多次无法送达，已暂停发送", "en": "Paused: mail to this address "
                "kept bouncing"},
    "complained": {"zh": "你曾将本邮件标记为垃圾邮件，已停止发送", "en": "Stopped: this address "
                   "marked our mail as spam"},
}


def _status_line(status: str) -> dict[str, str]:
    return _STATUS_LINES[status]


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL, or "" for one that does not parse (a hostile
    ``Referer: http://[bad`` is a refusal, not a crash)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    return f"{parts.scheme}://{parts.netloc}".lower()


def _same_site(request: Request, allowed: set[str]) -> bool:
    """A browser's POST says where its form was (``Origin``; ``Referer`` on old ones). The
    form lives on the archive and on /subscribe: anything else is another site's form. A
    request with neither header is not a browser's cross-site one, and goes on to the
    limits like any other."""
    origin = request.headers.get("origin")
    if origin is not None:
        return origin.lower() in allowed
    referer = request.headers.get("referer")
    if referer:
        return _origin(referer) in allowed
    return True
