"""The link check of a published archive: every internal link resolves, anchors included.

:func:`broken_links` reads every ``.html`` and ``.xml`` file under an archive folder with the
standard library's ``html.parser`` (it takes XML's tags and attributes as they are), and the
HTML an Atom feed carries escaped in a ``type="html"`` element is read again as HTML. A link is
an ``href``, a ``src`` or a form's ``action``, a sitemap's ``<loc>``, or a ``<meta>`` value
that is a URL (``og:image``); an Atom ``<id>`` names an entry and is no link. A link is
internal when it resolves (against the page's own URL) to the archive's ``base_url``, or to
the same host outside it (a root-relative path on an archive under a prefix: broken, since
nothing serves it); ``outside`` names URL prefixes served by something else (the
subscription app at ``[site] app_url``), which are not checked here. An internal link must
name a file the archive holds (a folder stands for its ``index.html``, as static hosts
serve it) and, with a ``#fragment``, an element of that page whose ``id`` (or an
``<a name>``) is that fragment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

#: Attributes that hold a link on any element.
LINK_ATTRIBUTES = ("href", "src", "action")
#: Elements whose escaped text is HTML when their ``type`` says so (Atom).
HTML_TEXT = ("content", "summary", "title", "subtitle", "rights")


@dataclass(frozen=True)
class Link:
    """A link that does not resolve: the file holding it, the URL as written, and why."""

    source: str
    url: str
    why: str

    def __str__(self) -> str:
        return f"{self.source}: {self.url} ({self.why})"


@dataclass
class _Page:
    ids: set[str] = field(default_factory=set)
    links: list[str] = field(default_factory=list)


class _Reader(HTMLParser):
    """Collects a document's ids and links; escaped HTML inside an Atom text element is
    gathered and read again once the element ends."""

    def __init__(self, page: _Page) -> None:
        super().__init__(convert_charrefs=True)
        self.page = page
        self.in_loc = False
        self.escaped: list[str] | None = None  # the text of an Atom type="html" element

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if "id" in values:
            self.page.ids.add(values["id"])
        if tag == "a" and "name" in values:
            self.page.ids.add(values["name"])
        self.page.links += [values[name] for name in LINK_ATTRIBUTES if values.get(name)]
        if tag == "meta" and values.get("content", "").startswith(("http://", "https://")):
            self.page.links.append(values["content"])
        self.in_loc = tag == "loc"
        if tag in HTML_TEXT and values.get("type") == "html":
            self.escaped = []

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.in_loc = False
        self.escaped = None

    def handle_endtag(self, tag: str) -> None:
        if tag == "loc":
            self.in_loc = False
        if tag in HTML_TEXT and self.escaped is not None:
            inner = _Reader(self.page)
            inner.feed("".join(self.escaped))
            inner.close()
            self.escaped = None

    def handle_data(self, data: str) -> None:
        if self.in_loc and data.strip():
            self.page.links.append(data.strip())
        if self.escaped is not None:
            self.escaped.append(data)


def read_page(data: str) -> tuple[set[str], list[str]]:
    """The ids and the links (as written, in order) of one HTML or XML document."""
    page = _Page()
    reader = _Reader(page)
    reader.feed(data)
    reader.close()
    return page.ids, page.links


def broken_links(root: Path, base_url: str, *, outside: Sequence[str] = ()) -> list[Link]:
    """Every internal link of the archive under ``root`` (published at ``base_url``) that
    names no file there, or an anchor its page does not have; [] when all resolve."""
    base = base_url.rstrip("/") + "/"
    host = urlsplit(base)[:2]
    pages = {path.relative_to(root).as_posix(): read_page(path.read_text("utf-8"))
             for path in sorted(root.rglob("*")) if path.suffix in (".html", ".xml")
             and path.is_file()}
    broken: list[Link] = []
    for key, (_, links) in pages.items():
        for url in links:
            absolute, fragment = urldefrag(urljoin(base + key, url))
            if absolute.startswith(tuple(outside)) or urlsplit(absolute)[:2] != host:
                continue  # another site, or the subscription app
            if not (absolute + "/").startswith(base):
                broken.append(Link(key, url, "outside the archive's base URL"))
                continue
            target = unquote(urlsplit(absolute).path[len(urlsplit(base).path):])
            if target == "" or target.endswith("/"):
                target += "index.html"
            if not (root / target).is_file():
                broken.append(Link(key, url, f"no file {target}"))
            elif fragment and unquote(fragment) not in pages.get(target, (set(), []))[0]:
                broken.append(Link(key, url, f"no #{unquote(fragment)} in {target}"))
    return broken
