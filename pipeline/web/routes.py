"""The subscription app's handlers, one small method per route, speaking HTTP only.

The work is :mod:`subscribers.subscriptions`, run in Starlette's thread pool; what every page
route does first (the form, the token) and the answer to a bad link are written once, in
:func:`_page`. Why the routes behave as they do is told in :mod:`pipeline.web.app`.
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import Response

from pipeline.core.mail_in.ses_events import events_from
from pipeline.errors import TransportError, Unconfirmed
from pipeline.model import LAYOUTS, Lang, reading_order
from pipeline.web.mail_queue import MailQueue
from pipeline.web.pages import (
    STATUS_LINES,
    Button,
    Link,
    Pages,
    accepted_order,
    chosen_layout,
    masked_address,
)
from pipeline.web.signups import Signup, SignupQueue
from pipeline.web.sns import SnsError, SnsMessage, SnsVerifier
from pipeline.week import iso_z
from subscribers.areas import MAX_AREA_LENGTH, MAX_AREAS
from subscribers.errors import AreaChoiceError, InvalidAddress, TokenError, UnknownSubscriber
from subscribers.model import Subscriber
from subscribers.subscriptions import Subscriptions

__all__ = ["MAX_FORM_BYTES", "MAX_WEBHOOK_BYTES", "PURGE_EVERY", "SNS_WINDOW", "Routes"]

log = logging.getLogger("newsletter.app")

#: Larger bodies are refused before they are read: above the largest pick of areas a
#: reader can post (each character up to 12 bytes once percent-encoded).
MAX_FORM_BYTES = 2 * 1024 + MAX_AREAS * (len("&areas=") + 12 * MAX_AREA_LENGTH)
#: A few fields, and one more area than a reader may follow: too many get the page's own
#: answer, not a parser's 400.
MAX_FORM_FIELDS = 10 + MAX_AREAS + 1
#: An SNS message is at most 256 KB of payload plus its envelope.
MAX_WEBHOOK_BYTES = 512 * 1024
#: How long an SNS message id is remembered (and so how old a message may be).
SNS_WINDOW = timedelta(days=7)
#: Ids older than the window are dropped every this many notifications (DynamoDB's TTL
#: drops them by itself).
PURGE_EVERY = 1000


@dataclass(frozen=True)
class Asked:
    """A request as the handlers need it. ``langs`` is the browser's reading order, for pages
    whose reader is not known; ``areas`` holds every value of the repeated field (``form``
    keeps one value per name)."""

    request: Request
    token: str
    now: datetime
    langs: tuple[Lang, ...]
    form: dict[str, str]
    areas: tuple[str, ...] = ()

    @property
    def client(self) -> str | None:
        return self.request.client.host if self.request.client else None


Endpoint = Callable[["Routes", Request], Awaitable[Response]]
Handler = Callable[["Routes", Asked], Awaitable[Response]]


def _page(*, form: bool = False, same_site: bool = False, lenient: bool = False
          ) -> Callable[[Handler], Endpoint]:
    """What every page route shares: the form read within bounds (a body too large is a
    413, or with ``lenient``, the one-click unsubscribe whose token is in the URL, no form
    at all), and one answer for a link that cannot be acted on."""

    def decorate(handler: Handler) -> Endpoint:
        @functools.wraps(handler)
        async def endpoint(self: Routes, request: Request) -> Response:
            langs = _asked_order(request)
            if same_site and not _same_site(request, self.allowed_origins):
                return self.pages.render("forbidden", 403, langs=langs,
                                         link=self.pages.subscribe_link())
            parsed = await _form_of(request, lenient=lenient) if form else None
            if form and parsed is None and not lenient:
                return self.pages.too_large()
            fields, areas = parsed or ({}, ())
            token = request.query_params.get("token") or fields.get("token", "")
            asked = Asked(request, token, self.clock(), langs, fields, areas)
            try:
                return await handler(self, asked)
            except (TokenError, UnknownSubscriber) as exc:
                return self.pages.link_problem(exc, asked.token, langs=langs)
        return endpoint

    return decorate


class Routes:
    """The handlers over ready-made parts (:func:`pipeline.web.app.create_app`)."""

    def __init__(self, subscriptions: Subscriptions, pages: Pages, *,
                 verifier: SnsVerifier | None, clock: Callable[[], datetime],
                 queue: MailQueue, signups: SignupQueue | None = None) -> None:
        self.subscriptions = subscriptions
        #: Where sign-ups go when not done in this process (the Lambda host).
        self.signups = signups
        self.pages = pages
        self.verifier = verifier
        self.clock = clock
        self.queue = queue
        self.allowed_origins = {_origin(pages.app_url), _origin(pages.base_url)}
        self._notifications = itertools.count(1)

    @_page()
    async def subscribe_page(self, asked: Asked) -> Response:
        """The form in the browser's language order, its layout preset to match unless the
        link names one (``?layout=en``)."""
        known = await run_in_threadpool(self.subscriptions.store.known_areas)
        layout = chosen_layout(asked.request.query_params.get("layout"), "-".join(asked.langs))
        return self.pages.subscribe_form("", layout, langs=reading_order(layout), known=known)

    @_page(form=True, same_site=True)
    async def subscribe(self, asked: Asked) -> Response:
        email = asked.form.get("email", "").strip()
        layout = chosen_layout(asked.form.get("layout", "zh-en"))
        # The answer reads as the form chose: the same for every address.
        langs = reading_order(layout)
        if asked.form.get("website"):  # the honeypot: a person never sees the field
            log.info("subscribe: honeypot filled; nothing done")
            return self.pages.render("sent", langs=langs)
        if not await self._client_allowed(asked):
            response = self.pages.render("too_many", 429, langs=langs)
            response.headers["Retry-After"] = "3600"
            return response
        try:
            self.subscriptions.check_request(email, layout)
            # The same for every address: the answer waits for it, not for the address.
            areas = await run_in_threadpool(self.subscriptions.choose_areas, asked.areas)
        except (InvalidAddress, AreaChoiceError) as exc:
            page = ("invalid_email" if isinstance(exc, InvalidAddress)
                    else _AREA_PAGES[exc.reason])
            known = await run_in_threadpool(self.subscriptions.store.known_areas)
            return self.pages.subscribe_form(email[:254], layout, page, 400, langs=langs,
                                             known=known, chosen=asked.areas)
        # The address's state is read only after the answer has gone.
        response = self.pages.render("sent", langs=langs)
        signup = Signup(email, layout, areas, asked.now)
        if self.signups is None:
            response.background = self.queue.put(lambda: signup.run(self.subscriptions),
                                                  "subscribe", f"asked at {iso_z(asked.now)}")
            return response
        try:  # one SendMessage, whatever the address: the answer's time says nothing
            await run_in_threadpool(self.signups.send, signup.to_json())
        except TransportError as exc:  # the same for every address: said, not hidden
            log.warning("subscribe: not queued: %s", exc)
            return self.pages.render("unavailable", 503, langs=langs)
        return response

    @_page()
    async def confirm_page(self, asked: Asked) -> Response:
        """The one button, for any link that verifies: the page reads nothing about the
        address, so it is the same whatever became of it (its order is the browser's)."""
        self.subscriptions.verified(asked.token, "confirm", asked.now)
        return self.pages.render("confirm", langs=asked.langs, button=Button(
            f"{self.pages.app_url}/confirm", "确认订阅", "Confirm subscription",
            {"token": asked.token}))

    @_page(form=True)
    async def confirm(self, asked: Asked) -> Response:
        """The same page for every address a verified link names; only a ``pending`` one
        changes, and the page carries no link an old link's holder could use."""
        await run_in_threadpool(lambda: self.subscriptions.confirm(
            asked.token, source="web", client=asked.client, now=asked.now))
        log.info("confirm: done")
        return self.pages.render("confirmed", langs=asked.langs,
                                 link=self.pages.subscribe_link())

    @_page(form=True)
    async def resend(self, asked: Asked) -> Response:
        now, langs = asked.now, asked.langs
        subscriber_id = self.subscriptions.expired_confirmation(asked.token, now)
        if not await self._client_allowed(asked):
            return self.pages.render("too_many", 429, langs=langs)
        try:
            await run_in_threadpool(lambda: self.subscriptions.resend(subscriber_id, now=now))
        except Unconfirmed:
            pass  # the mail may have left: the page says it did
        except TransportError as exc:
            log.warning("resend: mail not sent: %s", type(exc).__name__)
            return self.pages.render("unavailable", 503, langs=langs)
        return self.pages.render("resent", langs=langs)

    @_page()
    async def unsubscribe_page(self, asked: Asked) -> Response:
        """One button, naming the address (masked: the link may have been forwarded), with
        the preferences offered first."""
        token, now = asked.token, asked.now
        try:
            subscriber = await run_in_threadpool(
                self.subscriptions.subscriber_for, token, "unsubscribe", now)
        except UnknownSubscriber:  # removed: as unsubscribed as can be
            return self.pages.render("unsubscribed", langs=asked.langs)
        langs = reading_order(subscriber.layout)
        if subscriber.status not in ("pending", "active"):
            return self.pages.render("unsubscribed", langs=langs)
        instead = self._preferences_link(subscriber.id, now)
        return self.pages.render(
            "unsubscribe", langs=langs, template="unsubscribe",
            address=masked_address(subscriber.email),
            link=Link(instead.url, "不想退订？在订阅设置里换语言或关注的领域",
                      "Rather stay? Change the language or areas in your preferences"),
            button=Button(f"{self.pages.app_url}/unsubscribe?token={token}", "退订",
                          "Unsubscribe", {"List-Unsubscribe": "One-Click"}))

    @_page(form=True, lenient=True)
    async def unsubscribe(self, asked: Asked) -> Response:
        """RFC 8058: the provider POSTs ``List-Unsubscribe=One-Click`` (the page's button
        too): done, 200, no next step, whatever the body."""
        subscriber = await run_in_threadpool(lambda: self.subscriptions.unsubscribe(
            asked.token, now=asked.now))
        log.info("unsubscribe: done")
        if subscriber is None:
            return self.pages.render("unsubscribed", langs=asked.langs)
        return self.pages.render("unsubscribed", langs=reading_order(subscriber.layout),
                                 link=self._preferences_link(subscriber.id, asked.now))

    @_page()
    async def preferences_page(self, asked: Asked) -> Response:
        subscriber = await run_in_threadpool(
            self.subscriptions.subscriber_for, asked.token, "preferences", asked.now)
        return await self._preferences_page(subscriber, asked.token,
                                            STATUS_LINES[subscriber.status])

    @_page(form=True)
    async def preferences(self, asked: Asked) -> Response:
        current = await run_in_threadpool(
            self.subscriptions.subscriber_for, asked.token, "preferences", asked.now)
        action = asked.form.get("action", "")
        if action not in _SAVED or (action == "layout"
                                    and asked.form.get("layout") not in LAYOUTS):
            return self.pages.plain("Unknown action", 400)
        try:
            subscriber = await run_in_threadpool(self._change, action, asked, current)
        except AreaChoiceError as exc:
            return await self._preferences_page(current, asked.token, _AREA_LINES[exc.reason],
                                                400, chosen=asked.areas)
        return await self._preferences_page(subscriber, asked.token, _SAVED[action])

    def _change(self, action: str, asked: Asked, current: Subscriber) -> Subscriber:
        """Do what the preferences form asks, for the subscriber its link named. The areas
        change only when the form showed them: a form without the boxes must not read as
        "follow none"."""
        subscriptions, now = self.subscriptions, asked.now
        if action == "unsubscribe":
            return subscriptions.leave(current, now)
        if action == "resubscribe":
            return subscriptions.resubscribe(current, client=asked.client, now=now)
        areas = (subscriptions.choose_areas(asked.areas, held=current.areas)
                 if asked.form.get("areas_shown") == "1" else None)
        return subscriptions.store.set_layout(current.id, asked.form["layout"], now,
                                              areas=areas)

    async def _preferences_page(self, subscriber: Subscriber, token: str,
                                status: dict[str, str], status_code: int = 200, *,
                                chosen: tuple[str, ...] | None = None) -> Response:
        """The preferences page in the subscriber's layout, their areas checked (after a
        refused pick, what was posted)."""
        known = await run_in_threadpool(self.subscriptions.store.known_areas)
        return self.pages.render(
            "preferences", status_code, langs=reading_order(subscriber.layout),
            template="preferences", email=subscriber.email,
            layout=subscriber.layout, status=status,
            status_kind="ok" if subscriber.status == "active" and status_code < 400 else "warn",
            subscribed=subscriber.status in ("pending", "active"),
            can_resubscribe=subscriber.status == "unsubscribed",
            areas=self.pages.area_boxes(known, subscriber.areas,
                                        subscriber.areas if chosen is None else chosen),
            action=f"{self.pages.app_url}/preferences?token={token}")

    async def ses_webhook(self, request: Request) -> Response:
        verifier = self.verifier
        if verifier is None:
            return self.pages.plain("Webhook not configured ([ses] sns_topic_arns)", 404)
        body = await self._webhook_body(request)
        if body is None:
            return self.pages.too_large()
        now = self.clock()
        try:
            message = await run_in_threadpool(verifier.verify, body, now)
        except SnsError as exc:
            log.warning("webhook: refused: %s", exc.reason)
            code = {"malformed": 400, "cert-unavailable": 503}.get(exc.reason, 403)
            return self.pages.plain(f"Refused: {exc.reason}", code)
        if message.type == "SubscriptionConfirmation":
            return await self._confirm_topic(verifier, message)
        if message.type != "Notification":
            log.info("webhook: %s for %s", message.type, message.topic_arn)
            return self.pages.plain("OK", 200)
        handled = self.subscriptions.handled
        if (not handled.expires_by_itself
                and next(self._notifications) % PURGE_EVERY == 0):  # keep the handled ids few
            await run_in_threadpool(handled.purge_seen, now - SNS_WINDOW)
        return await run_in_threadpool(_apply_notification, self.subscriptions, self.pages,
                                       message, now)

    @staticmethod
    async def _webhook_body(request: Request) -> bytes | None:
        """The body, or None once it is larger than an SNS message can be."""
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_WEBHOOK_BYTES):
            return None
        body = bytearray()  # appended in place: a client's many tiny chunks cost no copies
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_WEBHOOK_BYTES:
                return None
        return bytes(body)

    async def _confirm_topic(self, verifier: SnsVerifier, message: SnsMessage) -> Response:
        try:
            await run_in_threadpool(verifier.confirm_subscription, message)
        except SnsError as exc:
            log.warning("webhook: subscription not confirmed: %s", exc.reason)
            return self.pages.plain("Could not confirm the subscription", 502)
        log.info("webhook: SNS subscription confirmed for %s", message.topic_arn)
        return self.pages.plain("Subscribed", 200)

    async def healthz(self, request: Request) -> Response:
        return self.pages.plain("ok", 200)

    async def not_found(self, request: Request, exc: Exception) -> Response:
        return self.pages.render("not_found", 404, langs=_asked_order(request))

    async def client_gone(self, request: Request, exc: Exception) -> Response:
        """The client left (or was cut off) before its body was read: nothing was done, and
        this answer, which reaches nobody, spares the log a traceback."""
        return self.pages.plain("Request incomplete", 400)

    async def not_allowed(self, request: Request, exc: Exception) -> Response:
        response = self.pages.plain("Method not allowed", 405)
        response.headers.update(getattr(exc, "headers", None) or {})  # Allow
        return response

    async def _client_allowed(self, asked: Asked) -> bool:
        """The per-client limit (kept in the store, so several processes share it)."""
        return await run_in_threadpool(self.subscriptions.client_allowed, asked.client,
                                       asked.now)

    def _preferences_link(self, subscriber_id: str, now: datetime) -> Link:
        return Link(self.subscriptions.link("preferences", "preferences", subscriber_id, now),
                    "订阅设置", "Your preferences")


#: The preferences form's actions, and what the page then says.
_SAVED = {
    "layout": {"zh": "已保存", "en": "Saved"},
    "unsubscribe": {"zh": "已退订", "en": "Unsubscribed"},
    "resubscribe": {"zh": "已重新订阅", "en": "Subscribed again"},
}
#: The subscribe form's page for a refused pick of areas, by AreaChoiceError.reason.
_AREA_PAGES = {"unknown": "unknown_area", "too-many": "too_many_areas"}
#: The preferences page's status line for the same.
_AREA_LINES = {
    "unknown": {"zh": "未保存：有的领域不在列表中，请从列表中选择",
                "en": "Not saved: some areas are not on the list; pick from the list"},
    "too-many": {"zh": f"未保存：最多可以关注 {MAX_AREAS} 个领域",
                 "en": f"Not saved: you can follow at most {MAX_AREAS} areas"},
}


def _asked_order(request: Request) -> tuple[Lang, ...]:
    """The reading order of a page whose reader's layout is not known: the browser's."""
    return accepted_order(request.headers.get("accept-language"))


async def _form_of(request: Request, *, lenient: bool = False
                   ) -> tuple[dict[str, str], tuple[str, ...]] | None:
    """The urlencoded or multipart form (RFC 8058 allows both) and its ``areas``; None when
    too large (or, ``lenient``, unparseable)."""
    length = request.headers.get("content-length", "0")
    if not length.isdigit() or int(length) > MAX_FORM_BYTES:
        return None
    if int(length) == 0:
        return {}, ()
    try:
        await request.body()  # at most MAX_FORM_BYTES: the server stops at Content-Length
        form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS,
                                  max_part_size=MAX_FORM_BYTES)
    except (HTTPException, MultiPartException):  # a body that does not parse
        if not lenient:
            raise
        return None
    areas = tuple(v for v in form.getlist("areas") if isinstance(v, str))
    return {k: v for k, v in form.items() if isinstance(v, str)}, areas


def _apply_notification(subscriptions: Subscriptions, pages: Pages, message: SnsMessage,
                        now: datetime) -> Response:
    """One verified notification's SES events, applied once however often SNS redelivers
    it; a body that is no SES event is answered 200 and ignored."""
    try:
        events = events_from(message.message)
    except ValueError as exc:
        log.warning("webhook: not an SES event: %s", exc)
        return pages.plain("Ignored: not an SES event", 200)
    applied = subscriptions.bounces.notification(message.message_id, events, now,
                                                 sent_at=message.timestamp)
    log.info("webhook: %d event(s), %d applied", len(events), applied)
    return pages.plain("OK", 200)


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL, or "" for one that does not parse (a hostile
    ``Referer: http://[bad`` is a refusal, not a crash)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    return f"{parts.scheme}://{parts.netloc}".lower()


def _same_site(request: Request, allowed: set[str]) -> bool:
    """Whether a POST's form was ours (``Origin``, else ``Referer``): the archive's or
    /subscribe. A request with neither is no browser's cross-site one."""
    origin = request.headers.get("origin")
    if origin is not None:
        return origin.lower() in allowed
    referer = request.headers.get("referer")
    return not referer or _origin(referer) in allowed
