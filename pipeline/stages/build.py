"""``newsletter build``: collect → rank → bilingual → render → one folder of artifacts.

Everything is worked out before anything is written (feeds fetched and parsed, every layout
rendered within budget, the hash computed), then the folder is written in one move. A bad
feed or an empty week therefore leaves the previous build untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from pipeline.config import Settings
from pipeline.core import issue_json
from pipeline.core.bilingual import Translate, compose, fill_missing, sort_problems
from pipeline.core.collect import FeedResult, group_week, merge, parse_feed, skipped_in_week
from pipeline.core.editorial import load_editorial
from pipeline.core.issue_json import IssueData
from pipeline.core.rank import TIER_NAMES, rank
from pipeline.core.render import Footer, RenderedLayout, Renderer
from pipeline.errors import BlockedError, EmptyWeekError, UsageError
from pipeline.log import timed
from pipeline.model import LANGS, LAYOUTS, Issue, Item, Problem, Skipped, Week
from pipeline.output import write_folder
from pipeline.sources.feeds import fetch
from pipeline.sources.github import GithubClient, area_names, link_files, names_paths
from pipeline.stages.approve import read_approval
from pipeline.stages.built import APPROVAL_FILE, ISSUE_FILE, issue_folder
from pipeline.week import last_complete_week, parse_week

_log = logging.getLogger("newsletter.build")


@dataclass(frozen=True)
class Built:
    """What a build produced: the issue, its JSON and artifacts, and where they went."""

    issue: Issue
    data: IssueData
    files: dict[str, bytes]
    rendered: dict[str, RenderedLayout]
    out_dir: Path


def choose_week(settings: Settings, week_id: str | None, at: datetime | None = None) -> Week:
    """``--week`` when given, else the last complete week in the issue's timezone."""
    tz = settings.issue.timezone
    return parse_week(week_id, tz) if week_id else last_complete_week(tz, at)


def issue_dir(settings: Settings, week: Week) -> Path:
    return issue_folder(settings, week.id)


def read_feeds(settings: Settings, locations: Sequence[str]) -> list[FeedResult]:
    """Fetch and parse every feed; the first unusable one stops the build."""
    cache = settings.resolve(settings.paths.data_dir) / "feeds"
    results = []
    for location in locations:
        fetched = fetch(settings.feed_location(location), cache)
        results.append(parse_feed(fetched.body, location, settings.feed.repo,
                                  fetched.content_type))
    return results


def rank_week(settings: Settings, week: Week, results: Sequence[FeedResult],
              translate: Translate | None = None, github: GithubClient | None = None
              ) -> tuple[list[Item], list[Problem], list[Skipped]]:
    """The week's items in reading order, in both languages where they can be, with the
    editor's file applied; and the problems and skipped entries found on the way."""
    reviews, rejected = merge(results)
    groups = group_week(reviews, week, settings.feed.repo)
    skipped = skipped_in_week(rejected, week)
    if not groups:
        raise EmptyWeekError(week.id, len(skipped))
    editorial = load_editorial(settings.resolve(settings.paths.editorial_dir), week.id,
                               TIER_NAMES)
    items, problems = rank(groups, settings.issue.timezone, editorial)
    if not items:
        raise EmptyWeekError(week.id, len(skipped))
    github_problems: list[Problem] = []
    if github is not None:
        items = [add_facts(item, github, settings.feed.repo) for item in items]
        github_problems = github.problems()
    items, translation_problems = fill_missing(items, translate)
    items = [link_item(item) for item in items]
    return items, problems + github_problems + translation_problems, skipped


def add_facts(item: Item, github: GithubClient, repo: str) -> Item:
    """The item with the PR's facts from GitHub (and the changed files when the review names
    paths); areas from the title tags and labels when the feed gave none."""
    facts = github.pull(repo, item.pr)
    if facts is None:
        return item
    bodies = [text.body_html for text in (item.zh, item.en) if text is not None]
    if any(names_paths(body) for body in bodies):
        files = github.files(repo, item.pr)
        if files:
            facts = replace(facts, files=files)
    return replace(item, github=facts, areas=item.areas or area_names(facts))


def link_item(item: Item) -> Item:
    """Backticked paths naming the PR's changed files linked to them in the diff view."""
    if item.github is None or not item.github.files:
        return item
    files = item.github.files
    for lang in LANGS:
        text = item.text(lang)
        if text is not None:
            item = item.with_text(lang, replace(text, body_html=link_files(
                text.body_html, files, item.url)))
    return item


def assemble(settings: Settings, week: Week, results: Sequence[FeedResult],
             renderer: Renderer | None = None, translate: Translate | None = None,
             github: GithubClient | None = None
             ) -> tuple[Issue, IssueData, dict[str, bytes], dict[str, RenderedLayout]]:
    """The pure part of a build: parsed feeds → issue, JSON and artifacts."""
    items, problems, skipped = rank_week(settings, week, results, translate, github)
    problems += [Problem("feed-warning", "warning", message=w)
                 for result in results for w in result.warnings]
    issue = compose(items, week, settings.feed.repo, settings.site.base_url, skipped,
                    problems)
    rendered, render_problems = (renderer or Renderer()).render(
        issue, settings.site.base_url, settings.issue.size_budget_kb,
        Footer.from_settings(settings))
    issue = replace(issue, problems=sort_problems([*issue.problems, *render_problems]))
    artifacts: dict[str, bytes] = {}
    for layout in LAYOUTS:
        artifacts[f"email-{layout}.html"] = rendered[layout].html.encode("utf-8")
        artifacts[f"email-{layout}.txt"] = rendered[layout].text.encode("utf-8")
    data = issue_json.to_dict(issue, artifacts)
    return issue, data, artifacts, rendered


def build(settings: Settings, *, week_id: str | None = None, feeds: Sequence[str] = (),
          out: Path | None = None, force: bool = False,
          translate: Translate | None = None, github: GithubClient | None = None) -> Built:
    """Build one issue and write it; return what was written.

    An approved issue is never replaced by different content behind the editor's back:
    that takes ``force``, which also drops the approval.
    """
    week = choose_week(settings, week_id)
    locations = tuple(feeds) or settings.feed.urls
    if not locations:
        raise UsageError("no feed to read: pass --feed PATH_OR_URL or set [feed] urls")
    with timed(_log, "read feeds"):
        results = read_feeds(settings, locations)
    with timed(_log, "rank and render"):
        issue, data, artifacts, rendered = assemble(settings, week, results,
                                                  translate=translate, github=github)
    files = {ISSUE_FILE: issue_json.dumps(data), **artifacts}
    out_dir = out.resolve() if out else issue_dir(settings, week)
    approval = read_approval(out_dir)
    drop: tuple[str, ...] = ()
    if approval and approval.content_hash != data["content_hash"]:
        if not force:
            raise BlockedError(
                f"{week.id} was approved as {approval.content_hash[:12]} and this build differs "
                f"({data['content_hash'][:12]}); keep the approved issue, or rebuild with "
                "--force, which drops the approval")
        drop = (APPROVAL_FILE,)
    with timed(_log, "write"):
        write_folder(out_dir, files, drop)
    return Built(issue, data, files, rendered, out_dir)
