"""Site: issue.json files → the public web archive's pages, as :class:`SiteObject` values.

Pure; ``publish`` writes them. Every page is made from the issues the archive holds, never
from a local build folder, and shows no ranking rationale, personal link or token. Links
between pages are root paths naming ``index.html``, so a page works on any host; canonical
URLs, feeds, the sitemap and robots.txt are absolute, from ``[site] base_url``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import jinja2
from markupsafe import Markup, escape

from pipeline.config import SiteSettings
from pipeline.core.email.render import (
    PREFERENCES_PLACEHOLDER,
    UNSUBSCRIBE_PLACEHOLDER,
    Footer,
    environment,
    tier_label,
)
from pipeline.core.issue import issue_json
from pipeline.core.issue.built_issue import BuiltIssue
from pipeline.core.issue.interests import area_slug
from pipeline.core.issue.rank import TIER_BY_NAME
from pipeline.core.shipped import strings, templates_dir
from pipeline.core.site import site_pages
from pipeline.core.site.site_pages import AreaPage, url_of
from pipeline.core.site.site_pages import IssueView as IssueView  # re-exported: preview uses it
from pipeline.errors import RenderError
from pipeline.model import LANG_TAGS, Issue, SiteObject

HTML = "text/html; charset=utf-8"
ATOM = "application/atom+xml; charset=utf-8"
#: The share card (1200x630) every page names as og:image; made by scripts/make-card.
CARD_KEY = "static/card.png"
#: The index lists this many titles of an issue, then "+N more" linking to the issue.
INDEX_TITLES = 10
#: Issue pages change only when an issue is corrected; the index, feed and sitemap weekly.
LONG_CACHE = "public, max-age=604800"
SHORT_CACHE = "public, max-age=300, must-revalidate"
#: Page variants of one issue: file name → the languages it shows.
VARIANTS = {"index.html": ("zh", "en"), "zh.html": ("zh",), "en.html": ("en",)}
_CODE = re.compile(r"<code>(.*?)</code>", re.S)
#: The Atom feed carries the latest issues in full; the index and sitemap list them all.
FEED_ISSUES = 20
#: The folders whose every page is made from the archive's issues: a page there that no
#: issue makes any more is retired by ``publish`` (:func:`retired`).
DERIVED = ("pr/", "areas/")


def identifiers(body_html: str) -> list[Markup]:
    """The code identifiers a review names, in order, once each (already escaped HTML)."""
    seen = dict.fromkeys(match[1].strip() for match in _CODE.finditer(body_html))
    return [Markup(code) for code in seen if code]  # noqa: S704 (sanitized markup's text)


class Site:
    """Renders the site's pages with the shared template environment."""

    def __init__(self, site: SiteSettings, *, footer: Footer | None = None) -> None:
        """``footer``: who publishes the archive, as every email's foot says it."""
        self.base_url = site.base_url.rstrip("/")
        path = urlsplit(self.base_url).path
        #: The site's root as a path ("" or "/weekly"): where every link between pages starts.
        self.root = path.rstrip("/")
        self._origin = self.base_url[:len(self.base_url) - len(path)]
        self.env = environment()
        self.env.globals.update(
            footer=footer or Footer(), s=strings(), lang_tag=LANG_TAGS, tier_label=tier_label,
            identifiers=identifiers, base_url=self.base_url, root=self.root,
            app_url=site.app_url.rstrip("/"), tiers=TIER_BY_NAME, index_titles=INDEX_TITLES,
            card_url=url_of(self.base_url, CARD_KEY),
            pr_url=lambda pr: url_of(self.root, site_pages.pr_key(pr)),
            area_url=lambda name: url_of(self.root, site_pages.area_key(area_slug(name))),
            page_url=lambda key: url_of(self.root, key),
        )
        self.env.filters["absolute"] = self.absolute

    def absolute(self, url: str) -> str:
        """A link of the site (``/issues/…``) as an absolute URL; any other URL as it is."""
        return self._origin + url if url.startswith("/") and not url.startswith("//") else url

    def render(self, name: str, **context: Any) -> str:
        """Template ``name`` rendered; any template error a :class:`RenderError` naming it."""
        try:
            return self.env.get_template(name).render(**context)
        except jinja2.TemplateError as exc:
            raise RenderError(name, str(exc)) from None

    def _page(self, key: str, name: str, kind: str = HTML, cache: str = SHORT_CACHE,
              **context: Any) -> SiteObject:
        return SiteObject(key, self.render(name, **context).encode("utf-8"), kind, cache)

    def issue_objects(self, built: BuiltIssue) -> list[SiteObject]:
        """Everything under ``issues/<week>/``: the pages, the public email, issue.json."""
        view = IssueView(built.issue, self.root)
        prefix = f"issues/{view.id}/"
        return [
            *(self._page(prefix + variant, "web/issue.html.j2", cache=LONG_CACHE, issue=view,
                         langs=langs, variant=variant, variants=VARIANTS)
              for variant, langs in VARIANTS.items()),
            SiteObject(prefix + "email.html",
                       public_email(built.html("zh-en"), self, self.absolute(view.url)),
                       HTML, LONG_CACHE),
            SiteObject(prefix + "issue.json", public_issue_json(built),
                       "application/json; charset=utf-8", LONG_CACHE),
        ]

    def index_objects(self, issues: Sequence[Issue]) -> list[SiteObject]:
        """Every page made from all the archive's issues, the index, feed and sitemap after
        the pages they name."""
        views = sorted((IssueView(issue, self.root) for issue in issues), key=lambda v: v.id,
                       reverse=True)
        seen = site_pages.appearances(views)
        prs, areas = site_pages.pr_pages(seen), site_pages.area_pages(seen)
        return [
            *(self._page(page.key, "web/pr.html.j2", page=page) for page in prs),
            *(obj for area in areas for obj in self._area_objects(area)),
            self._page("areas/index.html", "web/areas.html.j2", areas=areas),
            SiteObject(CARD_KEY, (templates_dir() / "web" / "card.png").read_bytes(), "image/png",
                       LONG_CACHE),
            self._page("index.html", "web/index.html.j2", issues=views),
            self._page("feed.xml", "web/feed.xml.j2", ATOM, issues=views[:FEED_ISSUES],
                       updated=views[0].published if views else None),
            self._page("sitemap.xml", "web/sitemap.xml.j2", "application/xml; charset=utf-8",
                       issues=views, variants=VARIANTS, prs=prs, areas=areas),
            SiteObject("robots.txt", robots_txt(self.base_url), "text/plain; charset=utf-8",
                       SHORT_CACHE),
            self._page("404.html", "web/404.html.j2"),
        ]

    def _area_objects(self, area: AreaPage) -> list[SiteObject]:
        feed = area.reviews[:site_pages.AREA_FEED_ENTRIES]
        return [
            *(self._page(area.page_key(n), "web/area.html.j2", area=area, page=n,
                         reviews=area.page(n)) for n in range(1, area.page_count + 1)),
            self._page(area.key("feed.xml"), "web/area_feed.xml.j2", ATOM, area=area,
                       reviews=feed, updated=feed[0].issue.published if feed else None),
        ]


def retired(present: Iterable[str], made: Iterable[SiteObject]) -> list[str]:
    """The keys under :data:`DERIVED` the archive holds that the pages just ``made`` no
    longer include: they would stay public after their review left every issue."""
    kept = {obj.key for obj in made}
    return sorted(key for key in set(present) if key.startswith(DERIVED) and key not in kept)


def robots_txt(base_url: str) -> bytes:
    """Everything may be crawled; the sitemap is named absolutely, as robots.txt requires."""
    return f"User-agent: *\nAllow: /\n\nSitemap: {base_url}/sitemap.xml\n".encode()


def public_issue_json(built: BuiltIssue) -> bytes:
    """``issue.json`` as the archive shows it: without interest variants (made from
    subscribers' choices) or hidden PRs, keeping the ``content_hash`` the editor approved."""
    if not built.variants and not built.issue.hidden:
        return built.source
    return issue_json.dumps(issue_json.with_hash(replace(built.issue, hidden=()),
                                                 built.content_hash))


def public_email(email_html: str, site: Site, page_url: str = "") -> bytes:
    """The ``zh-en`` email as the archive shows it: without its personal links (which work
    only with a reader's token), and with a canonical link to the issue's page."""
    html = _PERSONAL_LINK.sub(lambda link: " · " if link[1] and link[2] else "", email_html)
    for placeholder in (UNSUBSCRIBE_PLACEHOLDER, PREFERENCES_PLACEHOLDER):  # outside a link
        html = html.replace(placeholder, f"{site.base_url}/index.html")
    if page_url:
        canonical = f'<link rel="canonical" href="{escape(page_url)}">'
        head = html.find("</head>")
        html = html[:head] + canonical + html[head:] if head >= 0 else canonical + html
    return html.encode("utf-8")


#: A personal link of the footer with the `` · `` (and white space) on either side of it:
#: removed, it leaves its neighbours joined by one.
_PERSONAL_LINK = re.compile(
    r"(\s*·\s*)?<a\b[^>]*\bhref=\"(?:"
    + "|".join(re.escape(p) for p in (UNSUBSCRIBE_PLACEHOLDER, PREFERENCES_PLACEHOLDER))
    + r")\"[^>]*>.*?</a>(\s*·\s*)?", re.S)
