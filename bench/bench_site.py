"""Benchmark of the web archive: site generation against the archive's size, and publishing.

What it measures, on N copies of the sample issue (``examples/sample-feed.atom`` built for
2026-W48 into a temp folder with ``pipeline.stages.build.build``; nothing is written in the
work tree),
for N = 1, 52 and 520 (a year and ten years of weekly issues). Copy i is the same issue.json
with the id, week boundaries, archive URL and subjects of the week i weeks before 2026-W48
(``pipeline.week``: 2026-W48, 2026-W47, …, 2016-W50 for 520) and its own PR numbers (the
sample's + 100,000·i), so every page is full-size and the archive has 8·N PR pages and the
sample's areas, each listing N weeks of reviews:

* **site** (pure, no I/O): ``Site.issue_objects`` once per issue (the five objects under
  ``issues/<week>/``) and ``Site.index_objects`` over all N (index, Atom feed with every
  issue's full content, sitemap, robots.txt, 404, the share card, and one page per PR and per
  area with each area's Atom feed). ``vs linear`` = t(N) / (N/N0 · t(N0)), N0 the smallest
  size: 1.00 is exactly linear, below 1 is the fixed cost being spread. Baseline in the same
  run: ``json.dumps`` of the N dicts (``ensure_ascii=False``), so ``site/json`` says how many
  plain serialisations of the same data the whole site costs.
* **publish**, into a ``LocalArchive`` in a temp folder and an ``S3Archive`` against a moto
  server on 127.0.0.1 (in a child process, as a real S3 is another machine; each archive
  object gets a fresh ETag cache, as a fresh CI runner has, and they share one boto3 client):
  - *first publish*: ``publish`` of each issue in turn, oldest first, into an empty archive,
    as the weekly runs would have done. Every publish re-reads every issue.json and rewrites
    the index and the feed, so N publishes cost O(N²) in all; ``last publish`` is the weekly
    publish at that archive size, ``objects``/``MB written`` add up ``PublishReport``.
  - *re-publish*: ``publish`` of the latest issue again, nothing changed. ``written`` comes
    from ``PublishReport``; ``store`` is checked on the other side: for ``local`` the files
    whose inode or mtime changed in the folder, for ``s3`` the archive's own ``uploads`` /
    ``uploaded_bytes`` counters. All four must read 0 (the worst run is shown).

Each site figure and each re-publish time is the median of several runs after one warm-up
run. A first publish is timed as the median of 3 sequences up to 52 issues locally (over S3
only for 1 issue) and as a single sequence otherwise (the ``runs`` column says which); the
re-publishes go to the last sequence's archive. S3 stops at 52 issues by default: 520 issues
published in turn over moto would take many minutes (about 135,000 GETs at ~10 ms each). The
local 520 sequence alone takes about a minute, which is most of the script's ~2 minutes.
The issue copies are ``gc.freeze()``-d after they are made: a real publish does not hold
520 issues in memory, so collections during the runs should not walk them.

``publish`` here stops before its last step, the search index (bench_search.py).

Run: ``make bench`` or ``.venv/bin/python bench/bench_site.py [--parts site,local,s3]
[--runs N] [--sizes 1,52,520] [--s3-sizes 1,52]``.
Nothing here asserts on time: it is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import date, timedelta
from importlib import metadata
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

import pendulum
from bench_build import median_ms, table

from pipeline.archive import Archive
from pipeline.archive.local import LocalArchive
from pipeline.config import Settings, load
from pipeline.core.issue import issue_json
from pipeline.core.site.site import Site
from pipeline.model import Issue
from pipeline.stages.build import build
from pipeline.stages.built import BuiltIssue, load_built
from pipeline.stages.publish import publish
from pipeline.week import parse_week, week_of_monday

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_FEED = ROOT / "examples" / "sample-feed.atom"
WEEK_ID = "2026-W48"
HOST = "127.0.0.1"
REGION = "us-east-1"
BUCKET = "bench-site"
PARTS = ("site", "local", "s3")
SIZES = (1, 52, 520)
S3_SIZES = (1, 52)
RUNS = 5
#: Local first publishes of at most this many issues are the median of FIRST_RUNS sequences
#: (over S3, only a single issue's).
CHEAP_SIZE = 52
FIRST_RUNS = 3
#: Variables that would send boto3 somewhere other than the loopback moto server.
AWS_NOISE = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
             "AWS_REGION", "AWS_ENDPOINT_URL_S3", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
             "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
             "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS")


@dataclass(frozen=True)
class Setup:
    """The built sample issue, the site renderer, and its copies, newest first."""

    settings: Settings
    sample: BuiltIssue
    site: Site
    issues: tuple[BuiltIssue, ...]

    def newest(self, size: int) -> list[BuiltIssue]:
        """The ``size`` newest issues, oldest first (the order weekly runs published them)."""
        return list(reversed(self.issues[:size]))


@dataclass(frozen=True)
class SiteResult:
    """Median milliseconds of site generation for one size, and what it produced."""

    size: int
    pages_ms: float
    index_ms: float
    json_ms: float
    pages_bytes: int
    index_bytes: int


@dataclass(frozen=True)
class Publish:
    """One ``publish`` call: its wall time, what it wrote, and what the store saw change."""

    seconds: float
    objects: int
    bytes: int
    store_objects: int = 0
    store_bytes: int = 0


@dataclass(frozen=True)
class PublishResult:
    archive: str
    size: int
    first_runs: int
    first_seconds: float
    last_ms: float
    first_objects: int
    first_bytes: int
    again_runs: int
    again_ms: float
    again: Publish  # the worst re-publish: the most objects / bytes written


# -- the issues ------------------------------------------------------------------------------


def prepare(folder: Path, count: int) -> Setup:
    """Build the sample issue into ``folder`` with the built-in defaults; make ``count`` copies."""
    config = folder / "newsletter.toml"
    config.write_text(f'[feed]\nurls = ["{SAMPLE_FEED}"]\n', encoding="utf-8")
    settings = load(config, {})
    sample = load_built(build(settings, week_id=WEEK_ID, out=folder / "issue").out_dir)
    copies = (issue_copy(sample.issue, week_id, back)
              for back, week_id in enumerate(week_ids(count, settings.issue.timezone)))
    issues = tuple(BuiltIssue(sample.folder, copy, sample.content_hash, sample.artifacts,
                              issue_json.dumps(issue_json.with_hash(copy, sample.content_hash)))
                   for copy in copies)
    return Setup(settings, sample, Site(settings.site), issues)


def week_ids(count: int, tz: str) -> Iterator[str]:
    """ISO week ids from ``WEEK_ID`` back ``count - 1`` weeks, newest first."""
    first = pendulum.instance(parse_week(WEEK_ID, tz).start).in_timezone(tz)
    monday = date(first.year, first.month, first.day)
    for back in range(count):
        yield week_of_monday(monday - timedelta(weeks=back), tz).id


def issue_copy(issue: Issue, week_id: str, back: int = 0) -> Issue:
    """The sample issue as the issue of ``week_id`` (id, week, archive URL, subjects), ``back``
    weeks before the sample. Each week reviews its own PRs, as real weeks do (the sample's
    numbers + 100,000 * ``back``), so the archive holds one small PR page per review."""
    week = parse_week(week_id, issue.week.tz)
    items = tuple(replace(item, pr=item.pr + 100_000 * back,
                          url=item.url.replace(f"/pull/{item.pr}",
                                               f"/pull/{item.pr + 100_000 * back}"))
                  for item in issue.items)
    return replace(
        issue, id=week.id, week=week, items=items,
        archive_url=issue.archive_url.replace(WEEK_ID, week.id),
        subject={layout: text.replace(WEEK_ID, week.id) for layout, text in issue.subject.items()},
        preheader={layout: text.replace(WEEK_ID, week.id)
                   for layout, text in issue.preheader.items()})


# -- 1. site generation ----------------------------------------------------------------------


def issue_pages(site: Site, issues: Sequence[BuiltIssue]) -> int:
    """Every issue's own objects, one ``issue_objects`` call each; their total bytes."""
    return sum(len(obj.data) for built in issues
               for obj in site.issue_objects(built))


def index_pages(site: Site, issues: Sequence[Issue]) -> int:
    return sum(len(obj.data) for obj in site.index_objects(issues))


def bench_site_size(setup: Setup, size: int, runs: int) -> SiteResult:
    issues = setup.issues[:size]
    records = [built.issue for built in issues]
    data = [built.data for built in issues]
    return SiteResult(
        size,
        pages_ms=median_ms(lambda: issue_pages(setup.site, issues), runs),
        index_ms=median_ms(lambda: index_pages(setup.site, records), runs),
        json_ms=median_ms(lambda: json.dumps(data, ensure_ascii=False), runs),
        pages_bytes=issue_pages(setup.site, issues),
        index_bytes=index_pages(setup.site, records),
    )


def bench_site(setup: Setup, sizes: Sequence[int], runs: int) -> list[SiteResult]:
    return [bench_site_size(setup, size, runs) for size in sizes]


# -- 2. publishing ---------------------------------------------------------------------------


class Target(Protocol):
    """Where archives come from: a fresh empty one per sequence, a fresh object per publish."""

    name: str
    #: Up to this many issues, a first publish is the median of FIRST_RUNS sequences.
    cheap_size: int

    def empty(self, tag: str) -> str: ...

    def open(self, location: str) -> Archive: ...

    def before(self, location: str) -> object: ...

    def stored(self, location: str, archive: Archive, before: object) -> tuple[int, int]: ...


class LocalTarget:
    """``LocalArchive`` folders under one temp folder."""

    name = "local"
    cheap_size = CHEAP_SIZE

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def empty(self, tag: str) -> str:
        path = self.folder / tag
        path.mkdir(parents=True)
        return str(path)

    def open(self, location: str) -> Archive:
        return LocalArchive(Path(location))

    def before(self, location: str) -> dict[str, tuple[int, int, int]]:
        return files(Path(location))

    def stored(self, location: str, archive: Archive, before: object) -> tuple[int, int]:
        """Files created or replaced since ``before``, and their bytes."""
        after = files(Path(location))
        previous = before if isinstance(before, dict) else {}
        changed = [key for key, stat in after.items() if previous.get(key) != stat]
        return len(changed), sum(after[key][2] for key in changed)


def files(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file under ``root`` → (inode, mtime ns, size): a replaced file gets a new inode."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file():
            stat = path.stat()
            found[path.relative_to(root).as_posix()] = (stat.st_ino, stat.st_mtime_ns,
                                                        stat.st_size)
    return found


class S3Target:
    """``S3Archive`` objects under one prefix per sequence, sharing one boto3 client."""

    name = "s3"
    cheap_size = 1

    def __init__(self, client: Any) -> None:
        self.client = client

    def empty(self, tag: str) -> str:
        return f"{tag}/"

    def open(self, location: str) -> Archive:
        from pipeline.archive.s3 import S3Archive

        return S3Archive(BUCKET, location, client=self.client)

    def before(self, location: str) -> object:
        return None

    def stored(self, location: str, archive: Archive, before: object) -> tuple[int, int]:
        return archive.uploads, archive.uploaded_bytes  # type: ignore[attr-defined]


def publish_once(target: Target, location: str, built: BuiltIssue, site: Site,
                 check: bool = False) -> Publish:
    """One timed ``publish`` through a fresh archive object; the store is checked if asked."""
    archive = target.open(location)
    before = target.before(location) if check else None
    start = time.perf_counter()
    report = publish(built, archive, site)
    seconds = time.perf_counter() - start
    store = target.stored(location, archive, before) if check else (0, 0)
    return Publish(seconds, len(report.written), report.bytes_written, *store)


def first_publish(target: Target, location: str, issues: Sequence[BuiltIssue],
                  site: Site) -> list[Publish]:
    """Each issue published in turn into the empty archive at ``location``."""
    gc.collect()
    return [publish_once(target, location, built, site) for built in issues]


def bench_publish_size(target: Target, setup: Setup, size: int, runs: int) -> PublishResult:
    issues = setup.newest(size)
    first_runs = FIRST_RUNS if size <= target.cheap_size else 1
    locations = [target.empty(f"n{size}-r{run}") for run in range(first_runs)]
    sequences = [first_publish(target, location, issues, setup.site) for location in locations]
    again = []
    for _ in range(runs + 1):  # the first is the warm-up, checked all the same
        gc.collect()
        again.append(publish_once(target, locations[-1], issues[-1], setup.site, check=True))
    worst = max(again, key=lambda p: (p.objects, p.bytes, p.store_objects, p.store_bytes))
    return PublishResult(
        target.name, size, first_runs,
        first_seconds=statistics.median(sum(p.seconds for p in seq) for seq in sequences),
        last_ms=statistics.median(seq[-1].seconds for seq in sequences) * 1000,
        first_objects=sum(p.objects for p in sequences[0]),
        first_bytes=sum(p.bytes for p in sequences[0]),
        again_runs=runs,
        again_ms=statistics.median(p.seconds for p in again[1:]) * 1000,
        again=worst,
    )


def bench_publish(target: Target, setup: Setup, sizes: Sequence[int],
                  runs: int) -> list[PublishResult]:
    return [bench_publish_size(target, setup, size, runs) for size in sizes]


# -- moto on loopback, in a child process ------------------------------------------------------


def serve_moto(pipe: Connection) -> None:
    """The child process: a moto server on a free loopback port, until told to stop."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)
    server.start()
    try:
        pipe.send(server.get_host_and_port()[1])
        pipe.recv()
    finally:
        server.stop()


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto server on 127.0.0.1 in a child process; yields its URL."""
    context = multiprocessing.get_context("spawn")
    pipe, child = context.Pipe()
    process = context.Process(target=serve_moto, args=(child,), daemon=True)
    process.start()
    try:
        if not pipe.poll(60):
            raise SystemExit("the moto server did not start")
        yield f"http://{HOST}:{pipe.recv()}"
    finally:
        pipe.send("stop")
        process.join(10)


def point_boto3_at(url: str) -> None:
    """This process's boto3 → ``url``, with dummy credentials and no local AWS config."""
    for name in AWS_NOISE:
        os.environ.pop(name, None)
    os.environ.update({
        "AWS_ENDPOINT_URL": url, "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    })


def bench_s3(setup: Setup, sizes: Sequence[int], runs: int) -> list[PublishResult]:
    from pipeline.aws import s3_client

    with moto_server() as url:
        point_boto3_at(url)
        client = s3_client(REGION)
        try:
            client.create_bucket(Bucket=BUCKET)
            return bench_publish(S3Target(client), setup, sizes, runs)
        finally:
            client.close()


# -- reporting -------------------------------------------------------------------------------


def mb(size: float) -> str:
    return f"{size / 1e6:,.2f}"


def site_rows(results: Sequence[SiteResult]) -> list[list[str]]:
    base = results[0]

    def linear(ms: float, first_ms: float, size: int) -> str:
        return f"{ms / (first_ms * size / base.size):.2f}"

    rows = []
    for r in results:
        total = r.pages_ms + r.index_ms
        rows.append([f"{r.size:,}", f"{r.pages_ms:,.1f}", f"{r.pages_ms / r.size:.2f}",
                     linear(r.pages_ms, base.pages_ms, r.size), f"{r.index_ms:,.1f}",
                     f"{r.index_ms / r.size:.2f}", linear(r.index_ms, base.index_ms, r.size),
                     f"{total:,.1f}", linear(total, base.pages_ms + base.index_ms, r.size),
                     f"{r.json_ms:,.2f}", f"{total / r.json_ms:,.0f}x", mb(r.pages_bytes),
                     mb(r.index_bytes)])
    return rows


def first_rows(results: Sequence[PublishResult]) -> list[list[str]]:
    return [[r.archive, f"{r.size:,}", str(r.first_runs), f"{r.first_seconds:,.3f}",
             f"{r.first_seconds / r.size * 1000:,.1f}", f"{r.last_ms:,.1f}",
             f"{r.first_objects:,}", mb(r.first_bytes)] for r in results]


def again_rows(results: Sequence[PublishResult]) -> list[list[str]]:
    return [[r.archive, f"{r.size:,}", str(r.again_runs), f"{r.again_ms:,.1f}",
             f"{r.again_ms / r.last_ms:.2f}x", str(r.again.objects), f"{r.again.bytes:,}",
             str(r.again.store_objects), f"{r.again.store_bytes:,}"] for r in results]


def header(ns: argparse.Namespace, setup: Setup) -> str:
    names = ["jinja2", *(("boto3", "moto") if "s3" in ns.parts else ())]
    versions = ", ".join(f"{name} {metadata.version(name)}" for name in names)
    lines = [
        "vLLM PR Weekly: site benchmark",
        f"machine: Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.machine()}; {versions}",
        f"issues: the sample issue ({len(setup.sample.data['items'])} items, "
        f"{len(json.dumps(setup.sample.data, ensure_ascii=False).encode()) / 1000:,.1f} KB "
        f"of issue.json) as {len(setup.issues)} weeks, {setup.issues[0].id} back to "
        f"{setup.issues[-1].id}; KB/MB = 1,000/1,000,000 bytes",
    ]
    if "site" in ns.parts:
        lines.append(f"site: median of {ns.runs} runs per figure, after 1 warm-up run; "
                     f"sizes {', '.join(map(str, ns.sizes))}; baseline json.dumps of the dicts")
    if {"local", "s3"} & set(ns.parts):
        lines.append(f"publish: first = N publishes in turn, median of {FIRST_RUNS} sequences "
                     f"up to {CHEAP_SIZE} issues (s3: 1 issue), 1 sequence above; re-publish "
                     f"= median of {ns.runs} runs after 1 warm-up, on the last sequence's "
                     "archive")
    if "s3" in ns.parts:
        lines.append(f"s3: moto on {HOST} in a child process, sizes "
                     f"{', '.join(map(str, ns.s3_sizes))} (520 in turn over moto takes minutes)")
    return "\n".join(lines)


def report(ns: argparse.Namespace, setup: Setup, site: Sequence[SiteResult],
           published: Sequence[PublishResult]) -> str:
    sections = [header(ns, setup)]
    if site:
        sections.append(table(
            ["issues", "pages ms", "ms/issue", "vs linear", "index ms", "ms/issue",
             "vs linear", "site ms", "vs linear", "json ms", "site/json", "pages MB",
             "index MB"], site_rows(site)))
        sections.append("pages = Site.issue_objects once per issue (3 pages, public email, "
                        "issue.json); index = Site.index_objects over all (index, feed, "
                        "sitemap, robots, 404, card,\nPR pages, area pages and feeds); "
                        "vs linear = t(N) / (N/N0 · t(N0)), N0 = "
                        f"{site[0].size}: 1.00 is linear.")
    if published:
        sections.append(table(["archive", "issues", "runs", "first publish s",
                               "ms/publish", "last publish ms", "objects written",
                               "MB written"], first_rows(published)))
        sections.append("first publish = each issue published in turn, oldest first, into an "
                        "empty archive (each publish re-reads every issue.json and rewrites\n"
                        "index, feed, sitemap and the pages of the PRs and areas it touches); "
                        "ms/publish = the mean; last publish = the "
                        "Nth alone, i.e. a weekly publish at that archive size.")
        sections.append(table(["archive", "issues", "runs", "re-publish ms", "vs last",
                               "objects written", "bytes written", "store objects",
                               "store bytes"], again_rows(published)))
        sections.append("re-publish = the latest issue again, nothing changed; vs last = its "
                        "time / the last publish of the first sequence;\nwritten = "
                        "PublishReport; store = local: files whose inode or mtime changed, "
                        "s3: S3Archive.uploads / uploaded_bytes (worst run).")
    return "\n\n".join(sections)


def numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated, of {','.join(PARTS)} (all)")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"runs per figure ({RUNS})")
    parser.add_argument("--sizes", type=numbers, default=SIZES,
                        help="issues for site and local publish (1,52,520)")
    parser.add_argument("--s3-sizes", type=numbers, default=S3_SIZES,
                        help="issues for S3 publish (1,52)")
    ns = parser.parse_args(argv)
    ns.parts = tuple(p.strip() for p in ns.parts.split(",") if p.strip())
    if not ns.parts or set(ns.parts) - set(PARTS):
        parser.error(f"--parts takes some of {','.join(PARTS)}")
    if ns.runs < 1 or not ns.sizes or not ns.s3_sizes or min((*ns.sizes, *ns.s3_sizes)) < 1:
        parser.error("--runs and every size must be at least 1")
    ns.sizes, ns.s3_sizes = tuple(sorted(set(ns.sizes))), tuple(sorted(set(ns.s3_sizes)))
    return ns


def issues_needed(ns: argparse.Namespace) -> int:
    local = ns.sizes if {"site", "local"} & set(ns.parts) else ()
    return max((*local, *(ns.s3_sizes if "s3" in ns.parts else ())))


def run_parts(ns: argparse.Namespace, setup: Setup,
              folder: Path) -> tuple[list[SiteResult], list[PublishResult]]:
    site = bench_site(setup, ns.sizes, ns.runs) if "site" in ns.parts else []
    published: list[PublishResult] = []
    if "local" in ns.parts:
        published += bench_publish(LocalTarget(folder / "archives"), setup, ns.sizes, ns.runs)
    if "s3" in ns.parts:
        published += bench_s3(setup, ns.s3_sizes, ns.runs)
    return site, published


def without_search() -> None:
    """Publish without its last step, the search index: bench_search.py measures that, and
    here each of 520 publishes in turn would index every issue before it again."""
    import pipeline.stages.publish as publish_stage

    publish_stage.publish_search = lambda *args: None  # type: ignore[assignment]


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(sys.argv[1:] if argv is None else argv)
    without_search()
    with tempfile.TemporaryDirectory(prefix="bench-site-") as tmp:
        setup = prepare(Path(tmp), issues_needed(ns))
        gc.freeze()  # the issue copies stay out of the collections a publish would see
        site, published = run_parts(ns, setup, Path(tmp))
        print(report(ns, setup, site, published))
    return 0


if __name__ == "__main__":
    sys.exit(main())
