"""The link check of a published archive: every internal link resolves, anchors included.

Every ``.html`` and ``.xml`` file is read with ``html.parser`` (an Atom ``type="html"`` element's
text again as HTML). A link to the archive's host must name a file the archive holds (a folder:
its ``index.html``) and, for a ``#fragment``, an ``id`` or ``<a name>`` of that page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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


class _Reader(HTMLParser):
    """Collects a document's ids and links."""

    def __init__(self, ids: set[str], links: list[str]) -> None:
        super().__init__(convert_charrefs=True)
        self.ids, self.links = ids, links
        self.in_loc = False
        self.escaped: list[str] | None = None  # the text of an Atom type="html" element

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if "id" in values:
            self.ids.add(values["id"])
        if tag == "a" and "name" in values:
            self.ids.add(values["name"])
        self.links += [values[name] for name in LINK_ATTRIBUTES if values.get(name)]
        if tag == "meta" and values.get("content", "").startswith(("http://", "https://")):
            self.links.append(values["content"])
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
            inner = _Reader(self.ids, self.links)
            inner.feed("".join(self.escaped))
            inner.close()
            self.escaped = None

    def handle_data(self, data: str) -> None:
        if self.in_loc and data.strip():
            self.links.append(data.strip())
        if self.escaped is not None:
            self.escaped.append(data)


def read_page(data: str) -> tuple[set[str], list[str]]:
    """The ids and the links (as written, in order) of one HTML or XML document."""
    reader = _Reader(set(), [])
    reader.feed(data)
    reader.close()
    return reader.ids, reader.links


def broken_links(root: Path, base_url: str, *, outside: Sequence[str] = ()) -> list[Link]:
    """The internal links of the archive under ``root``, published at ``base_url``, that do
    not resolve; ``outside``: URL prefixes something else serves (the subscription app)."""
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
