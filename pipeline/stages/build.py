"""``newsletter build``: collect → rank → bilingual → render → one folder of artifacts.

The outside is asked first (feeds, the editor's file, GitHub, the translator); the pure
:mod:`pipeline.core.assemble` makes the issue; then the folder is written in one move, so a
bad feed or an empty week leaves the previous build untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.config import Settings
from pipeline.core.assemble import (
    Choice,
    Gathered,
    Ranked,
    Terms,
    assemble,
    complete,
    group,
)
from pipeline.core.assemble import rank_week as core_rank_week
from pipeline.core.email.render import RenderedLayout
from pipeline.core.issue import issue_json
from pipeline.core.issue.collect import FeedResult, parse_feed
from pipeline.core.issue.issue_json import IssueData
from pipeline.core.issue.pulls import names_paths
from pipeline.core.issue.rank import TIER_NAMES
from pipeline.core.issue.verdict import Vocabulary, shipped_vocabulary, vocabulary_with
from pipeline.errors import BlockedError, ConfigError, UsageError
from pipeline.log import timed
from pipeline.model import Issue, Item, PullFacts, Week
from pipeline.output import write_folder
from pipeline.sources import PullSource
from pipeline.sources.editorial import load_editorial
from pipeline.sources.feeds import fetch
from pipeline.stages import freeze
from pipeline.stages.approve import read_approval
from pipeline.stages.built import APPROVAL_FILE, ISSUE_FILE, choose_week, issue_folder
from pipeline.stages.machine_translation import Translate, translate_items
from pipeline.week import local_date, now, numbering_start

if TYPE_CHECKING:
    from subscribers.model import SentIssue

_log = logging.getLogger("newsletter.build")


@dataclass(frozen=True)
class Built:
    """What a build produced: the issue, its JSON and artifacts, and where they went."""

    issue: Issue
    data: IssueData
    files: dict[str, bytes]
    rendered: dict[str, RenderedLayout]
    out_dir: Path

    @property
    def variant_count(self) -> int:
        """How many interest variants were rendered beside the plain layouts."""
        return sum(1 for rendered in self.rendered.values() if rendered.areas)


def terms(settings: Settings, first_week: str | None = None) -> Terms:
    """The sections of ``settings`` the assembly reads; ``first_week`` numbers the issue."""
    issue = settings.issue if first_week is None else replace(settings.issue,
                                                               first_week=first_week)
    return Terms(settings.feed, issue, settings.site, settings.delivery)


def read_feeds(settings: Settings, feeds: Sequence[str]) -> list[FeedResult]:
    """Fetch and parse every feed (``feeds``, else ``[feed] urls``); the first unusable one
    stops the build."""
    locations = tuple(feeds) or settings.feed.urls
    if not locations:
        raise UsageError("no feed to read: pass --feed PATH_OR_URL or set [feed] urls")
    cache = settings.resolve(settings.paths.data_dir) / "feeds"
    results = []
    for location in locations:
        fetched = fetch(settings.feed_location(location), cache)
        results.append(parse_feed(fetched.body, location, settings.feed.repo,
                                  fetched.content_type))
    return results


def rank_week(settings: Settings, week: Week, results: Sequence[FeedResult],
              translate: Translate | None = None, github: PullSource | None = None) -> Ranked:
    """The week's items in reading order, the editor's file, GitHub and the translator's
    answers applied; and the problems and skipped entries found on the way."""
    grouped = group(settings.feed, week, results)
    editorial = load_editorial(settings.resolve(settings.paths.editorial_dir), week.id,
                               TIER_NAMES)
    ranked = core_rank_week(week, grouped, editorial, load_vocabulary(settings))
    return complete(ranked, gather(ranked.items, settings.feed.repo, translate, github))


def load_vocabulary(settings: Settings) -> Vocabulary:
    """The verdict vocabulary: the shipped one, with ``[issue] verdicts`` added when set."""
    if not settings.issue.verdicts:
        return shipped_vocabulary()
    path = settings.resolve(settings.issue.verdicts)
    try:
        extra = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"[issue] verdicts: cannot read {path}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    try:
        return vocabulary_with(extra)
    except ValueError as exc:
        raise ConfigError(f"[issue] verdicts ({path}): {exc}") from None


def gather(items: Sequence[Item], repo: str, translate: Translate | None,
           github: PullSource | None) -> Gathered:
    """Ask GitHub for each PR's facts and the translator for each missing language."""
    if github is None:
        return Gathered({}, translate_items(items, translate), ())
    found = {item.pr: pull_facts(item, github, repo) for item in items}
    facts = {pr: pull for pr, pull in found.items() if pull is not None}
    return Gathered(facts, translate_items(items, translate), tuple(github.problems()))


def pull_facts(item: Item, github: PullSource, repo: str) -> PullFacts | None:
    """The PR's facts from GitHub, with the changed files when the review names paths."""
    facts = github.pull(repo, item.pr)
    if facts is None:
        return None
    bodies = [text.body_html for text in (item.zh, item.en) if text is not None]
    if any(names_paths(body) for body in bodies):
        files = github.files(repo, item.pr)
        if files:
            facts = replace(facts, files=files)
    return facts


def build(settings: Settings, *, week_id: str | None = None, feeds: Sequence[str] = (),
          out: Path | None = None, force: bool = False,
          translate: Translate | None = None, github: PullSource | None = None,
          choices: Iterable[Choice] = (), sent: SentIssue | None = None,
          correct: str | None = None, at: datetime | None = None,
          archive_weeks: Sequence[str] | None = None) -> Built:
    """Build one issue and write it; return what was written.

    An approved issue is replaced only with ``force`` or ``correct``, which drop the approval; a
    week that went out as ``sent`` only by a correction.
    """
    week = choose_week(settings, week_id)
    today = local_date(at or now(), week.tz)
    correction = freeze.correction_for(week.id, sent, correct, today)
    with timed(_log, "read feeds"):
        results = read_feeds(settings, feeds)
    with timed(_log, "rank"):
        ranked = rank_week(settings, week, results, translate, github)
    first = (settings.issue.first_week if archive_weeks is None
             else numbering_start(settings.issue.first_week, archive_weeks, week.id))
    with timed(_log, "render"):
        assembled = assemble(terms(settings, first), week, ranked, choices=choices,
                             correction=correction)
    issue, data, artifacts = assembled.issue, assembled.data, assembled.artifacts
    freeze.check(week.id, data["content_hash"], correction, sent, feeds)
    files = {ISSUE_FILE: issue_json.dumps(data), **artifacts}
    out_dir = out.resolve() if out else issue_folder(settings, week.id)
    approval = read_approval(out_dir)
    drop: tuple[str, ...] = ()
    if approval and approval.content_hash != data["content_hash"]:
        if not force and correct is None:  # a correction is explicit: it is proofed anew
            raise BlockedError(
                f"{week.id} was approved as {approval.content_hash[:12]} and this build differs "
                f"({data['content_hash'][:12]}); keep the approved issue, or rebuild with "
                "--force, which drops the approval")
        drop = (APPROVAL_FILE,)
    with timed(_log, "write"):
        write_folder(out_dir, files, drop)
    return Built(issue, data, files, assembled.rendered, out_dir)
