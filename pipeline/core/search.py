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

The search page and the bundle live under ``search/``: the page at ``search/index.html``,
Pagefind's files at ``search/pagefind/``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

import jinja2

from pipeline.core.site import HTML, SHORT_CACHE, Site
from pipeline.errors import RenderError
from pipeline.model import Issue, SiteObject

SEARCH_PAGE = "search/index.html"
#: Where Pagefind's bundle is published (the search page loads ``pagefind-ui.js`` from it).
BUNDLE = "search/pagefind/"
#: Files named by a hash of their content: a new index gets new names, so they never change
#: once written and may be cached for a year. A reader mid-session on last week's entry file
#: still finds the chunks it names: a chunk is deleted only once neither the index just
#: written nor the one before it names it (:func:`stale_files`).
IMMUTABLE_CACHE = "public, max-age=31536000, immutable"
#: The bundle's files of the index last written, one key a line: what the next publish
#: keeps for readers who loaded that index (Pagefind's own files name chunks only inside
#: gzip streams).
MANIFEST = "search/index-files.txt"
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
_HASHED = re.compile(r"^(?:index/|fragment/|filter/|pagefind\.[^/]+\.pf_meta$)")
#: A review's article (``id="pr-<n>"``) up to the attributes of its first ``<h2>``, without
#: crossing the article's end. Review bodies cannot open an ``<article>`` or an ``<h2>``: the
#: sanitizer (pipeline/core/sanitize.py) allows neither, nor any ``id``.
_REVIEW = re.compile(
    r'(<article\b[^>]*\bid="(pr-\d+)"[^>]*>(?:(?!</article>|<h2\b).)*<h2\b)([^>]*)>', re.S)


def pages_to_index(issues: Sequence[Issue]) -> list[str]:
    """The archive keys to index, oldest issue first: each issue's bilingual page (a key the
    archive does not hold is skipped when read)."""
    return sorted({f"issues/{issue.id}/index.html" for issue in issues})


def anchor_reviews(html: str) -> str:
    """The page as Pagefind should read it: each review's first heading carries the
    review's ``id``, so Pagefind offers ``#pr-<number>`` as a sub-result."""
    return _REVIEW.sub(
        lambda m: m[0] if re.search(r"\bid=", m[3]) else f'{m[1]} id="{m[2]}"{m[3]}>', html)


def bundle_objects(files: Mapping[str, bytes]) -> list[SiteObject]:
    """Pagefind's output (path inside the bundle → bytes) as objects under :data:`BUNDLE`,
    in a stable order that writes ``pagefind-entry.json`` last: it names the index the
    other files hold, so a publish that fails half-way leaves the old entry pointing at
    files that exist."""
    objects = []
    for path in sorted(files, key=lambda p: (p == ENTRY, p)):
        if path in UNUSED or path.startswith("playground/"):
            continue
        suffix = path[path.rfind("."):] if "." in path else ""
        cache = IMMUTABLE_CACHE if _HASHED.match(path) else SHORT_CACHE
        objects.append(SiteObject(BUNDLE + path, files[path],
                                  CONTENT_TYPES.get(suffix, OCTETS), cache))
    return objects


def manifest(objects: Sequence[SiteObject]) -> SiteObject:
    """The keys of the bundle's files of ``objects``, one a line, as :data:`MANIFEST`."""
    keys = sorted(obj.key for obj in objects if obj.key.startswith(BUNDLE))
    return SiteObject(MANIFEST, "".join(f"{key}\n" for key in keys).encode("utf-8"),
                      "text/plain; charset=utf-8", SHORT_CACHE)


def stale_files(present: Sequence[str], live: Sequence[str], previous: bytes | None
                ) -> list[str]:
    """The bundle's hashed files (chunks, fragments, filters, metadata) that neither the
    index just written (``live``) nor the one before it (``previous``: its manifest) names:
    safe to delete, since a reader holds at most the previous entry file. Nothing when there
    is no previous manifest (an archive from before manifests, or a first index): deleting
    then could take a chunk from under a reader."""
    if previous is None:
        return []
    keep = set(live) | set(previous.decode("utf-8", errors="replace").splitlines())
    return [key for key in sorted(present)
            if key.startswith(BUNDLE) and _HASHED.match(key[len(BUNDLE):]) and key not in keep]


def page_count(files: Mapping[str, bytes]) -> int:
    """How many pages the bundle's entry file says its indexes hold (0 when it has none)."""
    try:
        entry = json.loads(files[ENTRY])
        return sum(int(lang["page_count"]) for lang in entry["languages"].values())
    except (KeyError, TypeError, ValueError, AttributeError):
        return 0


def search_page(site: Site) -> SiteObject:
    """``search/index.html``: Pagefind's UI over the bundle, with a ``<noscript>`` note
    that sends a reader without JavaScript to the archive's index."""
    try:
        html = site.env.get_template("web/search.html.j2").render(
            bundle_url=f"{site.base_url}/{BUNDLE}")
    except jinja2.TemplateError as exc:
        raise RenderError("web/search.html.j2", str(exc)) from None
    return SiteObject(SEARCH_PAGE, html.encode("utf-8"), HTML, SHORT_CACHE)
