"""A web archive of two issues (an older week from a small feed, and the sample week), built and
published by the real command line for the site tests: the index lists two issues and the search
has two years' bundles. :func:`served_archive` serves the folder first and builds with its URL
as ``base_url``, so every absolute link points at it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.stages.preview import serve
from support.commands import ok, run_newsletter
from support.feeds import Entry, atom
from support.project import SAMPLE_WEEK, make_project

if TYPE_CHECKING:
    from pipeline.config import Settings
    from pipeline.stages.built import BuiltIssue

#: A folder (one that may not exist yet) served on 127.0.0.1 as ``newsletter preview`` serves
#: it; stop it with :func:`serving`.
start_server = serve

OLDER_WEEK = "2025-W52"
#: Two PRs, each reviewed in Chinese then in English, in last year's 2025-W52, so its search
#: bundle is not the newest year's.
OLDER_ENTRIES = [
    Entry(pr=50101, lang="zh-CN", published="2025-12-23T10:00:00+08:00",
          title="调度器预分配 KV 块，减少抢占抖动",
          body="值得精读：`Scheduler.schedule` 先预留块再决定抢占，抖动下降 12.5%。"),
    Entry(pr=50101, lang="en", published="2025-12-23T20:00:00+08:00",
          title="Scheduler reserves KV blocks up front, cutting preemption churn",
          body="Must read: `Scheduler.schedule` reserves blocks before deciding to preempt; "
               "churn drops by 12.5%."),
    Entry(pr=50233, lang="zh-CN", published="2025-12-25T09:00:00+08:00",
          title="采样器参数校验提前到请求入口",
          body="值得一读：把 `SamplingParams` 的校验移到 API 入口，错误更早返回。"),
    Entry(pr=50233, lang="en", published="2025-12-25T18:00:00+08:00",
          title="Sampler parameter checks move to the request entry point",
          body="Skim: validation of `SamplingParams` moves to the API entry, so errors "
               "return earlier."),
]

#: Last week's one PR, reviewed in Chinese and in English: the older issue of the in-process
#: site tests.
W47_ENTRIES = [
    Entry(pr=50001, title="上周的 PR", body="值得一读，上周的评审。",
          published="2026-11-17T10:00:00+08:00", lang="zh-CN"),
    Entry(pr=50001, title="Last week's PR", body="Skim, last week's review.",
          published="2026-11-17T12:00:00+08:00", lang="en", id="en-50001"),
]


def build_week(settings: Settings, folder: Path, week: str, entries: list[Entry]) -> BuiltIssue:
    """``week`` built in process into ``folder`` from a feed of ``entries`` alone."""
    from pipeline.stages.build import build
    from pipeline.stages.built import load_built

    feed = folder / f"{week}.atom"
    feed.write_bytes(atom(entries))
    return load_built(build(settings, week_id=week, feeds=[str(feed)],
                            out=folder / f"b-{week}").out_dir)


@dataclass(frozen=True)
class PublishedSite:
    """The archive folder, the URL it is published under, and the weeks it holds."""

    root: Path
    base_url: str
    weeks: tuple[str, ...]  # newest first, as the index lists them

    def url(self, key: str) -> str:
        return f"{self.base_url}/{key}"

    def issue(self, week: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(
            (self.root / "issues" / week / "issue.json").read_text("utf-8"))
        return data


def publish_archive(project: Path, base_url: str) -> PublishedSite:
    """Build and publish 2025-W52 and then 2026-W48 into ``project/site``."""
    project.mkdir(parents=True, exist_ok=True)
    older_feed = project / "older.atom"
    older_feed.write_bytes(atom(OLDER_ENTRIES))
    make_project(project, extra='[archive]\ntarget = "local"\ndir = "site"\n'
                                f'[site]\nbase_url = "{base_url}"\napp_url = "{base_url}/api"\n')
    for args in (["build", "--week", OLDER_WEEK, "--feed", str(older_feed)],
                 ["publish", "--week", OLDER_WEEK], ["build", "--week", SAMPLE_WEEK],
                 ["publish", "--week", SAMPLE_WEEK]):
        ok(run_newsletter(args, project))
    return PublishedSite(project / "site", base_url.rstrip("/"), (SAMPLE_WEEK, OLDER_WEEK))


@contextmanager
def served_archive(project: Path) -> Iterator[PublishedSite]:
    """:func:`publish_archive` into ``project``, served on 127.0.0.1 while the block runs."""
    with serving(start_server(project / "site")) as url:
        yield publish_archive(project, url)


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[str]:
    """The URL of ``server`` (serving on 127.0.0.1) while the block runs; then it stops."""
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()

