"""Collect: feed bytes → reviews, and a week's reviews → one group per PR (the input
contract of docs/architecture.md). The feeds under tests/data/ are written by hand, as real
feeds are."""

from __future__ import annotations

import json
import re
import time

import feedparser  # type: ignore[import-untyped]
import pytest
from support.feeds import Entry, atom, raw_atom
from support.project import DATA
from test_week import utc

from pipeline.core.assemble import assemble
from pipeline.core.issue.collect import (
    FeedResult,
    group_week,
    merge,
    parse_feed,
    skipped_in_week,
)
from pipeline.core.issue.feed_date import date_problem
from pipeline.core.issue.sanitize import detect_lang
from pipeline.errors import FeedError
from pipeline.model import Skipped
from pipeline.stages.build import build, rank_week, terms
from pipeline.week import parse_week

REPO = "vllm-project/vllm"
W48 = parse_week("2026-W48", "Asia/Shanghai")
W47 = parse_week("2026-W47", "Asia/Shanghai")
TAG_ID = "tag:reviews.vllm-pr-weekly.example,2026:github.com/vllm-project/vllm/pull/57010"


def read(name: str) -> FeedResult:
    path = DATA / name
    return parse_feed(path.read_bytes(), str(path), REPO)


def parse(entries: list[Entry], **kw) -> FeedResult:
    return parse_feed(atom(entries, **kw), "test.atom", REPO)


def one_review(entry: Entry, **kw):
    result = parse([entry], **kw)
    assert result.rejected == ()
    (review,) = result.reviews
    return review


def one_rejection(entry: Entry, **kw):
    result = parse([entry], **kw)
    assert result.reviews == ()
    (rejected,) = result.rejected
    return rejected


def groups_of(*results: FeedResult, week=W48):
    reviews, _ = merge(results)
    return {g.pr: g for g in group_week(reviews, week, REPO)}


# --- RSS 2.0: rss-mixed.xml ------------------------------------------------------------

RSS_TIMES = {
    57001: utc(2026, 11, 23, 19, 30),      # Mon 10:00 -0930
    57002: utc(2026, 11, 24, 2, 30),       # Tue 08:15 +0545
    57003: utc(2026, 11, 25, 14, 0),       # Thu 04:00 +1400
    57004: utc(2026, 11, 27, 12, 0),       # Fri 12:00 GMT
    57005: utc(2026, 11, 22, 15, 59, 59),  # one second before the week
    57006: utc(2026, 11, 22, 16, 0),       # Mon 00:00 +0800: the week's first instant
    57008: utc(2026, 11, 28, 13, 0),
    57009: utc(2026, 11, 29, 15, 59, 59),  # the week's last second
    57011: utc(2026, 11, 29, 16, 0),       # the next week's first instant
}


def test_rss_pubdates_with_odd_offsets_become_the_same_utc_instants_in_any_machine_zone(
        monkeypatch):
    parsed = {}
    try:
        for zone in ("UTC", "America/Los_Angeles"):
            monkeypatch.setenv("TZ", zone)
            time.tzset()
            parsed[zone] = read("rss-mixed.xml"), read("duplicates.atom")
        assert time.timezone != 0  # the zone change took effect
    finally:
        monkeypatch.undo()
        time.tzset()
    assert parsed["America/Los_Angeles"] == parsed["UTC"]
    rss, duplicates = parsed["UTC"]
    assert {r.pr: r.published for r in rss.reviews} == RSS_TIMES
    published = [r.published for r in duplicates.reviews if r.published is not None]
    assert len(published) == len(duplicates.reviews)
    assert min(published) == utc(2026, 11, 20, 2)


def test_rss_channel_language_zh_cn_is_normalised_and_an_item_dc_language_wins():
    result = read("rss-mixed.xml")
    langs = {r.pr: r.lang for r in result.reviews}
    assert langs.pop(57009) == "en"
    assert set(langs.values()) == {"zh"}
    (english,) = [r for r in result.reviews if r.pr == 57009]
    assert english.title == "Structured output: grammar compilation moves off the hot path"


def test_rss_escaped_html_is_sanitized_html_and_a_pr_cited_in_it_is_not_the_subject():
    result = read("rss-mixed.xml")
    (review,) = [r for r in result.reviews if r.pr == 57001]
    assert review.body_html == ("<p>值得精读。抢占时不再释放 <code>prefix_cache</code> 命中的块，"
                                "重算开销下降 <strong>12.99%</strong>。</p>")
    prs = [r.pr for r in result.reviews]
    assert 56000 not in prs
    assert 55999 not in prs
    (review,) = [r for r in result.reviews if r.link.endswith("/pull/57008")]
    assert review.pr == 57008
    assert "https://github.com/vllm-project/vllm/pull/56000" in review.body_html


def test_rss_guid_that_looks_like_a_pr_is_not_a_link():
    # feedparser hands the guid back as entry.link; the PR must not be taken from it.
    entries = feedparser.parse((DATA / "rss-mixed.xml").read_bytes()).entries
    (entry,) = [e for e in entries if e.get("id") == TAG_ID]
    assert entry.link == TAG_ID  # the trap is really there
    result = read("rss-mixed.xml")
    assert 57010 not in [r.pr for r in result.reviews]
    (rejected,) = [r for r in result.rejected if r.skipped.id == TAG_ID]
    assert (rejected.skipped.link, rejected.skipped.reason) == ("", "entry has no link")


def test_rss_rejections_carry_a_reason_and_skipped_lists_the_weeks_and_undated_ones_only():
    result = read("rss-mixed.xml")
    reasons = {r.skipped.link or r.skipped.id: r.skipped.reason for r in result.rejected}
    assert reasons == {
        "https://github.com/sgl-project/sglang/pull/9001":
            "pull request of another repository (sgl-project/sglang)",
        "https://github.com/vllm-project/vllm/issues/57100": "link is not a pull request",
        "https://github.com/vllm-project/vllm/issues/56990": "link is not a pull request",
        "https://github.com/vllm-project/vllm/pull/57007": "entry has no parseable date",
        TAG_ID: "entry has no link",
    }
    _, rejected = merge([result])
    skipped = skipped_in_week(rejected, W48)
    assert sorted(s.link or s.id for s in skipped) == sorted([
        "https://github.com/sgl-project/sglang/pull/9001",
        "https://github.com/vllm-project/vllm/issues/57100",
        "https://github.com/vllm-project/vllm/pull/57007",
        TAG_ID,
    ])


def test_rss_week_holds_the_first_instant_and_not_the_end():
    groups = groups_of(read("rss-mixed.xml"))
    assert sorted(groups) == [57001, 57002, 57003, 57004, 57006, 57008, 57009]


# --- Language ----------------------------------------------------------------------------

@pytest.mark.parametrize(("entry", "feed_lang", "lang"), [
    (Entry(lang="en", title="Fix", body="Must read."), "zh-CN", "en"),  # the entry's wins
    (Entry(title="Fix", body="Must read."), "zh-CN", "zh"),  # else the feed's
    *((Entry(lang=tag, title="Fix", body="Must read."), "en", "zh")
      for tag in ["zh-cn", "zh-CN", "zh_Hans", "ZH-Hans-CN", "zh"]),
    *((Entry(lang=tag), "zh-CN", "en") for tag in ["en-US", "EN", "en_GB"]),
    # No tag at all: the script says it.
    (Entry(title="调度器修复", body="值得精读。`Scheduler` 的抢占路径。"), None, "zh"),
    (Entry(title="Scheduler fix", body="Must read. 12.99% faster."), None, "en"),
])
def test_the_language_is_the_entrys_else_the_feeds_else_its_scripts(entry, feed_lang, lang):
    assert one_review(entry, feed_lang=feed_lang).lang == lang


def test_xml_lang_on_the_content_wins_over_the_entry():
    data = raw_atom(
        '<entry xml:lang="zh-CN"><id>tag:t,2026:1</id><title>Fix</title>'
        '<link rel="alternate" href="https://github.com/vllm-project/vllm/pull/1"/>'
        "<published>2026-11-24T10:00:00+08:00</published>"
        '<content type="text" xml:lang="en">Must read.</content></entry>')
    (review,) = parse_feed(data, "t", REPO).reviews
    assert review.lang == "en"


@pytest.mark.parametrize(("text", "lang"), [
    ("值得精读，尤其是把并发测试作为规范参考。", "zh"),
    ("Must read, especially the concurrency tests.", "en"),
    ("值得精读：`threading.Event` + timeout 断言区分被锁挡住与功能正确", "zh"),
    ("Must read: the 调度器 path", "en"),
    ("𠮷𩸽 ok", "zh"),  # ideographs beyond the BMP count as Han
    ("", "en"),
    ("12.99% +4.6%", "en"),
])
def test_detect_lang(text, lang):
    assert detect_lang(text) == lang


# --- Links -------------------------------------------------------------------------------

@pytest.mark.parametrize("link", [
    "https://github.com/vllm-project/vllm/pull/57001",
    "https://github.com/vllm-project/vllm/pull/57001/",
    "https://github.com/vllm-project/vllm/pull/57001/files",
    "https://github.com/vllm-project/vllm/pull/57001#issuecomment-1",
    "https://www.github.com/vllm-project/vllm/pull/57001",
    "https://github.com/VLLM-Project/vLLM/pull/57001",
])
def test_pr_links_that_are_accepted(link):
    assert one_review(Entry(link=link)).pr == 57001


@pytest.mark.parametrize(("link", "reason"), [
    ("https://github.com/vllm-project/vllm/issues/57001", "link is not a pull request"),
    ("https://github.com/vllm-project/vllm/pull/57001/../../issues/1",
     "link is not a pull request"),
    ("https://evil.example/?next=https://github.com/vllm-project/vllm/pull/57001",
     "link is not a pull request"),
    ("https://github.com.evil.example/vllm-project/vllm/pull/57001",
     "link is not a pull request"),
    ("https://github.com/sgl-project/sglang/pull/57001",
     "pull request of another repository (sgl-project/sglang)"),
    ("https://github.com/vllm-project/vllm-ascend/pull/57001",
     "pull request of another repository (vllm-project/vllm-ascend)"),
])
def test_links_that_are_rejected(link, reason):
    rejected = one_rejection(Entry(link=link))
    assert (rejected.skipped.link, rejected.skipped.reason) == (link, reason)


def test_entry_without_link_is_rejected_even_if_its_id_is_a_pr_url():
    pr_url = "https://github.com/vllm-project/vllm/pull/57010"
    rejected = one_rejection(Entry(pr=None, id=pr_url))
    assert rejected.skipped == Skipped(pr_url, "", "标题", "entry has no link")


@pytest.mark.parametrize("alternate", [True, False])
def test_the_pr_is_read_from_the_alternate_link_only(alternate):
    link = '<link rel="alternate" href="https://github.com/vllm-project/vllm/pull/57001"/>'
    data = raw_atom(
        "<entry><id>tag:t,2026:1</id><title>t</title>"
        '<link rel="related" href="https://github.com/vllm-project/vllm/pull/56000"/>'
        f"{link if alternate else ''}<published>2026-11-24T10:00:00+08:00</published>"
        '<content type="text">值得精读。</content></entry>')
    result = parse_feed(data, "t", REPO)
    assert [r.pr for r in result.reviews] == ([57001] if alternate else [])
    assert [r.skipped.reason for r in result.rejected] == ([] if alternate
                                                           else ["entry has no link"])


# --- Text and dates ----------------------------------------------------------------------

@pytest.mark.parametrize(("entry", "reason", "when"), [
    (Entry(body="  "), "entry has no review text", utc(2026, 11, 24, 2)),
    (Entry(body="<script>alert(1)</script>", content_type="html"), "entry has no review text",
     utc(2026, 11, 24, 2)),
    (Entry(published=None), "entry has no parseable date", None),
    (Entry(published="next Tuesday"), "entry has no parseable date", None),
    (Entry(lang="fr", title="Correctif", body="À lire."),
     "language 'fr' is neither Chinese nor English", utc(2026, 11, 24, 2)),
])
def test_an_entry_without_text_or_date_or_in_another_language_is_rejected(entry, reason, when):
    rejected = one_rejection(entry)
    assert (rejected.skipped.reason, rejected.when) == (reason, when)


def test_atom_entry_with_only_updated_uses_it():
    review = one_review(Entry(published=None, updated="2026-11-24T10:00:00+08:00"))
    assert (review.published, review.updated) == (None, utc(2026, 11, 24, 2))
    assert review.first_seen == utc(2026, 11, 24, 2)


def test_plain_text_content_becomes_paragraphs_with_escaped_code():
    review = one_review(Entry(body="值得精读。看 `a < b && c > d` 的分支。\n\n第二段。"))
    assert review.body_html == ("<p>值得精读。看 <code>a &lt; b &amp;&amp; c &gt; d</code> 的分支。"
                                "</p><p>第二段。</p>")


# --- Skipped -----------------------------------------------------------------------------

ISSUE_9 = "https://github.com/vllm-project/vllm/issues/9"


@pytest.mark.parametrize(("entry", "reasons"), [
    (Entry(link=ISSUE_9, published="2026-11-24T10:00:00+08:00"), ["link is not a pull request"]),
    (Entry(pr=None, published=None), ["entry has no link"]),  # no time: always listed
    (Entry(link=ISSUE_9, published="2026-11-22T23:59:59+08:00"), []),
    (Entry(link=ISSUE_9, published="2026-11-30T00:00:00+08:00"), []),
])
def test_skipped_lists_the_weeks_rejections_and_undated_ones(entry, reasons):
    result = parse([entry])
    assert [s.reason for s in skipped_in_week(result.rejected, W48)] == reasons


# --- Week boundaries ---------------------------------------------------------------------

@pytest.mark.parametrize(("published", "inside"), [
    ("2026-11-22T23:59:59+08:00", False),
    ("2026-11-23T00:00:00+08:00", True),   # exactly the start
    ("2026-11-22T16:00:00Z", True),        # the same instant, in UTC
    ("2026-11-29T23:59:59+08:00", True),
    ("2026-11-30T00:00:00+08:00", False),  # exactly the end
])
def test_week_start_is_inclusive_and_end_exclusive(published, inside):
    assert (1 in groups_of(parse([Entry(pr=1, published=published)]))) is inside


# --- Grouping: latest per language, first review decides the week --------------------

def test_the_latest_is_decided_by_updated_else_published_and_the_first_review_decides_the_week():
    by_published = groups_of(parse([
        Entry(pr=1, body="可略读。旧。", published="2026-11-24T10:00:00+08:00"),
        Entry(pr=1, body="值得精读。新。", published="2026-11-25T10:00:00+08:00"),
    ]))
    assert by_published[1].latest["zh"].body_html == "<p>值得精读。新。</p>"
    groups = groups_of(parse([
        Entry(pr=1, body="值得精读。改过。", published="2026-11-24T10:00:00+08:00",
              updated="2026-11-27T10:00:00+08:00"),
        Entry(pr=1, body="可略读。后发未改。", published="2026-11-26T10:00:00+08:00"),
    ]))
    assert groups[1].latest["zh"].body_html == "<p>值得精读。改过。</p>"
    assert groups[1].first_reviewed == utc(2026, 11, 24, 2)


def test_languages_of_one_pr_merge_into_one_group():
    groups = groups_of(parse([
        Entry(pr=1, lang="zh-CN", published="2026-11-24T10:00:00+08:00"),
        Entry(pr=1, lang="en", title="Fix", body="Must read.",
              published="2026-11-23T10:00:00+08:00"),
    ]))
    assert list(groups) == [1]
    assert sorted(groups[1].latest) == ["en", "zh"]
    assert groups[1].original_lang == "en"
    assert groups[1].url == "https://github.com/vllm-project/vllm/pull/1"


def test_groups_are_ordered_by_first_review_then_pr():
    result = parse([
        Entry(pr=3, published="2026-11-25T10:00:00+08:00"),
        Entry(pr=2, published="2026-11-24T10:00:00+08:00"),
        Entry(pr=1, published="2026-11-25T10:00:00+08:00"),
    ])
    reviews, _ = merge([result])
    assert [g.pr for g in group_week(reviews, W48, REPO)] == [2, 1, 3]


# --- duplicates.atom ---------------------------------------------------------------------

def test_same_entry_id_newest_wins_whatever_the_order_and_is_not_reported():
    newer = Entry(pr=1, id="tag:t,2026:x", body="值得精读。新。",
                  published="2026-11-24T10:00:00+08:00", updated="2026-11-25T10:00:00+08:00")
    older = Entry(pr=1, id="tag:t,2026:x", body="可略读。旧。",
                  published="2026-11-24T10:00:00+08:00")
    for order in ([newer, older], [older, newer]):
        reviews, rejected = merge([parse([entry]) for entry in order])
        assert [r.body_html for r in reviews] == ["<p>值得精读。新。</p>"]
        assert rejected == []


def test_the_same_feed_read_twice_counts_each_entry_once():
    once = read("rss-mixed.xml")
    reviews, rejected = merge([once, read("rss-mixed.xml")])
    assert len(reviews) == len(once.reviews)
    assert len(rejected) == len(once.rejected)


def test_an_entry_id_first_rejected_then_fixed_is_not_skipped():
    draft = Entry(pr=1, id="tag:t,2026:x", body="", published="2026-11-24T10:00:00+08:00")
    fixed = Entry(pr=1, id="tag:t,2026:x", body="值得精读。补上了正文。",
                  published="2026-11-24T10:00:00+08:00", updated="2026-11-25T10:00:00+08:00")
    reviews, rejected = merge([parse([draft, fixed])])
    assert [r.entry_id for r in reviews] == ["tag:t,2026:x"]
    assert skipped_in_week(rejected, W48) == []


def test_duplicates_atom_the_latest_review_and_version_win_and_last_weeks_pr_stays_there():
    result = read("duplicates.atom")
    groups = groups_of(result)
    assert sorted(groups) == [57701, 57702, 57703]  # 57704 was first reviewed last week
    assert groups[57702].latest["zh"].title == "量化权重加载提速"
    assert groups[57702].first_reviewed == utc(2026, 11, 24, 4)
    latest = groups[57703].latest
    assert sorted(latest) == ["en", "zh"]
    assert latest["en"].published == utc(2026, 11, 30, 12)
    assert latest["en"].published not in W48
    reviews, rejected = merge([result])
    assert skipped_in_week(rejected, W48) == []
    (same,) = [r for r in reviews if r.pr == 57701]  # one entry id twice: its newest version
    assert same.title == "CPU 后端的 NUMA 绑核（修订）"
    assert same.updated == utc(2026, 11, 25, 1)


def test_a_pr_first_reviewed_last_week_belongs_to_last_week_with_its_new_review():
    group = groups_of(read("duplicates.atom"), week=W47)[57704]
    assert group.first_reviewed == utc(2026, 11, 20, 2)
    assert sorted(group.latest) == ["en", "zh"]


# --- Documents that are no usable feed -----------------------------------------------------

def test_truncated_feed_is_refused_although_entries_were_recovered():
    data = (DATA / "truncated.atom").read_bytes()
    assert len(feedparser.parse(data).entries) >= 1  # feedparser did recover some
    with pytest.raises(FeedError, match="not well-formed XML"):
        parse_feed(data, "truncated.atom", REPO)


@pytest.mark.parametrize(("data", "said"), [
    (b"", "is empty"),
    (b"  \n\t", "is empty"),
    ((DATA / "not-a-feed.html").read_bytes(), r"not well-formed XML|is not an RSS or Atom feed"),
    (b"<html><head><title>GitHub</title></head><body><p>hi</p></body></html>",
     "is not an RSS or Atom feed"),
])
def test_a_document_that_is_no_feed_is_refused(data, said):
    with pytest.raises(FeedError, match=said):
        parse_feed(data, "doc", REPO)


def test_feed_error_names_the_location_and_line():
    with pytest.raises(FeedError) as caught:
        parse_feed((DATA / "truncated.atom").read_bytes(), "truncated.atom", REPO)
    assert caught.value.url == "truncated.atom"
    assert re.search(r"line \d+, column \d+", str(caught.value))


# --- wrong-encoding.xml ----------------------------------------------------------------------

def test_wrong_declared_encoding_from_a_file_is_read_correctly():
    result = read("wrong-encoding.xml")
    assert [(r.pr, r.title, r.lang) for r in result.reviews] == [
        (57401, "分块预填充的调度顺序修正", "zh"),
        (57402, "Triton 注意力核的边界检查", "zh"),
    ]
    assert result.reviews[0].body_html == "值得精读。分块预填充的请求不再排在解码请求之前。"


def test_wrong_declared_encoding_over_http_is_a_warning_problem_not_a_failure(settings):
    """Served as text/xml without charset, RFC 3023 says us-ascii; the bytes disagree."""
    data = (DATA / "wrong-encoding.xml").read_bytes()
    result = parse_feed(data, "legacy", REPO, content_type="text/xml")
    (warning,) = result.warnings
    assert warning.startswith("feed legacy: document declared as us-ascii")
    assert [r.title for r in result.reviews] == [
        "分块预填充的调度顺序修正", "Triton 注意力核的边界检查"]
    _, issue_data, _, _ = assemble(terms(settings), W48, rank_week(settings, W48, [result]))
    warnings = [p for p in issue_data["problems"] if p["code"] == "feed-warning"]
    assert len(warnings) == 1
    assert warnings[0]["severity"] == "warning"
    assert "declared as us-ascii" in warnings[0]["message"]
    assert [item["pr"] for item in issue_data["items"]] == [57401, 57402]


# --- atom-hostile.atom, end to end ---------------------------------------------------------

HOSTILE = ["<script", "onerror", "javascript:", "<iframe", "onload", "<svg", "<form",
           "data:text/html", "onmouseover", "<object", "<style>body", "<input"]


@pytest.fixture
def hostile_build(settings):
    return build(settings, week_id="2026-W48", feeds=[str(DATA / "atom-hostile.atom")])


@pytest.mark.parametrize("needle", HOSTILE)
def test_no_hostile_markup_reaches_any_output(hostile_build, needle):
    files = {p.name: p.read_text(encoding="utf-8") for p in hostile_build.out_dir.iterdir()}
    assert {name for name in files if name.startswith("email-")} == {
        f"email-{layout}.{ext}" for layout in ("zh-en", "en-zh", "zh", "en")
        for ext in ("html", "txt")}
    assert "issue.json" in files
    for name, text in files.items():
        assert needle not in text.lower(), f"{needle!r} in {name}"


def test_hostile_items_build_with_one_line_titles_and_subjects(hostile_build):
    data = json.loads((hostile_build.out_dir / "issue.json").read_text(encoding="utf-8"))
    assert sorted(item["pr"] for item in data["items"]) == [57301, 57302]
    assert len(data["subject"]) == 4
    titles = [item[lang]["title"] for item in data["items"] for lang in ("zh", "en")
              if item[lang]]
    for line in [*data["subject"].values(), *titles]:
        assert "\r" not in line and "\n" not in line, line
    (item,) = [i for i in data["items"] if i["pr"] == 57301]
    assert item["zh"]["title"] == "调度器抢占修复 Bcc: victim@example.org"


def test_legitimate_markup_survives_and_refused_links_keep_their_text(hostile_build):
    html = (hostile_build.out_dir / "email-zh-en.html").read_text(encoding="utf-8")
    assert "<code>Scheduler._preempt</code>" in html
    assert "<code>cudaMemcpyAsync</code>" in html  # from the xhtml entry
    assert "<em>重算开销</em>" in html
    assert ('<a href="https://github.com/vllm-project/vllm/blob/main/vllm/v1/core/sched/'
            'scheduler.py"') in html
    assert '<a href="https://github.com/vllm-project/vllm/pull/57301/files"' in html
    text = (hostile_build.out_dir / "email-zh.txt").read_text(encoding="utf-8")
    assert "点这里 或这里 或者这里" in text


# --- hostile input: PR numbers, dates, ids, invisible characters ---------------

@pytest.mark.parametrize(("field", "raw", "words"), [
    ("published", "2026-11-24T99:00:00+08:00", "hour must be in 0..23"),
    ("published", "2026-02-30T10:00:00+08:00", "day is out of range for month"),
    ("published", "2026-11-24T24:00:00Z", "hour must be in 0..23"),
    ("published", "2026-11-24T10:61:00Z", "minute must be in 0..59"),
    ("published", "2026-13-01T10:00:00Z", "month must be in 1..12"),
    ("published", "2026-11-24T10:00:00+25:00", "impossible time-zone offset"),
    ("updated", "2026-11-31T10:00:00+08:00", "day is out of range for month"),
])
def test_a_date_feedparser_would_normalise_is_skipped_with_a_reason(field, raw, words):
    rejected = one_rejection(Entry(**{field: raw}))
    assert rejected.skipped.reason.startswith(f"{field} date {raw!r}")
    assert words in rejected.skipped.reason
    assert rejected.when is None  # listed whatever the week: its week is unknown


@pytest.mark.parametrize("pub_date", ["Mon, 30 Feb 2026 10:00:00 GMT",
                                      "Tue, 24 Nov 2026 25:00:00 +0800",
                                      "Tue, 31 Nov 2026 10:00:00 +0800"])
def test_an_invalid_rss_pubdate_is_skipped(pub_date):
    """RSS ``pubDate`` (RFC 822) is checked as strictly as Atom's RFC 3339."""
    data = (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>t'
            f"</title><language>zh-cn</language><item><title>标题</title>"
            f"<link>https://github.com/vllm-project/vllm/pull/7</link><pubDate>{pub_date}"
            f"</pubDate><description>值得精读。</description></item></channel></rss>").encode()
    result = parse_feed(data, "t.rss", REPO)
    assert result.reviews == ()
    (rejected,) = result.rejected
    # feedparser itself refuses some of these; either way, skipped with a reason.
    assert rejected.skipped.reason in ("entry has no parseable date",) or (
        "is not a real date" in rejected.skipped.reason)


@pytest.mark.parametrize("raw", [
    "2026-11-24T10:00:00+08:00", "2026-11-24T10:00:00.123Z", "2026-11-24 10:00:00+0800",
    "2026-11-24T10:00Z", "2026-11-24", "2026-12-31T23:59:60Z",
    "Tue, 24 Nov 2026 10:00:00 +0800", "24 Nov 2026 10:00 GMT", "Tue, 24 Nov 26 10:00:00 EST",
    "Sun, 22 Nov 2026 15:59:59 GMT", "Mon, 23 Nov 2026 10:00:00 -0930",
])
def test_real_dates_in_the_formats_feeds_use_pass_the_strict_check(raw):
    assert date_problem(raw) is None


@pytest.mark.parametrize("raw", ["2026-11-24T10:00:00+08:00 junk", "2026/11/24 10:00",
                                 "2026-1\u0661-24T10:00:00Z", "24 Foo 2026 10:00:00 GMT"])
def test_other_date_shapes_are_refused_with_a_reason(raw):
    assert date_problem(raw)


def test_an_entry_id_used_for_two_prs_keeps_the_newest_and_reports_the_other():
    older = Entry(pr=11, id="tag:t,2026:same", title="旧", published="2026-11-24T10:00:00+08:00")
    newer = Entry(pr=12, id="tag:t,2026:same", title="新", published="2026-11-25T10:00:00+08:00")
    for order in ([older, newer], [newer, older]):
        reviews, rejected = merge([parse(order)])
        assert [r.pr for r in reviews] == [12]
        (skipped,) = skipped_in_week(rejected, W48)
        assert (skipped.id, skipped.title) == ("tag:t,2026:same", "旧")
        assert skipped.link.endswith("/pull/11")
        assert "PR #12" in skipped.reason and "PR #11" in skipped.reason


def test_categories_are_kept_as_given_and_bidi_and_invisible_characters_leave_them():
    review = one_review(Entry(title="Fix \u202eSECURITY ALERT\u202c\u200b now\ufeff",
                              body="值得精读\u2067。\u200d内容",
                              categories=["priority:skim", "area:\u202ecuda", "scheduler"]))
    assert review.title == "Fix SECURITY ALERT now"
    assert review.body_html == "<p>值得精读。内容</p>"
    assert review.categories == ("priority:skim", "area:cuda", "scheduler")


@pytest.mark.parametrize("body", ["path", "file-url"])
def test_a_feed_whose_body_names_a_local_file_is_read_as_itself_never_the_file(body, tmp_path):
    """feedparser opens a string that looks like a path or URL: a feed must never read our files."""
    secret = tmp_path / "local.atom"
    secret.write_bytes(atom([Entry(pr=1, body="值得精读。", title="local file's review")]))
    data = (str(secret) if body == "path" else secret.as_uri()).encode()
    with pytest.raises(FeedError):
        parse_feed(data, "https://feeds.example.org/reviews.atom", "vllm-project/vllm")
