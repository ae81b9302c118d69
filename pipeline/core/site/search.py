"""Search: the records the search index reads, by year, and the index files as site objects.

Pure: issues and HTML in, :class:`SiteObject` values out. ``pipeline/stages/search_index.py``
runs Pagefind over the records and hands the files it wrote back here; ``publish`` writes the
objects like every other page.

The index covers what the archive holds, never a local build folder: the issues are the
``issue.json`` files ``publish`` read back from the archive. A result is one review in the
issue that carried it, so the index holds one *record* per review (``web/search_record.html.j2``:
its PR number and area tags, its titles, note and body in both languages), not the issue
pages: Pagefind scores a page as a whole and cuts it into sub-results only at headings with an
``id``, so on a page of eight reviews a query's words could come from two different reviews,
a review's tag line counted toward the review before it, every match was "1 result" and the
UI showed three sub-results at most. A record is handed to Pagefind only (its words cut by
:mod:`pipeline.core.site.words`), never published; its meta values name the issue and PR
the search page links to (``issues/<week>/<variant>#pr-<number>``, the review's article on
the issue page in the search page's language). Neither ``zh.html``/``en.html`` nor a PR's
page (``pr/<number>/``) is indexed: they hold the same reviews again.

The search pages and the bundles live under ``search/``: one page per language variant
(``index.html`` bilingual, ``zh.html``, ``en.html``, as an issue has them), one Pagefind bundle
per ISO year of the issues at ``search/pagefind/<year>/``, with the Chinese words of its
records beside it (``words.json``: the search page cuts a query against them). Why a bundle a
year and not one for the archive: Pagefind holds the whole index in memory while it writes it
(629 MB for 520 issue pages, ten years), and cannot add to an index; a bundle a year bounds
both the memory and the work of a weekly publish by one year's issues, since only a year
whose records changed is indexed again (:class:`Manifest` keeps a digest of each year's
records). The search page loads the newest year's bundle and merges the others into it
(Pagefind's ``mergeIndex``), so one box still searches every issue: results of all years are
ranked together by score.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import jinja2

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
#: Bundle files the search page never loads (Pagefind's three UIs: the page shows results
#: itself; the highlighter): not published, so the archive carries only what it serves.
UNUSED = frozenset({
    "pagefind-ui.js", "pagefind-ui.css",
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


def records(site: Site, issues: Sequence[Issue]) -> dict[str, dict[str, str]]:
    """Each review's record (``reviews/<week>/<pr>.html`` → HTML, its Chinese not yet cut)
    by the ISO year of its issue's week (``2026-W48`` → ``2026``), oldest year, issue and
    record first. An id that is no ISO week (a hand-edited issue.json) makes no record and no
    bundle: its year would become a path."""
    template = _template(site, "web/search_record.html.j2")
    years: dict[str, dict[str, str]] = {}
    for issue_id, issue in sorted({issue.id: issue for issue in issues}.items()):
        if match := _WEEK_ID.fullmatch(issue_id):
            view = IssueView(issue, site.root)
            year = years.setdefault(match[1], {})
            for item in issue.items:
                year[f"{RECORDS}{issue_id}/{item.pr}.html"] = _render(
                    template, "web/search_record.html.j2", issue=view, item=item)
    return dict(sorted(years.items()))


def segmented(pages: Mapping[str, str]) -> tuple[dict[str, str], bytes]:
    """``pages`` (one year's records) as Pagefind reads them, each run of Chinese cut into
    words, and the year's :data:`WORDS` file: every word they hold."""
    cut = {key: words.segment_html(html) for key, html in pages.items()}
    return cut, words.vocabulary(words.indexed_words(cut.values()))


def bundle_prefix(year: str) -> str:
    """Where the bundle of ``year``'s issues is published."""
    return f"{BUNDLE}{year}/"


def pages_digest(pages: Mapping[str, str], tool: str) -> str:
    """A digest of what an index of ``pages`` holds: every key and record, and ``tool``
    (Pagefind's and the segmenter's versions, Pagefind's options), so a year is indexed
    again when a review, a template, Pagefind or the dictionary changed, and never
    otherwise. The records are digested before their Chinese is cut: the cut follows from
    them and the segmenter, and a publish that indexes nothing never loads the dictionary."""
    digest = hashlib.sha256(tool.encode("utf-8"))
    for key in sorted(pages):
        for part in (key, pages[key]):
            data = part.encode("utf-8")
            digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def bundle_objects(files: Mapping[str, bytes], prefix: str) -> list[SiteObject]:
    """Pagefind's output (path inside the bundle → bytes, the :data:`WORDS` file among them)
    as objects under ``prefix`` (a :func:`bundle_prefix`), in a stable order that writes
    ``pagefind-entry.json`` last: it names the index the other files hold, so a publish that
    fails half-way leaves the old entry pointing at files that exist."""
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


def search_pages(site: Site, years: Iterable[str]) -> list[SiteObject]:
    """``search/index.html``, ``zh.html`` and ``en.html`` (:data:`SEARCH_PAGES`): the search
    in the languages of the issue page variant of the same name, over the newest year's
    bundle with every other year's merged in, newest first, and a ``<noscript>`` note that
    sends a reader without JavaScript to the archive's index."""
    newest_first = sorted(years, reverse=True)
    if not newest_first:
        raise RenderError("web/search.html.j2", "no year's bundle to search")
    # From the site's root, not [site] base_url: search loads on whatever port serves it.
    urls = [f"{site.root}/{bundle_prefix(year)}" for year in newest_first]
    template = _template(site, "web/search.html.j2")
    return [SiteObject(key, _render(template, "web/search.html.j2", bundle_urls=urls,
                                    years=newest_first,
                                    words_file=WORDS, han=words.HAN_JS, variant=variant,
                                    langs=VARIANTS[variant], variants=VARIANTS
                                    ).encode("utf-8"), HTML, SHORT_CACHE)
            for variant, key in SEARCH_PAGES.items()]


def _template(site: Site, name: str) -> jinja2.Template:
    try:
        return site.env.get_template(name)
    except jinja2.TemplateError as exc:
        raise RenderError(name, str(exc)) from None


def _render(template: jinja2.Template, name: str, **context: object) -> str:
    try:
        return template.render(**context)
    except jinja2.TemplateError as exc:
        raise RenderError(name, str(exc)) from None
