"""Benchmark of the archive's search: Pagefind's indexing time against the archive's size.

N copies of the sample issue (bench_site.py's ``prepare``: the eight sample reviews, re-dated
to the N weeks before 2026-W48), for N = 1, 52 and 520 (a year and ten years of weekly issues).
Each size's bilingual issue pages are written into a ``LocalArchive`` in a temp folder, then
``pipeline.stages.search_index.search_objects`` reads them back, runs Pagefind's extended
binary once and returns the bundle, as the end of every ``publish`` does. ``index s`` is its
wall time (the median of the runs; one run at 520), ``ms/page`` that over the pages indexed,
``bundle`` the objects and megabytes ``publish`` would write into an empty archive, ``peak MB``
the largest resident size of a Pagefind process so far (``getrusage`` of the children).

Every ``publish`` indexes the whole archive again (Pagefind cannot add to an index), so this
is a weekly cost that grows with the archive; bench_site.py leaves it out of its publish
sequences (520 publishes in turn would each index everything before them).

Run: ``make bench`` or ``.venv/bin/python bench/bench_search.py [--sizes 1,52,520]
[--runs N]``. Nothing here asserts on time: it is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench_site import prepare

from pipeline.archive.local import LocalArchive
from pipeline.stages.search_index import search_objects


def bench_size(root: Path, setup, size: int, runs: int) -> list[str]:
    archive = LocalArchive(root / f"archive-{size}")
    built = setup.newest(size)
    for issue in built:
        for obj in setup.site.issue_objects(issue):
            if obj.key.endswith("/index.html"):
                archive.write(obj)
    issues = [b.issue for b in built]
    times, objects = [], []
    for _ in range(runs if size < 520 else 1):
        start = time.perf_counter()
        objects = search_objects(archive, setup.site, issues)
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return [str(size), str(len(issues)), f"{seconds:.2f}", f"{seconds * 1000 / size:.0f}",
            str(len(objects)), f"{sum(len(o.data) for o in objects) / 1e6:.2f}", f"{peak:.0f}"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,52,520")
    parser.add_argument("--runs", type=int, default=3)
    ns = parser.parse_args(sys.argv[1:] if argv is None else argv)
    sizes = [int(n) for n in ns.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        setup = prepare(Path(tmp), max(sizes))
        rows = [bench_size(Path(tmp), setup, size, ns.runs) for size in sizes]
    head = ["issues", "pages", "index s", "ms/page", "bundle objects", "bundle MB", "peak MB"]
    print("## Search index (Pagefind extended, one run over the archive's issue pages)\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
