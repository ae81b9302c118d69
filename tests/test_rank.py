"""Ranking: verdicts found only where they belong, tiers, order, and the reason why."""

from __future__ import annotations

import pytest
from support.feeds import Entry, atom
from support.project import SEED, SEED_PRS

from pipeline.core.issue.collect import group_week, merge, parse_feed
from pipeline.core.issue.rank import TIERS, parse_verdict, rank, reading_minutes
from pipeline.week import parse_week

WEEK = parse_week("2026-W48", "Asia/Shanghai")
REPO = "vllm-project/vllm"


def seed_reviews() -> list[tuple[str, str]]:
    """(headline, paragraph) of each seed review, in order."""
    blocks = [b.strip() for b in SEED.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    assert blocks[0] == REPO
    pairs = list(zip(blocks[1::2], blocks[2::2], strict=True))
    assert len(pairs) == 8
    return pairs


def rank_entries(entries: list[Entry], feed_lang: str | None = "zh-CN"):
    result = parse_feed(atom(entries, feed_lang=feed_lang), "test", REPO)
    reviews, _ = merge([result])
    return rank(group_week(reviews, WEEK, REPO), WEEK.tz)


def test_the_seed_reviews_rank_seven_must_read_one_medium():
    entries = [
        Entry(pr=pr, title=title, body=body, published=f"2026-11-{23 + i % 6}T1{i}:00:00+08:00")
        for i, (pr, (title, body)) in enumerate(zip(SEED_PRS, seed_reviews(), strict=True))
    ]
    items, problems = rank_entries(entries)
    tiers = {item.pr: item.tier for item in items}
    assert tiers == {pr: ("medium" if pr == 54934 else "must-read") for pr in SEED_PRS}
    assert [item.tier for item in items] == ["must-read"] * 7 + ["medium"]
    scoped = {item.pr: item.scope_note for item in items if item.scope_note}
    assert scoped == {56671: "只需读 27 行中的 fixture 本体"}
    assert all(p.code != "unrated" for p in problems)


@pytest.mark.parametrize(
    ("text", "lang", "tier"),
    [
        ("值得精读，尤其适合…", "zh", "must-read"),
        ("必读。", "zh", "must-read"),
        ("值得中等优先级精读，尤其是…", "zh", "medium"),
        ("值得一读：…", "zh", "skim"),
        ("可略读；…", "zh", "skim"),
        ("选读", "zh", "skim"),
        ("不必精读，除非…", "zh", "skim"),
        ("不必读，除非…", "zh", "skim"),  # never "必读"
        ("  「值得精读」，…", "zh", "must-read"),
        ("结论：值得精读。", "zh", "must-read"),
        ("Must read, especially…", "en", "must-read"),
        ("MUST-READ: …", "en", "must-read"),
        ("Worth a medium-priority read, …", "en", "medium"),
        ("Medium priority.", "en", "medium"),
        ("Skim; …", "en", "skim"),
    ],
)
def test_verdict_phrases(text, lang, tier):
    verdict = parse_verdict(text, lang)
    assert verdict is not None and verdict.tier == tier


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("这个 PR 值得精读。", "zh"),  # not at the start of the clause
        ("重点看三处设计：值得精读", "zh"),  # after the first clause
        ("一个改动，值得精读", "zh"),
        ("不太必读", "zh"),
        ("Skimming the diff is enough.", "en"),
        ("This is a must read.", "en"),
        ("", "en"),
    ],
)
def test_no_verdict_outside_the_opening_clause(text, lang):
    assert parse_verdict(text, lang) is None


def test_scoped_verdict_keeps_its_tier_and_scope_in_both_languages():
    zh = parse_verdict("值得精读，但只需读 27 行中的 fixture 本体。关注三点…", "zh")
    en = parse_verdict("Must read, but only the 27 lines of the fixture itself. Focus…", "en")
    assert zh and zh.tier == "must-read" and zh.scope == "只需读 27 行中的 fixture 本体"
    assert en and en.tier == "must-read" and en.scope == "only the 27 lines of the fixture itself"


def test_unrated_comes_last_and_is_flagged():
    items, problems = rank_entries([
        Entry(pr=1, body="这是一个没有结论的评审。", published="2026-11-23T10:00:00+08:00"),
        Entry(pr=2, body="值得一读，小改动。", published="2026-11-24T10:00:00+08:00"),
    ])
    assert [(i.pr, i.tier) for i in items] == [(2, "skim"), (1, "unrated")]
    assert [(p.code, p.severity, p.pr) for p in problems] == [("unrated", "warning", 1)]


def test_priority_category_overrides_the_verdict():
    items, _ = rank_entries([
        Entry(pr=1, body="值得一读。", categories=["priority:must-read", "ROCm", "kv connector"]),
        Entry(pr=2, body="值得精读。", published="2026-11-25T10:00:00+08:00"),
    ])
    assert [(i.pr, i.tier) for i in items] == [(1, "must-read"), (2, "must-read")]
    assert items[0].areas == ("kv-connector", "rocm")
    assert "priority:must-read" in items[0].why.en


def test_unknown_priority_is_a_warning_and_ignored():
    items, problems = rank_entries([Entry(pr=1, body="值得一读。", categories=["priority:urgent"])])
    assert items[0].tier == "skim"
    assert [p.code for p in problems] == ["unknown-priority"]


def test_verdict_comes_from_the_original_language_and_conflicts_are_reported():
    items, problems = rank_entries([
        Entry(pr=1, lang="zh-CN", body="值得精读，……", published="2026-11-23T10:00:00+08:00"),
        Entry(pr=1, lang="en", body="Skim, …", published="2026-11-24T10:00:00+08:00",
              id="en-1"),
    ])
    assert items[0].tier == "must-read"
    assert items[0].original_lang == "zh"
    assert [(p.code, p.pr) for p in problems] == [("verdict-conflict", 1)]


def test_english_first_review_makes_english_the_original():
    items, problems = rank_entries([
        Entry(pr=1, lang="en", body="Skim, a small fix.", published="2026-11-23T10:00:00+08:00"),
        Entry(pr=1, lang="zh-CN", body="值得精读。", published="2026-11-24T10:00:00+08:00",
              id="zh-1"),
    ])
    assert items[0].tier == "skim" and items[0].original_lang == "en"
    assert problems[0].code == "verdict-conflict"


def test_order_inside_a_tier_is_first_review_then_pr_and_why_says_so():
    items, _ = rank_entries([
        Entry(pr=30, body="值得精读。", published="2026-11-25T10:00:00+08:00"),
        Entry(pr=20, body="值得精读。", published="2026-11-23T10:00:00+08:00"),
        Entry(pr=10, body="值得精读。", published="2026-11-25T10:00:00+08:00"),
        Entry(pr=40, body="值得中等优先级精读。", published="2026-11-22T16:00:00Z"),
    ])
    assert [i.pr for i in items] == [20, 10, 30, 40]
    assert "11 月 23 日 10:00" in items[0].why.zh
    assert "first review (Mon 23 Nov 10:00)" in items[0].why.en
    assert "值得精读" in items[0].why.zh and "must read" in items[0].why.en


def test_tiers_are_data_in_rank_order():
    assert [t.name for t in TIERS] == ["must-read", "medium", "skim", "unrated"]


def test_reading_minutes_per_language():
    assert reading_minutes("字" * 900, "zh") == 3
    assert reading_minutes("word " * 410, "en") == 3
    assert reading_minutes("", "en") == 1
