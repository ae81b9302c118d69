"""Ranking: verdicts found only where they belong, tiers, order, and the reason why."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from support.feeds import Entry, atom
from support.project import DATA, SEED_PRS, seed_reviews

from pipeline.core.issue.collect import group_week, merge, parse_feed
from pipeline.core.issue.rank import ordered, rank, reading_minutes
from pipeline.core.issue.verdict import Vocabulary, parse_verdict
from pipeline.core.shipped import templates_dir
from pipeline.errors import ConfigError
from pipeline.model import PullFacts
from pipeline.stages.build import load_vocabulary
from pipeline.week import parse_week

WEEK = parse_week("2026-W48", "Asia/Shanghai")
REPO = "vllm-project/vllm"
SHIPPED = (templates_dir() / "verdicts.toml").read_text(encoding="utf-8")


def rank_entries(entries: list[Entry], feed_lang: str | None = "zh-CN"):
    result = parse_feed(atom(entries, feed_lang=feed_lang), "test", REPO)
    reviews, _ = merge([result])
    return rank(group_week(reviews, WEEK, REPO))


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


def corpus() -> list[tuple[str, str, str]]:
    """(tier, lang, opening) of tests/data/verdict_openings.tsv."""
    rows = [line.split("\t") for line in (DATA / "verdict_openings.tsv").read_text(
        encoding="utf-8").splitlines() if line and not line.startswith("#")]
    return [(tier, lang, text) for tier, lang, text in rows]


def test_the_corpus_is_large_and_holds_every_tier_and_both_languages():
    rows = corpus()
    assert len(rows) >= 150
    assert {tier for tier, _, _ in rows} == {"must-read", "medium", "skim", "unrated"}
    assert {lang for _, lang, _ in rows} == {"zh", "en"}


@pytest.mark.parametrize(("tier", "lang", "text"), corpus(),
                         ids=[f"{i}-{t}-{lang}" for i, (t, lang, _) in enumerate(corpus())])
def test_each_opening_reads_as_a_careful_editor_reads_it(tier, lang, text):
    verdict = parse_verdict(text, lang)
    assert (verdict.tier if verdict else "unrated") == tier, verdict


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


@pytest.mark.parametrize(("first", "then", "tier"), [
    (Entry(lang="zh-CN", body="值得精读，……"), Entry(lang="en", body="Skim, …"), "must-read"),
    (Entry(lang="en", body="Skim, a small fix."), Entry(lang="zh-CN", body="值得精读。"), "skim"),
], ids=["zh-first", "en-first"])
def test_verdict_comes_from_the_first_reviews_language_and_conflicts_are_reported(first, then,
                                                                                   tier):
    items, problems = rank_entries([
        replace(first, pr=1, published="2026-11-23T10:00:00+08:00"),
        replace(then, pr=1, published="2026-11-24T10:00:00+08:00", id="second"),
    ])
    assert (items[0].tier, items[0].original_lang) == (tier, first.lang[:2])
    assert [(p.code, p.pr) for p in problems] == [("verdict-conflict", 1)]


def test_inside_a_tier_full_reads_come_first_then_the_longer_review_and_why_says_so():
    long = "值得精读。" + "细节" * 400
    items, problems = rank_entries([
        Entry(pr=10, body="值得精读，但只需读 `fixture` 的 27 行。"),
        Entry(pr=20, body="值得精读。小改动。"),
        Entry(pr=30, body="仅对维护 NIXL 的同学值得精读，其他人可略读。"),
        Entry(pr=40, body=long),
        Entry(pr=50, body="值得精读。"),
        Entry(pr=60, body="可略读。"),
    ])
    assert [(i.pr, i.tier, i.reading) for i in items] == [
        (40, "must-read", "full"), (20, "must-read", "full"), (50, "must-read", "full"),
        (10, "must-read", "scoped"), (60, "skim", "full"), (30, "skim", "conditional")]
    assert "评审篇幅从长到短（本篇约 2.7 分钟）" in items[0].why.zh
    assert "then the longer review first (this one: about 2.7 min)" in items[0].why.en
    assert [p.code for p in problems] == ["verdict-conditional", "mostly-must-read"]  # 4 of 6


def test_with_githubs_facts_the_bigger_change_comes_first():
    items, _ = rank_entries([Entry(pr=pr, body="值得精读。") for pr in (1, 2, 3)])
    sized = [replace(item, github=PullFacts("t", "a", "merged", None, added, 0, 1, (), ()))
             for item, added in zip(items, (5, 500, 50), strict=True)]
    again = ordered(sized)
    assert [i.pr for i in again] == [2, 3, 1]
    assert "本 PR 500 行，据 GitHub" in again[0].why.zh
    assert again[0].why.en.count("within the tier") == 1  # ordered twice, said once


def test_why_quotes_the_whole_clause_and_an_unrated_opening():
    items, problems = rank_entries([
        Entry(pr=1, body="值得精读的部分不多，只有 `block_pool.py` 的一处改动。"),
        Entry(pr=2, lang="en", body="**Verdict:** worth a careful read. The PR…", id="e2"),
        Entry(pr=3, body="本 PR 把 PLE 外层残差并入 Triton 内核，保持 BF16 舍入边界。"),
    ], feed_lang=None)
    by_pr = {item.pr: item for item in items}
    assert by_pr[2].tier == "must-read"
    assert "“Verdict: worth a careful read”" in by_pr[2].why.en
    assert by_pr[1].tier == "unrated"
    assert "「值得精读的部分不多，只有 `block_pool.py` 的一处改动」" in by_pr[1].why.zh
    assert "「本 PR 把 PLE 外层残差并入 Triton 内核，保持 BF16 舍入边界」" in by_pr[3].why.zh
    for item in items:  # the English never carries untranslated Chinese
        assert not re.search(r"[\u4e00-\u9fff]", item.why.en), item.why.en
    assert {p.pr for p in problems if p.code == "unrated"} == {1, 3}


def test_a_verdict_only_in_the_other_language_is_used_and_flagged():
    items, problems = rank_entries([
        Entry(pr=1, lang="zh-CN", body="本 PR 重写了调度器。",
              published="2026-11-23T10:00:00+08:00"),
        Entry(pr=1, lang="en", body="Worth a skim.", published="2026-11-24T10:00:00+08:00",
              id="en-1"),
    ])
    assert items[0].tier == "skim" and items[0].original_lang == "zh"
    assert [p.code for p in problems] == ["verdict-borrowed"]
    assert "（原文评审没有结论）" in items[0].why.zh


def test_reading_minutes_count_characters_and_words_alike():
    assert reading_minutes("字" * 900) == 3
    assert reading_minutes("word " * 410) == 3
    assert reading_minutes("字" * 150 + " word" * 100) == 1
    assert reading_minutes("") == 1


@pytest.mark.parametrize(("extra", "lang", "text", "shipped", "mine"), [
    ('[negations.zh]\n"未必精读" = "skim"', "zh", "未必精读，但值得中等优先级阅读。",
     ("medium", None), ("medium", None)),  # a negation's "but" still counts
    ('[tiers.skim]\nen = ["worth a look"]', "en", "Worth a look, small fix.",
     ("unrated", None), ("skim", None)),
    ('[ambiguous]\nen = ["must read"]', "en", "Must read, it moves the scheduler.",
     ("must-read", None), ("unrated", None)),
    ('[tiers.medium]\nzh = ["非必读"]', "zh", "非必读，但改动很小。",
     ("skim", None), ("medium", None)),
    ('[followers]\nen = ["tonight"]', "en", "Must read tonight, before the release.",
     ("unrated", None), ("must-read", None)),
    ('[modals]\nen_restricting = ["just"]', "en", "Just a must-read if you run ROCm.",
     ("must-read", None), ("skim", "if you run ROCm")),
], ids=["negation", "new phrase", "made ambiguous", "moved tier", "follower", "restricting"])
def test_an_operators_phrases_followers_and_restricting_words_count_as_shipped_ones(
        extra, lang, text, shipped, mine):
    """An operator's phrase is read, and one filed elsewhere than the shipped one moves."""
    def read(*vocabulary):
        verdict = parse_verdict(text, lang, *vocabulary)
        return (verdict.tier, verdict.condition) if verdict else ("unrated", None)

    assert read() == shipped
    assert read(Vocabulary.from_toml(SHIPPED, extra)) == mine


def test_an_operators_vocabulary_adds_phrases_and_a_bad_one_is_a_config_error(settings,
                                                                            tmp_path):
    extra = tmp_path / "verdicts.toml"
    extra.write_text('[tiers.skim]\nzh = ["稍后再看"]\n\n[ambiguous]\nen = ["must read"]\n',
                     encoding="utf-8")
    mine = replace(settings, issue=replace(settings.issue, verdicts=str(extra)))
    words = load_vocabulary(mine)
    added, shipped = parse_verdict("稍后再看，周末有空再说。", "zh", words), parse_verdict(
        "值得精读。", "zh", words)
    assert added and added.tier == "skim"
    assert shipped and shipped.tier == "must-read"  # the shipped phrases stay
    assert parse_verdict("稍后再看。", "zh") is None  # not added to anyone else's
    for text, said in [('[tiers.urgent]\nzh = ["x"]', "[tiers.urgent] is no tier"),
                       ("[labels]\nzh = {a = 1}", "labels.zh must be a list of phrases"),
                       ("[tiers.skim", "at the end of a table declaration")]:
        extra.write_text(text, encoding="utf-8")
        with pytest.raises(ConfigError, match=re.escape(said)):
            load_vocabulary(mine)
    extra.unlink()
    with pytest.raises(ConfigError, match="cannot read"):
        load_vocabulary(mine)


#: Where the grammar reads an outside writer's line otherwise, and the rule that decides it.
OUTSIDE_DISAGREEMENTS = {
    "Worth a read, though not urgent": "worth a read is ambiguous: unrated, never wrong",
    "值得一读但不必逐行": "值得一读 is a skim (DESIGN), and 不必逐行 only lowers it",
    "Must-read for anyone deploying on Blackwell": "a split verdict ranks by what it says for "
                                                    "everyone else (issue 40)",
}


def test_openings_written_by_outsiders_read_as_they_meant_them():
    rows = [line.split("\t") for line in (DATA / "verdict_outside.tsv").read_text(
        encoding="utf-8").splitlines() if line and not line.startswith("#")]
    assert len(rows) >= 140
    differ = []
    for tier, lang, text in rows:
        verdict = parse_verdict(text, "zh" if lang == "zh" else "en")
        if (verdict.tier if verdict else "unrated") != tier:
            differ.append(text)
    assert [text for text in differ
            if not any(text.startswith(known) or known in text[:80]
                       for known in OUTSIDE_DISAGREEMENTS)] == []
    assert len(differ) <= 4  # 97 % as written


def test_the_week_is_questioned_when_one_tier_holds_most_or_many_are_unrated():
    def codes(bodies):
        _, problems = rank_entries([Entry(pr=i + 1, body=b) for i, b in enumerate(bodies)])
        return [p.code for p in problems if p.pr is None]

    assert codes(["值得精读。"] * 3 + ["可略读。"] * 2) == ["mostly-must-read"]  # 3 of 5
    assert codes(["值得精读。"] * 2 + ["可略读。"] * 2) == []  # half is not most
    assert codes(["值得精读。"] * 3) == []  # too few to say
    assert codes(["本 PR 重写了调度器。"] + ["可略读。"] * 3) == ["many-unrated"]  # 1 of 4
    assert codes(["本 PR 重写了调度器。"] + ["可略读。"] * 4) == []


@pytest.mark.parametrize(("text", "lang", "scope"), [
    ("值得精读，但只需读 27 行中的 fixture 本体。关注三点…", "zh", "只需读 27 行中的 fixture 本体"),
    ("Must read, but only the 27 lines of the fixture itself. Focus…", "en",
     "only the 27 lines of the fixture itself"),
    ("值得精读，但只需看 `block_pool.py` 中的两处改动。关注三点…", "zh",
     "只需看 `block_pool.py` 中的两处改动"),
    ("值得精读（但只需看 `vllm/v1/core/sched/scheduler.py`）。其余是样板。", "zh",
     "只需看 `vllm/v1/core/sched/scheduler.py`"),
    ("Must read, but only `vllm/v1/core/block_pool.py`. The rest is plumbing.", "en",
     "only `vllm/v1/core/block_pool.py`"),
    ("Worth a close read — but only the two hunks in `kv_cache.py`; skip the tests.", "en",
     "only the two hunks in `kv_cache.py`"),
])
def test_a_scope_keeps_its_tier_and_code_spans_and_may_sit_in_brackets(text, lang, scope):
    verdict = parse_verdict(text, lang)
    assert verdict is not None and verdict.tier == "must-read" and verdict.scope == scope
