"""Assemble the issue: ranked items, their PR facts and translations → issue, JSON, artifacts.

Pure: what comes from outside (the editor's file, GitHub, the translator) was asked for first
by :mod:`pipeline.stages.build`, so the same inputs give the same bytes:

    group (feeds → Grouped) → rank_week (+ the editor's file → Ranked)
        → [the stage asks GitHub and the translator → Gathered]
        → complete (facts, translations, links) → assemble (compose, render, issue.json)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from pipeline.config import DeliverySettings, FeedSettings, IssueSettings, SiteSettings
from pipeline.core.email.render import Budget, Footer, RenderedLayout, Renderer
from pipeline.core.issue import issue_json
from pipeline.core.issue.area_limits import bound_areas
from pipeline.core.issue.bilingual import MachineText, compose, fill_missing, sort_problems
from pipeline.core.issue.collect import FeedResult, PullGroup, group_week, merge, skipped_in_week
from pipeline.core.issue.editorial import Editorial
from pipeline.core.issue.interests import Variant, issue_areas, variant_for
from pipeline.core.issue.issue_json import IssueData, variant_data
from pipeline.core.issue.pulls import link_item, with_facts
from pipeline.core.issue.rank import hidden_prs, ordered, rank
from pipeline.core.issue.verdict import Vocabulary
from pipeline.errors import EmptyWeekError
from pipeline.model import LAYOUTS, Correction, Issue, Item, Problem, PullFacts, Skipped, Week
from pipeline.week import issue_number

__all__ = ["Assembled", "Choice", "Gathered", "Grouped", "Ranked", "Terms", "assemble",
           "complete", "distinct_variants", "group", "rank_week"]

#: One reader's choice: their layout and the areas they follow.
Choice = tuple[str, Sequence[str]]


@dataclass(frozen=True)
class Grouped:
    """The week's reviews, one group per PR, before the editor's file and the ranking."""

    groups: tuple[PullGroup, ...]
    #: Feed entries of the week that were not used, and why.
    skipped: tuple[Skipped, ...]
    #: The feeds' warnings, as problems.
    warnings: tuple[Problem, ...]


@dataclass(frozen=True)
class Ranked:
    """The week's items in reading order, and what was found on the way."""

    items: tuple[Item, ...]
    #: Ranking problems and the feeds' warnings.
    problems: tuple[Problem, ...]
    skipped: tuple[Skipped, ...]
    #: The week's PRs the editor's file hid.
    hidden: tuple[int, ...] = ()


@dataclass(frozen=True)
class Gathered:
    """What the outside world said about the ranked items, asked for before assembly."""

    #: GitHub's facts per PR number (with the changed files when the review names paths).
    facts: Mapping[int, PullFacts] = field(default_factory=dict)
    translations: Mapping[tuple[int, str], MachineText] = field(default_factory=dict)
    #: What the asking found (GitHub could not be asked).
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True)
class Terms:
    """The four sections of the settings an issue is assembled by, and no other: the core
    never sees a secret, a path or a backend."""

    feed: FeedSettings
    issue: IssueSettings
    site: SiteSettings
    delivery: DeliverySettings


class Assembled(NamedTuple):
    """The issue, its ``issue.json`` data, artifacts and renderings (callers unpack it)."""

    issue: Issue
    data: IssueData
    artifacts: dict[str, bytes]
    rendered: dict[str, RenderedLayout]


def group(feed: FeedSettings, week: Week, results: Sequence[FeedResult]) -> Grouped:
    """The week's reviews of ``[feed] repo``, one group per PR, the entries skipped and the
    feeds' warnings. :class:`EmptyWeekError` when the week has no review."""
    reviews, rejected = merge(results)
    groups = group_week(reviews, week, feed.repo)
    skipped = skipped_in_week(rejected, week)
    if not groups:
        raise EmptyWeekError(week.id, len(skipped))
    warnings = [Problem("feed-warning", "warning", message=w)
                for result in results for w in result.warnings]
    return Grouped(tuple(groups), tuple(skipped), tuple(warnings))


def rank_week(week: Week, grouped: Grouped, editorial: Editorial,
              vocabulary: Vocabulary | None = None) -> Ranked:
    """The week's items ranked, the editor's file applied; EmptyWeekError if none is left."""
    items, problems = rank(grouped.groups, editorial, vocabulary)
    if not items:
        raise EmptyWeekError(week.id, len(grouped.skipped))
    return Ranked(tuple(items), (*problems, *grouped.warnings), grouped.skipped,
                  hidden_prs(grouped.groups, editorial))


def complete(ranked: Ranked, gathered: Gathered) -> Ranked:
    """The items with their PR facts, translations, file links and bounded areas."""
    items = [with_facts(item, gathered.facts.get(item.pr)) for item in ranked.items]
    items, translation_problems = fill_missing(items, gathered.translations)
    items, area_problems = bound_areas([link_item(item) for item in items])
    items = ordered(items)  # GitHub's sizes may reorder a tier
    return Ranked(tuple(items), (*ranked.problems, *gathered.problems, *translation_problems,
                                 *area_problems), ranked.skipped, ranked.hidden)


def distinct_variants(choices: Iterable[Choice], items: Sequence[Item]) -> tuple[Variant, ...]:
    """The interest variants ``choices`` come to for ``items``: each once, sorted, without
    the plain layouts (rendered anyway); an unknown layout is left out, not fatal."""
    areas = issue_areas(items)
    found = {variant_for(layout, chosen, areas) for layout, chosen in choices
             if layout in LAYOUTS}
    return tuple(sorted(v for v in found if v.areas))


def assemble(terms: Terms, week: Week, ranked: Ranked,
             renderer: Renderer | None = None, choices: Iterable[Choice] = (),
             correction: Correction | None = None) -> Assembled:
    """The issue, its JSON and its artifacts: every layout and each distinct variant of
    ``choices`` rendered within the size budget."""
    issue = compose(ranked.items, week, terms.feed.repo, terms.site.base_url,
                    ranked.skipped, ranked.problems,
                    issue_number(week.id, terms.issue.first_week), ranked.hidden)
    issue = replace(issue, correction=correction)
    rendered, render_problems = (renderer or Renderer()).render(
        issue, terms.site.base_url, Budget.configured(terms.issue, terms.delivery),
        Footer.configured(terms.delivery, terms.site), distinct_variants(choices, issue.items))
    issue = replace(issue, problems=sort_problems([*issue.problems, *render_problems]))
    artifacts = {f"email-{key}.{ext}": text.encode("utf-8") for key, result in rendered.items()
                 for ext, text in (("html", result.html), ("txt", result.text))}
    kept = [variant_data(r.variant, r.brief, r.folded) for r in rendered.values() if r.areas]
    return Assembled(issue, issue_json.to_dict(issue, artifacts, kept), artifacts, rendered)

