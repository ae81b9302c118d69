"""Search: the records the search index reads, by year, and the index files as site objects.

Pure; ``stages/search_index.py`` runs Pagefind between the two. The index covers what the
archive holds, never a local build folder. One record a review, not the issue pages:
Pagefind scores a page as a whole, so a query's words could match across reviews. One bundle
per ISO year: Pagefind holds an index in memory and cannot add to one, so a year bounds
both, and only a year whose records changed is indexed again (:class:`Manifest`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from pipeline.core.site import words
from pipeline.core.site.site import HTML, SHORT_CACHE, VARIANTS, Site
from pipeline.core.site.site_pages import IssueView
from pipeline.errors import RenderError
from pipeline.model import Issue, SiteObject

#: The search page of each issue page variant: the same file names, the same languages.
SEARCH_PAGES = {variant: f"search/{variant}" for variant in VARIANTS}
#: Where Pagefind's bundles are published, one a year (:func:`bundle_prefix`); the search
#: page loads ``pagefind.js`` from the newest.
BUNDLE = "search/pagefind/"
#: Where the records sit in the folder Pagefind reads (never published).
RECORDS = "reviews/"
#: Beside each year's bundle: the Chinese words of its records (:func:`words.vocabulary`).
WORDS = "words.json"
#: Files named by a hash of their content never change once written. A reader mid-session
#: on last week's entry file still finds its chunks (:func:`stale_files`).
IMMUTABLE_CACHE = "public, max-age=31536000, immutable"
#: What the last publish indexed (:class:`Manifest`): Pagefind's own files name their
#: chunks only inside gzip streams.
MANIFEST = "search/indexes.json"
#: An archive from before per-year bundles lists its index's files here, one a line.
LEGACY_MANIFEST = "search/index-files.txt"
#: Bundle files the search page never loads (Pagefind's UIs, the highlighter): not published.
UNUSED = frozenset({"pagefind-ui.js", "pagefind-ui.css", "pagefind-modular-ui.js",
                    "pagefind-modular-ui.css", "pagefind-component-ui.js",
                    "pagefind-component-ui.css", "pagefind-highlight.js"})
#: By file name ending. ``.pagefind`` and ``.pf_*`` files are gzip streams pagefind.js
#: unpacks itself: served as bytes, so no CDN compresses them twice or runs them as wasm.
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


def records(site: Site, issues: Sequence[Issue]) -> dict[str, dict[str, str]]:
    """Each review's record by the ISO year of its issue, oldest first. An id that is no ISO
    week (a hand edit) makes none: its year would become a path."""
    years: dict[str, dict[str, str]] = {}
    for issue_id, issue in sorted({issue.id: issue for issue in issues}.items()):
        if match := _WEEK_ID.fullmatch(issue_id):
            view = IssueView(issue, site.root)
            year = years.setdefault(match[1], {})
            for item in issue.items:
                year[f"{RECORDS}{issue_id}/{item.pr}.html"] = site.render(
                    "web/search_record.html.j2", issue=view, item=item)
    return dict(sorted(years.items()))


def segmented(pages: Mapping[str, str]) -> tuple[dict[str, str], bytes]:
    """One year's records with their Chinese cut into words, and the year's :data:`WORDS`."""
    cut = {key: words.segment_html(html) for key, html in pages.items()}
    return cut, words.vocabulary(words.indexed_words(cut.values()))


def bundle_prefix(year: str) -> str:
    return f"{BUNDLE}{year}/"


def pages_digest(pages: Mapping[str, str], tool: str) -> str:
    """A digest of every record and of ``tool`` (Pagefind's and the segmenter's versions and
    options): a year is indexed again exactly when it changes."""
    digest = hashlib.sha256(tool.encode("utf-8"))
    for key in sorted(pages):
        for part in (key, pages[key]):
            data = part.encode("utf-8")
            digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def bundle_objects(files: Mapping[str, bytes], prefix: str) -> list[SiteObject]:
    """Pagefind's output as objects under ``prefix``, ``pagefind-entry.json`` last: it names
    the other files, so a publish that fails half-way leaves the old entry pointing at files
    that exist."""
    return [SiteObject(prefix + path, files[path],
                       CONTENT_TYPES.get(PurePosixPath(path).suffix, OCTETS),
                       IMMUTABLE_CACHE if _HASHED.match(path) else SHORT_CACHE)
            for path in sorted(files, key=lambda p: (p == ENTRY, p))
            if path not in UNUSED and not path.startswith("playground/")]


@dataclass(frozen=True)
class YearIndex:
    """One year's bundle as the manifest records it. The entry file keeps its name, so only
    its digest tells whether the live bundle is still the one recorded."""

    digest: str
    files: tuple[str, ...]
    entry: str = ""


@dataclass(frozen=True)
class Manifest:
    """What the last publish indexed (:data:`MANIFEST`); ``legacy``: the files of an
    archive's one bundle from before per-year bundles."""

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
        """The manifest in ``data``; None when it is not one: then every year is indexed
        again and nothing is deleted."""
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
    """The bundle files that neither the index just written (``live``) nor the one before it
    names: a reader holds at most the previous entry file. Without a previous manifest,
    nothing: deleting then could take a chunk from under a reader."""
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


def search_pages(site: Site, years: Iterable[str]) -> list[SiteObject]:
    """The search pages (:data:`SEARCH_PAGES`), one per language variant, over every
    year's bundle, newest first."""
    newest_first = sorted(years, reverse=True)
    if not newest_first:
        raise RenderError("web/search.html.j2", "no year's bundle to search")
    # From the site's root, not [site] base_url: search loads on whatever port serves it.
    urls = [f"{site.root}/{bundle_prefix(year)}" for year in newest_first]
    return [SiteObject(key, site.render("web/search.html.j2", bundle_urls=urls,
                                        years=newest_first, words_file=WORDS,
                                        han=words.HAN_JS, variant=variant,
                                        langs=VARIANTS[variant], variants=VARIANTS
                                        ).encode("utf-8"), HTML, SHORT_CACHE)
            for variant, key in SEARCH_PAGES.items()]
