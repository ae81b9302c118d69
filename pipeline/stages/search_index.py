"""Search index: the archive's reviews → Pagefind's bundles, one a year, in the archive.

Run at the end of ``publish`` from the issues the archive holds, so a fresh runner indexes
every issue. The extended binary, not Pagefind's Python API, which hangs past a 2 MiB
index. ``--force-language und``: every record is bilingual, and under ``und`` Pagefind
indexes the words jieba cut as they are.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

from pagefind_bin_extended import get_executable  # type: ignore[import-untyped]

from pipeline.archive import Archive
from pipeline.core.site import search, words
from pipeline.core.site.site import Site
from pipeline.errors import RenderError
from pipeline.model import Issue, SiteObject

#: Bounds a hung process, far above what a large archive takes.
PAGEFIND_TIMEOUT_S = 600
#: What a record's text is (web/search_record.html.j2): a page without it is skipped.
ROOT_SELECTOR = "main"
#: How every bundle is indexed (after ``--site`` and ``--output-path``).
OPTIONS = ("--force-language", "und", "--root-selector", ROOT_SELECTOR, "--silent")


def pagefind_executable() -> Path:
    """The extended binary of the ``pagefind_bin_extended`` wheel (a dependency)."""
    return Path(get_executable())


def run_pagefind(pages: dict[str, str], executable: Path | None = None) -> dict[str, bytes]:
    """Index ``pages`` (archive key → HTML) and return the bundle (path → bytes)."""
    binary = executable or pagefind_executable()
    with tempfile.TemporaryDirectory(prefix="newsletter-search-") as tmp:
        site, out = Path(tmp, "site"), Path(tmp, "bundle")
        for key, html in pages.items():
            path = site / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(html, encoding="utf-8")
        command = [str(binary), "--site", str(site), "--output-path", str(out), *OPTIONS]
        try:
            result = subprocess.run(command, capture_output=True, text=True, errors="replace",
                                    timeout=PAGEFIND_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise RenderError("search index",
                              f"Pagefind took longer than {PAGEFIND_TIMEOUT_S} s") from None
        except OSError as exc:
            raise RenderError("search index", f"cannot run Pagefind: {exc}") from None
        if result.returncode != 0 or not (out / "pagefind-entry.json").is_file():
            said = (result.stderr or result.stdout).strip().splitlines()
            raise RenderError("search index", f"Pagefind exited {result.returncode}"
                              + (f": {said[-1]}" if said else ""))
        return {path.relative_to(out).as_posix(): path.read_bytes()
                for path in sorted(out.rglob("*")) if path.is_file()}


def tool() -> str:
    """What indexes: part of each year's digest, so a new Pagefind, option or dictionary
    indexes every year again."""
    return " ".join(["pagefind_extended", metadata.version("pagefind_bin_extended"), *OPTIONS,
                     "·", words.segmenter_version()])


def bundle_objects(year: str, records: dict[str, str]) -> list[SiteObject]:
    """Pagefind's bundle of one year's ``records`` and its words, under the year's prefix."""
    pages, vocabulary = search.segmented(records)
    bundle = run_pagefind(pages)
    indexed = search.page_count(bundle)
    if indexed != len(pages):  # Pagefind skips, silently, a page without the root element
        raise RenderError("search index", f"Pagefind indexed {indexed} of {len(pages)} "
                          f"records of {year}: each needs a <{ROOT_SELECTOR}> element")
    return search.bundle_objects({**bundle, search.WORDS: vocabulary},
                                 search.bundle_prefix(year))


def publish_search(archive: Archive, site: Site, issues: Sequence[Issue],
                   note: Callable[[SiteObject, bool], None]) -> int:
    """Index each year that changed, write the search pages, then the manifest; last, delete
    the bundle files neither this index nor the one before names. How many were deleted.

    Nothing is deleted before the new index is in place, so search answers throughout.
    """
    previous, legacy = previous_manifest(archive)
    before = previous or search.Manifest({})
    present = set(archive.keys(search.BUNDLE))
    identity = tool()
    years: dict[str, search.YearIndex] = {}
    try:
        for year, records in search.records(site, issues).items():
            if not records:
                continue
            digest = search.pages_digest(records, identity)
            kept = before.years.get(year)
            live_entry = search.bundle_prefix(year) + search.ENTRY
            if (kept is not None and kept.digest == digest and set(kept.files) <= present
                    and kept.entry == search.entry_digest(archive.read(live_entry))):
                years[year] = kept
                continue
            objects = bundle_objects(year, records)
            for obj in objects:
                note(obj, archive.write(obj))
            entry = next(obj.data for obj in objects if obj.key.endswith(search.ENTRY))
            years[year] = search.YearIndex(digest, tuple(obj.key for obj in objects),
                                           search.entry_digest(entry))
    except BaseException:
        # Live now: the years rewritten so far, the rest as before. Best effort: the
        # failure being raised is the one to report.
        with contextlib.suppress(Exception):
            archive.write(search.Manifest({**before.years, **years}, before.legacy).to_object())
        raise
    manifest = search.Manifest(years)
    for obj in (*search.search_pages(site, years), manifest.to_object()):
        note(obj, archive.write(obj))
    stale = search.stale_files(present, manifest.files(), previous)
    return archive.delete([*stale, *([search.LEGACY_MANIFEST] if legacy else [])])


def previous_manifest(archive: Archive) -> tuple[search.Manifest | None, bool]:
    """What the last publish indexed (None: nothing is deleted), and whether the list from
    before per-year bundles is still there (deleted once the new manifest is written)."""
    data = archive.read(search.MANIFEST)
    legacy = archive.read(search.LEGACY_MANIFEST)
    if data is not None:
        return search.Manifest.parse(data), legacy is not None
    listing = search.Manifest.from_listing(legacy) if legacy is not None else None
    return listing, legacy is not None
