"""Search index: the archive's issue pages → Pagefind's bundle, written to the archive.

Called once at the end of ``publish``, after the issue pages and the index are written, and
built from what the archive holds (its issue.json files name the pages; the pages are read
back from the archive), so a fresh runner with an empty ``build/`` indexes every issue, on
the local folder and on S3 alike. Pagefind's output is deterministic (file names are hashes
of their content), so a second publish of the same archive writes nothing.

Why the extended binary, run once over a temporary folder, and not Pagefind's Python API:

* The extended build segments Chinese (a run of Han characters becomes words), so 张量 is
  found inside a sentence; the binary ships inside the ``pagefind_bin_extended`` wheel.
* The Python API answers one request per 0.1 s poll of its pipe (20 pages took 2.2 s, an
  archive of ten years' issue and PR pages would take minutes), and its ``get_files`` reads
  the whole index back as one line through a 2 MiB buffer: past that it hangs for ever
  (measured with 100 issue pages). One ``pagefind_extended --site`` process has neither
  problem, ends with an exit status, and a timeout bounds it.

Why one index with ``--force-language zh``: Pagefind keeps one index per ``<html lang>``
and the UI searches only the one matching the search page's language, so a Chinese and an
English page would never answer the same box. Every indexed page is bilingual (its
``<html lang>`` is ``zh-CN``); forcing ``zh`` keeps one index that also holds the pages a
later template marks ``en``. Chinese has no stemmer in Pagefind, so English words are matched
as written (and by prefix while typing), which suits PR titles and code identifiers.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from pipeline.archive import Archive
from pipeline.core import search
from pipeline.core.site import Site
from pipeline.errors import RenderError
from pipeline.model import Issue, SiteObject

#: Indexing the sample archive takes well under a second and 2,000 full issue pages 48 s
#: (make bench): this bounds a hung process, not a large archive.
PAGEFIND_TIMEOUT_S = 600
#: Only the reviews: the header, footer and language switch are the same on every page.
ROOT_SELECTOR = "main"


def pagefind_executable() -> Path:
    """The extended binary of the ``pagefind_bin_extended`` wheel (a dependency)."""
    try:
        from pagefind_bin_extended import get_executable  # type: ignore[import-untyped]

        return Path(get_executable())
    except (ImportError, FileNotFoundError) as exc:
        raise RenderError("search index", "Pagefind's extended binary is not installed "
                          f"({exc}); run 'make install'") from None


def run_pagefind(pages: dict[str, str], executable: Path | None = None) -> dict[str, bytes]:
    """Index ``pages`` (archive key → HTML) and return the bundle (path → bytes)."""
    binary = executable or pagefind_executable()
    with tempfile.TemporaryDirectory(prefix="newsletter-search-") as tmp:
        site, out = Path(tmp, "site"), Path(tmp, "bundle")
        for key, html in pages.items():
            path = site / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(html, encoding="utf-8")
        command = [str(binary), "--site", str(site), "--output-path", str(out),
                   "--force-language", "zh", "--keep-index-url", "--root-selector",
                   ROOT_SELECTOR, "--silent"]
        try:
            result = subprocess.run(command, capture_output=True, text=True, errors="replace",
                                    timeout=PAGEFIND_TIMEOUT_S, check=False,
                                    stdin=subprocess.DEVNULL)
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


def archive_pages(archive: Archive, issues: Sequence[Issue]) -> dict[str, str]:
    """The pages to index as the archive holds them, prepared for Pagefind."""
    pages: dict[str, str] = {}
    for key in search.pages_to_index(issues):
        data = archive.read(key)
        if data is not None:
            pages[key] = search.anchor_reviews(data.decode("utf-8", errors="replace"))
    return pages


def search_objects(archive: Archive, site: Site, issues: Sequence[Issue]) -> list[SiteObject]:
    """The search page and the bundle indexing every issue ``issues`` names."""
    pages = archive_pages(archive, issues)
    bundle = run_pagefind(pages)
    indexed = search.page_count(bundle)
    if indexed != len(pages):  # Pagefind skips, silently, a page without the root element
        raise RenderError("search index", f"Pagefind indexed {indexed} of {len(pages)} "
                          f"pages: each needs a <{ROOT_SELECTOR}> element")
    return [*search.bundle_objects(bundle), search.search_page(site)]


def publish_search(archive: Archive, site: Site, issues: Sequence[Issue],
                   note: Callable[[SiteObject, bool], None]) -> int:
    """Write the search objects (the bundle before the page that loads it), then the list
    of the bundle's files, then delete the old index files neither this index nor the one
    before names (:func:`search.stale_files`); how many were deleted. ``note`` is told of
    each write and whether it changed anything (:meth:`PublishReport.note`).

    Nothing is deleted before the new entry file is in place, and what a reader of the
    previous index may still fetch stays: search answers throughout, and the archive's
    search files no longer grow by a whole index every week."""
    objects = search_objects(archive, site, issues)
    previous = archive.read(search.MANIFEST)
    for obj in objects:
        note(obj, archive.write(obj))
    listing = search.manifest(objects)
    note(listing, archive.write(listing))
    live = [obj.key for obj in objects]
    return archive.delete(search.stale_files(archive.keys(search.BUNDLE), live, previous))
