"""The pure assembly: PR facts and machine translations arrive as data, and the same data
gives the same bytes. No server, no translator, no mock: nothing here calls out."""

from __future__ import annotations

import pytest
from support.feeds import Entry, atom
from support.project import SAMPLE_WEEK

from pipeline.core.assemble import Gathered, assemble, complete, group, rank_week
from pipeline.core.issue.bilingual import MachineText
from pipeline.core.issue.collect import parse_feed
from pipeline.core.issue.editorial import Editorial
from pipeline.errors import EmptyWeekError
from pipeline.model import PullFacts
from pipeline.stages.build import terms
from pipeline.week import parse_week

WEEK = parse_week(SAMPLE_WEEK, "Asia/Shanghai")
FACTS = PullFacts(title="[ROCm] Fix a race", author="dev", state="merged", merged_at=None,
                  additions=3, deletions=1, changed_files=1, labels=("bug",), tags=("ROCm",),
                  files=("vllm/core/sched.py",))


def ranked(settings):
    feed = atom([Entry(pr=1, title="修复竞态", body="值得精读，`vllm/core/sched.py` 的竞态。")])
    result = parse_feed(feed, "zh", settings.feed.repo)
    return rank_week(WEEK, group(settings.feed, WEEK, [result]), Editorial())


def test_facts_and_a_translation_are_applied_as_given(settings):
    english = MachineText("Fix a race", "<p>Worth a read: <code>vllm/core/sched.py</code>.</p>",
                          "machine:openai")
    done = complete(ranked(settings), Gathered({1: FACTS}, {(1, "en"): english}))
    [item] = done.items
    assert item.github == FACTS and item.areas == ("bug", "rocm")
    assert item.en is not None and item.en.source == "machine:openai"
    assert item.en.title == "Fix a race" and "/files#diff-" in item.en.body_html
    assert not [p for p in done.problems if p.code == "translation-rejected"]


@pytest.mark.parametrize(("machine", "said"), [
    (MachineText(failed="HTTP 500"), "no machine translation into English: HTTP 500"),
    (MachineText(None, None, "machine:openai", rejected="code not kept"),
     "was rejected: code not kept"),
    (MachineText("", "<p>x</p>", "machine:openai"), "was rejected: empty"),
])
def test_a_failed_or_rejected_translation_leaves_the_language_missing(settings, machine,
                                                                      said):
    done = complete(ranked(settings), Gathered(translations={(1, "en"): machine}))
    assert done.items[0].en is None
    [problem] = [p for p in done.problems if p.code == "translation-rejected"]
    assert said in problem.message and problem.pr == 1


def test_the_same_data_assembles_to_the_same_bytes(settings):
    gathered = Gathered({1: FACTS}, {(1, "en"): MachineText("Fix", "<p>Fix.</p>", "machine:aws")})
    first = assemble(terms(settings), WEEK, complete(ranked(settings), gathered))
    again = assemble(terms(settings), WEEK, complete(ranked(settings), gathered))
    assert first.artifacts == again.artifacts and first.data == again.data
    assert first.issue.items[0].en is not None


def test_a_week_without_reviews_is_empty(settings):
    result = parse_feed(atom([Entry(pr=1, published="2026-10-01T10:00:00+08:00")]), "zh",
                        settings.feed.repo)
    with pytest.raises(EmptyWeekError):
        group(settings.feed, WEEK, [result])
