"""Search: which archive pages the search index reads, and the index files as site objects.

Pure: keys and HTML in, :class:`SiteObject` values out. ``pipeline/stages/search_index.py``
reads the pages from the archive, runs Pagefind over them and hands the files it wrote back
here; ``publish`` writes the objects like every other page.

The index covers what the archive holds, never a local build folder: each issue's bilingual
page (``issues/<week>/index.html``), and nothing else. ``zh.html`` and ``en.html`` hold the
same words again, and a PR's page (``pr/<number>/``) holds the same reviews again: indexed,
each would repeat every result. A result is one review in the issue that carried it, and the
issue page links on to the PR's page.

A search result should land on the review it matched, not on the top of an eight-review
page. Pagefind makes a sub-result only for a *heading* with an ``id``, and an issue page puts
the ``id`` (``pr-<number>``) on each review's ``<article>``; :func:`anchor_reviews` copies it
onto the article's first heading in the copy Pagefind reads (never in the page published), so
the result links to ``…/index.html#pr-<number>``, which the live page resolves to the article.

The search page and the bundles live under ``search/``: the page at ``search/index.html``,
one Pagefind bundle per ISO year of the issues at ``search/pagefind/<year>/``. Why a bundle a
year and not one for the archive: Pagefind holds the whole index in memory while it writes it
(629 MB for 520 issue pages, ten years), and cannot add to an index; a bundle a year bounds
both the memory and the work of a weekly publish by one year's issues, since only a year
whose pages changed is indexed again (:class:`Manifest` keeps a digest of each year's pages).
The search page loads the newest year's bundle and merges the others into it (Pagefind UI's
``mergeIndex``), so one box still searches every issue: results of all years are ranked
together by score.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import jinja2

from pipeline.core.site.site import HTML, SHORT_CACHE, Site
from pipeline.errors import RenderError
from pipeline.model import Issue, SiteObject

SEARCH_PAGE = "search/index.html"
#: Where Pagefind's bundles are published, one a year (:func:`bundle_prefix`); the search
#: page loads ``pagefind-ui.js`` from the newest.
BUNDLE = "search/pagefind/"
#: Files named by a hash of their content: a new index gets new names, so they never change
#: once written and may be cached for a year. A reader mid-session on last week's entry file
#: still finds the chunks it names: a chunk is deleted only once neither the index just
#: written nor the one before it names it (:func:`stale_files`).
IMMUTABLE_CACHE = "public, max-age=31536000, immutable"
#: What the last publish indexed (:class:`Manifest`): each year's digest of its pages and
#: the files of its bundle, so the next publish indexes again only a year that changed and
#: keeps the files a reader of this index may still fetch (Pagefind's own files name chunks
#: only inside gzip streams).
MANIFEST = "search/indexes.json"
#: The list an archive from before per-year bundles holds (one key a line): read as the
#: previous index's files, then deleted with them.
LEGACY_MANIFEST = "search/index-files.txt"
#: Bundle files the search page never loads (the other two UI flavours, the highlighter):
#: not published, so the archive carries only what it serves.
UNUSED = frozenset({
    "pagefind-modular-ui.js", "pagefind-modular-ui.css",
    "pagefind-component-ui.js", "pagefind-component-ui.css",
    "pagefind-highlight.js",
})
#: By file name ending. ``.pagefind`` (the WebAssembly search core) and ``.pf_*`` (index
#: chunks) are gzip streams that pagefind.js fetches and unpacks itself: served as bytes,
#: so no host or CDN guesses at them, compresses them twice or runs them as a wasm module.
CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".wasm": "application/wasm",
}
OCTETS = "application/octet-stream"
ENTRY = "pagefind-entry.json"
_WEEK_ID = re.compile(r"([0-9]{4})-W[0-9]{2}")  # ASCII digits: \d takes ٢٠٢٦ too
_HASHED = re.compile(r"^(?:index/|fragment/|filter/|pagefind\.[^/]+\.pf_meta$)")
#: A review's article (``id="pr-<n>"``) up to the attributes of its first ``<h2>``, without
#: crossing the article's end. Review bodies cannot open an ``<article>`` or an ``<h2>``: the
#: sanitizer (pipeline/core/issue/sanitize.py) allows neither, nor any ``id``.
_REVIEW = re.compile(
    r'(<article\b[^>]*\bid="(pr-\d+)"[^>]*>(?:(?!</article>|<h2\b).)*<h2\b)([^>]*)>', re.S)


def pages_to_index(issues: Sequence[Issue]) -> dict[str, list[str]]:
    """The archive keys to index by the ISO year of their week (``2026-W48`` → ``2026``),
    oldest year and issue first: each issue's bilingual page (a key the archive does not hold
    is skipped when read). An id that is no ISO week (a hand-edited issue.json) names no page
    and no bundle: its year would become a path."""
    years: dict[str, list[str]] = {}
    for issue_id in sorted({issue.id for issue in issues}):
        if match := _WEEK_ID.fullmatch(issue_id):
            years.setdefault(match[1], []).append(f"issues/{issue_id}/index.html")
    return dict(sorted(years.items()))


def bundle_prefix(year: str) -> str:
    """Where the bundle of ``year``'s issues is published."""
    return f"{BUNDLE}{year}/"


def pages_digest(pages: Mapping[str, str], tool: str) -> str:
    """A digest of what an index of ``pages`` holds: every key and page as Pagefind reads it,
    and ``tool`` (Pagefind's version and options), so a year is indexed again when a page,
    a template or Pagefind changed, and never otherwise."""
    digest = hashlib.sha256(tool.encode("utf-8"))
    for key in sorted(pages):
        for part in (key, pages[key]):
            data = part.encode("utf-8")
            digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def anchor_reviews(html: str) -> str:
    """The page as Pagefind should read it: each review's first heading carries the
    review's ``id``, so Pagefind offers ``#pr-<number>`` as a sub-result."""
    return _REVIEW.sub(
        lambda m: m[0] if re.search(r"\bid=", m[3]) else f'{m[1]} id="{m[2]}"{m[3]}>', html)


def bundle_objects(files: Mapping[str, bytes], prefix: str) -> list[SiteObject]:
    """Pagefind's output (path inside the bundle → bytes) as objects under ``prefix`` (a
    :func:`bundle_prefix`), in a stable order that writes ``pagefind-entry.json`` last: it
    names the index the other files hold, so a publish that fails half-way leaves the old
    entry pointing at files that exist."""
    objects = []
    for path in sorted(files, key=lambda p: (p == ENTRY, p)):
        if path in UNUSED or path.startswith("playground/"):
            continue
        suffix = path[path.rfind("."):] if "." in path else ""
        cache = IMMUTABLE_CACHE if _HASHED.match(path) else SHORT_CACHE
        objects.append(SiteObject(prefix + path, files[path],
                                  CONTENT_TYPES.get(suffix, OCTETS), cache))
    return objects


@dataclass(frozen=True)
class YearIndex:
    """One year's bundle as the manifest records it: the digest of the pages it indexes
    (:func:`pages_digest`), the keys of its files, and the digest of its entry file
    (:func:`entry_digest`). The entry file keeps its name from one index to the next, so only
    its bytes tell whether the live bundle is still the one recorded (a publish that failed
    after rewriting the year, a second publish at the same time)."""

    digest: str
    files: tuple[str, ...]
    entry: str = ""


@dataclass(frozen=True)
class Manifest:
    """What the last publish indexed (:data:`MANIFEST`): its bundles by year, and, read from
    an archive from before them, the files its one bundle had (``legacy``)."""

    years: Mapping[str, YearIndex]
    legacy: frozenset[str] = frozenset()

    def files(self) -> set[str]:
        """Every bundle file this index names: what a reader of it may fetch."""
        return {key for year in self.years.values() for key in year.files} | self.legacy

    def to_object(self) -> SiteObject:
        data: dict[str, object] = {
            "years": {year: {"digest": index.digest, "entry": index.entry,
                             "files": sorted(index.files)}
                      for year, index in sorted(self.years.items())}}
        if self.legacy:  # written after a failed move from the one bundle: still live files
            data["legacy"] = sorted(self.legacy)
        return SiteObject(MANIFEST, (json.dumps(data, indent=1) + "\n").encode("utf-8"),
                          "application/json; charset=utf-8", SHORT_CACHE)

    @classmethod
    def parse(cls, data: bytes) -> Manifest | None:
        """The manifest ``data`` holds; None when it is not one (a hand edit, a torn write):
        then every year is indexed again and nothing is deleted, never a guess."""
        try:
            whole = json.loads(data)
            return cls({str(year): YearIndex(str(entry["digest"]),
                                             tuple(str(key) for key in entry["files"]),
                                             str(entry.get("entry", "")))
                        for year, entry in whole["years"].items()},
                       frozenset(str(key) for key in whole.get("legacy", ())))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None

    @classmethod
    def from_listing(cls, data: bytes) -> Manifest:
        """An archive's :data:`LEGACY_MANIFEST` (one key a line) as the previous index."""
        return cls({}, frozenset(data.decode("utf-8", errors="replace").split()))


def entry_digest(data: bytes | None) -> str:
    """The digest the manifest keeps of a bundle's entry file ("" for none)."""
    return hashlib.sha256(data).hexdigest() if data is not None else ""


def stale_files(present: Iterable[str], live: Iterable[str], previous: Manifest | None
                ) -> list[str]:
    """The bundle files (under :data:`BUNDLE`) that neither the index just written
    (``live``) nor the one before it (``previous``) names: safe to delete, since a reader
    holds at most the previous entry file. Nothing when there is no previous manifest (an
    archive from before manifests, a first index, an unreadable one): deleting then could
    take a chunk from under a reader."""
    if previous is None:
        return []
    keep = set(live) | previous.files()
    return [key for key in sorted(present) if key.startswith(BUNDLE) and key not in keep]


def page_count(files: Mapping[str, bytes]) -> int:
    """How many pages the bundle's entry file says its indexes hold (0 when it has none)."""
    try:
        entry = json.loads(files[ENTRY])
        return sum(int(lang["page_count"]) for lang in entry["languages"].values())
    except (KeyError, TypeError, ValueError, AttributeError):
        return 0


def search_page(site: Site, years: Iterable[str]) -> SiteObject:
    """``search/index.html``: Pagefind's UI over the newest year's bundle with every other
    year's merged in, newest first, and a ``<noscript>`` note that sends a reader without
    JavaScript to the archive's index."""
    urls = [f"{site.root}/{bundle_prefix(year)}" for year in sorted(years, reverse=True)]
    if not urls:
        raise RenderError("web/search.html.j2", "no year's bundle to search")
    try:
        html = site.env.get_template("web/search.html.j2").render(
            bundle_url=urls[0], merged_urls=urls[1:])
    except jinja2.TemplateError as exc:
        raise RenderError("web/search.html.j2", str(exc)) from None
    return SiteObject(SEARCH_PAGE, html.encode("utf-8"), HTML, SHORT_CACHE)
