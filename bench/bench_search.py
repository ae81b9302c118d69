"""Benchmark of the archive's search: Pagefind's time and memory against the archive's size.

N copies of the sample issue (bench_site.py's ``prepare``: the eight sample reviews, re-dated
to the N weeks before 2026-W48), for N = 1, 52 and 520 (a year and ten years of weekly issues:
520 weeks span eleven ISO years). Each size's records (one per review, Chinese cut by jieba:
pipeline/core/site/search.py) are indexed in four ways, each in a process of its own (forked),
so ``peak MB`` (the largest resident size of a Pagefind process it ran, ``getrusage`` of its
children) is that row's alone:

* ``one bundle``: the baseline, the archive as one index: one Pagefind run over every record
  (``run_pagefind``), its Chinese cut first.
* ``yearly, first``: ``publish_search`` into an archive with no search yet: one Pagefind run a
  year, each year's bundle written, then the search pages and the manifest (what the first
  publish after a change of Pagefind, of its options or of the dictionary, or a fresh
  archive, does).
* ``yearly, weekly``: ``publish_search`` again after the newest issue changed (a new week's
  issue or a correction): only the newest year is cut and indexed again.
* ``yearly, unchanged``: ``publish_search`` again with nothing changed: every year's records
  are rendered and digested, none is cut or indexed.

``index s`` is the wall time (the median of the runs; one run at 520), ``runs`` how many
Pagefind processes it started, ``written MB`` what it wrote into the archive, ``words KB``
the largest year's ``words.json`` (a reader's browser fetches each year's at its first query),
``jieba`` whether the dictionary was loaded (rjieba imported), ``× s`` and ``× MB`` its time
and peak over the baseline's at that size. A last line says what loading the dictionary costs
a fresh process.

Run: ``make bench`` or ``.venv/bin/python bench/bench_search.py [--sizes 1,52,520]
[--runs N]``. Nothing here asserts on time: it is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from bench_build import table
from bench_site import Setup, prepare

import pipeline.stages.search_index as search_index
from pipeline.archive.local import LocalArchive
from pipeline.core.site import search
from pipeline.model import Issue, SiteObject, Text

#: What the forked measurement reads (set before each fork, so nothing is pickled).
_JOB: dict[str, object] = {}


def _measure() -> tuple[float, float, int, float, bool]:
    """Run ``_JOB``'s ``fn`` once: (seconds, peak MB of its Pagefind processes, Pagefind
    runs, MB written, whether jieba's dictionary was loaded)."""
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
    return seconds, peak, len(runs), sum(written) / 1e6, "rjieba" in sys.modules


Row = tuple[float, float, int, float, bool]


def measured(fn: Callable[[list[int], list[int]], None], runs: int) -> Row:
    """The median time of ``runs`` forked runs of ``fn``, the largest peak, the runs, MB
    and dictionary of the last."""
    _JOB["fn"] = fn
    results = []
    context = multiprocessing.get_context("fork")
    for _ in range(runs):
        with context.Pool(1) as pool:
            results.append(pool.apply(_measure))
    return (statistics.median(r[0] for r in results), max(r[1] for r in results),
            results[-1][2], results[-1][3], results[-1][4])


def median_of(rows: list[Row]) -> Row:
    return (statistics.median(r[0] for r in rows), max(r[1] for r in rows), rows[-1][2],
            rows[-1][3], rows[-1][4])


def corrected(issue: Issue, n: int) -> Issue:
    """``issue`` with its first review's Chinese title corrected (``n`` tells corrections
    apart), as a new week's issue or an editor's correction changes a year's records."""
    first = issue.items[0]
    assert first.zh is not None
    text = Text(first.zh.title + f"（更正 {n}）", first.zh.body_html, first.zh.body_text,
                first.zh.source)
    return replace(issue, items=(first.with_text("zh", text), *issue.items[1:]))


def bench_size(root: Path, setup: Setup, size: int, runs: int) -> list[list[str]]:
    archive = LocalArchive(root / f"archive-{size}")
    issues: list[Issue] = [b.issue for b in setup.newest(size)]
    times = runs if size < 520 else 1

    def one_bundle(_runs: list[int], written: list[int]) -> None:
        records = {key: html for year in search.records(setup.site, issues).values()
                   for key, html in year.items()}
        pages, vocabulary = search.segmented(records)
        bundle = search_index.run_pagefind(pages)
        objects = search.bundle_objects({**bundle, search.WORDS: vocabulary}, search.BUNDLE)
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
    first: list[Row] = []
    for _ in range(times):  # each first publish starts from an archive with no search
        fresh()
        first.append(measured(yearly, 1))
    rows.append(("yearly, first", median_of(first)))
    newest = issues[0] if issues[0].id > issues[-1].id else issues[-1]
    weekly: list[Row] = []
    for n in range(times):  # the newest issue changes each time, as a new week's does
        issues[issues.index(newest)] = newest = corrected(newest, n)
        weekly.append(measured(yearly, 1))
    rows.append(("yearly, weekly", median_of(weekly)))
    rows.append(("yearly, unchanged", measured(yearly, times)))
    words_kb = max(len(data) for key in archive.keys(search.BUNDLE)
                   if key.endswith(search.WORDS) and (data := archive.read(key))) / 1e3
    return [[str(size), name, f"{s:.2f}", f"{peak:.0f}", str(n), f"{mb:.2f}",
             f"{words_kb:.0f}", "yes" if jieba else "no", f"{s / base[0]:.2f}x",
             f"{peak / base[1]:.2f}x"]
            for name, (s, peak, n, mb, jieba) in rows]


def dictionary_load_s() -> float:
    """What importing rjieba (its dictionary) costs a fresh process, the median of three."""
    probe = "import time; t = time.perf_counter(); import rjieba; print(time.perf_counter() - t)"
    return statistics.median(
        float(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             check=True).stdout) for _ in range(3))


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
    print(table(["issues", "indexing", "index s", "peak MB", "runs", "written MB",
                 "words KB", "jieba", "× s", "× MB"], rows))
    print(f"\nLoading jieba's dictionary (import rjieba) in a fresh process: "
          f"{dictionary_load_s():.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
