"""Benchmark of the archive's search: Pagefind's time and memory against the archive's size.

N copies of the sample issue (bench_site.py's ``prepare``: the eight sample reviews, re-dated
to the N weeks before 2026-W48), for N = 1, 52 and 520 (a year and ten years of weekly issues:
520 weeks span eleven ISO years). Each size's bilingual issue pages are written into a
``LocalArchive`` in a temp folder, then three ways of indexing them are measured, each in a
process of its own (forked), so ``peak MB`` (the largest resident size of a Pagefind process it
ran, ``getrusage`` of its children) is that row's alone:

* ``one bundle``: the baseline, the archive's search as it was before bundles a year: one
  Pagefind run over every issue page (``run_pagefind``).
* ``yearly, first``: ``publish_search`` into an archive with no search yet: one Pagefind run a
  year, each year's bundle written, then the search page and the manifest (what the first
  publish after the change, or a fresh archive, does).
* ``yearly, weekly``: ``publish_search`` again after the newest issue page changed (a new
  week's issue or a correction): only the newest year is indexed again.

``index s`` is the wall time (the median of the runs; one run at 520), ``runs`` how many
Pagefind processes it started, ``written MB`` what it wrote into the archive, ``× s`` and
``× MB`` its time and peak over the baseline's at that size.

Run: ``make bench`` or ``.venv/bin/python bench/bench_search.py [--sizes 1,52,520]
[--runs N]``. Nothing here asserts on time: it is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench_build import table
from bench_site import Setup, prepare

import pipeline.stages.search_index as search_index
from pipeline.archive.local import LocalArchive
from pipeline.core.site import search
from pipeline.model import Issue, SiteObject

#: What the forked measurement reads (set before each fork, so nothing is pickled).
_JOB: dict[str, object] = {}


def _measure() -> tuple[float, float, int, float]:
    """Run ``_JOB``'s ``fn`` once: (seconds, peak MB of its Pagefind processes, Pagefind
    runs, MB written)."""
    fn: Callable[[list[int], list[int]], None] = _JOB["fn"]  # type: ignore[assignment]
    runs: list[int] = []
    written: list[int] = []
    real = search_index.run_pagefind

    def counted(pages: dict[str, str], executable: Path | None = None) -> dict[str, bytes]:
        runs.append(len(pages))
        return real(pages, executable)

    search_index.run_pagefind = counted  # type: ignore[assignment]
    start = time.perf_counter()
    fn(runs, written)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return seconds, peak, len(runs), sum(written) / 1e6


def measured(fn: Callable[[list[int], list[int]], None], runs: int
             ) -> tuple[float, float, int, float]:
    """The median time of ``runs`` forked runs of ``fn``, the largest peak, the runs and MB
    of the last."""
    _JOB["fn"] = fn
    results = []
    context = multiprocessing.get_context("fork")
    for _ in range(runs):
        with context.Pool(1) as pool:
            results.append(pool.apply(_measure))
    return (statistics.median(r[0] for r in results), max(r[1] for r in results),
            results[-1][2], results[-1][3])


def bench_size(root: Path, setup: Setup, size: int, runs: int) -> list[list[str]]:
    archive = LocalArchive(root / f"archive-{size}")
    built = setup.newest(size)
    for issue in built:
        for obj in setup.site.issue_objects(issue):
            if obj.key.endswith("/index.html"):
                archive.write(obj)
    issues: list[Issue] = [b.issue for b in built]
    keys = [key for year in search.pages_to_index(issues).values() for key in year]
    times = runs if size < 520 else 1

    def one_bundle(_runs: list[int], written: list[int]) -> None:
        bundle = search_index.run_pagefind(search_index.archive_pages(archive, keys))
        objects = search.bundle_objects(bundle, search.BUNDLE)  # what publish wrote of it
        written.append(sum(len(obj.data) for obj in objects))

    def yearly(_runs: list[int], written: list[int]) -> None:
        def note(obj: SiteObject, changed: bool) -> None:
            if changed:
                written.append(len(obj.data))
        search_index.publish_search(archive, setup.site, issues, note)

    def fresh() -> None:
        archive.delete(archive.keys("search/"))

    base = measured(one_bundle, times)
    rows = [("one bundle", base)]
    first: list[tuple[float, float, int, float]] = []
    for _ in range(times):  # each first publish starts from an archive with no search
        fresh()
        first.append(measured(yearly, 1))
    rows.append(("yearly, first", (statistics.median(r[0] for r in first),
                                   max(r[1] for r in first), first[-1][2], first[-1][3])))
    newest = root / f"archive-{size}" / keys[-1]
    page = newest.read_text(encoding="utf-8")
    weekly: list[tuple[float, float, int, float]] = []
    for n in range(times):  # the newest issue changes each time, as a new week's does
        newest.write_text(page.replace("</main>", f"<p>correction {n}</p></main>", 1),
                          encoding="utf-8")
        weekly.append(measured(yearly, 1))
    rows.append(("yearly, weekly", (statistics.median(r[0] for r in weekly),
                                    max(r[1] for r in weekly), weekly[-1][2], weekly[-1][3])))
    return [[str(size), name, f"{s:.2f}", f"{peak:.0f}", str(n), f"{mb:.2f}",
             f"{s / base[0]:.2f}x", f"{peak / base[1]:.2f}x"]
            for name, (s, peak, n, mb) in rows]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,52,520")
    parser.add_argument("--runs", type=int, default=3)
    ns = parser.parse_args(sys.argv[1:] if argv is None else argv)
    sizes = [int(n) for n in ns.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        setup = prepare(Path(tmp), max(sizes))
        rows = [row for size in sizes for row in bench_size(Path(tmp), setup, size, ns.runs)]
    print("## Search index (Pagefind extended): one bundle against a bundle a year\n")
    print(table(["issues", "indexing", "index s", "peak MB", "runs", "written MB", "× s",
                 "× MB"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
