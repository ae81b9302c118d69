"""The subscription app's pages: bilingual HTML from ``templates/app/``, and the headers
every answer carries.

Both languages, the reader's first: the subscriber's layout where a link names them, the
form's layout for its answer, else the browser's ``Accept-Language``. The one inline
stylesheet is allowed by its hash in a strict Content-Security-Policy; no JavaScript.
"""

from __future__ import annotations

import base64
import hashlib
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from pipeline.core.email.render import Footer, environment
from pipeline.core.issue.area_display import display_name
from pipeline.core.shipped import templates_dir
from pipeline.model import LANG_TAGS, LAYOUTS, Lang, is_lang, reading_order
from subscribers.areas import clean_area
from subscribers.errors import TokenError, UnknownSubscriber
from subscribers.model import DEFAULT_LAYOUT

__all__ = ["LAYOUT_LABELS", "STATUS_LINES", "Button", "Link", "Pages", "accepted_order",
           "masked_address"]

#: The layouts offered, as the archive's form names them.
LAYOUT_LABELS: tuple[tuple[str, str], ...] = (
    ("zh-en", "中文 + English"), ("en-zh", "English + 中文"), ("zh", "中文"), ("en", "English"),
)


@dataclass(frozen=True)
class Button:
    """A page's one button: a form that POSTs ``fields`` to ``action``."""

    action: str
    zh: str
    en: str
    fields: dict[str, str]
    secondary: bool = False


@dataclass(frozen=True)
class Link:
    """A link under a page's message (to the form, to the preferences)."""

    url: str
    zh: str
    en: str


class Pages:
    """Renders the bilingual pages and knows the headers every answer carries."""

    def __init__(self, app_url: str, base_url: str, footer: Footer | None = None) -> None:
        self.env = environment()
        #: Who runs the list, at the foot of every page as of every email.
        self.footer = footer or Footer()
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

    def render(self, name: str, status_code: int = 200, *, langs: tuple[Lang, ...],
               template: str = "message", status: dict[str, str] | None = None,
               status_kind: str = "ok", referrer: str = "no-referrer",
               **context: Any) -> HTMLResponse:
        """A page, its words in ``langs``' order. The form page's referrer policy is
        ``same-origin``, or browsers would send ``Origin: null``, which the origin check refuses."""
        html = self.env.get_template(f"app/{template}.html.j2").render(
            page=self.text[name], css=self.css, app_url=self.app_url, base_url=self.base_url,
            footer=self.footer, langs=langs, lang_tag=LANG_TAGS,
            status=status, status_kind=status_kind, layouts=LAYOUT_LABELS,
            button=context.pop("button", None), link=context.pop("link", None), **context)
        return HTMLResponse(html, status_code=status_code,
                            headers={**self.headers, "Referrer-Policy": referrer})

    def plain(self, text: str, status_code: int) -> Response:
        return PlainTextResponse(text, status_code=status_code, headers=self.headers)

    def too_large(self) -> Response:
        return self.plain("Request too large", 413)

    def subscribe_form(self, email: str, layout: str, name: str = "subscribe",
                       status_code: int = 200, *, langs: tuple[Lang, ...],
                       known: Iterable[str] = (), chosen: Iterable[str] = ()) -> HTMLResponse:
        """The form page, the catalog's areas as boxes, ``chosen`` ones checked."""
        return self.render(name, status_code, langs=langs, template="subscribe", email=email,
                           layout=layout, referrer="same-origin",
                           areas=self.area_boxes(known, (), chosen))

    @staticmethod
    def area_boxes(known: Iterable[str], held: Iterable[str],
                   checked: Iterable[str]) -> list[tuple[str, str, bool]]:
        """(name, label, checked) for the catalog's and the reader's own areas, sorted. A
        posted name on neither list is never shown: outside text is not echoed back."""
        ticked = {cleaned for name in checked if (cleaned := clean_area(name))}
        return [(name, display_name(name), name in ticked)
                for name in sorted(set(known) | set(held))]

    def subscribe_link(self) -> Link:
        return Link(f"{self.app_url}/subscribe", "订阅表单", "Subscription form")

    def link_problem(self, exc: TokenError | UnknownSubscriber, token: str, *,
                     langs: tuple[Lang, ...]) -> HTMLResponse:
        """The page for a link that cannot be acted on; an expired one (only confirmation
        links expire) offers a new one. 410 for a subscriber gone since: behind CloudFront a
        404 would be swapped for the archive's own page."""
        if isinstance(exc, TokenError) and exc.reason == "expired" and exc.subscriber_id:
            return self.render("expired", 410, langs=langs, button=Button(
                f"{self.app_url}/confirm/resend", "发送新的确认邮件", "Send me a new link",
                {"token": token}))
        if isinstance(exc, UnknownSubscriber):
            return self.render("gone", 410, langs=langs, link=self.subscribe_link())
        return self.render("bad_link", 400, langs=langs, link=self.subscribe_link())


#: What the preferences page says of a subscriber's state.
STATUS_LINES = {
    "active": {"zh": "订阅中", "en": "Subscribed"},
    "pending": {"zh": "等待确认：请打开确认邮件中的链接", "en": "Waiting for your confirmation "
                "(see the confirmation mail)"},
    "unsubscribed": {"zh": "已退订", "en": "Unsubscribed"},
    "bounced": {"zh": "邮件多次无法送达，已暂停发送", "en": "Paused: mail to this address "
                "kept bouncing"},
    "complained": {"zh": "你曾将本邮件标记为垃圾邮件，已停止发送", "en": "Stopped: this address "
                   "marked our mail as spam"},
}


def chosen_layout(layout: str | None, default: str = DEFAULT_LAYOUT) -> str:
    """A layout the form offers, or ``default`` for anything else."""
    return layout if layout in LAYOUTS else default


def accepted_order(accept_language: str | None) -> tuple[Lang, ...]:
    """English first when ``Accept-Language`` prefers English to Chinese (by ``q``, then by
    place), else the default layout's order; anything else counts for nothing."""
    best: tuple[float, int, Lang] | None = None
    for place, entry in enumerate((accept_language or "").split(",")[:32]):
        tag, *params = entry.split(";")
        primary = tag.strip().lower().split("-")[0]
        if not is_lang(primary):
            continue
        weight = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        if not 0 < weight <= 1:  # q=0 is "not this one"; nan and the like count for nothing
            continue
        if best is None or (weight, -place) > best[:2]:
            best = (weight, -place, primary)
    return reading_order("en-zh" if best is not None and best[2] == "en" else DEFAULT_LAYOUT)


#: What stands for the hidden part of an address: always three dots, so its length says
#: nothing about the address's.
MASK = "\u2022\u2022\u2022"


def masked_address(email: str) -> str:
    """``a•••@example.org``: enough for its owner to know which address, too little for
    someone else holding the link."""
    local, at, domain = email.rpartition("@")
    if not at:
        return MASK
    return f"{local[0] if len(local) >= 3 else ''}{MASK}@{domain}"
